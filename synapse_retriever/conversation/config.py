"""Every constant of conversation memory in one validated, immutable object.

Three presets. The default, ``ContextConfig()``, assembles relevance first: after the
newest turns (working memory, at most a tenth of the budget), the turns the query needs
go in whole, ranked by fusing BM25, the embedder's similarity and novelty; the
importance gradient gets what is left (:mod:`~synapse_retriever.conversation.relevance`). It
keeps the evidence real questions need (RealMem; see the docs, Benchmarks: Conversation
memory). :meth:`ContextConfig.published` is the method as published (weights 0.4
recency, 0.3 surprise, 0.2 relevance, 0.1 habituation; thresholds 0.7 / 0.4 / 0.2;
working memory of five turns whatever the budget; the least important turn demoted
first; replay adds 0.2). :meth:`ContextConfig.gradient` is the default of release 0.1:
the published gradient with relative relevance, recall around the query, fading
demotion and a replay of 0.05.

Examples
--------
>>> ContextConfig().working_memory, ContextConfig().temperature("analytical")
(5, 1.3)
>>> ContextConfig.published().weights
(0.4, 0.3, 0.2, 0.1)
>>> ContextConfig(chunks_threshold=0.8)
Traceback (most recent call last):
...
synapse_retriever.errors.InvalidValueError: thresholds must satisfy summary_threshold <= \
chunks_threshold <= full_threshold, got 0.2, 0.8, 0.7
"""

from __future__ import annotations

import dataclasses
import math
import sys
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from synapse_retriever.config import frozen_mapping
from synapse_retriever.conversation.importance import Weights
from synapse_retriever.errors import InvalidTypeError, InvalidValueError, refused_number, shown

__all__ = ["MODES", "PRESETS", "ContextConfig", "checked_context"]

MODES = ("analytical", "creative", "conversational")
"""The processing modes; each has a temperature."""

PRESETS = ("default", "published", "gradient")
"""Names accepted by :meth:`ContextConfig.preset`."""


def _temperatures() -> Mapping[str, float]:
    return frozen_mapping({"analytical": 1.3, "creative": 0.8, "conversational": 1.0})


