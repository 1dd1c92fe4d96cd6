"""`SynapseStore`: learn co-activations, forget them, recall them. The public entry point.

The store validates input, runs each write as one transaction on its
:class:`~synapse_retriever.persistence.Storage`, and keeps an in-memory
:class:`~synapse_retriever.graph.MemoryGraph` current so that recall does no SQL.

Examples
--------
>>> from synapse_retriever import SynapseStore
>>> with SynapseStore(":memory:") as store:
...     store.reinforce(["auth/jwt.py", "config/secrets.py"], at=0)
...     round(store.weight("auth/jwt.py", "config/secrets.py", at=0), 2)
1
0.3
"""

from __future__ import annotations

import contextlib
import ctypes
import gc
import math
import os
import sys
import threading
import time
from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from decimal import Decimal
from numbers import Real
from typing import TYPE_CHECKING, SupportsFloat

import numpy as np

from synapse_retriever.activation import Activation, NamedPaths
from synapse_retriever.actr import (
    ActrPlan,
    NodeValues,
    RankedNames,
    StrongestSources,
    lift_strengths,
    source_weights,
)
from synapse_retriever.arrays import unique_ids
from synapse_retriever.capture import coactivation_set, validate_node_id
from synapse_retriever.clock import SECONDS_PER_DAY, Clock, not_ahead, to_seconds
from synapse_retriever.config import SynapseConfig, validate_namespace
from synapse_retriever.errors import InvalidTypeError, InvalidValueError, SynapseError
from synapse_retriever.graph import Edge, MemoryGraph
from synapse_retriever.injection import ENERGY_TOLERANCE, Hit, RecallPlan, Resolvable
from synapse_retriever.learning.decay import effective_weight, learned_half_life
from synapse_retriever.learning.usage import UseTable
from synapse_retriever.persistence import Changes, EdgeRow, SQLiteStorage, Storage, WriteTransaction

if TYPE_CHECKING:
    import networkx as nx

__all__ = ["DecayReport", "RepairReport", "SynapseStore"]

BIG_LOAD = 100_000
"""Edges loaded at open above which the freed heap is handed back to the OS."""


@dataclass(frozen=True)
class DecayReport:
    """What a :meth:`SynapseStore.decay` sweep did.

    Attributes
    ----------
    at : float
        The sweep's time, POSIX seconds.
    pruned : int
        Edges deleted (their effective weight was below the prune threshold).
    remaining : int
        Edges left in the store.
    pruned_by_namespace : dict[str, int]
        ``pruned``, split by namespace.
    dry_run : bool
        Nothing was deleted: ``pruned`` is what the sweep would delete.

    Examples
    --------
    >>> store = SynapseStore(":memory:")
    >>> _ = store.reinforce(["a", "b"], at=0)  # w0 0.3, half-life 30 days: pruned at 147 days
    >>> store.decay(at=200 * 86400)
    DecayReport(at=17280000.0, pruned=1, remaining=0, pruned_by_namespace={'personal': 1}, \
dry_run=False)
    """

    at: float
    pruned: int
    remaining: int
    pruned_by_namespace: dict[str, int] = field(default_factory=dict)
    dry_run: bool = False


@dataclass(frozen=True)
class RepairReport:
    """What :meth:`SynapseStore.repair` removed (or, in a dry run, would remove).

    Attributes
    ----------
    edges : int
        Edges created or reinforced ahead of the clock, deleted.
    uses : int
        Use times ahead of the clock, dropped from the nodes' use rows.
    events : int
        Entries of the recent-events log and recorded event ids ahead of the clock.
    dry_run : bool
        Nothing was changed.

    Examples
    --------
    >>> store = SynapseStore(":memory:")
    >>> _ = store.reinforce(["a", "b"], at=0)
    >>> store.repair(dry_run=True)  # nothing was written ahead of the clock
    RepairReport(edges=0, uses=0, events=0, dry_run=True)
    """

    edges: int
    uses: int
    events: int
    dry_run: bool = False


class _DryRun(Exception):
    """Rolls a dry run's transaction back."""


