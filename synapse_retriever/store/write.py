"""The write path: a batch of co-activation events, learned in one transaction.

:func:`write_events` is one attempt at what :meth:`SynapseStore.reinforce
<synapse_retriever.store.SynapseStore.reinforce>`, ``reinforce_many`` and ``use`` write
(the store runs it again from the start after a transient failure:
:func:`~synapse_retriever.persistence.protocols.retrying`). It opens one write transaction
on the storage and runs these stages inside it, in this order:

0. (before the transaction, where writers take turns, after a write of
   :data:`MIRROR_READ_PAIRS` edge rows or more) :func:`read_ahead`: the pairs of a batch of
   as many and their stored rows, read from the mirror, kept if no commit came between;
1. :func:`namespace_ids`: resolve the events' namespaces to ids;
2. :func:`drop_replays`: record the events' ids; an event whose id was recorded before (or
   earlier in the batch) is a replay and writes nothing more;
3. :func:`node_ids`: resolve the remaining events' node names to ids;
4. :func:`step_edges`: lock the events' edges, move a late event's time forward (``late``:
   :func:`~synapse_retriever.learning.decay.clamped_times`), step the edge math
   (:func:`~synapse_retriever.learning.decay.reinforce_edges`) and write the edges;
5. :func:`record_uses`: the nodes' use rows, the namespaces' event counters, the
   recent-events log;

and, once the transaction has committed, 6. :func:`update_mirror`: the batch into the
store's in-memory mirror. A batch of :data:`~synapse_retriever.store.collector.PAUSE_PAIRS`
pairs or more runs stage 0, and stages 1 to 6 where the transaction holds the write lock
from its start (SQLite), with Python's cyclic garbage collector paused (see
:mod:`~synapse_retriever.store.collector`).

What the stages guarantee, together:

- **All or nothing.** Stages 1 to 5 run in one transaction; an exception in any of them (a
  late time refused, a lock held past ``busy_timeout_s``, a lost connection) or a process
  killed in the middle rolls every one of them back: nothing of the batch is stored, not
  its event ids, not its new names. The mirror holds nothing of it either (stage 6 runs
  only after the commit); what :meth:`~synapse_retriever.mirror.mirror.Mirror.catch_up`
  applied at the start is other writers' committed work, and stays.
- **Read under lock.** Every row a stage computes from (event ids, edges, uses) is read
  inside the transaction, locked, so concurrent writers (PostgreSQL) lose no update.
  Where writers take turns (SQLite), the transaction locks the whole store from its start
  and the mirror catches up inside it: a big batch reads its edges' rows there, or reads
  them there just before the transaction (stage 0) and keeps them only if no commit came
  between.
- **One lock order.** Every writer takes its locks in the same order: new namespaces
  (sorted), event ids, new node names, edges, use rows, event counters; each backend
  locks the rows of one call in sorted order. Two writers never wait on each other in a
  circle; a deadlock a server reports anyway is a
  :class:`~synapse_retriever.persistence.protocols.TransientWriteError`, run again.

Examples
--------
>>> from synapse_retriever import SynapseConfig
>>> from synapse_retriever.mirror.mirror import Mirror
>>> from synapse_retriever.persistence.sqlite import SQLiteStorage
>>> storage, config = SQLiteStorage(":memory:"), SynapseConfig()
>>> mirror = Mirror(config)
>>> mirror.load(storage)
>>> event = Event(["a", "b"], "personal", 0.0, "chat:1", 0.3)
>>> write_events(storage, mirror, config, [event, event], "skew")  # the second: a replay
[Reinforced(edges=1, at=0.0, replayed=False), Reinforced(edges=0, at=0.0, replayed=True)]
>>> mirror.graph.edge("personal", "a", "b").weight
0.3
"""

from __future__ import annotations

import contextlib
import math
import time
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Literal

import numpy as np

from synapse_retriever.config import SynapseConfig
from synapse_retriever.learning.decay import (
    BLANK_TIME,
    PairEvent,
    PairKeys,
    canonical_pairs,
    clamped_times,
    moves_none,
    pair_keys,
    reinforce_edges,
)
from synapse_retriever.learning.usage import recorded_uses
from synapse_retriever.mirror.graph import MemoryGraph
from synapse_retriever.mirror.mirror import Mirror
from synapse_retriever.persistence import Storage, UseRow, WriteTransaction
from synapse_retriever.persistence.rows import (
    EDGE_COLUMNS,
    EMPTY_EDGES,
    EdgeKey,
    EdgeTable,
    EventRecord,
    RecentEvent,
    UseKey,
    named,
    table_keys,
)
from synapse_retriever.store.collector import PAUSE_PAIRS, collector_paused

