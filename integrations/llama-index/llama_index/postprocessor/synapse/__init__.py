"""LlamaIndex integration of synapse-retriever: recall what was used together.

>>> from llama_index.postprocessor.synapse import SynapsePostprocessor, SynapseUsageHandler
"""

from llama_index.postprocessor.synapse.base import (
    NodeFetcher,
    SynapsePostprocessor,
    SynapseRecallEvent,
)
from llama_index.postprocessor.synapse.usage import (
    SynapseUsageEvent,
    SynapseUsageHandler,
    mark_used,
)

__all__ = [
    "NodeFetcher",
    "SynapsePostprocessor",
    "SynapseRecallEvent",
    "SynapseUsageEvent",
    "SynapseUsageHandler",
    "mark_used",
]
