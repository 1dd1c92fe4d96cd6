"""From turns and a query to the assembled context: signals, levels, texts, budget.

Shared by :class:`~synapse_retriever.conversation.ConversationMemory` (persistent turns) and
:func:`~synapse_retriever.conversation.trim_history` (a message list, e.g. from an agent
framework), so both adapters and the memory decide the same way.

Notes
-----
For a query, every turn's relevance is its similarity to the query (one FAISS search);
with ``relevance="relative"`` it is divided by the best turn's, so the best match has
relevance 1. The ``recall_k`` most similar turns are *recalled*: their CHUNKS and
SUMMARY texts are the sentences that match the query (:func:`~.summarize.focus`), so
when the budget condenses them, what the question needs is what stays. Other turns use
their pre-computed condensation, or the extractive default when none is stored yet (it
is cheap; assembling never waits on a background summarizer).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from synapse_retriever._types import FloatArray
from synapse_retriever.conversation.config import ContextConfig
from synapse_retriever.conversation.embed import Embedder, TurnIndex, Vectors, normalized
from synapse_retriever.conversation.importance import habituation, importance, recency
from synapse_retriever.conversation.levels import Level, plan_levels, threshold_level
from synapse_retriever.conversation.lexical import LexicalIndex
from synapse_retriever.conversation.relevance import rrf_order, select_relevant
from synapse_retriever.conversation.summarize import Condensed, focus
from synapse_retriever.tokens import TokenCounter

__all__ = ["AssembledTurn", "Decision", "TurnsView", "plan_context"]


@dataclass(frozen=True)
class AssembledTurn:
    """One turn of an assembled context.

    Attributes
    ----------
    turn_id : int
        The id :meth:`~synapse_retriever.conversation.ConversationMemory.add_turn` returned.
    role : str
        The turn's role (``user``, ``assistant``...).
    level : Level
        ``full``, ``chunks`` or ``summary`` (a ``str`` enum: ``level == "full"`` works).
    text : str
        What goes into the prompt.
    tokens : int
        ``token_counter(text)``.
    importance : float
        The turn's importance for this query, in [0, 1].
    session : str
        The session the turn was added in.
    mode : str
        The processing mode the context was assembled in (``mode="auto"`` resolved).

    Examples
    --------
    >>> from synapse_retriever.conversation import ConversationMemory
    >>> with ConversationMemory(":memory:") as memory:
    ...     _ = memory.add_turn("I moved the deploy to Fridays.", at=0)
    ...     turn = memory.assemble("when do we deploy?", 100, at=0)[0]
    >>> turn.role, turn.level, turn.text, turn.tokens
    ('user', <Level.FULL: 'full'>, 'I moved the deploy to Fridays.', 7)
    """

    turn_id: int
    role: str
    level: Level
    text: str
    tokens: int
    importance: float
    session: str = ""
    mode: str = "conversational"


@dataclass(frozen=True)
class Decision:
    """The level and text of turn ``index`` (position in the view)."""

    index: int
    level: Level
    text: str
    tokens: int
    importance: float


@dataclass
class TurnsView:
    """What the planner reads about the turns, oldest first (row i = turn i).

    ``condensed(i)`` returns the stored condensation of turn ``i`` or None. ``pinned``
    turns are always FULL; ``groups`` are kept or dropped together; a turn that is not
    ``degradable`` is FULL or dropped; ``fixed_tokens`` are added to a turn's cost at
    every level (text that is never condensed, e.g. a tool call's arguments); ``ranking``
    the rows the query needs, best first, as a memory ranks them over its stored indexes
    (BM25, the embedder and novelty fused, speakers and dates raised): the relevance pass
    takes that order; without it (a message list, nothing stored) it fuses BM25, the
    embedder and novelty itself.
    """

    texts: Sequence[str]
    index: TurnIndex
    surprise: FloatArray
    repeats: FloatArray
    boost: FloatArray
    at: FloatArray
    condensed: Callable[[int], Condensed | None]
    pinned: Sequence[bool] | None = None
    groups: Sequence[int | None] | None = None
    degradable: Sequence[bool] | None = None
    fixed_tokens: Sequence[int] | None = None
    full_tokens: Sequence[int] | None = None
    ranking: Sequence[int] | None = None


def importances(
    view: TurnsView,
    query: Vectors | None,
    config: ContextConfig,
    *,
    now: float,
    mode: str | None = None,
) -> tuple[FloatArray, FloatArray]:
    """(importance, similarity to the query) of every turn."""
    n = len(view.texts)
    pinned = np.asarray(view.pinned if view.pinned is not None else [False] * n, dtype=bool)
    order = np.cumsum(~pinned[::-1])[::-1]  # unpinned turns from here to the end
    age_turns = np.where(pinned, 0, order - 1).astype(np.float64)
    age_days = np.maximum(0.0, now - view.at) / 86_400.0
    similarity = view.index.similarities(query) if query is not None else np.zeros(n)
    relevance = similarity
    if config.relevance == "relative" and n and similarity.max() > 0:
        relevance = similarity / similarity.max()
    score = importance(
        recency(age_turns, config.recency_half_life_turns, age_days, config.recency_half_life_days),
        view.surprise,
        relevance,
        habituation(view.repeats, config.habituation_half_count),
        weights=config.weights,
        temperature=config.temperature(mode),
        boost=view.boost,
    )
    return np.asarray(score, dtype=np.float64).reshape(n), similarity


def plan_context(
    view: TurnsView,
    query: str | None,
    budget: int,
    *,
    config: ContextConfig,
    embedder: Embedder,
    token_counter: TokenCounter,
    fallback: Callable[[str], Condensed],
    now: float,
    mode: str | None = None,
    query_vector: Vectors | None = None,
) -> list[Decision]:
    """The kept turns, oldest first, with their level and text; their tokens fit ``budget``.

    ``query_vector`` is the query's embedding if the caller has it (else it is embedded).
    """
    n = len(view.texts)
    if n == 0:
        return []
    if query is None or not query.strip():
        query_vector = None
    elif query_vector is None:
        query_vector = normalized(embedder.embed([query]), embedder.dim)[0]
    scores, similarity = importances(view, query_vector, config, now=now, mode=mode)
    recalled: set[int] = set()
    if query_vector is not None and config.recall_k > 0:
        recalled = {row for row, _ in view.index.top(query_vector, config.recall_k)}
    degradable = view.degradable if view.degradable is not None else [True] * n
    fixed = view.fixed_tokens if view.fixed_tokens is not None else [0] * n
    full_tokens = view.full_tokens
    pinned = view.pinned if view.pinned is not None else [False] * n
    unpinned = [i for i in range(n) if not pinned[i]]
    if config.working_share < 1.0 and config.working_memory:
        span = working_span(
            [full_tokens[i] if full_tokens is not None else token_counter(view.texts[i])
             for i in unpinned[-config.working_memory :]],
            config.working_memory,
            config.working_share * budget,
        )  # fmt: skip
        config = config.replace(working_memory=span)
    # Working memory is never condensed unless it may shrink: skip condensing it.
    working = set()
    if config.overflow == "raise" and config.working_memory:
        working = set(unpinned[-config.working_memory :])
    whole = [
        (full_tokens[i] if full_tokens is not None else token_counter(text)) + fixed[i]
        for i, text in enumerate(view.texts)
    ]
    picked: dict[int, tuple[Level, str, int]] = {}
    if config.assembly == "relevance" and query is not None and query_vector is not None:
        picked = _relevance_pass(
            view, query, query_vector, similarity, whole, budget,
            config=config, embedder=embedder, token_counter=token_counter,
        )  # fmt: skip
    # The gradient plans only the turns it could keep (the result is the same): a turn
    # below the SUMMARY threshold is dropped whatever the budget, unless it must stay
    # (pinned, working memory, picked) or is in a group (kept or dropped with its
    # members); and turns are dropped least important first, so once the turns that must
    # stay and the more important ones at their cheapest exceed the budget, every less
    # important ungrouped turn is dropped too.
    thresholds = (config.full_threshold, config.chunks_threshold, config.summary_threshold)
    groups = view.groups if view.groups is not None else [None] * n
    tail = set(unpinned[-config.working_memory :]) if config.working_memory else set()
    must = [i for i in range(n) if pinned[i] or i in tail or i in picked]
    optional = sorted(
        (
            i
            for i in range(n)
            if not (pinned[i] or i in tail or i in picked)
            and (
                groups[i] is not None
                or threshold_level(float(scores[i]), thresholds) is not Level.DROPPED
            )
        ),
        key=lambda i: (groups[i] is None, -float(scores[i]), -i),
    )
    texts: dict[int, tuple[str, str, str]] = {}
    cost_of: dict[int, tuple[int, int, int]] = {}

    def add(i: int) -> None:
        text = view.texts[i]
        if i in picked:
            _, chosen, tokens = picked[i]
            texts[i], cost_of[i] = (chosen, chosen, chosen), (tokens,) * 3
        elif not degradable[i] or not text.strip() or pinned[i] or i in working:
            texts[i], cost_of[i] = (text, text, text), (whole[i],) * 3
        else:
            if i in recalled and query_vector is not None:
                condensed = focus(
                    text,
                    query_vector,
                    embedder,
                    chunks_ratio=config.chunks_ratio,
                    token_counter=token_counter,
                )
            else:
                condensed = view.condensed(i) or fallback(text)
            texts[i] = (text, condensed.chunks, condensed.summary)
            cost_of[i] = (
                whole[i],
                token_counter(condensed.chunks) + fixed[i],
                token_counter(condensed.summary) + fixed[i],
            )

    for i in must:
        add(i)
    # What plan_levels needs whatever happens: the turns that must stay FULL and the other
    # members of their groups at their cheapest. Above the budget, working memory may
    # shrink and free room: then every candidate is planned.
    floor = sum(cost_of[i][0] for i in must)
    held = {groups[i] for i in must if groups[i] is not None}
    grouped = [i for i in optional if groups[i] is not None]
    for i in grouped:
        add(i)
        if groups[i] in held:
            floor += min(cost_of[i])
    bounded = floor <= budget
    for i in optional[len(grouped) :]:
        add(i)
        if bounded:
            floor += min(cost_of[i])
            if floor > budget:
                break
    planned = sorted(texts)
    costs = [cost_of[i] for i in planned]
    levels = plan_levels(
        [float(scores[i]) for i in planned],
        costs,
        budget,
        working_memory=config.working_memory,
        thresholds=thresholds,
        demotion=config.demotion,
        pinned=[bool(pinned[i]) or i in picked for i in planned],
        groups=[groups[i] for i in planned],
        overflow=config.overflow,
    )
    slot = {Level.FULL: 0, Level.CHUNKS: 1, Level.SUMMARY: 2}
    decisions = []
    for i, level, cost in zip(planned, levels, costs, strict=True):
        if i in picked:  # kept by the relevance pass (pinned above) at its own level
            level = picked[i][0]
        if level is not Level.DROPPED:
            chosen = texts[i][slot[level]]
            tokens = (cost[0] if i in picked else cost[slot[level]]) - fixed[i]
            decisions.append(Decision(i, level, chosen, tokens, float(scores[i])))
    return decisions


def working_span(tokens: Sequence[int], size: int, room: float) -> int:
    """How many of the newest turns (``tokens``, oldest first) working memory holds.

    The newest turn always; then older ones, up to ``size`` turns in all, while their
    tokens together stay within ``room``.

    Examples
    --------
    >>> working_span([50, 300, 40, 200], 5, 250.0)  # 200, then 40: 240; 300 more passes
    2
    >>> working_span([50, 300, 40, 900], 5, 250.0)  # the newest turn always
    1
    """
    if size == 0 or not tokens:
        return 0
    used = tokens[-1]
    span = 1
    for cost in reversed(tokens[: len(tokens) - 1]):
        if span == size or used + cost > room:
            break
        used += cost
        span += 1
    return span


def _relevance_pass(
    view: TurnsView,
    query: str,
    query_vector: Vectors,
    similarity: FloatArray,
    whole: Sequence[int],
    budget: int,
    *,
    config: ContextConfig,
    embedder: Embedder,
    token_counter: TokenCounter,
) -> dict[int, tuple[Level, str, int]]:
    """Relevance-first assembly (:mod:`~.relevance`): pick the turns the query needs.

    ``whole[i]`` is turn i's cost FULL. Returns each picked turn's level, text and cost;
    the caller keeps them like pinned turns. Grouped turns (tool calls) are left to the
    gradient.
    """
    n = len(view.texts)
    pinned = [bool(p) for p in view.pinned] if view.pinned is not None else [False] * n
    groups = view.groups if view.groups is not None else [None] * n
    degradable = view.degradable if view.degradable is not None else [True] * n
    fixed = view.fixed_tokens if view.fixed_tokens is not None else [0] * n
    unpinned = [i for i in range(n) if not pinned[i]]
    working = unpinned[len(unpinned) - min(config.working_memory, len(unpinned)) :]
    always = sum(whole[i] for i in range(n) if pinned[i])
    while working and config.overflow == "shrink":
        if always + sum(whole[i] for i in working) <= budget:
            break
        working = working[1:]
    room = budget - always - sum(whole[i] for i in working)
    room = int(room * config.relevance_share)
    if room <= 0:
        return {}
    skip = set(working)
    candidates = [
        i
        for i in range(n)
        if not pinned[i] and i not in skip and groups[i] is None and view.texts[i].strip()
    ]
    if not candidates:
        return {}
    if view.ranking is not None:  # the memory's ranking over its stored indexes
        eligible = set(candidates)
        order = [i for i in view.ranking if i in eligible]
        return _pick(view, order, query_vector, whole, fixed, degradable, room, embedder,
                     token_counter)  # fmt: skip
    lexical = LexicalIndex(view.texts[i] for i in candidates).scores(query)
    semantic = [float(similarity[i]) for i in candidates]
    rankings = [lexical, semantic]
    weights = [config.lexical_weight, 1.0]
    if config.novelty_weight > 0:
        rankings.append([float(view.surprise[i]) for i in candidates])
        weights.append(config.novelty_weight)
    order = [candidates[j] for j in rrf_order(rankings, k=config.rrf_k, weights=weights)]
    return _pick(view, order, query_vector, whole, fixed, degradable, room, embedder, token_counter)


def _pick(
    view: TurnsView,
    order: Sequence[int],
    query_vector: Vectors,
    whole: Sequence[int],
    fixed: Sequence[int],
    degradable: Sequence[bool],
    room: int,
    embedder: Embedder,
    token_counter: TokenCounter,
) -> dict[int, tuple[Level, str, int]]:
    """The turns of ``order`` (best first) that fit ``room``: whole, or the first that does
    not fit cut around the query (:func:`~.relevance.select_relevant`)."""
    chunked: dict[int, tuple[Level, str]] = {}

    def chunk(i: int, left: int) -> tuple[str, int] | None:
        """The turn's sentences around the query cut to ``left``, else its best one."""
        full = whole[i] - fixed[i]
        room_here = left - fixed[i]
        if not degradable[i] or room_here <= 0 or full <= 0:
            return None
        condensed = focus(
            view.texts[i],
            query_vector,
            embedder,
            chunks_ratio=min(1.0, room_here / full),
            token_counter=token_counter,
        )
        for level, text in ((Level.CHUNKS, condensed.chunks), (Level.SUMMARY, condensed.summary)):
            tokens = token_counter(text) + fixed[i]
            if text and tokens <= left:
                chunked[i] = (Level.FULL if text == view.texts[i] else level, text)
                return text, tokens
        return None

    picked: dict[int, tuple[Level, str, int]] = {}
    for pick in select_relevant(order, whole, room, chunk):
        level, text = (Level.FULL, view.texts[pick.index]) if pick.full else chunked[pick.index]
        picked[pick.index] = (level, text, pick.tokens)
    return picked
