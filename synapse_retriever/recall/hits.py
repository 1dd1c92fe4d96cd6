"""What every recall rule shares: the hits it returns, what a plan that injects in two phases
offers, and how many slots a hit list offers.

Examples
--------
>>> Hit("auth/jwt.py", 0.91)
Hit(id='auth/jwt.py', score=0.91, origin='vector', energy=0.0, path=(), displaced=None)
>>> injection_slots(5, seeds=3, max_inject=2)
2
"""

from __future__ import annotations

import contextlib
import math
import sys
from collections.abc import Callable, Container, Iterable, Mapping, Sequence
from decimal import Decimal
from numbers import Real
from typing import Literal, NamedTuple, Protocol, SupportsFloat

from synapse_retriever._numbers import numeric
from synapse_retriever.clock import finite_real
from synapse_retriever.config import RecallRule
from synapse_retriever.errors import InvalidTypeError, InvalidValueError, shown

__all__ = [
    "ANNOTATION_KEYS",
    "Hit",
    "Origin",
    "Plan",
    "Resolvable",
    "checked_cost",
    "checked_resolvable",
    "injection_slots",
    "position_costs",
    "read_ids",
    "resolves",
    "validated_hits",
]

Origin = Literal["vector", "boosted", "injected"]

ANNOTATION_KEYS = ("synapse_origin", "synapse_energy", "synapse_path", "synapse_displaced")
"""Metadata keys that adapters add to boosted and injected results (never to plain hits)."""


class Hit(NamedTuple):
    """One result of :func:`inject`.

    Attributes
    ----------
    id : str
        Node id.
    score : float
        Input score; boosted hits gain ``boost × energy``; injected hits take their victim's.
    origin : {"vector", "boosted", "injected"}
        Why the hit is here.
    energy : float
        Activation energy that reached it (0.0 for plain vector hits).
    path : tuple of str
        The strongest path that brought the energy: ``(seed, id)`` or ``(seed, via, id)``.
    displaced : str or None
        For injected hits, the id of the hit whose slot it took.

    Examples
    --------
    >>> Hit("auth/jwt.py", 0.91)  # a plain vector hit
    Hit(id='auth/jwt.py', score=0.91, origin='vector', energy=0.0, path=(), displaced=None)
    >>> hit = Hit("config/keys.py", 0.55, "injected", 0.54, ("auth/jwt.py", "config/keys.py"),
    ...           "docs/auth-stub.md")
    >>> hit.origin, hit.displaced
    ('injected', 'docs/auth-stub.md')
    """

    id: str
    score: float
    origin: Origin = "vector"
    energy: float = 0.0
    path: tuple[str, ...] = ()
    displaced: str | None = None

    def annotation(self) -> dict[str, object]:
        """Metadata saying why the hit is here; empty for plain vector hits.

        Examples
        --------
        >>> Hit("x", 0.5, "injected", 0.54, ("a", "x"), "e").annotation()["synapse_path"]
        'a -> x'
        """
        if self.origin == "vector":
            return {}
        notes: dict[str, object] = {
            "synapse_origin": self.origin,
            "synapse_energy": round(self.energy, 6),
            "synapse_path": " -> ".join(self.path),
        }
        if self.displaced is not None:
            notes["synapse_displaced"] = self.displaced
        return notes


Resolvable = Callable[[str], bool] | Container[str]
"""Which absent ids can become results: a predicate, or a container of ids."""


def resolves(resolvable: Resolvable, node: str) -> bool:
    """Whether ``resolvable`` says ``node`` can become a result.

    Examples
    --------
    >>> resolves({"a"}, "a"), resolves(lambda node: node.endswith(".py"), "b.md")
    (True, False)
    """
    if callable(resolvable):
        return bool(resolvable(node))
    return node in resolvable


