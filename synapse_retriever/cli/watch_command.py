"""``synapse-retriever watch PATH STORE``: learn from a working tree as it is edited (the loop is
:func:`synapse_retriever.capture.watch.watch`)."""

from __future__ import annotations

import argparse
import math
import os
import signal
import threading
from pathlib import Path
from typing import TYPE_CHECKING

from synapse_retriever.capture.watch import QUIET_S
from synapse_retriever.cli._common import (
    STORE_HELP,
    CliError,
    console,
    open_store,
    printable,
    store_label,
)
from synapse_retriever.errors import InvalidValueError
from synapse_retriever.persistence.postgres import is_postgres_url
from synapse_retriever.persistence.sqlite import uri_file

if TYPE_CHECKING:
    from synapse_retriever.cli._common import Commands

__all__ = ["STOP_SIGNALS", "cmd_watch", "register"]

STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)
"""What stops ``synapse-retriever watch`` (Ctrl-C, a service manager, a closed terminal): its open
window is written first."""


def cmd_watch(args: argparse.Namespace) -> int:
    """Learn from saves in a working tree until interrupted (see ``capture.watch``)."""
    from synapse_retriever.capture.watch import (
        WatchReport,
        branch_namespace,
        require_watchdog,
        watch,
    )
    from synapse_retriever.config import validate_namespace

    require_watchdog()  # before a store file is made for nothing
    root = Path(args.path)
    if not root.is_dir():
        raise CliError(f"no folder to watch at {args.path!r}")
    if not 0 < args.quiet_s < math.inf:
        raise CliError(f"--quiet-s must be a number of seconds > 0, got {args.quiet_s}")
    namespace = validate_namespace(args.namespace) if args.namespace is not None else None
    keep_out = own_files(args.store, root)
    with open_store(args.store, must_exist=False) as store:
        if store.read_only:
            raise CliError(f"cannot learn into {store_label(args.store)!r}: it is read-only here")
        status = console(stderr=True)
        opened = _file_identity(args.store)
        gone = threading.Event()  # the store's file deleted, moved or replaced: stop

        def write(files: list[str], ns: str) -> int:
            return store.reinforce(files, namespace=ns)

        def show(report: WatchReport) -> None:
            if not args.quiet:
                status.print(
                    f"{report.events} events, {report.edges} edges learned, "
                    f"{report.renamed} files moved ({report.ignored} saves left out, "
                    f"{report.by_git} made by git)"
                )

        def failed(exc: Exception) -> None:  # always said: nothing is lost, but it waits
            if opened is not None and _replaced(args.store, opened):
                gone.set()  # no later window can be written either
                stop.set()
                return
            if isinstance(exc, InvalidValueError):  # a rename onto a node with its own past
                status.print(f"not moved: {printable(exc)}")
            else:
                status.print(
                    f"could not write to the store ({printable(exc)}); what was saved or "
                    "moved waits for the next window"
                )

        def started() -> None:
            ready.wait()
            if not args.quiet:
                where = namespace or branch_namespace(root)
                status.print(
                    f"watching {printable(args.path)} into {printable(store_label(args.store))} "
                    f"({printable(where)}); Ctrl-C stops"
                )

        stop, ready = threading.Event(), threading.Event()  # a signal: close, write, exit
        previous = {sig: signal.signal(sig, lambda *_: stop.set()) for sig in STOP_SIGNALS}
        threading.Thread(target=started, daemon=True).start()
        try:
            report = watch(
                root,
                write,
                quiet_s=args.quiet_s,
                limit=store.config.learning.max_coactivation,
                namespace=namespace,
                keep_out=keep_out,
                stop=stop,
                on_event=show,
                on_error=failed,
                rename=lambda old, new, ns: store.rename(old, new, namespaces=ns),
                ready=ready,
            )
        except Exception:
            if not gone.is_set():
                raise
        finally:
            for sig, handler in previous.items():
                signal.signal(sig, handler)
        if gone.is_set():
            raise CliError(
                f"the store {store_label(args.store)!r} was deleted, moved or replaced while it "
                "was watched: the watch stopped, and what was saved since its last write was "
                "not learned; start it again to learn into the file now at that path"
            )
    console().print(
        f"watched {printable(args.path)}: {report.events} events, {report.edges} edges learned"
    )
    return 0


def own_files(store: str, root: Path) -> set[str]:
    """The files of an SQLite store at ``store`` (a path or a ``file:`` URI), relative to
    the watched ``root``, when the store lives in that tree: the watch leaves them out.

    Examples
    --------
    >>> sorted(own_files("file:notes/s.db?mode=rwc", Path(".")))
    ['notes/s.db', 'notes/s.db-journal', 'notes/s.db-shm', 'notes/s.db-wal']
    >>> own_files("postgresql://db/team", Path(".")), own_files("/elsewhere/s.db", Path("."))
    (set(), set())
    """
    if is_postgres_url(store):
        return set()
    try:
        # realpath: a loop of links is no error here (Path.resolve raised RuntimeError
        # before Python 3.13) but is refused in one line when the store is opened
        own = Path(os.path.realpath(uri_file(store))).relative_to(os.path.realpath(root))
    except ValueError:  # outside the tree
        return set()
    return {own.as_posix() + suffix for suffix in ("", "-wal", "-shm", "-journal")}


def _file_identity(store: str) -> tuple[int, int] | None:
    """The device and inode of the file an SQLite store at ``store`` is; None for a
    PostgreSQL URL, or no file."""
    if is_postgres_url(store):
        return None
    try:
        found = os.stat(uri_file(store))
    except OSError:
        return None
    return found.st_dev, found.st_ino


def _replaced(store: str, opened: tuple[int, int]) -> bool:
    """Whether the path ``store`` no longer names the file ``opened`` (device, inode): gone,
    or another file; a look that fails otherwise (a network file system's EIO or ESTALE)
    says neither, and the watch goes on."""
    try:
        found = os.stat(uri_file(store))
    except (FileNotFoundError, NotADirectoryError):
        return True
    except OSError:
        return False
    return (found.st_dev, found.st_ino) != opened


def register(commands: Commands) -> None:
    """Add the ``watch`` command."""
    watch_help = (
        "Learn from a working tree as it is edited: files saved within one activity window "
        "(until QUIET_S seconds pass without a save) are one co-activation event, in the "
        "checked-out branch's namespace. Ctrl-C closes the open window first."
    )
    watching = commands.add_parser("watch", help=watch_help, description=watch_help)
    watching.set_defaults(handler=cmd_watch)
    watching.add_argument("path", metavar="PATH", help="the working tree to watch")
    watching.add_argument("store", metavar="STORE", help=STORE_HELP)
    watching.add_argument(
        "--quiet-s",
        type=float,
        default=QUIET_S,
        help=f"seconds without a save that close a window ({QUIET_S:g})",
    )
    watching.add_argument(
        "--namespace", help="namespace to learn in (default: branch:<checked-out branch>)"
    )
    watching.add_argument("--quiet", action="store_true", help="no status line (for services)")
