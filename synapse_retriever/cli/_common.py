"""What every ``synapse-retriever`` command shares: one-line errors, times, the store, output.

Examples
--------
>>> iso(86400.0)
'1970-01-02T00:00:00Z'
"""

from __future__ import annotations

import argparse
import contextlib
import importlib.util
import json
import math
import os
import re
import sys
import tempfile
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rich.console import Console
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    TaskID,
    TextColumn,
    TimeElapsedColumn,
    TimeRemainingColumn,
)

from synapse_retriever.capture.gitlog import parse_since
from synapse_retriever.clock import iso, to_seconds
from synapse_retriever.config import SynapseConfig
from synapse_retriever.errors import MissingExtraError, SynapseError, shown
from synapse_retriever.persistence.postgres import PostgresStorage, is_postgres_url, split_url
from synapse_retriever.persistence.sqlite import (
    SIDE_FILES,
    file_path,
    in_memory,
    upgraded_copy,
    uri_file,
)
from synapse_retriever.persistence.transfer import (
    database_kind,
    not_regular,
    same_file,
    write_whole,
)
from synapse_retriever.store import SynapseStore

if TYPE_CHECKING:
    Commands = argparse._SubParsersAction[argparse.ArgumentParser]
    """The subcommands of a parser, to which a command module adds its own (``register``)."""


__all__ = [
    "EXIT_USAGE",
    "STORE_HELP",
    "CliError",
    "add_store_command",
    "at_least",
    "check_inputs",
    "check_output",
    "check_plot",
    "console",
    "in_calendar",
    "iso",
    "open_store",
    "parse_time",
    "print_json",
    "printable",
    "progress_display",
]

EXIT_USAGE = 2

STORE_HELP = "the synapse store: an SQLite file, or a postgresql:// URL"
"""The help of every command's ``STORE`` argument."""


class CliError(Exception):
    """A problem the user can fix; printed as one line, exit code 2."""


# -- plumbing ---------------------------------------------------------------------------


class _Console(Console):
    def on_broken_pipe(self) -> None:
        """The reader went away (``| head``): stop writing, and let the command end as any
        other write to a closed stdout does (rich's own exits with 1)."""
        self.quiet = True
        raise BrokenPipeError


def console(stderr: bool = False) -> Console:
    """A rich console on stdout (or stderr), 200 columns wide when it is not a terminal;
    text is printed as it is (no markup: a path such as ``pages/[id].tsx`` keeps its
    brackets)."""
    out = _Console(stderr=stderr, highlight=False, markup=False)
    if not out.is_terminal:
        out.width = 200  # no terminal: do not wrap tables at 80 columns
    return out


_UNPRINTABLE = re.compile("[\x00-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069\ud800-\udfff]")
"""What text printed for a terminal never holds raw: C0 and C1 controls and DEL (ESC starts
the escape sequences that retitle a window, write the clipboard, clear the screen), the bidi
overrides (which reorder what is shown), and lone surrogates (a name that is not UTF-8)."""


def printable(text: object) -> str:
    """``text`` as a command prints it for people: every character of :data:`_UNPRINTABLE`
    escaped as ``repr`` writes it, the rest as it is. A node id comes from a git history or
    a watched tree, which an outsider may have named; ``--json`` prints it exactly.

    Examples
    --------
    >>> print(printable("x\\x1b]0;PWNED\\x07.py"), printable("src/caf\u00e9.py\\ttab"))
    x\\x1b]0;PWNED\\x07.py src/caf\u00e9.py\\ttab
    """
    return _UNPRINTABLE.sub(lambda found: repr(found.group())[1:-1], str(text))


def parse_time(text: str | None) -> float:
    """``--at``: ISO 8601 (a date or naive time is UTC), POSIX seconds, or None for now."""
    if text is None or text == "now":
        return to_seconds(None)
    try:
        number = float(text)
    except ValueError:
        seconds = parse_since(text)
    else:
        seconds = to_seconds(number)  # NaN, infinities and times before the year 1: named
    if not in_calendar(seconds):
        raise CliError(f"--at {text!r} is out of range (years 1 to 9999)")
    return seconds


def in_calendar(seconds: float) -> bool:
    """Whether a date of the years 1 to 9999 (UTC) can show ``seconds``."""
    try:
        datetime.fromtimestamp(seconds, UTC)
    except (OverflowError, ValueError, OSError):
        return False
    return True