def checked_cost(cost: object) -> Callable[[str], float]:
    """``cost`` with each value it returns checked: a finite number, not negative.

    An injection may not raise the total cost of the hits; an unknown cost would switch
    that off (no total compares greater than NaN), so it is refused instead.

    Raises
    ------
    InvalidTypeError, InvalidValueError
        ``cost`` is not callable; or, when the returned function meets a cost that is not
        a number, or is NaN, infinite or negative; the message names the id and the value.

    Examples
    --------
    >>> tokens = {"a": 10, "b": float("nan")}
    >>> checked_cost(tokens.get)("a")
    10.0
    >>> checked_cost(tokens.get)("b")
    Traceback (most recent call last):
    ...
    synapse_retriever.errors.InvalidValueError: cost of 'b' must be a finite number, got nan
    """

    if not callable(cost):
        raise InvalidTypeError(f"cost must be a callable id -> number, got {shown(cost)}")

    def checked(node: str) -> float:
        what = f"cost of {shown(node, 200)}"
        value = finite_real(cost(node), what, "a number (e.g. tokens)")
        if value < 0.0:
            raise InvalidValueError(f"{what} must not be negative, got {value}")
        return value

    return checked


def position_costs(
    hits: Sequence[tuple[str, float]],
    cost: Callable[[str], float] | None,
    given: Sequence[float] | None = None,
) -> list[float] | None:
    """The cost of each hit, by position: ``given`` (checked), else ``cost`` (a
    :func:`checked_cost`) of its id; None without ``cost`` (no budget to keep).

    An injection is weighed against its victim's own cost: where one id stands for several
    hits of different cost (an adapter's chunks of one document), a cost by id would count
    the victim at another copy's cost, and an injection could raise the total.

    Raises
    ------
    InvalidValueError
        ``given`` without ``cost`` (the candidates' costs), or not one cost per hit; or a
        cost that is NaN, infinite or negative, named by its position.
    InvalidTypeError
        A cost that is not a number.

    Examples
    --------
    >>> hits, tokens = [("a", 0.9), ("d", 0.5), ("d", 0.4)], checked_cost({"a": 5, "d": 100}.get)
    >>> position_costs(hits, tokens)  # by id: both copies of d cost 100
    [5.0, 100.0, 100.0]
    >>> position_costs(hits, tokens, [5, 1, 100])  # by position
    [5.0, 1.0, 100.0]
    >>> position_costs(hits, len, [5, 1])
    Traceback (most recent call last):
    ...
    synapse_retriever.errors.InvalidValueError: hit_costs must give one cost per hit: 2 for 3 hits
    """
    if cost is None:
        if given is not None:
            raise InvalidValueError("hit_costs needs cost, the cost of a candidate id")
        return None
    if given is None:
        return [cost(node) for node, _ in hits]
    costs = list(given)
    if len(costs) != len(hits):
        raise InvalidValueError(
            f"hit_costs must give one cost per hit: {len(costs)} for {len(hits)} hits"
        )
    checked = []
    for position, value in enumerate(costs):
        what = f"hit_costs[{position}]"
        number = finite_real(value, what, "a number (e.g. tokens)")
        if number < 0.0:
            raise InvalidValueError(f"{what} must not be negative, got {number}")
        checked.append(number)
    return checked


def checked_resolvable(resolvable: object) -> Resolvable | None:
    """``resolvable`` itself if it is None, a predicate or a container of ids.

    Raises
    ------
    InvalidTypeError
        Anything else, named.

    Examples
    --------
    >>> checked_resolvable({"a"})
    {'a'}
    >>> checked_resolvable(5)
    Traceback (most recent call last):
    ...
    synapse_retriever.errors.InvalidTypeError: resolvable must be None, a callable id -> bool \
or a container of ids, got int 5
    """
    if (
        resolvable is None
        or callable(resolvable)
        or (isinstance(resolvable, Container) and not isinstance(resolvable, (str, bytes)))
    ):  # a str would match ids as its substrings
        return resolvable
    raise InvalidTypeError(
        "resolvable must be None, a callable id -> bool or a container of ids, got "
        f"{type(resolvable).__name__} {shown(resolvable)}"
    )


