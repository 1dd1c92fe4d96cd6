"""Learning from a person's editor: files saved within one activity window are used together.

A :class:`ActivityWindow` gathers the files touched while work goes on; a quiet spell
(``quiet_s``, five minutes by default) closes it, and its files become one co-activation
event, capped at ``limit`` files, the most recently touched kept. A rename is recorded, not
applied to the store: inside the window the file counts once, under its new name, and the
edges learned under the old name stay where they are (they decay like any other).

:func:`watch` runs it over a working tree with watchdog: ``.git/``, what git ignores, build
output, binaries and the store's own files are left out, and the namespace follows the
checked-out branch (``branch:<name>``) unless one is given. Each event is one transaction;
stopping (Ctrl-C) closes the open window first.

Examples
--------
>>> window = ActivityWindow(quiet_s=300, limit=3)
>>> for at, path in [(0, "a.py"), (10, "b.py"), (20, "a.py"), (30, "c.py"), (40, "d.py")]:
...     window.touch(path, at)
>>> window.due(100), window.due(400)  # five quiet minutes after the last save
(False, True)
>>> window.close()  # the three most recently touched, latest first
['d.py', 'c.py', 'a.py']
"""

from __future__ import annotations

import os
import queue
import subprocess
import threading
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

from synapse_retriever.config import validate_namespace
from synapse_retriever.errors import InvalidValueError

__all__ = [
    "BUILD_FOLDERS",
    "ActivityWindow",
    "WatchReport",
    "branch_namespace",
    "ignored",
    "watch",
]

BUILD_FOLDERS = frozenset(
    {
        ".git",
        ".hg",
        ".svn",
        ".venv",
        "venv",
        "node_modules",
        "__pycache__",
        ".mypy_cache",
        ".pytest_cache",
        ".ruff_cache",
        ".tox",
        "build",
        "dist",
        "target",
        ".idea",
        ".vscode",
    }
)
"""Folders whose files are never events: version control, environments, caches, build output."""

BINARY_PROBE = 8192
"""Bytes read from a file to tell a binary (it holds a NUL byte) from text."""


class ActivityWindow:
    """Files touched while work goes on; a quiet spell closes the window (pure: no I/O).

    Parameters
    ----------
    quiet_s : float
        Seconds without a touch that close the window.
    limit : int
        Files an event keeps at most: the most recently touched.
    """

    def __init__(self, quiet_s: float = 300.0, limit: int = 32) -> None:
        if not quiet_s > 0:
            raise InvalidValueError(f"quiet_s must be > 0 seconds, got {quiet_s!r}")
        if isinstance(limit, bool) or not isinstance(limit, int) or limit < 2:
            raise InvalidValueError(f"limit must be an integer >= 2, got {limit!r}")
        self.quiet_s = float(quiet_s)
        self.limit = limit
        self._touched: dict[str, float] = {}  # path -> its latest touch, in order of it
        self.last = -float("inf")

    def __len__(self) -> int:
        return len(self._touched)

    def touch(self, path: str, at: float) -> None:
        """Record a save of ``path`` at ``at`` (seconds)."""
        self._touched.pop(path, None)  # re-inserted: the order is the order of latest touch
        self._touched[path] = at
        self.last = max(self.last, at)

    def rename(self, old: str, new: str, at: float) -> None:
        """``old`` became ``new``: the window holds it once, under its new name.

        Examples
        --------
        >>> window = ActivityWindow()
        >>> window.touch("old.py", 0); window.touch("b.py", 1); window.rename("old.py", "new.py", 2)
        >>> window.close()
        ['new.py', 'b.py']
        """
        self._touched.pop(old, None)
        self.touch(new, at)

    def due(self, now: float) -> bool:
        """Whether the window is open and has been quiet for ``quiet_s``."""
        return bool(self._touched) and now - self.last >= self.quiet_s

    def close(self) -> list[str]:
        """The window's files, most recently touched first, at most ``limit``; it empties."""
        latest = list(reversed(self._touched))[: self.limit]
        self._touched.clear()
        self.last = -float("inf")
        return latest


def branch_namespace(root: str | os.PathLike[str]) -> str:
    """``branch:<name>`` of the branch checked out in the git tree at ``root``; ``personal``
    for a detached head or a folder outside git.

    Examples
    --------
    >>> import tempfile
    >>> branch_namespace(tempfile.mkdtemp())
    'personal'
    """
    found = _git(root, ["rev-parse", "--abbrev-ref", "HEAD"])
    name = found.strip() if found is not None else ""
    return f"branch:{name}" if name and name != "HEAD" else "personal"


