"""Learning from a person's editor: files saved within one activity window are used together.

A :class:`ActivityWindow` gathers the files touched while work goes on; a quiet spell
(``quiet_s``, five minutes by default) closes it, and its files become one co-activation
event, capped at ``limit`` files, the most recently touched kept. The window records a
rename: inside it the file counts once, under its new name; :func:`watch` also moves the
file's node, its edges and uses, to the new name in the store when the window closes.

:func:`watch` runs it over a working tree with watchdog: ``.git/``, what git ignores, build
output, binaries and the store's own files are left out, and the namespace follows the
checked-out branch (``branch:<name>``) unless one is given. Each event is one transaction;
stopping (Ctrl-C) closes the open window first.

How a window of saves becomes one co-activation event, step by step (each a method of
:class:`TreeWatcher`, the state machine :func:`watch` builds and runs):

1. watchdog reports a save, a move or a deletion; :meth:`~TreeWatcher.as_touch` keeps it
   as a :class:`Touch` (path relative to the tree) unless it is a folder's, a deletion, or
   in ``.git/`` (but git's index lock, taken or let go, and ``HEAD`` rewritten);
2. the touches waiting are taken as one batch (:meth:`~TreeWatcher.take`), sifted once
   (:meth:`~TreeWatcher.left_out`, where each file ends after the batch's moves), and each
   goes to its step: git taking or letting go of its index lock
   (:meth:`~TreeWatcher.git_lock`: while it holds it, saves are git's, not kept), ``HEAD``
   rewritten (:meth:`~TreeWatcher.checkout`: another branch closes the window in the old
   one's namespace), a move (:meth:`~TreeWatcher.move`) or a save
   (:meth:`~TreeWatcher.save`), which touches the :class:`ActivityWindow`;
3. once the window has been quiet for ``quiet_s`` (:meth:`~TreeWatcher.due`), at a
   checkout, or when the watch stops, :meth:`~TreeWatcher.flush` closes it: its moves are
   settled first (:meth:`~TreeWatcher.settle_moves`: ``rename(old, new, namespace)``), the
   files gone since are dropped, and ``write(files, namespace)`` gets the rest, at most
   ``limit``, the most recently touched first: one co-activation event, one transaction.

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

import importlib
import math
import os
import queue
import stat
import subprocess
import threading
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, NamedTuple

from synapse_retriever.capture.coactivation import is_node_id
from synapse_retriever.capture.gitlog import git_environment
from synapse_retriever.config import Learning, validate_namespace
from synapse_retriever.errors import (
    InvalidTypeError,
    InvalidValueError,
    MissingExtraError,
    SynapseError,
    shown,
)

if TYPE_CHECKING:
    from watchdog.events import FileSystemEvent

QUIET_S = 300.0
"""Seconds without a save that close a window, unless a watch is told otherwise."""

TICK_S = 0.5
"""How often a watch checks that its folder and its file system events are still there."""

__all__ = [
    "BUILD_FOLDERS",
    "GIT_SETTLE_S",
    "QUIET_S",
    "TICK_S",
    "ActivityWindow",
    "Touch",
    "TreeWatcher",
    "WatchReport",
    "WatchSettings",
    "WatchStoppedError",
    "branch_namespace",
    "git_folder",
    "ignored",
    "require_watchdog",
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

GIT_SETTLE_S = 0.2
"""How long a watch whose git folder is outside its tree waits for that folder's events
before it takes a batch of saves: watchdog reads the two folders in two threads."""

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

    def __init__(self, quiet_s: float = QUIET_S, limit: int = Learning.max_coactivation) -> None:
        if isinstance(quiet_s, bool) or not isinstance(quiet_s, (int, float)):
            raise InvalidTypeError(f"quiet_s must be a number of seconds, got {shown(quiet_s)}")
        if not 0 < quiet_s < math.inf:
            raise InvalidValueError(f"quiet_s must be a finite number > 0, got {shown(quiet_s)}")
        if isinstance(limit, bool) or not isinstance(limit, int) or limit < 2:
            raise InvalidValueError(f"limit must be an integer >= 2, got {shown(limit)}")
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
    for a detached head, a folder outside git, or a branch whose name cannot be a namespace
    (:func:`~synapse_retriever.config.validate_namespace`: not UTF-8, as git allows, or
    not printable).

    Examples
    --------
    >>> import tempfile
    >>> branch_namespace(tempfile.mkdtemp())
    'personal'
    """
    found = _git(root, ["symbolic-ref", "-q", "HEAD"])  # a branch yet unborn too
    ref = found.strip() if found is not None else ""  # --short says "heads/x" beside a tag x
    name = ref.removeprefix("refs/heads/") if ref.startswith("refs/heads/") else ""
    try:
        return validate_namespace(f"branch:{name}") if name else "personal"
    except SynapseError:  # "caf\udce9": a Latin-1 name, read as it is, cannot be stored
        return "personal"


