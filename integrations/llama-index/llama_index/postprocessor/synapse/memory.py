"""Conversation memory for LlamaIndex: a memory block whose old turns fade by importance.

`SynapseMemoryBlock` plugs into ``Memory.from_defaults(memory_blocks=[...])``: the
messages the short-term queue flushes become turns of a persistent
:class:`~synapse_retriever.conversation.ConversationMemory`, and each time the memory is read
the block renders those turns for the current question at graded detail (verbatim, key
sentences, one-line summary, or left out) within its token budget. When ``Memory`` must
truncate, the block re-assembles at a smaller budget instead of disappearing.

`synapse_trim_chat_messages` degrades a ``ChatMessage`` list the same way (for a chat
engine or an agent that holds its own history), keeping roles and tool-call pairing
valid. `llm_summarizer` lets a LlamaIndex LLM write the condensations in the background.
The decisions are the core's; this module only maps messages.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
from collections import OrderedDict
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

from llama_index.core.base.embeddings.base import BaseEmbedding
from llama_index.core.base.llms.types import ChatMessage, MessageRole, TextBlock, ToolCallBlock
from llama_index.core.bridge.pydantic import ConfigDict, Field, PrivateAttr, field_validator
from llama_index.core.llms import LLM
from llama_index.core.memory.memory import BaseMemoryBlock
from llama_index.core.utils import get_tokenizer

from synapse_retriever import content_id
from synapse_retriever.conversation import (
    MAX_NAME_CHARS,
    ContextBudgetError,
    ContextConfig,
    ConversationMemory,
    Embedder,
    HistoryMessage,
    Level,
    PromptSummarizer,
    blank,
    trim_history,
)
from synapse_retriever.conversation.config import checked_context
from synapse_retriever.conversation.memory import finished_if_cancelled
from synapse_retriever.conversation.summarize import CHUNKS_PROMPT, SUMMARY_PROMPT
from synapse_retriever.errors import InvalidTypeError, InvalidValueError, shown
from synapse_retriever.tokens import check_tokens

logger = logging.getLogger(__name__)

__all__ = [
    "SynapseMemoryBlock",
    "llm_summarizer",
    "message_text",
    "synapse_trim_chat_messages",
    "to_history",
]

_READS_KEPT = 64
"""Reads whose query and session a block remembers, for ``Memory``'s truncation of them."""


def _tool_calls(message: ChatMessage) -> list[tuple[str | None, str, Any]]:
    """(id, name, arguments) of each tool call: ``ToolCallBlock``s or OpenAI-style kwargs."""
    calls: list[tuple[str | None, str, Any]] = [
        (block.tool_call_id, block.tool_name, block.tool_kwargs)
        for block in message.blocks
        if isinstance(block, ToolCallBlock)
    ]
    for call in message.additional_kwargs.get("tool_calls") or []:
        if isinstance(call, dict):
            function = call.get("function") or {}
            calls.append((call.get("id"), function.get("name", ""), function.get("arguments")))
        else:  # an SDK object with .id and .function
            function = getattr(call, "function", None)
            calls.append(
                (
                    getattr(call, "id", None),
                    getattr(function, "name", ""),
                    getattr(function, "arguments", None),
                )
            )
    return calls


def _rendered(calls: Sequence[tuple[str | None, str, Any]]) -> str:
    def arguments(args: Any) -> str:
        return args if isinstance(args, str) else json.dumps(args, sort_keys=True, default=str)

    return " ".join(f"{name}({arguments(args)})" for _, name, args in calls)


def message_text(message: ChatMessage) -> str:
    """The text of a message: its text blocks joined (tool calls are not text)."""
    return "\n".join(block.text for block in message.blocks if isinstance(block, TextBlock))


_PINNED_ROLES = (MessageRole.SYSTEM, MessageRole.DEVELOPER)
"""Roles whose messages are kept whole wherever they are: the system prompt's (OpenAI's
newer models name it ``developer``)."""
_START_ROLES = (MessageRole.USER, MessageRole.ASSISTANT, MessageRole.CHATBOT, MessageRole.MODEL)
"""The roles a trimmed chat may be made to begin with (a tool's answer never opens one)."""


def to_history(message: ChatMessage) -> HistoryMessage:
    """The core's view of a LlamaIndex chat message."""
    calls = _tool_calls(message)
    answered = message.additional_kwargs.get("tool_call_id")
    return HistoryMessage(
        role=message.role.value,
        text=message_text(message),
        tool_call_ids=tuple(str(call_id) for call_id, _, _ in calls if call_id),
        tool_call_id=str(answered) if answered is not None else None,
        fixed_text=_rendered(calls),
        pinned=message.role in _PINNED_ROLES,
        degradable=all(isinstance(b, (TextBlock, ToolCallBlock)) for b in message.blocks),
    )


