"""Every constant of the method in one validated, immutable object, in groups.

:class:`SynapseConfig` holds :class:`Learning` (how edges learn and forget, the same under
every rule), the recall rule (:class:`ActrRule` or :class:`PublishedRule`: the rule's type
says which constants apply), :class:`Spreading` (the spreading engine) and
:class:`Operations` (refresh, locks, retries, clocks). The learning and forgetting
constants are the published values (Budget-Neutral Synaptic Recall); where the project's
issues pin a value more exactly, the issue's value is used. The recall rule is ACT-R's
(``SynapseConfig()``, the same as ``SynapseConfig.actr()``), which beat the published rule
on real histories (docs, Benchmarks: Quality), gated by association: only a node associated
with the query's hits (a learned edge with one, or, for a recently used node, an edge with a
node associated with one: ``association_hops``) may take a slot. ``SynapseConfig.recency()``
lifts the gate (a recency prior: a node used often and lately may take a slot in any query);
``SynapseConfig.published()`` is the method exactly as published.

Examples
--------
>>> config = SynapseConfig()
>>> config.rule, config == SynapseConfig.actr()
('actr', True)
>>> config.learning.default_half_life("branch:feature/login")
30.0
>>> config.merge_factors("personal")["shared"]
0.5
>>> SynapseConfig.actr(seeds=0)
Traceback (most recent call last):
...
synapse_retriever.errors.InvalidValueError: seeds must be an integer >= 1, got 0
"""

from __future__ import annotations

import math
import sys
import unicodedata
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field, fields, replace
from typing import Any, Literal

from synapse_retriever._text import blank
from synapse_retriever.clock import MAX_CLOCK_SKEW_S
from synapse_retriever.errors import InvalidTypeError, InvalidValueError, refused_number, shown

__all__ = [
    "BASE_NAMESPACES",
    "GROUPS",
    "HALF_LIFE_DAYS",
    "MAX_BUSY_TIMEOUT_S",
    "MAX_NAME_BYTES",
    "MAX_RECENT_EVENTS",
    "MAX_USE_HISTORY",
    "PRESETS",
    "RULES",
    "ActrRule",
    "Learning",
    "Operations",
    "PublishedRule",
    "RecallRule",
    "Rule",
    "Spreading",
    "SynapseConfig",
    "check_flag",
    "check_integer",
    "check_size",
    "frozen_mapping",
    "namespace_list",
    "validate_namespace",
]

MAX_RECENT_EVENTS = 100_000
"""The most events :attr:`Learning.recent_events` keeps per namespace."""
MAX_USE_HISTORY = 1_000
"""The most use times :attr:`Learning.use_history` keeps per node (8 bytes each)."""

Rule = Literal["actr", "published"]
"""A recall rule's name: :attr:`SynapseConfig.rule`."""

RULES: tuple[Rule, ...] = ("published", "actr")
"""Recall rules: ``actr`` (the default, :class:`ActrRule`) and ``published``
(:class:`PublishedRule`)."""

PRESETS = ("actr", "published", "recency")
"""Named configurations (:meth:`SynapseConfig.preset`)."""

BASE_NAMESPACES = ("personal", "shared", "ephemeral")
"""The fixed namespaces; branches are ``"branch:<name>"``."""

HALF_LIFE_DAYS = (1e-6, 1e6)
"""The half-lives a store holds, in days (a tenth of a second to 2,700 years), configured or
imported: past them the decay's arithmetic leaves a float's range."""
MAX_BUSY_TIMEOUT_S = 2_147_483
"""The longest wait for a write lock SQLite takes (its busy timeout is 32-bit milliseconds)."""
MAX_NAME_BYTES = 2048
"""Longest node id, namespace or event id accepted, in bytes of UTF-8: one limit on every
backend, under the largest entry PostgreSQL's indexes take (2,704 bytes)."""


def check_size(what: str, value: str) -> str:
    """``value`` itself if its UTF-8 takes at most :data:`MAX_NAME_BYTES` bytes.

    Examples
    --------
    >>> check_size("node id", "é" * 1024)[:3]  # 2 bytes each: 2048
    'ééé'
    >>> check_size("node id", "é" * 1025)
    Traceback (most recent call last):
    ...
    synapse_retriever.errors.InvalidValueError: node id must be at most 2048 bytes of UTF-8, \
got 2050: 'éééééééééééééééééééééééééééééééééééééééé'...
    """
    if len(value) * 4 <= MAX_NAME_BYTES:  # 4 bytes a character at most: no need to count
        return value
    size = len(value.encode("utf-8", "surrogatepass"))
    if size > MAX_NAME_BYTES:
        raise InvalidValueError(
            f"{what} must be at most {MAX_NAME_BYTES} bytes of UTF-8, got {size}: {value[:40]!r}..."
        )
    return value


def check_flag(name: str, value: object) -> bool:
    """``value`` if it is True or False: a flag given as ``"no"`` would read as True.

    Examples
    --------
    >>> check_flag("dry_run", False)
    False
    >>> check_flag("dry_run", "no")
    Traceback (most recent call last):
    ...
    synapse_retriever.errors.InvalidTypeError: dry_run must be a bool, got str 'no'
    """
    if not isinstance(value, bool):
        raise InvalidTypeError(f"{name} must be a bool, got {type(value).__name__} {shown(value)}")
    return value


