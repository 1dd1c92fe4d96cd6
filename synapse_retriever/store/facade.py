"""`SynapseStore`: learn co-activations, forget them, recall them. The public entry point.

The store validates input, runs each write as one transaction on its
:class:`~synapse_retriever.persistence.Storage`, and keeps an in-memory
:class:`~synapse_retriever.mirror.graph.MemoryGraph` current so that recall does no SQL.
A write's stages are :mod:`synapse_retriever.store.write`'s, a rename's
:mod:`synapse_retriever.store.rename`'s: the store holds its lock around them and runs them
again after a transient failure.

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
import logging
import os
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, NoReturn, SupportsFloat, SupportsIndex, TypeVar, cast

import numpy as np
import numpy.typing as npt

from synapse_retriever.capture.coactivation import (
    CoActivation,
    check_unicode,
    coactivation_set,
    validate_node_id,
)
from synapse_retriever.clock import SECONDS_PER_DAY, Clock, finite_real, not_ahead, to_seconds
from synapse_retriever.config import (
    ActrRule,
    SynapseConfig,
    check_flag,
    check_size,
    namespace_list,
    validate_namespace,
)
from synapse_retriever.errors import (
    ClosedError,
    CorruptDatabaseError,
    InvalidTypeError,
    InvalidValueError,
    SynapseError,
    masked,
    shown,
)
from synapse_retriever.mirror.graph import Edge
from synapse_retriever.mirror.mirror import Mirror
from synapse_retriever.mirror.spreading import Activation
from synapse_retriever.mirror.stats import graph_stats
from synapse_retriever.persistence import Storage
from synapse_retriever.persistence.layered import LayeredStorage, shared_namespace_set
from synapse_retriever.persistence.postgres import PostgresStorage, is_postgres_url
from synapse_retriever.persistence.protocols import (
    ReplacedTablesError,
    releasing_while_busy,
    retrying,
)
from synapse_retriever.persistence.rows import ForgetCounts
from synapse_retriever.persistence.sqlite import SQLiteStorage, same_database
from synapse_retriever.recall import actr, published
from synapse_retriever.recall.hits import (
    Hit,
    Plan,
    Resolvable,
    read_ids,
    validated_hits,
)
from synapse_retriever.recall.published import activation_from
from synapse_retriever.store.collector import collector_paused
from synapse_retriever.store.rename import rename_node
from synapse_retriever.store.write import Event, Late, Reinforced, write_events

if TYPE_CHECKING:
    import networkx as nx

_ROW_ERRORS = (ValueError, TypeError, IndexError, KeyError, OverflowError)
"""What loading rows no store writes raises (a weight of text, an edge of a node that is not
there): a file edited by hand, reported as damaged."""

__all__ = ["DecayReport", "RepairReport", "SynapseStore"]

_T = TypeVar("_T")

logger = logging.getLogger("synapse_retriever")


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
        Nothing was deleted: ``pruned`` and ``event_ids`` are what the sweep would delete.
    event_ids : int
        Recorded event ids forgotten, not seen (recorded, or sent again) within
        ``config.operations.event_ids_kept_days`` before ``at`` (0 where that is None).

    Examples
    --------
    >>> store = SynapseStore(":memory:")
    >>> _ = store.reinforce(["a", "b"], at=0)  # w0 0.3, half-life 30 days: pruned at 147 days
    >>> store.decay(at=200 * 86400)
    DecayReport(at=17280000.0, pruned=1, remaining=0, pruned_by_namespace={'personal': 1}, \
dry_run=False, event_ids=0)
    """

    at: float
    pruned: int
    remaining: int
    pruned_by_namespace: dict[str, int] = field(default_factory=dict)
    dry_run: bool = False
    event_ids: int = 0


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


def _without_passwords(error: ValueError) -> ValueError:
    """Pydantic's ``error`` made again with its inputs :func:`~.errors.masked`, or as it is
    where it is not pydantic's or cannot be made again (an error type of its own)."""
    errors, rebuild = (
        getattr(error, "errors", None),
        getattr(type(error), "from_exception_data", None),
    )
    if not callable(errors) or not callable(rebuild):
        return error
    lines = [
        {"type": item["type"], "loc": item["loc"], "input": masked(item.get("input"))}
        | ({"ctx": item["ctx"]} if "ctx" in item else {})
        for item in errors()
    ]
    try:
        made: ValueError = rebuild(getattr(error, "title", ""), lines, hide_input=True)
    except Exception:  # a custom error type pydantic does not know by name
        return error
    return made


def _strongest_first(found: tuple[str, Edge, float]) -> tuple[float, str, str]:
    """The order of :meth:`SynapseStore.neighbours`: weight down, then neighbour, namespace."""
    other, edge, weight = found
    return -weight, other, edge.namespace


def _forget_after(storage: Storage, limit: float) -> ForgetCounts:
    """One attempt at :meth:`SynapseStore.repair`: its transaction."""
    with storage.write() as tx:
        return tx.forget_after(limit)


