"""The reports a store command prints with ``--json`` and the MCP tool of the same name returns
(``cli/reports.py``): what they hold, on a store built by hand. That the command and the tool
return them is checked in ``test_cli.py`` and ``test_mcp.py``."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from synapse_retriever import SynapseStore
from synapse_retriever.cli import main
from synapse_retriever.cli.reports import neighbour_report, stats_report

DAY = 86_400.0


def test_neighbour_report_is_strongest_first_and_limited_to_limit(tmp_path: Path) -> None:
    with SynapseStore(tmp_path / "s.db") as store:
        store.reinforce(["a", "b"], strength=2.0, at=0)
        store.reinforce(["a", "c"], at=0)
        every = neighbour_report(store, "a", 0.0, None, 0)  # 0: all of them
        first = neighbour_report(store, "a", 0.0, None, 1)
    # strength 2.0 doubles the first reinforcement's 0.30: 0.60 for a-b, 0.30 for a-c
    assert [(r["neighbour"], r["weight"]) for r in every["neighbours"]] == [("b", 0.6), ("c", 0.3)]
    assert (every["total"], first["total"]) == (2, 2)
    assert first["neighbours"] == every["neighbours"][:1]
    assert every["at"] == "1970-01-01T00:00:00Z" and every["node"] == "a"


def test_the_reports_are_what_the_commands_print(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "s.db"
    with SynapseStore(path) as store:
        store.reinforce(["a", "b"], at=0)
    assert main(["edges", str(path), "a", "--at", str(DAY), "--json"]) == 0
    edges = json.loads(capsys.readouterr().out)
    assert main(["stats", str(path), "--at", str(DAY), "--json"]) == 0
    stats = json.loads(capsys.readouterr().out)
    with SynapseStore(path) as store:
        assert edges == neighbour_report(store, "a", DAY, None, 50)  # --limit defaults to 50
        assert stats == stats_report(store, DAY, None, name=str(path))