@dataclass(frozen=True)
class ContextConfig:
    """The constants of conversation memory, validated on construction.

    Parameters
    ----------
    working_memory : int
        The last this-many turns are always FULL (working memory)...
    working_share : float
        ...within this share, in (0, 1], of the budget: the newest turn always, older
        ones while their tokens fit the share. 1: as published, the whole budget (where
        working memory alone exceeds it, ``overflow`` decides).
    recency_weight, surprise_weight, relevance_weight, habituation_weight : float
        Weights of the four importance signals (each in [0, 1]).
    full_threshold, chunks_threshold, summary_threshold : float
        Beyond working memory a turn is FULL above ``full_threshold``, CHUNKS above
        ``chunks_threshold``, SUMMARY above ``summary_threshold``, else DROPPED.
    chunks_ratio, summary_ratio : float
        Target share of a turn's tokens kept by CHUNKS (key sentences) and SUMMARY (one
        sentence).
    temperatures : Mapping[str, float]
        Importance multiplier of each mode: analytical keeps more detail, creative less.
    mode : str
        The mode used when :meth:`~synapse_retriever.conversation.ConversationMemory.assemble`
        is given none.
    recency_half_life_turns : float
        Recency halves every this-many turns of age.
    recency_half_life_days : float or None
        If set, recency also halves every this-many days of wall-clock age.
    habituation_similarity : float
        Earlier turns at least this similar count as repeats of a turn.
    habituation_half_count : float
        Habituation = 1 − 2^(−repeats / habituation_half_count).
    relevance : {"absolute", "relative"}
        ``absolute``: relevance is the similarity to the query. ``relative``: divided by
        the best turn's similarity, so the best match always has relevance 1.
    recall_k : int
        The query's ``recall_k`` nearest turns (a FAISS search) are *recalled*: at CHUNKS
        or SUMMARY their text is the sentences that match the query best, not the
        query-blind pre-computed condensation. 0 disables recall.
    demotion : {"importance", "fade"}
        The budget rule's order. ``importance``: demote the least important turn one
        level, repeatedly, so it is dropped before the next loses any detail (as
        published). ``fade``: condense every turn, least important first, before dropping
        any, least important first, so graded detail buys room for more turns.
    consolidation_interval : int
        Consolidation and replay run in the background every this-many turns.
    consolidation_ages : tuple[int, int]
        Turns aged within these bounds (inclusive, in turns; the newest turn has age 0)
        get their chunks and summary pre-computed...
    consolidation_threshold : float
        ...if their importance is above this.
    replay_window : int
        Themes are extracted from the last this-many turns...
    replay_boost : float
        ...and each of those turns that matches a theme gains this much importance
        (persisted, capped at 1 in total).
    replay_themes : int
        At most this many themes per replay.
    overflow : {"raise", "shrink"}
        When working memory alone exceeds the budget: ``raise``
        :class:`~synapse_retriever.conversation.ContextBudgetError`, or ``shrink`` working
        memory to the newest whole turns that fit (a turn is never cut).
    assembly : {"relevance", "gradient"}
        ``relevance``: after working memory, the turns the query needs come first, whole
        (or chunked around the query when a turn is longer than what is left), ranked by
        reciprocal-rank fusion of BM25, the embedder's similarity and novelty; the
        gradient gets what remains (see :mod:`~synapse_retriever.conversation.relevance`).
        ``gradient``: every turn's level comes from its importance (the budget rule).
    relevance_share : float
        With ``assembly="relevance"``: the share, in [0, 1], of the budget left after
        working memory that the relevance pass may fill.
    rrf_k : int
        The reciprocal-rank fusion constant k (>= 1): 1 / (k + rank).
    lexical_weight : float
        The weight (> 0) of the BM25 rank in the fusion, the embedder's being 1...
    novelty_weight : float
        ...and of the novelty rank (the turn's surprise when it was added), >= 0:
        ``lexical_weight / (k + rank_bm25) + 1 / (k + rank_embedder)
        + novelty_weight / (k + rank_novelty)``; 0 leaves novelty out.
    edge_decay_rate : float
        The temporal graph's edges decay as ``exp(−edge_decay_rate × age_days)`` (> 0;
        0.05 per day: a half-life of 13.9 days) (:mod:`~synapse_retriever.conversation.graph`).
    reinforcement_threshold : int
        Used traversals (>= 1) that strengthen an edge by one reinforcement.
    graph_depth, graph_damping, graph_fan_out : int, float, int
        The graph walk of ``retrieve``: hops at most (>= 1), the activation kept per hop
        (in (0, 1]), the strongest edges followed per node (>= 1).
    retrieval_rrf_k, retrieval_lexical_weight : int, float
        ``retrieve``'s fusion of its two channels:
        ``retrieval_lexical_weight / (k + rank_bm25) + 1 / (k + rank_embedder)`` with k =
        ``retrieval_rrf_k`` (>= 1; the weight > 0;
        :mod:`~synapse_retriever.conversation.graph.hybrid` says how they were chosen).
    neighbour_share : float
        In ``retrieve``, in [0, 1]: a turn gains this × the mode's graph weight × the
        best fused score among its time neighbours in the graph (analytical 0.7,
        conversational 0.5, creative 0.3; :mod:`~synapse_retriever.conversation.graph.hybrid`
        says how the value was chosen).
    speaker_boost, date_boost, date_margin_days : float, float, float
        In ``retrieve`` and a query's assembly, each >= 0: a fused score is multiplied
        by ``1 + speaker_boost`` if the turn was said by a speaker the question names
        (``add_turn(..., speaker=...)``), and by ``1 + date_boost`` if it was said in
        the time the question names ("on 13 October 2023", "in July 2023") or up to
        ``date_margin_days`` after (:mod:`~synapse_retriever.conversation.graph.cues` says
        how the values were chosen); 0 turns a cue off.

    Examples
    --------
    >>> config = ContextConfig(working_memory=3, mode="analytical")
    >>> config.working_memory, config.temperature(), config.temperature("creative")
    (3, 1.3, 0.8)
    >>> ContextConfig().assembly, ContextConfig.published().assembly
    ('relevance', 'gradient')
    """

    working_memory: int = 5
    recency_weight: float = 0.4
    surprise_weight: float = 0.3
    relevance_weight: float = 0.2
    habituation_weight: float = 0.1
    full_threshold: float = 0.7
    chunks_threshold: float = 0.4
    summary_threshold: float = 0.2
    chunks_ratio: float = 0.3
    summary_ratio: float = 0.1
    temperatures: Mapping[str, float] = field(default_factory=_temperatures)
    mode: str = "conversational"
    recency_half_life_turns: float = 20.0
    recency_half_life_days: float | None = None
    habituation_similarity: float = 0.9
    habituation_half_count: float = 1.0
    relevance: Literal["absolute", "relative"] = "relative"
    recall_k: int = 32
    demotion: Literal["importance", "fade"] = "fade"
    consolidation_interval: int = 10
    consolidation_ages: tuple[int, int] = (5, 20)
    consolidation_threshold: float = 0.2
    replay_window: int = 10
    replay_boost: float = 0.05
    replay_themes: int = 5
    overflow: Literal["raise", "shrink"] = "raise"
    assembly: Literal["gradient", "relevance"] = "relevance"
    relevance_share: float = 1.0
    rrf_k: int = 60
    lexical_weight: float = 1.0
    novelty_weight: float = 0.5
    working_share: float = 0.1
    edge_decay_rate: float = 0.05
    reinforcement_threshold: int = 3
    graph_depth: int = 2
    graph_damping: float = 0.5
    graph_fan_out: int = 20
    retrieval_rrf_k: int = 30
    retrieval_lexical_weight: float = 3.0
    neighbour_share: float = 0.6
    speaker_boost: float = 0.5
    date_boost: float = 1.0
    date_margin_days: float = 7.0

    @classmethod
    def published(cls, **changes: Any) -> ContextConfig:
        """The method as published: the importance gradient alone, five turns of working
        memory whatever the budget, absolute relevance, no query recall,
        least-important-first demotion, a replay boost of 0.2 (the weights, thresholds,
        ratios and temperatures are the published ones in every preset)."""
        values: dict[str, Any] = {
            "assembly": "gradient",
            "working_share": 1.0,
            "relevance": "absolute",
            "recall_k": 0,
            "demotion": "importance",
            "replay_boost": 0.2,
        }
        return cls(**{**values, **changes})

    @classmethod
    def gradient(cls, **changes: Any) -> ContextConfig:
        """The default of release 0.1: the importance gradient alone (no relevance pass),
        five turns of working memory whatever the budget, with the default's relative
        relevance, recall around the query, fading demotion and replay.

        It spreads a budget over many condensed turns: it keeps short planted facts well
        and the evidence of real questions badly (see the docs, Benchmarks).

        Examples
        --------
        >>> config = ContextConfig.gradient()
        >>> config.assembly, config.working_share, config.demotion
        ('gradient', 1.0, 'fade')
        """
        values: dict[str, Any] = {"assembly": "gradient", "working_share": 1.0}
        return cls(**{**values, **changes})

    @classmethod
    def preset(cls, name: str, **changes: Any) -> ContextConfig:
        """A named preset (``default``, ``published``, ``gradient``) with ``changes``.

        Examples
        --------
        >>> ContextConfig.preset("published", working_memory=3).working_memory
        3
        """
        if name == "published":
            return cls.published(**changes)
        if name == "default":
            return cls(**changes)
        if name == "gradient":
            return cls.gradient(**changes)
        raise InvalidValueError(f"preset must be one of {PRESETS}, got {shown(name)}")

    def replace(self, **changes: Any) -> ContextConfig:
        """A copy with ``changes`` applied (validated)."""
        return dataclasses.replace(self, **changes)

    @property
    def weights(self) -> Weights:
        """(recency, surprise, relevance, habituation) weights."""
        return (
            self.recency_weight,
            self.surprise_weight,
            self.relevance_weight,
            self.habituation_weight,
        )

    def temperature(self, mode: str | None = None) -> float:
        """The temperature of ``mode`` (default: the configured mode)."""
        mode = self.mode if mode is None else mode
        if not isinstance(mode, str) or mode not in self.temperatures:  # a list: unhashable
            raise (InvalidValueError if isinstance(mode, str) else InvalidTypeError)(
                f"mode must be one of {sorted(self.temperatures)}, got {shown(mode)}"
            )
        return float(self.temperatures[mode])

    def __post_init__(self) -> None:
        for name in (
            "recency_weight",
            "surprise_weight",
            "relevance_weight",
            "habituation_weight",
            "full_threshold",
            "chunks_threshold",
            "summary_threshold",
            "habituation_similarity",
            "consolidation_threshold",
            "replay_boost",
            "relevance_share",
        ):
            _check_unit(name, getattr(self, name))
        for name in ("chunks_ratio", "summary_ratio"):
            value = getattr(self, name)
            _check_unit(name, value)
            if value == 0:
                raise InvalidValueError(f"{name} must be in (0, 1], got {shown(value)}")
        if not self.summary_threshold <= self.chunks_threshold <= self.full_threshold:
            raise InvalidValueError(
                "thresholds must satisfy summary_threshold <= chunks_threshold <= "
                f"full_threshold, got {self.summary_threshold}, {self.chunks_threshold}, "
                f"{self.full_threshold}"
            )
        if self.summary_ratio > self.chunks_ratio:
            raise InvalidValueError(
                f"summary_ratio must be <= chunks_ratio, got {self.summary_ratio} > "
                f"{self.chunks_ratio}"
            )
        for name, minimum in (
            ("working_memory", 0),
            ("recall_k", 0),
            ("consolidation_interval", 1),
            ("replay_window", 1),
            ("replay_themes", 0),
            ("rrf_k", 1),
            ("retrieval_rrf_k", 1),
            ("reinforcement_threshold", 1),
            ("graph_depth", 1),
            ("graph_fan_out", 1),
        ):
            _check_int(name, getattr(self, name), minimum)
        _check_positive("recency_half_life_turns", self.recency_half_life_turns)
        _check_positive("habituation_half_count", self.habituation_half_count)
        _check_positive("lexical_weight", self.lexical_weight)
        _check_positive("retrieval_lexical_weight", self.retrieval_lexical_weight)
        if not _is_number(self.neighbour_share) or not 0 <= self.neighbour_share <= 1:
            raise refused_number(self.neighbour_share)(
                f"neighbour_share must be a number in [0, 1], got {shown(self.neighbour_share)}"
            )
        for name in ("speaker_boost", "date_boost", "date_margin_days"):
            value = getattr(self, name)
            if not _is_number(value) or not (math.isfinite(value) and value >= 0):
                raise refused_number(value)(
                    f"{name} must be a finite number >= 0, got {shown(value)}"
                )
        _check_positive("edge_decay_rate", self.edge_decay_rate)
        if not _is_number(self.graph_damping) or not 0.0 < self.graph_damping <= 1.0:
            raise refused_number(self.graph_damping)(
                f"graph_damping must be a number in (0, 1], got {shown(self.graph_damping)}"
            )
        if not _is_number(self.novelty_weight) or not (
            math.isfinite(self.novelty_weight) and self.novelty_weight >= 0
        ):
            raise refused_number(self.novelty_weight)(
                f"novelty_weight must be a finite number >= 0, got {shown(self.novelty_weight)}"
            )
        if not _is_number(self.working_share) or not 0.0 < self.working_share <= 1.0:
            raise refused_number(self.working_share)(
                f"working_share must be a number in (0, 1], got {shown(self.working_share)}"
            )
        if self.recency_half_life_days is not None:
            _check_positive("recency_half_life_days", self.recency_half_life_days)
        for name, allowed in (
            ("relevance", ("absolute", "relative")),
            ("demotion", ("importance", "fade")),
            ("overflow", ("raise", "shrink")),
            ("assembly", ("gradient", "relevance")),
        ):
            if getattr(self, name) not in allowed:
                raise InvalidValueError(
                    f"{name} must be one of {allowed}, got {shown(getattr(self, name))}"
                )
        given = self.consolidation_ages  # any iterable of two (a NumPy array too), not a str
        usable = isinstance(given, Iterable) and not isinstance(given, (str, bytes))
        ages = tuple(given) if usable else ()
        if len(ages) != 2:
            raise InvalidValueError(f"consolidation_ages must be (low, high), got {shown(ages)}")
        for i, age in enumerate(ages):
            _check_int(f"consolidation_ages[{i}]", age, 0)
        if ages[0] > ages[1]:
            raise InvalidValueError(
                f"consolidation_ages must satisfy low <= high, got {shown(ages)}"
            )
        if not isinstance(self.temperatures, Mapping):
            raise InvalidTypeError(
                f"temperatures must be a mapping, got {type(self.temperatures).__name__} "
                f"{shown(self.temperatures)}"
            )
        temperatures = dict(self.temperatures)
        for mode, value in temperatures.items():
            if not isinstance(mode, str):
                raise InvalidTypeError(f"temperatures keys must be str, got {shown(mode)}")
            _check_positive(f"temperatures[{mode!r}]", value)
        if not isinstance(self.mode, str) or self.mode not in temperatures:  # a list: unhashable
            raise (InvalidValueError if isinstance(self.mode, str) else InvalidTypeError)(
                f"mode must be one of {sorted(temperatures)}, got {shown(self.mode)}"
            )
        object.__setattr__(self, "temperatures", frozen_mapping(temperatures))
        object.__setattr__(self, "consolidation_ages", (int(ages[0]), int(ages[1])))


