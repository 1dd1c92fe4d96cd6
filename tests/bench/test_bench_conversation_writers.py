"""The writers benchmark: processes adding turns to users' memories at once (tiny runs;
tests/persistence/conversation/test_postgres_conversation.py checks its counts)."""

from __future__ import annotations

import json

import pytest

from synapse_retriever.bench.conversation_writers import owner, run_writers, writer_text
from synapse_retriever.cli import main
from synapse_retriever.errors import InvalidValueError


def test_the_cli_runs_the_writers_on_postgresql_and_reports_nothing_lost(
    postgres_database: str, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = ["bench", "writers", "--postgres", postgres_database]
    assert main([*argv, "--processes", "2", "--turns", "8", "--users", "2", "--json", "-"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["backend"] == "postgresql" and report["processes"] == 2
    assert [report[key] for key in ("lost", "duplicated", "out_of_order", "cross_user")] == [0] * 4


def test_writers_on_one_sqlite_file_lose_nothing(capsys: pytest.CaptureFixture[str]) -> None:
    # each process opens a memory per user on the one file: two connections per process,
    # which lost turns while a header read dropped the process's locks on the file
    argv = ["bench", "writers", "--processes", "3", "--turns", "40", "--users", "2"]
    assert main([*argv, "--json", "-"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["backend"] == "sqlite" and report["processes"] == 3
    assert [report[key] for key in ("lost", "duplicated", "out_of_order", "cross_user")] == [0] * 4


def test_a_turn_names_its_user_whatever_the_name() -> None:
    assert owner(writer_text("o'brien|x", 1, 2)) == "o'brien"  # names here hold no "|"
    with pytest.raises(InvalidValueError, match="at least 1, got 0, 1, 1"):
        run_writers("unused.db", processes=0, turns=1, users=1)