def _start_role(start_on: object) -> str | None:
    """``start_on`` as a role's value: one of ``_START_ROLES`` or its value."""
    if start_on is None:
        return None
    if not isinstance(start_on, str):
        raise InvalidTypeError(
            f"start_on must be a MessageRole or its value, got {type(start_on).__name__} "
            f"{shown(start_on)}"
        )
    roles = [role.value for role in _START_ROLES]
    if start_on not in roles:
        raise InvalidValueError(
            f"start_on must be one of {', '.join(map(repr, roles))} (a MessageRole; "
            f"LangChain says 'human', LlamaIndex 'user'), got {shown(start_on)}"
        )
    return MessageRole(start_on).value


def synapse_trim_chat_messages(
    messages: Sequence[ChatMessage],
    query: str | None = None,
    *,
    max_tokens: int,
    token_counter: Callable[[str], int] | None = None,
    config: ContextConfig | None = None,
    embedder: Embedder | BaseEmbedding | None = None,
    start_on: str | None = None,
) -> list[ChatMessage]:
    """Degrade ``messages`` by importance for ``query`` so their text fits ``max_tokens``.

    ``query`` defaults to the last user message. The default config lets an oversized
    working memory shrink (``overflow="shrink"``, with a warning) instead of raising.
    FULL messages are returned as they are; degraded ones are copies whose text blocks
    are replaced by the condensed text (tool-call blocks and kwargs kept). ``embedder``
    takes a LlamaIndex embedding model (wrapped in a
    :class:`~llama_index.postprocessor.synapse.LlamaIndexEmbedder`) or the core's
    ``Embedder``; default: the core's offline hashing embedder. ``start_on`` (a role,
    ``"user"`` or ``MessageRole.USER``) makes the kept messages after the system ones begin
    with a message of that role, those kept before it dropped too (tool calls with their
    answers; where none of it is kept, none): for a model that refuses a conversation
    opening with the assistant (Claude on Bedrock).

    Example:
        The importance gradient alone (the 0.1 default), with the last two messages as
        working memory: at 23 tokens the old fact is kept as a one-line summary and the
        least important message is dropped (the default keeps the fact whole):

        >>> from llama_index.core.llms import ChatMessage
        >>> from synapse_retriever.conversation import ContextConfig
        >>> history = [
        ...     ChatMessage(role="system", content="You are terse."),
        ...     ChatMessage(role="user", content="We moved the production deploy to Fridays. "
        ...                 "Lovely weather today."),
        ...     ChatMessage(role="assistant", content="Noted, Fridays."),
        ...     ChatMessage(role="user", content="Great, thanks."),
        ...     ChatMessage(role="assistant", content="Anytime."),
        ...     ChatMessage(role="user", content="When is the production deploy again?"),
        ... ]
        >>> trimmed = synapse_trim_chat_messages(
        ...     history, max_tokens=23, config=ContextConfig.gradient(working_memory=2)
        ... )
        >>> for message in trimmed:
        ...     print(f"{message.role.value:9} {message.content}")
        system    You are terse.
        user      moved production deploy to Fridays.
        user      Great, thanks.
        assistant Anytime.
        user      When is the production deploy again?
    """
    if isinstance(messages, str | bytes | Mapping) or not isinstance(messages, Iterable):
        raise InvalidTypeError(
            f"messages must be a sequence of ChatMessage, got {type(messages).__name__} "
            f"{shown(messages)}"
        )
    messages = list(messages)
    wrong = next((i for i, m in enumerate(messages) if not isinstance(m, ChatMessage)), None)
    if wrong is not None:
        raise InvalidTypeError(
            f"messages[{wrong}] must be a ChatMessage, got {type(messages[wrong]).__name__} "
            f"{shown(messages[wrong])}"
        )
    if query is None:
        query = next((message_text(m) for m in reversed(messages) if m.role.value == "user"), None)
    kept = trim_history(
        [to_history(message) for message in messages],
        query,
        max_tokens,
        token_counter=token_counter,
        config=ContextConfig(overflow="shrink") if config is None else config,
        embedder=embedder,
        start_on=_start_role(start_on),
    )
    result: list[ChatMessage] = []
    for item in kept:
        original = messages[item.index]
        if item.level is Level.FULL or item.text == message_text(original):
            result.append(original)
            continue
        others = [b for b in original.blocks if not isinstance(b, TextBlock)]
        result.append(original.model_copy(update={"blocks": [TextBlock(text=item.text), *others]}))
    return result