class SynapseStore:
    """An associative memory of co-used nodes, persisted in SQLite.

    Parameters
    ----------
    path : str or PathLike
        SQLite file (created if missing), or ``":memory:"``.
    config : SynapseConfig, optional
        The method's constants; ``SynapseConfig()`` (the ACT-R recall rule) by default,
        ``SynapseConfig.published()`` for the method as published.
    storage : Storage, optional
        Another backend instead of SQLite at ``path``.
    read_only : bool
        Open the file read-only: recall and every read work, every write raises
        :class:`~synapse_retriever.errors.ReadOnlyStoreError`. Chosen on its own when the
        file or its folder cannot be written.

    Examples
    --------
    >>> store = SynapseStore(":memory:")
    >>> store.reinforce(["verify_token", "load_keys"], strength=3.0, at=0)  # clamped to 2: Δw 0.6
    1
    >>> store.activate(["verify_token"], at=0)  # 0.6 × 0.6 (spread rate)
    {'load_keys': 0.36}
    >>> hits = [("verify_token", 0.9), ("login", 0.8), ("logout", 0.7), ("auth_doc", 0.3)]
    >>> [(h.id, h.origin) for h in store.recall(hits, at=0)][-1]
    ('load_keys', 'injected')
    >>> store.close()
    """

    def __init__(
        self,
        path: str | os.PathLike[str] = ":memory:",
        *,
        config: SynapseConfig | None = None,
        storage: Storage | None = None,
        read_only: bool = False,
    ) -> None:
        if config is not None and not isinstance(config, SynapseConfig):
            raise InvalidTypeError(f"config must be a SynapseConfig, got {type(config).__name__}")
        if storage is not None and read_only:
            raise InvalidValueError("read_only applies to the SQLite file at path, not a storage")
        self.config = config or SynapseConfig()
        self.path = str(path)
        self._storage: Storage = storage or SQLiteStorage(
            path, busy_timeout_s=self.config.busy_timeout_s, read_only=read_only
        )
        self._lock = threading.RLock()
        self._graph = MemoryGraph(self.config)
        self._uses = UseTable(history=self.config.use_history, window=self.config.recent_events)
        self._version = 0
        loaded = self._storage.load()
        self._apply(loaded)
        if len(loaded.rows) >= BIG_LOAD:  # a collection costs ~0.3 s in a large process
            del loaded
            return_freed_memory()
        self._polled = time.monotonic()
        self._closed = False

    @classmethod
    def coerce(
        cls, store: SynapseStore | str | os.PathLike[str], config: SynapseConfig | None = None
    ) -> SynapseStore:
        """``store`` itself, or a store opened at the path ``store`` with ``config``.

        What adapters accept as their ``store`` field. A ``config`` that differs from a
        given store's own is refused: it would silently not apply.

        Examples
        --------
        >>> store = SynapseStore(":memory:")
        >>> SynapseStore.coerce(store) is store
        True
        >>> SynapseStore.coerce(store, SynapseConfig.published())
        Traceback (most recent call last):
        ...
        synapse_retriever.errors.InvalidValueError: config differs from the given store's \
config: pass config together with a store path instead
        """
        if isinstance(store, SynapseStore):
            if config is not None and config != store.config:
                raise InvalidValueError(
                    "config differs from the given store's config: "
                    "pass config together with a store path instead"
                )
            return store
        if not isinstance(store, (str, os.PathLike)):
            raise InvalidTypeError(
                f"store must be a SynapseStore or a path, got {type(store).__name__}"
            )
        return cls(store, config=config)

    # -- lifecycle ---------------------------------------------------------------------

    def close(self) -> None:
        """Close the database; further calls raise :class:`SynapseError`.

        ``with SynapseStore(path) as store:`` closes it on leaving the block.

        Examples
        --------
        >>> store = SynapseStore(":memory:")
        >>> store.close()
        >>> store.weight("a", "b")
        Traceback (most recent call last):
        ...
        synapse_retriever.errors.SynapseError: SynapseStore(':memory:') is closed
        """
        with self._lock:
            if not self._closed:
                self._closed = True
                self._storage.close()

    def __enter__(self) -> SynapseStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"SynapseStore({self.path!r})"

    # -- learning ----------------------------------------------------------------------

    def reinforce(
        self,
        nodes: Iterable[str],
        strength: float = 1.0,
        namespace: str = "personal",
        at: Clock = None,
        *,
        event_id: str | None = None,
    ) -> int:
        """Reinforce every pair of ``nodes`` as one co-activation event (one transaction).

        Parameters
        ----------
        nodes : iterable of str
            Ids used together; duplicates are dropped, order kept; only the first
            ``config.max_coactivation`` distinct ids are used (with a warning).
        strength : float
            Δw = learning_rate × clamp(strength, 0, max_strength); 0 writes nothing.
        namespace : str
            ``personal``, ``shared``, ``ephemeral`` or ``branch:<name>``.
        at : datetime, float or None
            The event's time; None reads the clock inside the write transaction.
        event_id : str, optional
            Makes the call idempotent: an event id already recorded in this store is a
            no-op (returns 0), so replays (a resumed import, a redelivered callback) never
            count twice. The id is recorded in the same transaction as the edges.

        Returns
        -------
        int
            The number of edges written. A single node writes none but is recorded as
            used, as :meth:`use` records it (the default rule's base level reads it).

        Notes
        -----
        For each pair: decay the stored weight to ``at`` with its old half-life and
        count (an edge already pruned starts afresh: count 1, the namespace default
        half-life); add Δw, capped at 1; count += 1; learn the half-life from the gap
        since the previous reinforcement
        (:func:`~synapse_retriever.learning.decay.learned_half_life`).

        Raises
        ------
        InvalidTypeError, InvalidValueError
            Bad ids, strength, namespace or time, or an explicit ``at`` earlier than an
            edge's last reinforcement. Nothing is written.

        Examples
        --------
        >>> store = SynapseStore(":memory:")
        >>> store.reinforce(["a", "b", "c"], at=0)  # three pairs
        3
        >>> store.reinforce(["a", "b"], at=86400)  # a day later: 0.3 decayed to 0.293, + 0.3
        1
        >>> edge = store.edge("a", "b")
        >>> edge.activation_count, round(edge.weight, 3), round(edge.half_life_days, 2)
        (2, 0.593, 21.25)
        >>> store.reinforce(["a", "b"], at=86400, event_id="chat:42")
        1
        >>> store.reinforce(["a", "b"], at=86400, event_id="chat:42")  # a replay: a no-op
        0
        """
        ns = validate_namespace(namespace)
        delta = self.config.learning_rate * _clamped_strength(strength, self.config.max_strength)
        explicit = self._written_time(at)
        ids = coactivation_set(nodes, limit=self.config.max_coactivation)
        if event_id is not None and (not isinstance(event_id, str) or not event_id):
            raise InvalidValueError(f"event_id must be a non-empty str or None, got {event_id!r}")
        if not ids or delta == 0.0:
            return 0
        if len(ids) == 1:  # no pair to reinforce, but a use (the default rule's base level)
            self._record_use(ids, ns, explicit, event_id)
            return 0
        with self._lock:
            self._check_open()
            with self._storage.write() as tx:
                self._catch_up(tx)
                now = explicit if explicit is not None else time.time()
                if event_id is not None and not tx.record_event(event_id, now):
                    return 0
                node_ids, ns_id = self._ids(tx, ids, ns)
                inserted, updated = self._reinforced(
                    tx.rows_among(ns_id, node_ids), ids, node_ids, ns, ns_id, now, explicit, delta
                )
                inserted = tx.insert(inserted)
                tx.update(updated)
                uses = self._uses.recorded(node_ids, ns_id, now)
                tx.write_uses(uses)
                tx.add_events(ns_id, 1)
                tx.log_recent(ns_id, now, node_ids, keep=self.config.recent_events)
            self._graph.add_names(zip(node_ids, ids, strict=True), [(ns_id, ns)])
            self._graph.apply([*inserted, *updated])
            self._uses.apply(uses)
            self._uses.add_events(ns_id, 1)
            self._uses.remember([(ns_id, now, node_ids)])
            self._version = tx.version
        return len(inserted) + len(updated)

    def use(self, nodes: Iterable[str], namespace: str = "personal", at: Clock = None) -> None:
        """Record that ``nodes`` were used at ``at`` (one event), without reinforcing edges.

        Feeds the base-level activation of the ``actr`` rule: a single node used alone is
        a use, not a co-activation; several nodes count as one co-activation event (the N
        of the log-lift) without an edge between them. :meth:`reinforce` records its own
        uses; both are stored in the same transaction as the rest of the event.

        Examples
        --------
        >>> store = SynapseStore(":memory:", config=SynapseConfig.actr())
        >>> store.use(["README.md"], at=0)
        >>> [h.id for h in store.recall([("a", 0.9), ("b", 0.5)], at=86400)]
        ['a', 'README.md']
        """
        ns = validate_namespace(namespace)
        ids = coactivation_set(nodes, limit=self.config.max_coactivation)
        self._record_use(ids, ns, self._written_time(at), None)

    def _written_time(self, at: Clock) -> float | None:
        """An explicit write time in seconds (None: the clock, read inside the write),
        refused when more than ``config.max_clock_skew_s`` ahead of the clock."""
        if at is None:
            return None
        return not_ahead(to_seconds(at), skew_s=self.config.max_clock_skew_s)

    def _record_use(
        self, ids: list[str], ns: str, explicit: float | None, event_id: str | None
    ) -> None:
        """One use event of ``ids`` (validated) in one transaction; no edge is written."""
        if not ids:
            return
        with self._lock:
            self._check_open()
            with self._storage.write() as tx:
                self._catch_up(tx)
                now = explicit if explicit is not None else time.time()
                if event_id is not None and not tx.record_event(event_id, now):
                    return
                node_ids, ns_id = self._ids(tx, ids, ns)
                uses = self._uses.recorded(node_ids, ns_id, now)
                tx.write_uses(uses)
                together = len(set(node_ids)) > 1
                if together:  # several nodes used at once: a co-activation event
                    tx.add_events(ns_id, 1)
                tx.log_recent(ns_id, now, node_ids, keep=self.config.recent_events)
            self._graph.add_names(zip(node_ids, ids, strict=True), [(ns_id, ns)])
            self._uses.apply(uses)
            self._uses.add_events(ns_id, int(together))
            self._uses.remember([(ns_id, now, node_ids)])
            self._version = tx.version

    def _ids(self, tx: WriteTransaction, names: list[str], ns: str) -> tuple[list[int], int]:
        """Ids of ``names`` and of ``ns``: from memory when all are known (ids are never
        reused, and what another process added was caught up), else from ``tx``."""
        graph = self._graph
        known = [graph.index.get(name, -1) for name in names]
        ns_id = graph.ns_index.get(ns)
        return (
            known if -1 not in known else tx.node_ids(names),
            ns_id if ns_id is not None else tx.namespace_id(ns),
        )

    def _reinforced(
        self,
        stored: list[EdgeRow],
        names: list[str],
        node_ids: list[int],
        ns: str,
        ns_id: int,
        now: float,
        explicit: float | None,
        delta: float,
    ) -> tuple[list[EdgeRow], list[EdgeRow]]:
        """New states of every pair of one event, from the rows read inside the transaction."""
        config = self.config
        rows = {(row.a, row.b): row for row in stored}
        pairs = [
            (x, y) if names[i] < names[j] else (y, x)
            for i, x in enumerate(node_ids)
            for j, y in enumerate(node_ids[i + 1 :], start=i + 1)
        ]
        old = [rows.get(pair) for pair in pairs]
        if explicit is not None:
            for row in old:
                if row is not None and explicit < row.last_reinforced_at:
                    a, b = (
                        self._name_of(row.a, names, node_ids),
                        self._name_of(row.b, names, node_ids),
                    )
                    future = row.last_reinforced_at > time.time() + config.max_clock_skew_s
                    raise InvalidValueError(
                        f"at={explicit} is earlier than the last reinforcement of {a!r}-{b!r} "
                        f"in {ns!r} ({row.last_reinforced_at}): time must not run backwards"
                        + (
                            "; that time lies in the future: store.repair() (synapse repair) "
                            "removes what was written ahead of the clock"
                            if future
                            else ""
                        )
                    )
        blank = EdgeRow(0, ns_id, 0, 0, 0.0, 0, 1.0, now, now)
        state = np.asarray([row or blank for row in old], dtype=np.float64)
        w0, count, half_life, created, last = (state[:, k] for k in (4, 5, 6, 7, 8))
        when = np.maximum(now, last)
        gap = (when - last) / SECONDS_PER_DAY
        current = np.asarray(
            effective_weight(
                w0,
                half_life,
                gap,
                count=count,
                ltp=config.is_ltp_namespace(ns),
                ltp_min_count=config.ltp_min_count,
                ltp_floor=config.ltp_floor,
                prune_threshold=config.prune_threshold,
            )
        )
        fresh = current == 0.0  # absent, or already pruned: starts afresh
        default = config.default_half_life(ns)
        count = np.where(fresh, 1, count + 1)
        learned = learned_half_life(
            count, gap, default, bounds=config.half_life_bounds, scale=config.learned_scale
        )
        weight = np.minimum(1.0, current + delta)
        half_life = np.where(fresh, default, learned)
        created = np.where(fresh, when, created)
        inserted: list[EdgeRow] = []
        updated: list[EdgeRow] = []
        for k, (pair, row) in enumerate(zip(pairs, old, strict=True)):
            new = EdgeRow(
                0 if row is None else row.id,
                ns_id,
                *pair,
                float(weight[k]),
                int(count[k]),
                float(half_life[k]),
                float(created[k]),
                float(when[k]),
            )
            (inserted if row is None else updated).append(new)
        return inserted, updated

    @staticmethod
    def _name_of(node: int, names: list[str], node_ids: list[int]) -> str:
        return names[node_ids.index(node)]

    def decay(self, at: Clock = None, *, dry_run: bool = False, force: bool = False) -> DecayReport:
        """Delete the edges that have decayed below the prune threshold at ``at``.

        Weights and timestamps are never rewritten (decay is applied lazily at every
        read), so sweeps are idempotent and compose.

        Parameters
        ----------
        at : datetime, float or None
            The sweep's time; None is now.
        dry_run : bool
            Report what the sweep would prune, and delete nothing.
        force : bool
            Sweep at a time later than the clock. Refused otherwise: such a sweep deletes
            edges that are live today (those that will have decayed by then).

        Raises
        ------
        InvalidValueError
            ``at`` is later than the clock, without ``force`` or ``dry_run``; the
            message says how many edges live now it would delete.

        Examples
        --------
        >>> store = SynapseStore(":memory:")
        >>> _ = store.reinforce(["a", "b"], at=0)  # w0 0.3, half-life 30 days
        >>> store.decay(at=147 * 86400).pruned, store.decay(at=148 * 86400).pruned
        (0, 1)
        """
        now = to_seconds(at)
        with self._lock:
            self._check_open()
            if dry_run or (now > time.time() and not force):
                self._refresh()
                graph = self._graph
                ids = graph.live_ids()
                pruned = ids[~graph.live(ids, now)]
                if not dry_run:
                    live_now = int(np.count_nonzero(graph.live(pruned, time.time())))
                    raise InvalidValueError(
                        f"decay at={now} is {(now - time.time()) / SECONDS_PER_DAY:.1f} days "
                        f"after now: it would delete {live_now} edges that are live now; pass "
                        "force=True (synapse decay --force) to sweep anyway, or dry_run=True "
                        "(--dry-run) to see what it would prune"
                    )
            else:
                with self._storage.write() as tx:
                    self._catch_up(tx)
                    graph = self._graph  # after the catch-up: a full reload replaces it
                    ids = graph.live_ids()
                    pruned = ids[~graph.live(ids, now)]
                    tx.delete(pruned.tolist())
                graph.remove(pruned.tolist())
                self._version = tx.version
            namespaces = [graph.ns_names[int(ns)] for ns in graph._ns[pruned]]
        by_namespace = Counter(namespaces)
        return DecayReport(
            now,
            int(pruned.size),
            int(ids.size - (0 if dry_run else pruned.size)),
            dict(sorted(by_namespace.items())),
            dry_run,
        )

    def repair(self, *, dry_run: bool = False) -> RepairReport:
        """Remove what was written ahead of the clock, from a store that accepted it.

        Times more than ``config.max_clock_skew_s`` ahead are refused on every write
        today; a store written before that rule (or by an older release) may hold them:
        a millisecond time read as seconds lies some 50,000 years ahead, so its edge
        never decays and every later write is placed after it. This deletes, in one
        transaction: every edge created or reinforced ahead of the clock, the future
        times of node uses (a node left with none loses its use row), the future entries
        of the recent-events log, and the ids of events recorded ahead of the clock (so
        that a replay with corrected times is learned). Every process reloads the store.

        Examples
        --------
        >>> import time
        >>> store = SynapseStore(":memory:")
        >>> _ = store.reinforce(["a", "b"], at=0)
        >>> store.config = SynapseConfig(max_clock_skew_s=1e15)  # as older releases did
        >>> _ = store.reinforce(["a", "c"], at=time.time() * 1000)  # milliseconds
        >>> store.config = SynapseConfig()
        >>> store.repair()
        RepairReport(edges=1, uses=2, events=1, dry_run=False)
        >>> [other for other, _, _ in store.neighbours("a", at=0)]
        ['b']
        """
        limit = time.time() + self.config.max_clock_skew_s
        with self._lock:
            self._check_open()
            try:
                with self._storage.write() as tx:
                    counts = tx.forget_after(limit)
                    if dry_run:
                        raise _DryRun
            except _DryRun:
                return RepairReport(*counts, dry_run=True)
            self._graph = MemoryGraph(self.config)  # everything again, as every process does
            self._uses = UseTable(history=self.config.use_history, window=self.config.recent_events)
            self._version = 0
            self._apply(self._storage.load())
        return RepairReport(*counts, dry_run=False)

    # -- reading -----------------------------------------------------------------------

    def edge(self, a: str, b: str, namespace: str = "personal") -> Edge | None:
        """The stored state of the edge between ``a`` and ``b`` (no decay), or None.

        Examples
        --------
        >>> store = SynapseStore(":memory:")
        >>> _ = store.reinforce(["config/keys.py", "auth/jwt.py"], at=0)
        >>> store.edge("config/keys.py", "auth/jwt.py")  # either order; a < b in the result
        Edge(a='auth/jwt.py', b='config/keys.py', namespace='personal', weight=0.3, \
activation_count=1, half_life_days=30.0, created_at=0.0, last_reinforced_at=0.0)
        >>> store.edge("auth/jwt.py", "config/keys.py", namespace="shared") is None
        True
        """
        ns = validate_namespace(namespace)
        a, b = sorted((validate_node_id(a), validate_node_id(b)))
        with self._lock:
            self._refresh()
            return self._graph.edge(ns, a, b)

    def neighbours(
        self, node: str, at: Clock = None, namespace: str | None = None
    ) -> list[tuple[str, Edge, float]]:
        """Live edges of ``node``, strongest first: ``(neighbour, stored edge, weight at at)``.

        Reads only the node's own edges (``graph()`` builds the whole graph).

        Examples
        --------
        >>> store = SynapseStore(":memory:")
        >>> _ = store.reinforce(["jwt", "keys"], strength=2.0, at=0)
        >>> _ = store.reinforce(["jwt", "login"], at=0)
        >>> [(other, round(weight, 2)) for other, _, weight in store.neighbours("jwt", at=0)]
        [('keys', 0.6), ('login', 0.3)]
        """
        validate_node_id(node)
        ns = None if namespace is None else validate_namespace(namespace)
        now = to_seconds(at)
        with self._lock:
            self._refresh()
            found = self._graph.neighbours(node, now, ns)
        return sorted(found, key=lambda row: (-row[2], row[0], row[1].namespace))

    def weight(self, a: str, b: str, namespace: str = "personal", at: Clock = None) -> float:
        """The effective (decayed, LTP-floored) weight at ``at``; 0.0 if absent or pruned.

        Examples
        --------
        >>> store = SynapseStore(":memory:")
        >>> _ = store.reinforce(["a", "b"], at=0)
        >>> store.weight("a", "b", at=0), store.weight("a", "b", at=30 * 86400)  # a half-life
        (0.3, 0.15)
        >>> store.weight("a", "b", at=148 * 86400)  # below 0.01: pruned
        0.0
        """
        now = to_seconds(at)
        edge = self.edge(a, b, namespace)
        return 0.0 if edge is None else edge.weight_at(now, self.config)

    def spread(
        self,
        seeds: Iterable[str],
        at: Clock = None,
        active_namespace: str = "personal",
        *,
        report_min: float = 0.0,
        report: Iterable[str] = (),
    ) -> Activation:
        """Spreading activation from ``seeds``, with the paths that carried the energy.

        ``report_min`` and ``report`` limit which reached nodes are returned (all by
        default); see :func:`~synapse_retriever.activation.spread`.

        Examples
        --------
        >>> store = SynapseStore(":memory:")
        >>> _ = store.reinforce(["a", "b"], at=0)
        >>> _ = store.reinforce(["b", "c"], at=0)
        >>> activation = store.spread(["a"], at=0)
        >>> activation.energy  # b: 0.3 × 0.6; c: 0.18 × 0.3 × 0.6
        {'b': 0.18, 'c': 0.0324}
        >>> activation.paths["c"]
        ('a', 'b', 'c')
        """
        ids = coactivation_set(seeds)
        now = to_seconds(at)
        validate_namespace(active_namespace)
        with self._lock:
            self._refresh()
            graph = self._graph
            result = graph.spread(ids, now, active_namespace, report_min=report_min, report=report)
            names = graph.names
            return Activation(
                energy={
                    names[n]: e
                    for n, e in zip(result.nodes.tolist(), result.energy.tolist(), strict=True)
                },
                paths=NamedPaths(result.paths, names, graph.index),
            )

    def activate(
        self, seeds: Iterable[str], at: Clock = None, active_namespace: str = "personal"
    ) -> dict[str, float]:
        """Energy of every node reached from ``seeds`` (hub factor applied), seeds excluded.

        See :func:`~synapse_retriever.activation.spread_activation` for the formula.

        Examples
        --------
        >>> store = SynapseStore(":memory:")
        >>> _ = store.reinforce(["a", "b"], strength=2.0, at=0)  # w 0.6
        >>> store.activate(["a"], at=0)  # 0.6 × 0.6
        {'b': 0.36}
        """
        return self.spread(seeds, at, active_namespace).energy

    def plan(
        self,
        hits: Iterable[tuple[str, SupportsFloat]],
        at: Clock = None,
        active_namespace: str = "personal",
    ) -> RecallPlan:
        """Validate ``hits`` and compute what may displace them under ``config.rule``.

        Under ``actr`` (the default): the activation of the hits and their candidates;
        under ``published``: spreading activation from the first ``config.seeds`` ids.
        The returned plan lists the candidate ids to resolve, then injects; use it
        where resolving ids is async. :meth:`recall` is ``plan(...).inject(...)`` over
        the distinct ids.

        ``hits`` are taken and refused as :meth:`recall` says (any iterable of pairs, real
        scores, best first), with one difference: a repeated id stays at each of its
        places. Callers that map the result back to their own objects by position (the
        adapters, through :func:`~synapse_retriever.items.plan_items`) need every input
        position kept; :meth:`recall`, which returns hits, keeps only the first.

        Examples
        --------
        Under the published rule:

        >>> store = SynapseStore(":memory:", config=SynapseConfig.published())
        >>> _ = store.reinforce(["a", "b"], at=0)
        >>> plan = store.plan([("a", 0.9), ("x", 0.8), ("y", 0.7), ("z", 0.6)], at=0)
        >>> plan.candidates, plan.slots  # b: energy 0.18 >= 0.15; 4 hits, 3 seeds: 1 slot
        (['b'], 1)
        >>> [h.id for h in plan.inject(resolvable={"b"})]  # once b is known to resolve
        ['a', 'x', 'y', 'b']
        >>> [node for node, _ in store.plan([("a", 0.9), ("x", 0.8), ("a", 0.8)], at=0).hits]
        ['a', 'x', 'a']
        """
        return self._plan(_validated_hits(hits), at, active_namespace)

    def _plan(self, rows: list[tuple[str, float]], at: Clock, active_namespace: str) -> RecallPlan:
        """:meth:`plan` for hits already validated."""
        self._check_open()
        config = self.config
        if config.rule == "actr":
            return self._actr_plan(rows, to_seconds(at), validate_namespace(active_namespace))
        seeds = [node for node, _ in rows[: config.seeds]]
        if config.injection_enabled and len(rows) > 1:
            activation = self.spread(
                seeds,
                at,
                active_namespace,
                report_min=config.inject_threshold - ENERGY_TOLERANCE,
                report=[node for node, _ in rows],
            )
        else:
            validate_namespace(active_namespace)
            to_seconds(at)
            activation = Activation()
        return RecallPlan(
            rows,
            activation,
            seeds=config.seeds,
            boost=config.boost,
            threshold=config.inject_threshold,
            max_inject=config.max_inject,
        )

    def _actr_plan(self, rows: list[tuple[str, float]], now: float, active: str) -> ActrPlan:
        """Activation of the hits and their candidates under the ``actr`` rule."""
        config = self.config
        plan = {
            "seeds": config.seeds,
            "max_inject": config.max_inject,
            "keep_bonus": config.keep_bonus,
            "unused_base": config.unused_base,
        }
        if not config.injection_enabled or len(rows) < 2:
            return ActrPlan(rows, Activation(), **plan)  # type: ignore[arg-type]
        with self._lock:
            self._refresh()
            graph, table = self._graph, self._uses
            factors = graph.factors(active)
            names = list(dict.fromkeys(node for node, _ in rows))
            hits = np.array([graph.index.get(name, -1) for name in names], np.int64)
            sources = (
                graph.co_uses(hits.tolist(), active, now)
                if config.association_fan
                else [(np.zeros(0, np.int64), np.zeros(0))] * len(names)  # query-blind
            )
            recent = table.recent_nodes(factors, until=now)
            known = hits[hits >= 0]
            nodes = unique_ids(np.concatenate([recent, known, *(row for row, _ in sources)]))
            uses, base = table.levels(nodes, now, factors, config.base_decay)
            events = table.events(factors)
            latest = table.latest_time(factors, until=now)
        # a memory that stopped learning g days ago: never-used nodes are less surely worse
        stale = math.log1p(max(0.0, now - latest) / SECONDS_PER_DAY) if latest > -math.inf else 0.0
        unused_base = plan["unused_base"] = config.unused_base + config.stale_unused * stale
        first_score = {node: score for node, score in reversed(rows)}  # a repeated id: its first
        weights = np.array(source_weights([first_score[name] for name in names]))
        lift = lift_strengths(hits, sources, nodes, uses, events, weights)
        present = np.zeros(nodes.size, bool)
        present[np.searchsorted(nodes, known)] = True
        share = np.where(present, config.defend_association, 1.0)
        activation = np.where(base == -np.inf, unused_base, base)
        activation = activation + share * config.association * lift
        # the hits and the strongest candidates are looked up most: by name up front
        by_name = {name: unused_base for name in names}  # never seen: unused_base
        by_name.update(
            zip(
                [graph.names[x] for x in known.tolist()],
                activation[np.searchsorted(nodes, known)].tolist(),
                strict=True,
            )
        )
        movable = [by_name[node] for node, _ in rows[config.seeds :]]
        floor = min(movable, default=math.inf) + config.keep_bonus
        strong = np.flatnonzero((activation > floor) & ~present)
        order = RankedNames(nodes[strong], activation[strong], graph.names)  # ties by name
        head = len(rows) + config.max_inject  # what a swap reads first
        by_name.update(zip(order[:head], order.values(head), strict=True))
        energy = NodeValues(nodes, activation, graph.names, graph.index, by_name)
        paths = StrongestSources(names, sources, nodes[strong], graph.names, graph.index)
        return ActrPlan(
            rows,
            Activation(energy, paths),  # type: ignore[arg-type]
            order=order,
            **plan,  # type: ignore[arg-type]
        )

    def recall(
        self,
        hits: Iterable[tuple[str, SupportsFloat]],
        at: Clock = None,
        active_namespace: str = "personal",
        resolvable: Resolvable | None = None,
        cost: object = None,
    ) -> list[Hit]:
        """Fold learned associations into ranked ``(id, score)`` hits; never grows the list.

        Parameters
        ----------
        hits : iterable of (id, score)
            Vector hits, best first: scores non-increasing (ties allowed), finite, of any
            real number type (int, float, NumPy scalars, Fraction; not bool or Decimal).
            A list, a generator or ``zip(ids, scores)`` will do. A repeated id counts
            once, at its first (thus best) place.
        at : datetime, float or None
            The query's time.
        active_namespace : str
            Weighs 1.0 in the merged graph (personal 0.8, shared 0.5 otherwise).
        resolvable : callable or container, optional
            Which absent ids can become results; the others never take a slot.
        cost : callable, optional
            ``id -> cost`` (e.g. tokens): an injection may not raise the total.

        Returns
        -------
        list of Hit
            One hit per distinct id in ``hits`` (so never more hits than ``hits``), no id
            twice; on a cold graph, the distinct input unchanged.

        Raises
        ------
        InvalidTypeError
            ``hits`` is not an iterable of pairs (a str, a dict: pass ``.items()``), or a
            score is not a real number.
        InvalidValueError
            A bad id, a NaN or infinite score, hits not sorted best first, or a bad
            ``at`` or ``active_namespace``.

        Notes
        -----
        Unsorted hits are refused, not sorted: sorting would silently turn an ascending
        list of distances (e.g. FAISS L2, lower is better) into the reverse ranking. Pass
        similarities instead, e.g. the negated distances.

        See :func:`~synapse_retriever.actr.swap` for the default rule and
        :func:`~synapse_retriever.injection.inject` for the published one.

        Examples
        --------
        >>> store = SynapseStore(":memory:")
        >>> hits = [("a", 0.9), ("x", 0.8), ("y", 0.7), ("z", 0.6)]
        >>> store.recall(hits, at=0) == [Hit(node, score) for node, score in hits]  # cold
        True
        >>> import numpy as np
        >>> out = store.recall(zip(["a", "x", "a"], np.float32([0.5, 0.25, 0.25])), at=0)
        >>> [(hit.id, hit.score) for hit in out]  # a repeated id once; plain floats
        [('a', 0.5), ('x', 0.25)]
        >>> store.recall([("x", 0.2), ("y", 0.5)])  # doctest: +ELLIPSIS
        Traceback (most recent call last):
        ...
        synapse_retriever.errors.InvalidValueError: hits must be sorted best first ...
        >>> _ = store.reinforce(["a", "b"], at=86400)
        >>> hit = store.recall(hits, at=2 * 86400)[-1]  # b takes the weakest slot, and its score
        >>> hit.id, hit.score, hit.origin, hit.displaced, hit.path
        ('b', 0.6, 'injected', 'z', ('a', 'b'))
        >>> round(hit.energy, 4)  # B = ln 1^-0.5 = 0 (one use, a day ago), no lift (one event)
        0.0

        Under the published rule, b's energy is the seed a's 1.0 × 0.3 × 0.6:

        >>> store = SynapseStore(":memory:", config=SynapseConfig.published())
        >>> _ = store.reinforce(["a", "b"], at=0)
        >>> store.recall(hits, at=0)[-1]
        Hit(id='b', score=0.6, origin='injected', energy=0.18, path=('a', 'b'), displaced='z')
        """
        if cost is not None and not callable(cost):
            raise InvalidTypeError(f"cost must be a callable id -> number, got {cost!r}")
        rows = _validated_hits(hits, distinct=True)
        return self._plan(rows, at, active_namespace).inject(resolvable, cost)

    def graph(
        self, at: Clock = None, namespaces: str | Iterable[str] | None = None
    ) -> nx.Graph[str] | nx.MultiGraph[str]:
        """The live graph as networkx, with decayed weights, built on demand.

        One namespace (a str) gives an ``nx.Graph``; several, or None for all, an
        ``nx.MultiGraph`` keyed by namespace. Edge attributes: ``weight`` (decayed),
        ``stored_weight``, ``count``, ``half_life_days``, ``namespace``,
        ``last_reinforced_at``. Pruned edges are left out.

        Examples
        --------
        >>> store = SynapseStore(":memory:")
        >>> _ = store.reinforce(["a", "b"], at=0)
        >>> _ = store.reinforce(["b", "c"], namespace="shared", at=0)
        >>> sorted(store.graph(at=30 * 86400, namespaces="personal").edges(data="weight"))
        [('a', 'b', 0.15)]
        >>> graph = store.graph(at=0)  # every namespace: a MultiGraph keyed by namespace
        >>> sorted(graph.edges(keys=True))
        [('a', 'b', 'personal'), ('b', 'c', 'shared')]
        """
        import networkx as nx

        now = to_seconds(at)
        single = isinstance(namespaces, str)
        chosen = (
            [validate_namespace(namespaces)]
            if isinstance(namespaces, str)
            else None
            if namespaces is None
            else [validate_namespace(ns) for ns in namespaces]
        )
        result: nx.Graph[str] = nx.Graph() if single else nx.MultiGraph()
        with self._lock:
            self._refresh()
            graph = self._graph
            for ns in chosen if chosen is not None else graph.namespaces():
                ids = graph.live_ids(ns)
                weights = graph.weights(ids, now)
                ids, weights = ids[weights > 0], weights[weights > 0]
                for edge, weight in zip(graph.edges(ids), weights.tolist(), strict=True):
                    attrs = {
                        "weight": weight,
                        "stored_weight": edge.weight,
                        "count": edge.activation_count,
                        "half_life_days": edge.half_life_days,
                        "namespace": ns,
                        "last_reinforced_at": edge.last_reinforced_at,
                    }
                    if single:
                        result.add_edge(edge.a, edge.b, **attrs)
                    else:
                        result.add_edge(edge.a, edge.b, key=ns, **attrs)
        return result

    # -- keeping the in-memory graph current -------------------------------------------

    def _check_open(self) -> None:
        if self._closed:
            raise SynapseError(f"{self!r} is closed")

    def _apply(self, changes: Changes) -> None:
        if changes.full:  # everything, not what changed: start again from it
            self._graph = MemoryGraph(self.config)
            self._uses = UseTable(history=self.config.use_history, window=self.config.recent_events)
        self._graph.add_names(changes.nodes, changes.namespaces)
        self._graph.apply(changes.rows)
        self._graph.remove(changes.removed)
        self._uses.apply(changes.uses)
        for namespace, events in changes.events:
            self._uses.set_events(namespace, events)
        self._uses.remember(changes.recent)
        self._version = max(self._version, changes.version)

    def _catch_up(self, tx: WriteTransaction) -> None:
        """Apply what other processes committed since our last look (read inside ``tx``)."""
        if tx.version - 1 != self._version:
            graph = self._graph
            changes = tx.changes(self._version, graph.max_node, graph.max_namespace)
            # everything before this transaction: if it rolls back, its version number is
            # free again and another process's next commit will carry it
            changes.version = tx.version - 1
            self._apply(changes)

    def _refresh(self) -> None:
        """Apply other processes' writes, checking at most once per refresh interval."""
        self._check_open()
        clock = time.monotonic()
        if clock - self._polled < self.config.refresh_interval_s:
            return
        self._polled = clock
        graph = self._graph
        changes = self._storage.poll(self._version, graph.max_node, graph.max_namespace)
        if changes is not None:
            self._apply(changes)


