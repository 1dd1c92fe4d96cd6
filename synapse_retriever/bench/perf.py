"""``synapse bench perf``: what the method costs per query and per write, by graph size.

Synthetic graphs grow from 10-node activity events whose node popularity follows a Zipf
law (real usage has hubs). For each size the run measures, on a real SQLite file:

- reinforcement throughput: 10-node events through ``SynapseStore.reinforce``, one
  transaction each, in edge upserts per second;
- recall overhead on top of the vector hits: ``SynapseStore.recall`` on 10 hits, p50
  and p99 in microseconds, under the default rule (ACT-R activation + swaps) and under
  the published one (spreading activation + injection); under the default rule also
  the same queries repeated, with every hit's co-use row cached (a running store's
  steady state for the nodes it keeps being asked about);
- full decay sweeps (at the graph's clock: nothing due; a day later, as a daily sweep
  finds; 90 days later, ~6% of the edges pruned at once), open-and-load time, and
  memory per edge (the in-memory arrays, and the process's resident-set growth on open);
- the same spread done naively, one SQL query per frontier node on each hop (how the
  published reference implementation works), and the ratio to the published rule's
  recall;
- the floors SQLite sets, with no library work at all: the same kind of events as bare
  edge upserts (one ``executemany`` upsert and a commit each, through the store's
  triggers), and a bare delete of as many scattered edges as the 90-day sweep pruned,
  so the library's throughput and sweep read against what the file allows.

Everything is written to JSON; ``plot`` draws latency against graph size.
"""

from __future__ import annotations

import math
import os
import sqlite3
import statistics
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from synapse_retriever.clock import SECONDS_PER_DAY
from synapse_retriever.config import SynapseConfig
from synapse_retriever.learning.decay import effective_weight, learned_half_life
from synapse_retriever.learning.usage import uses_from_edges
from synapse_retriever.memory.mirror import return_freed_memory
from synapse_retriever.persistence.rows import EdgeRow
from synapse_retriever.persistence.sqlite import BIG_DELETE_CACHE_KIB, SQLiteStorage
from synapse_retriever.store import SynapseStore

__all__ = [
    "PerfResult",
    "grow_graph",
    "naive_spread",
    "plot_latency",
    "run_perf",
    "sqlite_delete_floor",
    "sqlite_upsert_floor",
    "zipf_events",
]

EVENT_SIZE = 10
NOW = 1_700_000_000.0  # the benchmark's clock: explicit (and past), so runs are reproducible


def zipf_events(
    n_nodes: int, n_events: int, *, size: int = EVENT_SIZE, exponent: float = 1.0, seed: int = 0
) -> npt.NDArray[np.int64]:
    """``n_events`` rows of ``size`` distinct node indices drawn by Zipf popularity.

    Examples
    --------
    >>> events = zipf_events(100, 3, size=4)
    >>> events.shape, all(len(set(row)) == 4 for row in events.tolist())
    ((3, 4), True)
    """
    rng = np.random.default_rng(seed)
    cumulative = np.cumsum(1.0 / np.arange(1, n_nodes + 1) ** exponent)
    cumulative /= cumulative[-1]
    rows = np.empty((n_events, size), np.int64)
    for i in range(n_events):
        chosen: dict[int, None] = {}
        while len(chosen) < size:  # draw with replacement, keep the first distinct ones
            draws = np.searchsorted(cumulative, rng.random(2 * size), side="right")
            chosen.update(dict.fromkeys(np.minimum(draws, n_nodes - 1).tolist()))
        rows[i] = list(chosen)[:size]
    return rows


def _pair_keys(events: npt.NDArray[np.int64], n_nodes: int) -> npt.NDArray[np.int64]:
    i, j = np.triu_indices(events.shape[1], k=1)
    a, b = events[:, i].ravel(), events[:, j].ravel()
    return np.minimum(a, b) * n_nodes + np.maximum(a, b)