class SynapseStore:
    """An associative memory of co-used nodes, persisted in SQLite or PostgreSQL.

    Parameters
    ----------
    path : str or PathLike
        SQLite file (created if missing), ``":memory:"``, or a PostgreSQL URL
        (``postgresql://user@host/db``: a team's shared store, with the ``postgres``
        extra; see :class:`~synapse_retriever.persistence.postgres.PostgresStorage`).
    config : SynapseConfig, optional
        The method's constants; ``SynapseConfig()`` (the ACT-R recall rule) by default,
        ``SynapseConfig.published()`` for the method as published.
    storage : Storage, optional
        Another backend instead of SQLite at ``path``.
    read_only : bool
        Open the store read-only: recall and every read work, every write raises
        :class:`~synapse_retriever.errors.ReadOnlyStoreError`. Chosen on its own when the
        file or its folder cannot be written, or the database role may not write.

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
            raise InvalidTypeError(
                f"config must be a SynapseConfig, got {type(config).__name__} {shown(config)}"
            )
        if storage is not None and read_only:
            raise InvalidValueError("read_only applies to the store at path, not a storage")
        self.config = config or SynapseConfig()
        opened = storage is None
        if storage is None:
            storage = _open_storage(path, read_only, self.config)
        self.path = storage.path  # a URL without its password
        self._storage: Storage = storage
        self._lock = threading.RLock()
        self._mirror = Mirror(self.config)
        try:
            self._mirror.open(self._storage)
        except BaseException as exc:
            if opened:
                storage.close()
            if isinstance(exc, SynapseError) or not isinstance(exc, _ROW_ERRORS):
                raise
            raise CorruptDatabaseError(
                f"{self.path!r} holds rows no synapse store writes ({type(exc).__name__}: "
                f"{exc}); nothing was written: restore a backup, or re-create the store from "
                "an export"
            ) from exc
        self._closed = False

    @classmethod
    def layered(
        cls,
        local: str | os.PathLike[str],
        shared: str | os.PathLike[str],
        *,
        config: SynapseConfig | None = None,
        shared_namespaces: Iterable[str] = ("shared",),
        read_only_shared: bool = False,
    ) -> SynapseStore:
        """One store over two backends: the team's namespaces in ``shared`` (a PostgreSQL
        URL, typically), every other one (``personal``, ``branch:*``) in ``local`` (an
        SQLite file).

        Recall merges all of them with the usual weights, from memory; each write goes to
        its namespace's backend (see :mod:`~synapse_retriever.persistence.layered`).

        Raises
        ------
        InvalidValueError
            ``local`` and ``shared`` name one database: a file by any spelling, ``file:``
            URI or link (nothing is opened or made), or one PostgreSQL schema under any URL
            (found once both are open; both are closed again).

        Examples
        --------
        >>> store = SynapseStore.layered(local=":memory:", shared=":memory:")
        >>> _ = store.reinforce(["auth/jwt.py", "config/keys.py"], namespace="shared", at=0)
        >>> _ = store.reinforce(["auth/jwt.py", "notes/todo.md"], at=0)  # personal: local
        >>> [h.id for h in store.recall([("auth/jwt.py", 0.9), ("x", 0.5), ("y", 0.4)], at=0)]
        ['auth/jwt.py', 'notes/todo.md', 'config/keys.py']
        >>> store.close()
        """
        config = config or SynapseConfig()
        namespaces = shared_namespace_set(shared_namespaces)  # checked before a file is made
        if same_database(local, shared):  # one database's two writes would wait for each other
            raise InvalidValueError(
                f"local and shared name one database ({os.fspath(shared)!r}): a layered store "
                "keeps its layers in two (a local file and the team's database)"
            )
        # the shared one first: a server that does not answer leaves no new local file behind
        second = _open_storage(shared, read_only_shared, config)
        first: Storage | None = None
        try:
            first = _open_storage(local, False, config)
            if _one_database(first, second):  # one server's database under two URLs
                raise InvalidValueError(
                    f"local and shared name one database ({os.fspath(shared)!r}): a layered "
                    "store keeps its layers in two (a local file and the team's database)"
                )
            return cls(
                config=config, storage=LayeredStorage(first, second, shared_namespaces=namespaces)
            )
        except BaseException:
            for opened in (first, second):
                if opened is not None:
                    opened.close()
            raise

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
                f"store must be a SynapseStore or a path, got {type(store).__name__} {shown(store)}"
            )
        return cls(store, config=config)

    @classmethod
    def check_field(
        cls, store: object, config: SynapseConfig | None = None
    ) -> SynapseStore | str | os.PathLike[str]:
        """What an adapter's ``store`` field may hold, checked without opening a path (the
        adapter opens it with :meth:`coerce` once every other field passed): a store, whose
        config must be ``config`` where one is given, or a path; anything else is an
        :class:`InvalidValueError` (a ``ValueError``: pydantic reports it on the field).

        Examples
        --------
        >>> SynapseStore.check_field("never-created.db"), os.path.exists("never-created.db")
        ('never-created.db', False)
        >>> SynapseStore.check_field(3)
        Traceback (most recent call last):
        ...
        synapse_retriever.errors.InvalidValueError: store must be a SynapseStore or a path, \
