"""Recall over result objects (LangChain Documents, LlamaIndex nodes, anything).

What every adapter needs, in one place: scores that may be missing or unsorted, the
resolution of injected ids through the caller's docstore in small batches (sync or
async), an optional cost per object for a strict token budget, mapping hits back to
objects with the score each should show, the metadata that says why an object is
there, and the ids of objects used together.

Examples
--------
>>> from synapse_retriever import SynapseStore
>>> store = SynapseStore(":memory:")
>>> _ = store.reinforce(["a", "z"], strength=2.0, at=0)
>>> docs = {"a": "doc a", "b": "doc b", "c": "doc c", "d": "doc d", "z": "doc z"}
>>> recall = plan_items(store, ["doc a", "doc b", "doc c", "doc d"],
...                     ids=["a", "b", "c", "d"], scores=[None] * 4, at=0)
>>> recall.candidates
['z']
>>> [r.item for r in recall.resolve(lambda ids: {i: docs.get(i) for i in ids})]
['doc a', 'doc b', 'doc c', 'doc z']
"""

from __future__ import annotations

import asyncio
import logging
import math
from collections import deque
from collections.abc import Awaitable, Callable, Generator, Iterable, Mapping, Sequence
from dataclasses import dataclass
from itertools import pairwise
from numbers import Real
from typing import TYPE_CHECKING, Any, Generic, NamedTuple, TypeVar

from synapse_retriever.clock import Clock
from synapse_retriever.errors import InvalidTypeError, InvalidValueError, shown
from synapse_retriever.recall.hits import ANNOTATION_KEYS, Hit, Plan, checked_cost

if TYPE_CHECKING:
    from synapse_retriever.store import SynapseStore

__all__ = [
    "ItemRecall",
    "Recalled",
    "annotate",
    "log_unfetched",
    "plan_items",
    "rank_scores",
    "usable_scores",
    "usage_ids",
]

T = TypeVar("T")

Fetch = Callable[[list[str]], Mapping[str, T | None]]
"""``ids -> {id: object}`` for the ids it can resolve (missing or None: unresolvable)."""

AsyncFetch = Callable[[list[str]], Awaitable[Mapping[str, T | None]]]

OnError = Callable[[Exception, list[str]], object]
"""``(exception, ids) -> None``: a failed fetch is reported here and ends resolution."""

log = logging.getLogger(__name__)


def log_unfetched(error: Exception, ids: list[str]) -> None:
    """The adapters' ``on_error`` for :meth:`ItemRecall.resolve`: a docstore that fails (a
    remote vector store down, an answer that is not the documents asked for) is asked no
    more in this query; the ids it did not return displace nothing, the query goes on, and
    the failure is logged.

    Examples
    --------
    >>> log_unfetched(ConnectionError("vector store down"), ["a", "b"])  # a warning, no raise
    """
    log.warning("could not fetch %s: they displace nothing", ids, exc_info=error)


_Steps = Generator[list[str], Mapping[str, Any] | None, list["Recalled[T]"]]
_R = TypeVar("_R")


def _advance(steps: _Steps[Any], answer: Mapping[str, Any] | None) -> tuple[bool, Any]:
    """``steps`` sent ``answer`` (None first): ``(False, the next batch)``, or ``(True, the
    recall)`` once it returned (a ``StopIteration`` cannot cross into an asyncio future)."""
    try:
        return False, steps.send(answer)
    except StopIteration as finished:
        return True, finished.value


async def _ready(value: _R) -> _R:
    return value


def rank_scores(n: int) -> list[float]:
    """Scores from positions when results carry none: ``1 − rank / n``.

    Examples
    --------
    >>> rank_scores(4)
    [1.0, 0.75, 0.5, 0.25]
    """
    return [1.0 - rank / n for rank in range(n)]