def validate_namespace(namespace: object) -> str:
    """Return ``namespace`` if it is ``personal``, ``shared``, ``ephemeral`` or ``branch:<name>``.

    Examples
    --------
    >>> validate_namespace("branch:main")
    'branch:main'
    >>> validate_namespace("team")
    Traceback (most recent call last):
    ...
    synapse_retriever.errors.InvalidValueError: namespace must be 'personal', 'shared', \
'ephemeral' or 'branch:<name>', got 'team'
    """
    if not isinstance(namespace, str):
        raise InvalidTypeError(
            f"namespace must be a str, got {type(namespace).__name__} {shown(namespace)}"
        )
    if namespace in BASE_NAMESPACES:
        return namespace
    if namespace.startswith("branch:"):
        name = namespace[len("branch:") :]
        if not blank(name) and _printable(name):  # something shows: not a zero-width space
            return check_size("namespace", namespace)
        raise InvalidValueError(
            f"branch namespace needs a printable, non-blank name, got {shown(namespace)}"
        )
    raise InvalidValueError(
        "namespace must be 'personal', 'shared', 'ephemeral' or 'branch:<name>', "
        f"got {shown(namespace)}"
    )


def namespace_list(namespaces: object, what: str = "namespaces") -> list[str] | None:
    """``namespaces`` (one name, an iterable of names, or None for all) as a list of valid
    names, or None.

    Examples
    --------
    >>> namespace_list("shared"), namespace_list(["personal", "branch:main"]), namespace_list(None)
    (['shared'], ['personal', 'branch:main'], None)
    >>> namespace_list(5)
    Traceback (most recent call last):
    ...
    synapse_retriever.errors.InvalidTypeError: namespaces must be a str, an iterable of str or \
None, got int 5
    """
    if namespaces is None:
        return None
    if isinstance(namespaces, str):
        return [validate_namespace(namespaces)]
    if isinstance(namespaces, (bytes, bytearray)) or not isinstance(namespaces, Iterable):
        raise InvalidTypeError(
            f"{what} must be a str, an iterable of str or None, got "
            f"{type(namespaces).__name__} {shown(namespaces)}"
        )
    return [validate_namespace(ns) for ns in namespaces]


def _printable(text: str) -> bool:
    return not any(unicodedata.category(ch) in ("Cc", "Cs") for ch in text)


def frozen_mapping(mapping: Mapping[str, float]) -> Mapping[str, float]:
    """``mapping`` copied, read-only, as a configuration keeps it: it pickles and copies.

    >>> frozen_mapping({"personal": 1.0})
    {'personal': 1.0}
    """
    return _ReadOnly(mapping)


class _ReadOnly(Mapping[str, float]):
    """A read-only mapping that pickles and copies (``MappingProxyType`` does neither, so a
    configuration could not go to another process).

    >>> import pickle
    >>> weights = _ReadOnly({"personal": 1.0})
    >>> pickle.loads(pickle.dumps(weights)) == {"personal": 1.0}, weights
    (True, {'personal': 1.0})
    """

    __slots__ = ("_items",)

    def __init__(self, mapping: Mapping[str, float]) -> None:
        self._items = dict(mapping)

    def __getitem__(self, key: str) -> float:
        return self._items[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self._items)

    def __len__(self) -> int:
        return len(self._items)

    def __repr__(self) -> str:
        return repr(self._items)

    def __reduce__(self) -> tuple[Any, tuple[dict[str, float]]]:
        return _ReadOnly, (self._items,)


