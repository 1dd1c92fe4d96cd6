"""The READMEs' examples run as written and print exactly what their ``# out:`` lines say.

Each ```python block prints its ``# out:`` lines, no more, no fewer, in order (an example that
prints nothing has none). A user pastes an example once, again later, or one after another in
the same folder: each run, in a fresh folder or not, must print the same. The root README and
the two integration packages' READMEs are held to this alike.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import re
from pathlib import Path

import pytest
from readme_examples import READMES, blocks, out_lines

EXAMPLES = [(readme, code) for readme in READMES for code in blocks(readme)]


def printed(code: str, readme: Path, folder: Path) -> list[str]:
    """Run the example in ``folder``; the lines it printed."""
    output = io.StringIO()
    with contextlib.chdir(folder), contextlib.redirect_stdout(output):
        exec(compile(code, str(readme), "exec"), {"__name__": "__readme__"})
    return [line.rstrip() for line in output.getvalue().splitlines()]


def test_the_readmes_have_examples() -> None:
    assert [len(blocks(readme)) for readme in READMES] == [len(blocks(READMES[0])), 1, 1]
    assert len(blocks(READMES[0])) >= 3


@pytest.mark.parametrize(
    ("readme", "code"),
    EXAMPLES,
    ids=[f"{readme.parent.name}-block{blocks(readme).index(code)}" for readme, code in EXAMPLES],
)
def test_readme_example_prints_exactly_what_it_says_each_time_it_runs(
    readme: Path, code: str, tmp_path: Path
) -> None:
    for run in ("first", "second"):  # the second in the folder the first wrote to
        assert printed(code, readme, tmp_path) == out_lines(code), f"{run} run"


def test_readme_examples_run_one_after_another_in_one_folder_twice(tmp_path: Path) -> None:
    """As a user pasting them would: every example of the README in order, then again."""
    for round_ in (1, 2):
        for number, code in enumerate(blocks(READMES[0])):
            assert printed(code, READMES[0], tmp_path) == out_lines(code), (
                f"round {round_}, block{number}"
            )


def test_the_readme_lists_every_command_of_the_cli_in_its_order() -> None:
    """The README's CLI line names the command and each of its subcommands, none missing."""
    from synapse_retriever.cli import build_parser

    parser = build_parser()
    (subparsers,) = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    text = READMES[0].read_text(encoding="utf-8")
    (item,) = re.findall(r"^- \[CLI\]\(docs/cli\.md\):(.*?)(?=^- |\Z)", text, re.M | re.S)
    first, *others = re.findall(r"`([^`]+)`", item)
    assert first.startswith(f"{parser.prog} "), first  # `synapse-retriever stats`, `edges`, ...
    assert [first.removeprefix(f"{parser.prog} "), *others] == list(subparsers.choices)