@numeric
def injection_slots(n: int, *, seeds: int, max_inject: int) -> int:
    """Absent nodes that ``n`` hits can take in: ``min(max_inject, n − seeds, n − 1)``, at least 0.

    Seeds are never displaced, and at least one original hit stays.

    Examples
    --------
    >>> [injection_slots(n, seeds=3, max_inject=2) for n in (5, 4, 3)]
    [2, 1, 0]
    >>> injection_slots(2, seeds=1, max_inject=2)
    1
    """
    return max(0, min(max_inject, n - seeds, n - 1))


class Plan(Protocol):
    """What every rule's plan for a hit list offers, ready to inject: two phases for
    callers that must resolve candidate ids themselves (e.g. with an async docstore) in
    between.

    Each rule's plan has its own typed fields:
    :class:`~synapse_retriever.recall.published.RecallPlan` holds the spreading
    :class:`~synapse_retriever.mirror.spreading.Activation`,
    :class:`~synapse_retriever.recall.actr.ActrPlan` each node's ACT-R activation, the
    ranked candidates and their paths. What callers use of either is here.
    """

    @property
    def hits(self) -> Sequence[tuple[str, float]]:
        """The validated hits, best first."""
        ...

    @property
    def rule(self) -> RecallRule:
        """The rule's constants: the slots come from its ``seeds`` and ``max_inject``."""
        ...

    @property
    def slots(self) -> int:
        """How many candidates can be injected at most (see :func:`injection_slots`)."""
        ...

    @property
    def candidates(self) -> list[str]:
        """Absent ids that could displace a hit, strongest first (resolve these)."""
        ...

    def inject(
        self,
        resolvable: Resolvable | None = None,
        cost: Callable[[str], float] | None = None,
        *,
        hit_costs: Sequence[float] | None = None,
    ) -> list[Hit]:
        """The hits with what the rule folds in; never longer than the input. With
        ``cost``, ``hit_costs`` gives each hit's own cost, by position (see
        :func:`position_costs`)."""
        ...


def validated_hits(
    hits: Iterable[tuple[str, SupportsFloat]], *, distinct: bool = False
) -> list[tuple[str, float]]:
    """``hits`` as ``(str, float)`` rows: real, finite scores, best first.

    Any iterable of pairs will do (a list, a generator, ``zip(ids, scores)``, a NumPy
    structured array) and any real score (int, float, NumPy scalars, Fraction). A
    repeated id stays where it is, or with ``distinct`` only its first, thus best,
    occurrence is kept.

    Raises
    ------
    InvalidTypeError
        ``hits`` is a str, bytes, a mapping or not iterable; an id is not a str; a hit is not a pair
        (a longer tuple or record gives its first two items: ``(id, score, ...)``); a
        score is not a real number (a bool, a str, None, a complex, a Decimal).
    InvalidValueError
        A score that is NaN or infinite, or one above the score before it.

    An id is any non-empty str: one the store could not hold (a NUL, a lone surrogate, past
    :data:`~synapse_retriever.config.MAX_NAME_BYTES`) is in no graph, so recall treats it as
    a node it knows nothing of, and a cold graph still returns such hits unchanged.

    Examples
    --------
    >>> import numpy as np
    >>> validated_hits(zip(["a", "b", "a"], np.array([2, 1, 1])), distinct=True)
    [('a', 2.0), ('b', 1.0)]
    """
    if type(hits) is not list and (  # a list is the common case: skip the ABC checks
        isinstance(hits, (str, bytes, Mapping)) or not isinstance(hits, Iterable)
    ):
        got = (
            f"a {type(hits).__name__}: pass hits.items()"
            if isinstance(hits, Mapping)
            else shown(hits)
        )
        raise InvalidTypeError(f"hits must be an iterable of (id, score) pairs, got {got}")
    rows: list[tuple[str, float]] = []
    lowest, best = -math.inf, sys.float_info.max  # best: the previous score, finite
    hit: tuple[object, object]
    for hit in hits:
        if type(hit) is not tuple or len(hit) != 2:  # a 2-tuple is the common case
            hit = _pair(hit, len(rows))
        node, score = hit
        if type(node) is not str or not node:
            node = _hit_id(node)
        if type(score) is not float:
            score = _real_score(score, len(rows), node)
        if not lowest < score <= best:  # one chained comparison refuses NaN, ±inf, disorder
            raise _misplaced_score(score, len(rows), node, best)
        best = score
        rows.append((node, score))
    if distinct and len({node for node, _ in rows}) < len(rows):
        first: dict[str, float] = {}
        for node, score in rows:
            first.setdefault(node, score)
        rows = list(first.items())
    return rows


