"""Each distribution's public names, pinned: a name added, removed or renamed fails here.

When this fails on purpose (a name was added or retired), update the list below, the API
reference in ``docs/reference/`` and ``CHANGELOG.md`` together. That every name here has a
``:::`` entry in the reference is checked by ``test_docs.py``
(``test_every_public_name_is_in_the_api_reference``, over the packages listed here).
"""

from __future__ import annotations

import importlib
import importlib.util
from types import ModuleType

import pytest

PUBLIC_API: dict[str, list[str]] = {
    "synapse_retriever": [
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
    ],
    "synapse_retriever.conversation": [
        "AssembledTurn",
        "CachedEmbedder",
        "Condensed",
        "Consolidator",
        "ContextBudgetError",
        "ContextConfig",
        "ConversationMemory",
        "Embedder",
        "ExtractiveSummarizer",
        "HashingEmbedder",
        "HistoryMessage",
        "Level",
        "MAX_NAME_CHARS",
        "MODES",
        "MiniLmEmbedder",
        "MiniLmUnavailableError",
        "PRESETS",
        "PromptSummarizer",
        "ROLES",
        "SQLiteConversationStorage",
        "Summarizer",
        "TfidfThemes",
        "ThemeExtractor",
        "TokenCounter",
        "TrimmedMessage",
        "TurnIndex",
        "TurnRecord",
        "as_embedder",
        "blank",
        "checked_counter",
        "focus",
        "habituation",
        "importance",
        "matching",
        "plan_levels",
        "recency",
        "surprise",
        "threshold_level",
        "tiktoken_counter",
        "tool_groups",
        "trim_history",
    ],
    "langchain_synapse_retriever": [
        "DEFAULT_INPUT_KEYS",
        "LangChainEmbedder",
        "SynapseCallbackHandler",
        "SynapseMemoryMiddleware",  # only with langchain>=1 installed (see below)
        "SynapseMemoryRetriever",
        "SynapseRetriever",
        "chat_model_mode_detector",
        "chat_model_relation_extractor",
        "chat_model_summarizer",
        "document_id",
        "retrieval_document",
        "synapse_trim_messages",
    ],
    "llama_index.postprocessor.synapse": [
        "LlamaIndexEmbedder",
        "NodeFetcher",
        "SynapseMemoryBlock",
        "SynapseMemoryRetriever",
        "SynapsePostprocessor",
        "SynapseRecallEvent",
        "SynapseUsageEvent",
        "SynapseUsageHandler",
        "llm_mode_detector",
        "llm_relation_extractor",
        "llm_summarizer",
        "mark_used",
        "retrieval_node",
        "synapse_trim_chat_messages",
    ],
}
"""Package -> its ``__all__``, sorted (plain ``sorted``, capitals first)."""

CORE = ("synapse_retriever", "synapse_retriever.conversation")


def _expected(package: str) -> list[str]:
    names = PUBLIC_API[package]
    if package == "langchain_synapse_retriever" and importlib.util.find_spec("langchain") is None:
        # The agent middleware needs the optional langchain package; without it the name
        # is not exported (importing it raises an ImportError that says what to install).
        names = [name for name in names if name != "SynapseMemoryMiddleware"]
    return names


def _imported(package: str) -> ModuleType:
    if package in CORE:
        return importlib.import_module(package)
    return pytest.importorskip(package, reason=f"{package} is not installed")


def test_the_pinned_lists_are_sorted_and_without_repeats() -> None:
    for package, names in PUBLIC_API.items():
        assert names == sorted(set(names)), package


@pytest.mark.parametrize("package", sorted(PUBLIC_API))
def test_all_is_exactly_the_pinned_list(package: str) -> None:
    exported = _imported(package).__all__
    assert len(exported) == len(set(exported)), f"{package}.__all__ repeats a name"
    assert sorted(exported) == _expected(package)


@pytest.mark.parametrize("package", sorted(PUBLIC_API))
def test_every_public_name_is_importable_from_its_package(package: str) -> None:
    module = _imported(package)
    missing = [name for name in _expected(package) if not hasattr(module, name)]
    assert not missing, f"in {package}.__all__ but not importable: {missing}"
