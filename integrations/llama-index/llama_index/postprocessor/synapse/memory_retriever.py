"""`SynapseMemoryRetriever`: a conversation memory's hybrid recall as a LlamaIndex retriever."""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import Any

from llama_index.core.base.base_retriever import BaseRetriever
from llama_index.core.llms import LLM
from llama_index.core.prompts import PromptTemplate
from llama_index.core.schema import NodeWithScore, QueryBundle, TextNode
from pydantic import BaseModel, Field

from synapse_retriever.conversation import ConversationMemory
from synapse_retriever.conversation.graph import (
    MODE_PROMPT,
    PromptModeDetector,
    PromptRelationExtractor,
    Retrieval,
)
from synapse_retriever.conversation.graph.modes import canonical_mode
from synapse_retriever.conversation.graph.relations import RELATIONS_PROMPT
from synapse_retriever.errors import InvalidTypeError, refused_number, shown
from synapse_retriever.tokens import is_int

__all__ = [
    "SynapseMemoryRetriever",
    "llm_mode_detector",
    "llm_relation_extractor",
    "retrieval_node",
]

NOTES = ("turn_id", "session", "role", "at", "origin", "mode", "path")
"""Metadata keys a node carries about how it was found, kept out of the LLM's and the
embedder's view."""


def retrieval_node(result: Retrieval) -> NodeWithScore:
    """A :class:`~synapse_retriever.conversation.graph.Retrieval` as a ``NodeWithScore``.

    The node's id is ``turn:<id>``; its metadata holds ``turn_id``, ``session``, ``role``,
    ``at``, ``origin``, ``mode`` and ``path`` (``[source, type, target]`` lists), all
    excluded from what the LLM and the embedder see.

    Example:
        >>> from synapse_retriever.conversation.graph import Retrieval
        >>> hit = retrieval_node(Retrieval(4, "ops", 0.8, "graph", "analytical",
        ...     (("turn:3", "FOLLOWED_BY", "turn:4"),), "Fixed it.", "assistant", 60.0))
        >>> hit.node.node_id, hit.score, hit.node.get_content(metadata_mode="llm")
        ('turn:4', 0.8, 'Fixed it.')
    """
    node = TextNode(
        text=result.text,
        id_=f"turn:{result.turn_id}",
        metadata={
            "turn_id": result.turn_id,
            "session": result.session,
            "role": result.role,
            "at": result.at,
            "origin": result.origin,
            "mode": result.mode,
            "path": [list(step) for step in result.path],
        },
        excluded_llm_metadata_keys=list(NOTES),
        excluded_embed_metadata_keys=list(NOTES),
    )
    return NodeWithScore(node=node, score=result.score)


class SynapseMemoryRetriever(BaseRetriever):
    """Retrieve a conversation's turns by vector and graph recall, blended by query mode.

    Wraps :meth:`synapse_retriever.conversation.ConversationMemory.retrieve` (``aretrieve``:
    :meth:`~synapse_retriever.conversation.ConversationMemory.aretrieve`, off the event loop);
    each node says in its metadata how it was found (``origin``, ``mode``, ``path``), out
    of the LLM's view.

    Args:
        memory: The conversation memory to search.
        similarity_top_k: The most nodes returned.
        mode: ``"auto"`` (detected per query), ``"analytical"``, ``"creative"``,
            ``"conversational"`` or an alias.
        sessions: Only turns of these sessions are returned (any iterable of str, copied
            when the retriever is made).

    Example:
        >>> from synapse_retriever.conversation import ConversationMemory
        >>> memory = ConversationMemory(":memory:")
        >>> _ = memory.add_turn("Deploys of app.py fail since Monday.")
        >>> _ = memory.add_turn("Cause: the base image of app.py changed.")
        >>> retriever = SynapseMemoryRetriever(memory, similarity_top_k=1)
        >>> [n.node.metadata["origin"] for n in retriever.retrieve("why does app.py fail?")]
        ['both']
        >>> memory.close()
    """

    def __init__(
        self,
        memory: ConversationMemory,
        similarity_top_k: int = 4,
        mode: str = "auto",
        sessions: list[str] | None = None,
        **kwargs: Any,
    ) -> None:
        # checked here, by the names given (the memory's own checks, at the first query,
        # named ``k``; None for the memory failed there with a raw AttributeError)
        if not isinstance(memory, ConversationMemory):
            raise InvalidTypeError(
                f"memory must be a ConversationMemory, got {type(memory).__name__} {shown(memory)}"
            )
        if not is_int(similarity_top_k) or similarity_top_k < 1:
            raise refused_number(similarity_top_k)(
                f"similarity_top_k must be an int >= 1, got {shown(similarity_top_k)}"
            )
        if mode is not None and mode != "auto":
            canonical_mode(mode)  # an unknown mode is refused by name now, not at a query
        super().__init__(**kwargs)
        self.memory = memory
        self.similarity_top_k = int(similarity_top_k)
        self.mode = mode
        self.sessions = None if sessions is None else _sessions(sessions)

    def _retrieve(self, query_bundle: QueryBundle) -> list[NodeWithScore]:
        results = self.memory.retrieve(
            query_bundle.query_str,
            k=self.similarity_top_k,
            mode=self.mode,
            sessions=self.sessions,
        )
        return [retrieval_node(result) for result in results]

    async def _aretrieve(self, query_bundle: QueryBundle) -> list[NodeWithScore]:
        results = await self.memory.aretrieve(
            query_bundle.query_str,
            k=self.similarity_top_k,
            mode=self.mode,
            sessions=self.sessions,
        )
        return [retrieval_node(result) for result in results]