got int 3
        """
        if isinstance(store, SynapseStore):
            return cls.coerce(store, config)
        if not isinstance(store, (str, os.PathLike)):
            raise InvalidValueError(
                f"store must be a SynapseStore or a path, got {type(store).__name__} {shown(store)}"
            )
        return store

    @staticmethod
    def validated(init: Callable[[], object]) -> None:
        """Run an adapter's pydantic validation ``init``; the library's own error that pydantic
        wrapped in a ``ValidationError`` when the adapter's model validator raised it, opening
        the adapter's store, is raised as :class:`SynapseStore` raises it: typed, without
        pydantic's echo of the input (a PostgreSQL URL's password), and without the
        ``ValidationError`` as its ``__context__`` (it is raised once that is handled). A
        field's error, and any other, goes on as pydantic made it, but for the input its
        ``errors()`` and ``json()`` hold: a URL's password is left out (:func:`~.errors.masked`).

        Examples
        --------
        >>> from pydantic import BaseModel, model_validator
        >>> class Adapter(BaseModel):
        ...     store: str
        ...     @model_validator(mode="after")
        ...     def _open(self):
        ...         SynapseStore(self.store)
        ...         return self
        >>> SynapseStore.validated(lambda: Adapter(store="."))
        Traceback (most recent call last):
        ...
        synapse_retriever.errors.InvalidValueError: a store's path must name a file, not a \
folder: got '.'
        """
        found: Exception | None = None
        try:
            init()
        except ValueError as error:  # pydantic's ValidationError is one
            errors = getattr(error, "errors", None)
            for item in errors() if callable(errors) else ():
                cause = item.get("ctx", {}).get("error")
                if item.get("loc") == () and isinstance(cause, SynapseError):
                    found = cause
            found = found or _without_passwords(error)
            if found is error:
                raise
        if found is not None:  # raised here: the error pydantic made is no __context__
            raise found

    # -- lifecycle ---------------------------------------------------------------------

    @property
    def read_only(self) -> bool:
        """Whether every write raises :class:`~synapse_retriever.errors.ReadOnlyStoreError`:
        the store was opened read-only, or its file, folder or database role cannot be
        written (a layered store is writable where its local layer is).

        Examples
        --------
        >>> SynapseStore(":memory:").read_only
        False
        """
        return self._storage.read_only

    def close(self) -> None:
        """Close the database; further calls raise :class:`~synapse_retriever.errors.ClosedError`.

        ``with SynapseStore(path) as store:`` closes it on leaving the block. A store of
        100,000 edges or more first writes a snapshot of its in-memory graph into the
        database, when the stored one is missing or 1,000 versions old, so that the next
        open reads it instead of every row (see :mod:`~synapse_retriever.mirror.snapshot`;
        skipped, never waited for, while another process holds the write lock).

        Examples
        --------
        >>> store = SynapseStore(":memory:")
        >>> store.close()
        >>> store.weight("a", "b")
        Traceback (most recent call last):
        ...
        synapse_retriever.errors.ClosedError: SynapseStore(':memory:') is closed
        """
        with self._lock:
            if not self._closed:
                self._closed = True
                try:
                    self._mirror.save(self._storage)  # a large store opens fast next time
                except Exception as exc:  # a close never fails on the snapshot (a full disk)
                    logger.warning("%r: no snapshot of the mirror was written: %s", self, exc)
                finally:
                    self._storage.close()

    def __enter__(self) -> SynapseStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"SynapseStore({self.path!r})"

    def __reduce_ex__(self, protocol: SupportsIndex) -> NoReturn:
        """Refused: a store holds an open database connection, its lock and its in-memory
        graph, which neither a pickle nor a copy can carry (a copy shared the connection,
        and closing either closed both). Open the store again from its path or URL.

        >>> import copy
        >>> copy.deepcopy(SynapseStore(":memory:"))
        Traceback (most recent call last):
        ...
        synapse_retriever.errors.InvalidTypeError: cannot pickle or copy SynapseStore(':memory:'): \