@dataclass(frozen=True)
class Learning:
    """How edges learn and forget, and what the store records of each use: the same under
    every recall rule.

    Parameters
    ----------
    learning_rate : float
        Δw per event at strength 1: Δw = learning_rate × clamp(strength, 0, max_strength).
    max_strength : float
        Upper clamp of an event's strength.
    half_life_days : Mapping[str, float]
        Namespace defaults (``branch`` covers every ``branch:<name>``).
    half_life_bounds : tuple[float, float]
        Learned half-lives are clamped here, widened to include the namespace default.
    learned_scale : float
        ratio = log1p(count / learned_scale).
    ltp_min_count, ltp_floor : int, float
        Long-term potentiation: edges reinforced ``ltp_min_count`` times or more, outside
        ``ephemeral``, with a stored weight >= ``ltp_floor``, never decay below ``ltp_floor``.
    prune_threshold : float
        Effective weights below it are pruned: absent from every read.
    max_coactivation : int
        An event with more distinct nodes reinforces only the first ones (and warns).
    recent_events : int
        The latest events kept per namespace. The ``actr`` rule reads them: under the
        recency prior (``require_association=False``) their nodes are candidates too
        (besides the hits' neighbours), under the gate they may be reached in two steps.
    use_history : int
        Use times kept exactly per node (older ones are approximated), for the ``actr``
        rule's base levels. Both are recorded under every rule, so a store can change rule.

    Examples
    --------
    >>> learning = Learning()
    >>> learning.default_half_life("branch:feature/login"), learning.learning_rate
    (30.0, 0.3)
    >>> Learning(ltp_floor=2.0)
    Traceback (most recent call last):
    ...
    synapse_retriever.errors.InvalidValueError: ltp_floor must be a number in [0, 1], got 2.0
    """

    learning_rate: float = 0.30
    max_strength: float = 2.0
    half_life_days: Mapping[str, float] = field(
        default_factory=lambda: frozen_mapping(
            {"personal": 30.0, "branch": 30.0, "shared": 60.0, "ephemeral": 1.0}
        )
    )
    half_life_bounds: tuple[float, float] = (3.0, 120.0)
    learned_scale: float = 10.0
    ltp_min_count: int = 5
    ltp_floor: float = 0.20
    prune_threshold: float = 0.01
    max_coactivation: int = 32
    recent_events: int = 50
    use_history: int = 8

    def __post_init__(self) -> None:
        for name in ("ltp_floor", "prune_threshold"):
            _check_unit(name, getattr(self, name))
        for name in ("learning_rate", "max_strength"):
            _check_non_negative(name, getattr(self, name))
        _check_positive("learned_scale", self.learned_scale)
        for name, minimum in (
            ("ltp_min_count", 1),
            ("max_coactivation", 2),
            ("recent_events", 0),
            ("use_history", 1),
        ):
            check_integer(name, getattr(self, name), minimum)
        for name, most in (("recent_events", MAX_RECENT_EVENTS), ("use_history", MAX_USE_HISTORY)):
            if getattr(self, name) > most:  # kept per namespace and per node: memory
                raise InvalidValueError(
                    f"{name} must be at most {most:,}, got {shown(getattr(self, name))}"
                )
        bounds = _pair("half_life_bounds", self.half_life_bounds, "(low, high) of days")
        _check_positive("half_life_bounds[0]", bounds[0])
        _check_positive("half_life_bounds[1]", bounds[1])
        if not bounds[1] >= bounds[0]:
            raise InvalidValueError(
                f"half_life_bounds must satisfy 0 < low <= high, got {shown(bounds)}"
            )
        _check_half_life("half_life_bounds[0]", bounds[0])
        _check_half_life("half_life_bounds[1]", bounds[1])
        half_lives = _mapping("half_life_days", self.half_life_days)
        kinds = {"personal", "branch", "shared", "ephemeral"}
        missing, unread = kinds - half_lives.keys(), half_lives.keys() - kinds
        if missing:
            raise InvalidValueError(f"half_life_days misses {sorted(missing)}")
        if unread:  # "branch:main" is never read: every branch takes "branch"
            raise InvalidValueError(
                f"half_life_days has keys no namespace reads: {sorted(unread, key=str)!r:.120} "
                f"(one per kind: {sorted(kinds)}; every branch takes 'branch')"
            )
        for ns, days in half_lives.items():
            _check_positive(f"half_life_days[{ns!r}]", days)
            _check_half_life(f"half_life_days[{ns!r}]", days)
        object.__setattr__(self, "half_life_days", frozen_mapping(half_lives))

    def default_half_life(self, namespace: str) -> float:
        """The half-life a new edge of ``namespace`` starts with, in days.

        Examples
        --------
        >>> learning = Learning()
        >>> learning.default_half_life("personal"), learning.default_half_life("branch:sso")
        (30.0, 30.0)
        >>> learning.default_half_life("ephemeral")
        1.0
        """
        kind = "branch" if namespace.startswith("branch:") else namespace
        return float(self.half_life_days[kind])

    def half_life_range(self, namespace: str) -> tuple[float, float]:
        """The clamp of learned half-lives: ``half_life_bounds`` widened to include the default.

        Examples
        --------
        >>> Learning().half_life_range("ephemeral")  # its 1-day default is below 3
        (1.0, 120.0)
        >>> Learning().half_life_range("shared")
        (3.0, 120.0)
        """
        default = self.default_half_life(namespace)
        low, high = self.half_life_bounds
        return min(low, default), max(high, default)

    def is_ltp_namespace(self, namespace: str) -> bool:
        """Whether long-term potentiation may floor edges of ``namespace``.

        Examples
        --------
        >>> learning = Learning()
        >>> learning.is_ltp_namespace("shared"), learning.is_ltp_namespace("ephemeral")
        (True, False)
        """
        return namespace != "ephemeral"


