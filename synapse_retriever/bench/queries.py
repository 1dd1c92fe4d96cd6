"""``synapse-retriever bench quality --queries FILE.jsonl``: recall and precision on your corpus.

Each line of the file is one query, as JSON::

    {"query": "why do tokens expire early?",
     "hits": [["auth/jwt.py", 0.82], ["auth/login.py", 0.71], ["docs/faq.md", 0.64]],
     "relevant": ["auth/jwt.py", "config/keys.py"],
     "at": "2024-05-02T10:00:00Z",
     "used": ["auth/jwt.py", "config/keys.py"]}

``hits`` are your vector search's results, best first (ids, or ``[id, score]`` pairs;
plain ids score by rank), ``relevant`` the ids the query needed; ``query`` (a label),
``at`` (when it was asked: ISO 8601 or POSIX seconds; now if absent) and ``used`` (ids
used together after it, learned as one event at ``at`` once the query is scored, as the
``online`` variant learns) are optional. Every query is scored as its hits through the
store's recall against the hits alone, at each k, with the quality table's columns
(:func:`~synapse_retriever.bench.quality.score_table`).

Examples
--------
>>> from synapse_retriever import SynapseStore
>>> store = SynapseStore(":memory:")
>>> _ = store.reinforce(["auth/jwt.py", "config/keys.py"], at=0)
>>> line = parse_query('{"hits": ["auth/jwt.py", "auth/login.py"], '
...                    '"relevant": ["config/keys.py"], "at": 86400}', 1)
>>> report = run_queries(store, [line], ks=(2,))
>>> rows = report["variants"]["frozen"]["by_k"]["2"]["rows"]
>>> rows["vector"]["recall"], rows["synapse"]["recall"], rows["synapse"]["injected_precision"]
(0.0, 1.0, 1.0)
"""

from __future__ import annotations

import json
import math
import os
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from synapse_retriever.bench.metrics import (
    Injections,
    hit_at_k,
    injections,
    ndcg_at_k,
    recall_at_k,
)
from synapse_retriever.bench.quality import score_table
from synapse_retriever.capture.gitlog import parse_since
from synapse_retriever.clock import to_seconds
from synapse_retriever.config import validate_namespace
from synapse_retriever.errors import InvalidValueError, shown
from synapse_retriever.store import SynapseStore

__all__ = ["QueryLine", "parse_query", "read_queries", "run_queries"]


@dataclass(frozen=True)
class QueryLine:
    """One query of a ``--queries`` file (see the module docstring)."""

    hits: tuple[tuple[str, float], ...]
    relevant: frozenset[str]
    at: float | None = None
    used: tuple[str, ...] = ()
    text: str = ""


def _ids(value: object, what: str, number: int) -> list[str]:
    if not isinstance(value, list) or not all(isinstance(x, str) and x for x in value):
        raise InvalidValueError(f"line {number}: {what} must be a list of ids, got {shown(value)}")
    return value


def _finite(score: float) -> bool:
    """Whether ``score`` is a finite number a float can hold (an int of 400 digits is not).

    Examples
    --------
    >>> _finite(0.5), _finite(float("nan")), _finite(10**400)
    (True, False, False)
    """
    try:
        return math.isfinite(score)
    except OverflowError:
        return False


def parse_query(text: str, number: int) -> QueryLine:
    """One line of a ``--queries`` file; ``number`` names it in errors.

    Raises
    ------
    InvalidValueError
        Not a JSON object, no ``hits`` or ``relevant`` list, a bad score or time.

    Examples
    --------
    >>> parse_query('{"hits": [["a", 0.9], "b"], "relevant": ["b"]}', 1).hits
    (('a', 0.9), ('b', 0.5))
    >>> parse_query('{"hits": ["a"]}', 7)
    Traceback (most recent call last):
    ...
    synapse_retriever.errors.InvalidValueError: line 7: relevant must be a list of ids, got None
    """
    try:
        data = json.loads(text)
    except ValueError as exc:
        raise InvalidValueError(f"line {number}: not JSON ({exc})") from None
    except RecursionError:
        raise InvalidValueError(f"line {number}: not JSON (nested too deep)") from None
    if not isinstance(data, dict):
        raise InvalidValueError(f"line {number}: expected a JSON object, got {text.strip()!r}")
    raw = data.get("hits")
    if not isinstance(raw, list) or not raw:
        raise InvalidValueError(f"line {number}: hits must be a non-empty list, got {shown(raw)}")
    hits: list[tuple[str, float]] = []
    for rank, hit in enumerate(raw):
        if isinstance(hit, str) and hit:
            hits.append((hit, 1.0 / (rank + 1)))  # by rank: 1, 1/2, 1/3, ...
        elif (
            isinstance(hit, list)
            and len(hit) == 2
            and isinstance(hit[0], str)
            and hit[0]
            and isinstance(hit[1], (int, float))
            and not isinstance(hit[1], bool)
            and _finite(hit[1])
        ):
            hits.append((hit[0], float(hit[1])))
        else:
            raise InvalidValueError(
                f"line {number}: a hit must be an id or [id, finite score], got {shown(hit)}"
            )
    relevant = _ids(data.get("relevant"), "relevant", number)
    used = _ids(data.get("used", []), "used", number)
    at = data.get("at")
    try:
        when = None if at is None else parse_since(at) if isinstance(at, str) else to_seconds(at)
    except (TypeError, ValueError, OverflowError) as exc:
        raise InvalidValueError(f"line {number}: at: {exc}") from None
    label = data.get("query", "")
    return QueryLine(tuple(hits), frozenset(relevant), when, tuple(used), str(label))