it holds an open database; open the store again from its path or URL in each process
        """
        raise InvalidTypeError(
            f"cannot pickle or copy {self!r}: it holds an open database; open the store again "
            "from its path or URL in each process"
        )

    # -- learning ----------------------------------------------------------------------

    def reinforce(
        self,
        nodes: Iterable[str],
        strength: float = 1.0,
        namespace: str = "personal",
        at: Clock = None,
        *,
        event_id: str | None = None,
        late: Late = "skew",
    ) -> int:
        """Reinforce every pair of ``nodes`` as one co-activation event (one transaction).

        Parameters
        ----------
        nodes : iterable of str
            Ids used together; duplicates are dropped, order kept; only the first
            ``config.learning.max_coactivation`` distinct ids are used (with a warning).
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
        late : {"skew", "raise", "clamp"}
            What an explicit ``at`` earlier than the last reinforcement of one of its
            edges does (another writer came first: events of several writers arrive out
            of order). ``"skew"``, the default: moved forward to that reinforcement, as if
            observed then, and counted, when at most ``config.operations.max_clock_skew_s`` earlier;
            refused when earlier still. ``"raise"``: refused however little earlier.
            ``"clamp"``: moved forward however much earlier (a replay of a history out of
            date order).

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
            Bad ids, strength, namespace, time or ``late``, or an explicit ``at`` earlier
            than an edge's last reinforcement by more than ``late`` allows. Nothing is
            written.

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
        >>> store.reinforce(["a", "b"], at=86400 - 5)  # another writer came 5 s first
        1
        >>> store.edge("a", "b").last_reinforced_at  # counted, at that writer's time
        86400.0
        """
        checked = _late(late)
        event = self._event(nodes, strength, namespace, at, event_id)
        if event.delta == 0.0 or not event.ids:  # nothing to learn: no write, no new version
            return 0
        return self._write([event], checked)[0].edges

    def reinforce_many(
        self,
        events: Iterable[CoActivation | Iterable[str]],
        *,
        late: Late = "skew",
    ) -> list[Reinforced]:
        """Reinforce many co-activation events in one transaction, each as its own event.

        Each event is learned exactly as :meth:`reinforce` learns it, in the given order
        (its pairs, uses, event count and ``event_id``; an id recorded before, or earlier
        in the batch, is a replay), but all are written at once: a thousand events cost
        about one event's transaction plus their upserts. All or nothing: a bad event
        writes none of them.

        Parameters
        ----------
        events : iterable of CoActivation, or of lists of ids
            A plain list of ids is ``CoActivation(ids)``: strength 1, ``personal``, now.
        late : {"skew", "raise", "clamp"}
            What an explicit time earlier than one of its edges' last reinforcement does,
            as in :meth:`reinforce`: move that event forward to it, as if observed then,
            when at most ``config.operations.max_clock_skew_s`` earlier (``"skew"``, the default),
            however much earlier (``"clamp"``: a replay of a history out of date order),
            or never (``"raise"``); an event refused refuses the batch.

        Returns
        -------
        list of Reinforced
            Per event: edges written, the time written at, whether it was a replay.

        Raises
        ------
        InvalidTypeError, InvalidValueError
            A bad event, named by its position; nothing is written.

        Notes
        -----
        On an SQLite file, a batch of more than 10,000 pairs copies its pages from the
        write-ahead log into the file (a checkpoint) in a thread of its own once it has
        committed, while the call updates the in-memory graph and returns; the store's next
        write runs that copy first if the thread has not, and its close waits for it. A
        process killed meanwhile loses nothing committed: SQLite copies the log at the next
        open.

        Examples
        --------
        >>> store = SynapseStore(":memory:")
        >>> done = store.reinforce_many([
        ...     CoActivation(["a", "b", "c"], at=0, event_id="commit:1"),
        ...     CoActivation(["a", "b"], at=86400),
        ...     CoActivation(["a", "b", "c"], at=0, event_id="commit:1"),  # a replay
        ... ])
        >>> [(r.edges, r.replayed) for r in done]
        [(3, False), (1, False), (0, True)]
        >>> edge = store.edge("a", "b")  # as two reinforce() calls leave it
        >>> edge.activation_count, round(edge.weight, 3), round(edge.half_life_days, 2)
        (2, 0.593, 21.25)
        """
        late = _late(late)
        if isinstance(events, (str, bytes, CoActivation)):
            raise InvalidTypeError(
                f"events must be an iterable of events, got a bare {type(events).__name__}"
            )
        try:
            listed = iter(events)
        except TypeError:
            raise InvalidTypeError(
                f"events must be an iterable of events, got {type(events).__name__} {shown(events)}"
            ) from None
        checked = []
        for position, event in enumerate(listed):
            try:
                if isinstance(event, CoActivation):
                    checked.append(
                        self._event(
                            event.nodes, event.strength, event.namespace, event.at, event.event_id
                        )
                    )
                else:
                    checked.append(self._event(event, 1.0, "personal", None, None))
            except (InvalidTypeError, InvalidValueError) as exc:
                raise type(exc)(f"event {position}: {exc}") from None
        # as reinforce(): strength 0, or no node, is a no-op
        written = [e for e in checked if e.delta > 0.0 and e.ids]
        done = iter(self._write(written, late) if written else [])
        now = time.time()
        return [
            next(done)
            if e.delta > 0.0 and e.ids
            else Reinforced(0, now if e.explicit is None else e.explicit)
            for e in checked
        ]

    def _event(
        self, nodes: Iterable[str], strength: float, namespace: str, at: Clock, event_id: object
    ) -> Event:
        """One event, validated; nothing is written."""
        ns = validate_namespace(namespace)
        delta = self.config.learning.learning_rate * _clamped_strength(
            strength, self.config.learning.max_strength
        )
        explicit = self._written_time(at)
        ids = coactivation_set(nodes, limit=self.config.learning.max_coactivation)
        return Event(ids, ns, explicit, _event_id(event_id), delta)

    def use(self, nodes: Iterable[str], namespace: str = "personal", at: Clock = None) -> None:
        """Record that ``nodes`` were used at ``at`` (one event), without reinforcing edges.

        Feeds the base-level activation of the ``actr`` rule: a single node used alone is
        a use, not a co-activation; several nodes count as one co-activation event (the N
        of the log-lift) without an edge between them. :meth:`reinforce` records its own
        uses; both are stored in the same transaction as the rest of the event.

        Examples
        --------
        A use raises a node's base level; by default that orders the nodes associated
        with the query, and a node used with none of the hits is never injected:

        >>> store = SynapseStore(":memory:")
        >>> store.use(["README.md"], at=0)
        >>> [h.id for h in store.recall([("a", 0.9), ("b", 0.5)], at=86400)]
        ['a', 'b']

        The recency prior lets it in on its base level alone:

        >>> prior = SynapseStore(":memory:", config=SynapseConfig.recency())
        >>> prior.use(["README.md"], at=0)
        >>> [h.id for h in prior.recall([("a", 0.9), ("b", 0.5)], at=86400)]
        ['a', 'README.md']
        """
        ns = validate_namespace(namespace)
        ids = coactivation_set(nodes, limit=self.config.learning.max_coactivation)
        explicit = self._written_time(at)
        if ids:  # no node: nothing to record, no new version for every reader to fetch
            self._write([Event(ids, ns, explicit, None, 0.0)], "skew")

    def _written_time(self, at: Clock) -> float | None:
        """An explicit write time in seconds (None: the clock, read inside the write),
        refused when more than ``config.operations.max_clock_skew_s`` ahead of the clock."""
        if at is None:
            return None
        return not_ahead(to_seconds(at), skew_s=self.config.operations.max_clock_skew_s)

    def _write(self, events: list[Event], late: Late) -> list[Reinforced]:
        """Write ``events`` in one transaction, run again while the backend reports a
        conflict with another writer or a connection lost before the commit."""

        def attempt() -> list[Reinforced]:
            self._check_open()
            return self._retrying(
                lambda: write_events(self._storage, self._mirror, self.config, events, late)
            )

        return self._locked_write(attempt)

    def _retrying(self, attempt: Callable[[], _T]) -> _T:
        """``attempt()`` under :func:`~synapse_retriever.persistence.protocols.retrying`,
        at most ``config.operations.write_retries`` times again; after tables replaced under
        the store (:class:`~synapse_retriever.persistence.protocols.ReplacedTablesError`),
        with the mirror read from them whole first."""

        def refreshed() -> _T:
            try:
                return attempt()
            except ReplacedTablesError:  # read them whole, and once more, whatever the budget
                self._mirror.refresh(self._storage, force=True)
                return attempt()

        return retrying(refreshed, self.config.operations.write_retries, repr(self))

    def _locked_write(self, attempt: Callable[[], _T]) -> _T:
        """``attempt()`` (a write, reading what it writes from under the lock) under the
        store's lock, released while the write waits for another process's write lock:
        reads go on meanwhile, and ``attempt`` runs again whole once the lock is free
        (:func:`~synapse_retriever.persistence.protocols.releasing_while_busy`)."""
        return releasing_while_busy(self._lock, attempt)

    def rename(
        self,
        old: str,
        new: str,
        namespaces: str | Iterable[str] | None = None,
        *,
        event_id: str | None = None,
    ) -> int:
        """Move node ``old`` to the id ``new``, as a renamed file moves: its edges and its
        uses go with it, unchanged (weights, counts, learned half-lives, times), in one
        transaction per backend. Returns the edges moved (0 for a node never learned).

        Parameters
        ----------
        namespaces : str or iterable of str, optional
            Only there (a file moved on a branch moves in that branch's namespace); None
            for every namespace ``old`` was learned in.
        event_id : str, optional
            The rename's id, recorded in its transaction, in ``namespaces`` (one namespace):
            a rename whose id was recorded before moves nothing, as a replayed event writes
            nothing (a history replayed again must not move a later node of the old name).
            A rename refused as a merge records its id too: met again, it moves nothing.

        Raises
        ------
        InvalidValueError
            A bad id or namespace, ``old == new``, ``event_id`` without exactly one
            namespace, or ``new`` already has edges or uses in one of those namespaces (a
            rename does not merge two nodes: ``MergeRefusedError``, a subclass); nothing
            is moved, and nothing written but a given ``event_id``.

        Notes
        -----
        Concurrent writers (PostgreSQL) may write ``old`` or ``new`` at the same moment: the
        rename first reads every commit, then locks both nodes' use rows (every event that
        uses a node writes its row, so the lock orders the rename with every such write),
        and starts again if a write slipped in between. A layered store renames in each
        layer, the shared one first. The recent-events log keeps ``old``: the moved node is
        a candidate of the default rule again once it is used.

        Examples
        --------
        >>> store = SynapseStore(":memory:")
        >>> _ = store.reinforce(["pkg/jwt.py", "keys.py"], at=0)
        >>> store.rename("pkg/jwt.py", "lib/jwt.py")
        1
        >>> store.edge("lib/jwt.py", "keys.py").activation_count
        1
        >>> store.edge("pkg/jwt.py", "keys.py") is None
        True

        With an ``event_id``, the same rename met again moves nothing:

        >>> _ = store.reinforce(["lib/jwt.py", "login.py"], namespace="shared", at=0)
        >>> store.rename("lib/jwt.py", "auth.py", "shared", event_id="git:1f2e#0")
        1
        >>> _ = store.reinforce(["lib/jwt.py", "admin.py"], namespace="shared", at=0)  # another
        >>> store.rename("lib/jwt.py", "auth.py", "shared", event_id="git:1f2e#0")
        0
        """
        old, new = validate_node_id(old), validate_node_id(new)
        if old == new:
            raise InvalidValueError(f"a node cannot be renamed to itself: {old!r}")
        names = namespace_list(namespaces)
        only = None if names is None else set(names)
        event = _event_id(event_id)
        if event is not None and (names is None or len(set(names)) != 1):
            raise InvalidValueError(
                f"rename(event_id={event!r}) records the rename in one namespace: name it "
                f"(namespaces={namespaces!r})"
            )

        def attempt() -> int:
            self._check_open()
            self._mirror.refresh(self._storage, force=True)  # a node learned a moment ago
            if event is None and old not in self._mirror.graph.index:  # nothing to move: no
                return 0  # transaction (an editor's save through a temporary file is a rename)
            return self._retrying(
                lambda: rename_node(self._storage, self._mirror, old, new, only, event)
            )

        return self._locked_write(attempt)

    def decay(self, at: Clock = None, *, dry_run: bool = False, force: bool = False) -> DecayReport:
        """Delete the edges that have decayed below the prune threshold at ``at``.

        Weights and timestamps are never rewritten (decay is applied lazily at every
        read), so sweeps are idempotent and compose. Where
        ``config.operations.event_ids_kept_days`` is set, the sweep also forgets the event
        ids not seen (recorded, or sent again) within that many days before ``at``, in the
        same transaction (see :class:`~synapse_retriever.config.Operations`).

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
        check_flag("dry_run", dry_run)
        check_flag("force", force)
        kept = self.config.operations.event_ids_kept_days
        before = None if kept is None else now - kept * SECONDS_PER_DAY

        def attempt() -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int64], list[str], int]:
            self._check_open()
            forgotten = 0
            if dry_run or (now > time.time() and not force):
                self._refresh()
                graph = self._mirror.graph
                ids = graph.live_ids()
                pruned = ids[~graph.live(ids, now)]
                if not dry_run:
                    live_now = int(np.count_nonzero(graph.live(pruned, time.time())))
                    raise InvalidValueError(
                        f"decay at={now} is {(now - time.time()) / SECONDS_PER_DAY:.1f} days "
                        f"after now: it would delete {live_now} edges that are live now; pass "
                        "force=True (synapse-retriever decay --force) to sweep anyway, or "
                        "dry_run=True (--dry-run) to see what it would prune"
                    )
                if before is not None:
                    forgotten = self._storage.event_ids_before(before)
            else:
                ids, pruned, forgotten = self._retrying(lambda: self._sweep(now, before))
                graph = self._mirror.graph
            spaces = [graph.ns_names[int(ns)] for ns in graph.namespaces_of(pruned)]
            return ids, pruned, spaces, forgotten

        ids, pruned, namespaces, forgotten = self._locked_write(attempt)
        by_namespace = Counter(namespaces)
        return DecayReport(
            now,
            int(pruned.size),
            int(ids.size - (0 if dry_run else pruned.size)),
            dict(sorted(by_namespace.items())),
            dry_run,
            forgotten,
        )

    def _sweep(
        self, now: float, before: float | None
    ) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int64], int]:
        """One attempt at a sweep at ``now``: the live ids before it, those deleted, and the
        event ids forgotten (those last seen before ``before``; none where it is None)."""
        mirror = self._mirror
        with contextlib.ExitStack() as paused:
            with self._storage.write() as tx:
                if self.config.operations.pause_collector and tx.version:  # see collector
                    paused.enter_context(collector_paused())
                # event ids first, in id order: as every writer locks them, before edges
                forgotten = 0 if before is None else tx.forget_event_ids(before)
                mirror.catch_up(tx)
                graph = mirror.graph  # after the catch-up: a full reload replaces it
                ids = graph.live_ids()
                pruned = ids[~graph.live(ids, now)]
                if not tx.version:  # other writers run concurrently: judge their current rows
                    current = tx.edges_by_id(pruned.tolist())
                    graph.apply(current)  # committed states, read under lock
                    still = np.asarray([row.id for row in current], np.int64)
                    pruned = still[~graph.live(still, now)]
                tx.delete(pruned.tolist())
            mirror.committed(tx.version, lambda _: graph.remove(pruned.tolist()))
        return ids, pruned, forgotten

    def repair(self, *, dry_run: bool = False) -> RepairReport:
        """Remove what was written ahead of the clock, from a store that accepted it.

        Times more than ``config.operations.max_clock_skew_s`` ahead are refused on every write
        today; a store written before that rule (or by an older release) may hold them:
        a millisecond time read as seconds lies some 50,000 years ahead, so its edge
        never decays and every later write is placed after it. This deletes, in one
        transaction: every edge created or reinforced ahead of the clock, the future
        times of node uses (a node left with none loses its use row), the future entries
        of the recent-events log, and the ids of events recorded ahead of the clock (so
        that a replay with corrected times is learned). Every process reloads the store,
        unless nothing was found.
        A dry run changes nothing: the storage counts what would go
        (:meth:`~synapse_retriever.persistence.protocols.Storage.would_forget`). SQLite
        runs the repair in a transaction rolled back, on a private copy of the file in
        memory where it is open read-only; PostgreSQL counts with read-only queries, so a
        role that may only read can dry-run too.

        Examples
        --------
        >>> import time
        >>> store = SynapseStore(":memory:")
        >>> _ = store.reinforce(["a", "b"], at=0)
        >>> store.config = SynapseConfig.actr(max_clock_skew_s=1e15)  # as older releases did
        >>> _ = store.reinforce(["a", "c"], at=time.time() * 1000)  # milliseconds
        >>> store.config = SynapseConfig()
        >>> store.repair()
        RepairReport(edges=1, uses=2, events=1, dry_run=False)
        >>> [other for other, _, _ in store.neighbours("a", at=0)]
        ['b']
        """
        check_flag("dry_run", dry_run)
        limit = time.time() + self.config.operations.max_clock_skew_s
        storage = self._storage

        def attempt() -> RepairReport:
            self._check_open()
            if dry_run:  # the storage counts, writing nothing, read-only or not
                return RepairReport(*self._retrying(lambda: storage.would_forget(limit)), True)
            counts = self._retrying(lambda: _forget_after(storage, limit))
            if any(counts):  # nothing found ahead of the clock: nothing to reload
                self._mirror.load(storage)  # everything again, as every process does
                # ... and so would the next open: the stored snapshot is older than the
                # change logs now reach, so closing writes a new one (not 1,000 versions on)
                self._mirror.snapshot_version = None
            return RepairReport(*counts, dry_run=False)

        return self._locked_write(attempt)

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
            return self._mirror.graph.edge(ns, a, b)

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
            found = self._mirror.graph.neighbours(node, now, ns)
        return sorted(found, key=_strongest_first)

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
        default); see :func:`~synapse_retriever.mirror.spreading.spread`.

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
        ids = read_ids(seeds, "seeds")  # an id no store could hold reaches nothing
        now = to_seconds(at)
        validate_namespace(active_namespace)
        report_min = finite_real(report_min, "report_min", "a number")
        shown = read_ids(report, "report")
        with self._lock:
            self._refresh()
            return activation_from(
                self._mirror.graph,
                ids,
                now,
                active_namespace,
                report_min=float(report_min),
                report=shown,
            )

    def activate(
        self, seeds: Iterable[str], at: Clock = None, active_namespace: str = "personal"
    ) -> dict[str, float]:
        """Energy of every node reached from ``seeds`` (hub factor applied), seeds excluded.

        See :func:`~synapse_retriever.mirror.spreading.spread_activation` for the formula.

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
    ) -> Plan:
        """Validate ``hits`` and compute what may displace them under ``config.rule``.

        Under ``actr`` (the default): the activation of the hits and their candidates;
        under ``published``: spreading activation from the first ``config.recall.seeds`` ids.
        The returned plan lists the candidate ids to resolve, then injects; use it
        where resolving ids is async. :meth:`recall` is ``plan(...).inject(...)`` over
        the distinct ids.

        ``hits`` are taken and refused as :meth:`recall` says (any iterable of pairs, real
        scores, best first), with one difference: a repeated id stays at each of its
        places. Callers that map the result back to their own objects by position (the
        adapters, through :func:`~synapse_retriever.recall.items.plan_items`) need every input
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
        return self._plan(validated_hits(hits), at, active_namespace)

    def _plan(self, rows: list[tuple[str, float]], at: Clock, active_namespace: str) -> Plan:
        """:meth:`plan` for hits already validated: the rule's own plan, read under the lock."""
        self._check_open()
        now, active = to_seconds(at), validate_namespace(active_namespace)
        with self._lock:
            self._refresh()
            mirror, rule, enabled = self._mirror, self.config.recall, self.config.injection_enabled
            if isinstance(rule, ActrRule):
                return actr.plan(
                    rows, mirror.graph, mirror.uses, rule, now, active, enabled=enabled
                )
            return published.plan(rows, mirror.graph, rule, now, active, enabled=enabled)

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
            Anything else (a number, say) is refused.
        cost : callable, optional
            ``id -> cost`` (e.g. tokens): an injection may not raise the total. A cost
            that is not a finite number of at least 0 (NaN, None) is refused by name.

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

        See :func:`~synapse_retriever.recall.actr.swap` for the default rule and
        :func:`~synapse_retriever.recall.published.inject` for the published one.

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
        rows = validated_hits(hits, distinct=True)
        checked = cast("Callable[[str], float] | None", cost)  # each rule checks it
        return self._plan(rows, at, active_namespace).inject(resolvable, checked)

    def graph(
        self, at: Clock = None, namespaces: str | Iterable[str] | None = None
    ) -> nx.Graph[str] | nx.MultiGraph[str]:
        """The live graph as networkx, with decayed weights, built on demand.

        One namespace (a str) gives an ``nx.Graph``; several, or None for all, an
        ``nx.MultiGraph`` keyed by namespace. Edge attributes: ``weight`` (decayed),
        ``stored_weight``, ``count``, ``half_life_days``, ``namespace``, ``created_at``,
        ``last_reinforced_at``. Pruned edges are left out. ``at`` decays what is stored now
        to that time; it is no view of the past: an edge learned or reinforced after ``at``
        is read at its stored weight (a store keeps each edge's latest state only).

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
        now = to_seconds(at)
        single = isinstance(namespaces, str)
        chosen = namespace_list(namespaces)
        with self._lock:
            self._refresh()
            return self._mirror.graph.to_networkx(now, chosen, single=single)

    def stats(
        self,
        at: Clock = None,
        namespace: str | None = None,
        *,
        name: str | None = None,
    ) -> dict[str, Any]:
        """Nodes, live edges per namespace, and weight and half-life histograms at ``at``:
        what ``synapse-retriever stats --json`` prints (the same code).

        The report counts the edges :meth:`graph` would hold, from copies of the in-memory
        graph's columns: the store's lock is held only to copy them (16 to 27 ms measured
        at a million edges), never while the report is made.

        Parameters
        ----------
        at : datetime, float or None
            When to decay the weights to (None: now).
        namespace : str, optional
            One namespace (default: all).
        name : str, optional
            The ``store`` label of the report (default: the store's path, a PostgreSQL
            URL without its password).

        Returns
        -------
        dict
            ``store``, ``at`` (ISO 8601), ``nodes``, ``edges``, ``namespaces`` (per
            namespace: ``nodes``, ``edges``, ``mean_weight``, ``median_half_life_days``),
            ``weight_histogram`` and ``half_life_histogram_days`` (lists of
            ``{"bin": label, "edges": count}``); see :mod:`synapse_retriever.mirror.stats`.

        Examples
        --------
        >>> store = SynapseStore(":memory:")
        >>> _ = store.reinforce(["a", "b", "c"], namespace="shared", at=0)
        >>> report = store.stats(at=0)
        >>> report["nodes"], report["edges"], report["namespaces"]["shared"]["edges"]
        (3, 3, 3)
        >>> report["weight_histogram"][3]
        {'bin': '0.3 – 0.4', 'edges': 3}
        """
        now = to_seconds(at)
        if namespace is not None:
            validate_namespace(namespace)
        with self._lock:  # only to copy the columns: the report is made after
            self._refresh()
            graph = self._mirror.graph
            edges, namespaces = graph.columns(namespace), dict(graph.ns_names)
            learning = graph.config.learning
        name = self.path if name is None else name
        return graph_stats(edges, now, name, namespaces=namespaces, learning=learning)

    # -- keeping the in-memory graph current -------------------------------------------

    def _check_open(self) -> None:
        if self._closed:
            raise ClosedError(f"{self!r} is closed")

    def _refresh(self) -> None:
        """Apply other processes' writes, checking at most once per refresh interval."""
        self._check_open()
        self._mirror.refresh(self._storage)