def store_label(store: str) -> str:
    """``store`` as output names it: a PostgreSQL URL without its user and password (as
    :attr:`SynapseStore.path <synapse_retriever.store.SynapseStore.path>` shows it).

    Examples
    --------
    >>> store_label("postgresql://me:secret@db:5432/team"), store_label("synapses.db")
    ('db:5432/team', 'synapses.db')
    """
    return split_url(store)[1] if is_postgres_url(store) else store


def refuse_memory(path: str) -> None:
    """Refuse a store in memory (``:memory:``, a ``file:`` URI in memory): a command's store
    ends with the command, so what it writes would be lost and what it reads is empty."""
    if in_memory(path):
        raise CliError(f"{path!r} is a store in memory: nothing this command does would be kept")


@contextmanager
def open_store(
    path: str,
    *,
    must_exist: bool,
    config: SynapseConfig | None = None,
    reads_only: bool = False,
) -> Iterator[SynapseStore]:
    """The store at ``path`` for one command, closed at the block's end. A command that
    ``reads_only`` (or runs dry) reads a file an earlier release wrote from an upgraded copy
    (:func:`~synapse_retriever.persistence.sqlite.upgraded_copy`), never upgrading the file:
    that release could not open it again."""
    refuse_memory(path)
    if is_postgres_url(path):  # a command that only reads never creates the tables
        storage = PostgresStorage(path, create=not must_exist)
        with SynapseStore(storage=storage, config=config) as store:
            yield store
        return
    file_path(path)  # another scheme's URL is refused without its password
    local = Path(uri_file(path))  # a file: URI names a file as SQLite reads it
    if must_exist and not local.exists():
        raise CliError(f"no synapse database at {path!r}")
    if must_exist and not local.is_dir() and not local.is_file():  # /dev/null, a pipe
        raise CliError(f"{path!r} is not a regular file, not a synapse database")
    if must_exist and local.is_file() and local.stat().st_size == 0:
        raise CliError(f"{path!r} is empty, not a synapse database; it was left untouched")
    if not must_exist and not local.parent.is_dir():
        raise CliError(f"cannot create {path!r}: no directory {str(local.parent)!r}")
    with contextlib.ExitStack() as stack:
        copy = None
        if reads_only:
            folder = stack.enter_context(tempfile.TemporaryDirectory(prefix="synapse-"))
            copy = upgraded_copy(path, folder)
        try:
            with SynapseStore(copy or path, config=config) as store:
                yield store
        except SynapseError as error:  # named by the file, not by its copy (gone by then)
            if copy is None or copy not in str(error):
                raise
            raise CliError(str(error).replace(copy, path)) from None


def add_store_command(
    commands: Commands, name: str, handler: Callable[[argparse.Namespace], int], help_: str
) -> argparse.ArgumentParser:
    """Add the command ``name``, run by ``handler``, whose first argument is ``STORE``."""
    sub = commands.add_parser(name, help=help_, description=help_)
    sub.add_argument("store", metavar="STORE", help=STORE_HELP)
    sub.set_defaults(handler=handler)
    return sub


def check_inputs(*paths: str | None) -> None:
    """Refuse, before any work, an input that is a device or a socket: read whole, it would
    never end (``/dev/zero``). A FIFO is read (``--queries <(...)``, a pipe).

    Examples
    --------
    >>> check_inputs(None, "-", "/no-such-file")  # stdin, and what the reader says is missing
    >>> try:
    ...     check_inputs("/dev/zero")
    ... except CliError as error:
    ...     print(error)
    cannot read '/dev/zero': it is a device, not a regular file
    """
    for path in paths:
        kind = None if path is None or path == "-" else not_regular(path)
        if kind is not None and not kind.startswith("a FIFO"):
            raise CliError(f"cannot read {path!r}: it is {kind}, not a regular file")


