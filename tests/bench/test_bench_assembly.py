"""The assembly speed benchmark: it runs end to end on a tiny input (no timed assertion)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from synapse_retriever.bench.assembly import markdown_table, run_assembly_speed
from synapse_retriever.cli import main


def test_every_size_and_budget_is_timed() -> None:
    report = run_assembly_speed(turns=(40, 80), budgets=(100, 300), queries=3)
    assert [(r["turns"], r["budget"]) for r in report["rows"]] == [
        (40, 100), (40, 300), (80, 100), (80, 300),
    ]  # fmt: skip
    for row in report["rows"]:
        assert 0 < row["p50_ms"] <= row["p90_ms"] <= row["max_ms"]
    assert [a["turns"] for a in report["add_turn"]] == [40, 80]
    assert all(0 < a["add_p50_ms"] <= a["add_p99_ms"] for a in report["add_turn"])
    assert markdown_table(report).splitlines()[6:8] == ["", "| turns | add_turn p50 ms | p99 ms |"]


def test_the_cli_writes_the_report(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "speed.json"
    argv = ["bench", "assembly", "--turns", "30", "--budgets", "400", "--queries", "2"]
    assert main([*argv, "--quiet", "--json", str(out)]) == 0
    assert json.loads(out.read_text())["rows"][0]["turns"] == 30
    assert main([*argv, "--quiet"]) == 0
    assert "| 30 | 400 | 2 |" in capsys.readouterr().out


def test_the_cli_refuses_a_conversation_too_short_to_plant_a_fact(
    capsys: pytest.CaptureFixture[str],
) -> None:
    with pytest.raises(SystemExit) as stopped:  # was a ValueError's traceback (random.sample)
        main(["bench", "assembly", "--turns", "1", "--budgets", "400", "--queries", "2"])
    assert stopped.value.code == 2 and "must be at least 2, got 1" in capsys.readouterr().err