__all__ = [
    "Ahead",
    "Edges",
    "Event",
    "Late",
    "Reinforced",
    "Written",
    "drop_replays",
    "namespace_ids",
    "node_ids",
    "read_ahead",
    "record_uses",
    "step_edges",
    "update_mirror",
    "write_events",
]

_LAST = EDGE_COLUMNS.index("last_reinforced_at")

MIRROR_READ_PAIRS = 300
"""Where writers take turns, a batch of this many distinct pairs or more reads their rows from
the store's mirror, caught up under the write lock, not from storage (see
:func:`step_edges`); one of this many pairs or more, counted with repeats, reads them ahead
(:func:`read_ahead`, after a write of as many rows). Below it SQLite's query is faster: the
mirror's search costs a few hundred microseconds up to about a thousand pairs. Chosen on a
real history (python/mypy's last 1,870 commits replayed onto its first 80%, a 53,000-edge
file, four runs in turn): at 300 against 1,000, batches of 20 to 50 commits 10 to 22%
faster, of 10 the same. Confirmed on the benchmark's 1M-edge graph, batches of 8 to 18
events (about 360 to 810 pairs), three runs each: in memory 2 to 16% faster, on a file
within the noise (from 11% slower to 29% faster, size by size). 100 lost there, in memory,
batches of 3 events (13%). See the speed page's eighteenth pass."""

Late = Literal["skew", "raise", "clamp"]
"""What an explicit time earlier than an edge's last reinforcement does (see
:meth:`SynapseStore.reinforce <synapse_retriever.store.SynapseStore.reinforce>`)."""


@dataclass(frozen=True)
class Reinforced:
    """What :meth:`SynapseStore.reinforce_many
    <synapse_retriever.store.SynapseStore.reinforce_many>` did with one event.

    Attributes
    ----------
    edges : int
        Edges written (0 for a replay, or an event of one node).
    at : float
        The time the event was written at, POSIX seconds (moved forward to an edge's
        last reinforcement when it came late: see ``late``).
    replayed : bool
        Its ``event_id`` was recorded before: nothing was written.

    Examples
    --------
    >>> from synapse_retriever import CoActivation, SynapseStore
    >>> store = SynapseStore(":memory:")
    >>> store.reinforce_many([CoActivation(["a", "b"], at=5, event_id="e1")])
    [Reinforced(edges=1, at=5.0, replayed=False)]
    """

    edges: int
    at: float
    replayed: bool = False


@dataclass(frozen=True)
class Event:
    """A validated event: distinct ids, namespace, explicit time (None: the clock, read in
    the transaction), event id, and Δw (0: a use, no edge)."""

    ids: list[str]
    namespace: str
    explicit: float | None
    event_id: str | None
    delta: float


@dataclass(frozen=True)
class Edges:
    """What :func:`step_edges` wrote: edges per event position, every event's time (moved
    forward where it came late), the rows inserted (with their ids) and updated."""

    counts: dict[int, int]
    times: list[float]
    inserted: EdgeTable
    updated: EdgeTable


@dataclass(frozen=True)
class Written:
    """What a committed batch puts into the mirror (:func:`update_mirror`): the names it
    did not know, the batch's namespaces, rows and uses."""

    names: list[str]
    node_ids: list[int]
    spaces: list[str]
    namespace_ids: list[int]
    rows: EdgeTable
    uses: list[UseRow]
    together: dict[int, int]
    entries: list[RecentEvent]


@dataclass(frozen=True)
class Ahead:
    """What a big batch read before its transaction, from a mirror that knew every name
    and namespace of it (:func:`read_ahead`): its events with pairs, their pair events (at
    their explicit times: the clock's are set in the transaction), their pairs, and the
    stored rows of those pairs."""

    graph: MemoryGraph
    version: int
    pairing: list[int]
    pair_events: list[PairEvent]
    paired: PairKeys
    stored: EdgeTable

    def holds(self, mirror: Mirror, tx: WriteTransaction) -> bool:
        """Whether it is still exact in ``tx`` (asked before the catch-up): no commit came
        since it was read, so the mirror it was read from holds what storage holds."""
        return (
            bool(tx.version)
            and tx.version - 1 == mirror.version == self.version
            and (mirror.graph is self.graph)
        )


