"""The documentation site builds with ``mkdocs build --strict``, and its links all resolve.

The site is built once per session into a temporary folder, the notebooks executed into their
pages; the checks then read the built HTML (tests/test_docs_browser.py opens some pages in a
headless browser). The pages' Python examples compile, and those that say what they
print (``# out: ...``, as in the README) print it.
"""

from __future__ import annotations

import argparse
import ast
import contextlib
import dataclasses
import io
import re
from html.parser import HTMLParser
from pathlib import Path
from urllib.parse import unquote, urlsplit

import pytest
from test_public_api import PUBLIC_API

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"
PAGES = sorted(DOCS.rglob("*.md"))
BLOCK = re.compile(r"^```python\n(.*?)^```", re.S | re.M)


class _Links(HTMLParser):
    """Every link target (href, src) and every element id of one HTML page."""

    def __init__(self) -> None:
        super().__init__()
        self.targets: list[str] = []
        self.ids: set[str] = set()

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        for name, value in attrs:
            if name == "id" and value:
                self.ids.add(value)
            if value and (name == "src" or (name == "href" and tag in ("a", "link"))):
                self.targets.append(value)


def _parsed(page: Path, cache: dict[Path, _Links]) -> _Links:
    if page not in cache:
        parser = _Links()
        parser.feed(page.read_text(encoding="utf-8"))
        cache[page] = parser
    return cache[page]


def test_mkdocs_build_strict_succeeds(site: Path) -> None:
    assert (site / "index.html").is_file()
    assert (site / "reference" / "store" / "index.html").is_file()


def test_every_internal_link_and_anchor_resolves(site: Path) -> None:
    cache: dict[Path, _Links] = {}
    broken = []
    pages = sorted(site.rglob("*.html"))
    for page in pages:
        for target in _parsed(page, cache).targets:
            parts = urlsplit(target)
            if parts.scheme or parts.netloc or target.startswith(("mailto:", "data:")):
                continue  # external: not checked offline
            path = unquote(parts.path)
            if path.startswith("/"):  # site-absolute (the 404 page's): from the site's root
                resolved = (site / path.lstrip("/")).resolve()
            else:
                resolved = page if not path else (page.parent / path).resolve()
            if resolved.is_dir():
                resolved = resolved / "index.html"
            if not resolved.is_file():
                broken.append(f"{page.relative_to(site)}: {target} (no such file)")
            elif (
                parts.fragment
                and resolved.suffix == ".html"
                and unquote(parts.fragment) not in _parsed(resolved, cache).ids
            ):
                broken.append(f"{page.relative_to(site)}: {target} (no such anchor)")
    assert len(pages) > 10
    assert not broken, "\n".join(broken)


@pytest.mark.parametrize(
    "notebook", sorted((ROOT / "notebooks").glob("*.ipynb")), ids=lambda path: path.name
)
def test_each_notebook_is_a_page_with_its_outputs_and_a_download(
    site: Path, notebook: Path
) -> None:
    """mkdocs-jupyter executed the notebook at build time (it is committed without outputs):
    its page shows what the cells printed and drew, and links the .ipynb beside it."""
    folder = site / "notebooks" / notebook.stem
    assert (folder / notebook.name).read_bytes() == notebook.read_bytes()
    page = (folder / "index.html").read_text(encoding="utf-8")
    assert page.count("jp-OutputArea-output") >= 3, "no outputs: was it executed?"
    if "plt." in notebook.read_text(encoding="utf-8"):  # a notebook that plots shows it
        assert 'src="data:image/png;base64,' in page
    assert f'href="{notebook.name}" download' in page


@pytest.mark.parametrize("package", sorted(PUBLIC_API))
def test_every_public_name_is_in_the_api_reference(package: str) -> None:
    module = pytest.importorskip(package)
    documented = {
        line.split()[1]
        for page in (DOCS / "reference").glob("*.md")
        for line in page.read_text(encoding="utf-8").splitlines()
        if line.startswith("::: ")
    }
    missing = [name for name in module.__all__ if f"{package}.{name}" not in documented]
    assert not missing, f"not in docs/reference: {missing}"


