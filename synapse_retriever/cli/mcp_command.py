"""``synapse-retriever mcp STORE``: the command that serves a store over the Model Context Protocol.

The server itself is :mod:`.mcp_server`, which needs the ``mcp`` extra as it loads; this module
does not, so the parser (and ``synapse-retriever --help``) works without the extra, and only
running the command loads it.
"""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING

from synapse_retriever.cli._common import add_store_command, open_store

if TYPE_CHECKING:
    from synapse_retriever.cli._common import Commands

__all__ = ["cmd_mcp", "register"]


def cmd_mcp(args: argparse.Namespace) -> int:
    """Serve the store over the Model Context Protocol on stdio (see ``cli.mcp_server``)."""
    from synapse_retriever.cli.mcp_server import serve  # MissingExtraError: one line, exit 2

    with open_store(args.store, must_exist=False) as store:
        serve(store, args.store)
    return 0


def register(commands: Commands) -> None:
    """Add the ``mcp`` command."""
    add_store_command(
        commands,
        "mcp",
        cmd_mcp,
        "Serve the store to an agent over the Model Context Protocol (stdio): the tools "
        "recall, related, record_usage, neighbours and stats. Needs the mcp extra.",
    )