def read_ids(nodes: object, what: str = "nodes") -> list[str]:
    """Distinct ids to read the graph for (seeds, ids to report), in first-seen order.

    As for hits, an id is any non-empty str: one no store could hold is in no graph, and
    adds nothing. A bare str is refused (it would be read as its characters).

    Examples
    --------
    >>> read_ids(["a", "b", "a", "x" * 3000])[:2]
    ['a', 'b']
    >>> read_ids("ab")
    Traceback (most recent call last):
    ...
    synapse_retriever.errors.InvalidTypeError: nodes must be a list of ids, got a bare str 'ab'
    """
    if isinstance(nodes, (str, bytes)) or not isinstance(nodes, Iterable):
        kind = f"a bare {type(nodes).__name__}" if isinstance(nodes, (str, bytes)) else "a"
        raise InvalidTypeError(f"{what} must be a list of ids, got {kind} {shown(nodes)}")
    try:
        return list(dict.fromkeys(_hit_id(node) for node in nodes))
    except (InvalidTypeError, InvalidValueError) as exc:
        raise type(exc)(f"{what}: {exc}") from None


def _hit_id(node: object) -> str:
    """A hit's id as a plain str (NumPy's ``str_`` too): any non-empty str. An id the store
    could not hold (a NUL, a lone surrogate, past ``MAX_NAME_BYTES``) is no error here:
    it is in no graph, so recall treats it as a node it knows nothing of."""
    if not isinstance(node, str):
        raise InvalidTypeError(f"node id must be a str, got {type(node).__name__} {shown(node)}")
    if not node:
        raise InvalidValueError(f"node id must be a non-empty string, got {shown(node)}")
    return str(node)


def _pair(hit: object, position: int) -> tuple[object, object]:
    """``hit``'s first two items if it is an iterable other than a str (a list, a NumPy
    record, a longer tuple)."""
    if isinstance(hit, Mapping):  # its keys would read as the id and the score
        raise InvalidTypeError(
            f"hit {position} must be an (id, score) pair, got a {type(hit).__name__} {shown(hit)}: "
            "pass its id and score as a pair"
        )
    if not isinstance(hit, (str, bytes)):
        with contextlib.suppress(TypeError):  # not iterable
            items: tuple[object, ...] = tuple(hit)  # type: ignore[arg-type]
            if len(items) >= 2:
                return items[0], items[1]
    raise InvalidTypeError(f"hit {position} must be an (id, score) pair, got {shown(hit)}")


def _real_score(score: object, position: int, node: str) -> float:
    """``score`` as a float if it is a real number (NumPy's included), not a bool."""
    if isinstance(score, bool) or not isinstance(score, Real):
        hint = ": pass float(score)" if isinstance(score, Decimal) else ""
        raise InvalidTypeError(
            f"hit {position} ({shown(node, 200)}) has a score that is not a real number, "
            f"{shown(score)}; expected an int, a float, a Fraction or a NumPy scalar{hint}"
        )
    try:
        return float(score)
    except OverflowError:  # an int or Fraction beyond float's range
        raise InvalidValueError(
            f"hit {position} ({shown(node, 200)}) has a score past a float's range"
        ) from None


def _misplaced_score(score: float, position: int, node: str, previous: float) -> InvalidValueError:
    """The error for a score that is not finite, or above the previous hit's."""
    if not math.isfinite(score):
        return InvalidValueError(
            f"hit {position} ({shown(node, 200)}) has a non-finite score {shown(score)}"
        )
    return InvalidValueError(
        "hits must be sorted best first (scores non-increasing): hit "
        f"{position} ({shown(node, 200)}) scores {shown(score)}, above hit {position - 1}'s "
        f"{shown(previous)}; sort them best first; for distances (e.g. FAISS L2, lower is "
        "better), pass similarities (e.g. the negated distances)"
    )