def grow_graph(
    path: str | os.PathLike[str], edges: int, *, seed: int = 0, config: SynapseConfig | None = None
) -> dict[str, Any]:
    """Write a store of about ``edges`` personal edges grown from Zipf events.

    Each distinct pair's state is what its co-activations would leave: count n,
    weight min(1, 0.3 n), the half-life learned for n, last reinforced within the
    past 60 days; node uses are what those edges imply (``uses_from_edges``). Returns
    the graph's shape (nodes, edges, largest degree).
    """
    config = config or SynapseConfig()
    n_nodes = max(1000, edges // 5)
    rng = np.random.default_rng(seed)
    keys = np.zeros(0, np.int64)
    counts = np.zeros(0, np.int64)
    batch = max(1000, edges // 20)
    while keys.size < edges:
        new = _pair_keys(zipf_events(n_nodes, batch, seed=int(rng.integers(1 << 31))), n_nodes)
        keys, counts = _merge_counts(keys, counts, new)
    keep = rng.permutation(keys.size)[:edges]
    keys, counts = keys[keep], counts[keep]
    a, b = keys // n_nodes, keys % n_nodes
    last = NOW - rng.uniform(0, 60, keys.size) * SECONDS_PER_DAY
    half_life = np.asarray(learned_half_life(counts, 1.0, config.default_half_life("personal")))
    half_life = np.where(counts == 1, config.default_half_life("personal"), half_life)
    weight = np.minimum(1.0, config.learning_rate * counts)
    names = [f"src/module_{i:07d}.py" for i in range(n_nodes)]
    storage = SQLiteStorage(path)
    try:
        with storage.write() as tx:
            ids = tx.node_ids(names)
            ns = tx.namespace_id("personal")
            order = [(ids[x], ids[y]) if names[x] < names[y] else (ids[y], ids[x])
                     for x, y in zip(a.tolist(), b.tolist(), strict=True)]  # fmt: skip
            tx.insert(
                [
                    EdgeRow(0, ns, x, y, w, n, h, t, t)
                    for (x, y), w, n, h, t in zip(
                        order,
                        weight.tolist(),
                        counts.tolist(),
                        half_life.tolist(),
                        last.tolist(),
                        strict=True,
                    )
                ]
            )
            uses, events, latest = uses_from_edges(
                (
                    (x, y, ns, n, t, t)
                    for (x, y), n, t in zip(order, counts.tolist(), last.tolist(), strict=True)
                ),
                history=config.use_history,
                window=config.recent_events,
            )
            tx.write_uses(uses)
            tx.add_events(ns, events.get(ns, 0))
            tx.log_recent(latest, keep=config.recent_events)
    finally:
        storage.close()
    degree = np.bincount(np.concatenate([a, b]), minlength=n_nodes)
    return {
        "nodes": int((degree > 0).sum()),
        "edges": int(keys.size),
        "max_degree": int(degree.max()),
    }


def _merge_counts(
    keys: npt.NDArray[np.int64], counts: npt.NDArray[np.int64], new: npt.NDArray[np.int64]
) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int64]]:
    merged, inverse = np.unique(np.concatenate([keys, new]), return_inverse=True)
    total = np.bincount(inverse, np.concatenate([counts, np.ones(new.size, np.int64)]))
    return merged, total.astype(np.int64)


def naive_spread(
    db: sqlite3.Connection, seeds: Sequence[str], now: float, config: SynapseConfig
) -> dict[str, float]:
    """The same two-hop spread as the store's, with one SQL query per frontier node.

    This is how the published reference implementation reads its graph; it is here
    only to be measured against.
    """
    columns = "e.weight, e.activation_count, e.half_life_days, e.last_reinforced_at"
    query = (  # both ends indexed, as a reference implementation would have them
        f"SELECT n.name, {columns} FROM nodes m JOIN edges e ON e.a = m.id "
        f"JOIN nodes n ON n.id = e.b WHERE m.name = ?1 UNION ALL "
        f"SELECT n.name, {columns} FROM nodes m JOIN edges e ON e.b = m.id "
        f"JOIN nodes n ON n.id = e.a WHERE m.name = ?1"
    )

    def neighbours(node: str) -> dict[str, float]:
        rows = db.execute(query, (node,)).fetchall()
        if not rows:
            return {}
        others = [row[0] for row in rows]
        w0, count, half_life, last = np.asarray([row[1:] for row in rows], np.float64).T
        weight = np.asarray(
            effective_weight(w0, half_life, (now - last) / SECONDS_PER_DAY, count=count)
        )
        return {m: w for m, w in zip(others, weight.tolist(), strict=True) if w > 0}

    def hub(degree: int) -> float:
        return math.sqrt(config.hub_degree / degree) if degree > config.hub_degree else 1.0

    seed_set = set(seeds)
    first: dict[str, float] = {}
    for seed in seed_set:
        row = neighbours(seed)
        for node, weight in row.items():
            if node not in seed_set:
                first[node] = first.get(node, 0.0) + weight * config.spread_rate * hub(len(row))
    first = {node: min(1.0, e) for node, e in first.items()}
    energy = dict(first)
    for via, e1 in first.items():
        row = neighbours(via)
        for node, weight in row.items():
            if node not in seed_set:
                energy[node] = energy.get(node, 0.0) + e1 * weight * config.spread_rate * hub(
                    len(row)
                )
    return {node: min(1.0, e) for node, e in energy.items()}


