"""From turns and a query to the assembled context: which turns, at which level, within a budget.

Shared by :class:`~synapse_retriever.conversation.ConversationMemory` (persistent turns) and
:func:`~synapse_retriever.conversation.trim_history` (a message list, e.g. from an agent
framework), so both adapters and the memory decide the same way. :func:`plan_context` runs
the steps below, each a function of its own.

Notes
-----
Every turn is shown at one of four levels of detail: FULL (its text verbatim), CHUNKS (its
key sentences, about ``chunks_ratio`` = 0.3 of its tokens), SUMMARY (one sentence, about
``summary_ratio`` = 0.1) or DROPPED. The kept turns' tokens, each with its ``fixed_tokens``
(text never condensed: a tool call's arguments, a caller's per-turn formatting), fit the
budget; no turn is cut mid-text. Constants are :class:`~.config.ContextConfig`'s, shown
with their defaults.

1. **Importance** (:func:`importances`; the signals in :mod:`~.importance`). For query q::

       importance(i) = clip((0.4 × recency(i) + 0.3 × surprise(i) + 0.2 × relevance(i, q)
                             + 0.1 × (1 − habituation(i))) × temperature + boost(i), 0, 1)

   ``recency = 2^(−age / 20)``, age in unpinned turns from the newest (a pinned turn is
   age 0), times ``2^(−days / recency_half_life_days)`` if set; ``relevance`` is the
   similarity to q (divided by the best turn's: ``relevance="relative"``; 0 without a
   query); ``surprise = 1 − the greatest similarity to an earlier turn``;
   ``habituation = 1 − 2^(−repeats)``, repeats the earlier turns at least 0.9 similar;
   temperature 1.3 ``analytical``, 0.8 ``creative``, 1.0 ``conversational``;
   ``boost`` is the replay's reinforcement.
2. **Working memory** (:func:`working_span`): the newest unpinned turn, then older ones, up
   to ``working_memory`` = 5 turns in all, while together (fixed tokens included) they fit
   ``working_share`` = 0.1 of the budget (1.0: the last 5 whatever their size, as
   published). Where the newest turn is in a group (a tool's result), working memory
   reaches back to the group's first turn: a tool call and all its results are the newest
   step, whole. Working memory and pinned turns are FULL.
3. **Relevance first** (``assembly="relevance"`` with a query; :mod:`~.relevance`): the
   other ungrouped turns, ranked by BM25, the embedder and novelty fused by reciprocal
   rank, fill up to ``relevance_share`` of the room working memory and pinned turns leave,
   each whole, or cut around the query if it is the first that does not fit. These
   *picked* turns are kept like pinned ones, at the level they were cut to.
4. **Candidates** (:func:`candidates`): the turns the gradient plans. Those that must stay
   (pinned, working memory, picked) and every grouped turn; of the others, those with
   importance above ``summary_threshold`` = 0.2 (at or below it, a turn is DROPPED
   whatever the budget), walked most important first (newest first on ties): once the
   must-stay turns FULL, the other members of their groups at their cheapest and the
   walked turns at their cheapest exceed the budget, the less important ones are left out
   (the budget rule drops least important first). Nothing is left out when the must-stay
   turns alone exceed the budget (with ``overflow="shrink"`` working memory may then
   shrink and free room). The levels are those of planning every turn
   (``tests/conversation/test_gradient_pruning.py``).
5. **Texts and costs** (:func:`texts_and_costs`): each candidate's text and tokens at FULL,
   CHUNKS and SUMMARY. A turn that is pinned, not degradable, blank, or in working memory
   (unless ``overflow="shrink"``, which may condense it) is whole at every level; a
   picked turn is what the relevance pass cut it to. Any other turn is condensed: the
   ``recall_k`` = 32 turns most similar to the query (*recalled*) to their sentences that
   match it (:func:`~.summarize.focus`), so what the question needs is what stays; the
   rest to the condensation consolidation stored, else the extractive default on the spot
   (assembling never waits on a background summarizer).
6. **Decision** (:func:`decide`, the rule of :func:`~.levels.plan_levels`): FULL above
   ``full_threshold`` = 0.7, CHUNKS above ``chunks_threshold`` = 0.4, SUMMARY above
   ``summary_threshold`` = 0.2, else DROPPED; while the total exceeds the budget, one turn
   is demoted one level at a time, never all at once: ``demotion="fade"`` condenses every
   turn (least important first) before it drops any, then gives room left over back to
   the most important; ``"importance"`` (as published) demotes the least important turn
   until it is dropped, then the next. If working memory and pinned turns (with the
   other members of their groups at their cheapest) alone exceed the budget,
   :class:`~.levels.ContextBudgetError` (with
   ``overflow="shrink"``, the oldest turns of working memory become ordinary turns). A
   picked turn keeps its level.

References
----------
The conversation-memory design ("Neuromorphic Context Management"): importance from decay
(0.4), surprise (0.3), relevance (0.2) and habituation (0.1), scaled by temperature (1.3
analytical, 0.8 creative); FULL, CHUNKS (0.3 of the tokens), SUMMARY (0.1) and DROPPED at
importance 0.7, 0.4 and 0.2; the last 5 turns verbatim (working memory); continuous
degradation within a constant token budget rather than batch summarization; condensations
pre-computed in the background for turns aged 5 to 20. It draws on Eichenbaum (2017),
hippocampal-cortical interactions, and Stickgold and Walker (2013), sleep consolidation.
Cormack, Clarke and Büttcher (2009) for reciprocal rank fusion; Robertson and Zaragoza
(2009) for BM25 (the relevance pass).

Examples
--------
Three turns whose FULL, CHUNKS and SUMMARY texts cost 100, 30 and 10 tokens, importance
0.9, 0.5 and 0.0, the newest in working memory, a budget of 125. Candidates: the newest
(100 FULL), then turn 0 at its cheapest (110) and turn 1 (120); both kept. Decision: turn 0
is FULL by threshold, turn 1 CHUNKS, 230 in all; condensed least important first, turn 1
to SUMMARY (210), turn 0 to CHUNKS (140) and to SUMMARY (120):

>>> from synapse_retriever.conversation import ContextConfig
>>> importance = [0.9, 0.5, 0.0]
>>> costs = {i: (100, 30, 10) for i in range(3)}
>>> candidates(importance, costs.__getitem__, 125, must=[2], groups=[None] * 3,
...            summary_threshold=0.2)
[0, 1, 2]
>>> turns = [Candidate(i, importance[i], (f"turn {i}", f"chunks {i}", f"summary {i}"),
...                    costs[i]) for i in range(3)]
>>> for d in decide(turns, 125, working_memory=1, config=ContextConfig()):
...     print(d.index, d.level.value, d.text, d.tokens)
0 summary summary 0 10
1 summary summary 1 10
2 full turn 2 100
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from synapse_retriever._types import FloatArray
from synapse_retriever.conversation.config import ContextConfig
from synapse_retriever.conversation.embed import Embedder, TurnIndex, Vectors, embedded
from synapse_retriever.conversation.importance import habituation, importance, recency
from synapse_retriever.conversation.levels import Level, plan_levels
from synapse_retriever.conversation.lexical import LexicalIndex
from synapse_retriever.conversation.relevance import rrf_order, select_relevant
from synapse_retriever.conversation.summarize import Condensed, focus
from synapse_retriever.tokens import TokenCounter

__all__ = [
    "AssembledTurn",
    "Candidate",
    "Decision",
    "TurnsView",
    "candidates",
    "decide",
    "plan_context",
    "texts_and_costs",
]

Texts = tuple[str, str, str]
"""A turn's text at FULL, CHUNKS and SUMMARY."""
Costs = tuple[int, int, int]
"""Its tokens at FULL, CHUNKS and SUMMARY, fixed tokens included."""
_SLOT = {Level.FULL: 0, Level.CHUNKS: 1, Level.SUMMARY: 2}


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
    """The level and text of turn ``index`` (position in the view); ``tokens`` without its
    fixed tokens."""

    index: int
    level: Level
    text: str
    tokens: int
    importance: float


