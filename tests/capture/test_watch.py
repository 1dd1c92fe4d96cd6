"""Capture from an editor: activity windows (hand-worked), the watcher's steps on synthetic
batches of events (a clock in hand, no thread, no git), and real file writes in a git tree.

The end-to-end watch tests write real files in a temporary git repository and wait on the
events the watcher reports (never on a sleep longer than a second).
"""

from __future__ import annotations

import errno
import os
import shutil
import signal
import socket
import sqlite3
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from files import failing_stat
from git_history import git, init
from watchdog.events import (
    DirModifiedEvent,
    FileCreatedEvent,
    FileDeletedEvent,
    FileModifiedEvent,
    FileMovedEvent,
)

from synapse_retriever import InvalidTypeError, InvalidValueError, SynapseStore
from synapse_retriever.capture import watch as watch_module
from synapse_retriever.capture.watch import (
    ActivityWindow,
    Touch,
    TreeWatcher,
    WatchReport,
    WatchSettings,
    WatchStoppedError,
    branch_namespace,
    ignored,
    watch,
)
from synapse_retriever.cli.watch_command import _replaced
from synapse_retriever.errors import StorageUnavailableError


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


@pytest.mark.parametrize(
    ("quiet_s", "limit", "error"),
    [
        (0, 32, InvalidValueError),
        (-1, 32, InvalidValueError),
        (float("inf"), 32, InvalidValueError),
        (float("nan"), 32, InvalidValueError),
        ("5", 32, InvalidTypeError),
        (True, 32, InvalidTypeError),
        (60, 1, InvalidValueError),
        (60, True, InvalidValueError),
    ],
)
def test_bad_window_settings_are_refused_by_name(
    quiet_s: float, limit: int, error: type[Exception]
) -> None:
    with pytest.raises(error, match=r"quiet_s|limit") as caught:
        ActivityWindow(quiet_s, limit)
    assert repr(quiet_s if "quiet_s" in str(caught.value) else limit) in str(caught.value)


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


def test_a_submodule_does_not_blind_the_ignore_rules(tree: Path, tmp_path: Path) -> None:
    library = init(tmp_path / "library")
    _save(library, "lib.py")
    git(library, "add", ".")
    git(library, "commit", "-qm", "library")
    git(tree, "-c", "protocol.file.allow=always", "submodule", "add", "-q", str(library),
        "vendor/lib")  # fmt: skip
    _save(tree, "debug.log")
    _save(tree, "src/a.py")
    # git refuses a path inside a submodule, and with it the whole batch: asked one by one
    assert ignored(tree, ["debug.log", "vendor/lib/lib.py", "src/a.py"]) == {"debug.log"}


def test_the_namespace_follows_the_branch(tree: Path) -> None:
    assert branch_namespace(tree) == "branch:main"
    git(tree, "checkout", "-qb", "feature/login")
    assert branch_namespace(tree) == "branch:feature/login"
    git(tree, "checkout", "-q", "--detach")
    assert branch_namespace(tree) == "personal"
    git(tree, "checkout", "-q", "main")
    git(tree, "tag", "main")  # a tag of the branch's name read as "heads/main"
    assert branch_namespace(tree) == "branch:main"


def test_a_branch_without_commits_is_a_branch(tmp_path: Path) -> None:
    assert branch_namespace(init(tmp_path / "new")) == "branch:main"  # was "personal"


def test_a_branch_whose_name_cannot_be_a_namespace_is_personal(tree: Path, tmp_path: Path) -> None:
    # git allows any byte >= 0x80 in a ref name: a Latin-1 "café" crashed the watch with a
    # UnicodeDecodeError before it started (and left an empty store file)
    git(tree, "checkout", "-qb", "caf\udce9")  # the bytes caf\xe9
    assert branch_namespace(tree) == "personal"
    git(tree, "checkout", "-qb", "caf\u00e9")  # in UTF-8: a namespace of its own
    assert branch_namespace(tree) == "branch:caf\u00e9"
    latin1 = tree / "sub\udce9"  # a folder named in Latin-1 too: its git folder is found
    latin1.mkdir()
    watcher = TreeWatcher(latin1, lambda files, namespace: 0)
    assert (watcher.namespace, watcher.git_dir) == ("branch:caf\u00e9", tree.resolve() / ".git")


def test_a_file_whose_path_cannot_be_a_node_id_is_left_out(tree: Path) -> None:
    # one path over 2,048 bytes failed every later window of the watch
    deep = "/".join(["d" * 200] * 11) + "/long.py"
    _save(tree, deep)
    _save(tree, "src/a.py")
    assert ignored(tree, [deep, "src/a.py"]) == {deep}


class Watcher:
    """:func:`watch` in a thread, each written window reported on a queue."""

    def __init__(self, root: Path, **options: object) -> None:
        self.written: list[tuple[list[str], str]] = []
        self.closed = threading.Semaphore(0)
        self.stop = threading.Event()
        self.report = WatchReport()
        self.errors: list[Exception] = []
        self.fail = 0  # writes to refuse, as a store locked for too long does
        ready = threading.Event()

        def write(files: list[str], namespace: str) -> int:
            if self.fail:
                self.fail -= 1
                raise sqlite3.OperationalError("database is locked")
            self.written.append((files, namespace))
            return len(files) * (len(files) - 1) // 2

        def run() -> None:
            self.report = watch(
                root,
                write,
                stop=self.stop,
                on_event=lambda _: self.closed.release(),
                on_error=self.errors.append,
                ready=ready,
                tick_s=0.05,
                **options,  # type: ignore[arg-type]
            )

        self.thread = threading.Thread(target=run, daemon=True)
        self.thread.start()
        assert ready.wait(20), "the watch never started"

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
    yield running
    running.finish()