def ignored(
    root: str | os.PathLike[str],
    paths: Sequence[str],
    keep_out: Iterable[str] = (),
    *,
    gone: bool = True,
) -> set[str]:
    """Those of ``paths`` (relative to ``root``) that are not events: in a build or tool
    folder (:data:`BUILD_FOLDERS`), ignored by git, in ``keep_out`` (the store's own files),
    named so it cannot be a node id (not UTF-8, over 2,048 bytes), binary, not a regular
    file (a FIFO, a device, a socket, a symbolic link: never opened), or gone (unless
    ``gone`` is False: a file saved, then moved before it is read).

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
        text = _text_file(base / path) if is_node_id(path) else False
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


def _identity(folder: Path) -> tuple[int, int] | None:
    """The device and inode of ``folder``; None if it is not a folder there any more."""
    try:
        found = folder.stat()
    except OSError:
        return None
    return (found.st_dev, found.st_ino) if stat.S_ISDIR(found.st_mode) else None


def _git(root: str | os.PathLike[str], args: list[str], stdin: str | None = None) -> str | None:
    """What ``git args`` prints in ``root``, or None where git fails (not a repository).
    Bytes that are not UTF-8 (a branch or a folder named in Latin-1) are read as lone
    surrogates, as Python reads such a file name, never as an error."""
    try:
        done = subprocess.run(
            ["git", "-C", os.fspath(root), *args],
            env=git_environment(),
            input=stdin,
            capture_output=True,
            encoding="utf-8",
            errors="surrogateescape",
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
            f"{why}; the watch stopped after {report.events} "
            f"{'event' if report.events == 1 else 'events'} (its open window was written)"
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
reset): saves seen while it exists are git's, not a person's. A touch names a file of git's
own folder ``.git/<name>`` wherever that folder is (:meth:`TreeWatcher.as_touch`)."""

GIT_HEAD = ".git/HEAD"
"""Rewritten when another branch is checked out: the open window closes in the old one."""


def git_folder(root: str | os.PathLike[str]) -> Path | None:
    """The git folder of the checkout ``root`` is in (``git rev-parse --absolute-git-dir``):
    ``<top>/.git`` for ``root`` anywhere in a plain checkout, ``.git/worktrees/<name>`` in a
    linked worktree, ``.git/modules/<name>`` in a submodule; None outside git.

    Examples
    --------
    >>> import tempfile
    >>> git_folder(tempfile.mkdtemp()) is None
    True
    """
    found = _git(root, ["rev-parse", "--absolute-git-dir"])
    path = found.strip() if found is not None else ""
    return Path(path).resolve() if path and Path(path).is_dir() else None


class Touch(NamedTuple):
    """What one file system event means to the watch: its ``kind`` (watchdog's event type:
    ``created``, ``modified``, ``moved`` or ``deleted``), the path a move came from
    (``old``; "" for any other kind) and the path it is about (``new``), both relative to
    the tree, ``/``-separated.

    Examples
    --------
    >>> Touch("moved", "old.py", "new.py")
    Touch(kind='moved', old='old.py', new='new.py')
    """

    kind: str
    old: str
    new: str