def checked_context(config: object) -> ContextConfig | None:
    """``config``, a :class:`ContextConfig` or None; anything else (a dict of its fields, a
    string) is refused, never read as the default.

    Examples
    --------
    >>> checked_context(None) is None
    True
    >>> checked_context({"overflow": "shrink"})
    Traceback (most recent call last):
    ...
    synapse_retriever.errors.InvalidTypeError: config must be a ContextConfig, got dict \
{'overflow': 'shrink'}
    """
    if config is not None and not isinstance(config, ContextConfig):
        raise InvalidTypeError(
            f"config must be a ContextConfig, got {type(config).__name__} {shown(config)}"
        )
    return config


def _is_number(value: object) -> bool:
    """An int or a float, not a bool, that a float can hold (``10**400`` cannot)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return False
    return isinstance(value, float) or abs(value) <= _FLOAT_MAX


def _check_unit(name: str, value: object) -> None:
    if not _is_number(value) or not 0.0 <= value <= 1.0:  # type: ignore[operator]
        raise refused_number(value)(f"{name} must be a number in [0, 1], got {shown(value)}")


def _check_positive(name: str, value: object) -> None:
    if not _is_number(value) or not (math.isfinite(value) and value > 0):  # type: ignore[arg-type, operator]
        raise refused_number(value)(f"{name} must be a finite number > 0, got {shown(value)}")
    if value < sys.float_info.min:  # type: ignore[operator]
        raise InvalidValueError(  # ln 2 / value overflows: a turn of age 0 decayed to NaN
            f"{name} must be at least {sys.float_info.min!r} (a float's smallest normal "
            f"number), got {shown(value)}"
        )


def _check_int(name: str, value: object, minimum: int) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or not minimum <= value <= _INT_MAX:
        raise refused_number(value)(
            f"{name} must be an integer >= {minimum} and <= 2**53, got {shown(value)}"
        )


_INT_MAX = 2**53
"""The largest count a setting may hold: every int up to it is a float exactly."""
_FLOAT_MAX = int(sys.float_info.max)