@dataclass(frozen=True)
class TurnsView:
    """What the planner reads about the turns, oldest first (row i = turn i), every field
    filled by whoever builds it.

    ``condensed(i)`` returns the stored condensation of turn ``i`` or None. ``pinned``
    turns are always FULL; ``groups`` are kept or dropped together (None: alone); a turn
    that is not ``degradable`` is FULL or dropped; ``fixed_tokens`` are added to a turn's
    cost at every level (text that is never condensed, e.g. a tool call's arguments);
    ``full_tokens`` are the tokens of each text. ``ranking``: the rows the query needs,
    best first, as a memory ranks them over its stored indexes (BM25, the embedder and
    novelty fused, speakers and dates raised): the relevance pass takes that order;
    None (a message list, nothing stored): it fuses BM25, the embedder and novelty itself.
    """

    texts: Sequence[str]
    index: TurnIndex
    surprise: FloatArray
    repeats: FloatArray
    boost: FloatArray
    at: FloatArray
    condensed: Callable[[int], Condensed | None]
    pinned: Sequence[bool]
    groups: Sequence[int | None]
    degradable: Sequence[bool]
    fixed_tokens: Sequence[int]
    full_tokens: Sequence[int]
    ranking: Sequence[int] | None = None


@dataclass(frozen=True)
class Candidate:
    """A turn the gradient plans: its texts and their costs at FULL, CHUNKS and SUMMARY.

    Attributes
    ----------
    index : int
        The turn's row in the view.
    importance : float
        Its importance for the query.
    texts : (str, str, str)
        Its text at FULL, CHUNKS and SUMMARY.
    costs : (int, int, int)
        Their tokens, ``fixed`` included.
    fixed : int
        Tokens added at every level (never condensed).
    pinned : bool
        FULL in the plan whatever the budget (a pinned turn, or a picked one).
    group : int or None
        Kept or dropped with the turns of the same group.
    picked : Level or None
        The level the relevance pass kept the turn at (it is then ``pinned``).

    Examples
    --------
    >>> Candidate(3, 0.5, ("We deploy on Fridays.", "deploy Fridays.", "Fridays."), (6, 3, 2))
    ... # doctest: +NORMALIZE_WHITESPACE
    Candidate(index=3, importance=0.5, texts=('We deploy on Fridays.', 'deploy Fridays.',
    'Fridays.'), costs=(6, 3, 2), fixed=0, pinned=False, group=None, picked=None)
    """

    index: int
    importance: float
    texts: Texts
    costs: Costs
    fixed: int = 0
    pinned: bool = False
    group: int | None = None
    picked: Level | None = None


