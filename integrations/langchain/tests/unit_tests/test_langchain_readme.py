"""The package README's examples run as written and print what their ``# out:`` lines say."""

from __future__ import annotations

import contextlib
import io
import os
import re
from pathlib import Path

import pytest

README = Path(__file__).resolve().parents[2] / "README.md"
BLOCKS = re.findall(r"```python\n(.*?)```", README.read_text(encoding="utf-8"), re.S)


def normalized(line: str) -> str:
    return " ".join(line.split())


def test_the_readme_has_an_example() -> None:
    assert BLOCKS


@pytest.mark.parametrize("code", BLOCKS, ids=[f"block{i}" for i in range(len(BLOCKS))])
def test_readme_example_prints_what_it_says(code: str, tmp_path: Path) -> None:
    expected = [
        normalized(line.split("# out:", 1)[1]) for line in code.splitlines() if "# out:" in line
    ]
    printed = io.StringIO()
    cwd = os.getcwd()
    os.chdir(tmp_path)  # the example writes synapses.db
    try:
        with contextlib.redirect_stdout(printed):
            exec(compile(code, str(README), "exec"), {"__name__": "__readme__"})
    finally:
        os.chdir(cwd)
    assert [normalized(line) for line in printed.getvalue().splitlines()] == expected