def ignored(
    root: str | os.PathLike[str], paths: Sequence[str], keep_out: Iterable[str] = ()
) -> set[str]:
    """Those of ``paths`` (relative to ``root``) that are not events: in a build or tool
    folder (:data:`BUILD_FOLDERS`), ignored by git, in ``keep_out`` (the store's own files),
    binary, or gone.

    Examples
    --------
    >>> import tempfile, pathlib
    >>> root = pathlib.Path(tempfile.mkdtemp())
    >>> _ = (root / "a.py").write_text("x = 1")
    >>> _ = (root / "logo.png").write_bytes(b"\\x89PNG\\x00\\x01")
    >>> sorted(ignored(root, ["a.py", "logo.png", "build/out.js", "missing.py"]))
    ['build/out.js', 'logo.png', 'missing.py']
    """
    base = Path(root)
    out = set(keep_out)
    left: set[str] = set()
    for path in paths:
        built = any(part in BUILD_FOLDERS for part in Path(path).parts[:-1])
        if path in out or built or _binary_or_gone(base / path):
            left.add(path)
    rest = [p for p in paths if p not in left]
    if rest:
        found = _git(root, ["check-ignore", "--stdin", "-z"], "\0".join(rest) + "\0")
        if found:
            left.update(p for p in found.split("\0") if p)
    return left


def _binary_or_gone(path: Path) -> bool:
    try:
        with path.open("rb") as handle:
            return b"\0" in handle.read(BINARY_PROBE)
    except OSError:  # deleted since, or a folder
        return True


def _git(root: str | os.PathLike[str], args: list[str], stdin: str | None = None) -> str | None:
    """What ``git args`` prints in ``root``, or None where git fails (not a repository)."""
    try:
        done = subprocess.run(
            ["git", "-C", os.fspath(root), *args],
            input=stdin,
            capture_output=True,
            text=True,
            timeout=30,
            check=False,
        )
    except (OSError, subprocess.SubprocessError):
        return None
    return done.stdout if done.returncode in (0, 1) else None


@dataclass
class WatchReport:
    """What :func:`watch` learned: events written and edges reinforced, so far; files left
    out (ignored, binary, gone, or written by git itself), windows that failed to be
    written (kept for the next attempt), and nodes renamed with what they had learned."""

    events: int = 0
    edges: int = 0
    ignored: int = 0
    by_git: int = 0
    failed: int = 0
    renamed: int = 0


GIT_LOCK = ".git/index.lock"
"""Held by git while it rewrites the working tree (checkout, pull, merge, rebase, stash,
reset): saves seen while it exists are git's, not a person's."""

GIT_HEAD = ".git/HEAD"
"""Rewritten when another branch is checked out: the open window closes in the old one."""


