"""What a user can type must not destroy or poison a store (issue 15): several processes
creating one store, times ahead of the clock, read-only and damaged files."""

from __future__ import annotations

import contextlib
import errno
import hashlib
import json
import multiprocessing as mp
import os
import re
import sqlite3
import subprocess
import sys
import time
from datetime import datetime, timedelta, timezone
from fractions import Fraction
from pathlib import Path
from typing import Any

import pytest
from files import failing_stat, read_only

from synapse_retriever import (
    AccessDeniedError,
    CorruptDatabaseError,
    InvalidTypeError,
    InvalidValueError,
    NotASynapseDatabaseError,
    ReadOnlyStoreError,
    RepairReport,
    StorageUnavailableError,
    SynapseConfig,
    SynapseStore,
)
from synapse_retriever.cli import main
from synapse_retriever.persistence.sqlite import SQLiteStorage
from synapse_retriever.persistence.transfer import merge_edges, read_edges, write_edges

DAY = 86_400.0

# -- several processes open one new path at once -------------------------------------------


def _open_new(path: str, barrier: Any, results: Any) -> None:
    barrier.wait(30)
    try:
        with SynapseStore(path) as store:
            store.weight("a", "b")
        results.put("ok")
    except Exception as exc:  # reported to the parent, which fails the test
        results.put(f"{type(exc).__name__}: {exc}")


def test_processes_creating_one_new_store_at_once_all_succeed(tmp_path: Path) -> None:
    # before the fix: 3 raw "database is locked" and 1 false "another application" in 240
    ctx = mp.get_context("fork")  # as fast as processes start (spawn: 40 s for these 150)
    processes, rounds = 6, 25
    outcomes: list[str] = []
    for round_ in range(rounds):
        path = str(tmp_path / f"new{round_}.db")
        barrier, results = ctx.Barrier(processes), ctx.Queue()
        workers = [
            ctx.Process(target=_open_new, args=(path, barrier, results)) for _ in range(processes)
        ]
        for worker in workers:
            worker.start()
        outcomes += [results.get(timeout=60) for _ in workers]
        for worker in workers:
            worker.join(60)
    assert [o for o in outcomes if o != "ok"] == []
    assert len(outcomes) == processes * rounds


# -- times ahead of the clock ----------------------------------------------------------------


@pytest.mark.parametrize("at", [time.time() * 1000, 1e11, time.time() + 2 * DAY])
def test_a_time_ahead_of_the_clock_is_refused_and_nothing_is_written(at: float) -> None:
    store = SynapseStore(":memory:")
    with pytest.raises(InvalidValueError, match=rf"at={at} is more than 86400 s ahead"):
        store.reinforce(["a", "b"], at=at)
    with pytest.raises(InvalidValueError, match="ahead of the clock"):
        store.use(["a"], at=at)
    assert store.edge("a", "b") is None
    assert store.graph().number_of_nodes() == 0


@pytest.mark.parametrize(
    ("given", "message"),
    [
        ({"at": -1e15}, r"at=-1000000000000000\.0 is before the year 1"),
        ({"at": -62_135_596_801}, "is before the year 1"),
        ({"at": 10**400}, "at must be a finite number of seconds, got int past a float's range"),
        ({"strength": 10**400}, "strength must be a finite number, got int past a float's range"),
        ({"at": 2**1024 - 1}, "got int past a float's range"),  # 1,024 bits, still past it
        ({"at": Fraction(10**400)}, "got Fraction past a float's range"),
    ],
)
def test_a_time_before_the_calendar_or_past_a_float_is_refused(
    given: dict[str, Any], message: str
) -> None:
    store = SynapseStore(":memory:")
    with pytest.raises(InvalidValueError, match=message):
        store.reinforce(["a", "b"], **given)
    assert store.graph().number_of_nodes() == 0
    assert store.reinforce(["a", "b"], at=-62_135_596_800) == 1  # 0001-01-01: the first second


def test_an_aware_datetime_before_the_year_1_in_utc_is_refused() -> None:
    store = SynapseStore(":memory:")
    early = datetime(1, 1, 1, 0, 30, tzinfo=timezone(timedelta(hours=1)))  # 0000-12-31 UTC
    with pytest.raises(InvalidValueError, match="is before the year 1"):
        store.reinforce(["a", "b"], at=early)
    assert store.graph().number_of_nodes() == 0
    assert (
        store.reinforce(["a", "b"], at=datetime(1, 1, 1, 1, 0, tzinfo=timezone(timedelta(hours=1))))
        == 1
    )