def llm_summarizer(
    llm: LLM, *, chunks_prompt: str = CHUNKS_PROMPT, summary_prompt: str = SUMMARY_PROMPT
) -> PromptSummarizer:
    """A summarizer for :class:`~synapse_retriever.conversation.ConversationMemory` that asks
    ``llm`` for the key sentences and the one-line summary (in the background).

    ``chunks_prompt`` and ``summary_prompt``: templates (with ``{text}`` and ``{words}``)
    asking for the key sentences and the one-line summary; default: the core's.

    Example:
        ``MockLLM(max_tokens=3)`` answers every prompt with "text text text"; your LLM
        writes the key sentences and the summary:

        >>> from llama_index.core.llms import MockLLM
        >>> summarizer = llm_summarizer(MockLLM(max_tokens=3))
        >>> summarizer.condense("Hi! We moved the deploy to Fridays. Bye!", chunks_ratio=0.3,
        ...                     summary_ratio=0.1)
        Condensed(chunks='text text text', summary='text text text')
        >>> from synapse_retriever.conversation import ConversationMemory
        >>> memory = ConversationMemory(":memory:", summarizer=summarizer)
        >>> memory.close()
    """
    return PromptSummarizer(
        lambda prompt: llm.complete(prompt).text,
        chunks_prompt=chunks_prompt,
        summary_prompt=summary_prompt,
    )