def watch(
    root: str | os.PathLike[str],
    write: Callable[[list[str], str], int],
    *,
    quiet_s: float = 300.0,
    limit: int = 32,
    namespace: str | None = None,
    keep_out: Iterable[str] = (),
    stop: threading.Event | None = None,
    on_event: Callable[[WatchReport], None] | None = None,
    on_error: Callable[[Exception], None] | None = None,
    rename: Callable[[str, str], int] | None = None,
    ready: threading.Event | None = None,
    tick_s: float = 0.5,
) -> WatchReport:
    """Watch the tree at ``root`` until ``stop`` is set (or Ctrl-C), calling
    ``write(files, namespace)`` for each closed window; returns what was learned.

    ``write`` gets the window's files relative to ``root``, with ``/`` as separator, and
    returns the edges it wrote (``SynapseStore.reinforce``, one transaction). Saves are
    sifted as they arrive (:func:`ignored`), so a file that is never learned neither keeps
    a window open nor takes a place under ``limit``. Saves made by git itself (while it
    holds ``.git/index.lock``) are left out, and checking out another branch closes the
    open window in the namespace its saves were made in. A write that raises (a store
    locked for longer than its timeout, a server away) is reported to ``on_error`` and
    its files stay in the window for the next attempt; the open window is written before
    returning, however the watch ends. ``ready`` is set once every folder is watched.

    A file moved within the tree (by hand, by an editor or by ``git mv``) is passed to
    ``rename(old, new)`` at once (``SynapseStore.rename``: the node moves with what it
    learned); inside the open window it counts once, under its new name. A ``rename``
    that raises goes to ``on_error``, and the watch goes on.
    """
    try:
        from watchdog.events import (
            FileCreatedEvent,
            FileDeletedEvent,
            FileModifiedEvent,
            FileMovedEvent,
            FileSystemEvent,
            FileSystemEventHandler,
        )
        from watchdog.observers import Observer
    except ImportError:  # pragma: no cover - the extra is in the dev requirements
        raise ImportError(
            "watching a tree needs the watch extra: pip install 'synapse-retriever[watch]'"
        ) from None

    if not Path(root).is_dir():
        raise InvalidValueError(f"root must be a folder to watch, got {os.fspath(root)!r}")
    if namespace is not None:
        namespace = validate_namespace(namespace)
    window = ActivityWindow(quiet_s, limit)
    base = Path(root).resolve()
    touches: queue.Queue[tuple[str, str, str]] = queue.Queue()

    def relative(path: str | bytes) -> str:
        text = os.fsdecode(path)
        try:
            return Path(text).resolve().relative_to(base).as_posix()
        except ValueError:
            return ""

    class Handler(FileSystemEventHandler):
        def on_any_event(self, event: FileSystemEvent) -> None:
            if event.is_directory:
                return
            new = relative(getattr(event, "dest_path", "") or event.src_path)
            old = relative(event.src_path) if event.event_type == "moved" else ""
            if new.startswith(".git/") or old.startswith(".git/"):
                if GIT_LOCK in (new, old) or new == GIT_HEAD:  # git's own state, in order
                    touches.put((event.event_type, old, new))
            elif new and event.event_type != "deleted":
                touches.put((event.event_type, old, new))

    report = WatchReport()
    stop = stop or threading.Event()
    current = namespace or branch_namespace(base)
    git_busy = False

    def flush(*, last: bool = False) -> None:
        files = window.close()
        if not files:
            return
        try:
            edges = write(files, current)
        except Exception as exc:  # kept for the next attempt, in the order they were saved
            report.failed += 1
            for path in reversed(files):
                window.touch(path, time.time())
            if last or on_error is None:
                raise
            on_error(exc)
            return
        report.edges += edges
        report.events += 1
        if on_event is not None:
            on_event(report)

    def moved(old: str, new: str) -> None:
        if rename is None:
            return
        try:
            report.renamed += rename(old, new) > 0
        except Exception as exc:  # e.g. the new name already has associations
            if on_error is None:
                raise
            on_error(exc)

    def take(batch: list[tuple[str, str, str]]) -> None:
        """Apply a batch of touches, in order; one ``git check-ignore`` for all of it."""
        nonlocal git_busy, current
        saved = {new for kind, _, new in batch if not new.startswith(".git/")}
        left = ignored(base, sorted(saved), keep_out) if saved else set()
        now = time.time()
        for kind, old, new in batch:
            if GIT_LOCK in (new, old):
                if kind == "created" and new == GIT_LOCK:
                    git_busy = True
                elif kind == "deleted" or old == GIT_LOCK:  # renamed to the index, or removed
                    git_busy = False
            elif new == GIT_HEAD:
                checked_out = namespace or branch_namespace(base)
                if checked_out != current:
                    flush()  # the window's saves were made on the branch checked out before
                    current = checked_out
            elif new in left:
                report.ignored += 1
            elif kind == "moved" and old:
                moved(old, new)  # a move is a move whoever made it: git mv too
                if git_busy:
                    report.by_git += 1
                else:
                    window.rename(old, new, now)
            elif git_busy:
                report.by_git += 1
            else:
                window.touch(new, now)

    observer = Observer()
    observer.daemon = True  # never keeps the process alive after the watch returns
    # only what a save makes: the kernel's queue then holds one event per save, not three
    # (open, modify, close), and reads in the tree (an indexer, grep) never wake the watch;
    # deletions for git's lock only
    saves: list[type[FileSystemEvent]] = [
        FileModifiedEvent,
        FileCreatedEvent,
        FileMovedEvent,
        FileDeletedEvent,
    ]
    observer.schedule(Handler(), os.fspath(base), recursive=True, event_filter=saves)
    observer.start()  # the folders' watches are added before it returns
    if ready is not None:
        ready.set()

    def drain(first: tuple[str, str, str] | None = None) -> None:
        batch = [] if first is None else [first]
        while True:
            try:
                batch.append(touches.get_nowait())
            except queue.Empty:
                break
        if batch:
            take(batch)

    try:
        while not stop.is_set():
            try:
                first = touches.get(timeout=tick_s)
            except queue.Empty:
                if git_busy and not (base / GIT_LOCK).exists():  # its removal was missed
                    git_busy = False
                if window.due(time.time()):
                    flush()
                continue
            if window.due(time.time()):
                flush()
            drain(first)
    except KeyboardInterrupt:
        pass
    finally:
        observer.stop()
        observer.join(timeout=5)
        drain()  # what was saved before the stop still counts
        flush(last=True)
    return report
