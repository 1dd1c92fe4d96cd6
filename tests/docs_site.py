"""A pytest plugin (``-p docs_site`` in pyproject.toml): the documentation site, built once per
session for the modules that read it (tests/test_docs.py, tests/test_docs_browser.py).

A plugin rather than a conftest.py: ``--doctest-modules`` imports every conftest.py under one
module name, and integrations/llama-index/tests has one already."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="session")
def site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """``mkdocs build --strict`` into a temporary folder, the notebooks executed into their
    pages (tests/test_docs.py, tests/test_docs_browser.py)."""
    pytest.importorskip("mkdocs", reason="building the docs needs mkdocs")
    pytest.importorskip("material", reason="building the docs needs mkdocs-material")
    pytest.importorskip("mkdocstrings_handlers.python", reason="needs mkdocstrings[python]")
    pytest.importorskip("mkdocs_jupyter", reason="the notebooks' pages need mkdocs-jupyter")
    out = tmp_path_factory.mktemp("site")
    result = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(out)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        # the notebooks' kernels draw inline: no MPLBACKEND (Agg) inherited from a test run
        env={
            **{k: v for k, v in os.environ.items() if k != "MPLBACKEND"},
            "NO_MKDOCS_2_WARNING": "1",
        },
        timeout=400,
        check=False,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    return out
