"""``synapse-retriever bench perf``: what the method costs per query and per write, by graph size.

Synthetic graphs grow from 10-node activity events whose node popularity follows a Zipf
law (real usage has hubs). For each size the run measures, on a real SQLite file:

- reinforcement throughput: 10-node events through ``SynapseStore.reinforce``, one
  transaction each, and through ``SynapseStore.reinforce_many`` in batches of 1,000
  events (one transaction per batch, each event still its own), in edge upserts per
  second (the batched figure on a copy of the grown graph, so the others are unchanged);
  both on the file and on an in-memory store (``":memory:"``) holding the same graph;
- recall overhead on top of the vector hits: ``SynapseStore.recall`` on 10 hits, p50
  and p99 in microseconds, under the default rule (ACT-R activation + swaps) and under
  the published one (spreading activation + injection); under the default rule also
  the same queries repeated, with every hit's co-use row cached (a running store's
  steady state for the nodes it keeps being asked about);
- full decay sweeps (at the graph's clock: nothing due; a day later, as a daily sweep
  finds; 90 days later, ~6% of the edges pruned at once), open-and-load time from the rows
  and, once closing wrote a snapshot of the mirror (100,000 edges or more), from the
  snapshot, and memory per edge (the in-memory arrays, and the process's resident-set
  growth on open) and the snapshot's bytes per edge in the file;
- the same spread done naively, one SQL query per frontier node on each hop (how the
  published reference implementation works), and the ratio to the published rule's
  recall;
- the floors SQLite sets, with no library work at all: the same kind of events as bare
  edge upserts (one ``executemany`` upsert and a commit each, through the store's
  triggers; and the batched events, one upsert and commit per batch), and a bare delete
  of as many scattered edges as the 90-day sweep pruned,
  so the library's throughput and sweep read against what the file allows;
- given a PostgreSQL server (``postgres``), on a throwaway database created there and
  dropped afterwards, for the sizes up to ``postgres_max_edges``: the same graph grown in
  the ``shared`` namespace (a team's store) by one bulk write through the storage, its
  open-and-load time and, once closing wrote a snapshot of the mirror, its open from the
  snapshot (with the snapshot's write time and bytes per edge), the single and batched
  reinforcement throughput, and the recall latency from ``shared`` next to the same graph
  in ``shared`` on SQLite.

Everything is written to JSON; ``plot`` draws latency against graph size.
"""

from __future__ import annotations

import contextlib
import math
import os
import shutil
import sqlite3
import statistics
import time
import uuid
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlencode, urlsplit, urlunsplit

import numpy as np
import numpy.typing as npt

from synapse_retriever.bench.plots import save_figure
from synapse_retriever.capture.coactivation import CoActivation
from synapse_retriever.clock import SECONDS_PER_DAY
from synapse_retriever.config import SynapseConfig
from synapse_retriever.errors import InvalidValueError, StorageUnavailableError, shown
from synapse_retriever.learning.decay import effective_weight, learned_half_life
from synapse_retriever.learning.usage import uses_from_edges
from synapse_retriever.mirror.mirror import return_freed_memory
from synapse_retriever.persistence.postgres import PostgresStorage, is_postgres_url, split_url
from synapse_retriever.persistence.protocols import Storage
from synapse_retriever.persistence.rows import EdgeKey, table_keys
from synapse_retriever.persistence.sqlite import (
    AUTOCHECKPOINT_PAGES,
    BIG_DELETE_CACHE_KIB,
    BIG_WRITE,
    SQLiteStorage,
)
from synapse_retriever.store import SynapseStore

__all__ = [
    "BATCH_EVENTS",
    "PerfResult",
    "grow_graph",
    "in_memory",
    "naive_spread",
    "plot_latency",
    "reinforce_throughput",
    "run_perf",
    "sqlite_delete_floor",
    "sqlite_upsert_floor",
    "zipf_events",
]

