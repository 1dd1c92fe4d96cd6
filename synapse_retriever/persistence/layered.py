"""Two backends as one: a user's namespaces in a local file, the team's in a shared database.

A :class:`LayeredStorage` routes each namespace to a layer (``shared`` to the shared
backend, the others to the local one) and shows the store one id space: node and namespace
ids are its own, given by name, and an edge's id is its layer's id × 2 + the layer (0
local, 1 shared). The store's in-memory graph therefore holds both layers, merged at recall
with the usual namespace weights, and recall runs no SQL.

A write transaction opens a layer's own transaction only when it first touches that layer,
and commits them when it ends: an event is in one namespace, so it is atomic as on one
backend; a batch that spans both layers is atomic per layer. The version the store sees is
a count of what this object has read or written; which layer version each reflects is
kept here, per layer, and each poll asks each layer what changed since then.

Examples
--------
>>> from synapse_retriever import SynapseStore
>>> store = SynapseStore.layered(local=":memory:", shared=":memory:")
>>> _ = store.reinforce(["a", "b"], namespace="personal", at=0)
>>> _ = store.reinforce(["a", "c"], namespace="shared", at=0)
>>> sorted(other for other, _, _ in store.neighbours("a", at=0))
['b', 'c']
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Collection, Iterable, Iterator, Sequence
from contextlib import AbstractContextManager, contextmanager

import numpy as np

from synapse_retriever.config import validate_namespace
from synapse_retriever.errors import (
    InvalidTypeError,
    InvalidValueError,
    StorageUnavailableError,
    shown,
)
from synapse_retriever.persistence.protocols import Storage, WriteTransaction
from synapse_retriever.persistence.rows import (
    EDGE_COLUMNS,
    EMPTY_EDGES,
    Changes,
    EdgeKey,
    EdgeRow,
    EdgeTable,
    EventRecord,
    ForgetCounts,
    RecentEvent,
    UseColumns,
    UseKey,
    UseRow,
    edge_rows,
    rows_array,
)

__all__ = ["LOCAL", "SHARED", "LayeredStorage"]

logger = logging.getLogger(__name__)

LOCAL, SHARED = 0, 1
"""The layers, as the last bit of an edge's id."""

_ID, _NAMESPACE, _A, _B = (EDGE_COLUMNS.index(name) for name in ("id", "namespace", "a", "b"))


class _Names:
    """Ids of one kind (nodes or namespaces) here, and in each layer, by name."""

    def __init__(self) -> None:
        self.names: list[str] = [""]  # ids from 1, as the backends give them
        self.index: dict[str, int] = {}
        self.to_view: tuple[dict[int, int], dict[int, int]] = ({}, {})
        self.to_layer: tuple[dict[int, int], dict[int, int]] = ({}, {})

    def view(self, name: str) -> int:
        found = self.index.get(name)
        if found is None:
            found = self.index[name] = len(self.names)
            self.names.append(name)
        return found

    def learn(self, layer: int, pairs: Iterable[tuple[int, str]]) -> None:
        for layer_id, name in pairs:
            view = self.view(name)
            self.to_view[layer][layer_id] = view
            self.to_layer[layer][view] = layer_id

    def top(self, layer: int) -> int:
        return max(self.to_view[layer], default=0)

    def forget(self, layer: int) -> None:
        """``layer``'s ids are no longer known: it is read whole (its tables restored from a
        backup, or made again, may give a name's id to another name)."""
        self.to_view[layer].clear()
        self.to_layer[layer].clear()


def shared_namespace_set(names: object) -> frozenset[str]:
    """The namespaces a layered store keeps in its shared layer: a non-empty collection of
    valid namespaces (a bare str is refused: it would be read as its characters).

    Examples
    --------
    >>> sorted(shared_namespace_set(["shared", "branch:auth"]))
    ['branch:auth', 'shared']
    >>> shared_namespace_set("shared")
    Traceback (most recent call last):
    ...
    synapse_retriever.errors.InvalidTypeError: shared_namespaces must be a collection of \
namespaces, got a bare str 'shared': pass ('shared',)
    """
    if isinstance(names, (str, bytes)):
        raise InvalidTypeError(
            f"shared_namespaces must be a collection of namespaces, got a bare "
            f"{type(names).__name__} {names!r}: pass ({names!r},)"
        )
    if not isinstance(names, Iterable):
        raise InvalidTypeError(
            f"shared_namespaces must be a collection of namespaces, got {type(names).__name__} "
            f"{shown(names)}"
        )
    chosen = frozenset(validate_namespace(name) for name in names)
    if not chosen:
        raise InvalidValueError("shared_namespaces must name at least one namespace, got none")
    return chosen


