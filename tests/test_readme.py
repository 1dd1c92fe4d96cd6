"""The README's examples run as written and print exactly what their ``# out:`` lines say.

Each ```python block prints its ``# out:`` lines, no more, no fewer, in order (an example that
prints nothing has none). A user pastes an example once, again later, or one after another in
the same folder: each run, in a fresh folder or not, must print the same.
"""

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


def test_the_readme_has_examples() -> None:
    assert len(BLOCKS) >= 3


@pytest.mark.parametrize("code", BLOCKS, ids=[f"block{i}" for i in range(len(BLOCKS))])
def test_readme_example_prints_exactly_what_it_says_each_time_it_runs(
    code: str, tmp_path: Path
) -> None:
    for run in ("first", "second"):  # the second in the folder the first wrote to
        assert printed(code, tmp_path) == out_lines(code), f"{run} run"


def test_readme_examples_run_one_after_another_in_one_folder_twice(tmp_path: Path) -> None:
    """As a user pasting them would: every example in order, then all of them again."""
    for round_ in (1, 2):
        for number, code in enumerate(BLOCKS):
            assert printed(code, tmp_path) == out_lines(code), f"round {round_}, block{number}"