def test_a_millisecond_time_is_named_as_one() -> None:
    at = time.time() * 1000  # at / 1000 is not always the time it was made from, to the bit
    with pytest.raises(
        InvalidValueError, match=re.escape(f"in milliseconds it would be {at / 1000}")
    ):
        SynapseStore(":memory:").reinforce(["a", "b"], at=at)


def test_the_skew_is_configurable_and_a_time_within_it_is_accepted() -> None:
    store = SynapseStore(":memory:")
    assert store.reinforce(["a", "b"], at=time.time() + 0.5 * DAY) == 1
    strict = SynapseStore(":memory:", config=SynapseConfig.actr(max_clock_skew_s=0.0))
    with pytest.raises(InvalidValueError, match="more than 0 s ahead"):
        strict.reinforce(["a", "b"], at=time.time() + 60)
    with pytest.raises(InvalidValueError, match="max_clock_skew_s"):
        SynapseConfig.actr(max_clock_skew_s=-1.0)


def test_import_refuses_times_ahead_of_the_clock(tmp_path: Path) -> None:
    now_ms = time.time() * 1000
    export = tmp_path / "edges.json"
    export.write_text(
        '{"format": "synapse-retriever/edges", "version": 1, "edges": [{"a": "a", "b": "b", '
        '"namespace": "shared", "stored_weight": 0.3, "count": 1, "half_life_days": 30.0, '
        f'"created_at": 0.0, "last_reinforced_at": {now_ms}}}]}}'
    )
    storage = SQLiteStorage(":memory:")
    with pytest.raises(InvalidValueError, match=r"last_reinforced_at=.* ahead of the clock"):
        merge_edges(storage, read_edges(export))
    assert storage.load().rows.shape[0] == 0  # type: ignore[union-attr]


def _poisoned(path: Path) -> None:
    """A store written before such times were refused: a millisecond time in one edge."""
    with SynapseStore(path) as store:
        store.reinforce(["jwt", "keys"], at=time.time() - DAY)
        store.config = SynapseConfig.actr(max_clock_skew_s=1e15)  # as older releases accepted
        store.reinforce(["jwt", "login"], at=time.time() * 1000, event_id="commit:1")


def test_a_poisoned_store_opens_shows_and_is_repaired(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], caplog: pytest.LogCaptureFixture
) -> None:
    path = tmp_path / "poisoned.db"
    _poisoned(path)
    future = pytest.raises(InvalidValueError, match=r"lies in the future: store.repair\(\)")
    with SynapseStore(path) as store, future:  # it opens; current explicit times meet the poison
        store.reinforce(["jwt", "login"], at=time.time())
    with SynapseStore(path) as store, caplog.at_level("WARNING", logger="synapse_retriever"):
        store.reinforce(["jwt", "login"])  # the clock: placed after the poison, with a warning
    assert "ahead of the clock" in caplog.text and "synapse-retriever repair" in caplog.text
    assert main(["edges", str(path), "jwt", "--at", str(time.time())]) == 0  # no crash
    assert "beyond year 9999: synapse-retriever repair removes it" in capsys.readouterr().out
    assert main(["repair", str(path), "--dry-run"]) == 0
    assert "would remove what was written ahead of the clock: 1 edges" in capsys.readouterr().out
    assert main(["repair", str(path), "--json"]) == 0
    assert capsys.readouterr().out.count('"edges": 1') == 1
    with SynapseStore(path) as store:
        assert store.edge("jwt", "login") is None and store.edge("jwt", "keys") is not None
        assert store.reinforce(["jwt", "login"], at=time.time(), event_id="commit:1") == 1
        store.reinforce(["jwt", "keys"])  # at=None: now, not after the poison
        edge = store.edge("jwt", "keys")
        assert edge is not None and edge.last_reinforced_at <= time.time()
        assert store.repair().edges == 0


def test_another_process_sees_a_repair(tmp_path: Path) -> None:
    path = tmp_path / "poisoned.db"
    _poisoned(path)
    config = SynapseConfig.actr(refresh_interval_s=0.0)
    with SynapseStore(path, config=config) as reader, SynapseStore(path) as repairer:
        assert sorted(n for n, _, _ in reader.neighbours("jwt", at=time.time())) == [
            "keys",
            "login",
        ]
        repairer.repair()
        assert [n for n, _, _ in reader.neighbours("jwt", at=time.time())] == ["keys"]


# -- read-only stores ------------------------------------------------------------------------


def _digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


@pytest.fixture
def learned(tmp_path: Path) -> Path:
    folder = tmp_path / "ro"
    folder.mkdir()
    path = folder / "synapses.db"
    with SynapseStore(path) as store:
        store.reinforce(["jwt", "keys"], strength=2.0)
        store.reinforce(["jwt", "login"])
    for leftover in folder.glob("synapses.db-*"):  # as after a clean close elsewhere
        leftover.unlink()
    return path