def usable_scores(scores: Sequence[object]) -> bool:
    """Whether ``scores`` can drive recall: all real numbers, finite and non-increasing.

    Examples
    --------
    >>> usable_scores([0.9, 0.9, 0.4]), usable_scores([0.4, 0.9]), usable_scores([0.9, None])
    (True, False, False)
    >>> usable_scores([0.9, "0.4"]), usable_scores([10**400, 1])  # past a float's range
    (False, False)
    """
    values = list(scores)
    if not all(isinstance(s, Real) and not isinstance(s, bool) for s in values):
        return False
    try:
        floats = [float(s) for s in values]  # type: ignore[arg-type]
    except OverflowError:
        return False
    return all(math.isfinite(s) for s in floats) and all(x >= y for x, y in pairwise(floats))


def annotate(metadata: Mapping[str, Any], hit: Hit) -> dict[str, Any]:
    """A new metadata dict saying why ``hit`` is here (``metadata`` itself is not changed).

    Earlier annotations (:data:`~synapse_retriever.recall.hits.ANNOTATION_KEYS`) are
    dropped first, so an object that passes through recall twice never keeps a stale
    ``synapse_displaced``; then :meth:`Hit.annotation` is added.

    Examples
    --------
    >>> old = {"source": "b.py", "synapse_origin": "injected", "synapse_displaced": "e"}
    >>> annotate(old, Hit("b", 0.6, "boosted", 0.2, ("a", "b")))
    {'source': 'b.py', 'synapse_origin': 'boosted', 'synapse_energy': 0.2, 'synapse_path': 'a -> b'}
    """
    kept = {key: value for key, value in metadata.items() if key not in ANNOTATION_KEYS}
    return {**kept, **hit.annotation()}


def usage_ids(
    used: Iterable[object],
    id_of: Callable[[Any], str],
    kind: type | tuple[type, ...],
) -> list[str]:
    """The ids of objects used together (one co-activation event): a str is an id as it is,
    an instance of ``kind`` goes through ``id_of``.

    Raises
    ------
    InvalidTypeError
        ``used`` is a bare str or a single object of ``kind`` (iterating it would give
        characters or fields), or it holds something that is neither.

    Examples
    --------
    >>> usage_ids(["a.py", 3], lambda n: f"n{n}", int)
    ['a.py', 'n3']
    >>> usage_ids(None, str.upper, int)
    Traceback (most recent call last):
    ...
    synapse_retriever.errors.InvalidTypeError: must be a list of ids or int objects, got None
    >>> usage_ids("a.py", str.upper, int)
    Traceback (most recent call last):
    ...
    synapse_retriever.errors.InvalidTypeError: must be a list of ids or int objects, got 'a.py'
    """
    kinds = kind if isinstance(kind, tuple) else (kind,)
    names = "/".join(k.__name__ for k in kinds)
    if isinstance(used, (str, bytes, *kinds)) or not isinstance(used, Iterable):
        raise InvalidTypeError(f"must be a list of ids or {names} objects, got {shown(used)}")
    ids: list[str] = []
    for item in used:
        if isinstance(item, str):
            ids.append(item)
        elif isinstance(item, kinds):
            ids.append(id_of(item))
        else:
            raise InvalidTypeError(
                f"expected an id or a {names}, got {type(item).__name__} {shown(item)}"
            )
    return ids


class Recalled(NamedTuple, Generic[T]):
    """One result of recall over objects.

    Attributes
    ----------
    item : object
        The input object kept here, or the resolved object injected here.
    hit : Hit
        Why it is here (``hit.annotation()`` says it in metadata).
    score : float or None
        The score to show. When the input's scores were usable, the method's
        (``hit.score``: boosted objects gain ``boost × energy``). Otherwise only the order
        changed: a kept object shows its own input score, an injected one its victim's
        (None stays None).

    Examples
    --------
    >>> from synapse_retriever import Activation, PublishedRule, RecallPlan
    >>> plan = RecallPlan([("a", 0.9), ("b", 0.5)], Activation({"x": 0.3}, {"x": ("a", "x")}),
    ...                   PublishedRule(seeds=1))
    >>> recall = ItemRecall(plan, ["doc a", "doc b"], ["a", "b"], [0.9, 0.5], scored=True)
    >>> item, hit, score = recall.finish({"x": "doc x"})[1]
    >>> item, hit.origin, hit.displaced, score
    ('doc x', 'injected', 'b', 0.5)
    """

    item: T
    hit: Hit
    score: float | None