def write_events(
    storage: Storage,
    mirror: Mirror,
    config: SynapseConfig,
    events: Sequence[Event],
    late: Late,
) -> list[Reinforced]:
    """Write ``events`` in one transaction of ``storage``, then into ``mirror`` (the stages
    of the module docstring, in order). Raises whatever a stage raises, with nothing
    written; the caller holds the store's lock and retries a
    :class:`~synapse_retriever.persistence.protocols.TransientWriteError`."""
    pairs = sum(len(e.ids) * (len(e.ids) - 1) // 2 for e in events if e.delta > 0.0)
    big = config.operations.pause_collector and pairs >= PAUSE_PAIRS
    ahead = None
    if mirror.turns and min(pairs, mirror.written) >= MIRROR_READ_PAIRS:
        with collector_paused() if big else contextlib.nullcontext():
            ahead = read_ahead(mirror, events)
    with contextlib.ExitStack() as paused:
        with storage.write() as tx:
            if big and tx.version:  # the write lock is ours (SQLite): until the mirror holds it
                paused.enter_context(collector_paused())
            if ahead is not None and not ahead.holds(mirror, tx):
                ahead = None
            mirror.catch_up(tx)
            graph = mirror.graph  # after the catch-up: a full reload replaces it
            clock = time.time()
            times = [clock if e.explicit is None else e.explicit for e in events]
            ns_of = namespace_ids(tx, graph, [e.namespace for e in events if e.ids])
            new = drop_replays(tx, events, times, ns_of, clock)
            chosen = [i for i, e in enumerate(events) if new[i] and e.ids]
            names = list(dict.fromkeys(n for i in chosen for n in events[i].ids))
            node_of = node_ids(tx, graph, names)
            unknown = [name for name in names if name not in graph.index]  # to the mirror
            ids_of = {i: [node_of[n] for n in events[i].ids] for i in chosen}
            edges = step_edges(tx, graph, config, events, ids_of, ns_of, times, late, ahead)
            entries = [
                RecentEvent(ns_of[events[i].namespace], edges.times[i], ids_of[i]) for i in chosen
            ]
            uses, together = record_uses(tx, config, entries)
        spaces = list(dict.fromkeys(events[i].namespace for i in chosen))
        written = Written(
            names=unknown,
            node_ids=[node_of[name] for name in unknown],
            spaces=spaces,
            namespace_ids=[ns_of[ns] for ns in spaces],
            rows=np.concatenate([edges.inserted, edges.updated]),
            uses=uses,
            together=together,
            entries=entries,
        )
        update_mirror(mirror, tx.version, written)
        mirror.written = len(written.rows)
    return [
        Reinforced(edges.counts.get(i, 0), edges.times[i], not new[i]) for i in range(len(events))
    ]


def read_ahead(mirror: Mirror, events: Sequence[Event]) -> Ahead | None:
    """Read a batch's pairs and their stored rows before its transaction begins, where
    writers take turns: after a write of more than 10,000 pairs on a file, while its
    checkpoint runs (see
    :meth:`~synapse_retriever.persistence.sqlite.SQLiteStorage._checkpoint_after`), which
    the transaction waits for. None where the mirror does not know every name and namespace
    of ``events`` (they are created in the transaction).

    The transaction keeps what was read if no commit came between (:meth:`Ahead.holds`)
    and the same events have pairs (a replay has none): names and namespaces keep their ids
    for good, so the pairs hold, and the mirror then holds every stored row (measured at
    1M edges, 1,000-event batches on a file: the transaction's wait for the checkpoint fell
    from about 50 ms to 1 or 2 ms, and reading ahead took about 60 ms beside the checkpoint).

    Elsewhere nothing runs beside: reading ahead moves work out of the lock, at no cost,
    unless the batch's events turn out to be replays, which write nothing, when what was
    read is dropped. The store reads ahead only after a write of :data:`MIRROR_READ_PAIRS`
    edge rows or more (``mirror.written``): a history imported again, every event a replay,
    reads ahead once, not batch after batch (measured at 1M edges in memory: a batch of
    1,000 replays took 54 to 82 ms, and 9.5 to 18 ms reading ahead only after a big write)."""
    graph = mirror.graph
    index, spaces = graph.index, graph.ns_index
    if not all(e.namespace in spaces and all(n in index for n in e.ids) for e in events):
        return None
    pairing = [i for i, e in enumerate(events) if len(e.ids) > 1 and e.delta > 0.0]
    pair_events = [
        _pair_event(e, spaces[e.namespace], [index[n] for n in e.ids], e.explicit or 0.0)
        for i in pairing
        for e in (events[i],)
    ]
    paired = pair_keys(pair_events)
    return Ahead(graph, mirror.version, pairing, pair_events, paired, graph.rows(paired.keys))


def _pair_event(event: Event, namespace: int, node_ids: Sequence[int], at: float) -> PairEvent:
    """``event`` as the edge math reads it, its nodes ``node_ids`` at ``at``."""
    return PairEvent(
        namespace=event.namespace,
        namespace_id=namespace,
        pairs=canonical_pairs(event.ids, node_ids),
        names=event.ids,
        node_ids=node_ids,
        at=at,
        explicit=event.explicit is not None,
        delta=event.delta,
    )


def namespace_ids(
    tx: WriteTransaction, graph: MemoryGraph, spaces: Sequence[str]
) -> dict[str, int]:
    """Ids of the namespaces ``spaces``: from ``graph`` when it knows them all (ids are never
    reused, and what another process added was caught up), else from ``tx``, which creates
    the missing ones in sorted order (the order every writer creates names in)."""
    distinct = list(dict.fromkeys(spaces))
    known = [graph.ns_index.get(ns, -1) for ns in distinct]
    if -1 in known:
        created = {ns: tx.namespace_id(ns) for ns in sorted(distinct)}
        known = [created[ns] for ns in distinct]
    return dict(zip(distinct, known, strict=True))


def node_ids(tx: WriteTransaction, graph: MemoryGraph, names: Sequence[str]) -> dict[str, int]:
    """Ids of the distinct node ``names``: from ``graph`` when it knows them all, else from
    ``tx`` (:meth:`~synapse_retriever.persistence.protocols.WriteTransaction.node_ids`,
    which creates the missing ones)."""
    known = [graph.index.get(name, -1) for name in names]
    ids = known if -1 not in known else tx.node_ids(names)
    return dict(zip(names, ids, strict=True))


def drop_replays(
    tx: WriteTransaction,
    events: Sequence[Event],
    times: Sequence[float],
    namespaces: Mapping[str, int],
    clock: float,
) -> list[bool]:
    """Which of ``events`` are not replays: no ``event_id``, or one recorded now (see
    :meth:`~synapse_retriever.persistence.protocols.WriteTransaction.record_events`), at
    ``times``, seen at ``clock``. The ids are recorded in ``tx``: they count only if it
    commits, so a batch that fails is no replay when it is sent again."""
    identified = [i for i, e in enumerate(events) if e.event_id and e.ids]
    recorded = tx.record_events(
        [EventRecord(events[i].event_id or "", times[i], namespaces[events[i].namespace], clock)
         for i in identified]
    ) if identified else []  # fmt: skip
    fresh = [True] * len(events)
    for i, new in zip(identified, recorded, strict=True):
        fresh[i] = new
    return fresh


def step_edges(
    tx: WriteTransaction,
    graph: MemoryGraph,
    config: SynapseConfig,
    events: Sequence[Event],
    ids_of: Mapping[int, Sequence[int]],
    namespaces: Mapping[str, int],
    times: Sequence[float],
    late: Late,
    ahead: Ahead | None = None,
) -> Edges:
    """Reinforce the pairs of the events ``ids_of`` names (position -> node ids, in order),
    in that order, and write them in ``tx``.

    The pairs' rows are locked first and read under lock: where writers take turns
    (``tx.version`` known), the whole store is locked already and ``graph`` has caught up
    with every commit, so a batch of :data:`MIRROR_READ_PAIRS` distinct pairs or more reads
    them there (the same rows; measured at 1M edges, 39,062 pairs: 19 ms, against 112 to 119 ms
    for SQLite's query), else ``tx.lock_edges`` reads them. What :func:`read_ahead` read
    before the transaction (``ahead``, still exact: :meth:`Ahead.holds`) stands for both.
    A late explicit time is moved forward to the last reinforcement of its edges as
    ``late`` allows, refused beyond (``InvalidValueError``, raised before anything of the
    edges is written; the caller's transaction then rolls back the rest). Events of one
    node, and uses (Δw 0), have no pair: their time is kept.
    """
    times = list(times)
    pairing = [i for i, ids in ids_of.items() if len(ids) > 1 and events[i].delta > 0.0]
    if ahead is not None and ahead.pairing == pairing:
        pair_events = [p._replace(at=times[i]) for p, i in zip(ahead.pair_events, pairing,
                                                               strict=True)]  # fmt: skip
        paired = ahead.paired
    else:
        ahead = None
        pair_events = [
            _pair_event(events[i], namespaces[events[i].namespace], ids_of[i], times[i])
            for i in pairing
        ]
        paired = pair_keys(pair_events)
    if ahead is not None:  # read from the mirror before, exact still
        tx.expect(len(paired.keys))
        stored = ahead.stored
    elif tx.version and len(paired.keys) >= MIRROR_READ_PAIRS:  # writers take turns
        tx.expect(len(paired.keys))
        stored = graph.rows(paired.keys)  # caught up under the write lock: the stored rows
    elif len(paired.keys):
        stored = tx.lock_edges(named(EdgeKey, paired.keys.tolist()))
    else:
        stored = EMPTY_EDGES
    latest = float(stored[:, _LAST].max()) if len(stored) else BLANK_TIME
    if late != "raise" and not moves_none([p.at for p in pair_events], latest):
        # read under lock: exact with many writers
        last = dict(zip(table_keys(stored), stored[:, _LAST].tolist(), strict=True))
        within = math.inf if late == "clamp" else config.operations.max_clock_skew_s
        moved = clamped_times(last, pair_events, within_s=within)
        for i, at in zip(pairing, moved, strict=True):
            times[i] = at
        pair_events = [p._replace(at=times[i]) for p, i in zip(pair_events, pairing, strict=True)]
    inserted, updated = reinforce_edges(stored, pair_events, config, paired)
    inserted = tx.insert(inserted)
    tx.update(updated)
    counts = dict(zip(pairing, (len(p.pairs) for p in pair_events), strict=True))
    return Edges(counts, times, inserted, updated)


def record_uses(
    tx: WriteTransaction, config: SynapseConfig, entries: Sequence[RecentEvent]
) -> tuple[list[UseRow], dict[int, int]]:
    """Record the uses of ``entries`` in ``tx``: each node's use row (read under lock, then
    written: :func:`~synapse_retriever.learning.usage.recorded_uses`), each namespace's
    count of co-activation events (entries of two nodes or more), and the recent-events
    log. Returns the use rows written and the events added per namespace id."""
    use_keys = named(
        UseKey, dict.fromkeys((entry.namespace, node) for entry in entries for node in entry.nodes)
    )
    uses = recorded_uses(tx.uses_of(use_keys), entries, config.learning.use_history)
    tx.write_uses(uses)
    together = Counter(entry.namespace for entry in entries if len(entry.nodes) > 1)
    for ns, count in together.items():
        tx.add_events(ns, count)
    tx.log_recent(entries, keep=config.learning.recent_events)
    return uses, dict(together)


def update_mirror(mirror: Mirror, version: int, written: Written) -> None:
    """Apply a batch committed as ``version`` to ``mirror``: new names, edge rows, use rows
    and event counts; its recent-events entries too when no other writer committed in
    between (else the next poll reads them: see
    :meth:`~synapse_retriever.mirror.mirror.Mirror.committed`)."""

    def apply_own(contiguous: bool) -> None:
        graph = mirror.graph
        graph.add_names(
            zip(written.node_ids, written.names, strict=True),
            zip(written.namespace_ids, written.spaces, strict=True),
        )
        graph.apply(written.rows)
        mirror.uses.apply(written.uses)
        for ns, count in written.together.items():
            mirror.uses.add_events(ns, count)
        if contiguous:
            mirror.uses.remember(written.entries)

    mirror.committed(version, apply_own)