@pytest.mark.parametrize("folder_too", [False, True], ids=["file", "file-and-folder"])
def test_a_read_only_store_reads_and_recalls_and_refuses_writes(
    learned: Path, folder_too: bool, capsys: pytest.CaptureFixture[str]
) -> None:
    digest = _digest(learned)
    with read_only(learned, *([learned.parent] if folder_too else [])):
        with SynapseStore(learned) as store:
            hits = [("jwt", 0.9), ("a", 0.8), ("b", 0.7), ("c", 0.6)]
            assert "keys" in [hit.id for hit in store.recall(hits)]
            assert [n for n, _, _ in store.neighbours("jwt")] == ["keys", "login"]
            with pytest.raises(ReadOnlyStoreError, match="is open read-only"):
                store.reinforce(["jwt", "new"])
            with pytest.raises(ReadOnlyStoreError):
                store.decay()
            with pytest.raises(PermissionError):  # a ReadOnlyStoreError is one
                store.use(["jwt"])
        assert main(["stats", str(learned)]) == 0
        assert "2 live edges" in capsys.readouterr().out
        assert main(["edges", str(learned), "jwt", "--json"]) == 0
        assert '"total": 2' in capsys.readouterr().out
        assert main(["decay", str(learned)]) == 2
        assert "is open read-only" in capsys.readouterr().err
    assert _digest(learned) == digest


@pytest.mark.parametrize("folder_too", [False, True], ids=["file", "file-and-folder"])
def test_reading_a_read_only_store_leaves_nothing_beside_it(
    learned: Path, folder_too: bool, capsys: pytest.CaptureFixture[str]
) -> None:
    with read_only(learned, *([learned.parent] if folder_too else [])):
        assert main(["stats", str(learned)]) == 0
        with SynapseStore(learned) as store:
            assert store.edge("jwt", "keys") is not None
    assert sorted(p.name for p in learned.parent.iterdir()) == [learned.name]  # no -wal, -shm
    assert "2 live edges" in capsys.readouterr().out


@pytest.mark.parametrize("page_size", [4096, 1024, 65536])
def test_a_dry_run_repair_of_a_read_only_store_only_reads(
    learned: Path, capsys: pytest.CaptureFixture[str], page_size: int
) -> None:
    # its private copy in memory takes the file's page size (an in-memory database's cannot
    # be changed by a backup: "attempt to write a readonly database", a ReadOnlyStoreError)
    with SynapseStore(learned, config=SynapseConfig.actr(max_clock_skew_s=1e15)) as store:
        store.reinforce(["jwt", "ms"], at=time.time() * 1000)  # as older releases let through
    with contextlib.closing(sqlite3.connect(learned, isolation_level=None)) as db:
        db.execute("PRAGMA journal_mode = DELETE")  # a file rebuilt with another page size
        db.execute(f"PRAGMA page_size = {page_size}")
        db.execute("VACUUM")
        db.execute("PRAGMA journal_mode = WAL")
    for leftover in learned.parent.glob("synapses.db-*"):
        leftover.unlink()
    digest = _digest(learned)
    with read_only(learned):
        with SynapseStore(learned) as store:
            assert store.repair(dry_run=True) == RepairReport(1, 2, 1, dry_run=True)
            assert store.edge("jwt", "ms") is not None  # still there: it only counted
            with pytest.raises(ReadOnlyStoreError):
                store.repair()
        assert main(["repair", str(learned), "--dry-run", "--json"]) == 0
        assert json.loads(capsys.readouterr().out)["edges"] == 1
    assert _digest(learned) == digest
    assert sorted(p.name for p in learned.parent.iterdir()) == [learned.name]


def test_read_only_can_be_asked_for(learned: Path) -> None:
    digest = _digest(learned)
    with SynapseStore(learned, read_only=True) as store:
        assert store.edge("jwt", "keys") is not None
        with pytest.raises(ReadOnlyStoreError):
            store.reinforce(["jwt", "keys"])
        with pytest.raises(ReadOnlyStoreError):
            store.repair()
    assert _digest(learned) == digest
    with pytest.raises(NotASynapseDatabaseError, match="no synapse database"):
        SynapseStore(learned.parent / "missing.db", read_only=True)
    with pytest.raises(InvalidValueError, match="in-memory store cannot be read-only"):
        SynapseStore(":memory:", read_only=True)