def _final_paths(batch: Sequence[Touch]) -> dict[str, str]:
    """Where each path a batch moves ends, after all of the batch's moves (a chain of
    moves, followed to its end).

    Examples
    --------
    >>> _final_paths([Touch("modified", "", "a.py"), Touch("moved", "a.py", "b.py"),
    ...               Touch("moved", "b.py", "c.py")])
    {'b.py': 'c.py', 'a.py': 'c.py'}
    """
    final: dict[str, str] = {}
    for kind, old, new in reversed(batch):
        if kind == "moved" and old:
            final[old] = final.get(new, new)
    return final


def _git_order(touch: Touch) -> int:
    """Where ``touch`` goes in a batch whose git folder's events came from another thread
    than the tree's, in an order of their own: git's index lock taken (0), the rest (1),
    its lock written or let go (2), ``HEAD`` rewritten (3), as git does a checkout.

    Examples
    --------
    >>> batch = [Touch("moved", ".git/HEAD.lock", ".git/HEAD"), Touch("created", "", "a.py"),
    ...          Touch("created", "", ".git/index.lock")]
    >>> [touch.new for touch in sorted(batch, key=_git_order)]
    ['.git/index.lock', 'a.py', '.git/HEAD']
    """
    if GIT_LOCK in (touch.old, touch.new):
        return 0 if touch.kind == "created" and touch.new == GIT_LOCK else 2
    return 3 if touch.new == GIT_HEAD else 1


def _drained(touches: queue.Queue[Touch], first: Touch | None = None) -> list[Touch]:
    """``first`` (if any) and every touch waiting in ``touches``, in order; it empties.

    Examples
    --------
    >>> waiting: queue.Queue[Touch] = queue.Queue()
    >>> waiting.put(Touch("modified", "", "b.py"))
    >>> [touch.new for touch in _drained(waiting, Touch("created", "", "a.py"))]
    ['a.py', 'b.py']
    >>> _drained(waiting)
    []
    """
    batch = [] if first is None else [first]
    while True:
        try:
            batch.append(touches.get_nowait())
        except queue.Empty:
            return batch


def require_watchdog() -> None:
    """Import watchdog, or raise :class:`MissingExtraError` naming the extra that brings it."""
    try:
        importlib.import_module("watchdog.events")
        importlib.import_module("watchdog.observers")
    except ImportError:
        raise MissingExtraError(
            "watching a tree needs the watch extra: pip install 'synapse-retriever[watch]'"
        ) from None


@dataclass(frozen=True)
class WatchSettings:
    """How a watch sifts and closes windows, apart from where it writes (each as in
    :func:`watch`). They are checked when a :class:`TreeWatcher` is built: the namespace
    by :func:`~synapse_retriever.config.validate_namespace`, ``quiet_s`` and ``limit`` by
    :class:`ActivityWindow`.

    Parameters
    ----------
    quiet_s : float
        Seconds without a save (or a move) that close the window.
    limit : int
        Files an event keeps at most: the most recently touched.
    namespace : str or None
        Where every window is written; None: the checked-out branch's (``branch:<name>``).
    keep_out : frozenset of str
        Paths (relative to the tree) never learned: the store's own files.
    tick_s : float
        How often the watch checks that its folder and its events are still there.

    Examples
    --------
    >>> WatchSettings(quiet_s=60, keep_out=frozenset({"synapses.db"}))
    WatchSettings(quiet_s=60, limit=32, namespace=None, keep_out=frozenset({'synapses.db'}), \
tick_s=0.5)
    """

    quiet_s: float = QUIET_S
    limit: int = Learning.max_coactivation
    namespace: str | None = None
    keep_out: frozenset[str] = frozenset()
    tick_s: float = TICK_S


