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

Only regular files are ever opened: a FIFO, a device, a socket or a symbolic link (a loop of
links among them) is left out without being opened or followed, and so is a file whose name
is not UTF-8 (it could not be a node id). If the watched folder is deleted or moved, the
watch writes the open window and raises :class:`WatchStoppedError`.

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

import math
import os
import queue
import stat
import subprocess
import threading
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

from synapse_retriever.capture.coactivation import check_unicode
from synapse_retriever.config import validate_namespace
from synapse_retriever.errors import InvalidTypeError, InvalidValueError, SynapseError

__all__ = [
    "BUILD_FOLDERS",
    "ActivityWindow",
    "WatchReport",
    "WatchStoppedError",
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
        if isinstance(quiet_s, bool) or not isinstance(quiet_s, (int, float)):
            raise InvalidTypeError(f"quiet_s must be a number of seconds, got {quiet_s!r}")
        if not 0 < quiet_s < math.inf:
            raise InvalidValueError(f"quiet_s must be a finite number > 0, got {quiet_s!r}")
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

    def follow(self, old: str, new: str | None) -> None:
        """``old`` became ``new`` without being saved: a file of the window keeps its place
        under its new name (None: it leaves the window); another is not added.

        Examples
        --------
        >>> window = ActivityWindow()
        >>> window.touch("a.py", 0); window.follow("a.py", "lib/a.py"); window.follow("x", "y")
        >>> window.close()
        ['lib/a.py']
        """
        if old in self._touched:
            at = self._touched.pop(old)
            if new is not None:
                self._touched[new] = at  # its own time: the latest touch stays the latest
                self._order_by_time()

    def _order_by_time(self) -> None:
        self._touched = dict(sorted(self._touched.items(), key=lambda item: item[1]))

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
    root: str | os.PathLike[str],
    paths: Sequence[str],
    keep_out: Iterable[str] = (),
    *,
    gone: bool = True,
) -> set[str]:
    """Those of ``paths`` (relative to ``root``) that are not events: in a build or tool
    folder (:data:`BUILD_FOLDERS`), ignored by git, in ``keep_out`` (the store's own files),
    named in bytes that are not UTF-8, binary, not a regular file (a FIFO, a device, a
    socket, a symbolic link: never opened), or gone (unless ``gone`` is False: a file
    saved, then moved before it is read).

    Examples
    --------
    >>> import tempfile, pathlib
    >>> root = pathlib.Path(tempfile.mkdtemp())
    >>> _ = (root / "a.py").write_text("x = 1")
    >>> _ = (root / "logo.png").write_bytes(b"\\x89PNG\\x00\\x01")
    >>> os.mkfifo(root / "pipe.txt")  # never opened: opening a FIFO waits for a writer
    >>> sorted(ignored(root, ["a.py", "logo.png", "build/out.js", "missing.py", "pipe.txt"]))
    ['build/out.js', 'logo.png', 'missing.py', 'pipe.txt']
    """
    base = Path(root)
    out = set(keep_out)
    left: set[str] = set()
    for path in paths:
        built = any(part in BUILD_FOLDERS for part in Path(path).parts[:-1])
        text = _text_file(base / path) if _utf8(path) else False
        if path in out or built or text is False or (text is None and gone):
            left.add(path)
    rest = [p for p in paths if p not in left]
    if rest:
        found = _git(root, ["check-ignore", "--stdin", "-z"], "\0".join(rest) + "\0")
        if found is None and len(rest) > 1:  # one path git refuses (in a submodule) fails
            found = "\0".join(  # them all: ask path by path
                _git(root, ["check-ignore", "--stdin", "-z"], path + "\0") or "" for path in rest
            )
        if found:
            left.update(p for p in found.split("\0") if p)
    return left


_OPEN_FLAGS = (
    os.O_RDONLY
    | getattr(os, "O_NONBLOCK", 0)  # a FIFO put in a file's place meanwhile does not block
    | getattr(os, "O_NOFOLLOW", 0)  # nor is a link put there followed
    | getattr(os, "O_NOCTTY", 0)
)


