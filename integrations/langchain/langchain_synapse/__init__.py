"""LangChain integration of synapse-retriever: associative recall that learns from use.

`SynapseRetriever` wraps any retriever and folds learned co-usage into its results
without ever returning more documents; `SynapseCallbackHandler` learns that co-usage
from what an agent's tools read and edit.
"""

from langchain_synapse.callbacks import DEFAULT_INPUT_KEYS, SynapseCallbackHandler
from langchain_synapse.retrievers import SynapseRetriever, document_id

__all__ = ["DEFAULT_INPUT_KEYS", "SynapseCallbackHandler", "SynapseRetriever", "document_id"]

__version__ = "0.1.0"