def until(found: Callable[[], bool]) -> None:
    """Wait for ``found()`` (20 s at most), checking every 50 ms."""
    deadline = time.monotonic() + 20
    while not found():
        assert time.monotonic() < deadline, "not within 20 s"
        threading.Event().wait(0.05)


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
        assert process.stderr is not None
        started = process.stderr.readline()  # said once every folder is watched
        assert started.startswith(f"watching {tree} into {store_path} (branch:main)"), started
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


@pytest.mark.filterwarnings("ignore:Callback with id:RuntimeWarning")  # watchdog, new folders
def test_noise_in_left_out_files_neither_holds_a_window_nor_takes_its_places(
    tree: Path, watcher: Watcher
) -> None:
    stop_noise = threading.Event()

    def noise() -> None:  # a dev server's log, written all the time (git ignores *.log)
        while not stop_noise.is_set():
            _save(tree, "server.log", f"{time.time()}\n")
            stop_noise.wait(0.05)

    noisy = threading.Thread(target=noise, daemon=True)
    noisy.start()
    try:
        _save(tree, "src/a.py")
        _save(tree, "src/b.py")
        files, _ = watcher.next_event()  # the window closes although the log goes on
        assert sorted(files) == ["src/a.py", "src/b.py"]
        _save(tree, "src/c.py")
        _save(tree, "src/d.py")
        for i in range(10):  # then an install rewrites many left-out files
            _save(tree, f"node_modules/m/{i}.js")
            _save(tree, f"build/{i}.js")
        files, _ = watcher.next_event()
        assert sorted(files) == ["src/c.py", "src/d.py"]  # the cap of 3 kept the edits
    finally:
        stop_noise.set()
        noisy.join()
    assert watcher.finish().ignored >= 20


def test_a_checkout_is_git_writing_and_closes_the_window_in_its_branch(tree: Path) -> None:
    git(tree, "checkout", "-qb", "feature")
    _save(tree, "src/feature.py")
    _save(tree, "README.md", "changed on the branch\n")
    git(tree, "add", ".")
    git(tree, "commit", "-qm", "feature")
    git(tree, "checkout", "-q", "main")
    running = Watcher(tree, quiet_s=3600)  # only the checkout can close the first window
    try:
        _save(tree, "notes/m1.md")
        _save(tree, "notes/m2.md")
        git(tree, "checkout", "-q", "feature")  # rewrites README.md, creates src/feature.py
        files, namespace = running.next_event()
        assert (sorted(files), namespace) == (["notes/m1.md", "notes/m2.md"], "branch:main")
        _save(tree, "src/x.py")
        _save(tree, "src/y.py")
        git(tree, "checkout", "-q", "main")  # back: the feature window closes
        files, namespace = running.next_event()
        assert (sorted(files), namespace) == (["src/x.py", "src/y.py"], "branch:feature")
    finally:
        report = running.finish()
    assert report.events == 2 and report.by_git >= 2  # git's own writes were never saves
    assert all("README.md" not in files for files, _ in running.written)


@pytest.mark.parametrize("where", ["sub-folder", "worktree"])
def test_a_checkout_is_git_writing_wherever_the_git_folder_is(
    tree: Path, tmp_path: Path, where: str
) -> None:
    # the index lock and HEAD were looked for in PATH/.git only: watching repo/sub (or a
    # linked worktree, whose git folder is repo/.git/worktrees/<name>), a checkout's files
    # were learned as a person's saves, in the old branch's namespace
    git(tree, "checkout", "-qb", "feature")
    for name in ("sub/a.py", "sub/b.py", "sub/c.py"):
        _save(tree, name, "on the branch\n")
    git(tree, "add", ".")
    git(tree, "commit", "-qm", "feature")
    git(tree, "checkout", "-q", "main")
    if where == "worktree":
        checkout = tmp_path / "wt"
        git(tree, "worktree", "add", "-q", "-b", "other", str(checkout), "main")
        root, branch = checkout, "branch:other"
    else:
        checkout = tree
        (tree / "sub").mkdir()
        root, branch = tree / "sub", "branch:main"
    running = Watcher(root, quiet_s=3600)  # only the checkout can close the first window
    try:
        _save(root, "m1.md")
        _save(root, "m2.md")
        threading.Event().wait(0.3)  # the saves reach the watcher before the checkout
        git(checkout, "checkout", "-q", "feature")  # writes a.py, b.py and c.py in sub/
        files, namespace = running.next_event()
        assert (sorted(files), namespace) == (["m1.md", "m2.md"], branch)
        _save(root, "x.py")
    finally:
        report = running.finish()
    assert running.written[-1] == (["x.py"], "branch:feature")
    assert report.by_git >= 3 and report.events == 2  # git's own writes were never saves


