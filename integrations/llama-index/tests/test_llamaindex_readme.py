"""The package README's example runs as written and prints what it says."""

from __future__ import annotations

import contextlib
import io
import re
from pathlib import Path

import pytest

README = Path(__file__).resolve().parents[1] / "README.md"
BLOCKS = re.findall(r"```python\n(.*?)```", README.read_text(encoding="utf-8"), re.S)


def normalized(line: str) -> str:
    return " ".join(line.split())


def test_the_readme_has_an_example() -> None:
    assert len(BLOCKS) == 1


@pytest.mark.parametrize("code", BLOCKS)
def test_readme_example_prints_what_it_says(
    code: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        exec(compile(code, str(README), "exec"), {"__name__": "__readme__"})
    marker = "# out:"
    expected = [
        normalized(line.split(marker, 1)[1]) for line in code.splitlines() if marker in line
    ]
    assert [normalized(line) for line in printed.getvalue().splitlines()] == expected
    assert (tmp_path / "synapses.db").exists()
