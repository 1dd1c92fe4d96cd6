"""Conversation memory for LangChain: trim a message list by importance, not by age.

`synapse_trim_messages` is a drop-in for ``trim_messages`` that, instead of cutting the
oldest messages, keeps every message at a detail level that fades with its importance
for the current question (FULL, key sentences, one-line summary, dropped), within
``max_tokens``. `SynapseMemoryMiddleware` applies it before each model call of a
``create_agent`` agent (``langchain>=1``). The decisions are the core's
(:func:`synapse_retriever.conversation.trim_history`); this module only maps messages.

Roles never change, system messages are always kept, an AI message with tool calls
and the tool messages answering them are kept or dropped together (their tool calls are
never altered), and messages with non-text content blocks are kept whole or dropped.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from typing import Any, TypeAlias, TypeVar, overload

from langchain_core.embeddings import Embeddings
from langchain_core.language_models import BaseLanguageModel
from langchain_core.messages import (
    AIMessage,
    AnyMessage,
    BaseMessage,
    MessageLikeRepresentation,
    SystemMessage,
    ToolMessage,
    convert_to_messages,
)
from langchain_core.prompt_values import PromptValue

from synapse_retriever.conversation import (
    CachedEmbedder,
    ContextConfig,
    Embedder,
    HistoryMessage,
    Level,
    PromptSummarizer,
    trim_history,
)
from synapse_retriever.conversation.summarize import CHUNKS_PROMPT, SUMMARY_PROMPT
from synapse_retriever.errors import InvalidTypeError, InvalidValueError, shown

try:  # langchain >= 1 is optional: only the agent middleware needs it
    from langchain.agents.middleware import AgentMiddleware, ModelRequest, ModelResponse
except ImportError:  # pragma: no cover - exercised when langchain is not installed
    _HAS_AGENT_MIDDLEWARE = False
else:
    _HAS_AGENT_MIDDLEWARE = True

__all__ = ["chat_model_summarizer", "synapse_trim_messages", "to_history"]

# Quoted: subscripting the pydantic model at import time would create a class.
TokenCounter: TypeAlias = "Callable[[str], int] | BaseLanguageModel[Any]"

MessageT = TypeVar("MessageT", bound=BaseMessage)


_START_TYPES = ("human", "ai", "chat")
"""The message types a trimmed chat may be made to begin with (a system message is kept
wherever it is; a tool's answer never opens a chat)."""


def _base_type(kind: str) -> str:
    """A chunk's message type as its message's (``HumanMessageChunk``: ``human``)."""
    return kind.removesuffix("MessageChunk").lower() if kind.endswith("MessageChunk") else kind


def _start_type(start_on: object) -> str | None:
    """``start_on`` as a message type: a type's name, or a message class (a chunk's too)."""
    if start_on is None:
        return None
    if isinstance(start_on, type) and issubclass(start_on, BaseMessage):
        default = start_on.model_fields["type"].default
        if not isinstance(default, str):
            raise InvalidValueError(
                f"start_on must be a message class of one type (HumanMessage), got "
                f"{start_on.__name__}"
            )
        start_on = _base_type(default)
    if not isinstance(start_on, str):
        raise InvalidTypeError(
            f"start_on must be a message type (str) or a message class, got "
            f"{type(start_on).__name__} {shown(start_on)}"
        )
    if start_on not in _START_TYPES:
        raise InvalidValueError(
            f"start_on must be one of {', '.join(map(repr, _START_TYPES))} (a message type; "
            f"LlamaIndex says 'user', LangChain 'human'), got {shown(start_on)}"
        )
    return start_on


def _counter(token_counter: TokenCounter | None) -> Callable[[str], int] | None:
    if isinstance(token_counter, BaseLanguageModel):
        return token_counter.get_num_tokens
    return token_counter


def _text_only(message: BaseMessage) -> bool:
    content = message.content
    if isinstance(content, str):
        return True
    return all(
        isinstance(block, str) or (isinstance(block, dict) and block.get("type") == "text")
        for block in content
    )


def to_history(message: BaseMessage) -> HistoryMessage:
    """The core's view of a LangChain message (its role is ``message.type``, a chunk's as
    its message's)."""
    calls = message.tool_calls if isinstance(message, AIMessage) else []
    rendered = " ".join(
        f"{call['name']}({json.dumps(call['args'], sort_keys=True, default=str)})" for call in calls
    )
    return HistoryMessage(
        role=_base_type(message.type),
        text=message.text,
        tool_call_ids=tuple(str(call["id"]) for call in calls if call.get("id")),
        tool_call_id=message.tool_call_id if isinstance(message, ToolMessage) else None,
        fixed_text=rendered,
        pinned=isinstance(message, SystemMessage),  # a SystemMessageChunk too
        degradable=_text_only(message),
    )


@overload
def synapse_trim_messages(
    messages: Sequence[MessageT],
    query: str | None = None,
    *,
    max_tokens: int,
    token_counter: TokenCounter | None = None,
    config: ContextConfig | None = None,
    embedder: Embedder | Embeddings | None = None,
    start_on: str | type[BaseMessage] | None = None,
) -> list[MessageT]: ...


@overload
def synapse_trim_messages(
    messages: Sequence[MessageLikeRepresentation] | PromptValue,
    query: str | None = None,
    *,
    max_tokens: int,
    token_counter: TokenCounter | None = None,
    config: ContextConfig | None = None,
    embedder: Embedder | Embeddings | None = None,
    start_on: str | type[BaseMessage] | None = None,
) -> list[BaseMessage]: ...


def synapse_trim_messages(
    messages: Sequence[MessageLikeRepresentation] | PromptValue,
    query: str | None = None,
    *,
    max_tokens: int,
    token_counter: TokenCounter | None = None,
    config: ContextConfig | None = None,
    embedder: Embedder | Embeddings | None = None,
    start_on: str | type[BaseMessage] | None = None,
) -> list[Any]:  # each overload's: the originals are returned where kept whole
    """Degrade ``messages`` by importance for ``query`` so their text fits ``max_tokens``.

    Args:
        messages: The conversation, oldest first: messages, or what LangChain reads as
            messages (``("user", "hi")`` tuples, ``{"role": ..., "content": ...}`` dicts,
            strings, a prompt's ``PromptValue``), as ``trim_messages`` takes them.
        query: What the next model call is about; default: the last human message.
        max_tokens: Budget for the messages' text and tool-call arguments.
        token_counter: ``str -> int``, or a language model (its ``get_num_tokens``);
            default: the core's approximation.
        config: The method's constants; default ``ContextConfig(overflow="shrink")``,
            so a working memory larger than the budget has its oldest turns condensed
            instead of raising (a warning is logged; a turn is never cut mid-text).
        embedder: Similarities: a LangChain ``Embeddings`` (wrapped in a
            :class:`~langchain_synapse_retriever.LangChainEmbedder`) or the core's ``Embedder``;
            default: the core's offline hashing embedder.
        start_on: A message type (``"human"``) or class (``HumanMessage``): the kept
            messages after the system messages begin with one, those kept before it
            dropped too (an AI message's tool calls with their answers), as
            ``trim_messages(start_on="human")`` does; where none is kept, none is dropped.
            For a chat model that refuses a conversation opening with the AI (Claude on
            Bedrock); default: no such rule.

    Returns:
        The kept messages in order: the originals where FULL, copies with condensed
        ``content`` (same id, role and tool calls) where degraded.

    Example:
        The importance gradient alone (the 0.1 default), with the last two messages as
        working memory: at 23 tokens the old fact is kept as a one-line summary and the
        least important message is dropped (the default keeps the fact whole):

        >>> from langchain_core.messages import AIMessage, HumanMessage, SystemMessage
        >>> from synapse_retriever.conversation import ContextConfig
        >>> history = [
        ...     SystemMessage("You are terse."),
        ...     HumanMessage("We moved the production deploy to Fridays. Lovely weather today."),
        ...     AIMessage("Noted, Fridays."),
        ...     HumanMessage("Great, thanks."),
        ...     AIMessage("Anytime."),
        ...     HumanMessage("When is the production deploy again?"),
        ... ]
        >>> trimmed = synapse_trim_messages(
        ...     history, max_tokens=23, config=ContextConfig.gradient(working_memory=2)
        ... )
        >>> for message in trimmed:
        ...     print(f"{message.type:6} {message.text}")
        system You are terse.
        human  moved production deploy to Fridays.
        human  Great, thanks.
        ai     Anytime.
        human  When is the production deploy again?
    """
    if isinstance(messages, str | bytes | Mapping | BaseMessage) or not isinstance(
        messages, PromptValue | Iterable
    ):  # a bare string became one message per character
        raise InvalidTypeError(
            "messages must be a sequence of messages or a PromptValue (one message: "
            f"[message]), got {type(messages).__name__} {shown(messages)}"
        )
    try:
        messages = convert_to_messages(messages)  # a message stays itself
    except (ValueError, TypeError, AttributeError, NotImplementedError) as exc:
        raise InvalidValueError(
            "messages could not be read as LangChain messages: " + " ".join(str(exc).split())
        ) from None
    if query is None:
        query = next((m.text for m in reversed(messages) if _base_type(m.type) == "human"), None)
    kept = trim_history(
        [to_history(message) for message in messages],
        query,
        max_tokens,
        token_counter=_counter(token_counter),
        config=ContextConfig(overflow="shrink") if config is None else config,
        embedder=embedder,
        start_on=_start_type(start_on),
    )
    result: list[BaseMessage] = []
    for item in kept:
        original = messages[item.index]
        if item.level is Level.FULL or item.text == original.text:
            result.append(original)
        else:
            result.append(original.model_copy(update={"content": item.text}))
    return result


def chat_model_summarizer(
    model: BaseLanguageModel[Any],
    *,
    chunks_prompt: str = CHUNKS_PROMPT,
    summary_prompt: str = SUMMARY_PROMPT,
) -> PromptSummarizer:
    """A summarizer for :class:`~synapse_retriever.conversation.ConversationMemory` that asks
    ``model`` for the key sentences and the one-line summary (in the background).

    Args:
        model: A chat model or LLM; it is invoked once per prompt.
        chunks_prompt: Template (with ``{text}`` and ``{words}``) asking for the key
            sentences; default: the core's.
        summary_prompt: Template (with ``{text}`` and ``{words}``) asking for the one-line
            summary; default: the core's.

    Example:
        A fake model stands in for yours; it answers the two prompts in turn:

        >>> from langchain_core.language_models import FakeListChatModel
        >>> model = FakeListChatModel(
        ...     responses=["We moved the deploy to Fridays.", "Deploys on Fridays."]
        ... )
        >>> summarizer = chat_model_summarizer(model)
        >>> summarizer.condense(
        ...     "Hi! We moved the deploy to Fridays. Bye!", chunks_ratio=0.3, summary_ratio=0.1
        ... )
        Condensed(chunks='We moved the deploy to Fridays.', summary='Deploys on Fridays.')
        >>> from synapse_retriever.conversation import ConversationMemory
        >>> memory = ConversationMemory(":memory:", summarizer=summarizer)
        >>> memory.close()
    """

    def complete(prompt: str) -> str:
        answer = model.invoke(prompt)
        return answer if isinstance(answer, str) else answer.text

    return PromptSummarizer(complete, chunks_prompt=chunks_prompt, summary_prompt=summary_prompt)


if _HAS_AGENT_MIDDLEWARE:

    class SynapseMemoryMiddleware(AgentMiddleware):
        """Degrades the agent's history by importance before each model call.

        The agent's state keeps every message; only what the model sees is trimmed
        (``wrap_model_call``), so a message condensed now is still whole next time. An
        async agent (``ainvoke``) trims in a worker thread, so a slow embedder never
        holds up its event loop.

        Args:
            max_tokens: Budget for the messages the model sees (system prompt included).
            token_counter: ``str -> int``, or a language model (its ``get_num_tokens``).
            config: The method's constants (default ``ContextConfig(overflow="shrink")``).
            embedder: Similarities: a LangChain ``Embeddings`` (wrapped once, here) or
                the core's ``Embedder``; default: the core's offline hashing embedder. Given
                one, the middleware keeps the vectors of the last 4,096 texts it embedded
                (:class:`~synapse_retriever.conversation.CachedEmbedder`): each model call
                embeds only the messages that are new since the last.
            start_on: ``"human"`` for a chat model that refuses a conversation opening
                with the AI (Claude on Bedrock): see :func:`synapse_trim_messages`.

        Example:
            A fake model stands in for yours:

            >>> from langchain.agents import create_agent
            >>> from langchain_core.language_models import FakeListChatModel
            >>> from langchain_core.messages import HumanMessage
            >>> agent = create_agent(
            ...     FakeListChatModel(responses=["On Fridays."]),
            ...     tools=[],
            ...     middleware=[SynapseMemoryMiddleware(max_tokens=4000)],
            ... )
            >>> result = agent.invoke({"messages": [HumanMessage("When is the deploy?")]})
            >>> result["messages"][-1].text
            'On Fridays.'
        """

        def __init__(
            self,
            max_tokens: int,
            *,
            token_counter: TokenCounter | None = None,
            config: ContextConfig | None = None,
            embedder: Embedder | Embeddings | None = None,
            start_on: str | type[BaseMessage] | None = None,
        ) -> None:
            super().__init__()
            self.max_tokens = max_tokens
            self.token_counter = token_counter
            self.config = config
            # each model call trims the whole history: its vectors are kept, not asked again
            self.embedder = (
                None
                if embedder is None
                else embedder
                if isinstance(embedder, CachedEmbedder)
                else CachedEmbedder(embedder)
            )
            self.start_on = start_on
            # its settings checked now, as the trimming checks them: not at the first call
            synapse_trim_messages(
                [], max_tokens=max_tokens, token_counter=token_counter, config=config,
                start_on=start_on,
            )  # fmt: skip

        def _trimmed(self, request: ModelRequest) -> ModelRequest:
            system = [request.system_message] if request.system_message is not None else []
            messages: list[AnyMessage] = [*system, *request.messages]
            kept = synapse_trim_messages(
                messages,
                max_tokens=self.max_tokens,
                token_counter=self.token_counter,
                config=self.config,
                embedder=self.embedder,
                start_on=self.start_on,
            )
            return request.override(messages=kept[len(system) :])

        def wrap_model_call(
            self, request: ModelRequest, handler: Callable[[ModelRequest], ModelResponse]
        ) -> ModelResponse:
            """Call the model with the request's messages trimmed to ``max_tokens``."""
            return handler(self._trimmed(request))

        async def awrap_model_call(
            self,
            request: ModelRequest,
            handler: Callable[[ModelRequest], Awaitable[ModelResponse]],
        ) -> ModelResponse:
            """The async :meth:`wrap_model_call`; the trimming (and its embedder) runs in
            a worker thread, off the event loop."""
            return await handler(await asyncio.to_thread(self._trimmed, request))

    __all__ += ["SynapseMemoryMiddleware"]
else:

    def __getattr__(name: str) -> Any:
        if name == "SynapseMemoryMiddleware":
            raise ImportError(
                "SynapseMemoryMiddleware needs the langchain package (>= 1): "
                "pip install 'langchain>=1,<2'"
            )
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