def test_git_files_above_a_sub_folder_are_named_as_in_the_root(tree: Path) -> None:
    sub = tree / "sub"
    sub.mkdir()
    watcher = TreeWatcher(sub, lambda files, namespace: 0, WatchSettings(namespace="personal"))
    git_dir = tree.resolve() / ".git"
    assert (watcher.git_dir, watcher.git_outside) == (git_dir, True)
    events = {
        FileCreatedEvent(str(git_dir / "index.lock")): LOCK_TAKEN,
        FileMovedEvent(str(git_dir / "index.lock"), str(git_dir / "index")): LOCK_LET_GO,
        FileModifiedEvent(str(git_dir / "HEAD")): HEAD,
        FileModifiedEvent(str(git_dir / "objects/ab/cdef")): None,
        FileModifiedEvent(str(tree / "README.md")): None,  # outside the watched folder
        FileModifiedEvent(str(sub / "a.py")): Touch("modified", "", "a.py"),
    }
    assert {event: watcher.as_touch(event) for event in events} == events
    (git_dir / "index.lock").write_text("")  # its creation not seen yet: a batch is git's
    watcher.take([Touch("modified", "", "a.py")])
    assert watcher.git_busy and watcher.report.by_git == 1
    (git_dir / "index.lock").unlink()
    watcher.idle()
    assert not watcher.git_busy


def test_a_failed_write_keeps_its_files_for_the_next_attempt(tree: Path) -> None:
    running = Watcher(tree, quiet_s=0.3)
    running.fail = 1  # the store is locked once, for longer than its timeout
    try:
        _save(tree, "a.py")
        _save(tree, "b.py")
        files, _ = running.next_event()
        assert sorted(files) == ["a.py", "b.py"]
        assert [str(e) for e in running.errors] == ["database is locked"]
    finally:
        report = running.finish()
    assert (report.events, report.failed) == (1, 1)


def test_the_watch_refuses_what_it_cannot_watch_before_it_starts(tmp_path: Path) -> None:
    with pytest.raises(InvalidValueError, match="nowhere"):
        watch(tmp_path / "nowhere", lambda files, ns: 0)
    with pytest.raises(InvalidValueError, match="namespace"):
        watch(tmp_path, lambda files, ns: 0, namespace="Bad Space")


def test_synapse_watch_refuses_a_store_it_cannot_write(tree: Path, tmp_path: Path) -> None:
    from files import read_only

    from synapse_retriever.cli import main

    folder = tmp_path / "stores"
    folder.mkdir()
    SynapseStore(folder / "s.db").close()
    with read_only(folder / "s.db", folder):
        assert main(["watch", str(tree), str(folder / "s.db")]) == 2


def test_a_moved_file_takes_what_it_learned_with_it(tree: Path, tmp_path: Path) -> None:
    stop, ready = threading.Event(), threading.Event()
    learned = threading.Semaphore(0)
    errors: list[Exception] = []
    with SynapseStore(tmp_path / "synapses.db") as store:

        def write(files: list[str], namespace: str) -> int:
            return store.reinforce(files, namespace=namespace)

        def run() -> None:
            watch(tree, write, quiet_s=0.3, stop=stop, ready=ready,
                  rename=lambda old, new, ns: store.rename(old, new, namespaces=ns),
                  on_event=lambda _: learned.release(), on_error=errors.append,
                  tick_s=0.05)  # fmt: skip

        # watched from the start: a move into a folder made just before may reach the
        # watch before the folder is watched, as a new file (a race of the test, not a rename)
        (tree / "auth").mkdir()
        thread = threading.Thread(target=run, daemon=True)
        thread.start()
        assert ready.wait(20)
        _save(tree, "pkg/jwt.py")
        _save(tree, "keys.py")
        _save(tree, "login.py")
        assert learned.acquire(timeout=20)  # three edges, one event
        git(tree, "add", ".")
        git(tree, "commit", "-qm", "three files")
        (tree / "pkg" / "jwt.py").rename(tree / "jwt.py")  # by hand: moved at once
        until(lambda: store.edge("jwt.py", "keys.py", "branch:main") is not None)
        assert learned.acquire(timeout=20)  # the move was work: a window of jwt.py alone
        git(tree, "mv", "login.py", "auth/login.py")  # by git: moved, and not a save
        until(lambda: store.edge("auth/login.py", "jwt.py", "branch:main") is not None)
        (tree / "keys.py.new").write_text("saved through a temporary file\n")
        (tree / "keys.py.new").rename(tree / "keys.py")  # nothing learned under .new
        assert learned.acquire(timeout=20)
        (tree / "jwt.py").rename(tree / "auth" / "login.py")  # onto a node with a past
        until(lambda: len(errors) > 0)
        stop.set()
        thread.join(timeout=20)
        now = time.time()
        counts = {
            (a, b): store.edge(a, b, "branch:main").activation_count  # type: ignore[union-attr]
            for a, b in [("jwt.py", "keys.py"), ("auth/login.py", "jwt.py"),
                         ("auth/login.py", "keys.py")]
        }  # fmt: skip
        assert counts == {k: 1 for k in counts}  # moved, never learned twice
        assert store.neighbours("pkg/jwt.py", at=now) == []
        assert store.neighbours("login.py", at=now) == []
    assert [str(e) for e in errors] == [
        "cannot rename 'jwt.py' to 'auth/login.py': 'auth/login.py' already has associations "
        "(a rename does not merge two nodes)"
    ]