@dataclass(frozen=True)
class Spreading:
    """The spreading engine: what the ``published`` rule and ``SynapseStore.spread`` read.

    Parameters
    ----------
    spread_rate : float
        Energy kept per hop: propagated = energy × weight × spread_rate × hub factor.
    hub_degree : int
        Above this live degree a node's hub factor is sqrt(hub_degree / degree).
    weight_tolerance_s : float
        Spreading evaluates decayed weights at a time within this many seconds of the
        query's ``at`` (reusing them between queries); 0 evaluates them at ``at`` exactly.
        The relative error of a weight is at most 1 − 2^(−tolerance / half-life): for
        60 s, 4.8e-4 at the 1-day ephemeral half-life and 1.6e-5 at 30 days. The ``actr``
        rule reads co-use counts of the edges live at ``at`` exactly.

    Examples
    --------
    >>> Spreading().spread_rate, Spreading(hub_degree=6).hub_degree
    (0.6, 6)
    >>> Spreading(spread_rate=1.5)
    Traceback (most recent call last):
    ...
    synapse_retriever.errors.InvalidValueError: spread_rate must be a number in [0, 1], got 1.5
    """

    spread_rate: float = 0.6
    hub_degree: int = 50
    weight_tolerance_s: float = 60.0

    def __post_init__(self) -> None:
        _check_unit("spread_rate", self.spread_rate)
        _check_non_negative("weight_tolerance_s", self.weight_tolerance_s)
        check_integer("hub_degree", self.hub_degree, 1)


@dataclass(frozen=True)
class ActrRule:
    """The ACT-R recall rule's constants (:mod:`synapse_retriever.recall.actr`).

    Every hit's and candidate's ACT-R activation is its base level (recency and frequency
    of use) plus log-lift association with the query's hits; an absent node displaces the
    weakest hit if it beats that hit's activation plus ``keep_bonus``.

    Parameters
    ----------
    seeds : int
        How many of the first hits are never displaced.
    max_inject : int
        At most this many hits are displaced per query: 2, as published (at most 2 absent
        nodes swapped in, at least one original hit kept). 3 is available: on the five
        development histories (docs, Benchmarks: Quality) the third slot was worth 0.4 to
        3.0 recall points, macro.
    base_decay : float
        d of the base-level activation B = ln Σ (t − t_j)^(−d), ages in days.
    association : float
        W, the weight of the mean log-lift association with the hits.
    keep_bonus : float
        What a hit adds to its activation when defending its slot.
    defend_association : float
        The share of its association with the other hits that a hit counts when defending
        its slot (the hits are alike by construction: part of their mutual association is
        the vector's own similarity counted twice).
    unused_base : float
        The base level of a node never used, in a memory that is learning.
    stale_unused : float
        A memory that stopped learning cannot tell a never-used node from one used since:
        a never-used node's base level is ``unused_base + stale_unused × ln(1 + g)``, g the
        days since the latest event recorded in the namespaces read (0: off).
    association_fan : int
        Per hit, only this many most co-used neighbours are read; 0 reads none, a
        query-blind rule (no association; with the recency prior the candidates are the
        latest events' nodes, under the gate there are none).
    require_association : bool
        The association gate (on by default). A candidate must have a learned edge with at
        least one of the query's hits (among that hit's ``association_fan`` most co-used
        neighbours), or reach one in two steps (``association_hops``), to take a slot; base
        level still orders the associated candidates and defends the hits. False is the
        recency prior (the preset :meth:`SynapseConfig.recency`): the nodes of the latest
        ``recent_events`` events (:class:`Learning`) are candidates too, on their base
        level alone, whatever the query.
    min_association : float
        Under the gate: the least mean log-lift association with the hits,
        Σ_j W_j S_ji / Σ_j W_j (in nats; see :mod:`synapse_retriever.recall.actr`), a
        candidate needs to take a slot. 0 (default): any learned edge will do; higher
        trades recall for precision (docs, Configuration).
    association_hops : int
        Under the gate: how far from the hits a candidate may be. 2 (default): a learned
        edge with a hit, or, for a node of the latest ``recent_events`` events, an edge
        with a node associated with a hit (a path of two steps, each of positive log-lift:
        more often together than chance, as spreading activation reaches through one
        node); 1: only a learned edge with a hit (the gate of 0.2's first measurements).
        A node reached in two steps has no lift with the hits, so its base level, less
        ``indirect_penalty``, orders it; ``min_association`` above 0 admits only direct
        edges.
    indirect_penalty : float
        With ``association_hops=2``: what a candidate associated with the hits only
        through an intermediate node loses from its activation (an indirect association
        is weaker evidence; ACT-R's mismatch penalty plays the same part).

    Examples
    --------
    >>> rule = ActrRule(keep_bonus=2.0)
    >>> rule.rule, rule.seeds, rule.max_inject, rule.keep_bonus
    ('actr', 1, 2, 2.0)
    >>> ActrRule(require_association=False, min_association=0.5)
    Traceback (most recent call last):
    ...
    synapse_retriever.errors.InvalidValueError: min_association applies under the \
association gate: got min_association=0.5 with require_association=False
    """

    rule: Literal["actr"] = field(default="actr", init=False)
    seeds: int = 1
    max_inject: int = 2
    base_decay: float = 0.5
    association: float = 1.0
    keep_bonus: float = 3.0
    defend_association: float = 0.5
    unused_base: float = -6.0
    stale_unused: float = 1.0
    association_fan: int = 256
    require_association: bool = True
    min_association: float = 0.0
    association_hops: int = 2
    indirect_penalty: float = 1.0

    def __post_init__(self) -> None:
        for name in (
            "association",
            "keep_bonus",
            "stale_unused",
            "min_association",
            "indirect_penalty",
        ):
            _check_non_negative(name, getattr(self, name))
        check_flag("require_association", self.require_association)
        if self.min_association > 0 and not self.require_association:
            raise InvalidValueError(
                f"min_association applies under the association gate: got "
                f"min_association={self.min_association!r} with require_association=False"
            )
        hops = self.association_hops
        if isinstance(hops, bool) or not isinstance(hops, int) or hops not in (1, 2):
            raise refused_number(self.association_hops)(
                f"association_hops must be 1 or 2, got {shown(self.association_hops)}"
            )
        _check_unit("defend_association", self.defend_association)
        if not (_is_number(self.base_decay) and 0.0 < self.base_decay < 1.0):
            raise refused_number(self.base_decay)(
                f"base_decay must be a number in (0, 1), got {shown(self.base_decay)}"
            )
        if not (_is_number(self.unused_base) and math.isfinite(self.unused_base)):
            raise refused_number(self.unused_base)(
                f"unused_base must be a finite number, got {shown(self.unused_base)}"
            )
        for name, minimum in (("seeds", 1), ("max_inject", 0), ("association_fan", 0)):
            check_integer(name, getattr(self, name), minimum)