def importances(
    view: TurnsView,
    query: Vectors | None,
    config: ContextConfig,
    *,
    now: float,
    mode: str | None = None,
) -> tuple[FloatArray, FloatArray]:
    """(importance, similarity to the query) of every turn (step 1 of the module notes)."""
    n = len(view.texts)
    pinned = np.asarray(view.pinned, dtype=bool)
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

    The steps of the module notes: importance, working memory, relevance first,
    :func:`candidates`, :func:`texts_and_costs`, :func:`decide`.

    Parameters
    ----------
    view : TurnsView
        The turns.
    query : str or None
        The question (None or blank: no relevance, no relevance pass).
    budget : int
        The most tokens the kept turns may cost, fixed tokens included.
    config : ContextConfig
        The method's constants.
    embedder : Embedder
        Embeds the query, and the sentences of recalled and picked turns.
    token_counter : TokenCounter
        Counts condensed texts (``view.full_tokens`` counts the whole ones).
    fallback : callable
        A turn's condensation when none is stored (the extractive default).
    now : float
        The time of the query (POSIX seconds), for the age in days.
    mode : str, optional
        The processing mode (its temperature); default the configured one.
    query_vector : array, optional
        The query's normalized embedding if the caller has it (else it is embedded).

    Returns
    -------
    list of Decision
        Dropped turns are absent.

    Raises
    ------
    ContextBudgetError
        Working memory and pinned turns alone exceed the budget (``overflow="raise"``).
    """
    n = len(view.texts)
    if n == 0:
        return []
    if query is None or not query.strip():
        query_vector = None
    elif query_vector is None:
        query_vector = embedded(embedder, [query])[0]
    scores, similarity = importances(view, query_vector, config, now=now, mode=mode)
    recalled: set[int] = set()
    if query_vector is not None and config.recall_k > 0:
        recalled = {row for row, _ in view.index.top(query_vector, config.recall_k)}
    unpinned = [i for i in range(n) if not view.pinned[i]]
    working_memory = config.working_memory
    if config.working_share < 1.0 and working_memory:
        # what each costs whole: its text and its fixed tokens (turn_overhead, a tool call)
        newest = [view.full_tokens[i] + view.fixed_tokens[i] for i in unpinned[-working_memory:]]
        working_memory = working_span(newest, working_memory, config.working_share * budget)
    if working_memory and unpinned and view.groups[unpinned[-1]] is not None:
        # the newest turn's group is the newest step (a tool call and all its results):
        # working memory reaches back to its first turn
        group = view.groups[unpinned[-1]]
        first = next(j for j, i in enumerate(unpinned) if view.groups[i] == group)
        working_memory = max(working_memory, len(unpinned) - first)
    working = set(unpinned[-working_memory:]) if working_memory else set()
    whole = [view.full_tokens[i] + view.fixed_tokens[i] for i in range(n)]
    picked: dict[int, tuple[Level, str, int]] = {}
    if config.assembly == "relevance" and query is not None and query_vector is not None:
        picked = _relevance_pass(
            view, query, query_vector, similarity, whole, budget, working_memory,
            config=config, embedder=embedder, token_counter=token_counter,
        )  # fmt: skip
    # Working memory is never condensed unless it may shrink: skip condensing it.
    uncondensed = working if config.overflow == "raise" else set()
    built: dict[int, Candidate] = {}

    def candidate(i: int) -> Candidate:
        """Turn i's texts and costs (built once: condensing is the expensive part)."""
        if i in built:
            return built[i]
        text, tokens = view.texts[i], whole[i]
        level: Level | None = None
        condensed: Condensed | None = None
        if i in picked:
            level, text, tokens = picked[i]
        elif view.degradable[i] and text.strip() and not view.pinned[i] and i not in uncondensed:
            if i in recalled and query_vector is not None:
                condensed = focus(text, query_vector, embedder, chunks_ratio=config.chunks_ratio,
                                  token_counter=token_counter)  # fmt: skip
            else:
                condensed = view.condensed(i) or fallback(text)
        fixed = view.fixed_tokens[i]
        texts, costs = texts_and_costs(
            text, condensed, whole=tokens, fixed=fixed, token_counter=token_counter
        )
        pinned = bool(view.pinned[i]) or level is not None
        built[i] = Candidate(
            index=i,
            importance=float(scores[i]),
            texts=texts,
            costs=costs,
            fixed=fixed,
            pinned=pinned,
            group=view.groups[i],
            picked=level,
        )
        return built[i]

    planned = candidates(
        [float(score) for score in scores],
        lambda i: candidate(i).costs,
        budget,
        must=[i for i in range(n) if view.pinned[i] or i in working or i in picked],
        groups=view.groups,
        summary_threshold=config.summary_threshold,
    )
    return decide([candidate(i) for i in planned], budget, working_memory=working_memory,
                  config=config)  # fmt: skip


