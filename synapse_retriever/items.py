"""Recall over result objects (LangChain Documents, LlamaIndex nodes, anything).

What every adapter needs, in one place: scores that may be missing or unsorted,
the two phases of recall around resolving injected ids (sync or async), an optional
cost per object for a strict token budget, and mapping hits back to objects.

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
>>> [item for item, hit in recall.finish({"z": docs["z"]})]
['doc a', 'doc b', 'doc c', 'doc z']
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from itertools import pairwise
from typing import TYPE_CHECKING, Generic, TypeVar

from synapse_retriever.clock import Clock
from synapse_retriever.errors import InvalidValueError
from synapse_retriever.injection import Hit, RecallPlan

if TYPE_CHECKING:
    from synapse_retriever.store import SynapseStore

__all__ = ["ItemRecall", "plan_items", "rank_scores", "usable_scores"]

T = TypeVar("T")


def rank_scores(n: int) -> list[float]:
    """Scores from positions when results carry none: ``1 − rank / n``.

    Examples
    --------
    >>> rank_scores(4)
    [1.0, 0.75, 0.5, 0.25]
    """
    return [1.0 - rank / n for rank in range(n)]


def usable_scores(scores: Sequence[float | None]) -> bool:
    """Whether ``scores`` can drive recall: all present, finite and non-increasing.

    Examples
    --------
    >>> usable_scores([0.9, 0.9, 0.4]), usable_scores([0.4, 0.9]), usable_scores([0.9, None])
    (True, False, False)
    """
    values = list(scores)
    if any(s is None or isinstance(s, bool) or not math.isfinite(s) for s in values):
        return False
    return all(x >= y for x, y in pairwise(values))  # type: ignore[operator]


@dataclass(frozen=True)
class ItemRecall(Generic[T]):
    """Recall planned over ``items``; resolve :attr:`candidates`, then :meth:`finish`."""

    plan: RecallPlan
    items: Sequence[T]
    ids: Sequence[str]
    scored: bool
    """True when the items' own scores drove recall; False when rank scores did."""

    @property
    def candidates(self) -> list[str]:
        """Ids to resolve into objects before :meth:`finish` (strongest first)."""
        return self.plan.candidates

    def finish(
        self,
        resolved: Mapping[str, T] | None = None,
        cost: Callable[[T], float] | None = None,
    ) -> list[tuple[T, Hit]]:
        """Inject and map hits back to objects: ``(item, hit)`` pairs, same length as the input.

        Parameters
        ----------
        resolved : mapping id -> object, optional
            Objects for the candidate ids; ids missing here never take a slot. None
            means boost only.
        cost : callable, optional
            Cost of an object (e.g. its tokens): an injection may not raise the total.
        """
        found: Mapping[str, T] = resolved or {}
        cost_of: Callable[[str], float] | None = None
        if cost is not None:
            by_id = dict(zip(self.ids, self.items, strict=True))
            costs: dict[str, float] = {}

            def cost_of(node: str) -> float:
                if node not in costs:
                    costs[node] = float(cost(by_id[node] if node in by_id else found[node]))
                return costs[node]

        hits = self.plan.inject(resolvable=found.keys(), cost=cost_of)
        queues: dict[str, list[T]] = {}
        for node, item in zip(self.ids, self.items, strict=True):
            queues.setdefault(node, []).append(item)
        return [
            (found[hit.id] if hit.origin == "injected" else queues[hit.id].pop(0), hit)
            for hit in hits
        ]


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
    """
    if not len(items) == len(ids) == len(scores):
        raise InvalidValueError(
            f"items, ids and scores differ in length: {len(items)}, {len(ids)}, {len(scores)}"
        )
    scored = usable_scores(scores)
    values = [float(s) for s in scores] if scored else rank_scores(len(items))  # type: ignore[arg-type]
    plan = store.plan(list(zip(ids, values, strict=True)), at, active_namespace)
    return ItemRecall(plan, items, ids, scored)
