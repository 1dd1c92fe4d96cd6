"""MkDocs hooks: pages include README sections and the CLI's own ``--help``, so neither drifts.

- ``<!-- readme: Title -->`` is replaced by the body of the README's ``## Title`` section.
- ``<!-- readme: Title > Subtitle -->`` is replaced by the body of the ``### Subtitle``
  subsection of that section, up to the next ``###`` or ``##`` heading.
- ``<!-- readme-intro: Title -->`` is replaced by the body of the ``## Title`` section up to
  its first ``###`` subsection.
- ``<!-- cli-help: bench perf -->`` is replaced by ``synapse bench perf --help``.
- ``<!-- cli-reference -->`` is replaced by a ``### synapse <command>`` section with the
  ``--help`` of every command and subcommand, in the parser's order: a new command shows up
  without editing the page.
- The notebooks are copied into the site under ``notebooks/``, so pages can link to them.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import os
import re
from pathlib import Path
from typing import Any

from mkdocs.structure.files import File, Files

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
NOTEBOOKS = ROOT / "notebooks"

_README_MARKER = re.compile(r"<!-- readme: (.+?) -->")
_README_INTRO_MARKER = re.compile(r"<!-- readme-intro: (.+?) -->")
_CLI_MARKER = re.compile(r"<!-- cli-help: ?(.*?) -->")
_CLI_REFERENCE = "<!-- cli-reference -->"


def readme_section(title: str) -> str:
    """The body of the README's ``## title`` section, up to the next ``## `` heading.

    ``"Title > Subtitle"`` gives the body of the section's ``### Subtitle`` subsection, up to
    the next ``### `` or ``## `` heading.
    """
    title, _, subtitle = (part.strip() for part in title.partition(" > "))
    text = README.read_text(encoding="utf-8")
    found = re.search(rf"^## {re.escape(title)}\n(.*?)(?=^## |\Z)", text, re.S | re.M)
    if found is None:
        raise ValueError(f"README.md has no section '## {title}'")
    if not subtitle:
        return found.group(1).strip()
    sub = re.search(rf"^### {re.escape(subtitle)}\n(.*?)(?=^### |\Z)", found.group(1), re.S | re.M)
    if sub is None:
        raise ValueError(f"README.md's section '## {title}' has no '### {subtitle}'")
    return sub.group(1).strip()


def readme_intro(title: str) -> str:
    """The README's ``## title`` section up to its first ``### `` subsection."""
    return re.split(r"^### ", readme_section(title), maxsplit=1, flags=re.M)[0].strip()


def cli_help(command: str) -> str:
    """What ``synapse <command> --help`` prints, 100 columns wide."""
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
    """Every command of ``synapse`` that has no subcommands, e.g. ``"bench perf"``, in order."""
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
        f"### synapse {command}\n\n```text\n{cli_help(command)}```\n" for command in cli_commands()
    )


def on_page_markdown(markdown: str, **kwargs: Any) -> str:
    markdown = _README_MARKER.sub(lambda found: readme_section(found.group(1)), markdown)
    markdown = _README_INTRO_MARKER.sub(lambda found: readme_intro(found.group(1)), markdown)
    markdown = markdown.replace(_CLI_REFERENCE, cli_reference())
    return _CLI_MARKER.sub(lambda found: f"```text\n{cli_help(found.group(1))}```", markdown)


def on_files(files: Files, config: Any, **kwargs: Any) -> Files:
    for notebook in sorted(NOTEBOOKS.glob("*.ipynb")):
        files.append(
            File.generated(config, f"notebooks/{notebook.name}", abs_src_path=str(notebook))
        )
    return files