def return_freed_memory() -> None:
    """Hand freed heap memory back to the OS, as a store does after loading ``BIG_LOAD``
    edges or more (glibc keeps it otherwise: measured 27 bytes per edge of resident
    memory at 1M edges); a no-op off glibc."""
    gc.collect()
    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL("libc.so.6").malloc_trim(0)


def _clamped_strength(strength: object, maximum: float) -> float:
    if isinstance(strength, bool) or not isinstance(strength, (int, float)):
        raise InvalidTypeError(
            f"strength must be a number, got {type(strength).__name__} {strength!r}"
        )
    if not math.isfinite(strength):
        raise InvalidValueError(f"strength must be a finite number, got {strength!r}")
    return min(max(float(strength), 0.0), maximum)


def _validated_hits(
    hits: Iterable[tuple[str, SupportsFloat]], *, distinct: bool = False
) -> list[tuple[str, float]]:
    """``hits`` as ``(str, float)`` rows: real, finite scores, best first.

    Any iterable of pairs will do (a list, a generator, ``zip(ids, scores)``, a NumPy
    structured array) and any real score (int, float, NumPy scalars, Fraction). A
    repeated id stays where it is, or with ``distinct`` only its first, thus best,
    occurrence is kept.

    Raises
    ------
    InvalidTypeError
        ``hits`` is a str, bytes, a mapping or not iterable; a hit is not a pair; a
        score is not a real number (a bool, a str, None, a complex, a Decimal).
    InvalidValueError
        A bad id (see :func:`~synapse_retriever.capture.validate_node_id`), a score
        that is NaN or infinite, or one above the score before it.

    Examples
    --------
    >>> import numpy as np
    >>> _validated_hits(zip(["a", "b", "a"], np.array([2, 1, 1])), distinct=True)
    [('a', 2.0), ('b', 1.0)]
    """
    if type(hits) is not list and (  # a list is the common case: skip the ABC checks
        isinstance(hits, (str, bytes, Mapping)) or not isinstance(hits, Iterable)
    ):
        got = (
            f"a {type(hits).__name__}: pass hits.items()"
            if isinstance(hits, Mapping)
            else repr(hits)
        )
        raise InvalidTypeError(f"hits must be an iterable of (id, score) pairs, got {got}")
    rows: list[tuple[str, float]] = []
    lowest, best = -math.inf, sys.float_info.max  # best: the previous score, finite
    hit: tuple[object, object]
    for hit in hits:
        if type(hit) is not tuple or len(hit) != 2:  # a 2-tuple is the common case
            hit = _pair(hit, len(rows))
        node, score = hit
        node = validate_node_id(node)
        if type(node) is not str:
            node = str(node)  # e.g. NumPy's str_
        if type(score) is not float:
            score = _real_score(score, len(rows), node)
        if not lowest < score <= best:  # one chained comparison refuses NaN, ±inf, disorder
            raise _misplaced_score(score, len(rows), node, best)
        best = score
        rows.append((node, score))
    if distinct and len({node for node, _ in rows}) < len(rows):
        first: dict[str, float] = {}
        for node, score in rows:
            first.setdefault(node, score)
        rows = list(first.items())
    return rows