class SynapseMemoryBlock(BaseMemoryBlock[str]):
    """A long-term memory block that keeps what the question needs within a token budget.

    ``Memory`` calls the block's async paths (``aput``, ``aget``, ``atruncate``); they
    store and assemble through
    :meth:`~synapse_retriever.conversation.ConversationMemory.aadd_turn` and
    :meth:`~synapse_retriever.conversation.ConversationMemory.aassemble`, off the event loop,
    so a slow embedder (a remote API) never holds up an async agent.

    Example:
        A small short-term queue flushes the old messages into the block; reading the
        memory for a question renders them graded for it (``"chat.db"`` instead of
        ``":memory:"`` keeps them across restarts):

        >>> from llama_index.core.llms import ChatMessage
        >>> from llama_index.core.memory import Memory
        >>> block = SynapseMemoryBlock(":memory:", budget_tokens=60)
        >>> memory = Memory.from_defaults(
        ...     session_id="me",
        ...     token_limit=300,
        ...     chat_history_token_ratio=0.5,
        ...     token_flush_size=60,
        ...     memory_blocks=[block],
        ... )
        >>> fact = "We moved the production deploy to Fridays."
        >>> memory.put(ChatMessage(role="user", content=fact))
        >>> for i in range(30):  # small talk pushes it out of the short-term queue
        ...     memory.put(ChatMessage(role="user", content=f"Lunch talk {i}: pasta and coffee."))
        >>> len(block.memory)  # turns flushed into the block
        19
        >>> content = memory.get(input="When is the production deploy?")[0].content
        >>> [line for line in content.splitlines() if "deploy" in line]
        ['user: We moved the production deploy to Fridays.']
    """

    # a misspelt argument is refused; an error echoes no input (a store URL's password)
    model_config = ConfigDict(extra="forbid", hide_input_in_errors=True)

    name: str = Field(default="synapse_memory", description="The block's name.")
    priority: int = Field(
        default=1, description="Memory truncates blocks above 0; this one re-assembles smaller."
    )
    budget_tokens: int = Field(default=1500, gt=0, description="Tokens the block may render.")
    mode: str | None = Field(default=None, description="analytical, creative or conversational.")

    @field_validator("budget_tokens", mode="before")
    @classmethod
    def _check_budget(cls, budget: object) -> int:
        return check_tokens("budget_tokens", budget)  # True is no budget; a NumPy int is

    _memory: ConversationMemory = PrivateAttr()
    _made: OrderedDict[str, tuple[str | None, list[str] | None]] = PrivateAttr(
        default_factory=OrderedDict
    )  # what each recent read rendered, for what: Memory truncates what a read gave it
    _tokenizer: Callable[[str], Sequence[Any]] | None = PrivateAttr(default=None)
    _unflushed: list[ChatMessage] = PrivateAttr(default_factory=list)
    """Messages ``Memory`` flushed here that a failed flush did not store: Memory has moved
    them out of its short-term queue already, so the next flush stores them first."""

    def __init__(
        self,
        memory: ConversationMemory | str | os.PathLike[str] = ":memory:",
        *,
        config: ContextConfig | None = None,
        token_counter: Callable[[str], int] | None = None,
        embedder: BaseEmbedding | Embedder | None = None,
        user: str | None = None,
        tokenizer_fn: Callable[[str], Sequence[Any]] | None = None,
        **data: Any,
    ) -> None:
        """``memory``: a :class:`ConversationMemory`, or a synapse database path (or a
        PostgreSQL URL) to open one at, with ``config`` (default
        ``ContextConfig(working_memory=0)``: the recent turns are Memory's own short-term
        queue, so the block grades every turn it holds), ``token_counter``, ``embedder`` (a
        LlamaIndex ``BaseEmbedding`` as it is or any
        :class:`~synapse_retriever.conversation.Embedder`, default the hashing embedder) and
        ``user`` (whose memory it is, on a database many users share).
        ``tokenizer_fn``: the one ``Memory`` was given, if any (default LlamaIndex's, which
        ``Memory`` counts with unless given its own): what :meth:`atruncate` counts in.
        """
        super().__init__(**data)
        self._tokenizer = tokenizer_fn
        if isinstance(memory, ConversationMemory):
            given = {
                "config": config,
                "token_counter": token_counter,
                "embedder": embedder,
                "user": user,
            }
            extra = [name for name, value in given.items() if value is not None]
            if extra:
                raise InvalidValueError(
                    f"{', '.join(extra)} go with a path: the ConversationMemory given has its own"
                )
            chosen = memory.config
        else:
            chosen = checked_context(config) or ContextConfig(working_memory=0)
        if self.mode is not None:
            chosen.temperature(self.mode)  # refused now, not at the first read: nothing opened
        self._memory = (
            memory
            if isinstance(memory, ConversationMemory)
            else ConversationMemory(memory, token_counter, chosen, embedder=embedder, user=user)
        )

    @classmethod
    def class_name(cls) -> str:
        """``SynapseMemoryBlock`` (LlamaIndex's serialization name)."""
        return "SynapseMemoryBlock"

    @property
    def memory(self) -> ConversationMemory:
        """The conversation memory the block reads and writes."""
        return self._memory

    def close(self, timeout: float | None = None) -> None:
        """Close the block's conversation memory, finishing its pending consolidation
        (past ``timeout`` seconds, at once: see
        :meth:`~synapse_retriever.conversation.ConversationMemory.close`). Messages a failed
        flush left unstored are stored first; what fails then is raised, the memory closed.
        Called from a coroutine it cannot store them: it warns, and :meth:`aclose` can."""
        try:
            if self._unflushed:
                try:
                    asyncio.get_running_loop()
                except RuntimeError:  # no loop in this thread: the flush runs in one of its own
                    asyncio.run(self._flush([]))
                else:
                    logger.warning(
                        "%d message(s) a failed flush left were not stored: close the block "
                        "with await block.aclose() in async code",
                        len(self._unflushed),
                    )
        finally:
            self._memory.close(timeout)

    async def aclose(self, timeout: float | None = None) -> None:
        """:meth:`close` for a coroutine: messages a failed flush left stored first, and the
        wait for a consolidation under way in a worker thread, not on the event loop (see
        :meth:`~synapse_retriever.conversation.ConversationMemory.aclose`)."""
        try:
            if self._unflushed:
                await self._aput([])
        finally:
            await self._memory.aclose(timeout)

    async def _aput(self, messages: list[ChatMessage]) -> None:
        # Memory has moved the flushed messages out of its short-term queue already: a flush
        # cut short by a cancellation (a timeout) would lose the messages after the cut, so
        # it is stored whole, and the cancellation raised when it is (however many come)
        await finished_if_cancelled(self._flush(messages))

    async def _flush(self, messages: list[ChatMessage]) -> None:
        # one message refused (a NUL, a lone surrogate) must not lose the others either, so
        # each valid one is stored and the refused ones are named after; a failure of
        # another kind (the embedder timed out, the database was lost) stops here, and what
        # it left unstored is kept and stored first by the next flush
        pending, self._unflushed = [*self._unflushed, *messages], []
        refused: list[str] = []
        for position, message in enumerate(pending):
            history = to_history(message)
            text = " ".join(part for part in (history.text, history.fixed_text) if part.strip())
            if blank(text):  # no text that shows (only an image, a zero-width space): not stored
                continue
            try:
                session = _session(message.additional_kwargs.get("session_id"))
                await self._memory.aadd_turn(text, role=history.role, session=session)
            except (InvalidTypeError, InvalidValueError) as exc:
                refused.append(f"message {position} ({exc})")
            except BaseException:
                self._unflushed[:0] = pending[position:]  # before another flush's leftovers
                raise
        if refused:
            raise InvalidValueError(
                f"{len(refused)} of the {len(pending)} messages flushed to long-term memory "
                f"were refused, the others were stored: {'; '.join(refused)}"
            )

    async def _aget(self, messages: list[ChatMessage] | None = None, **block_kwargs: Any) -> str:
        users = [message_text(m) for m in messages or [] if m.role.value == "user"]
        query = users[-1] if users else None
        session = block_kwargs.get("session_id")  # Memory's: its own turns only, as
        sessions = None if session is None else [_session_name(str(session))]  # LlamaIndex's do
        text = await self._render(self.budget_tokens, query, sessions)
        self._made[text] = (query, sessions)  # per read: Memories sharing a block never mix
        while len(self._made) > _READS_KEPT:
            self._made.popitem(last=False)
        return text

    async def atruncate(self, content: str | Any, tokens_to_truncate: int) -> str | None:
        """Re-assemble ``tokens_to_truncate`` tokens smaller (None when nothing fits).

        The tokens are ``Memory``'s, counted by its tokenizer (the block's ``tokenizer_fn``,
        default LlamaIndex's, ``Settings.tokenizer``), not the block's counter: the two
        differ by a factor of two or more for code, links and CJK text, and a block cut in
        the wrong ones came out too big, or at nothing, and ``Memory`` dropped it whole.
        """
        if not isinstance(content, str) or not content:  # Memory's [] for a block that gave ""
            return None
        read = self._made.get(content)
        if read is None:  # not what a read of this block gave: never another session's turns
            return None
        query, sessions = read
        tokens = self._tokenizer or get_tokenizer()
        size = len(tokens(content))
        limit = size - tokens_to_truncate
        own = await asyncio.to_thread(self._memory.token_counter, content)  # any speed
        budget = own * limit // max(size, 1)  # its own tokens
        while limit > 0 and budget > 0:
            text = await self._render(budget, query, sessions)
            rendered = len(tokens(text))
            if not text or rendered <= limit:
                return text or None
            budget = min(budget - 1, budget * limit // rendered)
        return None

    async def _render(self, budget: int, query: str | None, sessions: list[str] | None) -> str:
        """The assembled turns as ``role: text`` lines; the labels count toward ``budget``.
        The memory is read off the event loop (its embedder may be slow)."""
        count = self._memory.token_counter
        label = await asyncio.to_thread(self._label_tokens)
        while budget > 0:
            try:
                turns = await self._memory.aassemble(
                    query, budget, mode=self.mode, turn_overhead=label, sessions=sessions,
                )  # fmt: skip
            except ContextBudgetError:
                return ""
            text = "\n".join(f"{t.role}: {t.text}" for t in turns)
            if await asyncio.to_thread(count, text) <= budget:  # a counter adding up pieces
                return text
            label += 1
        return ""

    def _label_tokens(self) -> int:
        """The tokens of the longest ``role: `` label among the stored turns, and a newline."""
        count = self._memory.token_counter
        roles = {turn.role for turn in self._memory.turns()}
        return max((count(f"{role}: ") for role in roles), default=0) + 1


def _session(value: object) -> str:
    """A message's ``session_id`` (``additional_kwargs``): a str, or "default" when absent
    (a bytes or a dict was made into its repr, a session of its own)."""
    if value is None or value == "":
        return "default"
    if not isinstance(value, str):
        raise InvalidTypeError(
            f"session_id must be a str, got {type(value).__name__} {shown(value)}"
        )
    return _session_name(value)


def _session_name(session_id: str) -> str:
    """A ``Memory``'s ``session_id`` as the memory's session: itself, or past
    :data:`~synapse_retriever.conversation.MAX_NAME_CHARS` characters (``Memory`` sets no
    cap) its first 150 and its :func:`~synapse_retriever.content_id`, the same at every
    flush and read.

    Examples
    --------
    >>> _session_name("me"), len(_session_name("tenant-42:" + "x" * 300))
    ('me', 182)
    """
    if len(session_id) <= MAX_NAME_CHARS:
        return session_id
    return f"{session_id[:150]}…{content_id(session_id)}"
