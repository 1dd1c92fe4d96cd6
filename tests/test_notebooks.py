"""The notebooks run top to bottom, offline, and are committed without outputs.

Each notebook is executed in a fresh kernel (nbclient), in a temporary folder, with
matplotlib's non-interactive Agg backend, so a notebook broken by a change fails here.
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


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda path: path.name)
def test_notebook_runs_top_to_bottom(
    path: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    nbformat = pytest.importorskip("nbformat", reason="running notebooks needs nbformat")
    nbclient = pytest.importorskip("nbclient", reason="running notebooks needs nbclient")
    pytest.importorskip("ipykernel", reason="running notebooks needs ipykernel")
    monkeypatch.setenv("MPLBACKEND", "Agg")  # the kernel inherits it: no display needed
    notebook = nbformat.read(path, as_version=4)
    client = nbclient.NotebookClient(
        notebook,
        timeout=120,  # per cell; each notebook takes a few seconds in all
        kernel_name="python3",
        resources={"metadata": {"path": str(tmp_path)}},
    )
    client.execute()