@dataclass(frozen=True)
class ItemRecall(Generic[T]):
    """Recall planned over ``items``: :meth:`resolve` (or :meth:`aresolve`) finishes it.

    Made by :func:`plan_items`; built by hand here from a plan, to show the pieces.

    Examples
    --------
    >>> from synapse_retriever import Activation, PublishedRule, RecallPlan
    >>> plan = RecallPlan([("a", 0.9), ("b", 0.5)], Activation({"x": 0.3}, {"x": ("a", "x")}),
    ...                   PublishedRule(seeds=1))
    >>> recall = ItemRecall(plan, ["doc a", "doc b"], ["a", "b"], [None, None], scored=False)
    >>> recall.candidates
    ['x']
    >>> [(r.item, r.score) for r in recall.resolve(lambda ids: {"x": "doc x"})]
    [('doc a', None), ('doc x', None)]
    """

    plan: Plan
    items: Sequence[T]
    ids: Sequence[str]
    scores: Sequence[float | None]
    scored: bool
    """True when the items' own scores drove recall; False when rank scores did."""

    @property
    def candidates(self) -> list[str]:
        """Every absent id that could displace a hit, strongest first.

        It can be long on a dense graph: :meth:`resolve` asks for them a batch at a time.

        Examples
        --------
        >>> from synapse_retriever import Activation, PublishedRule, RecallPlan
        >>> plan = RecallPlan([("a", 0.9), ("b", 0.5)], Activation({"y": 0.2, "x": 0.6}),
        ...                   PublishedRule(seeds=1))
        >>> ItemRecall(plan, ["A", "B"], ["a", "b"], [0.9, 0.5], scored=True).candidates
        ['x', 'y']
        """
        return self.plan.candidates

    @property
    def batch_size(self) -> int:
        """Ids asked of the resolver at a time: ``2 × max_inject`` (the slots and a spare each).

        Examples
        --------
        >>> from synapse_retriever import Activation, PublishedRule, RecallPlan
        >>> plan = RecallPlan([("a", 0.9)], Activation(), PublishedRule(max_inject=2))
        >>> ItemRecall(plan, ["A"], ["a"], [0.9], scored=True).batch_size
        4
        """
        return max(1, 2 * self.plan.rule.max_inject)

    def finish(
        self,
        resolved: Mapping[str, T | None] | None = None,
        cost: Callable[[T], float] | None = None,
    ) -> list[Recalled[T]]:
        """Inject from objects already resolved; same length as the input.

        Parameters
        ----------
        resolved : mapping id -> object, optional
            Objects for candidate ids; ids missing here (or None) never take a slot.
            None means boost only.
        cost : callable, optional
            Cost of an object (e.g. its tokens): an injection may not raise the total;
            a finite number of at least 0, else refused by name.

        Examples
        --------
        >>> from synapse_retriever import Activation, PublishedRule, RecallPlan
        >>> plan = RecallPlan([("a", 0.9), ("b", 0.5)], Activation({"x": 0.3}, {"x": ("a", "x")}),
        ...                   PublishedRule(seeds=1))
        >>> recall = ItemRecall(plan, ["doc a", "doc b"], ["a", "b"], [0.9, 0.5], scored=True)
        >>> [r.item for r in recall.finish({"x": "doc x"})]
        ['doc a', 'doc x']
        >>> [r.item for r in recall.finish({"x": "a much longer doc x"}, cost=len)]  # over budget
        ['doc a', 'doc b']
        """
        found = {node: item for node, item in (resolved or {}).items() if item is not None}
        return self._finish(found, *self._costs(found, cost))

    def resolve(
        self,
        fetch: Fetch[T] | None,
        cost: Callable[[T], float] | None = None,
        on_error: OnError | None = None,
    ) -> list[Recalled[T]]:
        """Resolve candidates through ``fetch`` in batches, then inject; see :meth:`aresolve`.

        Examples
        --------
        Under the published rule (candidates by energy, batches of 2 × ``max_inject``):

        >>> from synapse_retriever import SynapseConfig, SynapseStore
        >>> store = SynapseStore(":memory:", config=SynapseConfig.published())
        >>> for node in "vwxyz":  # five candidates, v the strongest
        ...     _ = store.reinforce(["a", node], strength=2.0 if node == "v" else 1.0, at=0)
        >>> recall = plan_items(store, list("abcde"), ids=list("abcde"), scores=[None] * 5, at=0)
        >>> asked = []
        >>> def fetch(ids):
        ...     asked.append(ids)
        ...     return {node: node.upper() for node in ids if node in "wxyz"}  # v is gone
        >>> [r.item for r in recall.resolve(fetch)]
        ['a', 'b', 'c', 'W', 'X']
        >>> asked  # two slots: 4 ids at a time, and v cost no slot
        [['v', 'w', 'x', 'y']]
        """
        if fetch is None:
            return self.finish(None, cost)
        steps = self._steps(cost)
        try:
            batch = next(steps)
            while True:
                try:
                    answer: Mapping[str, T | None] | None = fetch(batch)
                except Exception as exc:
                    if on_error is None:
                        raise
                    on_error(exc, batch)
                    answer = None
                batch = steps.send(answer)
        except StopIteration as done:
            result: list[Recalled[T]] = done.value
            return result

    async def aresolve(
        self,
        fetch: AsyncFetch[T] | None,
        cost: Callable[[T], float] | None = None,
        on_error: OnError | None = None,
    ) -> list[Recalled[T]]:
        """Resolve candidates through ``await fetch(ids)`` in batches, then inject.

        Candidates are asked for :attr:`batch_size` at a time, strongest first, until
        every injection slot is filled or no candidate is left: an id ``fetch`` does not
        return (or returns None for) never costs a slot, and neither does one that
        ``cost`` keeps out; the result is the same as resolving every candidate at once.

        Parameters
        ----------
        fetch : callable, optional
            ``ids -> {id: object}``; objects for ids not asked for are ignored. None
            means boost only: nothing is asked.
        cost : callable, optional
            Cost of an object (e.g. its tokens): an injection may not raise the total;
            a finite number of at least 0, else refused by name.
        on_error : callable, optional
            ``(exception, ids) -> None``, called when ``fetch`` raises; resolution then
            stops and injects only what was resolved before. Without it the exception
            propagates.

        Examples
        --------
        >>> import asyncio
        >>> from synapse_retriever import Activation, PublishedRule, RecallPlan
        >>> plan = RecallPlan([("a", 0.9), ("b", 0.5)], Activation({"x": 0.3}, {"x": ("a", "x")}),
        ...                   PublishedRule(seeds=1))
        >>> recall = ItemRecall(plan, ["doc a", "doc b"], ["a", "b"], [0.9, 0.5], scored=True)
        >>> async def fetch(ids):  # e.g. a remote docstore
        ...     return {node: f"doc {node}" for node in ids}
        >>> [r.item for r in asyncio.run(recall.aresolve(fetch))]
        ['doc a', 'doc x']
        """

        # ``cost`` is a caller's token counter, of any speed: the steps that call it run
        # in a worker thread, not on the event loop
        def run(call: Callable[..., _R], *args: Any) -> Awaitable[_R]:
            return asyncio.to_thread(call, *args) if cost is not None else _ready(call(*args))

        if fetch is None:
            return await run(self.finish, None, cost)
        steps = self._steps(cost)
        done, value = await run(_advance, steps, None)
        while not done:
            batch: list[str] = value
            try:
                answer: Mapping[str, T | None] | None = await fetch(batch)
            except Exception as exc:
                if on_error is None:
                    raise
                on_error(exc, batch)
                answer = None
            done, value = await run(_advance, steps, answer)
        result: list[Recalled[T]] = value
        return result

    def _steps(self, cost: Callable[[T], float] | None) -> _Steps[T]:
        """The batching loop, shared by :meth:`resolve` and :meth:`aresolve`: yields the
        ids to fetch, receives what was found (None: stop asking), returns the recall."""
        found: dict[str, T] = {}
        cost_of, hit_costs = self._costs(found, cost)
        pending = self.candidates
        step = self.batch_size
        while pending:
            batch, pending = pending[:step], pending[step:]
            answer = yield batch
            if answer is None:
                break
            found.update((node, answer[node]) for node in batch if answer.get(node) is not None)
            if found:
                result = self._finish(found, cost_of, hit_costs)
                injected = sum(r.hit.origin == "injected" for r in result)
                if injected == self.plan.slots or not pending:
                    return result
        return self._finish(found, cost_of, hit_costs)

    def _costs(
        self, found: Mapping[str, T], cost: Callable[[T], float] | None
    ) -> tuple[Callable[[str], float] | None, list[float] | None]:
        """``cost`` by id, each object counted once (``found`` may grow between calls), and,
        where a slot is open, of each input object by position: objects that share an id
        (chunks of one document) keep their own costs, so a victim is weighed at its own."""
        if cost is None:
            return None, None
        by_id = dict(zip(self.ids, self.items, strict=True))
        costs: dict[str, float] = {}
        checked = checked_cost(lambda node: cost(by_id[node] if node in by_id else found[node]))

        def cost_of(node: str) -> float:
            if node not in costs:
                costs[node] = checked(node)
            return costs[node]

        def own(item: T) -> Callable[[str], float]:
            return checked_cost(lambda _: cost(item))  # an error names the item's id

        if not self.plan.slots:  # nothing can be displaced: no object is weighed
            return cost_of, None
        return cost_of, [own(item)(node) for node, item in zip(self.ids, self.items, strict=True)]

    def _finish(
        self,
        found: Mapping[str, T],
        cost_of: Callable[[str], float] | None,
        hit_costs: list[float] | None = None,
    ) -> list[Recalled[T]]:
        # hit_costs only with a budget: a Plan of its own written before it need not take it
        more = {} if hit_costs is None else {"hit_costs": hit_costs}
        hits = self.plan.inject(resolvable=found.keys(), cost=cost_of, **more)
        waiting: dict[str, deque[int]] = {}
        for position, node in enumerate(self.ids):
            waiting.setdefault(node, deque()).append(position)
        kept = [None if hit.origin == "injected" else waiting[hit.id].popleft() for hit in hits]
        result: list[Recalled[T]] = []
        for hit, index in zip(hits, kept, strict=True):
            if index is not None:
                item, source = self.items[index], index
            else:  # the victim is an input left waiting under the displaced id
                item, source = found[hit.id], waiting[hit.displaced or ""].popleft()
            result.append(Recalled(item, hit, hit.score if self.scored else self.scores[source]))
        return result