def candidates(
    importance: Sequence[float],
    cost: Callable[[int], Costs],
    budget: int,
    *,
    must: Sequence[int],
    groups: Sequence[int | None],
    summary_threshold: float,
) -> list[int]:
    """The turns the gradient plans, oldest first (step 4 of the module notes).

    :func:`~.levels.plan_levels` over these gives the levels it gives over every turn, and
    only these are condensed. The turns of ``must`` (ascending; pinned, working memory,
    picked) and every grouped turn are in. Of the others, a turn at or below
    ``summary_threshold`` is out (DROPPED whatever the budget); the rest are walked most
    important first (newest first on ties), adding each at its cheapest to the must-stay
    turns at FULL and the other members of their groups at their cheapest: the turn that
    passes ``budget`` is the last one in. Nothing is left out this way if the start already
    passes it (working memory may then shrink and free room).

    Parameters
    ----------
    importance : sequence of float
        Each turn's importance, oldest first.
    cost : callable
        Turn i's (FULL, CHUNKS, SUMMARY) tokens; called for the turns kept and for the
        ones walked, most important first.
    budget : int
        The token budget.
    must : sequence of int
        The turns that stay whatever the budget, ascending.
    groups : sequence of int or None
        Each turn's group (kept or dropped together), None: alone.
    summary_threshold : float
        A turn at or below it is dropped by threshold.

    Returns
    -------
    list of int
        The turns to plan, ascending.

    Examples
    --------
    Every turn costs 100 tokens FULL, 10 at its cheapest; turn 4 must stay. Turn 1 (0.1)
    is out by threshold. Walked: turn 0 (100 + 10 = 110), turn 2 (120 > 115, the last
    one in); turn 3 is less important than a turn that did not fit, so it is out:

    >>> costs = {i: (100, 30, 10) for i in range(5)}
    >>> candidates([0.9, 0.1, 0.5, 0.3, 0.0], costs.__getitem__, 115, must=[4],
    ...            groups=[None] * 5, summary_threshold=0.2)
    [0, 2, 4]
    """
    optional = _walk_order(importance, must, groups, summary_threshold)
    floor = sum(cost(i)[0] for i in must)
    held = {groups[i] for i in must if groups[i] is not None}
    grouped = [i for i in optional if groups[i] is not None]
    for i in grouped:
        if groups[i] in held:
            floor += min(cost(i))
    bounded = floor <= budget
    planned = [*must, *grouped]
    for i in optional[len(grouped) :]:
        planned.append(i)
        if bounded:
            floor += min(cost(i))
            if floor > budget:
                break
    return sorted(planned)