def test_a_read_only_flag_given_as_a_word_is_refused(learned: Path) -> None:
    # "no" read as True: the store opened read-only
    with pytest.raises(InvalidTypeError, match="read_only must be a bool, got str 'no'"):
        SynapseStore(learned, read_only="no")  # type: ignore[arg-type]
    with pytest.raises(InvalidTypeError, match="read_only must be a bool, got int 1"):
        SQLiteStorage(learned, read_only=1)  # type: ignore[arg-type]


def test_a_reader_sees_writes_to_a_file_without_write_bits_that_root_writes(
    learned: Path,
) -> None:
    # root writes a 0444 file; a reader that took it for one no one can write opened it
    # immutable and kept the old graph for as long as it stayed open
    if not hasattr(os, "geteuid") or os.geteuid() != 0:
        pytest.skip("only root writes a file without write permission")
    (learned.parent / f"{learned.name}-wal").unlink(missing_ok=True)
    learned.chmod(0o444)
    config = SynapseConfig().replace(refresh_interval_s=0.0)
    with SynapseStore(learned, read_only=True, config=config) as reader:
        before = reader.graph().number_of_edges()
        with SynapseStore(learned) as writer:
            assert not writer.read_only
            writer.reinforce(["new-a", "new-b"])
        assert reader.graph().number_of_edges() == before + 1


def test_a_read_only_file_of_an_older_schema_is_refused_untouched(learned: Path) -> None:
    with contextlib.closing(sqlite3.connect(learned)) as db:
        db.execute("PRAGMA user_version = 2")  # as a release before the change logs left it
    digest = _digest(learned)
    with read_only(learned), pytest.raises(NotASynapseDatabaseError, match="open it once with"):
        SynapseStore(learned)
    assert _digest(learned) == digest


# -- damaged files ---------------------------------------------------------------------------


