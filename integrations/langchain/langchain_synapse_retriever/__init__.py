"""LangChain integration of synapse-retriever: associative recall that learns from use.

`SynapseRetriever` wraps any retriever and folds learned co-usage into its results
without ever returning more documents; `SynapseCallbackHandler` learns that co-usage
from what an agent's tools read and edit.
"""

from langchain_synapse_retriever.callbacks import DEFAULT_INPUT_KEYS, SynapseCallbackHandler
from langchain_synapse_retriever.retrievers import SynapseRetriever, document_id

__all__ = ["DEFAULT_INPUT_KEYS", "SynapseCallbackHandler", "SynapseRetriever", "document_id"]

__version__ = "0.1.0"

# Conversation memory: a trim_messages-style function, a summarizer and an embedder (any
# LangChain Embeddings) for the core's ConversationMemory, and an agent middleware when
# langchain >= 1 is installed.
from langchain_synapse_retriever import memory as _memory
from langchain_synapse_retriever.embeddings import LangChainEmbedder
from langchain_synapse_retriever.memory import chat_model_summarizer, synapse_trim_messages
from langchain_synapse_retriever.memory_retriever import (
    SynapseMemoryRetriever,
    chat_model_mode_detector,
    chat_model_relation_extractor,
    retrieval_document,
)

__all__ += [
    "LangChainEmbedder",
    "SynapseMemoryRetriever",
    "chat_model_mode_detector",
    "chat_model_relation_extractor",
    "chat_model_summarizer",
    "retrieval_document",
    "synapse_trim_messages",
]
if "SynapseMemoryMiddleware" in _memory.__all__:
    SynapseMemoryMiddleware = _memory.SynapseMemoryMiddleware
    __all__ += ["SynapseMemoryMiddleware"]
