"""The rows of the quality table: ways to fill the same k slots, all given the same vector hits.

A row is a :class:`Method`: it ``observe``\\ s commits in time order (the history it is
allowed to know) and ``rerank``\\ s a query's vector top-k into a list of the same
length. Every row sees the same history: in the *frozen* variant only the teaching
commits, in the *online* variant also every test commit before the query. Rows are
registered by name in :data:`ROWS`; a new baseline is one class and one entry.

Examples
--------
>>> from synapse_retriever.capture.gitlog import Commit
>>> rows = build_rows(["vector", "recency", "oracle"])
>>> for row in rows:
...     row.observe(Commit("1", (), 0.0, 10.0, "add x", ("x.py", "y.py")))
>>> query = Query("fix z", 20.0, frozenset({"z.py"}), frozenset({"a", "b", "c", "x.py", "z.py"}))
>>> hits = [("a", 0.9), ("b", 0.8), ("c", 0.7)]
>>> {row.name: row.rerank(query, hits) for row in rows}
{'vector': ['a', 'b', 'c'], 'recency': ['a', 'b', 'x.py'], 'oracle': ['a', 'z.py', 'c']}
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass, field
from typing import Protocol

from synapse_retriever.bench.metrics import displace
from synapse_retriever.capture.gitlog import MAX_FILES, MIN_FILES, Commit
from synapse_retriever.config import ActrRule, SynapseConfig
from synapse_retriever.learning.usage import base_level
from synapse_retriever.recall.actr import ActrPlan
from synapse_retriever.recall.published import RecallPlan
from synapse_retriever.store import SynapseStore

__all__ = [
    "ROWS",
    "ActrPrior",
    "CoChange",
    "Method",
    "MissCounts",
    "Oracle",
    "Query",
    "Recency",
    "RowContext",
    "RowSettings",
    "Synapse",
    "VectorOnly",
    "build_rows",
]

SLOTS = 2
"""Slots a displacement row may take: the method's ``max_inject``, the oracle's bound."""


@dataclass(frozen=True)
class Query:
    """A test commit as a query.

    Attributes
    ----------
    text : str
        The commit message.
    time : float
        The commit's time (POSIX seconds): the query is asked then.
    relevant : frozenset of str
        Files the commit touched that existed before it (retrievable).
    documents : frozenset of str
        Files of the tree the query runs against (the commit's first parent).
    project : str or None
        When one store learns several histories: the query's own (its ids, and every
        id of that history, start with ``project/``); an injection outside it is off
        topic.
    """

    text: str
    time: float
    relevant: frozenset[str]
    documents: frozenset[str]
    project: str | None = None

    def on_topic(self, node: str) -> bool:
        """Whether ``node`` belongs to the query's project (always, with no project).

        Examples
        --------
        >>> query = Query("fix", 0.0, frozenset(), frozenset(), project="attrs")
        >>> query.on_topic("attrs/src/x.py"), query.on_topic("rich/x.py")
        (True, False)
        """
        return self.project is None or node.startswith(self.project + "/")


class Method(Protocol):
    """One row of the quality table."""

    name: str

    def observe(self, commit: Commit) -> None:
        """Learn from a commit (called in time order, after the commit's query if any)."""
        ...

    def rerank(self, query: Query, hits: Sequence[tuple[str, float]]) -> list[str]:
        """The ids to return for ``query`` given the vector ``hits``; same length."""
        ...


class VectorOnly:
    """The baseline: the vector top-k, unchanged."""

    name = "vector"

    def observe(self, commit: Commit) -> None:
        pass

    def rerank(self, query: Query, hits: Sequence[tuple[str, float]]) -> list[str]:
        return [node for node, _ in hits]


@dataclass
class MissCounts:
    """Why relevant files that the vector top-k missed were, or were not, recalled.

    Each relevant, retrievable file absent from the vector top-k is counted once per
    query in the first bucket that applies.
    """

    unseen: int = 0
    """Never co-changed in the history the graph learned (no edge ever)."""
    unreached: int = 0
    """In the graph, but no energy reached it from the seeds (decayed, or > 2 hops)."""
    below_threshold: int = 0
    """Reached, with energy under the injection threshold."""
    outranked: int = 0
    """Above the threshold, but other candidates took the slots (or the cap)."""
    recalled: int = 0
    """Injected into the result."""

    def as_dict(self) -> dict[str, int]:
        return dict(vars(self))


class Synapse:
    """The treatment: the same top-k through :meth:`SynapseStore.recall`.

    The graph learns each eligible commit (2 to 32 files) as one co-activation event at
    the commit's time, as ``synapse-retriever bootstrap`` does, in ``namespace``; queries are
    recalled at their own time with that namespace active, and only files of the
    query's tree can be injected.
    """

    name = "synapse"

    def __init__(
        self,
        config: SynapseConfig | None = None,
        *,
        namespace: str = "shared",
        path: str = ":memory:",
        name: str = "synapse",
    ) -> None:
        self.name = name
        self.store = SynapseStore(path, config=config)
        self.namespace = namespace
        self.seen: set[str] = set()
        self.last_misses = MissCounts()

    def observe(self, commit: Commit) -> None:
        if MIN_FILES <= len(commit.files) <= MAX_FILES:
            self.store.reinforce(
                commit.files,
                namespace=self.namespace,
                at=commit.commit_time,
                event_id=commit.event_id(self.namespace),
            )
            self.seen.update(commit.files)
        elif self.store.config.rule == "actr" and 0 < len(commit.files) <= MAX_FILES:
            # a commit of one file is a use (base level), not a co-activation
            self.store.use(commit.files, namespace=self.namespace, at=commit.commit_time)

    def rerank(self, query: Query, hits: Sequence[tuple[str, float]]) -> list[str]:
        plan = self.store.plan(hits, at=query.time, active_namespace=self.namespace)
        result = [hit.id for hit in plan.inject(resolvable=query.documents)]
        if isinstance(plan, ActrPlan):
            strong = set(plan.candidates)
            energy = {n: (1.0 if n in strong else 0.0) for n in plan.activation}
            self._count_misses(query, hits, energy, set(result), threshold=0.5)
        elif isinstance(plan, RecallPlan):
            energy = plan.activation.energy
            threshold = plan.rule.inject_threshold
            self._count_misses(query, hits, energy, set(result), threshold=threshold)
        return result

    def reach(self, query: Query, hits: Sequence[tuple[str, float]]) -> set[str]:
        """Nodes that receive any energy from the query's seeds."""
        seeds = [node for node, _ in hits[: self.store.config.recall.seeds]]
        return set(self.store.activate(seeds, at=query.time, active_namespace=self.namespace))

    def _count_misses(
        self,
        query: Query,
        hits: Sequence[tuple[str, float]],
        energy: dict[str, float],
        result: set[str],
        threshold: float,
    ) -> None:
        """Bucket the misses; under ``actr``, ``energy`` is 1 for candidates that beat the
        weakest movable hit, 0 for other reached or recent nodes (threshold 0.5)."""
        present = {node for node, _ in hits}
        misses = MissCounts()
        for node in sorted(query.relevant - present):
            if node in result:
                misses.recalled += 1
            elif node not in self.seen:
                misses.unseen += 1
            elif node not in energy or (threshold != 0.5 and energy[node] <= 0.0):
                misses.unreached += 1
            elif energy[node] < threshold:
                misses.below_threshold += 1
            else:
                misses.outranked += 1
        self.last_misses = misses

    def close(self) -> None:
        self.store.close()


class CoChange:
    """The most frequently co-changed files of the top hit replace the weakest hits.

    Counts come from the same eligible commits the graph learns; ties go by path.
    """

    name = "co-change"

    def __init__(self) -> None:
        self.counts: defaultdict[str, Counter[str]] = defaultdict(Counter)

    def observe(self, commit: Commit) -> None:
        if MIN_FILES <= len(commit.files) <= MAX_FILES:
            for node in commit.files:
                self.counts[node].update(other for other in commit.files if other != node)

    def rerank(self, query: Query, hits: Sequence[tuple[str, float]]) -> list[str]:
        ranked = [node for node, _ in hits]
        if not ranked:
            return ranked
        present = set(ranked)
        partners = sorted(
            self.counts.get(ranked[0], Counter()).items(), key=lambda p: (-p[1], p[0])
        )
        newcomers = [n for n, _ in partners if n not in present and n in query.documents]
        return displace(ranked, newcomers[:SLOTS], slots=SLOTS)


class Recency:
    """Files of the latest commits replace the weakest hits; the query is ignored.

    The most recent commit's files come first (in the commit's order), then the
    previous commit's, until the slots are filled.
    """

    name = "recency"

    def __init__(self) -> None:
        self.history: list[Commit] = []

    def observe(self, commit: Commit) -> None:
        self.history.append(commit)

    def rerank(self, query: Query, hits: Sequence[tuple[str, float]]) -> list[str]:
        ranked = [node for node, _ in hits]
        present = set(ranked)
        newcomers: list[str] = []
        for commit in reversed(self.history):
            for node in commit.files:
                if node not in present and node in query.documents and node not in newcomers:
                    newcomers.append(node)
            if len(newcomers) >= SLOTS:
                break
        return displace(ranked, newcomers[:SLOTS], slots=SLOTS)


class ActrPrior:
    """Query-blind prior: ACT-R base-level activation of each file; the 2 strongest
    absent files take the 2 weakest slots.

    Notes
    -----
    With t_j the times the file was touched before the query time t (in days)::

        B = ln Σ_j (t − t_j)^(−0.5)

    Recency and frequency of use, nothing else. A use less than a second before the
    query counts as one second old.

    Examples
    --------
    One use 1 day ago and one 4 days ago: B = ln(1^−0.5 + 4^−0.5) = ln 1.5 = 0.4055.

    >>> round(base_level([0.0, 3 * 86400.0], 4 * 86400.0), 4)
    0.4055
    """

    name = "actr-prior"

    def __init__(self, decay: float = ActrRule.base_decay) -> None:
        self.decay = decay
        self.uses: defaultdict[str, list[float]] = defaultdict(list)

    def observe(self, commit: Commit) -> None:
        for node in commit.files:
            self.uses[node].append(commit.commit_time)

    def rerank(self, query: Query, hits: Sequence[tuple[str, float]]) -> list[str]:
        ranked = [node for node, _ in hits]
        present = set(ranked)
        scored = sorted(
            (-base_level(times, query.time, self.decay), node)
            for node, times in self.uses.items()
            if node in query.documents and node not in present
        )
        return displace(ranked, [node for _, node in scored[:SLOTS]], slots=SLOTS)


class Oracle:
    """Upper bound of any 2-slot displacement: relevant files absent from the top-k go
    into the 2 weakest slots (a slot already holding a relevant file is kept).

    With ``reach``, only relevant files that the graph links to the seeds are used: the
    bound of what the graph could have injected. ``learner``, if given, is a graph this
    row must teach itself (when no ``synapse`` row does).
    """

    def __init__(
        self,
        reach: Callable[[Query, Sequence[tuple[str, float]]], Collection[str]] | None = None,
        *,
        name: str = "oracle",
        learner: Synapse | None = None,
    ) -> None:
        self.reach = reach
        self.name = name
        self.learner = learner

    def observe(self, commit: Commit) -> None:
        if self.learner is not None:
            self.learner.observe(commit)

    def rerank(self, query: Query, hits: Sequence[tuple[str, float]]) -> list[str]:
        ranked = [node for node, _ in hits]
        present = set(ranked)
        pool = sorted(n for n in query.relevant - present if n in query.documents)
        if self.reach is not None and pool:
            reached = self.reach(query, hits)
            pool = [n for n in pool if n in reached]
        limit = min(SLOTS, max(0, len(ranked) - 1))
        for slot in range(len(ranked) - limit, len(ranked)):
            if pool and ranked[slot] not in query.relevant:
                ranked[slot] = pool.pop(0)
        return ranked


@dataclass
class RowSettings:
    """What the row factories may use: the method's configuration and where it learns."""

    config: SynapseConfig = field(default_factory=SynapseConfig)
    namespace: str = "shared"
    store_path: str = ":memory:"


class RowContext:
    """Settings plus the one graph that the rows of a variant share."""

    def __init__(self, settings: RowSettings, names: Sequence[str]) -> None:
        self.settings = settings
        self.names = tuple(names)
        self._graph: Synapse | None = None

    def graph(self) -> Synapse:
        """The variant's :class:`Synapse` row, made on first use."""
        if self._graph is None:
            s = self.settings
            self._graph = Synapse(s.config, namespace=s.namespace, path=s.store_path)
        return self._graph


def _oracle_reachable(context: RowContext) -> Oracle:
    graph = context.graph()
    learner = None if "synapse" in context.names else graph
    return Oracle(graph.reach, name="oracle-reachable", learner=learner)


ROWS: dict[str, Callable[[RowContext], Method]] = {
    "vector": lambda c: VectorOnly(),
    "synapse": lambda c: c.graph(),
    "co-change": lambda c: CoChange(),
    "synapse-published": lambda c: Synapse(
        SynapseConfig.published(), namespace=c.settings.namespace, name="synapse-published"
    ),
    "synapse-blind": lambda c: Synapse(
        _blind(c.settings.config), namespace=c.settings.namespace, name="synapse-blind"
    ),
    "synapse-nolift": lambda c: Synapse(
        _nolift(c.settings.config), namespace=c.settings.namespace, name="synapse-nolift"
    ),
    "recency": lambda c: Recency(),
    "actr-prior": lambda c: ActrPrior(),
    "oracle": lambda c: Oracle(),
    "oracle-reachable": _oracle_reachable,
}
"""Rows by name, in table order. ``vector`` is the baseline every delta is taken against;
``synapse`` is the method with the run's configuration (the default, the ACT-R rule,
unless told otherwise), ``synapse-published`` the method as published,
``synapse-blind`` the run's configuration with its query seeds removed (its query-blind
twin: no neighbour of a hit is read, so nothing is associated with the query, the gate is
lifted and the candidates are the latest events' nodes; the hits still defend by their
base levels),
``synapse-nolift`` the configuration without the association term (candidates still the
hits' neighbours: what the log-lift adds on top of choosing them);
``oracle-reachable`` is the oracle restricted to files the graph links to the seeds."""


def _blind(config: SynapseConfig) -> SynapseConfig:
    """The query-blind twin of ``config``: the same rule reading no neighbour of the hits.

    The published rule has nothing but the query's seeds, so its twin changes nothing.
    """
    if config.rule == "actr":  # no neighbour read, so no association to gate on
        return config.replace(association_fan=0, require_association=False, min_association=0.0)
    return config.replace(spread_rate=0.0)


def _nolift(config: SynapseConfig) -> SynapseConfig:
    """``config`` without its association term (the ``actr`` rule's log-lift weight 0)."""
    if config.rule == "actr":
        return config.replace(association=0.0)
    return config.replace(spread_rate=0.0)


def build_rows(names: Sequence[str], settings: RowSettings | None = None) -> list[Method]:
    """Instantiate the rows ``names`` (keys of :data:`ROWS`) for one variant.

    Raises
    ------
    KeyError
        An unknown row name.
    """
    unknown = [name for name in names if name not in ROWS]
    if unknown:
        raise KeyError(f"unknown rows {unknown}; known: {list(ROWS)}")
    context = RowContext(settings or RowSettings(), names)
    return [ROWS[name](context) for name in names]