class TreeWatcher:
    """The watch of one working tree as a state machine: each step is a method, fed
    batches of :class:`Touch` by :meth:`run` (watchdog's events, in its thread) or by a
    test, with the time read from ``clock``.

    Parameters
    ----------
    root : path
        The working tree; it must be a folder.
    write : Callable[[list[str], str], int]
        Writes a closed window: ``write(files, namespace)``, the edges it wrote.
    settings : WatchSettings
        Quiet spell, cap, namespace, files kept out, tick.
    rename, on_event, on_error : callables or None
        As in :func:`watch`.
    clock : Callable[[], float]
        Seconds, for the time of a touch and the end of a quiet spell (``time.time``).

    Examples
    --------
    Two saves, then a quiet minute: one co-activation event, latest save first.

    >>> import tempfile, pathlib
    >>> root = pathlib.Path(tempfile.mkdtemp())
    >>> for name in ("a.py", "b.py"):
    ...     _ = (root / name).write_text("x = 1")
    >>> def write(files, namespace):
    ...     print(files, namespace)
    ...     return 1
    >>> now = [0.0]
    >>> watcher = TreeWatcher(root, write, WatchSettings(quiet_s=60, namespace="personal"),
    ...                       clock=lambda: now[0])
    >>> watcher.take([Touch("modified", "", "a.py"), Touch("created", "", "b.py")])
    >>> now[0] = 59.0; watcher.close_if_due()
    >>> now[0] = 60.0; watcher.close_if_due()
    ['b.py', 'a.py'] personal
    >>> watcher.report
    WatchReport(events=1, edges=1, ignored=0, by_git=0, failed=0, renamed=0)
    """

    def __init__(
        self,
        root: str | os.PathLike[str],
        write: Callable[[list[str], str], int],
        settings: WatchSettings = WatchSettings(),
        *,
        rename: Callable[[str, str, str], int] | None = None,
        on_event: Callable[[WatchReport], None] | None = None,
        on_error: Callable[[Exception], None] | None = None,
        clock: Callable[[], float] = time.time,
    ) -> None:
        if not Path(root).is_dir():
            raise InvalidValueError(f"root must be a folder to watch, got {os.fspath(root)!r}")
        if settings.namespace is not None:
            settings = replace(settings, namespace=validate_namespace(settings.namespace))
        self.window = ActivityWindow(settings.quiet_s, settings.limit)
        self.settings = settings
        self.root = root
        self.base = Path(root).resolve()
        self.identity = _identity(self.base)
        self.write, self.rename, self.on_event, self.on_error = write, rename, on_event, on_error
        self.clock = clock
        self.report = WatchReport()
        self.namespace = settings.namespace or branch_namespace(self.base)
        """Where the open window will be written: the branch its saves were made on."""
        self.git_dir = git_folder(self.base)
        """The tree's git folder (:func:`git_folder`); None outside git."""
        self.git_outside = self.git_dir is not None and not self.git_dir.is_relative_to(self.base)
        """Whether the git folder is outside the tree (a sub-folder watched, a worktree, a
        submodule): :meth:`run` then watches it too, and a batch taken while its index lock
        is there is git's (its events come from another thread, maybe after the saves)."""
        self.git_busy = False
        self.moves: dict[str, str] = {}  # path now -> the path it had when the window opened
        self.moved_at = -float("inf")

    def relative(self, path: str | bytes) -> str:
        """A path watchdog reports, relative to the tree; "" outside it, or for a name that
        cannot be a node id (not UTF-8, over 2,048 bytes). Never resolved: links (a loop
        of them) are not followed."""
        text = os.path.normpath(os.fsdecode(path))
        try:
            found = Path(text).relative_to(self.base).as_posix()
        except ValueError:
            return ""
        return found if found != "." and is_node_id(found) else ""

    def named(self, path: str | bytes) -> str:
        """:meth:`relative`, but ``.git/<name>`` for a file of the tree's git folder
        (:attr:`git_dir`), inside the tree or not."""
        if self.git_dir is not None:
            try:
                inside = Path(os.path.normpath(os.fsdecode(path))).relative_to(self.git_dir)
            except ValueError:
                pass
            else:
                return f".git/{inside.as_posix()}" if inside.parts else ""
        return self.relative(path)

    def as_touch(self, event: FileSystemEvent) -> Touch | None:
        """What a watchdog event means to the watch; None for one it never looks at: a
        folder's, a deletion, a path outside the tree or whose name is not UTF-8, and
        anything in git's folder but its index lock (taken, let go) and ``HEAD`` rewritten,
        named ``.git/index.lock`` and ``.git/HEAD`` wherever the folder is (above a
        sub-folder watched, in a worktree's main checkout). Called in watchdog's thread: it
        reads the event and nothing else."""
        if event.is_directory:
            return None
        new = self.named(getattr(event, "dest_path", "") or event.src_path)
        old = self.named(event.src_path) if event.event_type == "moved" else ""
        touch = Touch(event.event_type, old, new)
        if new.startswith(".git/") or old.startswith(".git/"):
            rewritten = new == GIT_HEAD and event.event_type != "deleted"
            return touch if GIT_LOCK in (new, old) or rewritten else None  # git's own state
        return touch if new and event.event_type != "deleted" else None

    def left_out(self, paths: Sequence[str], *, gone: bool = True) -> set[str]:
        """Those of ``paths`` that are never learned: :func:`ignored`, with the settings'
        ``keep_out``."""
        return ignored(self.base, paths, self.settings.keep_out, gone=gone)

    def take(self, batch: Sequence[Touch]) -> None:
        """Apply a batch of touches, in order, each to the step it is about (:meth:`git_lock`,
        :meth:`checkout`, :meth:`move`, :meth:`save`); one ``git check-ignore`` for all of it.

        Each file is judged where it ends after the batch's moves, and not yet by whether
        it is there: one saved, then moved before the batch is read, is followed by its move
        (the window drops what is gone when it closes)."""
        if self.git_outside and self.git_dir is not None:  # its events come from another
            self.git_busy |= (self.git_dir / "index.lock").exists()  # thread: maybe late
            batch = sorted(batch, key=_git_order)
        final = _final_paths(batch)
        saved = {final.get(new, new) for _, _, new in batch if not new.startswith(".git/")}
        left = self.left_out(sorted(saved), gone=False) if saved else set()
        now = self.clock()
        for kind, old, new in batch:
            if GIT_LOCK in (new, old):
                self.git_lock(kind, old, new)
            elif new == GIT_HEAD:
                self.checkout()
            elif kind == "moved" and old:  # a move is a move whoever made it: git mv too
                self.move(old, new, now, left_out=final.get(new, new) in left)
            else:
                self.save(new, now, left_out=final.get(new, new) in left)

    def git_lock(self, kind: str, old: str, new: str) -> None:
        """Git took its index lock (created: the saves that follow are its own) or let go
        of it (removed, or renamed onto the index)."""
        if kind == "created" and new == GIT_LOCK:
            self.git_busy = True
        elif kind == "deleted" or old == GIT_LOCK:
            self.git_busy = False

    def checkout(self) -> None:
        """``.git/HEAD`` was rewritten: if another branch is checked out now, the open
        window closes in the namespace its saves were made in, and the next is the new
        branch's. A namespace given in the settings never changes."""
        checked_out = self.settings.namespace or branch_namespace(self.base)
        if checked_out != self.namespace:
            self.flush()
            self.namespace = checked_out

    def move(self, old: str, new: str, at: float, *, left_out: bool) -> None:
        """``old`` moved to ``new`` at ``at``: remembered for :meth:`settle_moves`; in the
        window, a save under the new name, or (made by git, or moved out of what is
        learned) a file that keeps its place, or leaves."""
        self.moves[new] = self.moves.pop(old, old)
        self.moved_at = at
        if left_out:  # moved out of what is learned
            self.report.ignored += 1
            self.window.follow(old, None)
        elif self.git_busy:  # not a save: the window only follows the file
            self.report.by_git += 1
            self.window.follow(old, new)
        else:
            self.window.rename(old, new, at)

    def save(self, path: str, at: float, *, left_out: bool) -> None:
        """``path`` was saved at ``at``: into the window, unless it is left out or git
        wrote it (both counted in the report)."""
        if left_out:
            self.report.ignored += 1
        elif self.git_busy:
            self.report.by_git += 1
        else:
            self.window.touch(path, at)

    def due(self, now: float) -> bool:
        """Whether the window should close: a quiet spell after saves, or after moves alone."""
        moved = bool(self.moves) and now - self.moved_at >= self.window.quiet_s
        return self.window.due(now) or moved

    def close_if_due(self) -> None:
        """Close the window (:meth:`flush`) if it is :meth:`due` by the clock."""
        if self.due(self.clock()):
            self.flush()

    def idle(self) -> None:
        """A tick passed without touches: git's lock counts as let go if its file is gone
        (its removal was missed), and the window closes if it is due."""
        lock = (self.git_dir or self.base / ".git") / "index.lock"
        if self.git_busy and not lock.exists():
            self.git_busy = False
        self.close_if_due()

    def folder_gone(self) -> bool:
        """Whether the watched folder was deleted or moved (or another put in its place)."""
        return _identity(self.base) != self.identity

    def flush(self, *, last: bool = False) -> None:
        """Close the window: settle its moves, then write its files (those still regular
        files; all of them if the folder went away) as one event in :attr:`namespace`.
        A write that raises keeps the files in the window, in the order they were saved,
        and goes to ``on_error`` (raised if there is none, or if this is the ``last``). In
        the ``last`` window a move that could not be settled (the store away for a moment)
        is raised after the files were written, not before: there is no next window (if
        the write fails too, its error is raised, with its own cause, the move's in a note)."""
        unsettled = self.settle_moves(last=last)  # first: the files then land on moved nodes
        here = not self.folder_gone()
        files = [p for p in self.window.close() if not here or _regular_file(self.base / p)]
        if files:
            try:
                edges = self.write(files, self.namespace)
            except Exception as exc:  # kept for the next attempt, in the order they were saved
                self.report.failed += 1
                for path in reversed(files):
                    self.window.touch(path, self.clock())
                if last or self.on_error is None:
                    if unsettled is not None:  # the write's own cause stays its cause
                        exc.add_note(f"a move could not be learned either: {unsettled!r}")
                    raise
                self.on_error(exc)
                return
            self.report.edges += edges
            self.report.events += 1
            if self.on_event is not None:
                self.on_event(self.report)
        if unsettled is not None:
            if files:
                unsettled.add_note(f"the last window was written: {len(files)} files")
            raise unsettled

    def settle_moves(self, *, last: bool) -> Exception | None:
        """Rename the nodes of the files that moved in this window, in its namespace: a
        chain of moves once, from its first path to its last; not a move undone, nor one
        whose old path is back (an editor's backup by renaming, then a new file), nor one
        whose file is gone or left out now. A rename onto a node with a past of its own
        goes to ``on_error``, in the ``last`` window too (it is refused for good: the
        window's files are written all the same); one that fails otherwise waits for the
        next window, or in the ``last`` is returned (the first such failure) for
        :meth:`flush` to raise once the files are written."""
        settled = [(old, new) for new, old in self.moves.items() if old != new]
        self.moves.clear()
        unsettled: Exception | None = None
        if self.rename is None or not settled:
            return None
        out = self.left_out([new for _, new in settled])
        for old, new in settled:
            if new in out or (self.base / old).exists():
                continue
            try:
                self.report.renamed += self.rename(old, new, self.namespace) > 0
            except InvalidValueError as exc:  # the new path has a past of its own: said,
                if self.on_error is None:  # and the window is written, even the last one
                    raise
                self.on_error(exc)
            except Exception as exc:  # the store is away: the move waits for the next window
                self.moves.setdefault(new, old)
                if last:  # there is none: the window's files are written first
                    if unsettled is None:
                        exc.add_note(f"the move of {old!r} to {new!r} was not learned")
                        unsettled = exc
                elif self.on_error is None:
                    raise
                else:
                    self.on_error(exc)
        return unsettled

    def run(self, stop: threading.Event, ready: threading.Event | None = None) -> WatchReport:
        """Watch the tree with watchdog until ``stop`` is set (or Ctrl-C): its events
        become touches, taken in batches, and the window closes when it is due; the open
        window is written before returning, however the watch ends. ``ready`` is set once
        every folder is watched. Raises :class:`WatchStoppedError` as :func:`watch` does."""
        require_watchdog()
        from watchdog.events import (
            FileCreatedEvent,
            FileDeletedEvent,
            FileModifiedEvent,
            FileMovedEvent,
            FileSystemEventHandler,
        )
        from watchdog.observers import Observer

        touches: queue.Queue[Touch] = queue.Queue()
        as_touch = self.as_touch

        class Handler(FileSystemEventHandler):
            def on_any_event(self, event: FileSystemEvent) -> None:
                touch = as_touch(event)
                if touch is not None:
                    touches.put(touch)

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
        observer.schedule(Handler(), os.fspath(self.base), recursive=True, event_filter=saves)
        if self.git_outside and self.git_dir is not None:  # its lock and HEAD, not its objects
            observer.schedule(Handler(), os.fspath(self.git_dir), event_filter=saves)
        observer.start()  # the folders' watches are added before it returns
        if ready is not None:
            ready.set()
        tick_s = self.settings.tick_s
        gone = False  # the watched folder itself: deleted or moved
        checked = time.monotonic()
        try:
            while not stop.is_set():
                if time.monotonic() - checked >= tick_s:  # at most once a tick, saves or not
                    checked = time.monotonic()
                    gone = self.folder_gone()
                    if gone or not observer.is_alive():
                        break
                try:
                    first = touches.get(timeout=tick_s)
                except queue.Empty:
                    self.idle()
                    continue
                self.close_if_due()
                if self.git_outside:  # git's folder is read by another thread: its events,
                    stop.wait(GIT_SETTLE_S)  # a little late, join the batch they belong to
                self.take(_drained(touches, first))
        except KeyboardInterrupt:
            pass
        finally:
            alive = observer.is_alive()
            observer.stop()
            observer.join(timeout=5)
            self.take(_drained(touches))  # what was saved before the stop still counts
            self.flush(last=True)
        where = os.fspath(self.root)
        if gone:
            raise WatchStoppedError(
                f"the watched folder {where!r} was deleted or moved", self.report
            )
        if not alive and not stop.is_set():
            raise WatchStoppedError(f"the file system events of {where!r} stopped", self.report)
        return self.report


