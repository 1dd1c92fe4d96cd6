"""The ``synapse-retriever`` command: inspect a store, sweep it, move edges in and out, warm it from
git, and benchmark the method.

Every store command takes the store's path first. A missing store (for commands that
only read it), a file that is not a synapse database, a bad export file or a bad git
repository each give one line on stderr, ``synapse-retriever: error: ...``, and exit code 2.

Examples
--------
>>> histogram([0.05, 0.15, 0.15, 1.0], [0.0, 0.1, 0.2, 1.0])  # 1.0 falls in the last bin
[1, 2, 1]
"""

from __future__ import annotations

import argparse
import contextlib
import errno
import io
import os
import re
import sqlite3
import sys
from collections.abc import Callable, Sequence
from typing import Any

from synapse_retriever import __version__
from synapse_retriever.cli import bench_commands, mcp_command, store_commands, watch_command
from synapse_retriever.cli._common import EXIT_USAGE, CliError, printable
from synapse_retriever.cli.store_commands import HALF_LIFE_BINS, WEIGHT_BINS, histogram
from synapse_retriever.errors import SynapseError
from synapse_retriever.persistence.transfer import OutputCutError

__all__ = ["HALF_LIFE_BINS", "WEIGHT_BINS", "build_parser", "histogram", "main"]

PROG = "synapse-retriever"
"""The command's name: the console script the package installs (``[project.scripts]``)."""

EXIT_CUT = 1
"""The exit code when stdout's reader closed it before an export or a JSON report was all
written (a table cut by ``| head`` ends with 0: the reader had what it wanted)."""


def _drop_stdout() -> None:
    """Point stdout at the null device: the interpreter's last flush of what is still
    buffered would fail again on the closed pipe, and say so."""
    with contextlib.suppress(OSError, ValueError):
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)


def _stand_in_for_closed_streams() -> None:
    """Give a standard stream its process started without (``>&-``, a service's closed
    descriptor: Python sets it to None) a stand-in, so that the command's exit code and
    messages hold: stdout refuses every write as a pipe whose reader left does, so an export
    or a JSON report is cut (one line, :data:`EXIT_CUT`) and a table or a help text ends as a
    ``| head`` does, and holds nothing for the interpreter's last flush; stderr is the null
    device, so an error still exits with its code."""
    if sys.stdout is None:
        sys.stdout = _Gone()
    if sys.stderr is None:
        sys.stderr = open(os.devnull, "w")  # noqa: SIM115  # for the process's life


class _GoneBuffer(io.RawIOBase):
    """The bytes under :class:`_Gone`: every write refused, nothing buffered."""

    name = "<stdout>"  # what a cut output's message names

    def writable(self) -> bool:
        return True

    def write(self, data: Any) -> int:
        raise BrokenPipeError(errno.EPIPE, os.strerror(errno.EPIPE))


class _Gone(io.TextIOBase):
    """A stdout whose reader is gone from the start: every write refused, nothing buffered."""

    name = "<stdout>"
    buffer = _GoneBuffer()

    def writable(self) -> bool:
        return True

    def write(self, text: str) -> int:
        raise BrokenPipeError(errno.EPIPE, os.strerror(errno.EPIPE))


_NEGATIVE_NUMBER = re.compile(r"-\.?\d")
"""What argparse reads as a negative number, not an option: a dash, then a digit (``-.5``:
a dot first). The rule of CPython's newest argparse; 3.11's took ``-1`` and ``-1.5`` only."""


class _Parser(argparse.ArgumentParser):
    """An argument parser that reads ``-1e5`` and ``-1_000`` as negative numbers, as it reads
    ``-1`` and ``-1.5``, not as options (``--at -1e5`` said "expected one argument"). Its
    subcommands' parsers are of its class."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._negative_number_matcher = _NEGATIVE_NUMBER


def build_parser() -> argparse.ArgumentParser:
    """The ``synapse-retriever`` argument parser: each command module adds its own commands."""
    parser: argparse.ArgumentParser = _Parser(
        prog=PROG,
        description="Inspect, maintain, warm-start and benchmark a synapse-retriever store.",
    )
    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    store_commands.register(commands)  # each module adds its own; --help lists them in this order
    watch_command.register(commands)
    mcp_command.register(commands)
    bench_commands.register(commands)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run ``synapse-retriever`` with ``argv`` (default: the command line); the exit code."""
    _stand_in_for_closed_streams()
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        handler: Callable[[argparse.Namespace], int] = args.handler
        return handler(args)
    except OutputCutError as exc:  # an export or JSON, cut by stdout's reader: say so
        _drop_stdout()
        sys.stderr.write(f"{PROG}: error: {exc.strerror}\n")
        return EXIT_CUT
    except BrokenPipeError:  # a table for people, cut by its reader (`| head`): enough
        _drop_stdout()
        return 0
    except BaseExceptionGroup as group:  # an async command's tasks (mcp) that lost stdout
        if group.split(BrokenPipeError)[1] is not None:
            raise
        _drop_stdout()
        return 0
    except (CliError, SynapseError, OSError, sqlite3.Error) as exc:
        message = str(exc) if not isinstance(exc, sqlite3.Error) else f"database error: {exc}"
        notes = getattr(exc, "__notes__", [])  # what else was done or failed, in the same line
        message += "".join(f" ({note})" for note in notes)
        sys.stderr.write(f"{PROG}: error: {printable(' '.join(message.split()))}\n")
        return EXIT_USAGE
    except KeyboardInterrupt:
        sys.stderr.write(f"{PROG}: interrupted\n")
        return 130
