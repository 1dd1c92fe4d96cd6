"""synapse-retriever bench perf runs end to end on a tiny size; its naive spread agrees."""

from __future__ import annotations

import argparse
import json
import os
import sqlite3
from pathlib import Path
from typing import Any

import numpy as np
import psycopg
import pytest

from synapse_retriever import SynapseConfig, SynapseStore
from synapse_retriever.bench import perf as perf_module
from synapse_retriever.bench.perf import (
    NOW,
    grow_graph,
    in_memory,
    naive_spread,
    reinforce_throughput,
    run_perf,
    sqlite_delete_floor,
    sqlite_upsert_floor,
    zipf_events,
)
from synapse_retriever.cli import build_parser, main
from synapse_retriever.cli.bench_commands import add_perf_options, cmd_bench_perf
from synapse_retriever.errors import InvalidValueError, StorageUnavailableError

SERVER = os.environ.get("SYNAPSE_TEST_POSTGRES", "postgresql://postgres@127.0.0.1:5432/postgres")
"""The test server (as in conftest.py): a role that may create databases."""


def perf(argv: list[str], **options: Any) -> int:
    """``synapse-retriever bench perf ARGV``, with the options of ``add_perf_options`` set directly
    (``--batches``, ``--postgres``, ``--postgres-max-edges``)."""
    args = build_parser().parse_args(["bench", "perf", *argv])
    vars(args).update(options)
    return cmd_bench_perf(args)


def edge_list(store: SynapseStore) -> list[tuple[str, str, dict[str, Any]]]:
    """The store's ``shared`` edges at NOW, each once, ends in name order."""
    graph = store.graph(at=NOW, namespaces="shared")
    return sorted((min(u, v), max(u, v), data) for u, v, data in graph.edges(data=True))


def bench_databases() -> set[str]:
    """This process's throwaway databases (their names carry its pid): other test runs on the
    same server create and drop their own meanwhile."""
    with psycopg.connect(SERVER, autocommit=True) as conn:
        names = conn.execute("SELECT datname FROM pg_database").fetchall()
    mine = f"synapse_bench_{os.getpid()}_"
    return {name for (name,) in names if name.startswith(mine)}


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


