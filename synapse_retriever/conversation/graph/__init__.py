"""The relational half of conversation memory: a temporal graph of typed, decaying edges.

Turns and the entities they mention are nodes; FOLLOWED_BY joins consecutive turns of a
session, MENTIONS a turn to each entity it names (found without a model,
:mod:`~.entities`), and a relation extractor may add RELATES_TO, CAUSED_BY and SOLVED_BY.
Edges decay and strengthen with use (:mod:`~.edges`); a walk along them (:mod:`~.walk`)
recalls the turns that led to what is asked, blended with vector recall by the kind of
question (:mod:`~.modes`, :mod:`~.hybrid`).
:meth:`~synapse_retriever.conversation.ConversationMemory.retrieve` puts it together.

Examples
--------
>>> from synapse_retriever.conversation import ConversationMemory
>>> with ConversationMemory(":memory:") as memory:
...     _ = memory.add_turn("Deploys of app.py fail since Monday.", at=0)
...     _ = memory.add_turn("Cause found: the base image of app.py changed.", at=60)
...     [(r.turn_id, r.origin) for r in memory.retrieve("why does app.py fail?", k=2, at=120)]
[(1, 'both'), (2, 'both')]
"""

from synapse_retriever.conversation.graph.edges import (
    EDGE_TYPES,
    LINK_TYPES,
    edge_strength,
    reinforced,
    turn_links,
)
from synapse_retriever.conversation.graph.entities import (
    ENTITY_KINDS,
    Entity,
    extract_entities,
    singular,
)
from synapse_retriever.conversation.graph.hybrid import Retrieval, lift, ranked, spread
from synapse_retriever.conversation.graph.modes import (
    MODE_ALIASES,
    MODE_PROMPT,
    MODE_WEIGHTS,
    ModeDetector,
    PromptModeDetector,
    canonical_mode,
    detect_mode,
    mode_weights,
)
from synapse_retriever.conversation.graph.relations import (
    RELATIONS_PROMPT,
    PromptRelationExtractor,
    Relation,
    RelationExtractor,
    endpoint_node,
    parse_relations,
)
from synapse_retriever.conversation.graph.walk import (
    GraphHit,
    TemporalGraph,
    TypedEdge,
    graph_search,
    specificity,
    turn_node,
)

__all__ = [
    "EDGE_TYPES",
    "ENTITY_KINDS",
    "LINK_TYPES",
    "MODE_ALIASES",
    "MODE_PROMPT",
    "MODE_WEIGHTS",
    "RELATIONS_PROMPT",
    "Entity",
    "GraphHit",
    "ModeDetector",
    "PromptModeDetector",
    "PromptRelationExtractor",
    "Relation",
    "RelationExtractor",
    "Retrieval",
    "TemporalGraph",
    "TypedEdge",
    "canonical_mode",
    "detect_mode",
    "edge_strength",
    "endpoint_node",
    "extract_entities",
    "graph_search",
    "lift",
    "mode_weights",
    "parse_relations",
    "ranked",
    "reinforced",
    "singular",
    "specificity",
    "spread",
    "turn_links",
    "turn_node",
]
