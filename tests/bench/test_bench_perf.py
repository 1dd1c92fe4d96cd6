"""synapse bench perf runs end to end on a tiny size; its naive spread computes the same thing."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import numpy as np
import pytest

from synapse_retriever import SynapseConfig, SynapseStore
from synapse_retriever.bench.perf import (
    NOW,
    grow_graph,
    naive_spread,
    sqlite_delete_floor,
    sqlite_upsert_floor,
    zipf_events,
)
from synapse_retriever.cli import main


def test_zipf_events_favour_popular_nodes() -> None:
    events = zipf_events(1000, 400, size=10, seed=3)
    assert events.shape == (400, 10)
    assert all(len(set(row)) == 10 for row in events.tolist())
    counts = {node: 0 for node in range(1000)}
    for node in events.ravel().tolist():
        counts[node] += 1
    assert counts[0] > counts[500] + 50  # rank 1 is drawn far more often than rank 501


def test_grown_graph_has_the_requested_edges_and_hubs(tmp_path: Path) -> None:
    shape = grow_graph(tmp_path / "g.db", 3000, seed=1)
    assert shape["edges"] == 3000
    assert shape["max_degree"] > 100  # Zipf popularity makes hubs
    with SynapseStore(tmp_path / "g.db") as store:
        assert store.graph(at=NOW).number_of_edges() == 3000
        assert len(store._mirror.uses) == shape["nodes"]  # every node of an edge was used


def test_the_naive_spread_agrees_with_the_store(tmp_path: Path) -> None:
    path = tmp_path / "g.db"
    grow_graph(path, 2000, seed=2)
    config = SynapseConfig(weight_tolerance_s=0.0)
    store = SynapseStore(path, config=config)
    db = sqlite3.connect(path)
    names = [f"src/module_{i:07d}.py" for i in range(1000)]
    for row in zipf_events(1000, 5, seed=4).tolist():
        seeds = [names[i] for i in row[:3]]
        ours = store.activate(seeds, at=NOW)
        theirs = naive_spread(db, seeds, NOW, config)
        # the naive spread reports energy before the target's own hub factor: compare E × hf
        graph = store.graph(at=NOW)
        for node, energy in theirs.items():
            degree = graph.degree(node)
            factor = (50 / degree) ** 0.5 if degree > 50 else 1.0
            assert ours[node] == pytest.approx(energy * factor, rel=1e-9)
        assert set(ours) == set(theirs)
    db.close()
    store.close()


def test_bench_perf_command_writes_json_and_a_plot(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out, png = tmp_path / "perf.json", tmp_path / "latency"  # written as given, no suffix added
    argv = ["bench", "perf", "--sizes", "1500", "3000", "--queries", "5", "--events", "3"]
    argv += ["--naive-budget", "0.2", "--json", str(out), "--plot", str(png), "--quiet"]
    assert main([*argv, "--dir", str(tmp_path)]) == 0
    results = json.loads(out.read_text())
    assert [r["edges"] for r in results] == [1500, 3000]
    for r in results:
        assert r["recall_p50_us"] > 0 and r["recall_p99_us"] >= r["recall_p50_us"]
        assert 0 < r["repeat_recall_p50_us"] <= r["repeat_recall_p99_us"]
        assert r["published_recall_p50_us"] > 0
        assert r["reinforce_upserts_per_s"] > 0 and r["naive_queries"] >= 1
        assert r["sqlite_floor_upserts_per_s"] > 0 and r["sqlite_floor_delete_s"] >= 0
        assert r["naive_spread_p50_us"] > 0 and r["naive_ratio"] > 0
        assert r["daily_sweep_s"] >= 0 and r["decay_sweep_s"] >= 0 and r["open_load_s"] > 0
        assert r["array_bytes_per_edge"] > 0 and 1 <= r["max_degree"] < r["edges"]
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert "recall p50" in capsys.readouterr().out


@pytest.mark.parametrize(
    "argv",
    [["--sizes", "0"], ["--sizes", "-5"], ["--queries", "0"], ["--events", "0"]],
)
def test_bench_perf_refuses_empty_runs(argv: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as stopped:
        main(["bench", "perf", *argv])
    assert stopped.value.code == 2
    assert "must be at least 1" in capsys.readouterr().err


def test_bench_perf_refuses_an_output_that_is_a_directory(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["bench", "perf", "--sizes", "1500", "--json", str(tmp_path)]) == 2
    assert "is a directory" in capsys.readouterr().err


def test_the_sqlite_floor_writes_the_events_edges_through_the_stores_triggers(
    tmp_path: Path,
) -> None:
    path = tmp_path / "floor.db"
    with SynapseStore(path) as store:
        store.reinforce(["a", "b"], at=0)  # version 1
    events = np.array([[0, 1, 2], [1, 0, 1]])  # a-b twice (a repeat counts once), a-c, b-c
    assert sqlite_upsert_floor(path, events, ["a", "b", "c"]) > 0
    with SynapseStore(path) as store:
        ab, ac = store.edge("a", "b"), store.edge("a", "c")
        assert ab is not None and ac is not None
        # a-b: stored once by the store (0.3, count 1), then +0.3 twice, capped at 1: 0.9
        assert (ab.activation_count, round(ab.weight, 6)) == (3, 0.9)
        assert ac.activation_count == 1
        db = store._storage._db
        assert db.execute("SELECT value FROM meta WHERE key = 'version'").fetchone()[0] == 3
        logged = db.execute("SELECT count(*) FROM edge_log WHERE version > 1").fetchone()[0]
        assert logged == 4  # version 2: a-b, a-c, b-c; version 3: a-b


def test_the_sqlite_delete_floor_deletes_that_many_edges_through_the_triggers(
    tmp_path: Path,
) -> None:
    path = tmp_path / "floor.db"
    with SynapseStore(path) as store:
        store.reinforce([f"n{i}" for i in range(6)], at=0)  # 15 edges, version 1
    assert sqlite_delete_floor(path, 4, seed=1) >= 0
    with SynapseStore(path) as store:
        assert store.graph(at=0).number_of_edges() == 11
        db = store._storage._db
        assert db.execute("SELECT count(*) FROM edge_log WHERE version = 2").fetchone()[0] == 4