def test_moves_settle_when_the_window_closes_in_its_branch_only(tree: Path, tmp_path: Path) -> None:
    stop, ready, learned = threading.Event(), threading.Event(), threading.Semaphore(0)
    errors: list[Exception] = []
    with SynapseStore(tmp_path / "synapses.db") as store:
        store.reinforce(["a.py", "b.py"], namespace="shared", at=time.time() - 60)  # the team's

        def run() -> None:
            watch(tree, lambda files, ns: store.reinforce(files, namespace=ns), quiet_s=0.3,
                  stop=stop, ready=ready, on_event=lambda _: learned.release(),
                  rename=lambda old, new, ns: store.rename(old, new, namespaces=ns),
                  on_error=errors.append, tick_s=0.05)  # fmt: skip

        thread = threading.Thread(target=run, daemon=True)
        thread.start()
        assert ready.wait(20)
        for name in ("a.py", "b.py", "c.py"):
            _save(tree, name)
        assert learned.acquire(timeout=20)  # a, b, c in branch:main
        git(tree, "add", ".")
        git(tree, "commit", "-qm", "three")
        (tree / "a.py").rename(tree / "step.py")  # a chain: once, end to end
        (tree / "step.py").rename(tree / "lib.py")
        (tree / "b.py").rename(tree / "b.py.orig")  # a backup by renaming, then a new b.py
        _save(tree, "b.py", "new content\n")
        _save(tree, "c.py", "edited\n")  # saved in the window, then moved by git
        git(tree, "mv", "c.py", "d.py")
        assert learned.acquire(timeout=20)
        stop.set()
        thread.join(timeout=20)
        now = time.time()
        mine = {o for o, _, _ in store.neighbours("lib.py", at=now, namespace="branch:main")}
        assert mine == {"b.py", "b.py.orig", "d.py"}  # a.py moved to lib.py, c.py to d.py
        assert store.neighbours("step.py", at=now) == []  # the middle of the chain: nothing
        assert store.neighbours("c.py", at=now) == []  # no ghost of the moved file
        assert store.edge("a.py", "b.py", "shared") is not None  # the team's: untouched
        counts = {
            pair: store.edge(*pair, "branch:main").activation_count  # type: ignore[union-attr]
            for pair in [("d.py", "lib.py"), ("b.py", "lib.py"), ("b.py.orig", "lib.py")]
        }
        # moved, then this window; b.py kept its past (its old path came back): the backup
        # is a file of this window only
        assert counts == {("d.py", "lib.py"): 2, ("b.py", "lib.py"): 2, ("b.py.orig", "lib.py"): 1}
    assert errors == []


def _fifo(path: Path) -> None:
    if not hasattr(os, "mkfifo"):
        pytest.skip("no FIFOs on this system")
    os.mkfifo(path)


def test_what_is_not_a_regular_file_is_left_out_never_opened(tree: Path, tmp_path: Path) -> None:
    _fifo(tree / "pipe.txt")  # opened, it would wait for a writer forever
    (tree / "loop1").symlink_to("loop2")
    (tree / "loop2").symlink_to("loop1")
    (tree / "link.py").symlink_to(tree / "README.md")
    with socket.socket(socket.AF_UNIX) as sock:
        sock.bind(str(tree / "s.sock"))
        names = ["README.md", "pipe.txt", "loop1", "link.py", "s.sock", "caf\udce9.py"]
        found: list[set[str]] = []
        sifting = threading.Thread(target=lambda: found.append(ignored(tree, names)), daemon=True)
        sifting.start()
        sifting.join(timeout=20)
        if sifting.is_alive():  # blocked opening the FIFO: release it, then fail
            os.close(os.open(tree / "pipe.txt", os.O_WRONLY | os.O_NONBLOCK))
            pytest.fail("ignored() opened a FIFO and waited for a writer")
    assert found == [set(names) - {"README.md"}]


def test_a_symlink_loop_neither_stops_nor_blinds_the_watch(tree: Path, watcher: Watcher) -> None:
    (tree / "loop1").symlink_to("loop2")
    (tree / "loop2").symlink_to("loop1")
    (tree / "self").symlink_to(".")  # a folder that holds itself
    _save(tree, "a.py")
    _save(tree, "b.py")
    files, _ = watcher.next_event()
    assert sorted(files) == ["a.py", "b.py"]


def test_a_name_that_is_not_utf8_is_left_out_and_the_watch_goes_on(
    tree: Path, watcher: Watcher
) -> None:
    (tree / os.fsdecode(b"caf\xe9.py")).write_text("x\n")
    _save(tree, "a.py")
    _save(tree, "b.py")
    files, _ = watcher.next_event()
    assert sorted(files) == ["a.py", "b.py"]
    (tree / os.fsdecode(b"caf\xe9.py")).rename(tree / "cafe.py")  # renamed to a good name
    _save(tree, "c.py")
    files, _ = watcher.next_event()
    assert sorted(files) == ["c.py", "cafe.py"] and watcher.errors == []


def _synapse_watch(tree: Path, store: Path) -> subprocess.Popen[str]:
    """``synapse-retriever watch`` with an hour-long window, once it says each folder is watched."""
    command = [sys.executable, "-m", "synapse_retriever.cli", "watch", str(tree), str(store),
               "--quiet-s", "3600"]  # fmt: skip
    process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    assert process.stderr is not None
    assert process.stderr.readline().startswith("watching "), "the watch never started"
    return process


