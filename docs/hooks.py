"""MkDocs hooks: the CLI page shows the commands' own ``--help``, so it never drifts.

The pages in ``docs/`` are the source of everything else on the site; nothing is copied from
the README.

- ``<!-- cli-help: bench perf -->`` is replaced by ``synapse-retriever bench perf --help``.
- ``<!-- cli-reference -->`` is replaced by a ``### synapse-retriever <command>`` section with the
  ``--help`` of every command and subcommand, in the parser's order: a new command shows up
  without editing the page.
- The notebooks are added to the site under ``notebooks/`` before mkdocs-jupyter looks for
  them, so it renders each as a page (executed at build time) that pages can link to.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import os
import re
from pathlib import Path
from typing import Any

from mkdocs.plugins import event_priority
from mkdocs.structure.files import File, Files

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOKS = ROOT / "notebooks"

_CLI_MARKER = re.compile(r"<!-- cli-help: ?(.*?) -->")
_CLI_REFERENCE = "<!-- cli-reference -->"


def cli_help(command: str) -> str:
    """What ``synapse-retriever <command> --help`` prints, 100 columns wide."""
    from synapse_retriever.cli import build_parser

    printed = io.StringIO()
    columns = os.environ.get("COLUMNS")
    os.environ["COLUMNS"] = "100"
    try:
        with contextlib.redirect_stdout(printed), contextlib.suppress(SystemExit):
            build_parser().parse_args([*command.split(), "--help"])
    finally:
        if columns is None:
            del os.environ["COLUMNS"]
        else:
            os.environ["COLUMNS"] = columns
    return printed.getvalue()


def cli_commands(parser: argparse.ArgumentParser | None = None, prefix: str = "") -> list[str]:
    """Every command without subcommands, e.g. ``"bench perf"``, in the parser's order."""
    if parser is None:
        from synapse_retriever.cli import build_parser

        parser = build_parser()
    found: list[str] = []
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                found.extend(cli_commands(sub, f"{prefix}{name} ") or [f"{prefix}{name}"])
    return found


def cli_reference() -> str:
    """A section per command: its heading and its ``--help``."""
    return "\n".join(
        f"### synapse-retriever {command}\n\n```text\n{cli_help(command)}```\n"
        for command in cli_commands()
    )


def on_page_markdown(markdown: str, **kwargs: Any) -> str:
    markdown = markdown.replace(_CLI_REFERENCE, cli_reference())
    return _CLI_MARKER.sub(lambda found: f"```text\n{cli_help(found.group(1))}```", markdown)


@event_priority(100)  # before mkdocs-jupyter's on_files, which turns them into pages
def on_files(files: Files, config: Any, **kwargs: Any) -> Files:
    for notebook in sorted(NOTEBOOKS.glob("*.ipynb")):
        # a file of the repository's root (not a generated one): mkdocs-jupyter reads it
        # through the src_dir its wrapper delegates to
        files.append(
            File(
                f"notebooks/{notebook.name}",
                src_dir=str(ROOT),
                dest_dir=config["site_dir"],
                use_directory_urls=config["use_directory_urls"],
            )
        )
    return files