@dataclass(frozen=True)
class PublishedRule:
    """The published recall rule's constants (:mod:`synapse_retriever.recall.published`).

    Spreading activation (:class:`Spreading`) from the seeds, with boost and threshold, as
    the method was published.

    Parameters
    ----------
    seeds : int
        How many of the first hits are never displaced nor boosted; they seed spreading
        activation (energy 1.0 each).
    max_inject : int
        At most this many hits are displaced per query (the published promise: 2).
    boost : float
        A present hit gains ``boost × energy`` in score.
    inject_threshold : float
        Absent nodes need at least this energy to displace a hit.

    Examples
    --------
    >>> rule = PublishedRule()
    >>> rule.rule, rule.seeds, rule.max_inject, rule.boost, rule.inject_threshold
    ('published', 3, 2, 0.3, 0.15)
    >>> PublishedRule(seeds=0)
    Traceback (most recent call last):
    ...
    synapse_retriever.errors.InvalidValueError: seeds must be an integer >= 1, got 0
    """

    rule: Literal["published"] = field(default="published", init=False)
    seeds: int = 3
    max_inject: int = 2
    boost: float = 0.3
    inject_threshold: float = 0.15

    def __post_init__(self) -> None:
        _check_unit("inject_threshold", self.inject_threshold)
        _check_non_negative("boost", self.boost)
        for name, minimum in (("seeds", 1), ("max_inject", 0)):
            check_integer(name, getattr(self, name), minimum)


RecallRule = ActrRule | PublishedRule
"""A recall rule's constants: its type says which rule, and which constants apply."""


@dataclass(frozen=True)
class Operations:
    """How a store works with files, databases, other processes and clocks; no effect on
    what is learned or recalled.

    Parameters
    ----------
    refresh_interval_s : float
        How often, at most, reads check whether another process changed the file.
    busy_timeout_s : float
        How long a writer waits for another process's write lock (SQLite), or for a
        free connection and for each lock a write needs (PostgreSQL: ``lock_timeout``,
        then :class:`~synapse_retriever.errors.WriteConflictError`).
    write_retries : int
        How many times a write is run again when it conflicted with another writer (a
        deadlock or a serialization failure on PostgreSQL) or lost its connection before
        committing, after a backoff of 10 ms doubling each time, with jitter; then
        :class:`~synapse_retriever.errors.WriteConflictError`.
    max_clock_skew_s : float
        How far ahead of this machine's clock a written time may be (one day): a later
        ``at`` (a millisecond time, the commonest mistake) is refused, as it would
        never decay and would push every later write after it. Also how much earlier
        than an edge's last reinforcement an event may come (another writer came first)
        and be counted, at that reinforcement, under ``late="skew"`` (the default).
    pause_collector : bool
        Whether, on SQLite, a write of 1,000 pairs or more and a decay sweep pause Python's
        cyclic garbage collector while they hold the store's write lock (process-wide:
        :mod:`synapse_retriever.store.collector` says how it is resumed). Batched writes at
        1M edges run up to 1.6 times faster with it; False for a process that must never
        have it paused.
    event_ids_kept_days : float or None
        How long the ids of events written with an ``event_id`` are kept, in days: a
        :meth:`~synapse_retriever.store.SynapseStore.decay` sweep at ``at`` forgets those
        last seen (recorded, or sent again) more than this before it, whatever their
        events' times, and an event sent again after that is learned again. A history
        imported today (``bootstrap``, its commits years old) is recognised for the whole
        window, and an import run again within it keeps its ids. None (the default) keeps
        every id for good; each adds a row (one per run of the LangChain callback handler
        or the LlamaIndex usage handler).

    Examples
    --------
    >>> Operations().write_retries, Operations(refresh_interval_s=0.0).refresh_interval_s
    (8, 0.0)
    """

    refresh_interval_s: float = 1.0
    busy_timeout_s: float = 30.0
    write_retries: int = 8
    max_clock_skew_s: float = MAX_CLOCK_SKEW_S
    pause_collector: bool = True
    event_ids_kept_days: float | None = None

    def __post_init__(self) -> None:
        if self.event_ids_kept_days is not None:
            _check_positive("event_ids_kept_days", self.event_ids_kept_days)
        for name in ("refresh_interval_s", "max_clock_skew_s"):
            _check_non_negative(name, getattr(self, name))
        _check_positive("busy_timeout_s", self.busy_timeout_s)
        if self.busy_timeout_s > MAX_BUSY_TIMEOUT_S:  # SQLite's: 32-bit milliseconds
            raise InvalidValueError(
                f"busy_timeout_s must be at most {MAX_BUSY_TIMEOUT_S:,} s (24 days), got "
                f"{self.busy_timeout_s!r}"
            )
        check_integer("write_retries", self.write_retries, 0)
        check_flag("pause_collector", self.pause_collector)