def _finish(process: subprocess.Popen[str], sig: signal.Signals | None) -> str:
    """Send ``sig`` (None: none), wait 30 s at most for the process to end; its stderr."""
    try:
        if sig is not None:
            process.send_signal(sig)
        return process.communicate(timeout=30)[1]
    finally:
        if process.poll() is None:
            process.kill()
            process.communicate()


def test_a_fifo_is_never_opened_and_a_sigterm_still_writes_the_open_window(
    tree: Path, tmp_path: Path
) -> None:
    store_path = tmp_path / "synapses.db"
    process = _synapse_watch(tree, store_path)
    try:
        _fifo(tree / "pipe.txt")
        _save(tree, "a.py")
        _save(tree, "b.py")
        threading.Event().wait(0.5)  # the saves reach the watcher
    finally:
        err = _finish(process, signal.SIGTERM)
    assert process.returncode == 0, err
    with SynapseStore(store_path) as store:
        assert store.edge("a.py", "b.py", "branch:main") is not None


def test_synapse_watch_stops_when_its_store_is_replaced_and_leaves_the_backup_whole(
    tree: Path, tmp_path: Path
) -> None:
    # it went on writing, its log over the backup's pages, saying "1 events" each window
    store_path, backup = tmp_path / "synapses.db", tmp_path / "backup.db"
    with SynapseStore(backup) as kept:
        kept.reinforce(["x", "y"], namespace="shared", at=0)
    command = [sys.executable, "-m", "synapse_retriever.cli", "watch", str(tree), str(store_path),
               "--quiet-s", "0.3"]  # fmt: skip
    process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert process.stderr is not None
        assert process.stderr.readline().startswith("watching "), "the watch never started"
        for side in ("", "-wal", "-shm"):
            Path(f"{store_path}{side}").unlink(missing_ok=True)
        backup.rename(store_path)
        _save(tree, "src/jwt.py")
        _save(tree, "src/keys.py")
        _, err = process.communicate(timeout=30)  # it stops by itself
    finally:
        if process.poll() is None:
            process.kill()
            process.communicate()
    assert process.returncode == 2, err
    assert "was deleted, moved or replaced while it was watched" in err
    with SynapseStore(store_path) as restored:
        assert restored.edge("x", "y", namespace="shared") is not None
        assert restored.edge("src/jwt.py", "src/keys.py", "branch:main") is None


def test_the_watched_folder_deleted_is_said_and_the_open_window_written(
    tree: Path, tmp_path: Path
) -> None:
    store_path = tmp_path / "synapses.db"
    process = _synapse_watch(tree, store_path)
    try:
        _save(tree, "a.py")
        _save(tree, "b.py")
        threading.Event().wait(0.5)  # the saves reach the watcher
        shutil.rmtree(tree)
    finally:
        err = _finish(process, None)  # it stops by itself
    assert process.returncode == 2
    assert err.splitlines()[-1] == (
        f"synapse-retriever: error: the watched folder {str(tree)!r} was deleted or moved; "
        "the watch stopped after 1 event (its open window was written)"
    )
    with SynapseStore(store_path) as store:
        assert store.edge("a.py", "b.py", "branch:main") is not None


def test_the_watched_folder_moved_stops_the_watch_after_writing_its_window(
    tree: Path, tmp_path: Path
) -> None:
    written: list[list[str]] = []
    stopped: list[WatchStoppedError] = []
    ready = threading.Event()

    def write(files: list[str], namespace: str) -> int:
        written.append(sorted(files))
        return 1

    def run() -> None:
        try:
            watch(tree, write, quiet_s=3600, ready=ready, tick_s=0.05)
        except WatchStoppedError as exc:
            stopped.append(exc)

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    assert ready.wait(20), "the watch never started"
    _save(tree, "a.py")
    _save(tree, "b.py")
    threading.Event().wait(0.5)  # the saves reach the watcher
    tree.rename(tmp_path / "moved")
    tree.mkdir()  # another folder in its place is not the one watched
    thread.join(timeout=20)
    assert not thread.is_alive(), "the watch went on without its folder"
    assert written == [["a.py", "b.py"]]
    assert len(stopped) == 1 and stopped[0].report.events == 1
    assert "was deleted or moved" in str(stopped[0])


# The watcher's steps, on synthetic batches: real watchdog events, a clock in hand, no thread,
# no sleep and no git (the tree is a folder outside git: `git check-ignore` leaves out nothing,
# and a checkout's branch is given by the test).


class Steps:
    """A :class:`TreeWatcher` on a folder, its writes and renames logged in order, its
    clock set by the test (``now``)."""

    def __init__(self, root: Path, **settings: Any) -> None:
        self.root = root
        self.now = 0.0
        self.log: list[tuple[str, ...]] = []  # ("write", namespace, *files), ("rename", ...)
        self.errors: list[Exception] = []
        self.fail: list[Exception] = []  # raised by the next writes, in turn
        self.refuse: list[Exception] = []  # raised by the next renames, in turn
        settings = {"quiet_s": 60, "namespace": "personal", **settings}
        self.watcher = TreeWatcher(root, self.write, WatchSettings(**settings),
                                   rename=self.rename, on_error=self.errors.append,
                                   clock=lambda: self.now)  # fmt: skip

    def write(self, files: list[str], namespace: str) -> int:
        if self.fail:
            raise self.fail.pop(0)
        self.log.append(("write", namespace, *files))
        return len(files) * (len(files) - 1) // 2

    def rename(self, old: str, new: str, namespace: str) -> int:
        if self.refuse:
            raise self.refuse.pop(0)
        self.log.append(("rename", namespace, old, new))
        return 1

    def save(self, *names: str, at: float | None = None) -> None:
        """Write each file, then take the saves as one batch (at ``at``, else now)."""
        for name in names:
            _save(self.root, name)
        self.take(*[Touch("modified", "", name) for name in names], at=at)

    def move(self, old: str, new: str) -> None:
        """Move the file on disk; its touch, to be taken."""
        (self.root / new).parent.mkdir(parents=True, exist_ok=True)
        (self.root / old).rename(self.root / new)

    def take(self, *batch: Touch, at: float | None = None) -> None:
        self.now = self.now if at is None else at
        self.watcher.take(list(batch))


