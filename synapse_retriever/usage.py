"""Base-level activation: how recently and how often each node was used (ACT-R).

A node's base-level activation at time t, from the times t_j of its uses::

    B = ln Σ_j (t − t_j)^(−d)        ages in days, at least one second; d = 0.5

:class:`UsageLog` keeps, per namespace and node, the use count, the first use and the
last ``history`` use times; older uses are taken as spread evenly between the first
use and the oldest kept one (Petrov's hybrid approximation), so memory per node is
bounded and B is exact while a node has at most ``history`` uses.

Examples
--------
One use 1 day ago and one 4 days ago: B = ln(1^−0.5 + 4^−0.5) = ln 1.5.

>>> round(base_level([0.0, 3 * 86400.0], 4 * 86400.0), 4)
0.4055
"""

from __future__ import annotations

import bisect
import math
from collections import deque
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from synapse_retriever.clock import SECONDS_PER_DAY

__all__ = ["NodeUse", "UsageLog", "base_level", "older_uses"]

MIN_AGE_DAYS = 1.0 / SECONDS_PER_DAY
"""A use less than a second old counts as one second old."""


def base_level(times: Iterable[float], now: float, decay: float = 0.5) -> float:
    """ACT-R base-level activation ln Σ (now − t_j)^(−decay), ages in days; −inf if unused.

    Uses after ``now`` are ignored.

    Examples
    --------
    >>> base_level([], 0.0)
    -inf
    >>> base_level([0.0], 86400.0)  # one use one day ago: ln 1
    0.0
    """
    total = sum(max((now - t) / SECONDS_PER_DAY, MIN_AGE_DAYS) ** -decay for t in times if t <= now)
    return math.log(total) if total > 0.0 else -math.inf


def older_uses(count: int, oldest_kept: float, first: float, decay: float = 0.5) -> float:
    """Σ age^(−decay) of ``count`` uses spread evenly between two ages (in days).

    Notes
    -----
    Petrov (2006): with t_k the age of the oldest use kept exactly and L the age of
    the first use, ``count`` uses evenly spread over [t_k, L] contribute::

        count × (L^(1−d) − t_k^(1−d)) / ((1 − d) × (L − t_k))

    and ``count × t_k^(−d)`` when L = t_k.

    Examples
    --------
    Two uses spread between 1 and 9 days old: 2 × (9^0.5 − 1^0.5) / (0.5 × 8) = 1.0.

    >>> older_uses(2, 1.0, 9.0)
    1.0
    """
    if count <= 0:
        return 0.0
    low, high = max(oldest_kept, MIN_AGE_DAYS), max(first, oldest_kept, MIN_AGE_DAYS)
    if high - low < 1e-12:
        return float(count * low**-decay)
    spread = (high ** (1 - decay) - low ** (1 - decay)) / ((1 - decay) * (high - low))
    return float(count * spread)


@dataclass
class NodeUse:
    """Uses of one node in one namespace: count, first use, the latest use times, and how
    many of the uses were co-activations (events of two nodes or more)."""

    count: int = 0
    first: float = math.inf
    recent: list[float] = field(default_factory=list)  # ascending, at most ``history``
    together: int = 0

    def add(self, at: float, history: int, together: bool = False) -> None:
        self.count += 1
        self.together += together
        self.first = min(self.first, at)
        bisect.insort(self.recent, at)
        if len(self.recent) > history:
            del self.recent[0]

    def strength(self, now: float, decay: float) -> float:
        """Σ_j (now − t_j)^(−decay) over every use (older ones approximated)."""
        kept = [t for t in self.recent if t <= now]
        total = 0.0
        for t in kept:
            total += max((now - t) / SECONDS_PER_DAY, MIN_AGE_DAYS) ** -decay
        older = self.count - len(self.recent)
        if older > 0 and kept:
            total += older_uses(
                older,
                (now - kept[0]) / SECONDS_PER_DAY,
                (now - self.first) / SECONDS_PER_DAY,
                decay,
            )
        return total


