"""Conversation memory that fades like a brain: importance, graded detail, consolidation.

Every turn of a long chat keeps a detail level (FULL, CHUNKS, SUMMARY or DROPPED) that
degrades smoothly with its importance for the current query, and the assembled history
always fits a fixed token budget: no cliff into one batch summary.

Examples
--------
>>> from synapse_retriever.conversation import ConversationMemory
>>> with ConversationMemory(":memory:") as memory:
...     turn_id = memory.add_turn("I moved the deploy to Fridays", role="user", session="s1")
...     [(t.turn_id, t.role, t.level.value) for t in memory.assemble("when do we deploy?", 2000)]
[(1, 'user', 'full')]
"""

from synapse_retriever._text import blank
from synapse_retriever.conversation.assemble import AssembledTurn
from synapse_retriever.conversation.config import MODES, PRESETS, ContextConfig
from synapse_retriever.conversation.consolidate import Consolidator
from synapse_retriever.conversation.embed import (
    CachedEmbedder,
    Embedder,
    HashingEmbedder,
    TurnIndex,
    as_embedder,
)
from synapse_retriever.conversation.history import (
    HistoryMessage,
    TrimmedMessage,
    tool_groups,
    trim_history,
)
from synapse_retriever.conversation.importance import habituation, importance, recency, surprise
from synapse_retriever.conversation.levels import (
    ContextBudgetError,
    Level,
    plan_levels,
    threshold_level,
)
from synapse_retriever.conversation.memory import MAX_NAME_CHARS, ROLES, ConversationMemory
from synapse_retriever.conversation.minilm import MiniLmEmbedder, MiniLmUnavailableError
from synapse_retriever.conversation.replay import TfidfThemes, ThemeExtractor, matching
from synapse_retriever.conversation.summarize import (
    Condensed,
    ExtractiveSummarizer,
    PromptSummarizer,
    Summarizer,
    focus,
)
from synapse_retriever.persistence.conversation import SQLiteConversationStorage, TurnRecord
from synapse_retriever.tokens import TokenCounter, checked_counter, tiktoken_counter

__all__ = [
    "MAX_NAME_CHARS",
    "MODES",
    "PRESETS",
    "ROLES",
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
    "MiniLmEmbedder",
    "MiniLmUnavailableError",
    "PromptSummarizer",
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
]