def moved(old: str, new: str) -> Touch:
    return Touch("moved", old, new)


LOCK_TAKEN = Touch("created", "", ".git/index.lock")
LOCK_LET_GO = Touch("moved", ".git/index.lock", ".git/index")
HEAD = Touch("modified", "", ".git/HEAD")


@pytest.fixture
def steps(tmp_path: Path) -> Steps:
    (tmp_path / "tree").mkdir()
    return Steps(tmp_path / "tree")


def test_an_event_is_a_touch_or_nothing(steps: Steps) -> None:
    base = steps.watcher.base
    events = {
        FileModifiedEvent(str(base / "src/a.py")): Touch("modified", "", "src/a.py"),
        FileCreatedEvent(os.fsencode(base / "b.py")): Touch("created", "", "b.py"),
        FileMovedEvent(str(base / "a.py"), str(base / "lib/a.py")): moved("a.py", "lib/a.py"),
        FileMovedEvent("/elsewhere/x.py", str(base / "x.py")): moved("", "x.py"),  # came in
        FileMovedEvent(str(base / "a.py"), "/elsewhere/a.py"): None,  # went out
        FileDeletedEvent(str(base / "a.py")): None,
        DirModifiedEvent(str(base / "src")): None,
        FileModifiedEvent("/elsewhere/a.py"): None,
        FileModifiedEvent(str(base / "caf\udce9.py")): None,  # a name that is not UTF-8
        FileModifiedEvent(str(base / ".git/objects/ab/cdef")): None,
        FileCreatedEvent(str(base / ".git/index.lock")): LOCK_TAKEN,
        FileDeletedEvent(str(base / ".git/index.lock")): Touch("deleted", "", ".git/index.lock"),
        FileMovedEvent(str(base / ".git/index.lock"), str(base / ".git/index")): LOCK_LET_GO,
        FileModifiedEvent(str(base / ".git/HEAD")): HEAD,
        FileDeletedEvent(str(base / ".git/HEAD")): None,
    }
    assert {event: steps.watcher.as_touch(event) for event in events} == events


def test_a_window_closes_after_a_quiet_spell_as_one_event(steps: Steps) -> None:
    steps.save("a.py", at=0)
    steps.save("b.py", "a.py", at=10)  # a.py again: the latest save counts
    assert not steps.watcher.due(69)  # 59 s after the last save
    steps.now = 69
    steps.watcher.close_if_due()
    assert steps.log == []
    steps.now = 70
    steps.watcher.close_if_due()
    assert steps.log == [("write", "personal", "a.py", "b.py")]  # latest first
    assert (steps.watcher.report.events, steps.watcher.report.edges) == (1, 1)
    assert not steps.watcher.due(10_000)  # closed: nothing is due


def test_the_limit_keeps_the_most_recent_saves(tmp_path: Path) -> None:
    steps = Steps(tmp_path, limit=2)
    for at, name in enumerate(["a.py", "b.py", "c.py"]):
        steps.save(name, at=at)
    steps.watcher.flush()
    assert steps.log == [("write", "personal", "c.py", "b.py")]


def test_what_is_left_out_is_counted_and_never_holds_a_window(tmp_path: Path) -> None:
    steps = Steps(tmp_path, keep_out=frozenset({"synapses.db"}))
    (tmp_path / "logo.png").write_bytes(b"\x89PNG\x00\x01")
    steps.save("synapses.db", "build/out.js", "node_modules/m/index.js")
    steps.take(Touch("modified", "", "logo.png"))
    assert steps.watcher.report.ignored == 4 and len(steps.watcher.window) == 0
    assert not steps.watcher.due(10_000)


def test_a_file_saved_then_gone_is_followed_and_dropped_when_the_window_closes(
    steps: Steps,
) -> None:
    steps.save("a.py", "b.py")
    steps.take(Touch("modified", "", "gone.py"))  # saved, then deleted before it was read
    assert len(steps.watcher.window) == 3  # not judged by whether it is there, yet
    (steps.root / "b.py").unlink()
    steps.watcher.flush()
    assert steps.log == [("write", "personal", "a.py")]


def test_saves_while_git_holds_its_lock_are_gits(steps: Steps) -> None:
    steps.save("mine.py")
    steps.take(LOCK_TAKEN)
    steps.save("checked_out.py")
    steps.take(LOCK_LET_GO)  # git renames its lock onto the index
    steps.save("also_mine.py")
    steps.take(LOCK_TAKEN, Touch("modified", "", "x.py"), Touch("deleted", "", ".git/index.lock"))
    steps.save("again_mine.py")
    steps.watcher.flush()
    assert steps.log == [("write", "personal", "again_mine.py", "also_mine.py", "mine.py")]
    assert steps.watcher.report.by_git == 2