def _walk_order(
    importance: Sequence[float],
    must: Sequence[int],
    groups: Sequence[int | None],
    summary_threshold: float,
) -> list[int]:
    """The turns :func:`candidates` walks, in its order: the grouped ones, then the others
    above ``summary_threshold``, most important first, newest first on ties; ``must`` left
    out. Sorted by NumPy, which lets go of the interpreter: a sort of tens of thousands of
    tuples held it, and an async caller's event loop, for a tenth of a second.

    Examples
    --------
    >>> _walk_order([0.9, 0.1, 0.5, 0.5, 0.0], [4], [None, None, None, 7, None], 0.2)
    [3, 0, 2]
    """
    weights = np.asarray(importance, dtype=np.float64)
    alone = np.fromiter((group is None for group in groups), dtype=bool, count=len(weights))
    walked = ~alone | (weights > summary_threshold)
    walked[np.asarray(must, dtype=np.int64)] = False
    turns = np.flatnonzero(walked)
    order = np.lexsort((-turns, -weights[turns], alone[turns]))  # the last key first
    return [int(i) for i in turns[order]]


def texts_and_costs(
    text: str,
    condensed: Condensed | None,
    *,
    whole: int,
    fixed: int,
    token_counter: TokenCounter,
) -> tuple[Texts, Costs]:
    """A turn's text at FULL, CHUNKS and SUMMARY, and their tokens (step 5 of the module
    notes).

    FULL is ``text`` at ``whole`` tokens (``fixed`` included); CHUNKS and SUMMARY are
    ``condensed``'s, at ``token_counter(text) + fixed``. Without a condensation the turn
    is ``text`` at ``whole`` tokens at every level (kept whole or dropped).

    Examples
    --------
    A 6-token turn with 2 fixed tokens; its chunks count 5, its summary 3:

    >>> from synapse_retriever.tokens import approximate_tokens
    >>> condensed = Condensed("Deploys move to Fridays.", "Deploys Fridays.")
    >>> texts_and_costs("Deploys move to Fridays. Coffee first.", condensed, whole=10,
    ...                 fixed=2, token_counter=approximate_tokens)[1]
    (10, 7, 5)
    >>> texts_and_costs("Deploys move to Fridays.", None, whole=7, fixed=2,
    ...                 token_counter=approximate_tokens)[1]
    (7, 7, 7)
    """
    if condensed is None:
        return (text, text, text), (whole, whole, whole)
    return (text, condensed.chunks, condensed.summary), (
        whole,
        token_counter(condensed.chunks) + fixed,
        token_counter(condensed.summary) + fixed,
    )