@dataclass
class PerfResult:
    """Figures for one graph size (times in microseconds unless named otherwise)."""

    edges: int
    nodes: int
    max_degree: int
    reinforce_upserts_per_s: float
    sqlite_floor_upserts_per_s: float
    sqlite_floor_delete_s: float
    recall_p50_us: float
    recall_p99_us: float
    decay_sweep_s: float
    decay_pruned: int
    idle_sweep_s: float
    idle_pruned: int
    daily_sweep_s: float
    daily_pruned: int
    uniform_recall_p50_us: float
    uniform_recall_p99_us: float
    repeat_recall_p50_us: float
    repeat_recall_p99_us: float
    published_recall_p50_us: float
    published_uniform_recall_p50_us: float
    open_load_s: float
    array_bytes_per_edge: float
    rss_bytes_per_edge: float
    naive_spread_p50_us: float
    naive_queries: int
    naive_ratio: float


def _timed_recalls(store: SynapseStore, queries: Sequence[list[tuple[str, float]]]) -> list[float]:
    latencies = []
    for hits in queries:
        started = time.perf_counter()
        store.recall(hits, at=NOW)
        latencies.append((time.perf_counter() - started) * 1e6)
    return latencies


def _rss() -> int:
    with open("/proc/self/statm") as handle:
        return int(handle.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def _percentile(values: Sequence[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def run_size(
    folder: Path,
    edges: int,
    *,
    queries: int = 300,
    events: int = 200,
    naive_budget_s: float = 10.0,
    seed: int = 0,
    progress: Callable[[str], None] = lambda _: None,
) -> PerfResult:
    """Measure one graph size (see the module docstring)."""
    path = folder / f"perf-{edges}.db"
    for suffix in ("", "-wal", "-shm"):
        Path(f"{path}{suffix}").unlink(missing_ok=True)
    progress(f"{edges:,} edges: growing the graph")
    shape = grow_graph(path, edges, seed=seed)

    progress(f"{edges:,} edges: open and load")
    return_freed_memory()  # what growing the graph freed is not the store's
    before = _rss()
    started = time.perf_counter()
    store = SynapseStore(path)
    open_load = time.perf_counter() - started
    rss = _rss() - before
    try:
        graph = store._mirror.graph
        n_nodes = max(1000, edges // 5)
        names = [f"src/module_{i:07d}.py" for i in range(n_nodes)]
        rng = np.random.default_rng(seed + 1)
        hits = [
            [(names[i], 1.0 - rank / 10) for rank, i in enumerate(row)]
            for row in zipf_events(n_nodes, queries, seed=seed + 2).tolist()
        ]
        progress(f"{edges:,} edges: recall")
        store.recall(hits[0], at=NOW)  # warm up: the first query builds the recall view
        latencies = _timed_recalls(store, hits)
        uniform = [
            [(names[int(i)], 1.0 - rank / 10) for rank, i in enumerate(row)]
            for row in rng.choice(n_nodes, size=(queries, 10))
        ]
        uniform_latencies = _timed_recalls(store, uniform)
        repeat_latencies = _timed_recalls(store, hits)  # the same again: rows cached

        progress(f"{edges:,} edges: reinforce")
        upserts = 0
        started = time.perf_counter()
        for row in zipf_events(n_nodes, events, seed=int(rng.integers(1 << 31))).tolist():
            upserts += store.reinforce([names[i] for i in row], at=NOW)
        throughput = upserts / (time.perf_counter() - started)

        progress(f"{edges:,} edges: decay sweeps")
        started = time.perf_counter()
        idle = store.decay(at=NOW)
        idle_sweep = time.perf_counter() - started
        started = time.perf_counter()
        daily = store.decay(at=NOW + SECONDS_PER_DAY, force=True)  # what a daily sweep finds
        daily_sweep = time.perf_counter() - started
        started = time.perf_counter()
        report = store.decay(at=NOW + 90 * SECONDS_PER_DAY, force=True)
        sweep = time.perf_counter() - started
        stored = max(1, report.pruned + report.remaining)
        array_bytes = (graph.nbytes() + store._mirror.uses.nbytes) / stored  # edges and node uses
        config = store.config
    finally:
        store.close()

    progress(f"{edges:,} edges: recall under the published rule")
    with SynapseStore(path, config=SynapseConfig.published()) as published:
        published.recall(hits[0], at=NOW)
        published_p50 = statistics.median(_timed_recalls(published, hits))
        published_uniform_p50 = statistics.median(_timed_recalls(published, uniform))

    progress(f"{edges:,} edges: naive spread")  # on the graph the recalls read
    db = sqlite3.connect(path)
    db.execute("CREATE INDEX IF NOT EXISTS bench_edges_by_b ON edges (b)")  # both ends
    naive: list[float] = []
    deadline = time.perf_counter() + naive_budget_s
    for row in hits:
        if naive and time.perf_counter() > deadline:
            break
        started = time.perf_counter()
        naive_spread(db, [node for node, _ in row[:3]], NOW, config)
        naive.append((time.perf_counter() - started) * 1e6)
    db.execute("DROP INDEX bench_edges_by_b")  # the floors write what the store would
    db.close()

    progress(f"{edges:,} edges: bare SQLite upserts and deletes")  # last: they change it
    floor = sqlite_upsert_floor(path, zipf_events(n_nodes, events, seed=seed + 3), names)
    floor_delete = sqlite_delete_floor(path, report.pruned, seed=seed + 4)
    p50 = statistics.median(latencies)
    naive_p50 = statistics.median(naive)
    return PerfResult(
        edges=shape["edges"],
        nodes=shape["nodes"],
        max_degree=shape["max_degree"],
        reinforce_upserts_per_s=round(throughput),
        sqlite_floor_upserts_per_s=round(floor),
        sqlite_floor_delete_s=round(floor_delete, 4),
        recall_p50_us=round(p50, 1),
        recall_p99_us=round(_percentile(latencies, 0.99), 1),
        decay_sweep_s=round(sweep, 4),
        decay_pruned=report.pruned,
        idle_sweep_s=round(idle_sweep, 4),
        idle_pruned=idle.pruned,
        daily_sweep_s=round(daily_sweep, 4),
        daily_pruned=daily.pruned,
        uniform_recall_p50_us=round(statistics.median(uniform_latencies), 1),
        uniform_recall_p99_us=round(_percentile(uniform_latencies, 0.99), 1),
        repeat_recall_p50_us=round(statistics.median(repeat_latencies), 1),
        repeat_recall_p99_us=round(_percentile(repeat_latencies, 0.99), 1),
        published_recall_p50_us=round(published_p50, 1),
        published_uniform_recall_p50_us=round(published_uniform_p50, 1),
        open_load_s=round(open_load, 3),
        array_bytes_per_edge=round(array_bytes, 1),
        rss_bytes_per_edge=round(rss / max(1, shape["edges"]), 1),
        naive_spread_p50_us=round(naive_p50, 1),
        naive_queries=len(naive),
        naive_ratio=round(naive_p50 / published_p50, 1),
    )


def sqlite_upsert_floor(path: Path, events: npt.NDArray[np.int64], names: Sequence[str]) -> float:
    """Edge upserts per second of ``events`` (rows of node indices into ``names``) as bare
    SQL on the store's file: per event, one transaction with the version bump, one
    ``executemany`` upsert of its pairs and a commit; no reads, uses or in-memory state.

    Examples
    --------
    >>> import tempfile
    >>> with tempfile.TemporaryDirectory() as folder:
    ...     path = Path(folder) / "floor.db"
    ...     SynapseStore(path).close()
    ...     rate = sqlite_upsert_floor(path, np.array([[0, 1, 2]]), ["a", "b", "c"])
    ...     with SynapseStore(path) as store:
    ...         rate > 0, store.edge("a", "c").activation_count
    (True, 1)
    """
    db = sqlite3.connect(path, isolation_level=None)
    try:
        db.execute("PRAGMA synchronous = NORMAL")
        db.execute("PRAGMA wal_autocheckpoint = 10000")  # as the store sets them
        db.execute("INSERT OR IGNORE INTO namespaces (name) VALUES ('personal')")
        (namespace,) = db.execute("SELECT id FROM namespaces WHERE name = 'personal'").fetchone()
        used = sorted({names[i] for i in np.unique(events).tolist()})
        db.executemany("INSERT OR IGNORE INTO nodes (name) VALUES (?)", [(n,) for n in used])
        ids = dict(db.execute("SELECT name, id FROM nodes"))
        upsert = (
            "INSERT INTO edges (namespace, a, b, weight, activation_count, half_life_days, "
            "created_at, last_reinforced_at, version) VALUES (?, ?, ?, 0.3, 1, 30.0, ?, ?, ?) "
            "ON CONFLICT (a, b, namespace) DO UPDATE SET "
            "weight = min(1.0, weight + 0.3), activation_count = activation_count + 1, "
            "last_reinforced_at = excluded.last_reinforced_at, version = excluded.version"
        )
        upserts = 0
        started = time.perf_counter()
        for row in events.tolist():
            event = sorted(names[i] for i in set(row))
            pairs = [(ids[x], ids[y]) for k, x in enumerate(event) for y in event[k + 1 :]]
            db.execute("BEGIN IMMEDIATE")
            (version,) = db.execute(
                "UPDATE meta SET value = value + 1 WHERE key = 'version' RETURNING value"
            ).fetchone()
            db.executemany(upsert, [(namespace, a, b, NOW, NOW, version) for a, b in pairs])
            db.execute("COMMIT")
            upserts += len(pairs)
        return upserts / (time.perf_counter() - started)
    finally:
        db.close()


def sqlite_delete_floor(path: Path, count: int, *, seed: int = 0) -> float:
    """Seconds to delete ``count`` edges drawn at random (scattered over the file, as a
    sweep's are) in one transaction of bare SQL, through the store's triggers, with the
    page cache a big sweep uses; the edges stay deleted.

    Examples
    --------
    >>> import tempfile
    >>> with tempfile.TemporaryDirectory() as folder:
    ...     path = Path(folder) / "floor.db"
    ...     with SynapseStore(path) as store:
    ...         _ = store.reinforce(["a", "b", "c"], at=0)  # three edges
    ...     seconds = sqlite_delete_floor(path, 2)
    ...     with SynapseStore(path) as store:
    ...         seconds >= 0, store.graph(at=0).number_of_edges()
    (True, 1)
    """
    db = sqlite3.connect(path, isolation_level=None)
    try:
        db.execute("PRAGMA synchronous = NORMAL")
        db.execute("PRAGMA wal_autocheckpoint = 10000")
        ids = np.fromiter((row[0] for row in db.execute("SELECT id FROM edges")), np.int64)
        doomed = np.random.default_rng(seed).permutation(ids)[:count]
        started = time.perf_counter()
        db.execute(f"PRAGMA cache_size = {-BIG_DELETE_CACHE_KIB}")
        db.execute("BEGIN IMMEDIATE")
        db.execute("UPDATE meta SET value = value + 1 WHERE key = 'version'")  # logged at it
        db.execute("CREATE TEMP TABLE floor_doomed (id INTEGER PRIMARY KEY)")
        db.executemany("INSERT INTO floor_doomed (id) VALUES (?)", [(i,) for i in doomed.tolist()])
        db.execute("DELETE FROM edges WHERE id IN (SELECT id FROM floor_doomed)")
        db.execute("COMMIT")
        return time.perf_counter() - started
    finally:
        db.close()


def run_perf(
    folder: Path,
    sizes: Sequence[int] = (10_000, 100_000, 1_000_000),
    **options: Any,
) -> list[dict[str, Any]]:
    """Measure every size; a list of :class:`PerfResult` as dicts."""
    folder.mkdir(parents=True, exist_ok=True)
    return [asdict(run_size(folder, size, **options)) for size in sizes]


def plot_latency(results: Sequence[dict[str, Any]], path: Path) -> None:
    """Recall p50 and p99 (ours, popularity- and uniformly drawn hits) and the naive spread's
    p50, against graph size (log-log)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    edges = [r["edges"] for r in results]
    figure, axes = plt.subplots(figsize=(6, 4))
    axes.plot(edges, [r["recall_p50_us"] for r in results], "o-", label="recall p50")
    axes.plot(edges, [r["recall_p99_us"] for r in results], "o--", label="recall p99")
    axes.plot(
        edges, [r["uniform_recall_p50_us"] for r in results], "^-", label="recall p50, uniform hits"
    )
    axes.plot(
        edges, [r["published_recall_p50_us"] for r in results], "d-.", label="published rule p50"
    )
    axes.plot(
        edges, [r["naive_spread_p50_us"] for r in results], "s:", label="naive spread p50 (SQL)"
    )
    axes.set_xscale("log")
    axes.set_yscale("log")
    axes.set_xlabel("edges")
    axes.set_ylabel("microseconds")
    axes.set_title("synapse bench perf: recall latency by graph size")
    axes.grid(True, which="both", alpha=0.3)
    axes.legend()
    figure.tight_layout()
    kind = Path(path).suffix[1:].lower()  # the path as given; PNG unless it names a format
    known = figure.canvas.get_supported_filetypes()
    figure.savefig(path, dpi=120, format=kind if kind in known else "png")
    plt.close(figure)
