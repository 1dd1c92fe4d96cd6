"""synapse-retriever: associative recall that learns from use and never costs a token more.

Examples
--------
>>> from synapse_retriever import SynapseStore
>>> store = SynapseStore(":memory:")
>>> store.reinforce(["auth/jwt.py", "config/secrets.py"], at=0)
1
>>> hits = [("auth/jwt.py", 0.9), ("auth/login.py", 0.8), ("auth/views.py", 0.7),
...         ("docs/auth.md", 0.4)]
>>> [h.id for h in store.recall(hits, at=0)]
['auth/jwt.py', 'auth/login.py', 'auth/views.py', 'config/secrets.py']
"""

from synapse_retriever.capture.coactivation import (
    CoActivation,
    coactivation_set,
    content_id,
    validate_node_id,
)
from synapse_retriever.capture.runs import RunCollector
from synapse_retriever.config import (
    ActrRule,
    Learning,
    Operations,
    PublishedRule,
    Spreading,
    SynapseConfig,
    validate_namespace,
)
from synapse_retriever.errors import (
    AccessDeniedError,
    ClosedError,
    CorruptDatabaseError,
    InvalidTypeError,
    InvalidValueError,
    MissingExtraError,
    NotASynapseDatabaseError,
    ReadOnlyStoreError,
    StorageUnavailableError,
    SynapseError,
    WriteConflictError,
)
from synapse_retriever.learning.decay import (
    decayed_weight,
    effective_weight,
    learned_half_life,
    reinforced_weight,
)
from synapse_retriever.mirror.graph import Edge
from synapse_retriever.mirror.spreading import Activation, hub_factor, spread_activation
from synapse_retriever.recall.hits import ANNOTATION_KEYS, Hit, injection_slots
from synapse_retriever.recall.items import (
    ItemRecall,
    Recalled,
    annotate,
    plan_items,
    rank_scores,
    usable_scores,
    usage_ids,
)
from synapse_retriever.recall.published import RecallPlan, candidates, inject
from synapse_retriever.store import DecayReport, Reinforced, RepairReport, SynapseStore
from synapse_retriever.tokens import approximate_tokens

__all__ = [
    "ANNOTATION_KEYS",
    "AccessDeniedError",
    "Activation",
    "ActrRule",
    "ClosedError",
    "CoActivation",
    "CorruptDatabaseError",
    "DecayReport",
    "Edge",
    "Hit",
    "InvalidTypeError",
    "InvalidValueError",
    "ItemRecall",
    "Learning",
    "MissingExtraError",
    "NotASynapseDatabaseError",
    "Operations",
    "PublishedRule",
    "ReadOnlyStoreError",
    "RecallPlan",
    "Recalled",
    "Reinforced",
    "RepairReport",
    "RunCollector",
    "Spreading",
    "StorageUnavailableError",
    "SynapseConfig",
    "SynapseError",
    "SynapseStore",
    "WriteConflictError",
    "annotate",
    "approximate_tokens",
    "candidates",
    "coactivation_set",
    "content_id",
    "decayed_weight",
    "effective_weight",
    "hub_factor",
    "inject",
    "injection_slots",
    "learned_half_life",
    "plan_items",
    "rank_scores",
    "reinforced_weight",
    "spread_activation",
    "usable_scores",
    "usage_ids",
    "validate_namespace",
    "validate_node_id",
]

__version__ = "0.1.0"