def decide(
    turns: Sequence[Candidate], budget: int, *, working_memory: int, config: ContextConfig
) -> list[Decision]:
    """The level of each candidate (oldest first), by :func:`~.levels.plan_levels`, and
    the kept ones' texts (step 6 of the module notes).

    The last ``working_memory`` turns that are not ``pinned`` are working memory; the
    thresholds, ``demotion`` and ``overflow`` are ``config``'s. A picked turn keeps the
    level the relevance pass gave it. A decision's tokens leave out the turn's fixed tokens.

    Raises
    ------
    ContextBudgetError
        Working memory and pinned turns alone exceed the budget (``overflow="raise"``).

    Examples
    --------
    Turns costing 100, 30 and 10 tokens FULL, CHUNKS and SUMMARY, working memory the
    newest; importance 0.9 (FULL), 0.5 (CHUNKS), 0.0: 100 + 30 + 100 = 230 tokens. At 150,
    ``demotion="importance"`` demotes turn 1 until it is gone, to SUMMARY (210), dropped
    (200), then turn 0 to CHUNKS (130); ``"fade"`` condenses before it drops: turn 1 to
    SUMMARY (210), turn 0 to CHUNKS (140):

    >>> from synapse_retriever.conversation import ContextConfig
    >>> turns = [Candidate(i, importance, ("full", "chunks", "summary"), (100, 30, 10))
    ...          for i, importance in enumerate([0.9, 0.5, 0.0])]
    >>> for demotion in ("importance", "fade"):
    ...     config = ContextConfig(demotion=demotion)
    ...     print([(d.index, d.level.value, d.tokens)
    ...            for d in decide(turns, 150, working_memory=1, config=config)])
    [(0, 'chunks', 30), (2, 'full', 100)]
    [(0, 'chunks', 30), (1, 'summary', 10), (2, 'full', 100)]
    """
    levels = plan_levels(
        [turn.importance for turn in turns],
        [turn.costs for turn in turns],
        budget,
        working_memory=working_memory,
        thresholds=(config.full_threshold, config.chunks_threshold, config.summary_threshold),
        demotion=config.demotion,
        pinned=[turn.pinned for turn in turns],
        groups=[turn.group for turn in turns],
        overflow=config.overflow,
        checked=False,  # made here: not checked again, turn by turn, at every call
    )
    decisions = []
    for turn, level in zip(turns, levels, strict=True):
        if turn.picked is not None:
            level = turn.picked
        if level is not Level.DROPPED:
            slot = _SLOT[level]
            tokens = turn.costs[slot] - turn.fixed
            decisions.append(Decision(turn.index, level, turn.texts[slot], tokens, turn.importance))
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
    working_memory: int,
    *,
    config: ContextConfig,
    embedder: Embedder,
    token_counter: TokenCounter,
) -> dict[int, tuple[Level, str, int]]:
    """Relevance-first assembly (:mod:`~.relevance`): pick the turns the query needs.

    ``whole[i]`` is turn i's cost FULL; working memory is the last ``working_memory``
    unpinned turns. Returns each picked turn's level, text and cost; the caller keeps them
    like pinned turns. Grouped turns (tool calls) are left to the gradient.
    """
    n = len(view.texts)
    unpinned = [i for i in range(n) if not view.pinned[i]]
    working = unpinned[len(unpinned) - min(working_memory, len(unpinned)) :]
    pinned = [i for i in range(n) if view.pinned[i]]

    def kept(stay: Sequence[int]) -> int:
        """What the turns that stay cost FULL, with the other turns of their groups (a
        tool call with its answer): a call left out of working memory still goes with it."""
        held = {view.groups[i] for i in stay if view.groups[i] is not None}
        members = {i for i in range(n) if view.groups[i] is not None and view.groups[i] in held}
        return sum(whole[i] for i in {*stay, *members})

    while working and config.overflow == "shrink":
        if kept([*pinned, *working]) <= budget:
            break
        working = working[1:]
    room = int((budget - kept([*pinned, *working])) * config.relevance_share)
    if room <= 0:
        return {}
    skip = set(working)
    eligible = [
        i
        for i in range(n)
        if not view.pinned[i] and i not in skip and view.groups[i] is None and view.texts[i].strip()
    ]
    if not eligible:
        return {}
    if view.ranking is not None:  # the memory's ranking over its stored indexes
        rows = set(eligible)
        order = [i for i in view.ranking if i in rows]
        return _pick(view, order, query_vector, whole, room, embedder, token_counter)
    lexical = LexicalIndex(view.texts[i] for i in eligible).scores(query)
    semantic = [float(similarity[i]) for i in eligible]
    rankings = [lexical, semantic]
    weights = [config.lexical_weight, 1.0]
    if config.novelty_weight > 0:
        rankings.append([float(view.surprise[i]) for i in eligible])
        weights.append(config.novelty_weight)
    order = [eligible[j] for j in rrf_order(rankings, k=config.rrf_k, weights=weights)]
    return _pick(view, order, query_vector, whole, room, embedder, token_counter)