def _text_file(path: Path) -> bool | None:
    """Whether ``path`` is a regular file of text (no NUL byte in its first
    :data:`BINARY_PROBE` bytes); False for a binary file, a file that cannot be read, and
    anything but a regular file (a FIFO, a device, a socket, a symbolic link), which is
    never opened; None if it is gone (deleted or moved since) or a folder."""
    try:
        mode = path.lstat().st_mode
    except OSError:  # gone, or a name the file system refuses
        return None
    if stat.S_ISDIR(mode):
        return None
    if not stat.S_ISREG(mode):
        return False
    try:
        handle = os.open(path, _OPEN_FLAGS)
    except FileNotFoundError:
        return None
    except OSError:
        return False
    try:  # judged again on the handle: the name may have changed hands since
        return stat.S_ISREG(os.fstat(handle).st_mode) and b"\0" not in os.read(handle, BINARY_PROBE)
    except OSError:
        return False
    finally:
        os.close(handle)


def _regular_file(path: Path) -> bool:
    """Whether ``path`` is a regular file, not followed if it is a symbolic link."""
    try:
        return stat.S_ISREG(path.lstat().st_mode)
    except OSError:  # gone, or a name the file system refuses
        return False


def _utf8(path: str) -> bool:
    """Whether a path holds no lone surrogate (what a name in bytes that are not UTF-8
    becomes): such a name could not be a node id."""
    try:
        check_unicode("file name", path)
    except InvalidValueError:
        return False
    return True


def _identity(folder: Path) -> tuple[int, int] | None:
    """The device and inode of ``folder``; None if it is not a folder there any more."""
    try:
        found = folder.stat()
    except OSError:
        return None
    return (found.st_dev, found.st_ino) if stat.S_ISDIR(found.st_mode) else None


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


