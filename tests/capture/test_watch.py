"""Capture from an editor: activity windows (hand-worked) and real file writes in a git tree.

The watch tests write real files in a temporary git repository and wait on the events the
watcher reports (never on a sleep longer than a second).
"""

from __future__ import annotations

import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from git_history import git, init

from synapse_retriever import InvalidValueError, SynapseStore
from synapse_retriever.capture.watch import (
    ActivityWindow,
    WatchReport,
    branch_namespace,
    ignored,
    watch,
)


def test_a_quiet_spell_closes_the_window() -> None:
    window = ActivityWindow(quiet_s=60, limit=32)
    window.touch("a.py", 0)
    window.touch("b.py", 50)
    assert not window.due(109)  # 59 s after the last save
    assert window.due(110)
    assert window.close() == ["b.py", "a.py"]
    assert len(window) == 0 and not window.due(10_000)


def test_the_cap_keeps_the_most_recently_touched() -> None:
    window = ActivityWindow(quiet_s=60, limit=2)
    for at, path in enumerate(["a", "b", "c", "a", "d"]):
        window.touch(path, at)
    assert window.close() == ["d", "a"]  # c and b were touched before them


def test_a_rename_is_one_file_moving() -> None:
    window = ActivityWindow()
    window.touch("src/old.py", 0)
    window.touch("src/other.py", 1)
    window.rename("src/old.py", "src/new.py", 2)
    assert window.close() == ["src/new.py", "src/other.py"]


@pytest.mark.parametrize(("quiet_s", "limit"), [(0, 32), (-1, 32), (60, 1), (60, True)])
def test_bad_window_settings_are_refused(quiet_s: float, limit: int) -> None:
    with pytest.raises(InvalidValueError):
        ActivityWindow(quiet_s, limit)


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    repo = init(tmp_path / "repo")
    (repo / ".gitignore").write_text("*.log\nsecrets/\n")
    (repo / "README.md").write_text("hello\n")
    git(repo, "add", ".")
    git(repo, "commit", "-qm", "start")
    return repo


def test_what_is_left_out(tree: Path) -> None:
    for name, content in {
        "src/a.py": b"x = 1\n",
        "debug.log": b"noise\n",
        "secrets/key.txt": b"k\n",
        "build/out.js": b"y\n",
        "node_modules/m/index.js": b"z\n",
        "logo.png": b"\x89PNG\x00\x01",
        "store.db": b"x",
    }.items():
        (tree / name).parent.mkdir(parents=True, exist_ok=True)
        (tree / name).write_bytes(content)
    paths = ["src/a.py", "debug.log", "secrets/key.txt", "build/out.js",
             "node_modules/m/index.js", "logo.png", "store.db", "gone.py"]  # fmt: skip
    assert ignored(tree, paths, keep_out={"store.db"}) == set(paths) - {"src/a.py"}


def test_the_namespace_follows_the_branch(tree: Path) -> None:
    assert branch_namespace(tree) == "branch:main"
    git(tree, "checkout", "-qb", "feature/login")
    assert branch_namespace(tree) == "branch:feature/login"
    git(tree, "checkout", "-q", "--detach")
    assert branch_namespace(tree) == "personal"


class Watcher:
    """:func:`watch` in a thread, each written window reported on a queue."""

    def __init__(self, root: Path, **options: object) -> None:
        self.written: list[tuple[list[str], str]] = []
        self.closed = threading.Semaphore(0)
        self.stop = threading.Event()
        self.report = WatchReport()

        def write(files: list[str], namespace: str) -> int:
            self.written.append((files, namespace))
            return len(files) * (len(files) - 1) // 2

        def run() -> None:
            self.report = watch(
                root,
                write,
                stop=self.stop,
                on_event=lambda _: self.closed.release(),
                tick_s=0.05,
                **options,  # type: ignore[arg-type]
            )

        self.thread = threading.Thread(target=run, daemon=True)
        self.thread.start()

    def next_event(self) -> tuple[list[str], str]:
        assert self.closed.acquire(timeout=20), "no event within 20 s"
        return self.written[-1]

    def finish(self) -> WatchReport:
        self.stop.set()
        self.thread.join(timeout=20)
        return self.report


@pytest.fixture
def watcher(tree: Path) -> Iterator[Watcher]:
    running = Watcher(tree, quiet_s=0.4, limit=3)
    threading.Event().wait(0.3)  # the observer is scheduled
    yield running
    running.finish()


def _save(root: Path, name: str, text: str = "x\n") -> None:
    path = root / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)