class LayeredStorage:
    """A local backend and a shared one, seen as one (see the module docstring).

    Parameters
    ----------
    local, shared : Storage
        The backends: an SQLite file, say, and a PostgreSQL database.
    shared_namespaces : collection of str
        The namespaces kept in ``shared``; every other namespace is kept in ``local``.
    """

    def __init__(
        self,
        local: Storage,
        shared: Storage,
        *,
        shared_namespaces: Collection[str] = ("shared",),
    ) -> None:
        chosen = shared_namespace_set(shared_namespaces)
        self.layers = (local, shared)
        self.path = f"{local.path} + {shared.path}"
        self.read_only = False
        """A layered storage takes writes: each layer refuses those it cannot write (a
        read-only shared layer, its namespaces' writes only)."""
        self.shared_namespaces = chosen
        self.nodes, self.spaces = _Names(), _Names()
        self.cursors = [0, 0]  # the layer version each layer's part of the view reflects
        self._warned: set[str] = set()  # namespaces whose local rows a warning named
        self.version = 0

    def layer_of(self, namespace: int) -> int:
        """The layer that keeps the namespace of view id ``namespace``."""
        return SHARED if self.spaces.names[namespace] in self.shared_namespaces else LOCAL

    def load(self) -> Changes:
        loaded = [layer.load() for layer in self.layers]
        return self._merged(loaded, full=True)

    def poll(self, since: int, max_node: int, max_namespace: int) -> Changes | None:
        found: list[Changes | None] = [
            layer.poll(self.cursors[n], self.nodes.top(n), self.spaces.top(n))
            for n, layer in enumerate(self.layers)
        ]
        if all(changes is None for changes in found):
            return None
        if any(changes is not None and changes.full for changes in found):
            # one layer starts again from everything: so must the view
            return self._merged(
                [c if c is not None and c.full else layer.load()
                 for c, layer in zip(found, self.layers, strict=True)],
                full=True,
            )  # fmt: skip
        return self._merged(found, full=False)

    def _left_out(self, namespaces: np.ndarray) -> None:
        """Warn, once per namespace for this storage's life, that the local layer holds
        edges of ``namespaces`` (its ids), which the view reads from the shared layer and
        leaves out (a teammate's own namespaces in the shared layer are not the user's:
        left out without a word)."""
        ids, counts = np.unique(namespaces.astype(np.int64), return_counts=True)
        spaces = self.spaces.to_view[LOCAL]
        named = {
            self.spaces.names[spaces[int(i)]]: int(n) for i, n in zip(ids, counts, strict=True)
        }
        new = {name: n for name, n in named.items() if name not in self._warned}
        if not new:
            return
        self._warned.update(new)
        held = ", ".join(f"{name!r} ({n:,} edge{'s' if n != 1 else ''})" for name, n in new.items())
        logger.warning(
            "%s (the local layer) holds %s, which this layered store reads from the shared "
            "layer: left out of the view, and left as they are; to keep them, copy them there "
            "(synapse-retriever export --namespace NAME, then import)",
            self.layers[LOCAL].path,
            held,
        )

    def _merged(self, found: Sequence[Changes | None], *, full: bool) -> Changes:
        """Layers' changes in view ids, as one; the view's version moves on.

        A layer's rows of a namespace the other layer keeps (the ``shared`` edges a local
        file held before team mode, a teammate's ``personal`` ones in the team's database)
        are left out: each namespace is read from the layer its writes go to."""
        merged = Changes(version=0, full=full)
        rows: list[np.ndarray] = []
        uses: list[UseRow] = []
        for layer, changes in enumerate(found):
            if changes is None:
                continue
            self.cursors[layer] = changes.version
            if changes.full:  # every id of the layer comes again, perhaps for other names
                self.nodes.forget(layer)
                self.spaces.forget(layer)
            self.nodes.learn(layer, changes.nodes)
            self.spaces.learn(layer, changes.namespaces)
            merged.nodes += [(self.nodes.to_view[layer][i], name) for i, name in changes.nodes]
            merged.namespaces += [
                (self.spaces.to_view[layer][i], name) for i, name in changes.namespaces
            ]
            spaces = self.spaces.to_view[layer]
            kept = {i for i, view in spaces.items() if self.layer_of(view) == layer}
            table = np.asarray(changes.rows, np.float64).reshape(-1, len(EDGE_COLUMNS))
            mine = np.isin(table[:, _NAMESPACE], list(kept))
            if layer == LOCAL and not mine.all():  # copies the user may want to move
                self._left_out(table[~mine, _NAMESPACE])
            rows.append(self._rows_to_view(layer, table[mine]))
            merged.removed += [2 * i + layer for i in changes.removed]
            columns = changes.uses
            uses += [
                UseRow(
                    namespace=spaces[int(columns.namespace[k])],
                    node=self.nodes.to_view[layer][int(columns.node[k])],
                    uses=int(columns.uses[k]),
                    together=int(columns.together[k]),
                    first=float(columns.first[k]),
                    recent=tuple(t for t in columns.recent[k].tolist() if t > -np.inf),
                )
                for k in range(len(columns))
                if int(columns.namespace[k]) in kept
            ]
            merged.events += [(spaces[ns], n) for ns, n in changes.events if ns in kept]
            merged.recent += [
                RecentEvent(spaces[ns], at, tuple(self.nodes.to_view[layer][n] for n in members))
                for ns, at, members in changes.recent
                if ns in kept
            ]
        merged.rows = np.concatenate(rows) if rows else np.zeros((0, len(EDGE_COLUMNS)))
        merged.uses = UseColumns.of(uses)
        self.version += 1
        merged.version = self.version
        return merged

    def _rows_to_view(self, layer: int, rows: np.ndarray) -> np.ndarray:
        rows = rows.reshape(-1, len(EDGE_COLUMNS)).copy()
        if rows.size:
            spaces, nodes = self.spaces.to_view[layer], self.nodes.to_view[layer]
            rows[:, _ID] = 2 * rows[:, _ID] + layer
            rows[:, _NAMESPACE] = [spaces[int(ns)] for ns in rows[:, _NAMESPACE]]
            rows[:, _A] = [nodes[int(a)] for a in rows[:, _A]]
            rows[:, _B] = [nodes[int(b)] for b in rows[:, _B]]
        return rows

    def would_forget(self, limit: float) -> ForgetCounts:
        """What a repair at ``limit`` would remove from the layers it repairs (the writable
        ones: a read-only layer is repaired by its writers), each layer counting its own."""
        return ForgetCounts.total(
            layer.would_forget(limit) for layer in self.layers if not layer.read_only
        )

    def event_ids_before(self, before: float) -> int:
        """What a sweep at ``before`` would forget of the layers it sweeps (the writable
        ones), each layer counting its own."""
        return sum(layer.event_ids_before(before) for layer in self.layers if not layer.read_only)

    @contextmanager
    def write(self) -> Iterator[WriteTransaction]:
        marks = self._marks()
        tx = _LayeredTransaction(self)
        try:
            yield tx
            tx.commit()
        except BaseException as exc:
            typed = tx.rollback(exc)
            self._forget_since(marks)  # ids learned from layers that rolled back
            if typed is not None:  # the layer's own error for it: retried where transient
                raise typed from typed.__cause__  # as the layer raised it
            raise
        # every layer committed: the view moves on by one if no other writer came between
        written = {layer: part.version for layer, part in tx.parts.items()}
        if all(version == self.cursors[layer] + 1 for layer, version in written.items()):
            for layer, version in written.items():
                self.cursors[layer] = version
            self.version += 1
            tx.version = self.version
        # else: version 0, the store applies the rows; the next poll reads the rest

    def _maps(self) -> list[dict[int, int]]:
        return [m for names in (self.nodes, self.spaces) for m in (*names.to_view, *names.to_layer)]

    def _marks(self) -> list[int]:
        """How many ids each map holds: what a failed write learned is what lies past them."""
        return [len(mapping) for mapping in self._maps()]

    def _forget_since(self, marks: list[int]) -> None:
        for mapping, mark in zip(self._maps(), marks, strict=True):
            while len(mapping) > mark:  # dicts keep insertion order: the newest go first
                mapping.popitem()

    def close(self) -> None:
        for layer in self.layers:
            with contextlib.suppress(Exception):
                layer.close()


