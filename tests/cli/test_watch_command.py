"""``synapse-retriever watch PATH STORE`` as a command (``cli/watch_command.py``): what it refuses
before it starts. The command watching a real git tree, stopped by a signal, is tested with
the watch itself in ``tests/capture/test_watch.py``."""

from __future__ import annotations

from pathlib import Path

import pytest

from synapse_retriever.cli import main


def test_synapse_watch_refuses_a_missing_folder(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    store = str(tmp_path / "s.db")
    assert main(["watch", str(tmp_path / "nowhere"), store]) == 2
    assert main(["watch", str(tmp_path), store, "--quiet-s", "0"]) == 2
    assert main(["watch", str(tmp_path), store, "--quiet-s", "inf"]) == 2
    assert capsys.readouterr().err.splitlines() == [
        f"synapse-retriever: error: no folder to watch at {str(tmp_path / 'nowhere')!r}",
        "synapse-retriever: error: --quiet-s must be a number of seconds > 0, got 0.0",
        "synapse-retriever: error: --quiet-s must be a number of seconds > 0, got inf",
    ]
    assert not Path(store).exists()  # refused before the store is opened


def test_synapse_watch_refuses_a_store_that_is_a_loop_of_links_in_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # Path.resolve() raised RuntimeError on the loop (Python 3.11): a traceback, exit 1
    (tmp_path / "tree").mkdir()
    for store in (tmp_path / "loop1.db", tmp_path / "tree" / "loop1.db"):  # beside it, in it
        store.symlink_to(store.with_name("loop2.db"))
        store.with_name("loop2.db").symlink_to(store)
        assert main(["watch", str(tmp_path / "tree"), str(store)]) == 2
        err = capsys.readouterr().err
        assert (
            err == f"synapse-retriever: error: cannot open {str(store)!r}: unable to open "
            "database file\n"
        ), err
        assert store.is_symlink() and store.with_name("loop2.db").is_symlink()


def test_a_store_named_by_a_file_uri_in_the_tree_leaves_its_own_files_out(
    tmp_path: Path,
) -> None:
    # the URI's literal text was compared with the tree: the store's files were not known
    # as its own, and an empty -wal (a checkpoint's TRUNCATE leaves one) is text: it was
    # learned as a node, co-used with the files saved beside it
    from urllib.parse import quote

    from synapse_retriever.capture.watch import ignored
    from synapse_retriever.cli.watch_command import own_files

    (tmp_path / "my notes").mkdir()
    store = tmp_path / "my notes" / "s.db"
    (tmp_path / "my notes" / "s.db-wal").write_bytes(b"")
    (tmp_path / "c.py").write_text("c = 1\n")
    own = {f"my notes/s.db{suffix}" for suffix in ("", "-wal", "-shm", "-journal")}
    for named in (str(store), f"file:{quote(str(store))}?mode=rwc", f"file://{quote(str(store))}"):
        assert own_files(named, tmp_path) == own, named
        assert ignored(tmp_path, ["my notes/s.db-wal", "c.py"], own_files(named, tmp_path)) == {
            "my notes/s.db-wal"
        }, named
    assert ignored(tmp_path, ["my notes/s.db-wal", "c.py"]) == set()  # text, but not ours
    assert own_files(f"file:{tmp_path.parent / 'other.db'}", tmp_path) == set()