@pytest.mark.parametrize("per_insert", [1000, perf_module.GROWN_PER_INSERT])
def test_a_grown_graphs_rows_lie_as_its_inserts_lay_them(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, per_insert: int
) -> None:
    monkeypatch.setattr(perf_module, "GROWN_PER_INSERT", per_insert)
    grow_graph(tmp_path / "g.db", 3000, seed=1)
    with sqlite3.connect(tmp_path / "g.db") as db:
        pairs = db.execute("SELECT a, b FROM edges ORDER BY id").fetchall()
    descents = [k for k in range(1, len(pairs)) if pairs[k] < pairs[k - 1]]
    assert all(k % per_insert == 0 for k in descents)  # each insert in the index's order...
    inserts = -(-3000 // per_insert)
    assert len(descents) >= (inserts - 1) // 2  # ...the inserts in none (45: most descend)
    if per_insert == 1000:
        assert descents == [1000, 2000]


def test_the_naive_spread_agrees_with_the_store(tmp_path: Path) -> None:
    path = tmp_path / "g.db"
    grow_graph(path, 2000, seed=2)
    config = SynapseConfig.actr(weight_tolerance_s=0.0)
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
    argv = ["--sizes", "1500", "3000", "--queries", "5", "--events", "3"]
    argv += ["--naive-budget", "0.2", "--json", str(out), "--plot", str(png), "--quiet"]
    assert perf([*argv, "--dir", str(tmp_path)], batches=1) == 0
    results = json.loads(out.read_text())
    assert [r["edges"] for r in results] == [1500, 3000]
    for r in results:
        assert r["recall_p50_us"] > 0 and r["recall_p99_us"] >= r["recall_p50_us"]
        assert 0 < r["repeat_recall_p50_us"] <= r["repeat_recall_p99_us"]
        assert r["published_recall_p50_us"] > 0
        assert r["reinforce_upserts_per_s"] > 0 and r["naive_queries"] >= 1
        assert r["batched_upserts_per_s"] > 0 and r["batch_events"] == 1000
        assert r["sqlite_floor_batched_upserts_per_s"] > 0
        assert r["pg_recall_p50_us"] is None and r["pg_batched_upserts_per_s"] is None
        assert r["sqlite_floor_upserts_per_s"] > 0 and r["sqlite_floor_delete_s"] >= 0
        assert r["naive_spread_p50_us"] > 0 and r["naive_ratio"] > 0
        assert r["daily_sweep_s"] >= 0 and r["decay_sweep_s"] >= 0 and r["open_load_s"] > 0
        assert r["memory_reinforce_upserts_per_s"] > 0 and r["memory_batched_upserts_per_s"] > 0
        assert r["open_snapshot_s"] is None  # a small graph keeps no snapshot
        assert r["array_bytes_per_edge"] > 0 and 1 <= r["max_degree"] < r["edges"]
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    shown = capsys.readouterr().out
    assert "recall p50" in shown and "batched" in shown
    assert "PostgreSQL" not in shown
    assert set(tmp_path.iterdir()) == {out, png}  # the graphs went with their folder


def test_the_perf_options_of_batches_and_postgres() -> None:
    parser = argparse.ArgumentParser()
    add_perf_options(parser)
    args = parser.parse_args(["--batches", "2", "--postgres", SERVER])
    assert (args.batches, args.postgres, args.postgres_max_edges) == (2, SERVER, 100_000)
    assert parser.parse_args([]).batches == 5
    with pytest.raises(SystemExit):
        parser.parse_args(["--batches", "0"])


def test_batched_throughput_learns_what_one_event_at_a_time_does() -> None:
    names = [f"n{i}" for i in range(30)]
    events = zipf_events(30, 25, size=5, seed=5)
    with SynapseStore(":memory:") as single, SynapseStore(":memory:") as batched:
        assert reinforce_throughput(single, events, names, namespace="shared") > 0
        assert reinforce_throughput(batched, events, names, batch=7, namespace="shared") > 0
        graphs = [edge_list(s) for s in (single, batched)]
        assert graphs[0] == graphs[1] and len(graphs[0]) > 20


def test_a_graph_grown_on_postgres_is_the_one_grown_on_sqlite(
    tmp_path: Path, postgres_url: str
) -> None:
    shapes = [
        grow_graph(where, 1200, seed=3, namespace="shared")
        for where in (tmp_path / "g.db", postgres_url)
    ]
    assert shapes[0] == shapes[1]
    with SynapseStore(tmp_path / "g.db") as lite, SynapseStore(postgres_url) as pg:
        graphs = [edge_list(s) for s in (lite, pg)]
        assert graphs[0] == graphs[1] and len(graphs[0]) == 1200
        hits = [("src/module_0000000.py", 0.9), ("src/module_0000500.py", 0.5)]
        assert lite.recall(hits, at=NOW, active_namespace="shared") == pg.recall(
            hits, at=NOW, active_namespace="shared"
        )


def test_bench_perf_on_postgres_in_a_throwaway_database(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    before = bench_databases()
    out = tmp_path / "perf.json"
    argv = ["--sizes", "1000", "1200", "--queries", "5", "--events", "3", "--naive-budget", "0"]
    options = {"batches": 1, "postgres": SERVER, "postgres_max_edges": 1100}
    assert perf([*argv, "--json", str(out), "--quiet", "--dir", str(tmp_path)], **options) == 0
    small, big = json.loads(out.read_text())
    for key in ("pg_reinforce_upserts_per_s", "pg_batched_upserts_per_s", "pg_open_load_s"):
        assert small[key] > 0, key
        assert big[key] is None, key  # above --postgres-max-edges: SQLite only
    assert small["pg_grow_s"] > 0 and small["batched_upserts_per_s"] > 0
    assert 0 < small["pg_recall_p50_us"] <= small["pg_recall_p99_us"]
    assert 0 < small["shared_recall_p50_us"] <= small["shared_recall_p99_us"]
    assert "SQLite and PostgreSQL" in capsys.readouterr().out
    assert bench_databases() == before  # dropped


def test_the_throwaway_database_is_dropped_when_a_run_fails(tmp_path: Path) -> None:
    before = bench_databases()
    with pytest.raises(IndexError):  # no query to warm up with: fails midway
        run_perf(tmp_path, [1000], postgres=SERVER, queries=0, events=1, batches=1, batch=5)
    assert bench_databases() == before


@pytest.mark.parametrize(
    ("server", "error", "reason"),
    [
        ("postgresql://postgres@127.0.0.1:1/postgres", StorageUnavailableError, "cannot create"),
        ("127.0.0.1:5432", InvalidValueError, "must be a postgresql:// URL"),
    ],
)
def test_a_server_that_cannot_be_used_fails_before_measuring(
    tmp_path: Path, server: str, error: type[Exception], reason: str
) -> None:
    with pytest.raises(error, match=reason):
        run_perf(tmp_path / "graphs", [1000], postgres=server)
    assert not (tmp_path / "graphs").exists() or not any((tmp_path / "graphs").iterdir())


@pytest.mark.parametrize(
    "argv",
    [["--sizes", "0"], ["--sizes", "-5"], ["--queries", "0"], ["--events", "0"]],
)
def test_bench_perf_refuses_empty_runs(argv: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as stopped:
        main(["bench", "perf", *argv])
    assert stopped.value.code == 2
    assert "must be at least 1" in capsys.readouterr().err


@pytest.mark.parametrize("budget", ["nan", "inf", "-1"])
def test_bench_perf_refuses_a_naive_budget_that_is_no_time(
    budget: str, capsys: pytest.CaptureFixture[str]
) -> None:  # NaN timed every query (no budget at all), -1 one; neither was said
    assert main(["bench", "perf", "--sizes", "1500", "--naive-budget", budget]) == 2
    assert f"--naive-budget must be a finite number of seconds >= 0, got {float(budget)}" in (
        capsys.readouterr().err
    )


def test_bench_perf_refuses_an_output_that_is_a_directory(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["bench", "perf", "--sizes", "1500", "--json", str(tmp_path)]) == 2
    assert "is a directory" in capsys.readouterr().err


@pytest.mark.parametrize("command", ["perf", "retrieve"])
def test_a_plot_is_never_written_to_dash_nor_over_the_report(
    command: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    report = tmp_path / "perf.svg"
    both = ["--json", str(report), "--plot", str(tmp_path / "." / "perf.svg")]
    assert main(["bench", command, *both]) == 2  # before any work: the image was lost
    assert "name one file: the report would replace the plot" in capsys.readouterr().err
    assert main(["bench", command, "--plot", "-"]) == 2  # a file named '-' was written
    assert "cannot write the plot to '-': an image is a file" in capsys.readouterr().err
    for saved in ("quality", "memory"):  # from saved reports: the image is a file too
        assert main(["bench", saved, "--plot", "-", str(report)]) == 2
        assert "an image is a file" in capsys.readouterr().err
    assert list(tmp_path.iterdir()) == []


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


def test_the_batched_sqlite_floor_writes_a_batch_in_one_transaction(tmp_path: Path) -> None:
    path = tmp_path / "floor.db"
    SynapseStore(path).close()
    events = np.array([[0, 1, 2], [1, 0, 1], [2, 3, 0]])  # a-b twice, a-c twice, b-c, ...
    assert sqlite_upsert_floor(path, events, ["a", "b", "c", "d"], batch=2) > 0
    with SynapseStore(path) as store:
        ab, cd = store.edge("a", "b"), store.edge("c", "d")
        assert ab is not None and ab.activation_count == 2
        assert cd is not None and cd.activation_count == 1
        db = store._storage._db
        assert db.execute("SELECT value FROM meta WHERE key = 'version'").fetchone()[0] == 2
        versions = db.execute("SELECT DISTINCT version FROM edge_log ORDER BY 1").fetchall()
        assert versions == [(1,), (2,)]  # two batches: the first of two events


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


def test_open_from_a_snapshot_is_timed_where_closing_wrote_one(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, postgres_database: str
) -> None:
    from synapse_retriever.bench.perf import run_size
    from synapse_retriever.mirror import mirror

    monkeypatch.setattr(mirror, "SNAPSHOT_MIN_EDGES", 0)  # as a graph of 100,000 edges
    result = run_size(
        tmp_path, 1500, queries=3, events=2, batches=1, naive_budget_s=0.1,
        postgres=postgres_database, postgres_max_edges=1500,
    )  # fmt: skip
    assert result.open_snapshot_s is not None and result.open_snapshot_s > 0
    assert result.snapshot_write_s is not None and result.snapshot_bytes_per_edge
    assert result.snapshot_bytes_per_edge > 50  # the edges' columns and adjacency at least
    assert result.pg_open_snapshot_s is not None and result.pg_open_snapshot_s > 0
    assert result.pg_snapshot_write_s is not None and result.pg_snapshot_bytes_per_edge
    assert result.pg_snapshot_bytes_per_edge > 50


@pytest.mark.parametrize("page_size", [1024, 8192])
def test_an_in_memory_copy_takes_the_files_page_size(tmp_path: Path, page_size: int) -> None:
    # a backup cannot change an in-memory database's page size: it raised before
    path = tmp_path / "g.db"
    grow_graph(path, 500)
    with sqlite3.connect(path, isolation_level=None) as db:
        db.execute("PRAGMA journal_mode = DELETE")
        db.execute(f"PRAGMA page_size = {page_size}")
        db.execute("VACUUM")
    db.close()
    with SynapseStore(storage=in_memory(path)) as in_ram:
        copied = sorted(in_ram.graph(at=NOW).edges(data="weight"))
    with SynapseStore(path) as on_file:
        assert copied == sorted(on_file.graph(at=NOW).edges(data="weight")) and copied


@pytest.mark.parametrize("command", ["perf", "retrieve", "quality", "memory"])
def test_a_plot_without_matplotlib_is_refused_before_any_work(
    command: str,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # a ModuleNotFoundError in a traceback after the run, and `bench perf` wrote no report
    import importlib.util

    found = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util,
        "find_spec",
        lambda name, *a: None if name == "matplotlib" else found(name, *a),
    )
    image, report = tmp_path / "out.svg", tmp_path / "saved.json"
    report.write_text("{}")
    saved = [str(report)] if command in ("quality", "memory") else []
    assert main(["bench", command, "--plot", str(image), *saved]) == 2
    err = capsys.readouterr().err
    assert (
        "--plot draws with matplotlib, which is not installed" in err and len(err.splitlines()) == 1
    )
    assert not image.exists()