def test_saves_within_a_window_are_one_event_in_the_branch(tree: Path, watcher: Watcher) -> None:
    _save(tree, "src/a.py")
    _save(tree, "src/b.py")
    files, namespace = watcher.next_event()
    assert sorted(files) == ["src/a.py", "src/b.py"] and namespace == "branch:main"
    for name in ("debug.log", "build/x.js", "secrets/k.txt"):  # left out
        _save(tree, name)
    (tree / "logo.png").write_bytes(b"\x00\x01")
    _save(tree, "src/c.py")
    _save(tree, "src/d.py")
    files, _ = watcher.next_event()
    assert sorted(files) == ["src/c.py", "src/d.py"]
    git(tree, "checkout", "-qb", "feature")
    for name in ("e.py", "f.py", "g.py", "h.py"):  # four files, capped at three
        _save(tree, name)
    files, namespace = watcher.next_event()
    assert namespace == "branch:feature" and len(files) == 3 and "h.py" in files


def test_a_rename_counts_once_under_its_new_name(tree: Path, watcher: Watcher) -> None:
    _save(tree, "old.py")
    _save(tree, "other.py")
    (tree / "old.py").rename(tree / "new.py")
    files, _ = watcher.next_event()
    assert sorted(files) == ["new.py", "other.py"]


def test_stopping_closes_the_open_window(tree: Path) -> None:
    running = Watcher(tree, quiet_s=3600)
    threading.Event().wait(0.3)
    _save(tree, "a.py")
    _save(tree, "b.py")
    threading.Event().wait(0.5)  # the saves reach the watcher
    report = running.finish()
    assert [sorted(files) for files, _ in running.written] == [["a.py", "b.py"]]
    assert report.events == 1 and report.edges == 1


def test_the_watch_command_learns_into_a_store(tree: Path, tmp_path: Path) -> None:
    store_path = tree / "synapses.db"  # inside the tree: its own files are left out
    stop = threading.Event()
    learned = threading.Semaphore(0)
    with SynapseStore(store_path) as store:

        def write(files: list[str], namespace: str) -> int:
            return store.reinforce(files, namespace=namespace)

        def run() -> None:
            watch(tree, write, quiet_s=0.4, stop=stop, keep_out={"synapses.db",
                  "synapses.db-wal", "synapses.db-shm"}, on_event=lambda _: learned.release(),
                  tick_s=0.05)  # fmt: skip

        thread = threading.Thread(target=run, daemon=True)
        thread.start()
        threading.Event().wait(0.3)
        _save(tree, "src/jwt.py")
        _save(tree, "src/keys.py")
        assert learned.acquire(timeout=20)
        stop.set()
        thread.join(timeout=20)
        edge = store.edge("src/jwt.py", "src/keys.py", namespace="branch:main")
        assert edge is not None and edge.activation_count == 1
        assert store.graph().number_of_edges() == 1  # the store's own files never joined


def test_synapse_watch_learns_until_interrupted(tree: Path, tmp_path: Path) -> None:
    store_path = tmp_path / "synapses.db"
    command = [sys.executable, "-m", "synapse_retriever.cli", "watch", str(tree), str(store_path),
               "--quiet-s", "0.3"]  # fmt: skip
    process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 30
        while not store_path.exists():  # the store is open: the watcher starts next
            assert time.monotonic() < deadline and process.poll() is None
            threading.Event().wait(0.05)
        threading.Event().wait(1.0)
        _save(tree, "src/jwt.py")
        _save(tree, "src/keys.py")
        learned = None
        while learned is None:  # the edge appears once the window closes
            assert time.monotonic() < deadline, "nothing learned within 30 s"
            threading.Event().wait(0.1)
            with SynapseStore(store_path) as store:
                learned = store.edge("src/jwt.py", "src/keys.py", "branch:main")
        _save(tree, "src/late.py")  # saved, then Ctrl-C at once: the open window still counts
        _save(tree, "src/jwt.py", "y\n")
        threading.Event().wait(0.2)
        process.send_signal(signal.SIGINT)
        out, err = process.communicate(timeout=30)
    finally:
        if process.poll() is None:
            process.kill()
    assert process.returncode == 0, err
    assert "1 events" in err and "edges learned" in out
    with SynapseStore(store_path) as store:
        assert store.edge("src/late.py", "src/jwt.py", "branch:main") is not None


def test_synapse_watch_refuses_a_missing_folder(tmp_path: Path) -> None:
    from synapse_retriever.cli import main

    assert main(["watch", str(tmp_path / "nowhere"), str(tmp_path / "s.db")]) == 2
    assert main(["watch", str(tmp_path), str(tmp_path / "s.db"), "--quiet-s", "0"]) == 2