def watch(
    root: str | os.PathLike[str],
    write: Callable[[list[str], str], int],
    *,
    quiet_s: float = QUIET_S,
    limit: int = Learning.max_coactivation,
    namespace: str | None = None,
    keep_out: Iterable[str] = (),
    stop: threading.Event | None = None,
    on_event: Callable[[WatchReport], None] | None = None,
    on_error: Callable[[Exception], None] | None = None,
    rename: Callable[[str, str, str], int] | None = None,
    ready: threading.Event | None = None,
    tick_s: float = TICK_S,
) -> WatchReport:
    """Watch the tree at ``root`` until ``stop`` is set (or Ctrl-C), calling
    ``write(files, namespace)`` for each closed window; returns what was learned. It
    builds a :class:`TreeWatcher` and runs it.

    ``write`` gets the window's files relative to ``root``, with ``/`` as separator, and
    returns the edges it wrote (``SynapseStore.reinforce``, one transaction). Saves are
    sifted as they arrive (:func:`ignored`), so a file that is never learned neither keeps
    a window open nor takes a place under ``limit``. Saves made by git itself (while it
    holds its index lock, in the tree's git folder wherever it is: ``root`` may be a
    sub-folder of a checkout) are left out, and checking out another branch closes the open
    window in the namespace its saves were made in. A write that raises (a store locked for
    longer than its timeout, a server away) is reported to ``on_error`` and its files stay
    in the window for the next attempt; the open window is written before returning,
    however the watch ends. ``ready`` is set once every folder is watched.

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
    require_watchdog()
    settings = WatchSettings(
        quiet_s=quiet_s,
        limit=limit,
        namespace=namespace,
        keep_out=frozenset(keep_out),
        tick_s=tick_s,
    )
    watcher = TreeWatcher(
        root, write, settings, rename=rename, on_event=on_event, on_error=on_error
    )
    return watcher.run(stop or threading.Event(), ready)
