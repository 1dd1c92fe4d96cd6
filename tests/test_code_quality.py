"""The README's test command also enforces ruff, and mypy --strict on all three distributions."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", *args], cwd=ROOT, capture_output=True, text=True, check=False
    )


def test_ruff_check_is_clean() -> None:
    result = run("ruff", "check", ".")
    assert result.returncode == 0, result.stdout + result.stderr


def test_ruff_format_is_clean() -> None:
    result = run("ruff", "format", "--check", ".")
    assert result.returncode == 0, result.stdout + result.stderr


# Packages rather than paths: `llama_index` is a namespace package shared with
# llama-index-core, so mypy finds ours through the editable install (as users import it).
# One run, so the three share the analysis of their common dependencies.
PACKAGES = ("synapse_retriever", "langchain_synapse_retriever", "llama_index.postprocessor.synapse")


def test_mypy_strict_on_the_core_and_the_integrations() -> None:
    packages = [arg for package in PACKAGES for arg in ("-p", package)]
    result = run("mypy", "--strict", *packages)
    assert result.returncode == 0, result.stdout + result.stderr