def _sessions(sessions: object) -> list[str]:
    """``sessions`` as a list of its own, read once: a generator kept as given was used up
    by the first query, and every later one returned nothing; a list kept as given changed
    with the caller's. A bare str (read as its characters) is refused by name."""
    if isinstance(sessions, str | bytes) or not isinstance(sessions, Iterable):
        raise InvalidTypeError(f"sessions must be a sequence of str, got {shown(sessions)}")
    names = list(sessions)
    if not all(isinstance(name, str) for name in names):
        raise InvalidTypeError(f"sessions must be a sequence of str, got {shown(names)}")
    return names


class _Link(BaseModel):
    """One relation as the model states it."""

    source: int | str
    type: str
    target: int | str


class _Decision(BaseModel):
    """One decision and the turn that records it."""

    turn: int
    decision: str


class _Relations(BaseModel):
    """The structured answer: relations among the turns, and decisions."""

    relations: list[_Link] = Field(default_factory=list)
    decisions: list[_Decision] = Field(default_factory=list)


def llm_relation_extractor(
    llm: LLM, *, prompt: str = RELATIONS_PROMPT, structured: bool = True
) -> PromptRelationExtractor:
    """A relation extractor for :class:`~synapse_retriever.conversation.ConversationMemory`
    (``relations=``) that asks ``llm`` which turns caused, solved or relate to which, and
    what was decided (in the background consolidation).

    With ``structured`` (the default) the LLM answers through ``structured_predict`` (a
    function-calling LLM fills the schema; another is given the schema and parsed); an
    answer that does not parse is asked again as plain text, and one that is not the JSON
    asked for is logged and skipped.

    Example:
        ``MockLLM`` answers with filler text, which is skipped; your LLM answers JSON:

        >>> from llama_index.core.llms import MockLLM
        >>> extractor = llm_relation_extractor(MockLLM(max_tokens=3))
        >>> extractor.relations([(1, "user", "The image changed."), (2, "user", "Deploys fail.")])
        []
    """
    template = PromptTemplate("{text}")

    def complete(text: str) -> str:
        if structured:
            try:
                answer = llm.structured_predict(_Relations, template, text=text)
                return json.dumps(answer.model_dump())
            except (ValueError, NotImplementedError, TypeError):
                pass  # the model's answer did not parse: ask for JSON text
        return llm.complete(text).text

    return PromptRelationExtractor(complete, prompt=prompt)


def llm_mode_detector(llm: LLM, *, prompt: str = MODE_PROMPT) -> PromptModeDetector:
    """A mode detector for :class:`~synapse_retriever.conversation.ConversationMemory`
    (``mode_detector=``) that asks ``llm`` whether a question is analytical, creative or
    conversational; an answer naming none falls back to the cue words.

    Example:
        ``MockLLM`` answers with filler text, so the cue words decide; your LLM answers:

        >>> from llama_index.core.llms import MockLLM
        >>> llm_mode_detector(MockLLM(max_tokens=2)).mode("Why did the build fail?")
        'analytical'
    """
    return PromptModeDetector(lambda text: llm.complete(text).text, prompt=prompt)