class WatchStoppedError(SynapseError, RuntimeError):
    """:func:`watch` could not go on: the folder it watched was deleted or moved (or
    another put in its place), or its file system events stopped arriving. The open window
    was written first; :attr:`report` says what the watch learned.

    Examples
    --------
    >>> error = WatchStoppedError("the watched folder '/src/app' was deleted or moved",
    ...                           WatchReport(events=3))
    >>> str(error)
    "the watched folder '/src/app' was deleted or moved; the watch stopped after 3 events \
(its open window was written)"
    """

    def __init__(self, why: str, report: WatchReport) -> None:
        super().__init__(
            f"{why}; the watch stopped after {report.events} events (its open window was written)"
        )
        self.report = report


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
    rename: Callable[[str, str, str], int] | None = None,
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
    ``rename(old, new, namespace)`` when the window closes, before its files are written
    (``SynapseStore.rename``: the node moves with what it learned there); inside the
    window it counts once, under its new name. A move undone, a chain of moves (once, end
    to end), an old path that is back (an editor's backup by renaming) and a file gone or
    left out are not renames. A ``rename`` that raises goes to ``on_error``; the watch goes
    on (a store that is away keeps the move for the next window).

    Only regular files are opened (:func:`ignored`), and a file whose name is not UTF-8 is
    left out, so neither a FIFO, a device, a loop of symbolic links nor such a name stops
    or blocks the watch.

    Raises
    ------
    WatchStoppedError
        The folder was deleted or moved while watched (checked every ``tick_s``), or the
        file system events stopped arriving (watchdog's thread ended); the open window
        was written first.
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
    identity = _identity(base)
    touches: queue.Queue[tuple[str, str, str]] = queue.Queue()

    def relative(path: str | bytes) -> str:
        """A path watchdog reports, relative to ``base``; "" outside it, or for a name that
        is not UTF-8. Never resolved: links (a loop of them) are not followed."""
        text = os.path.normpath(os.fsdecode(path))
        try:
            found = Path(text).relative_to(base).as_posix()
        except ValueError:
            return ""
        return found if found != "." and _utf8(found) else ""

    class Handler(FileSystemEventHandler):
        def on_any_event(self, event: FileSystemEvent) -> None:
            if event.is_directory:
                return
            new = relative(getattr(event, "dest_path", "") or event.src_path)
            old = relative(event.src_path) if event.event_type == "moved" else ""
            if new.startswith(".git/") or old.startswith(".git/"):
                rewritten = new == GIT_HEAD and event.event_type != "deleted"
                if GIT_LOCK in (new, old) or rewritten:  # git's own state, in order
                    touches.put((event.event_type, old, new))
            elif new and event.event_type != "deleted":
                touches.put((event.event_type, old, new))

    report = WatchReport()
    gone = False  # the watched folder itself: deleted or moved
    stop = stop or threading.Event()
    current = namespace or branch_namespace(base)
    git_busy = False
    moves: dict[str, str] = {}  # path now -> the path it had when the window opened
    moved_at = -float("inf")

    def flush(*, last: bool = False) -> None:
        settle_moves(last=last)  # first: the window's files then land on the moved nodes
        # a file deleted since its save is not written; all are, if the folder went away
        here = _identity(base) == identity
        files = [path for path in window.close() if not here or _regular_file(base / path)]
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

    def settle_moves(*, last: bool) -> None:
        """Rename the nodes of the files that moved in this window, in its namespace: a
        chain of moves once, from its first path to its last; not a move undone, nor one
        whose old path is back (an editor's backup by renaming, then a new file), nor one
        whose file is gone or left out now."""
        settled = [(old, new) for new, old in moves.items() if old != new]
        moves.clear()
        if rename is None or not settled:
            return
        out = ignored(base, [new for _, new in settled], keep_out)
        for old, new in settled:
            if new in out or (base / old).exists():
                continue
            try:
                report.renamed += rename(old, new, current) > 0
            except InvalidValueError as exc:  # the new path has a past of its own: said
                if on_error is None or last:
                    raise
                on_error(exc)
            except Exception as exc:  # the store is away: the move waits for the next window
                moves.setdefault(new, old)
                if on_error is None or last:
                    raise
                on_error(exc)

    def take(batch: list[tuple[str, str, str]]) -> None:
        """Apply a batch of touches, in order; one ``git check-ignore`` for all of it."""
        nonlocal git_busy, current, moved_at
        final: dict[str, str] = {}  # where a path of the batch ends, after its moves in it
        for kind, old, new in reversed(batch):
            if kind == "moved" and old:
                final[old] = final.get(new, new)
        saved = {final.get(new, new) for kind, _, new in batch if not new.startswith(".git/")}
        # judged where each file ends, and not yet by whether it is there: one saved, then
        # moved before this batch is read, is followed by its move (the window drops what
        # is gone when it closes)
        left = ignored(base, sorted(saved), keep_out, gone=False) if saved else set()
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
            elif kind == "moved" and old:  # a move is a move whoever made it: git mv too
                moves[new] = moves.pop(old, old)
                moved_at = now
                if final.get(new, new) in left:  # moved out of what is learned
                    report.ignored += 1
                    window.follow(old, None)
                elif git_busy:  # not a save: the window only follows the file
                    report.by_git += 1
                    window.follow(old, new)
                else:
                    window.rename(old, new, now)
            elif final.get(new, new) in left:
                report.ignored += 1
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

    def due(now: float) -> bool:  # a quiet spell after saves, or after moves alone
        return window.due(now) or (bool(moves) and now - moved_at >= window.quiet_s)

    def drain(first: tuple[str, str, str] | None = None) -> None:
        batch = [] if first is None else [first]
        while True:
            try:
                batch.append(touches.get_nowait())
            except queue.Empty:
                break
        if batch:
            take(batch)

    checked = time.monotonic()
    try:
        while not stop.is_set():
            if time.monotonic() - checked >= tick_s:  # at most once a tick, saves or not
                checked = time.monotonic()
                gone = _identity(base) != identity
                if gone or not observer.is_alive():
                    break
            try:
                first = touches.get(timeout=tick_s)
            except queue.Empty:
                if git_busy and not (base / GIT_LOCK).exists():  # its removal was missed
                    git_busy = False
                if due(time.time()):
                    flush()
                continue
            if due(time.time()):
                flush()
            drain(first)
    except KeyboardInterrupt:
        pass
    finally:
        alive = observer.is_alive()
        observer.stop()
        observer.join(timeout=5)
        drain()  # what was saved before the stop still counts
        flush(last=True)
    if gone:
        raise WatchStoppedError(
            f"the watched folder {os.fspath(root)!r} was deleted or moved", report
        )
    if not alive and not stop.is_set():
        raise WatchStoppedError(f"the file system events of {os.fspath(root)!r} stopped", report)
    return report