EVENT_SIZE = 10
NOW = 1_700_000_000.0  # the benchmark's clock: explicit (and past), so runs are reproducible
BATCH_EVENTS = 1_000
"""Events per ``reinforce_many`` call in the batched throughput."""
POSTGRES_MAX_EDGES = 100_000
"""The largest graph grown on PostgreSQL by default (bigger sizes measure SQLite only)."""
GROWN_PER_INSERT = EVENT_SIZE * (EVENT_SIZE - 1) // 2
"""Edges per insert when a graph is grown on SQLite: as many as one event's pairs (45),
taken in turn from a shuffle of all the graph's pairs. SQLite gives each insert's rows their
ids in the pair index's order, so the file's rows lie in no order of the index, as a store
grown one event at a time lays them, and as in every earlier run of this benchmark. One
insert of every edge would lay the whole table out in the index's order, which no history
of writes does; inserts of 30,000, as 1,000-event batches at 1M edges make them, lay it out
in runs, and every later write to such a file is faster: measured at 1M edges, bare
SQLite's batches by 28 to 33% (see the speed page)."""


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
    path: str | os.PathLike[str],
    edges: int,
    *,
    seed: int = 0,
    config: SynapseConfig | None = None,
    namespace: str = "personal",
) -> dict[str, Any]:
    """Write a store of about ``edges`` edges in ``namespace`` grown from Zipf events.

    Each distinct pair's state is what its co-activations would leave: count n,
    weight min(1, 0.3 n), the half-life learned for n, last reinforced within the
    past 60 days; node uses are what those edges imply (``uses_from_edges``). All in
    one write transaction through the storage: an SQLite file, or a PostgreSQL URL (the
    same graph for the same seed on both). Returns the graph's shape (nodes, edges,
    largest degree).

    Examples
    --------
    >>> import tempfile
    >>> with tempfile.TemporaryDirectory() as folder:
    ...     shape = grow_graph(Path(folder) / "g.db", 1000, namespace="shared")
    ...     with SynapseStore(Path(folder) / "g.db") as store:
    ...         edges = store.graph(at=NOW, namespaces="shared").number_of_edges()
    >>> shape["edges"], edges
    (1000, 1000)
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
    default = config.learning.default_half_life(namespace)
    half_life = np.asarray(learned_half_life(counts, 1.0, default))
    half_life = np.where(counts == 1, default, half_life)
    weight = np.minimum(1.0, config.learning.learning_rate * counts)
    names = [f"src/module_{i:07d}.py" for i in range(n_nodes)]
    storage: Storage = (
        PostgresStorage(str(path), listen=False) if is_postgres_url(path) else SQLiteStorage(path)
    )
    try:
        with storage.write() as tx:
            ids = tx.node_ids(names)
            ns = tx.namespace_id(namespace)
            order = [(ids[x], ids[y]) if names[x] < names[y] else (ids[y], ids[x])
                     for x, y in zip(a.tolist(), b.tolist(), strict=True)]  # fmt: skip
            size = len(order)
            ends = np.asarray(order, np.float64).reshape(size, 2)
            table = np.column_stack(  # an edge table: EdgeRow's fields in order, id 0 (new)
                [np.zeros(size), np.full(size, ns), ends, weight, counts, half_life, last, last]
            ).astype(np.float64)
            if isinstance(storage, PostgresStorage):
                # as the store writes there: each pair's row is created blank by
                # lock_edges, then written by id
                locked = tx.lock_edges([EdgeKey(*key) for key in table_keys(table)])
                held = dict(zip(table_keys(locked), locked[:, 0].tolist(), strict=True))
                table[:, 0] = [held[key] for key in table_keys(table)]
                tx.update(table)
            else:
                for start in range(0, size, GROWN_PER_INSERT):
                    tx.insert(table[start : start + GROWN_PER_INSERT])
            uses, events, latest = uses_from_edges(
                (
                    (x, y, ns, n, t, t)
                    for (x, y), n, t in zip(order, counts.tolist(), last.tolist(), strict=True)
                ),
                history=config.learning.use_history,
                window=config.learning.recent_events,
            )
            tx.write_uses(uses)
            tx.add_events(ns, events.get(ns, 0))
            tx.log_recent(latest, keep=config.learning.recent_events)
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
        others = [other for other, *_ in rows]
        w0, count, half_life, last = np.asarray([state for _, *state in rows], np.float64).T
        weight = np.asarray(
            effective_weight(w0, half_life, (now - last) / SECONDS_PER_DAY, count=count)
        )
        return {m: w for m, w in zip(others, weight.tolist(), strict=True) if w > 0}

    def hub(degree: int) -> float:
        return (
            math.sqrt(config.spreading.hub_degree / degree)
            if degree > config.spreading.hub_degree
            else 1.0
        )

    seed_set = set(seeds)
    first: dict[str, float] = {}
    for seed in seed_set:
        row = neighbours(seed)
        for node, weight in row.items():
            if node not in seed_set:
                first[node] = first.get(node, 0.0) + weight * config.spreading.spread_rate * hub(
                    len(row)
                )
    first = {node: min(1.0, e) for node, e in first.items()}
    energy = dict(first)
    for via, e1 in first.items():
        row = neighbours(via)
        for node, weight in row.items():
            if node not in seed_set:
                energy[node] = energy.get(
                    node, 0.0
                ) + e1 * weight * config.spreading.spread_rate * hub(len(row))
    return {node: min(1.0, e) for node, e in energy.items()}


@dataclass
class PerfResult:
    """Figures for one graph size (times in microseconds unless named otherwise)."""

    edges: int
    nodes: int
    max_degree: int
    reinforce_upserts_per_s: float
    batched_upserts_per_s: float
    sqlite_floor_upserts_per_s: float
    sqlite_floor_batched_upserts_per_s: float
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
    memory_reinforce_upserts_per_s: float
    memory_batched_upserts_per_s: float
    open_snapshot_s: float | None  # None: no snapshot kept (a graph under 100,000 edges)
    snapshot_write_s: float | None
    snapshot_bytes_per_edge: float | None
    rss_snapshot_bytes_per_edge: float | None  # resident-set growth on the open from it
    naive_spread_p50_us: float
    naive_queries: int
    naive_ratio: float
    batch_events: int = BATCH_EVENTS
    # on PostgreSQL (None where not measured), the graph in ``shared``
    pg_grow_s: float | None = None
    pg_open_load_s: float | None = None
    pg_open_snapshot_s: float | None = None  # None also where no snapshot was kept
    pg_snapshot_write_s: float | None = None
    pg_snapshot_bytes_per_edge: float | None = None
    pg_reinforce_upserts_per_s: float | None = None
    pg_batched_upserts_per_s: float | None = None
    pg_recall_p50_us: float | None = None
    pg_recall_p99_us: float | None = None
    # the same graph in ``shared`` on SQLite, recalled from ``shared`` as on PostgreSQL
    shared_recall_p50_us: float | None = None
    shared_recall_p99_us: float | None = None


def _timed_recalls(
    store: SynapseStore,
    queries: Sequence[list[tuple[str, float]]],
    namespace: str = "personal",
) -> list[float]:
    latencies = []
    for hits in queries:
        started = time.perf_counter()
        store.recall(hits, at=NOW, active_namespace=namespace)
        latencies.append((time.perf_counter() - started) * 1e6)
    return latencies


def reinforce_throughput(
    store: SynapseStore,
    events: npt.NDArray[np.int64],
    names: Sequence[str],
    *,
    batch: int | None = None,
    namespace: str = "personal",
) -> float:
    """Edge upserts per second of ``events`` (rows of node indices into ``names``) at
    :data:`NOW`: one ``reinforce`` each (``batch`` None), or ``reinforce_many`` over
    ``batch`` events at a time. An event of k nodes counts k(k-1)/2 upserts, also where a
    batch meets its pair again (it is stepped once per event, as one event at a time is).

    Examples
    --------
    >>> store = SynapseStore(":memory:")
    >>> events = np.array([[0, 1, 2], [1, 2, 3], [0, 1, 2]])
    >>> reinforce_throughput(store, events, ["a", "b", "c", "d"], batch=2) > 0
    True
    >>> store.edge("b", "c").activation_count  # three events met b-c, in two transactions
    3
    """
    rows = events.tolist()
    if batch is None:
        upserts = 0
        started = time.perf_counter()
        for row in rows:
            upserts += store.reinforce([names[i] for i in row], namespace=namespace, at=NOW)
        return upserts / (time.perf_counter() - started)
    batches = [
        [CoActivation([names[i] for i in row], namespace=namespace, at=NOW) for row in part]
        for part in (rows[start : start + batch] for start in range(0, len(rows), batch))
    ]  # the caller's events, ready before the clock starts
    upserts = 0
    started = time.perf_counter()
    for part in batches:
        upserts += sum(done.edges for done in store.reinforce_many(part))
    return upserts / (time.perf_counter() - started)


def in_memory(path: Path) -> SQLiteStorage:
    """A private in-memory store (``":memory:"``, as a store opens it) holding a copy of the
    closed store file at ``path``.

    Examples
    --------
    >>> import tempfile
    >>> with tempfile.TemporaryDirectory() as folder:
    ...     _ = grow_graph(Path(folder) / "g.db", 1000)
    ...     with SynapseStore(storage=in_memory(Path(folder) / "g.db")) as store:
    ...         store.graph(at=NOW).number_of_edges(), store.path
    (1000, ':memory:')
    """
    source = sqlite3.connect(path, isolation_level=None)
    try:
        (page_size,) = source.execute("PRAGMA page_size").fetchone()
        storage = SQLiteStorage(":memory:", _page_size=page_size)  # backup() cannot change it
        source.execute("PRAGMA journal_mode = DELETE")  # a WAL header cannot live in memory
        source.backup(storage._db)
        source.execute("PRAGMA journal_mode = WAL")
    finally:
        source.close()
    storage.forget_logs()  # as a new in-memory store: no change logs
    return storage


def _snapshot_bytes(path: Path) -> int | None:
    """Bytes of the mirror's snapshot in the store file at ``path`` (None: none kept)."""
    db = sqlite3.connect(path)
    try:
        found = db.execute(
            "SELECT sum(length(data)) FROM snapshot"
            if db.execute("SELECT 1 FROM sqlite_master WHERE name = 'snapshot'").fetchone()
            else "SELECT NULL"
        ).fetchone()[0]
    finally:
        db.close()
    return None if found is None else int(found)


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
    batches: int = 5,
    batch: int = BATCH_EVENTS,
    naive_budget_s: float = 10.0,
    seed: int = 0,
    postgres: str | None = None,
    postgres_max_edges: int = POSTGRES_MAX_EDGES,
    progress: Callable[[str], None] = lambda _: None,
) -> PerfResult:
    """Measure one graph size (see the module docstring); ``postgres`` is the URL of a
    database this run may create schemas in (:func:`run_perf` makes a throwaway one)."""
    path = folder / f"perf-{edges}.db"
    twin = folder / f"perf-{edges}-batched.db"
    grown = folder / f"perf-{edges}-grown.db"
    _remove(path)
    progress(f"{edges:,} edges: growing the graph")
    shape = grow_graph(path, edges, seed=seed)
    for target in (twin, grown):
        _remove(target)
        shutil.copyfile(path, target)  # closed: no -wal left

    progress(f"{edges:,} edges: open and load")
    return_freed_memory()  # what growing the graph freed is not the store's
    before = _rss()
    started = time.perf_counter()
    store = SynapseStore(path)
    open_load = time.perf_counter() - started
    rss = _rss() - before
    started = time.perf_counter()
    store.close()  # writes a snapshot of the mirror (100,000 edges or more)
    snapshot_write: float | None = time.perf_counter() - started
    snapshot_bytes = _snapshot_bytes(path)
    del store
    return_freed_memory()
    before = _rss()
    started = time.perf_counter()
    store = SynapseStore(path)
    open_snapshot: float | None = time.perf_counter() - started
    rss_snapshot: float | None = _rss() - before
    if store._mirror.snapshot_version is None:  # no snapshot: the same load again
        open_snapshot = snapshot_write = rss_snapshot = None
    n_nodes = max(1000, edges // 5)
    names = [f"src/module_{i:07d}.py" for i in range(n_nodes)]
    try:
        graph = store._mirror.graph
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
        single_events = zipf_events(n_nodes, events, seed=int(rng.integers(1 << 31)))
        throughput = reinforce_throughput(store, single_events, names)

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

    progress(f"{edges:,} edges: reinforce in batches of {batch:,} events")
    batched_events = zipf_events(n_nodes, batches * batch, seed=seed + 5)
    with SynapseStore(twin) as copy:  # the graph as grown: the figures above are unchanged
        batched = reinforce_throughput(copy, batched_events, names, batch=batch)
    _remove(twin)

    progress(f"{edges:,} edges: reinforce in memory, one event and batches")
    with SynapseStore(storage=in_memory(grown)) as in_ram:
        memory_single = reinforce_throughput(in_ram, single_events, names)
    with SynapseStore(storage=in_memory(grown)) as in_ram:
        memory_batched = reinforce_throughput(in_ram, batched_events, names, batch=batch)
    _remove(grown)

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
    floor_batched = sqlite_upsert_floor(path, batched_events, names, batch=batch)
    _remove(path)

    on_postgres: dict[str, float | None] = {}
    if postgres is not None and edges <= postgres_max_edges:
        on_postgres = _postgres_size(
            folder, postgres, edges, seed=seed, hits=hits, names=names, batch=batch,
            single=single_events, batched=batched_events, progress=progress,
        )  # fmt: skip
    p50 = statistics.median(latencies)
    naive_p50 = statistics.median(naive)
    return PerfResult(
        edges=shape["edges"],
        nodes=shape["nodes"],
        max_degree=shape["max_degree"],
        reinforce_upserts_per_s=round(throughput),
        batched_upserts_per_s=round(batched),
        sqlite_floor_upserts_per_s=round(floor),
        sqlite_floor_batched_upserts_per_s=round(floor_batched),
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
        memory_reinforce_upserts_per_s=round(memory_single),
        memory_batched_upserts_per_s=round(memory_batched),
        open_snapshot_s=None if open_snapshot is None else round(open_snapshot, 3),
        snapshot_write_s=None if snapshot_write is None else round(snapshot_write, 3),
        snapshot_bytes_per_edge=(
            None if snapshot_bytes is None else round(snapshot_bytes / max(1, shape["edges"]), 1)
        ),
        rss_snapshot_bytes_per_edge=(
            None if rss_snapshot is None else round(rss_snapshot / max(1, shape["edges"]), 1)
        ),
        naive_spread_p50_us=round(naive_p50, 1),
        naive_queries=len(naive),
        naive_ratio=round(naive_p50 / published_p50, 1),
        batch_events=batch,
        **on_postgres,
    )


def _postgres_size(
    folder: Path,
    database: str,
    edges: int,
    *,
    seed: int,
    hits: Sequence[list[tuple[str, float]]],
    names: Sequence[str],
    single: npt.NDArray[np.int64],
    batched: npt.NDArray[np.int64],
    batch: int,
    progress: Callable[[str], None],
) -> dict[str, float | None]:
    """The PostgreSQL figures of one size, in a schema of its own in ``database`` (dropped
    afterwards), and the recall of the same graph in ``shared`` on SQLite."""
    import psycopg
    from psycopg import sql

    schema = f"perf_{edges}_{uuid.uuid4().hex[:6]}"
    url = _with_database(database, schema=schema)
    with psycopg.connect(database, autocommit=True) as conn:
        conn.execute(sql.SQL("CREATE SCHEMA {}").format(sql.Identifier(schema)))
    try:
        progress(f"{edges:,} edges: growing the graph on PostgreSQL")
        started = time.perf_counter()
        grow_graph(url, edges, seed=seed, namespace="shared")
        grow = time.perf_counter() - started
        progress(f"{edges:,} edges: open, recall and reinforce on PostgreSQL")
        return_freed_memory()
        started = time.perf_counter()
        store = SynapseStore(url)
        load = time.perf_counter() - started
        started = time.perf_counter()
        store.close()  # writes a snapshot of the mirror (100,000 edges or more)
        snapshot_write: float | None = time.perf_counter() - started
        del store
        return_freed_memory()
        started = time.perf_counter()
        with SynapseStore(url) as store:
            open_snapshot: float | None = time.perf_counter() - started
            if store._mirror.snapshot_version is None:  # no snapshot: the same load again
                open_snapshot = snapshot_write = None
            with psycopg.connect(url) as conn:
                stored = conn.execute(
                    "SELECT sum(length(data)) FROM snapshot" if snapshot_write else "SELECT NULL"
                ).fetchone()
            snapshot_bytes = None if stored is None or stored[0] is None else int(stored[0])
            store.recall(hits[0], at=NOW, active_namespace="shared")  # warm up, as on SQLite
            latencies = _timed_recalls(store, hits, "shared")
            single_rate = reinforce_throughput(store, single, names, namespace="shared")
            batched_rate = reinforce_throughput(
                store, batched, names, batch=batch, namespace="shared"
            )
    finally:
        with psycopg.connect(database, autocommit=True) as conn:
            conn.execute(sql.SQL("DROP SCHEMA {} CASCADE").format(sql.Identifier(schema)))

    progress(f"{edges:,} edges: the same graph in shared on SQLite")
    path = folder / f"perf-{edges}-shared.db"
    _remove(path)
    grow_graph(path, edges, seed=seed, namespace="shared")
    with SynapseStore(path) as store:
        store.recall(hits[0], at=NOW, active_namespace="shared")
        on_sqlite = _timed_recalls(store, hits, "shared")
    _remove(path)
    return {
        "pg_grow_s": round(grow, 2),
        "pg_open_load_s": round(load, 3),
        "pg_open_snapshot_s": None if open_snapshot is None else round(open_snapshot, 3),
        "pg_snapshot_write_s": None if snapshot_write is None else round(snapshot_write, 3),
        "pg_snapshot_bytes_per_edge": (
            None if snapshot_bytes is None else round(snapshot_bytes / max(1, edges), 1)
        ),
        "pg_reinforce_upserts_per_s": round(single_rate),
        "pg_batched_upserts_per_s": round(batched_rate),
        "pg_recall_p50_us": round(statistics.median(latencies), 1),
        "pg_recall_p99_us": round(_percentile(latencies, 0.99), 1),
        "shared_recall_p50_us": round(statistics.median(on_sqlite), 1),
        "shared_recall_p99_us": round(_percentile(on_sqlite, 0.99), 1),
    }


def _remove(path: Path) -> None:
    for suffix in ("", "-wal", "-shm"):
        Path(f"{path}{suffix}").unlink(missing_ok=True)


def _with_database(url: str, database: str | None = None, schema: str | None = None) -> str:
    """``url`` pointed at ``database`` (None: its own), with ``schema`` as the search path."""
    parts = urlsplit(url)
    query = parts.query
    if schema is not None:
        query = "&".join(filter(None, [query, urlencode({"options": f"-csearch_path={schema}"})]))
    path = parts.path if database is None else f"/{database}"
    return urlunsplit((parts.scheme, parts.netloc, path, query, ""))


@contextlib.contextmanager
def _throwaway_database(server: str) -> Iterator[str]:
    """The URL of a new database on the PostgreSQL ``server`` (a URL of a role that may
    create databases), dropped on leaving, whatever happened."""
    import psycopg
    from psycopg import sql

    if not is_postgres_url(server):
        raise InvalidValueError(f"--postgres must be a postgresql:// URL, got {shown(server)}")
    name = f"synapse_bench_{os.getpid()}_{uuid.uuid4().hex[:8]}"
    try:
        with psycopg.connect(server, autocommit=True, connect_timeout=10) as admin:
            admin.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
    except psycopg.Error as exc:
        raise StorageUnavailableError(
            f"cannot create a throwaway database on {split_url(server)[1]!r}: {exc}"
        ) from None
    try:
        yield _with_database(server, name)
    finally:
        with psycopg.connect(server, autocommit=True, connect_timeout=10) as admin:
            admin.execute(sql.SQL("DROP DATABASE {} WITH (FORCE)").format(sql.Identifier(name)))


def sqlite_upsert_floor(
    path: Path, events: npt.NDArray[np.int64], names: Sequence[str], *, batch: int = 1
) -> float:
    """Edge upserts per second of ``events`` (rows of node indices into ``names``) as bare
    SQL on the store's file: per ``batch`` events (one by default), one transaction with the
    version bump, one ``executemany`` upsert of their distinct pairs (a pair met n times
    counts n upserts, written once, as the store writes it) and a commit; no reads, uses
    or in-memory state. A transaction of more than ``BIG_WRITE`` pairs gets the page cache
    the store gives it (without it, bare SQLite at 1M edges writes 37 to 51% less).

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
        db.execute(f"PRAGMA wal_autocheckpoint = {AUTOCHECKPOINT_PAGES}")  # as the store sets them
        (cache,) = db.execute("PRAGMA cache_size").fetchone()
        db.execute("INSERT OR IGNORE INTO namespaces (name) VALUES ('personal')")
        (namespace,) = db.execute("SELECT id FROM namespaces WHERE name = 'personal'").fetchone()
        used = sorted({names[i] for i in np.unique(events).tolist()})
        db.executemany("INSERT OR IGNORE INTO nodes (name) VALUES (?)", [(n,) for n in used])
        ids = dict(db.execute("SELECT name, id FROM nodes"))
        upsert = (  # a pair met n times: n reinforcements, in one row write
            "INSERT INTO edges (namespace, a, b, weight, activation_count, half_life_days, "
            "created_at, last_reinforced_at, version) VALUES (?1, ?2, ?3, min(1.0, 0.3 * ?4), "
            "?4, 30.0, ?5, ?5, ?6) ON CONFLICT (a, b, namespace) DO UPDATE SET "
            "weight = min(1.0, weight + 0.3 * excluded.activation_count), "
            "activation_count = activation_count + excluded.activation_count, "
            "last_reinforced_at = excluded.last_reinforced_at, version = excluded.version"
        )
        upserts = 0
        rows = events.tolist()
        started = time.perf_counter()
        for start in range(0, len(rows), batch):
            pairs: Counter[tuple[int, int]] = Counter()
            for row in rows[start : start + batch]:
                event = sorted(names[i] for i in set(row))
                pairs.update((ids[x], ids[y]) for k, x in enumerate(event) for y in event[k + 1 :])
            big = len(pairs) > BIG_WRITE
            if big:
                db.execute(f"PRAGMA cache_size = {-BIG_DELETE_CACHE_KIB}")
            db.execute("BEGIN IMMEDIATE")
            (version,) = db.execute(
                "UPDATE meta SET value = value + 1 WHERE key = 'version' RETURNING value"
            ).fetchone()
            db.executemany(
                upsert, [(namespace, a, b, n, NOW, version) for (a, b), n in pairs.items()]
            )
            db.execute("COMMIT")
            if big:
                db.execute(f"PRAGMA cache_size = {cache}")
            upserts += pairs.total()
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
        db.execute(f"PRAGMA wal_autocheckpoint = {AUTOCHECKPOINT_PAGES}")
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
    *,
    postgres: str | None = None,
    **options: Any,
) -> list[dict[str, Any]]:
    """Measure every size; a list of :class:`PerfResult` as dicts.

    ``postgres``, a server URL, adds the PostgreSQL figures, measured in a throwaway
    database created there and dropped afterwards; the other options are
    :func:`run_size`'s.

    Examples
    --------
    >>> import tempfile
    >>> with tempfile.TemporaryDirectory() as folder:
    ...     (result,) = run_perf(Path(folder), [1000], queries=2, events=1, batch=10, batches=1)
    >>> result["edges"], result["batch_events"], result["pg_recall_p50_us"]
    (1000, 10, None)
    """
    folder.mkdir(parents=True, exist_ok=True)
    with contextlib.ExitStack() as stack:
        database = None if postgres is None else stack.enter_context(_throwaway_database(postgres))
        return [asdict(run_size(folder, size, postgres=database, **options)) for size in sizes]


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
    axes.set_title("synapse-retriever bench perf: recall latency by graph size")
    axes.grid(True, which="both", alpha=0.3)
    axes.legend()
    figure.tight_layout()
    save_figure(figure, path, dpi=120)
