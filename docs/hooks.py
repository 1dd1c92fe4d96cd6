"""MkDocs hooks: pages include README sections and the CLI's own ``--help``, so neither drifts.

- ``<!-- readme: Title -->`` is replaced by the body of the README's ``## Title`` section.
- ``<!-- cli-help: bench perf -->`` is replaced by ``synapse bench perf --help``.
- The notebooks are copied into the site under ``notebooks/``, so pages can link to them.
"""

from __future__ import annotations

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
_CLI_MARKER = re.compile(r"<!-- cli-help: ?(.*?) -->")


def readme_section(title: str) -> str:
    """The body of the README's ``## title`` section, up to the next ``## `` heading."""
    text = README.read_text(encoding="utf-8")
    found = re.search(rf"^## {re.escape(title)}\n(.*?)(?=^## |\Z)", text, re.S | re.M)
    if found is None:
        raise ValueError(f"README.md has no section '## {title}'")
    return found.group(1).strip()


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


def on_page_markdown(markdown: str, **kwargs: Any) -> str:
    markdown = _README_MARKER.sub(lambda found: readme_section(found.group(1)), markdown)
    return _CLI_MARKER.sub(lambda found: f"```text\n{cli_help(found.group(1))}```", markdown)


def on_files(files: Files, config: Any, **kwargs: Any) -> Files:
    for notebook in sorted(NOTEBOOKS.glob("*.ipynb")):
        files.append(
            File.generated(config, f"notebooks/{notebook.name}", abs_src_path=str(notebook))
        )
    return files