def test_configuration_page_lists_every_field_of_every_group_with_its_default() -> None:
    from synapse_retriever import (
        ActrRule,
        Learning,
        Operations,
        PublishedRule,
        Spreading,
        SynapseConfig,
    )
    from synapse_retriever.config import GROUPS

    text = (DOCS / "configuration.md").read_text(encoding="utf-8")
    sections = {part.split("\n", 1)[0]: part for part in text.split("\n### ")[1:]}
    for kind in (SynapseConfig, Learning, ActrRule, PublishedRule, Spreading, Operations):
        heading = next(h for h in sections if kind.__name__ in h or h == kind.__name__.lower())
        shown = kind()
        for field in dataclasses.fields(kind):
            if not field.init or field.name in GROUPS:  # the groups have their own tables
                continue
            value = getattr(shown, field.name)
            if field.name in ("half_life_days", "merge_weights"):
                value = dict(value)  # shown as a dict, not as the read-only mapping it is stored as
            row = f"| `{field.name}` | `{value!r}` |"
            assert row in sections[heading], f"configuration.md, {heading}: {field.name}"


def test_configuration_page_lists_every_conversation_memory_field_with_its_default() -> None:
    from synapse_retriever.conversation import ContextConfig

    text = (DOCS / "configuration.md").read_text(encoding="utf-8")
    default = ContextConfig()
    for field in dataclasses.fields(ContextConfig):
        value = getattr(default, field.name)
        if field.name == "temperatures":
            value = dict(value)  # shown as a dict, not as the read-only mapping it is stored as
        assert f"| `{field.name}` | `{value!r}` |" in text, f"configuration.md: {field.name}"


def test_the_notify_the_pages_quote_is_the_one_a_commit_sends() -> None:
    """A page that quotes the ``pg_notify`` ending every write transaction on PostgreSQL
    quotes the statement the store sends (scaling-out.md quoted an empty payload, an older
    release's, where a commit now sends its schema's oid)."""
    from synapse_retriever.persistence.postgres import CHANNEL, SCHEMA_OID

    sent = f"SELECT pg_notify('{CHANNEL}', {SCHEMA_OID}::text)"
    quoted = [
        (page.name, quote)
        for page in PAGES
        for quote in re.findall(r"`(SELECT pg_notify\(.*?)`", page.read_text(encoding="utf-8"))
    ]
    assert quoted, "no page quotes it"
    assert [quote for _, quote in quoted if quote != sent] == [], f"sent: {sent}"


def test_cli_page_shows_every_command(site: Path) -> None:
    """The CLI page has a section with the ``--help`` of every command, generated at build."""
    from synapse_retriever.cli import build_parser

    def commands(parser: argparse.ArgumentParser, prefix: str = "") -> list[str]:
        found = []
        for action in parser._actions:
            if isinstance(action, argparse._SubParsersAction):
                for name, sub in action.choices.items():
                    nested = commands(sub, f"{prefix}{name} ")
                    found.extend(nested or [f"{prefix}{name}"])
        return found

    ids = _parsed(site / "cli" / "index.html", {}).ids
    prog = build_parser().prog  # the headings read "synapse-retriever bench perf"
    missing = [c for c in commands(build_parser()) if f"{prog} {c}".replace(" ", "-") not in ids]
    assert not missing, f"the CLI page has no section for: {missing}"


EXAMPLES = [
    pytest.param(page, code, id=f"{page.relative_to(DOCS)}:{number}")
    for page in PAGES
    for number, code in enumerate(BLOCK.findall(page.read_text(encoding="utf-8")))
]