class _LayeredTransaction:
    """One write across the layers, each layer's transaction opened when first needed."""

    def __init__(self, storage: LayeredStorage) -> None:
        self._storage = storage
        self._opened: dict[int, AbstractContextManager[WriteTransaction]] = {}
        self.parts: dict[int, WriteTransaction] = {}
        self.version = 0

    def _part(self, layer: int) -> WriteTransaction:
        part = self.parts.get(layer)
        if part is None:
            opened = self._storage.layers[layer].write()
            part = self.parts[layer] = opened.__enter__()
            self._opened[layer] = opened
        return part

    def commit(self) -> None:
        """Commit the layers' transactions, the shared one first: a failure there (a
        conflict, a lost connection) rolls the local one back, so the write can be run
        again whole. A local commit that fails after the shared one committed is reported,
        not retried: the shared part is written."""
        committed: list[int] = []
        try:
            for layer in (SHARED, LOCAL):
                if layer in self._opened:
                    self._opened.pop(layer).__exit__(None, None, None)
                    committed.append(layer)
        except BaseException as exc:
            self.rollback(exc)
            if committed:
                raise StorageUnavailableError(
                    f"the shared layer committed, the local one failed ({exc}): the write is "
                    "in the shared store only"
                ) from exc
            raise

    def rollback(self, exc: BaseException) -> BaseException | None:
        """Roll back every layer's transaction still open; the first error a layer made of
        ``exc`` (a PostgreSQL layer types a deadlock, a lost connection or a lock waited on
        too long: :func:`~synapse_retriever.persistence.postgres.typed_write_errors`), if
        any. A layer that did not raise ``exc`` hands it back as it is."""
        typed: BaseException | None = None
        while self._opened:
            _, opened = self._opened.popitem()
            try:
                opened.__exit__(type(exc), exc, exc.__traceback__)
            except BaseException as raised:
                made_of_it = exc in (raised.__cause__, raised.__context__)
                if raised is not exc and made_of_it and typed is None:
                    typed = raised  # not a layer's own failure to roll back
        return typed

    def _ns(self, view: int) -> tuple[int, WriteTransaction, int]:
        """The layer of namespace ``view``, its transaction, and the namespace's id there."""
        storage = self._storage
        layer = storage.layer_of(view)
        part = self._part(layer)
        found = storage.spaces.to_layer[layer].get(view)
        if found is None:
            name = storage.spaces.names[view]
            found = part.namespace_id(name)
            storage.spaces.learn(layer, [(found, name)])
        return layer, part, found

    def _node_ids(self, layer: int, views: Sequence[int]) -> list[int]:
        storage = self._storage
        known = storage.nodes.to_layer[layer]
        missing = [storage.nodes.names[v] for v in dict.fromkeys(views) if v not in known]
        if missing:
            storage.nodes.learn(layer, zip(self._part(layer).node_ids(missing), missing,
                                           strict=True))  # fmt: skip
        return [known[v] for v in views]

    def _edge_rows(self, layer: int, rows: Iterable[EdgeRow]) -> list[EdgeRow]:
        return edge_rows(self._storage._rows_to_view(layer, rows_array(list(rows))))

    def _to_layer(self, table: EdgeTable) -> tuple[int, EdgeTable]:
        """The rows of ``table`` (one namespace's) in their layer's ids, and that layer."""
        layer, _, ns = self._ns(int(table[0, _NAMESPACE]))
        ends = self._node_ids(layer, table[:, [_A, _B]].astype(np.int64).ravel().tolist())
        local = table.copy()
        local[:, _ID] //= 2
        local[:, _NAMESPACE] = ns
        local[:, [_A, _B]] = np.reshape(ends, (-1, 2))
        return layer, local

    def node_ids(self, names: Sequence[str]) -> list[int]:
        return [self._storage.nodes.view(name) for name in names]

    def namespace_id(self, name: str) -> int:
        return self._storage.spaces.view(name)

    def lock_edges(self, keys: Sequence[EdgeKey]) -> EdgeTable:
        found = [EMPTY_EDGES]
        for positions in self._by_namespace([key.namespace for key in keys]).values():
            layer, part, ns = self._ns(keys[positions[0]].namespace)
            ends = self._node_ids(layer, [n for p in positions for n in (keys[p].a, keys[p].b)])
            local = [EdgeKey(ns, ends[2 * k], ends[2 * k + 1]) for k in range(len(positions))]
            found.append(self._storage._rows_to_view(layer, part.lock_edges(local)))
        return np.concatenate(found)

    def _by_namespace(self, namespaces: Iterable[int]) -> dict[int, list[int]]:
        groups: dict[int, list[int]] = {}
        for position, ns in enumerate(namespaces):
            groups.setdefault(ns, []).append(position)
        return groups

    def _writable(self, layer: int) -> bool:
        return not self._storage.layers[layer].read_only

    def expect(self, edges: int) -> None:
        pass  # the version comes at the commit: every write reads its rows with lock_edges

    def edges_by_id(self, ids: Sequence[int]) -> list[EdgeRow]:
        # a sweep judges what it may delete: a read-only layer's edges are left as they are
        found: list[EdgeRow] = []
        for layer in (LOCAL, SHARED):
            mine = [i // 2 for i in ids if i % 2 == layer]
            if mine and self._writable(layer):
                found += self._edge_rows(layer, self._part(layer).edges_by_id(mine))
        return found

    def insert(self, table: EdgeTable) -> EdgeTable:
        placed = table.copy()
        spaces = table[:, _NAMESPACE].astype(np.int64).tolist()
        for positions in self._by_namespace(spaces).values():
            layer, local = self._to_layer(table[positions])
            new = self._storage._rows_to_view(layer, self._part(layer).insert(local))
            placed[positions, _ID] = new[:, _ID]
        return placed

    def update(self, table: EdgeTable) -> None:
        spaces = table[:, _NAMESPACE].astype(np.int64).tolist()
        for positions in self._by_namespace(spaces).values():
            layer, local = self._to_layer(table[positions])
            self._part(layer).update(local)

    def delete(self, ids: Sequence[int]) -> None:
        for layer in (LOCAL, SHARED):
            mine = [i // 2 for i in ids if i % 2 == layer]
            if mine and self._writable(layer):
                self._part(layer).delete(mine)

    def uses_of(self, keys: Sequence[UseKey]) -> list[UseRow]:
        found: list[UseRow] = []
        nodes = self._storage.nodes
        for positions in self._by_namespace(key.namespace for key in keys).values():
            namespace = keys[positions[0]].namespace
            layer, part, ns = self._ns(namespace)
            ids = self._node_ids(layer, [keys[p].node for p in positions])
            view = nodes.to_view[layer]
            found += [row._replace(namespace=namespace, node=view[row.node])
                      for row in part.uses_of([UseKey(ns, n) for n in ids])]  # fmt: skip
        return found

    def write_uses(self, rows: Sequence[UseRow]) -> None:
        for positions in self._by_namespace(row.namespace for row in rows).values():
            layer, part, ns = self._ns(rows[positions[0]].namespace)
            ids = self._node_ids(layer, [rows[p].node for p in positions])
            part.write_uses([rows[p]._replace(namespace=ns, node=n)
                             for p, n in zip(positions, ids, strict=True)])  # fmt: skip

    def add_events(self, namespace: int, count: int) -> None:
        _, part, ns = self._ns(namespace)
        part.add_events(ns, count)

    def log_recent(self, entries: Sequence[RecentEvent], keep: int) -> None:
        for positions in self._by_namespace(entry.namespace for entry in entries).values():
            layer, part, ns = self._ns(entries[positions[0]].namespace)
            part.log_recent(
                [RecentEvent(ns, entries[p].at, self._node_ids(layer, list(entries[p].nodes)))
                 for p in positions],
                keep,
            )  # fmt: skip

    def changes(self, since: int, max_node: int, max_namespace: int) -> Changes:
        # the store catches up inside a transaction only where its version is known at the
        # start; this one's is 0 until the commit, so this is never needed there
        found = self._storage.poll(since, max_node, max_namespace)
        return found if found is not None else Changes(version=self._storage.version)

    def record_events(self, events: Sequence[EventRecord]) -> list[bool]:
        # each layer records its events' ids, in their order, as separate calls would: an
        # id met in both layers is two events, each written with its edges
        recorded = [False] * len(events)
        placed = [self._ns(event.namespace) for event in events]
        layers, namespaces = [where for where, _, _ in placed], [ns for _, _, ns in placed]
        for layer in (LOCAL, SHARED):
            positions = [p for p, where in enumerate(layers) if where == layer]
            if positions:
                mine = [events[p]._replace(namespace=namespaces[p]) for p in positions]
                done = self._part(layer).record_events(mine)
                for p, fresh in zip(positions, done, strict=True):
                    recorded[p] = fresh
        return recorded

    def forget_event_ids(self, before: float) -> int:
        # a read-only layer is swept by its writers; a layer with no id to forget is left
        # out of the transaction (a shared layer's commit would tell every reader)
        layers = self._storage.layers
        return sum(
            self._part(layer).forget_event_ids(before)
            for layer in (LOCAL, SHARED)
            if self._writable(layer) and layers[layer].event_ids_before(before)
        )

    def forget_after(self, limit: float) -> ForgetCounts:
        return ForgetCounts.total(
            self._part(layer).forget_after(limit)
            for layer in (LOCAL, SHARED)
            if self._writable(layer)  # a read-only layer is repaired by its writers
        )