def _open_storage(path: str | os.PathLike[str], read_only: bool, config: SynapseConfig) -> Storage:
    """The backend ``path`` names: PostgreSQL for a ``postgresql://`` URL, else SQLite."""
    if is_postgres_url(path):
        return PostgresStorage(
            str(path), read_only=read_only, timeout_s=config.operations.busy_timeout_s
        )
    return SQLiteStorage(path, busy_timeout_s=config.operations.busy_timeout_s, read_only=read_only)


def _one_database(a: Storage, b: Storage) -> bool:
    """Whether two opened PostgreSQL storages are one schema of one database on one server
    (the URLs may differ: ``localhost`` and ``127.0.0.1``, ``postgres://``, a pooler)."""
    if not (isinstance(a, PostgresStorage) and isinstance(b, PostgresStorage)):
        return False
    where = a.database()
    return where is not None and where == b.database()


def _late(late: object) -> Late:
    if late == "skew" or late == "raise" or late == "clamp":
        return late
    refused = InvalidValueError if isinstance(late, str) else InvalidTypeError
    raise refused(f"late must be 'skew', 'raise' or 'clamp', got {shown(late)}")


def _event_id(event_id: object) -> str | None:
    """``event_id`` if it is None or a usable id: as a node id, a non-empty str of valid
    Unicode without NUL, at most ``MAX_NAME_BYTES`` bytes of UTF-8 (on every backend)."""
    if event_id is None:
        return None
    if isinstance(event_id, str) and event_id:
        check_size("event_id", event_id)
        if "\x00" not in event_id:
            return check_unicode("event_id", event_id)
    refused = InvalidValueError if isinstance(event_id, str) else InvalidTypeError
    raise refused(f"event_id must be a non-empty str without NUL, or None, got {shown(event_id)}")


def _clamped_strength(strength: object, maximum: float) -> float:
    return min(max(finite_real(strength, "strength", "a number"), 0.0), maximum)