def check_output(path: str | None, *inputs: str | None) -> None:
    """Refuse, before any work, an input that is no file (:func:`check_inputs`), or an output
    file (``-``: stdout) that could not be written, or that would overwrite a file the
    command reads (one of ``inputs``, by any spelling or link, or a file in one that is a
    folder), or a database (a synapse store, or any SQLite file).

    Examples
    --------
    >>> import os, tempfile
    >>> folder = tempfile.mkdtemp()
    >>> queries = os.path.join(folder, "queries.jsonl")
    >>> _ = open(queries, "w").write("")
    >>> check_output(os.path.join(folder, "report.json"), queries)
    >>> try:
    ...     check_output(os.path.join(folder, ".", "queries.jsonl"), queries)
    ... except CliError as error:
    ...     print(str(error).split("', ")[-1])
    or in it, which this command reads; it was left untouched
    """
    check_inputs(*inputs)
    if path is None or path == "-":
        return
    if Path(path).is_dir():
        raise CliError(f"cannot write {path!r}: it is a directory")
    if not Path(path).parent.is_dir():
        raise CliError(f"cannot write {path!r}: no such directory")
    for source in inputs:
        if source is None or source == "-":
            continue
        read = [source, *(source + suffix for suffix in SIDE_FILES)]  # a store's side files too
        inside = Path(source).is_dir() and Path(os.path.realpath(path)).is_relative_to(
            os.path.realpath(source)
        )  # a folder the command reads every file of (realpath: a loop of links is no error)
        if inside or any(same_file(path, name) for name in read):
            raise CliError(
                f"cannot write {path!r}: it is {source!r}, or in it, which this command reads; "
                "it was left untouched"
            )
    what = database_kind(path)
    if what is not None:
        raise CliError(f"cannot write {path!r}: it is {what}; it was left untouched")


def check_plot(path: str | None, *inputs: str | None, report: str | None = None) -> None:
    """Refuse, before any work, a plot's image ``path`` that :func:`check_output` refuses
    (over one of ``inputs``, or a database), that is ``-`` (an image is a file: a plot has no
    stdout to go to, and was written to a file named ``-``), or that names the file the
    ``--json`` ``report`` is written to (the report, written last, would replace the image).

    Examples
    --------
    >>> check_plot("latency.svg", report="perf.json")
    >>> for plot, report in (("-", None), ("perf.json", "./perf.json")):
    ...     try:
    ...         check_plot(plot, report=report)
    ...     except CliError as error:
    ...         print(error)
    cannot write the plot to '-': an image is a file; give its path (.svg, .png or .pdf)
    --plot 'perf.json' and --json './perf.json' name one file: the report would replace the plot
    """
    check_output(path, *inputs)
    if path == "-":
        raise CliError(
            "cannot write the plot to '-': an image is a file; give its path (.svg, .png or .pdf)"
        )
    if path is not None and importlib.util.find_spec("matplotlib") is None:
        raise MissingExtraError(
            "--plot draws with matplotlib, which is not installed (not a dependency of "
            "synapse-retriever): pip install matplotlib"
        )
    if path is not None and report is not None and report != "-" and same_file(path, report):
        raise CliError(
            f"--plot {path!r} and --json {report!r} name one file: the report would replace "
            "the plot"
        )


def at_least(low: int) -> Callable[[str], int]:
    """An argparse type: an integer of at least ``low``."""

    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected an integer, got {shown(text)}") from None
        if value < low:
            raise argparse.ArgumentTypeError(f"must be at least {low}, got {value}")
        return value

    return parse


def positive_number(text: str) -> float:
    """An argparse type: a finite number greater than 0."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number, got {shown(text)}") from None
    if not (math.isfinite(value) and value > 0):
        raise argparse.ArgumentTypeError(f"must be a finite number > 0, got {shown(text)}")
    return value


@contextmanager
def progress_display(enabled: bool = True) -> Iterator[Callable[[str, int, int], None]]:
    """A rich progress display on stderr and a ``(phase, done, total)`` callback for it."""
    err = console(stderr=True)
    progress = Progress(
        TextColumn("{task.description:<16}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        TimeRemainingColumn(),
        console=err,
        transient=True,
        disable=not (enabled and err.is_terminal),  # no bars in logs and pipes
    )
    tasks: dict[str, TaskID] = {}

    def update(phase: str, done: int, total: int) -> None:
        if phase not in tasks:
            tasks[phase] = progress.add_task(phase, total=total)
        progress.update(tasks[phase], completed=done, total=total)

    with progress:
        yield update


def print_json(data: Any) -> None:
    """``data`` as indented JSON on stdout, all of it or a ``BrokenPipeError``."""
    sys.stdout.flush()
    text = json.dumps(data, indent=2, ensure_ascii=False) + "\n"
    write_whole(sys.stdout.buffer, text.encode("utf-8", "surrogateescape"))