def _pick(
    view: TurnsView,
    order: Sequence[int],
    query_vector: Vectors,
    whole: Sequence[int],
    room: int,
    embedder: Embedder,
    token_counter: TokenCounter,
) -> dict[int, tuple[Level, str, int]]:
    """The turns of ``order`` (best first) that fit ``room``: whole, or the first that does
    not fit cut around the query (:func:`~.relevance.select_relevant`)."""
    chunked: dict[int, tuple[Level, str]] = {}

    def chunk(i: int, left: int) -> tuple[str, int] | None:
        """The turn's sentences around the query cut to ``left``, else its best one."""
        full = whole[i] - view.fixed_tokens[i]
        room_here = left - view.fixed_tokens[i]
        if not view.degradable[i] or room_here <= 0 or full <= 0:
            return None
        condensed = focus(
            view.texts[i],
            query_vector,
            embedder,
            chunks_ratio=min(1.0, room_here / full),
            token_counter=token_counter,
        )
        for level, text in ((Level.CHUNKS, condensed.chunks), (Level.SUMMARY, condensed.summary)):
            tokens = token_counter(text) + view.fixed_tokens[i]
            if text and tokens <= left:
                chunked[i] = (Level.FULL if text == view.texts[i] else level, text)
                return text, tokens
        return None

    picked: dict[int, tuple[Level, str, int]] = {}
    for pick in select_relevant(order, whole, room, chunk):
        level, text = (Level.FULL, view.texts[pick.index]) if pick.full else chunked[pick.index]
        picked[pick.index] = (level, text, pick.tokens)
    return picked
