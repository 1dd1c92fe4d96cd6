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

# Conversation memory: a memory block for Memory.from_defaults, message trimming by
# importance, a summarizer backed by a LlamaIndex LLM, and an embedder backed by a
# LlamaIndex embedding model.
from llama_index.postprocessor.synapse.embeddings import LlamaIndexEmbedder
from llama_index.postprocessor.synapse.memory import (
    SynapseMemoryBlock,
    llm_summarizer,
    synapse_trim_chat_messages,
)
from llama_index.postprocessor.synapse.memory_retriever import (
    SynapseMemoryRetriever,
    llm_mode_detector,
    llm_relation_extractor,
    retrieval_node,
)

__all__ += [
    "LlamaIndexEmbedder",
    "SynapseMemoryBlock",
    "SynapseMemoryRetriever",
    "llm_mode_detector",
    "llm_relation_extractor",
    "llm_summarizer",
    "retrieval_node",
    "synapse_trim_chat_messages",
]
