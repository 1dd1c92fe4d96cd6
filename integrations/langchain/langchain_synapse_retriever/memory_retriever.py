"""`SynapseMemoryRetriever`: a conversation memory's hybrid recall as a LangChain retriever."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from typing import Any

from langchain_core.callbacks import (
    AsyncCallbackManagerForRetrieverRun,
    CallbackManagerForRetrieverRun,
)
from langchain_core.documents import Document
from langchain_core.language_models import BaseLanguageModel
from langchain_core.messages import BaseMessage
from langchain_core.runnables import Runnable
from langchain_core.runnables.config import ensure_config, set_config_context
from pydantic import ConfigDict, Field, field_validator

from langchain_synapse_retriever.caller import CallerRetriever
from synapse_retriever.conversation import ConversationMemory
from synapse_retriever.conversation.graph import (
    MODE_PROMPT,
    PromptModeDetector,
    PromptRelationExtractor,
    Retrieval,
)
from synapse_retriever.conversation.graph.modes import canonical_mode
from synapse_retriever.conversation.graph.relations import RELATIONS_PROMPT
from synapse_retriever.errors import InvalidValueError

__all__ = [
    "SynapseMemoryRetriever",
    "chat_model_mode_detector",
    "chat_model_relation_extractor",
    "retrieval_document",
]


def retrieval_document(result: Retrieval) -> Document:
    """A :class:`~synapse_retriever.conversation.graph.Retrieval` as a ``Document``.

    ``id`` is the turn's id; ``metadata`` holds ``turn_id``, ``session``, ``role``, ``at``,
    ``score``, ``origin`` (``lexical``, ``vector``, ``both`` or ``graph``), ``mode`` and
    ``path`` (the typed edges that reached it, as ``[source, type, target]`` lists).

    Example:
        >>> from synapse_retriever.conversation.graph import Retrieval
        >>> doc = retrieval_document(Retrieval(4, "ops", 0.8, "graph", "analytical",
        ...     (("turn:3", "FOLLOWED_BY", "turn:4"),), "Fixed it.", "assistant", 60.0))
        >>> doc.id, doc.page_content, doc.metadata["path"]
        ('4', 'Fixed it.', [['turn:3', 'FOLLOWED_BY', 'turn:4']])
    """
    return Document(
        page_content=result.text,
        id=str(result.turn_id),
        metadata={
            "turn_id": result.turn_id,
            "session": result.session,
            "role": result.role,
            "at": result.at,
            "score": result.score,
            "origin": result.origin,
            "mode": result.mode,
            "path": [list(step) for step in result.path],
        },
    )


class SynapseMemoryRetriever(CallerRetriever):
    """Retrieve a conversation's turns by vector and graph recall, blended by query mode.

    Wraps :meth:`synapse_retriever.conversation.ConversationMemory.retrieve`: the turns most
    similar to the query, and the turns the memory's temporal graph reaches from the
    query's entities and nearest turns ("the turn where the bug was reported", "the turn
    that agreed the fix"), weighted by the kind of question (``mode="auto"`` detects it).
    Each ``Document`` carries the turn's ``origin``, ``mode`` and ``path`` in its metadata.
    ``ainvoke`` goes through
    :meth:`~synapse_retriever.conversation.ConversationMemory.aretrieve`, off the event loop.
    ``invoke`` takes ``k``, ``mode`` and ``sessions`` per call (``k=None``: the retriever's);
    a chat model the memory's mode detector asks
    (:func:`~langchain_synapse_retriever.chat_model_mode_detector`) runs under the caller's
    config (its ``configurable`` fields, tags and limits), traced as a child of the
    retrieval's run.

    Example:
        .. code-block:: python

            from synapse_retriever.conversation import ConversationMemory
            from langchain_synapse_retriever import SynapseMemoryRetriever

            memory = ConversationMemory("chat.db")
            retriever = SynapseMemoryRetriever(memory=memory, k=5)
            docs = retriever.invoke("why did we change validate_vat?")
            # in async code, off the event loop: docs = await retriever.ainvoke(...)

        >>> from synapse_retriever.conversation import ConversationMemory
        >>> memory = ConversationMemory(":memory:")
        >>> _ = memory.add_turn("Deploys of app.py fail since Monday.")
        >>> _ = memory.add_turn("Cause: the base image of app.py changed.")
        >>> retriever = SynapseMemoryRetriever(memory=memory, k=1)
        >>> [d.metadata["origin"] for d in retriever.invoke("why does app.py fail?")]
        ['both']
        >>> memory.close()
    """

    model_config = ConfigDict(arbitrary_types_allowed=True)

    memory: ConversationMemory = Field(description="The conversation memory to search.")
    k: int = Field(default=4, ge=1, strict=True, description="The most documents returned.")
    mode: str = Field(
        default="auto",
        description="'auto' (detected per query), 'analytical', 'creative', "
        "'conversational', or an alias ('exploratory', 'balanced').",
    )
    sessions: list[str] | None = Field(
        default=None, description="Only turns of these sessions are returned."
    )

    @field_validator("mode")
    @classmethod
    def _known_mode(cls, mode: str) -> str:
        """An unknown mode is refused when the retriever is made, not at its first query."""
        if mode != "auto":
            canonical_mode(mode)
        return mode

    def _get_relevant_documents(
        self, query: str, *, run_manager: CallbackManagerForRetrieverRun, **kwargs: Any
    ) -> list[Document]:
        _known_options(kwargs)
        # a chat model the memory's mode detector invokes: the caller's config, this run's child
        with set_config_context(self.child_config(run_manager)) as context:
            results = context.run(
                self.memory.retrieve,
                query,
                k=_per_call_k(kwargs, self.k),
                mode=kwargs.get("mode", self.mode),
                sessions=kwargs.get("sessions", self.sessions),
            )
        return [retrieval_document(result) for result in results]

    async def _aget_relevant_documents(
        self, query: str, *, run_manager: AsyncCallbackManagerForRetrieverRun, **kwargs: Any
    ) -> list[Document]:
        _known_options(kwargs)
        retrieval = self.memory.aretrieve(
            query,
            k=_per_call_k(kwargs, self.k),
            mode=kwargs.get("mode", self.mode),
            sessions=kwargs.get("sessions", self.sessions),
        )
        # its worker thread runs in a copy of this context: the model call is a child run
        with set_config_context(self.child_config(run_manager)) as context:
            results = await asyncio.create_task(retrieval, context=context)
        return [retrieval_document(result) for result in results]


def _per_call_k(options: dict[str, Any], default: int) -> Any:
    """An ``invoke`` call's ``k``; None or absent: the retriever's (as
    :class:`~langchain_synapse_retriever.SynapseRetriever` reads it)."""
    k = options.get("k")
    return default if k is None else k


def _known_options(options: dict[str, Any]) -> None:
    """Refuse an ``invoke`` option the retriever does not read (``similarity_top_k=2``, say,
    was ignored without a word)."""
    unknown = sorted(set(options) - {"k", "mode", "sessions"})
    if unknown:
        raise InvalidValueError(
            f"SynapseMemoryRetriever reads k, mode and sessions, got {', '.join(unknown)}"
        )


def chat_model_relation_extractor(
    model: BaseLanguageModel[Any], *, prompt: str = RELATIONS_PROMPT, structured: bool = True
) -> PromptRelationExtractor:
    """A relation extractor for :class:`~synapse_retriever.conversation.ConversationMemory`
    (``relations=``) that asks ``model`` which turns caused, solved or relate to which,
    and what was decided (in the background consolidation).

    A chat model with structured output answers in :data:`RELATIONS_SCHEMA`
    (``with_structured_output``); another model (or one without it) is asked for JSON
    text. An answer that is not the JSON asked for is logged and skipped.

    Args:
        model: A chat model or LLM, invoked once per window of turns.
        prompt: A template with ``{turns}``; default: the core's.
        structured: Use the model's structured output where it has one (default True).

    Example:
        >>> from langchain_core.language_models import FakeListChatModel
        >>> model = FakeListChatModel(responses=[
        ...     '{"relations": [{"source": 2, "type": "CAUSED_BY", "target": 1}]}'])
        >>> extractor = chat_model_relation_extractor(model)
        >>> extractor.relations([(1, "user", "The image changed."), (2, "user", "Deploys fail.")])
        [Relation(source=2, type='CAUSED_BY', target=1)]
    """

    plain = _completer(model)
    if not structured:
        return PromptRelationExtractor(plain, prompt=prompt)
    try:
        shaped: Callable[[str], str] | None = _completer(
            model.with_structured_output(RELATIONS_SCHEMA)
        )
    except (NotImplementedError, AttributeError, TypeError, ValueError):
        shaped = None

    def complete(text: str) -> str:
        nonlocal shaped
        if shaped is not None:
            try:
                return shaped(text)
            except (NotImplementedError, AttributeError, TypeError):
                shaped = None  # no structured output after all: JSON text from now on
        return plain(text)

    return PromptRelationExtractor(complete, prompt=prompt)


def chat_model_mode_detector(
    model: BaseLanguageModel[Any], *, prompt: str = MODE_PROMPT
) -> PromptModeDetector:
    """A mode detector for :class:`~synapse_retriever.conversation.ConversationMemory`
    (``mode_detector=``) that asks ``model`` whether a question is analytical, creative
    or conversational; an answer naming none falls back to the cue words.

    Args:
        model: A chat model or LLM, invoked once per ``retrieve(mode="auto")``.
        prompt: A template with ``{query}``; default: the core's.

    Example:
        >>> from langchain_core.language_models import FakeListChatModel
        >>> detector = chat_model_mode_detector(FakeListChatModel(responses=["creative"]))
        >>> detector.mode("Tell me about the outage.")
        'creative'
    """
    return PromptModeDetector(_completer(model), prompt=prompt)


TAG_NOSTREAM = "nostream"
"""LangGraph's tag (``langgraph.constants.TAG_NOSTREAM``) for a model call whose tokens an
agent's ``stream_mode="messages"`` leaves out; named here, LangGraph not being required."""


def _completer(model: Runnable[Any, Any]) -> Callable[[str], str]:
    """``prompt -> text`` from a model: a string, a message's text, or structured output
    (a dict or a pydantic object) as JSON. The call is tagged ``nostream``: LangGraph's
    ``stream_mode="messages"`` leaves its tokens out of what an agent streams to its user
    (a retrieval tool's mode detector answered "analytical" into the chat)."""

    def complete(text: str) -> str:
        config = ensure_config()  # the caller's (its callbacks, tags, configurable fields)
        config["tags"] = [*config.get("tags", []), TAG_NOSTREAM]
        answer = model.invoke(text, config)
        if isinstance(answer, str):
            return answer
        if isinstance(answer, BaseMessage):
            return answer.text
        if isinstance(answer, dict):
            return json.dumps(answer)
        if hasattr(answer, "model_dump"):
            return json.dumps(answer.model_dump())
        return str(getattr(answer, "text", answer))

    return complete


RELATIONS_SCHEMA: dict[str, Any] = {
    "title": "relations",
    "description": "How conversation turns relate, and what they decided.",
    "type": "object",
    "properties": {
        "relations": {
            "type": "array",
            "items": {
                "type": "object",
                "properties": {
                    "source": {"type": ["integer", "string"]},
                    "type": {"type": "string", "enum": ["CAUSED_BY", "SOLVED_BY", "RELATES_TO"]},
                    "target": {"type": ["integer", "string"]},
                },
                "required": ["source", "type", "target"],
            },
        },
        "decisions": {
            "type": "array",
            "items": {
                "type": "object",
                "properties": {"turn": {"type": "integer"}, "decision": {"type": "string"}},
                "required": ["turn", "decision"],
            },
        },
    },
    "required": ["relations", "decisions"],
}
"""The JSON schema a chat model with structured output answers in."""