class UsageLog:
    """Per-namespace use history of nodes, in memory: counts, latest uses, recent events.

    Parameters
    ----------
    history : int
        Use times kept exactly per node (older uses are approximated).
    window : int
        Events remembered per namespace for :meth:`recent_nodes`.

    Examples
    --------
    >>> log = UsageLog()
    >>> log.record(["a", "b"], "shared", 0.0)
    >>> log.record(["a"], "shared", 3 * 86400.0)
    >>> round(log.base_level("a", 4 * 86400.0, {"shared": 1.0}), 4)  # ln(1 + 4^-0.5)
    0.4055
    >>> log.uses("a", {"shared": 1.0}), log.uses("a", {"shared": 1.0}, together=True)
    (2.0, 1.0)
    >>> log.events({"shared": 1.0})  # co-activations only
    1.0
    >>> log.recent_nodes({"shared": 1.0})
    ['a', 'b']
    """

    def __init__(self, *, history: int = 8, window: int = 50) -> None:
        self.history = history
        self.window = window
        self._nodes: dict[str, dict[str, NodeUse]] = {}
        self._events: dict[str, int] = {}
        self._recent: dict[str, deque[tuple[float, tuple[str, ...]]]] = {}

    def record(self, nodes: Sequence[str], namespace: str, at: float) -> None:
        """One event: every distinct node of ``nodes`` was used at ``at``."""
        distinct = tuple(dict.fromkeys(nodes))
        if not distinct:
            return
        table = self._nodes.setdefault(namespace, {})
        together = len(distinct) > 1
        for node in distinct:
            table.setdefault(node, NodeUse()).add(at, self.history, together)
        if together:
            self._events[namespace] = self._events.get(namespace, 0) + 1
        recent = self._recent.setdefault(namespace, deque(maxlen=self.window))
        recent.append((at, distinct))

    def base_level(
        self, node: str, now: float, factors: Mapping[str, float], decay: float = 0.5
    ) -> float:
        """B = ln Σ_ns factor × Σ_j (now − t_j)^(−decay) over the namespaces of ``factors``."""
        total = 0.0
        for ns, factor in factors.items():
            use = self._nodes.get(ns, {}).get(node)
            if use is not None and factor > 0:
                total += factor * use.strength(now, decay)
        return math.log(total) if total > 0.0 else -math.inf

    def uses(self, node: str, factors: Mapping[str, float], *, together: bool = False) -> float:
        """Σ_ns factor × uses of ``node`` (only those in co-activations with ``together``)."""
        return sum(
            factor * (use.together if together else use.count)
            for ns, factor in factors.items()
            if (use := self._nodes.get(ns, {}).get(node)) is not None
        )

    def events(self, factors: Mapping[str, float]) -> float:
        """Σ_ns factor × co-activation events (two nodes or more) of the namespace."""
        return sum(factor * self._events.get(ns, 0) for ns, factor in factors.items())

    def recent_nodes(self, factors: Mapping[str, float], until: float = math.inf) -> list[str]:
        """Distinct nodes of the remembered events (at or before ``until``), latest first."""
        events = [
            event
            for ns, factor in factors.items()
            if factor > 0
            for event in self._recent.get(ns, ())
            if event[0] <= until
        ]
        events.sort(key=lambda event: -event[0])
        return list(dict.fromkeys(node for _, nodes in events for node in nodes))

    @classmethod
    def from_edges(
        cls,
        edges: Iterable[tuple[str, str, str, int, float, float]],
        *,
        history: int = 8,
        window: int = 50,
    ) -> UsageLog:
        """An approximate log rebuilt from stored edges ``(a, b, namespace, count, created,
        last)``, for a store opened on a file (uses are not stored per node).

        A node's uses (all co-activations): as many as its most reinforced edge's count,
        the first at its oldest edge's creation, the latest at its edges' distinct last
        reinforcements; events: the distinct last-reinforcement times of a namespace.
        Single-node uses, and the times of co-uses whose edges were reinforced again
        later, are lost.

        Examples
        --------
        >>> log = UsageLog.from_edges([("a", "b", "shared", 3, 0.0, 86400.0)])
        >>> log.uses("a", {"shared": 1.0}), log.events({"shared": 1.0})
        (3.0, 1.0)
        """
        log = cls(history=history, window=window)
        state: dict[tuple[str, str], tuple[int, float, set[float]]] = {}
        events: dict[str, dict[float, set[str]]] = {}
        for a, b, ns, count, created, last in edges:
            for node in (a, b):
                old = state.get((ns, node))
                if old is None:
                    state[(ns, node)] = (count, created, {last})
                else:
                    old[2].add(last)
                    state[(ns, node)] = (max(old[0], count), min(old[1], created), old[2])
            events.setdefault(ns, {}).setdefault(last, set()).update((a, b))
        for (ns, node), (count, first, lasts) in state.items():
            recent = sorted(lasts)[-history:]
            uses = max(count, len(recent))
            use = NodeUse(uses, min(first, recent[0]), recent, uses)
            log._nodes.setdefault(ns, {})[node] = use
        for ns, by_time in events.items():
            log._events[ns] = len(by_time)
            latest = sorted(by_time.items())[-window:]
            log._recent[ns] = deque(
                ((t, tuple(sorted(nodes))) for t, nodes in latest), maxlen=window
            )
        return log

    def __len__(self) -> int:
        """Nodes with at least one use, over all namespaces."""
        return len({node for table in self._nodes.values() for node in table})
