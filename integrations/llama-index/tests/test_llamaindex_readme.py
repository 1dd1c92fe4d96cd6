"""The package README's example runs as written and prints exactly what its ``# out:`` lines say,
each time it runs: a second run in the same folder prints the same."""

from __future__ import annotations

import contextlib
import io
import re
from pathlib import Path

import pytest

README = Path(__file__).resolve().parents[1] / "README.md"
BLOCKS = re.findall(r"```python\n(.*?)```", README.read_text(encoding="utf-8"), re.S)


def out_lines(code: str) -> list[str]:
    """What the example says it prints: the text after each ``# out: ``."""
    marker = "# out:"
    return [
        line.split(marker, 1)[1].removeprefix(" ").rstrip()
        for line in code.splitlines()
        if marker in line
    ]


def printed(code: str, folder: Path) -> list[str]:
    """Run the example in ``folder``; the lines it printed."""
    output = io.StringIO()
    with contextlib.chdir(folder), contextlib.redirect_stdout(output):
        exec(compile(code, str(README), "exec"), {"__name__": "__readme__"})
    return [line.rstrip() for line in output.getvalue().splitlines()]


def test_the_readme_has_an_example() -> None:
    assert len(BLOCKS) == 1


@pytest.mark.parametrize("code", BLOCKS)
def test_readme_example_prints_exactly_what_it_says_each_time_it_runs(
    code: str, tmp_path: Path
) -> None:
    for run in ("first", "second"):  # the second in the folder the first wrote to
        assert printed(code, tmp_path) == out_lines(code), f"{run} run"
