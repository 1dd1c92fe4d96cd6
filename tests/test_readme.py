"""The README's examples run as written (each ```python block, in a fresh folder)."""

from __future__ import annotations

import contextlib
import io
import os
import re
from pathlib import Path

import pytest

README = Path(__file__).resolve().parents[1] / "README.md"
BLOCKS = re.findall(r"```python\n(.*?)```", README.read_text(encoding="utf-8"), re.S)


def normalized(line: str) -> str:
    return " ".join(line.split())


@pytest.mark.parametrize("code", BLOCKS, ids=[f"block{i}" for i in range(len(BLOCKS))])
def test_readme_example_runs_and_prints_what_it_says(code: str, tmp_path: Path) -> None:
    """Lines written ``# out: text`` in an example are what it prints, in that order."""
    marker = "# out:"
    expected = [
        normalized(line.split(marker, 1)[1]) for line in code.splitlines() if marker in line
    ]
    printed = io.StringIO()
    cwd = os.getcwd()
    os.chdir(tmp_path)
    try:
        with contextlib.redirect_stdout(printed):
            exec(compile(code, str(README), "exec"), {"__name__": "__readme__"})
    finally:
        os.chdir(cwd)
    output = [normalized(line) for line in printed.getvalue().splitlines()]
    position = 0
    for line in expected:
        assert line in output[position:], f"README says it prints {line!r}; it printed {output}"
        position = output.index(line, position) + 1