def read_queries(path: str | os.PathLike[str]) -> list[QueryLine]:
    """Every query of a JSON Lines file (blank lines skipped).

    Raises
    ------
    InvalidValueError
        A bad line, named by its number; a file that is not UTF-8; or no query at all.
    """
    try:
        whole = Path(path).read_text(encoding="utf-8")
    except UnicodeDecodeError as exc:
        raise InvalidValueError(
            f"{os.fspath(path)!r} is not UTF-8 text (byte {exc.start}: {exc.object[exc.start]:#x})"
        ) from None
    lines = [
        parse_query(text, number)
        for number, text in enumerate(whole.splitlines(), start=1)
        if text.strip()
    ]
    if not lines:
        raise InvalidValueError(f"{os.fspath(path)!r} holds no query")
    return lines


def run_queries(
    store: SynapseStore,
    queries: Sequence[QueryLine],
    *,
    ks: Sequence[int] = (5, 10),
    namespace: str = "personal",
    resamples: int = 2000,
    name: str | None = None,
) -> dict[str, Any]:
    """Score ``queries`` in order over ``store``: each one's hits against the same hits
    through recall (``namespace`` active), at each k; then its ``used`` ids are learned
    into ``store`` as one event at its time (the only write: give the queries in time
    order; a query older than the store's last reinforcement of one of its pairs, as in a
    store that went on learning after the queries were logged, counts at that
    reinforcement: ``late="clamp"``).

    Returns a report shaped as ``bench quality``'s (one variant: ``online`` if any query
    has ``used`` ids, else ``frozen``), for :func:`~synapse_retriever.bench.quality.table_rows`.
    """
    validate_namespace(namespace)
    if not ks or any(isinstance(k, bool) or not isinstance(k, int) or k < 2 for k in ks):
        raise InvalidValueError(f"every k must be an integer of at least 2, got {list(ks)}")
    names = ["vector", "synapse"]
    scores: dict[int, dict[str, list[tuple[float, float, float]]]] = {
        k: {row: [] for row in names} for k in ks
    }
    counts = {k: {row: Injections() for row in names} for k in ks}
    learned_at = -math.inf  # the latest time a query's used ids were learned at
    for number, query in enumerate(queries, start=1):
        for k in ks:
            hits = list(query.hits[:k])
            plan = store.plan(hits, at=query.at, active_namespace=namespace)
            ranked = {"vector": [n for n, _ in hits], "synapse": [h.id for h in plan.inject()]}
            for row in names:
                scores[k][row].append(
                    (
                        recall_at_k(ranked[row], query.relevant, k),
                        ndcg_at_k(ranked[row], query.relevant, k),
                        hit_at_k(ranked[row], query.relevant, k),
                    )
                )
                counts[k][row] += injections(ranked["vector"], ranked[row], query.relevant)
        if query.used:
            at = time.time() if query.at is None else query.at
            if at < learned_at:  # the file out of order; the store may have learned since
                raise InvalidValueError(
                    f"query {number}: at {at} is earlier than an earlier query's {learned_at}: "
                    "give the queries in time order"
                )
            learned_at = at
            try:
                store.reinforce(query.used, namespace=namespace, at=at, late="clamp")
            except InvalidValueError as exc:
                raise InvalidValueError(f"query {number}: used: {exc}") from None
    variant = "online" if any(query.used for query in queries) else "frozen"
    config = {
        name: value
        for name, value in store.config.flat().items()
        if isinstance(value, (int, float, str, bool))
    }
    return {
        "benchmark": "synapse-retriever bench quality --queries",
        "name": name or store.path,
        "store": store.path,
        "settings": {"ks": list(ks), "namespace": namespace, "config": config},
        "commits": {"queries": len(queries)},
        "variants": {
            variant: {
                "queries": [query.text for query in queries],
                "by_k": {
                    str(k): {
                        "rows": score_table(names, scores[k], counts[k], resamples),
                        "synapse_misses": {},
                    }
                    for k in ks
                },
            }
        },
    }