GROUPS = ("learning", "recall", "spreading", "operations")
"""The parts of a :class:`SynapseConfig` that hold constants, in the order of its fields."""


@dataclass(frozen=True)
class SynapseConfig:
    """The method's constants, in groups, each validated on construction.

    Parameters
    ----------
    learning : Learning
        How edges learn and forget, and what is recorded of each use.
    recall : ActrRule or PublishedRule
        The recall rule and its constants: :class:`ActrRule` (the default; it beat the
        published rule on real histories) or :class:`PublishedRule`.
    spreading : Spreading
        Spreading activation: the published rule's engine, and ``SynapseStore.spread``.
    operations : Operations
        Refresh, locks, retries and clocks.
    merge_weights : Mapping[str, float]
        Factor of each non-active namespace in the merged graph (the active one is 1.0).
        ``ephemeral`` is read only when active; unknown namespaces weigh 0.
    injection_enabled : bool
        False makes ``recall`` the identity.

    Examples
    --------
    >>> config = SynapseConfig(recall=ActrRule(keep_bonus=2.0))
    >>> config.rule, config.recall.seeds, config.recall.max_inject  # the others: defaults
    ('actr', 1, 2)
    >>> config == SynapseConfig.actr(keep_bonus=2.0) == SynapseConfig().replace(keep_bonus=2.0)
    True
    >>> SynapseConfig.published(inject_threshold=0.1).spreading.spread_rate
    0.6
    >>> config.learning.default_half_life("shared")
    60.0
    >>> SynapseConfig.actr(boost=0.5)
    Traceback (most recent call last):
    ...
    synapse_retriever.errors.InvalidValueError: boost is a constant of the published rule, \
not of this configuration's 'actr' rule
    """

    learning: Learning = field(default_factory=Learning)
    recall: RecallRule = field(default_factory=ActrRule)
    spreading: Spreading = field(default_factory=Spreading)
    operations: Operations = field(default_factory=Operations)
    merge_weights: Mapping[str, float] = field(
        default_factory=lambda: frozen_mapping({"personal": 0.8, "shared": 0.5})
    )
    injection_enabled: bool = True

    @property
    def rule(self) -> Rule:
        """The recall rule's name, from the type of :attr:`recall`.

        Examples
        --------
        >>> SynapseConfig().rule, SynapseConfig.published().rule
        ('actr', 'published')
        """
        return self.recall.rule

    @classmethod
    def published(cls, **overrides: object) -> SynapseConfig:
        """The method exactly as published: spreading activation from the first 3 hits,
        boost 0.3, threshold 0.15, at most 2 displaced hits.

        The recall rule is :class:`PublishedRule`; learning, spreading and operations are
        the same as in every preset. ``overrides`` are fields by name, as in
        :meth:`replace`.

        Examples
        --------
        >>> config = SynapseConfig.published()
        >>> config.rule, config.recall.seeds, config.recall.max_inject
        ('published', 3, 2)
        >>> config.spreading.spread_rate, config.recall.boost, config.recall.inject_threshold
        (0.6, 0.3, 0.15)
        """
        return cls(recall=PublishedRule()).replace(**overrides)

    @classmethod
    def actr(cls, **overrides: object) -> SynapseConfig:
        """The ACT-R recall rule with the constants chosen by cross-validation across
        repositories: only the first hit is fixed, at most 2 swaps (the published cap).
        This is the default, ``SynapseConfig()``; the preset names it explicitly.
        ``SynapseConfig.actr(max_inject=3)`` allows a third swap, the cap the
        cross-validation chose (worth 0.4 to 3.0 recall points there). ``overrides`` are
        fields by name, as in :meth:`replace`.

        Examples
        --------
        >>> config = SynapseConfig.actr()
        >>> rule = config.recall
        >>> config.rule, rule.seeds, rule.max_inject, rule.keep_bonus, rule.association
        ('actr', 1, 2, 3.0, 1.0)
        >>> config == SynapseConfig()
        True
        >>> SynapseConfig.actr(max_inject=3).recall.max_inject
        3
        """
        return cls(recall=ActrRule()).replace(**overrides)

    @classmethod
    def recency(cls, **overrides: object) -> SynapseConfig:
        """The ACT-R rule without the association gate: a recency prior.

        The nodes of the latest ``recent_events`` events are candidates as well as the
        hits' co-used neighbours, and any of them takes a slot on its base level alone
        (how recently and how often it was used), whatever the query. This was the
        default before 0.2: it finds a little more of what a task touches next in one
        project, and injects off-topic documents (a file of another project, the most
        used document into every query) where one store serves several (docs,
        Configuration, for the measured cost).

        Examples
        --------
        >>> config = SynapseConfig.recency()
        >>> config.rule, config.recall.require_association, config.learning.recent_events
        ('actr', False, 50)
        >>> SynapseConfig.preset("recency") == config
        True
        """
        return cls(recall=ActrRule(require_association=False)).replace(**overrides)

    @classmethod
    def preset(cls, name: str, **overrides: object) -> SynapseConfig:
        """A named configuration: ``"actr"``, ``"published"`` or ``"recency"``.

        Examples
        --------
        >>> SynapseConfig.preset("published") == SynapseConfig.published()
        True
        """
        if name in PRESETS:
            factory = {"actr": cls.actr, "published": cls.published, "recency": cls.recency}
            return factory[name](**overrides)
        refused = InvalidValueError if isinstance(name, str) else InvalidTypeError
        raise refused(f"preset must be one of {list(PRESETS)}, got {shown(name)}")

    def replace(self, **changes: object) -> SynapseConfig:
        """A copy with fields changed by name, each validated as on construction.

        A name is a field of a group, bare (``keep_bonus``: the names are unique across
        groups) or with its group (``recall.keep_bonus``, as the command line's ``--set``
        takes it), or ``merge_weights`` or ``injection_enabled``. A field of the other
        recall rule is refused: change the rule with a preset.

        Examples
        --------
        >>> config = SynapseConfig().replace(refresh_interval_s=0.0, **{"recall.seeds": 2})
        >>> config.operations.refresh_interval_s, config.recall.seeds
        (0.0, 2)
        >>> SynapseConfig().replace(keep_bonnus=2.0)
        Traceback (most recent call last):
        ...
        synapse_retriever.errors.InvalidValueError: unknown configuration field 'keep_bonnus'
        """
        parts: dict[str, dict[str, Any]] = {}  # values are checked by the constructors
        for name, value in changes.items():
            group, key = self._locate(name)
            parts.setdefault(group, {})[key] = value
        top = parts.pop("", {})
        groups = {group: replace(getattr(self, group), **values) for group, values in parts.items()}
        return replace(self, **top, **groups)

    def value(self, name: str) -> object:
        """The value of a field named as in :meth:`replace`.

        Examples
        --------
        >>> config = SynapseConfig()
        >>> config.value("keep_bonus"), config.value("operations.write_retries")
        (3.0, 8)
        """
        group, key = self._locate(name)
        return getattr(getattr(self, group) if group else self, key)

    def flat(self) -> dict[str, object]:
        """Every field by its bare name, the rule's name first: how reports record it.

        Examples
        --------
        >>> flat = SynapseConfig().flat()
        >>> flat["rule"], flat["keep_bonus"], flat["refresh_interval_s"], "boost" in flat
        ('actr', 3.0, 1.0, False)
        """
        values: dict[str, object] = {"rule": self.rule}
        for part in (self.learning, self.recall, self.spreading, self.operations):
            values.update((name, getattr(part, name)) for name in _names(part))
        values.update(merge_weights=self.merge_weights, injection_enabled=self.injection_enabled)
        return values

    def _locate(self, name: str) -> tuple[str, str]:
        """``(group, field)`` of ``name``, with group ``""`` for the config's own fields."""
        if not isinstance(name, str):
            raise InvalidTypeError(
                f"a field's name must be a str, got {type(name).__name__} {shown(name)}"
            )
        group, _, key = name.rpartition(".")
        for part in ("", *GROUPS):
            held = getattr(self, part) if part else self
            if group in ("", part) and key in _names(held) and (part or key not in GROUPS):
                return part, key
        other = PublishedRule() if isinstance(self.recall, ActrRule) else ActrRule()
        if group in ("", "recall") and key in _names(other):
            raise InvalidValueError(
                f"{key} is a constant of the {other.rule} rule, "
                f"not of this configuration's {self.rule!r} rule"
            )
        raise InvalidValueError(f"unknown configuration field {name!r}")

    def __new__(cls, *args: object, **given: object) -> SynapseConfig:
        # a field given bare (as before the groups) is refused by name, with where it went;
        # pydantic, copy and pickle make one without keywords
        # a dataclass's generated __init__ is checked; a subclass's own takes what it takes
        if cls.__init__ is SynapseConfig.__init__ or "__dataclass_params__" in cls.__dict__:
            for name in given:
                if name not in {known.name for known in fields(cls)}:
                    raise InvalidTypeError(_ungrouped(name))
        return super().__new__(cls)

    def __post_init__(self) -> None:
        for name, kind in (
            ("learning", Learning),
            ("spreading", Spreading),
            ("operations", Operations),
        ):
            _check_type(name, getattr(self, name), kind, f"a {kind.__name__}")
        _check_type(
            "recall", self.recall, (ActrRule, PublishedRule), "an ActrRule or a PublishedRule"
        )
        check_flag("injection_enabled", self.injection_enabled)
        weights = _mapping("merge_weights", self.merge_weights)
        for ns, factor in weights.items():
            validate_namespace(ns)
            _check_unit(f"merge_weights[{ns!r}]", factor)
        object.__setattr__(self, "merge_weights", frozen_mapping(weights))

    def merge_factors(self, active_namespace: str) -> dict[str, float]:
        """Factor of each namespace in the merged graph: 1.0 for the active one.

        ``ephemeral`` is read only when active; namespaces with factor 0 are left out.

        Examples
        --------
        >>> SynapseConfig().merge_factors("branch:main")
        {'branch:main': 1.0, 'personal': 0.8, 'shared': 0.5}
        """
        validate_namespace(active_namespace)
        factors = {active_namespace: 1.0}
        for ns, factor in self.merge_weights.items():
            if ns != active_namespace and ns != "ephemeral" and factor > 0:
                factors[ns] = float(factor)
        return factors


