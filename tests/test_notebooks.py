"""The notebooks are committed without outputs, and run top to bottom, offline.

They run in the docs' strict build (``mkdocs build --strict``, tests/test_docs.py), which
executes each in a fresh kernel and fails on a cell that raises: a notebook broken by a change
fails the build. Here: that the build is set to do so, and what is committed.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

NOTEBOOKS_DIR = Path(__file__).resolve().parents[1] / "notebooks"
NOTEBOOKS = sorted(NOTEBOOKS_DIR.glob("*.ipynb"))
EXPECTED = {
    "quickstart_langchain.ipynb",
    "quickstart_llamaindex.ipynb",
    "explore_the_graph.ipynb",
    "conversation_memory.ipynb",
    "conversation_graph.ipynb",
}


def test_the_notebooks_are_all_there() -> None:
    assert {path.name for path in NOTEBOOKS} >= EXPECTED


def test_the_notebooks_page_has_a_row_for_each_notebook_and_no_count() -> None:
    """A notebook added to the folder is described on the page; no number there can drift."""
    page = NOTEBOOKS_DIR.parent / "docs" / "how-to" / "notebooks.md"
    rows = re.findall(r"^\| \[`([^`]+\.ipynb)`\]", page.read_text(encoding="utf-8"), re.M)
    assert sorted(rows) == [path.name for path in NOTEBOOKS]
    counts = r"\b(?:two|three|four|five|six|seven|eight|nine|ten|\d+) notebooks\b"
    assert not re.search(counts, page.read_text(encoding="utf-8"), re.I)


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda path: path.name)
def test_notebook_is_committed_without_outputs(path: Path) -> None:
    """Outputs (and execution counts) are not committed: run the notebook to see them."""
    notebook = json.loads(path.read_text(encoding="utf-8"))
    for number, cell in enumerate(notebook["cells"]):
        if cell["cell_type"] == "code":
            assert cell.get("outputs") == [], f"{path.name}: cell {number} has outputs"
            assert cell.get("execution_count") is None, f"{path.name}: cell {number} was run"


def test_the_docs_build_runs_each_notebook_and_fails_on_a_failing_cell() -> None:
    """The notebooks run top to bottom in the docs' strict build (tests/test_docs.py builds
    the site; each notebook's page must show its outputs): mkdocs-jupyter executes them,
    afresh on every build, and a cell that raises fails the build. One run, not two."""
    yaml = pytest.importorskip("yaml", reason="reading mkdocs.yml needs PyYAML")
    config = yaml.safe_load((NOTEBOOKS_DIR.parent / "mkdocs.yml").read_text(encoding="utf-8"))
    (jupyter,) = [p["mkdocs-jupyter"] for p in config["plugins"] if "mkdocs-jupyter" in p]
    assert jupyter["execute"] is True
    assert jupyter["allow_errors"] is False
    assert jupyter["cache"] is False
    assert jupyter["include"] == ["*.ipynb"]