def _damaged(path: Path, part: str) -> Path:
    """A store whose first page of ``part`` (a table or an index) is overwritten, as by a
    bad disk or a copy gone wrong."""
    with SynapseStore(path) as store:
        for i in range(200):
            store.reinforce([f"n{i}", f"n{i + 1}", f"m{i}"], at=i)
    with contextlib.closing(sqlite3.connect(path)) as db:
        page = db.execute("PRAGMA page_size").fetchone()[0]
        root = db.execute("SELECT rootpage FROM sqlite_master WHERE name = ?", (part,)).fetchone()
    with path.open("r+b") as file:
        file.seek((root[0] - 1) * page)
        file.write(bytes(range(256)) * (page // 256))
    return path


def test_a_damaged_file_is_refused_naming_it_and_left_untouched(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = _damaged(tmp_path / "damaged.db", "edges")  # a table: loading reads every page
    digest = _digest(path)
    with pytest.raises(CorruptDatabaseError, match=r"damaged\.db' is a damaged database"):
        SynapseStore(path)
    with pytest.raises(NotASynapseDatabaseError):  # the family a caller may already catch
        SynapseStore(path)
    assert main(["stats", str(path)]) == 2
    err = capsys.readouterr().err
    assert "is a damaged database" in err and len(err.splitlines()) == 1
    assert _digest(path) == digest


@pytest.mark.parametrize(
    ("edit", "message"),
    [
        ("UPDATE edges SET weight = 'abc'", "holds rows no synapse store writes"),
        ("DROP TABLE edges", "its schema is not the one its version says"),
        ("PRAGMA user_version = 3", "its schema is not the one its version says"),
        ("PRAGMA user_version = 2", "its schema is not the one its version says"),
        ("PRAGMA user_version = 1", "its schema is not the one its version says"),
        ("PRAGMA user_version = 0", "its schema is not the one its version says"),
        ("DELETE FROM nodes WHERE name = 'login'", r"node \d+ has no name"),
        ("DELETE FROM nodes WHERE name = 'jwt'", r"node \d+ has no name"),
        ("DELETE FROM namespaces", "holds rows no synapse store writes"),
    ],
    ids=[
        "text weight",
        "no edges table",
        "version 3",
        "version 2",
        "version 1",
        "version 0",
        "a node's name deleted",
        "a hub's name deleted",
        "the namespace's name deleted",
    ],
)
def test_a_file_edited_by_hand_is_refused_in_one_line(
    learned: Path, capsys: pytest.CaptureFixture[str], edit: str, message: str
) -> None:
    # each was a raw ValueError, IndexError or sqlite3 error, and a traceback in the CLI
    with contextlib.closing(sqlite3.connect(learned)) as db:
        db.execute("DROP TRIGGER IF EXISTS edges_log_update")
        db.execute(edit)
        db.commit()
    digest = _digest(learned)
    with pytest.raises(CorruptDatabaseError, match=message):
        SynapseStore(learned)
    assert main(["stats", str(learned)]) == 2
    err = capsys.readouterr().err
    assert re.search(message, err) and len(err.splitlines()) == 1
    assert _digest(learned) == digest


def test_import_into_a_damaged_file_writes_nothing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with SynapseStore(tmp_path / "good.db") as good:
        good.reinforce(["a", "b"])
    export = tmp_path / "edges.json"
    assert main(["export", str(tmp_path / "good.db"), str(export)]) == 0
    path = _damaged(tmp_path / "damaged.db", "edges_by_pair")  # an index: no load reads it
    digest = _digest(path)
    capsys.readouterr()
    assert main(["import", str(path), str(export)]) == 2  # checked before writing
    err = capsys.readouterr().err
    assert "is a damaged database" in err and len(err.splitlines()) == 1
    with pytest.raises(CorruptDatabaseError):
        SQLiteStorage(path).check()
    assert _digest(path) == digest


def test_a_write_that_meets_damage_is_rolled_back(tmp_path: Path) -> None:
    path = _damaged(tmp_path / "damaged.db", "edges_by_pair")
    with SynapseStore(path) as store:  # opens: loading reads the tables, not this index
        with pytest.raises(CorruptDatabaseError, match="nothing was written"):
            store.reinforce(["n1", "n2", "new"], at=1000)
        assert store.edge("n1", "new") is None
    with contextlib.closing(sqlite3.connect(path)) as db:
        assert db.execute("SELECT count(*) FROM nodes WHERE name = 'new'").fetchone() == (0,)


def test_opening_a_file_again_keeps_the_locks_of_its_open_connections(tmp_path: Path) -> None:
    """Closing any descriptor of a file drops every POSIX lock the process holds on it: a
    header read through Python made another process believe it was the file's last user
    and take it over (it may then checkpoint and delete the WAL under the first
    connection: two memories on one file in one process lost turns that way)."""
    import sys

    path = tmp_path / "shared.db"
    SynapseStore(path).close()
    first = sqlite3.connect(path)
    first.execute("SELECT count(*) FROM sqlite_master").fetchone()  # holds its shared lock
    try:
        SynapseStore(path).close()  # a second open in this process, then its close
        SQLiteStorage(path).close()
        other = (
            "import sqlite3, sys\n"
            "db = sqlite3.connect(sys.argv[1], timeout=0)\n"
            "print(db.execute('PRAGMA journal_mode = DELETE').fetchone()[0])\n"
        )
        mode = subprocess.run(
            [sys.executable, "-c", other, str(path)], capture_output=True, text=True, check=False
        )
        # the other process cannot take the file over while `first` is open: it stays WAL
        assert mode.stdout.strip() == "wal" or "locked" in mode.stderr, mode
    finally:
        first.close()


# -- a store named as another database's side file ------------------------------------------


@pytest.mark.parametrize("suffix", ["-wal", "-shm", "-journal"])
def test_a_store_named_as_another_databases_side_file_is_refused(
    tmp_path: Path, suffix: str, capsys: pytest.CaptureFixture[str]
) -> None:
    # team.db-wal would be taken for team.db's log, and deleted, the next time team.db opens
    with SynapseStore(tmp_path / "team.db") as team:
        team.reinforce(["a", "b"])
    side = tmp_path / f"team.db{suffix}"
    before = sorted(path.name for path in tmp_path.iterdir())
    with pytest.raises(InvalidValueError, match=rf"team\.db{suffix}' is named as SQLite names"):
        SynapseStore(side)
    edges = tmp_path / "edges.json"
    edges.write_text(json.dumps({"format": "synapse-retriever/edges", "version": 1, "edges": []}))
    assert main(["import", str(side), str(edges)]) == 2
    assert "is named as SQLite names" in capsys.readouterr().err
    assert sorted(path.name for path in tmp_path.iterdir()) == sorted([*before, "edges.json"])
    with SynapseStore(tmp_path / f"team{suffix}.db") as fine:  # the suffix inside a name is fine
        fine.reinforce(["a", "b"])
    with SynapseStore(tmp_path / "team.db") as team:
        assert team.weight("a", "b") > 0


# -- a full disk, a device, a foreign empty file ---------------------------------------------

_FULL_DISK = """
import resource, signal, sys
from synapse_retriever import CoActivation, StorageUnavailableError, SynapseStore
signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # a write past the limit fails (EFBIG) instead
store = SynapseStore(sys.argv[1])
size = int(sys.argv[2])
resource.setrlimit(resource.RLIMIT_FSIZE, (size, size))
events = [CoActivation([f"n{i}-{j}" for j in range(10)], event_id=f"e{i}") for i in range(2000)]
try:
    store.reinforce_many(events)
except StorageUnavailableError as error:
    print("typed:", error)
"""


def test_a_full_disk_is_a_typed_error_and_writes_nothing(tmp_path: Path) -> None:
    path = tmp_path / "full.db"
    with SynapseStore(path) as store:
        store.reinforce(["a", "b"], event_id="first")
    (tmp_path / "full.db-wal").unlink(missing_ok=True)
    size = path.stat().st_size
    done = subprocess.run(
        [sys.executable, "-c", _FULL_DISK, str(path), str(size + 64 * 1024)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    assert f"typed: '{path}' could not be read or written" in done.stdout, done.stdout
    with SynapseStore(path) as store:  # the batch rolled back whole
        assert store.graph().number_of_edges() == 1
        assert store.edge("a", "b").activation_count == 1


@pytest.mark.parametrize("how", ["deleted", "replaced"])
def test_a_store_whose_file_was_deleted_or_replaced_refuses_writes(
    tmp_path: Path, how: str
) -> None:
    # a write went to the unlinked file, or over a backup moved into its place (its WAL
    # applied to the backup's pages): lost at the close, or the backup destroyed
    path, backup = tmp_path / "synapses.db", tmp_path / "backup.db"
    with SynapseStore(backup) as other:
        other.reinforce(["x", "y"], at=0, namespace="shared")
    with SynapseStore(path) as store:
        store.reinforce(["a", "b"], at=0)
        for side in ("", "-wal", "-shm"):
            Path(f"{path}{side}").unlink(missing_ok=True)
        if how == "replaced":
            backup.rename(path)
        with pytest.raises(StorageUnavailableError, match="was deleted, moved or replaced while"):
            store.reinforce(["a", "c"], at=0)
        assert store.edge("a", "c") is None  # nothing written, in memory either
    if how == "replaced":
        with SynapseStore(path) as restored:  # the backup, whole
            assert restored.edge("x", "y", namespace="shared") is not None
            assert restored.edge("a", "b") is None
    else:
        assert not path.exists()


def test_a_look_at_the_store_file_that_fails_for_a_moment_is_not_a_replaced_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # an EIO or ESTALE from a network file system was "deleted, moved or replaced"
    path = tmp_path / "synapses.db"
    with SynapseStore(path) as store:
        store.reinforce(["a", "b"], at=0)
        with monkeypatch.context() as patched:
            failing_stat(patched, path, errno.EIO)
            with pytest.raises(StorageUnavailableError, match="could not be looked at") as error:
                store.reinforce(["a", "c"], at=0)
            assert "replaced" not in str(error.value)
        assert store.edge("a", "c") is None  # nothing written
        assert store.reinforce(["a", "c"], at=0) == 1  # the moment over: written
    with SynapseStore(path) as again:
        assert again.edge("a", "c") is not None


def test_a_device_or_a_foreign_empty_file_is_refused_untouched(tmp_path: Path) -> None:
    with pytest.raises(NotASynapseDatabaseError, match="is not a regular file"):
        SynapseStore("/dev/null")
    other = tmp_path / "other.db"  # another application's empty database, version stamped
    with contextlib.closing(sqlite3.connect(other)) as db:
        db.execute("PRAGMA user_version = 3")
    digest = _digest(other)
    with pytest.raises(NotASynapseDatabaseError, match="of another application"):
        SynapseStore(other)
    assert _digest(other) == digest and sorted(tmp_path.iterdir()) == [other]


def test_a_store_in_a_folder_this_process_may_not_enter_is_access_denied(tmp_path: Path) -> None:
    # a raw PermissionError from the checks before the open (not a SynapseError)
    folder = tmp_path / "private"
    folder.mkdir()
    path = folder / "s.db"
    SynapseStore(path).close()
    if not (hasattr(os, "geteuid") and os.geteuid() == 0):
        folder.chmod(0o000)
        try:
            with pytest.raises(AccessDeniedError, match="this process may not reach it"):
                SynapseStore(path)
        finally:
            folder.chmod(0o700)
        return
    folder.chmod(0o700)  # root enters every folder: a forked child becomes nobody for good
    child = os.fork()
    if child == 0:
        code = 1
        try:
            os.setgid(65534)
            os.setuid(65534)
            SynapseStore(path)
        except AccessDeniedError as error:
            code = 0 if "this process may not reach it" in str(error) else 2
        except BaseException:
            code = 3
        finally:
            os._exit(code)
    _, status = os.waitpid(child, 0)
    assert os.waitstatus_to_exitcode(status) == 0  # 1: it opened; 3: another error


@pytest.mark.skipif(not Path("/proc/version").is_file(), reason="Linux's /proc")
def test_a_file_sqlite_cannot_open_as_a_database_is_a_typed_error() -> None:
    # an empty regular file whose -wal SQLite cannot make: a raw sqlite3.OperationalError
    with pytest.raises(StorageUnavailableError, match="cannot be opened as a database"):
        SynapseStore("/proc/version")


# -- paths that cannot be a store ------------------------------------------------------------


@pytest.mark.parametrize(
    ("path", "error", "says"),
    [
        (123, InvalidTypeError, "path must be a str or a path, got int 123"),
        (None, InvalidTypeError, "got NoneType None"),
        (b"synapses.db", InvalidTypeError, "got bytes b'synapses.db'"),
        ("a\x00b.db", InvalidValueError, "must not hold a NUL character"),
        ("", InvalidValueError, "must not be empty"),
        ("mysql://me@db/team", InvalidValueError, "file path or a postgresql:// URL, got a mysql"),
        ("postgresq://me@db/team", InvalidValueError, "got a postgresq:// URL"),
        ("n" * 300 + ".db", InvalidValueError, "is a path too long for the file system"),
        # a file was made under that name, the password in it (and in the store's repr)
        ("host=db password=s3cret dbname=x", InvalidValueError, r"connection string .*\*\*\*"),
        ("host=db password=s3cret x", InvalidValueError, r"connection string .*\*\*\*"),
        # SQLite decodes the escape into the name: a raw error, and the file left
        ("file:caf%E8.db", InvalidValueError, "its %-escapes make a byte that is not UTF-8"),
    ],
)
def test_a_path_that_cannot_name_a_file_is_a_typed_error(
    path: object, error: type[Exception], says: str
) -> None:
    from synapse_retriever.conversation import ConversationMemory

    for opener in (SynapseStore, ConversationMemory):
        with pytest.raises(error, match=says):
            opener(path)  # type: ignore[operator]


def test_a_name_whose_bytes_are_not_utf8_is_refused_before_a_file_is_made(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # SQLite made the store in it, then failed to read its own name back (a raw
    # sqlite3.OperationalError), and the file was left, one no command could open
    from synapse_retriever.cli import main
    from synapse_retriever.conversation import ConversationMemory

    path = os.fsdecode(os.fsencode(tmp_path) + b"/caf\xe9.db")
    for opener in (SynapseStore, ConversationMemory):
        with pytest.raises(InvalidValueError, match=r"must be valid Unicode.*'\\udce9' at"):
            opener(path)
    assert main(["stats", path]) == 2 and "must be valid Unicode" in capsys.readouterr().err
    assert os.listdir(tmp_path) == []


@pytest.mark.parametrize("name", ["user=x.db", "host=web01/store.db", "a host=b.db"])
def test_a_file_name_with_an_equals_sign_is_a_file(tmp_path: Path, name: str) -> None:
    # a connection string is refused only where libpq reads two settings or a password
    (tmp_path / "host=web01").mkdir()
    with SynapseStore(tmp_path / name) as store:
        store.reinforce(["a", "b"])
    assert (tmp_path / name).is_file()


def test_a_store_in_a_missing_folder_names_the_folder(tmp_path: Path) -> None:
    from synapse_retriever.conversation import ConversationMemory

    missing = tmp_path / "no" / "such"
    for opener in (SynapseStore, ConversationMemory):
        with pytest.raises(InvalidValueError, match=f"no directory '{missing}'"):
            opener(missing / "x.db")
    assert not (tmp_path / "no").exists()


def test_a_layered_store_whose_shared_half_fails_leaves_no_local_file(tmp_path: Path) -> None:
    local = tmp_path / "local.db"
    with pytest.raises(InvalidValueError, match="no directory"):
        SynapseStore.layered(local=local, shared=tmp_path / "no" / "shared.db")
    with pytest.raises(InvalidTypeError, match=r"got a bare str 'shared': pass \('shared',\)"):
        SynapseStore.layered(local=local, shared=tmp_path / "s.db", shared_namespaces="shared")
    with pytest.raises(InvalidValueError, match="must name at least one namespace"):
        SynapseStore.layered(local=local, shared=tmp_path / "s.db", shared_namespaces=())
    assert sorted(tmp_path.iterdir()) == []


def test_a_new_store_in_a_folder_that_cannot_be_written_is_a_read_only_error(
    tmp_path: Path,
) -> None:
    folder = tmp_path / "frozen"
    folder.mkdir()
    with read_only(folder):
        with pytest.raises(ReadOnlyStoreError, match=r"its folder '.*frozen' cannot be written"):
            SynapseStore(folder / "x.db")
        assert list(folder.iterdir()) == []


def test_a_store_made_under_a_side_file_name_before_still_opens_to_be_moved(tmp_path: Path) -> None:
    made = tmp_path / "made.db"
    with SynapseStore(made) as store:
        store.reinforce(["a", "b"])
    old = tmp_path / "work-journal"  # as a release before the rule could name one
    made.rename(old)
    with pytest.raises(InvalidValueError, match="one made there before opens with read_only=True"):
        SynapseStore(old)  # a write would leave it where SQLite deletes it
    with SynapseStore(old, read_only=True) as store:  # to be exported or moved
        assert store.edge("a", "b") is not None
        assert write_edges(store, tmp_path / "edges.json") == 1


def test_an_sqlite_uri_is_sqlites_to_read(tmp_path: Path) -> None:
    path = tmp_path / "u.db"
    with SynapseStore(f"file:{path}") as store:  # an absolute file: URI, as SQLite reads it
        store.reinforce(["a", "b"])
    with SynapseStore(path) as store:
        assert store.edge("a", "b") is not None


def test_a_uri_of_another_sqlite_file_system_is_opened_and_written() -> None:
    # SQLite names "/shared1" for it, a file that is not on disk: the check of the file a
    # write goes to stat()ed it, and the store no longer opened
    with SynapseStore("file:/synapse-test-shared?vfs=memdb") as store:
        assert store.reinforce(["a", "b"], at=0) == 1
        assert store.edge("a", "b") is not None


def test_a_write_to_a_memdb_database_shared_by_name_waits_outside_the_busy_handler() -> None:
    # SQLite's busy handler waits on a memdb lock shared by name, as on a file's: a write
    # held busy_timeout_s in BEGIN, then again outside it (2 s where 1 s was asked)
    uri = "file:/synapse-test-busy?vfs=memdb"
    with SynapseStore(uri) as store:
        db = store._storage._db  # type: ignore[attr-defined]
        statements: list[str] = []
        db.set_trace_callback(statements.append)
        store.reinforce(["a", "b"], at=0)
        db.set_trace_callback(None)
    assert "PRAGMA busy_timeout = 0" in statements


@pytest.mark.parametrize(
    ("a", "b"),
    [
        ("file:/st-a?vfs=memdb", "file:/st-a?vfs=%6Demdb"),  # SQLite decodes a parameter
        ("file:/st-b?vfs=memdb", "file:///st-b?v%66s=memdb#f"),
        ("file:/st-c?vfs=memdb&mode=memory", "file:/st-c?vfs=memdb&mode=memory"),  # private
        ("file:st-d?vfs=memdb", "file:st-d?vfs=memdb"),  # a memdb name without "/": private
        ("file:st-e?mode=memory&cache=shared", "file:st-e?cache=shared&mode=memory"),
        ("file:st-f?mode=memory&cache=shared", "file:st-f?mode=memory&cache=shared&cache=private"),
        ("file:st-g?mode=memory&cache=shared&mode=rwc", "st-g"),  # the last mode: a file
        ("file::memory:st-h", "file::memory:st-h"),  # a file named ":memory:st-h"
        ("file:%3Amemory%3A?cache=shared", "file::memory:?cache=shared"),
        (":memory:", ":memory:"),
    ],
)
def test_one_database_in_memory_is_what_sqlite_opens_as_one(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, a: str, b: str
) -> None:
    # each pair as SQLite itself opens it: a table one connection makes, the other sees
    from synapse_retriever.persistence.sqlite import in_memory, same_database

    monkeypatch.chdir(tmp_path)
    with (
        contextlib.closing(sqlite3.connect(a, uri=True)) as one,
        contextlib.closing(sqlite3.connect(b, uri=True)) as other,
    ):
        one.execute("CREATE TABLE probe (x)")
        one.commit()
        seen = other.execute("SELECT count(*) FROM sqlite_master").fetchone()[0] == 1
    files = list(tmp_path.iterdir())
    assert same_database(a, b) is seen
    assert in_memory(a) is in_memory(b) is not bool(files)  # in memory: no file was made


@pytest.mark.parametrize("parameter", ["VFS=memdb", "MODE=memory"])
def test_a_uri_parameter_sqlite_does_not_read_leaves_a_file_store(
    tmp_path: Path, parameter: str
) -> None:
    # SQLite matches a URI's parameters by their letters' case: it opens the file, which was
    # taken for a store in memory (no WAL, no snapshot; the CLI refused it)
    path = tmp_path / "s.db"
    with SynapseStore(f"file:{path}?{parameter}") as store:
        store.reinforce(["a", "b"], at=0)
        db = store._storage._db  # type: ignore[attr-defined]
        assert db.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    assert main(["stats", f"file:{path}?{parameter}"]) == 0