def _names(part: Learning | RecallRule | Spreading | Operations | SynapseConfig) -> list[str]:
    """The fields of a dataclass that its constructor takes, in order."""
    return [f.name for f in fields(part) if f.init]


def _pair(name: str, value: object, what: str) -> tuple[Any, Any]:
    """``value`` as a pair: any iterable of two items but a str (a NumPy array of two too)."""
    pair: tuple[Any, ...] = ()
    if isinstance(value, Iterable) and not isinstance(value, (str, bytes)):
        pair = tuple(value)
    if len(pair) != 2:
        raise InvalidValueError(f"{name} must be a pair {what}, got {shown(value)}")
    return pair[0], pair[1]


def _mapping(name: str, value: object) -> dict[str, float]:
    """``value`` as a dict of its own, if it is a mapping."""
    if not isinstance(value, Mapping):
        raise InvalidTypeError(
            f"{name} must be a mapping of namespace -> number, got {type(value).__name__} "
            f"{shown(value)}"
        )
    return dict(value)


def _check_type(name: str, value: object, kind: type | tuple[type, ...], expected: str) -> None:
    if not isinstance(value, kind):
        raise InvalidTypeError(
            f"{name} must be {expected}, got {type(value).__name__} {shown(value)}"
        )


def check_integer(name: str, value: object, minimum: int) -> None:
    """Refuse ``value`` unless it is an int (not a bool) of at least ``minimum``: a type error
    for no number, a value error for a number it cannot take, both naming ``value``.

    Examples
    --------
    >>> check_integer("hub_degree", 3, 1)
    >>> check_integer("hub_degree", 2.0, 1)
    Traceback (most recent call last):
    ...
    synapse_retriever.errors.InvalidValueError: hub_degree must be an integer >= 1, got 2.0
    """
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise refused_number(value)(f"{name} must be an integer >= {minimum}, got {shown(value)}")