def _pair(hit: object, position: int) -> tuple[object, object]:
    """``hit``'s first two items if it is an iterable other than a str (a list, a NumPy
    record, a longer tuple)."""
    if not isinstance(hit, (str, bytes)):
        with contextlib.suppress(TypeError):  # not iterable
            items: tuple[object, ...] = tuple(hit)  # type: ignore[arg-type]
            if len(items) >= 2:
                return items[0], items[1]
    raise InvalidTypeError(f"hit {position} must be an (id, score) pair, got {hit!r}")


def _real_score(score: object, position: int, node: str) -> float:
    """``score`` as a float if it is a real number (NumPy's included), not a bool."""
    if isinstance(score, bool) or not isinstance(score, Real):
        hint = ": pass float(score)" if isinstance(score, Decimal) else ""
        raise InvalidTypeError(
            f"hit {position} ({node!r}) has a score that is not a real number, {score!r}; "
            f"expected an int, a float, a Fraction or a NumPy scalar{hint}"
        )
    try:
        return float(score)
    except OverflowError:  # an int or Fraction beyond float's range
        raise InvalidValueError(
            f"hit {position} ({node!r}) has a non-finite score {score!r}"
        ) from None


def _misplaced_score(score: float, position: int, node: str, previous: float) -> InvalidValueError:
    """The error for a score that is not finite, or above the previous hit's."""
    if not math.isfinite(score):
        return InvalidValueError(f"hit {position} ({node!r}) has a non-finite score {score!r}")
    return InvalidValueError(
        f"hits must be sorted best first (scores non-increasing): hit {position} ({node!r}) "
        f"scores {score!r}, above hit {position - 1}'s {previous!r}; sort them best first; "
        "for distances (e.g. FAISS L2, lower is better), pass similarities (e.g. the "
        "negated distances)"
    )