def test_a_lock_whose_removal_was_missed_is_let_go_at_a_quiet_tick(steps: Steps) -> None:
    (steps.root / ".git").mkdir()
    (steps.root / ".git/index.lock").write_text("")
    steps.take(LOCK_TAKEN)
    steps.watcher.idle()
    assert steps.watcher.git_busy  # the lock is there: git is still at work
    (steps.root / ".git/index.lock").unlink()  # and its deletion never reached the watch
    steps.watcher.idle()
    assert not steps.watcher.git_busy


def test_a_checkout_closes_the_window_in_the_branch_its_saves_were_made_on(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    branch = ["branch:main"]
    monkeypatch.setattr(watch_module, "branch_namespace", lambda root: branch[0])
    steps = Steps(tmp_path, namespace=None)
    steps.save("a.py", "b.py")
    steps.take(HEAD)  # HEAD rewritten, the same branch (a commit): the window stays open
    assert steps.log == [] and len(steps.watcher.window) == 2
    branch[0] = "branch:feature"
    steps.take(LOCK_TAKEN, HEAD, Touch("modified", "", "README.md"), LOCK_LET_GO)
    steps.save("c.py", "d.py")
    steps.watcher.flush()
    assert steps.log == [("write", "branch:main", "b.py", "a.py"),
                         ("write", "branch:feature", "d.py", "c.py")]  # fmt: skip
    assert steps.watcher.report.by_git == 1  # the checkout's README.md


def test_a_namespace_given_stays_across_checkouts(
    steps: Steps, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(watch_module, "branch_namespace", lambda root: "branch:feature")
    steps.save("a.py", "b.py")
    steps.take(HEAD)
    assert steps.log == [] and steps.watcher.namespace == "personal"


def test_a_move_in_the_window_is_one_file_renamed_before_the_write(steps: Steps) -> None:
    steps.save("old.py", "other.py")
    steps.move("old.py", "new.py")
    steps.take(moved("old.py", "new.py"))
    steps.watcher.flush()
    assert steps.log == [("rename", "personal", "old.py", "new.py"),
                         ("write", "personal", "new.py", "other.py")]  # fmt: skip
    assert steps.watcher.report.renamed == 1


def test_a_chain_of_moves_settles_once_and_a_move_undone_not_at_all(steps: Steps) -> None:
    for name in ("a.py", "x.py"):
        _save(steps.root, name)
    steps.move("a.py", "step.py")
    steps.move("step.py", "lib/a.py")
    steps.take(moved("a.py", "step.py"), moved("step.py", "lib/a.py"))
    steps.move("x.py", "y.py")
    steps.move("y.py", "x.py")
    steps.take(moved("x.py", "y.py"), moved("y.py", "x.py"))
    steps.watcher.flush()
    assert steps.log[0] == ("rename", "personal", "a.py", "lib/a.py")
    assert [entry for entry in steps.log if entry[0] == "rename"] == [steps.log[0]]


def test_a_backup_by_renaming_is_not_a_move(steps: Steps) -> None:
    steps.save("b.py")
    steps.move("b.py", "b.py.orig")
    steps.take(moved("b.py", "b.py.orig"))
    steps.save("b.py")  # the editor writes the new b.py: its old path is back
    steps.watcher.flush()
    assert steps.log == [("write", "personal", "b.py", "b.py.orig")]


def test_moves_alone_close_a_window_and_a_move_by_git_is_not_a_save(steps: Steps) -> None:
    _save(steps.root, "c.py")
    steps.take(LOCK_TAKEN, at=0)
    steps.move("c.py", "d.py")
    steps.take(moved("c.py", "d.py"), LOCK_LET_GO, at=5)  # git mv
    assert len(steps.watcher.window) == 0 and steps.watcher.report.by_git == 1
    assert not steps.watcher.due(64) and steps.watcher.due(65)  # 60 s after the move
    steps.now = 65
    steps.watcher.close_if_due()
    assert steps.log == [("rename", "personal", "c.py", "d.py")]


def test_a_move_by_git_keeps_a_saved_file_in_its_place(steps: Steps) -> None:
    steps.save("c.py", at=0)
    steps.save("e.py", at=1)
    steps.take(LOCK_TAKEN, at=2)
    steps.move("c.py", "d.py")
    steps.take(moved("c.py", "d.py"), LOCK_LET_GO, at=2)
    assert steps.watcher.window.close() == ["e.py", "d.py"]  # d.py kept c.py's save time


def test_a_move_out_of_what_is_learned_leaves_the_window(steps: Steps) -> None:
    steps.save("a.py", "b.py")
    steps.move("a.py", "build/a.py")
    steps.take(moved("a.py", "build/a.py"))
    steps.watcher.flush()
    assert steps.log == [("write", "personal", "b.py")]  # and no rename into build/
    assert steps.watcher.report.ignored == 1


def test_a_failed_write_keeps_its_files_and_the_last_attempt_raises(steps: Steps) -> None:
    steps.save("a.py", at=0)
    steps.save("b.py", at=1)
    steps.fail = [sqlite3.OperationalError("database is locked")] * 2
    steps.now = 100
    steps.watcher.flush()
    assert [str(e) for e in steps.errors] == ["database is locked"]
    assert steps.watcher.report.failed == 1 and len(steps.watcher.window) == 2
    with pytest.raises(sqlite3.OperationalError):
        steps.watcher.flush(last=True)  # the watch is ending: said to the caller
    steps.watcher.flush()
    assert steps.log == [("write", "personal", "b.py", "a.py")]  # in the order saved


def test_a_rename_refused_is_said_and_one_that_fails_waits_for_the_next_window(
    steps: Steps,
) -> None:
    for name in ("a.py", "b.py"):
        _save(steps.root, name)
    steps.move("a.py", "c.py")
    steps.move("b.py", "d.py")
    steps.take(moved("a.py", "c.py"), moved("b.py", "d.py"))
    steps.refuse = [InvalidValueError("'c.py' already has associations"),
                    sqlite3.OperationalError("database is locked")]  # fmt: skip
    steps.watcher.flush()
    assert [str(e) for e in steps.errors] == ["'c.py' already has associations",
                                              "database is locked"]  # fmt: skip
    assert steps.watcher.moves == {"d.py": "b.py"}  # only the store's failure waits
    steps.watcher.flush()  # the moved files were written under their new names
    assert steps.log == [("write", "personal", "d.py", "c.py"),
                         ("rename", "personal", "b.py", "d.py")]  # fmt: skip


def test_a_rename_refused_in_the_last_window_is_said_and_the_window_still_written(
    steps: Steps,
) -> None:
    for name in ("a.py", "b.py"):
        _save(steps.root, name)
    steps.move("a.py", "c.py")  # onto a node with a past of its own, then Ctrl-C
    steps.save("b.py")
    steps.take(moved("a.py", "c.py"))
    steps.refuse = [InvalidValueError("'c.py' already has associations")]
    steps.watcher.flush(last=True)  # refused for good: said, not raised before the write
    assert [str(e) for e in steps.errors] == ["'c.py' already has associations"]
    assert steps.log == [("write", "personal", "c.py", "b.py")]


def test_a_rename_that_fails_in_the_last_window_is_raised_after_the_window_is_written(
    steps: Steps,
) -> None:
    # the store away for a moment at Ctrl-C: the rename's error was raised before the
    # window's files were tried, and the watch ended without them
    for name in ("a.py", "b.py"):
        _save(steps.root, name)
    steps.move("a.py", "c.py")
    steps.save("b.py")
    steps.take(moved("a.py", "c.py"))
    steps.refuse = [sqlite3.OperationalError("database is locked")]
    with pytest.raises(sqlite3.OperationalError, match="database is locked") as failed:
        steps.watcher.flush(last=True)  # no next window: said to the caller, after the write
    assert steps.log == [("write", "personal", "c.py", "b.py")]
    assert steps.watcher.moves == {"c.py": "a.py"} and steps.errors == []
    assert failed.value.__notes__ == [  # what the command line prints after the error
        "the move of 'a.py' to 'c.py' was not learned",
        "the last window was written: 2 files",
    ]


def test_a_write_that_fails_in_the_last_window_is_raised_with_its_own_cause(
    steps: Steps,
) -> None:
    # it was raised "from" the move that failed before it, or from None: the store's own
    # error behind it (a locked or broken file) was dropped from the traceback
    for name in ("a.py", "b.py"):
        _save(steps.root, name)
    steps.save("a.py", "b.py")
    causes = [sqlite3.OperationalError("disk I/O error") for _ in range(2)]
    steps.fail = [StorageUnavailableError("the store is away") for _ in causes]
    for failed, cause in zip(steps.fail, causes, strict=True):
        failed.__cause__ = cause
    with pytest.raises(StorageUnavailableError) as raised:
        steps.watcher.flush(last=True)
    assert raised.value.__cause__ is causes[0]
    steps.move("a.py", "c.py")  # and a move that fails first: said in a note, not the cause
    steps.take(moved("a.py", "c.py"))
    steps.refuse = [sqlite3.OperationalError("database is locked")]
    with pytest.raises(StorageUnavailableError) as raised:
        steps.watcher.flush(last=True)
    assert raised.value.__cause__ is causes[1]
    assert any("database is locked" in note for note in raised.value.__notes__)


def test_the_settings_are_checked_when_a_watcher_is_built(tmp_path: Path) -> None:
    with pytest.raises(InvalidValueError, match="root must be a folder"):
        TreeWatcher(tmp_path / "nowhere", lambda files, ns: 0, WatchSettings(namespace="Bad"))
    with pytest.raises(InvalidValueError, match="namespace"):
        TreeWatcher(tmp_path, lambda files, ns: 0, WatchSettings(namespace="Bad", quiet_s=0))
    with pytest.raises(InvalidValueError, match="quiet_s"):
        TreeWatcher(tmp_path, lambda files, ns: 0, WatchSettings(quiet_s=0))


def test_the_watch_stops_for_its_store_gone_or_replaced_not_for_a_failed_look(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # a look that failed for a moment (EIO, ESTALE on a network file system) stopped it
    path, other = tmp_path / "synapses.db", tmp_path / "other.db"
    path.write_bytes(b"")
    other.write_bytes(b"")
    opened = (path.stat().st_dev, path.stat().st_ino)
    assert not _replaced(str(path), opened)
    with monkeypatch.context() as patched:
        failing_stat(patched, path, errno.ESTALE)
        assert not _replaced(str(path), opened)
    other.replace(path)
    assert _replaced(str(path), opened)
    path.unlink()
    assert _replaced(str(path), opened)
