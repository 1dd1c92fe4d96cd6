"""Typed temporal edges: their kinds, and a strength that decays and grows with use.

An edge of the conversation graph joins two nodes (turns, entities) with a type, the
time it was made or last strengthened, and a reinforcement count. Its strength is read
lazily, at the time asked, from those three (nothing is rewritten as time passes, so
reading twice gives the same number):

``strength(age, count) = decay(age) × (0.5 + 0.5 × min(count / 10, 1))``

with ``decay(age) = exp(−edge_decay_rate × age_days)``, the core's exponential
(:func:`~synapse_retriever.learning.decay.decayed_weight` at a half-life of
``ln 2 / edge_decay_rate`` days). A new edge starts at half strength; ten reinforcements
double it. An edge is reinforced only by use: each retrieval that traversed it and whose
result the caller used counts one traversal, and every ``reinforcement_threshold``
traversals (default 3) add one to its count and restart its clock.

References
----------
The conversation-memory design (``EDGE_DECAY_RATE = 0.05``, ``REINFORCEMENT_THRESHOLD =
3``, the strength rule). Bliss and Lømo (1973) for strengthening by repeated use.

Examples
--------
>>> round(edge_strength(0.0, 0), 3), round(edge_strength(0.0, 10), 3)
(0.5, 1.0)
>>> reinforced(count=0, traversals=2, threshold=3)  # the 3rd traversal strengthens
(1, 0)
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from synapse_retriever.conversation.config import ContextConfig
from synapse_retriever.conversation.graph.entities import Entity
from synapse_retriever.errors import InvalidValueError
from synapse_retriever.learning.decay import decayed_weight
from synapse_retriever.persistence.conversation.protocol import EntityRow, TypedEdgeRow

__all__ = [
    "EDGE_TYPES",
    "FULL_STRENGTH_COUNT",
    "LINK_TYPES",
    "edge_strength",
    "reinforced",
    "turn_links",
]

EDGE_TYPES = ("FOLLOWED_BY", "MENTIONS", "RELATES_TO", "CAUSED_BY", "SOLVED_BY")
"""FOLLOWED_BY: a turn to the next turn of its session. MENTIONS: a turn to an entity it
names. RELATES_TO, CAUSED_BY, SOLVED_BY: typed relations between turns or entities, from
a relation extractor (a model); ``a CAUSED_BY b`` reads "a was caused by b"."""

LINK_TYPES = ("RELATES_TO", "CAUSED_BY", "SOLVED_BY")
"""The edge types a relation extractor may propose."""

FULL_STRENGTH_COUNT = 10
"""Reinforcements at which an edge reaches its full strength (the ``10`` of the rule)."""


def edge_strength(
    age_days: float, count: int, *, decay_rate: float = ContextConfig.edge_decay_rate
) -> float:
    """An edge's strength in [0, 1]: ``exp(−decay_rate × age) × (0.5 + 0.5 × min(count / 10, 1))``.

    Parameters
    ----------
    age_days : float
        Days since the edge was made or last strengthened (a negative age counts as 0).
    count : int
        Its reinforcements so far (>= 0).
    decay_rate : float
        Per day (> 0): the half-life is ``ln 2 / decay_rate`` days (13.9 at 0.05).

    Examples
    --------
    One half-life old, five reinforcements: 0.5 × (0.5 + 0.5 × 0.5) = 0.375.

    >>> round(edge_strength(math.log(2) / 0.05, 5), 6)
    0.375

    Past ten reinforcements nothing more is gained:

    >>> edge_strength(0.0, 40) == edge_strength(0.0, 10) == 1.0
    True
    """
    if not math.isfinite(age_days):
        raise InvalidValueError(f"age_days must be a finite number, got {age_days}")
    if count < 0:
        raise InvalidValueError(f"count must be >= 0, got {count}")
    if not (math.isfinite(decay_rate) and decay_rate > 0):
        raise InvalidValueError(f"decay_rate must be a finite number > 0, got {decay_rate}")
    decay = float(decayed_weight(1.0, math.log(2) / decay_rate, age_days))
    return decay * (0.5 + 0.5 * min(count / FULL_STRENGTH_COUNT, 1.0))


def reinforced(
    count: int, traversals: int, *, threshold: int = ContextConfig.reinforcement_threshold
) -> tuple[int, int]:
    """``(count, traversals)`` after one more used traversal.

    Traversals accumulate; when they reach ``threshold`` the count gains one and the
    traversals start again from 0 (the caller then restarts the edge's clock).

    Examples
    --------
    >>> reinforced(0, 0), reinforced(0, 1), reinforced(0, 2), reinforced(1, 0)
    ((0, 1), (0, 2), (1, 0), (1, 1))
    >>> reinforced(4, 0, threshold=1)  # every traversal strengthens
    (5, 0)
    """
    if threshold < 1:
        raise InvalidValueError(f"threshold must be >= 1, got {threshold}")
    if traversals + 1 >= threshold:
        return count + 1, 0
    return count, traversals + 1


def traversed(edge: TypedEdgeRow, at: float, threshold: int) -> TypedEdgeRow:
    """``edge`` after one more used traversal at ``at`` (:func:`reinforced`): its clock
    restarts at ``at`` when its count gains one (never earlier than it was).

    Examples
    --------
    >>> edge = TypedEdgeRow("turn:1", "file:app.py", "MENTIONS", 10.0, 2, 1)
    >>> tuple(traversed(edge, 60.0, threshold=2))
    ('turn:1', 'file:app.py', 'MENTIONS', 60.0, 3, 0)
    >>> tuple(traversed(edge, 60.0, threshold=3))
    ('turn:1', 'file:app.py', 'MENTIONS', 10.0, 2, 2)
    """
    count, traversals = reinforced(edge.reinforcements, edge.traversals, threshold=threshold)
    stamp = max(edge.at, at) if count > edge.reinforcements else edge.at
    return edge._replace(at=stamp, reinforcements=count, traversals=traversals)


def turn_links(
    turn_id: int, previous: int | None, entities: Sequence[Entity], at: float
) -> tuple[list[EntityRow], list[TypedEdgeRow]]:
    """The rows a new turn adds to the graph: its entity nodes, FOLLOWED_BY from the
    ``previous`` turn of its session (if any), and MENTIONS to each entity, all at ``at``.

    Examples
    --------
    >>> from synapse_retriever.conversation.graph.entities import extract_entities
    >>> nodes, edges = turn_links(7, 6, extract_entities("Edit jwt.py"), at=60.0)
    >>> nodes
    [EntityRow(node='file:jwt.py', kind='file', label='jwt.py')]
    >>> for edge in edges:
    ...     print(tuple(edge))
    ('turn:6', 'turn:7', 'FOLLOWED_BY', 60.0, 0, 0)
    ('turn:7', 'file:jwt.py', 'MENTIONS', 60.0, 0, 0)
    """
    node = f"turn:{turn_id}"
    rows: list[TypedEdgeRow] = []
    if previous is not None:
        rows.append(TypedEdgeRow(f"turn:{previous}", node, "FOLLOWED_BY", at))
    rows.extend(TypedEdgeRow(node, entity.node, "MENTIONS", at) for entity in entities)
    return [EntityRow(e.node, e.kind, e.surface) for e in entities], rows