def _check_unit(name: str, value: object) -> None:
    if not _is_number(value) or not 0.0 <= value <= 1.0:  # type: ignore[operator]
        raise refused_number(value)(f"{name} must be a number in [0, 1], got {shown(value)}")


def _check_non_negative(name: str, value: object) -> None:
    if not _is_number(value) or not (math.isfinite(value) and value >= 0):  # type: ignore[arg-type, operator]
        raise refused_number(value)(f"{name} must be a finite number >= 0, got {shown(value)}")


def _check_half_life(name: str, days: float) -> None:
    low, high = HALF_LIFE_DAYS
    if not low <= days <= high:
        raise InvalidValueError(f"{name} must be in [{low:g}, {high:g}] days, got {shown(days)}")


def _check_positive(name: str, value: object) -> None:
    if not _is_number(value) or not (math.isfinite(value) and value > 0):  # type: ignore[arg-type, operator]
        raise refused_number(value)(f"{name} must be a finite number > 0, got {shown(value)}")


def _is_number(value: object) -> bool:
    """An int or a float, not a bool, that a float can hold (``10**400`` cannot:
    ``math.isfinite`` raised OverflowError for it in place of the error naming the field)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return False
    return isinstance(value, float) or abs(value) <= _FLOAT_MAX


_FLOAT_MAX = int(sys.float_info.max)


def _ungrouped(name: str) -> str:
    """What ``SynapseConfig(name=...)`` is told: where the field is, if it is one.

    >>> _ungrouped("max_inject")
    "SynapseConfig has no argument 'max_inject': the constants are in groups; write \
SynapseConfig().replace(max_inject=...) or a preset, SynapseConfig.actr(max_inject=...) \
(the field is config.recall.max_inject)"
    """
    try:
        group, key = SynapseConfig()._locate(name)
    except (InvalidTypeError, InvalidValueError):
        return f"SynapseConfig has no argument {name!r}"
    return (
        f"SynapseConfig has no argument {name!r}: the constants are in groups; write "
        f"SynapseConfig().replace({key}=...) or a preset, SynapseConfig.actr({key}=...) "
        f"(the field is config.{group}.{key})"
    )