def plan_items(
    store: SynapseStore,
    items: Sequence[T],
    *,
    ids: Sequence[str],
    scores: Sequence[float | None],
    at: Clock = None,
    active_namespace: str = "personal",
) -> ItemRecall[T]:
    """Spread activation for ranked ``items`` with their ``ids`` and (maybe missing) ``scores``.

    Scores drive recall when :func:`usable_scores`; otherwise the current order does,
    through :func:`rank_scores`, and only the order can change.

    Examples
    --------
    On a cold graph nothing is a candidate, and the items come back as they were:

    >>> from synapse_retriever import SynapseStore
    >>> recall = plan_items(SynapseStore(":memory:"), ["doc a", "doc b"], ids=["a", "b"],
    ...                     scores=[0.9, 0.4])
    >>> recall.candidates, recall.scored
    ([], True)
    >>> [r.item for r in recall.resolve(lambda ids: {})]
    ['doc a', 'doc b']
    """
    if not len(items) == len(ids) == len(scores):
        raise InvalidValueError(
            f"items, ids and scores differ in length: {len(items)}, {len(ids)}, {len(scores)}"
        )
    scored = usable_scores(scores)
    values = [float(s) for s in scores] if scored else rank_scores(len(items))  # type: ignore[arg-type]
    plan = store.plan(list(zip(ids, values, strict=True)), at, active_namespace)
    return ItemRecall(plan, items, ids, list(scores), scored)