@pytest.mark.parametrize(("page", "code"), EXAMPLES)
def test_page_examples_compile_and_print_what_they_say(
    page: Path, code: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Every example compiles; one that says what it prints (``# out: ...``) runs and prints
    exactly that, again when run a second time in the same folder (as a reader re-runs it)."""
    compiled = compile(code, str(page), "exec")
    expected = [
        line.split("# out:", 1)[1].strip() for line in code.splitlines() if "# out:" in line
    ]
    if not expected:
        return  # a fragment (it names your vector store, your agent...): compiling is the check
    monkeypatch.chdir(tmp_path)
    for run in ("first", "second"):
        printed = io.StringIO()
        with contextlib.redirect_stdout(printed):
            exec(compiled, {"__name__": "__docs__"})
        output = [line.strip() for line in printed.getvalue().splitlines()]
        assert output == expected, f"{run} run"


def test_every_test_the_guarantees_page_names_exists() -> None:
    """A promise on docs/guarantees.md is held by a test that exists, by file and name."""
    named = re.findall(
        r"`((?:tests|integrations)/[\w/.-]+\.py)::(\w+)`", (DOCS / "guarantees.md").read_text()
    )
    assert len(named) >= 20
    missing = [
        f"{path}::{name}"
        for path, name in named
        if not re.search(rf"^(async )?def {name}\(", (ROOT / path).read_text(), re.M)
    ]
    assert missing == []


def _cells(line: str) -> list[str]:
    """The cells of one Markdown table row: split at each ``|`` outside code spans, less the
    escaped ones (``\\|``)."""
    cells, cell, code = [], "", False
    for at, char in enumerate(line.strip().strip("|")):
        if char == "`":
            code = not code
        if char == "|" and not code and line.strip().strip("|")[at - 1 : at] != "\\":
            cells.append(cell.strip())
            cell = ""
        else:
            cell += char
    return [*cells, cell.strip()]


def _tables(text: str) -> list[list[list[str]]]:
    """Every table of a Markdown page (outside fenced blocks): its rows' cells, header first,
    without the rule under the header."""
    tables: list[list[list[str]]] = []
    rows: list[list[str]] = []
    fenced = False
    for line in [*text.splitlines(), ""]:
        fenced ^= line.startswith("```")
        if not fenced and line.startswith("|"):
            cells = _cells(line)
            if not all(set(cell) <= set(":-") and cell for cell in cells):  # not the rule
                rows.append(cells)
            continue
        if rows:
            tables.append(rows)
            rows = []
    return tables


@pytest.mark.parametrize(
    "page", [*PAGES, ROOT / "README.md", ROOT / "CHANGELOG.md"], ids=lambda p: p.name
)
def test_every_table_row_has_its_headers_cells(page: Path) -> None:
    # a row with a cell too many renders with its last cell dropped (a description lost)
    for rows in _tables(page.read_text(encoding="utf-8")):
        header = rows[0]
        for row in rows[1:]:
            assert len(row) == len(header), f"{page.name}: {header[:2]} ... row {row[:2]}"


def test_conversation_fields_show_the_published_preset_where_it_differs() -> None:
    from synapse_retriever.conversation import ContextConfig

    text = (DOCS / "configuration.md").read_text(encoding="utf-8")
    default, published = ContextConfig(), ContextConfig.published()
    (table,) = [rows for rows in _tables(text) if rows[0][:3] == ["field", "default", "published"]]
    rows = {row[0]: row for row in table[1:]}
    differ = []
    for field in dataclasses.fields(ContextConfig):
        row, value = rows[f"`{field.name}`"], getattr(published, field.name)
        if value != getattr(default, field.name):
            differ.append(field.name)
            assert row[2] == f"`{value!r}`", f"configuration.md: {field.name} as published"
        else:
            assert row[2] == "", f"configuration.md: {field.name} is the default when published"
    count = ("no", "one", "two", "three", "four", "five", "six", "seven")[len(differ)]
    assert f"differs in {count} fields" in text


def test_conversation_presets_table_shows_each_presets_values() -> None:
    from synapse_retriever.conversation import ContextConfig

    text = (DOCS / "conversation-memory.md").read_text(encoding="utf-8")
    (table,) = [rows for rows in _tables(text) if "`ContextConfig()` (default)" in rows[0]]
    presets = (ContextConfig(), ContextConfig.gradient(), ContextConfig.published())
    named = {row[0].strip("`"): row[1:] for row in table[1:]}
    assert named.pop("every other field") == ["same"] * len(presets)
    for field in dataclasses.fields(ContextConfig):
        values = [getattr(preset, field.name) for preset in presets]
        if field.name in named:
            shown = [ast.literal_eval(cell.strip("`")) for cell in named[field.name]]
            assert shown == values, f"presets table: {field.name}"
        else:
            assert values == [values[0]] * len(presets), f"presets table: {field.name} differs"
