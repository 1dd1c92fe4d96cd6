"""Degrade a message list to a token budget: the logic both framework adapters share.

An agent framework hands over its whole message list before each model call;
:func:`trim_history` decides, for each message, whether it goes to the model verbatim,
condensed (CHUNKS or SUMMARY of its text) or not at all, exactly as
:meth:`~synapse_retriever.conversation.ConversationMemory.assemble` decides for stored turns,
but without storing anything. Adapters map their message objects to
:class:`HistoryMessage` and back; roles never change.

Rules that keep a message list valid for a chat model:

- An assistant message that calls tools and the tool messages answering those calls
  form one group: kept together or dropped together. Each member's *text* may still be
  condensed; tool calls themselves are never altered (their rendering, ``fixed_text``,
  counts toward the budget at every level).
- Pinned messages (system prompts) are always kept verbatim and count toward the budget.
- A message that is not ``degradable`` (non-text content such as an image) is kept whole
  or dropped; only its text counts toward the budget.
- Messages with no text (e.g. a bare tool call) cost only their ``fixed_text``.
- With ``start_on`` (a role), the kept messages after the pinned ones begin with a message of
  that role, as LangChain's ``trim_messages(start_on=...)`` makes them (some chat models,
  Claude on Bedrock among them, refuse a conversation that opens with the assistant): what
  the trimming kept before the first one (outside a tool-call group) is dropped, a tool-call
  group that cut splits dropped whole. Where it kept none of that role, nothing is dropped:
  an empty conversation is refused by every model.

Examples
--------
>>> history = [
...     HistoryMessage("system", "You are terse.", pinned=True),
...     HistoryMessage("user", "I moved the deploy to Fridays. Long week. Coffee?"),
...     HistoryMessage("assistant", "Noted."),
...     HistoryMessage("user", "What is for lunch?"),
... ]
>>> from synapse_retriever.conversation.config import ContextConfig
>>> kept = trim_history(history, "when is the deploy?", 18,
...                     config=ContextConfig(working_memory=2, working_share=1.0))
>>> [(m.index, m.level.value, m.text) for m in kept]
[(0, 'full', 'You are terse.'), (1, 'chunks', 'I moved the deploy to Fridays.'), \
(2, 'full', 'Noted.'), (3, 'full', 'What is for lunch?')]
>>> [m.text for m in trim_history(history, "when is the deploy?", 16,
...                               config=ContextConfig(working_memory=2, working_share=1.0))][1]
'moved deploy to Fridays.'
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from synapse_retriever.capture.coactivation import check_unicode
from synapse_retriever.conversation.assemble import TurnsView, plan_context
from synapse_retriever.conversation.config import ContextConfig, checked_context
from synapse_retriever.conversation.embed import (
    Embedder,
    HashingEmbedder,
    TurnIndex,
    as_embedder,
    embedded,
)
from synapse_retriever.conversation.levels import Level
from synapse_retriever.conversation.summarize import ExtractiveSummarizer
from synapse_retriever.conversation.text import TermStats
from synapse_retriever.errors import InvalidTypeError, shown
from synapse_retriever.tokens import TokenCounter, check_tokens, checked_counter

__all__ = ["HistoryMessage", "TrimmedMessage", "tool_groups", "trim_history"]

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class HistoryMessage:
    """A framework-neutral view of one chat message.

    Attributes
    ----------
    role : str
        ``system``, ``user``, ``assistant``, ``tool``... (never changed).
    text : str
        The message's text content (what may be condensed).
    tool_call_ids : tuple of str
        Ids of the tool calls this (assistant) message makes.
    tool_call_id : str or None
        The call this (tool) message answers.
    fixed_text : str
        Text sent with the message that is never condensed (e.g. its tool calls' names
        and arguments); counted at every level.
    pinned : bool
        Always kept verbatim (system prompts).
    degradable : bool
        False: kept whole or dropped (e.g. it carries an image).

    Examples
    --------
    An assistant message that calls a tool, and the tool's answer:

    >>> call = HistoryMessage("assistant", "", tool_call_ids=("call_1",),
    ...                       fixed_text="build_status({})")
    >>> answer = HistoryMessage("tool", "Build 812 passed.", tool_call_id="call_1")
    >>> tool_groups([HistoryMessage("user", "Is the build green?"), call, answer])
    [None, 1, 1]
    """

    role: str
    text: str
    tool_call_ids: tuple[str, ...] = ()
    tool_call_id: str | None = None
    fixed_text: str = ""
    pinned: bool = False
    degradable: bool = True


@dataclass(frozen=True)
class TrimmedMessage:
    """What to send for message ``index``: its level, its text, and the text's tokens.

    Examples
    --------
    >>> trim_history([HistoryMessage("user", "Deploys move to Fridays.")], "deploy?", 100)
    [TrimmedMessage(index=0, level=<Level.FULL: 'full'>, text='Deploys move to Fridays.', \
tokens=5)]
    """

    index: int
    level: Level
    text: str
    tokens: int


def tool_groups(messages: Sequence[HistoryMessage]) -> list[int | None]:
    """Group id of each message: an assistant message with tool calls and the tool messages
    answering them share the assistant message's index; other messages have None.

    Examples
    --------
    >>> tool_groups([HistoryMessage("user", "hi"),
    ...              HistoryMessage("assistant", "", tool_call_ids=("a", "b")),
    ...              HistoryMessage("tool", "1", tool_call_id="a"),
    ...              HistoryMessage("tool", "2", tool_call_id="b"),
    ...              HistoryMessage("tool", "?", tool_call_id="zz")])
    [None, 1, 1, 1, None]
    """
    groups: list[int | None] = [None] * len(messages)
    caller: dict[str, int] = {}
    for i, message in enumerate(messages):
        if message.tool_call_ids:
            groups[i] = i
            for call in message.tool_call_ids:
                caller[call] = i
        elif message.tool_call_id is not None and message.tool_call_id in caller:
            groups[i] = caller[message.tool_call_id]
    return groups


def trim_history(
    messages: Sequence[HistoryMessage],
    query: str | None,
    max_tokens: int,
    *,
    token_counter: TokenCounter | None = None,
    config: ContextConfig | None = None,
    embedder: Embedder | object | None = None,
    start_on: str | None = None,
) -> list[TrimmedMessage]:
    """The messages to send, in order, degraded so their tokens total at most ``max_tokens``.

    Parameters
    ----------
    messages : sequence of HistoryMessage
        The conversation, oldest first.
    query : str or None
        What the next model call is about (adapters default to the last user message).
    max_tokens : int
        Budget for the texts plus ``fixed_text`` of the kept messages.
    token_counter : callable, optional
        ``str -> int`` (default :func:`~synapse_retriever.approximate_tokens`).
    config : ContextConfig, optional
        The method's constants (default ``ContextConfig()``).
    embedder : Embedder, optional
        Similarities (default :class:`~synapse_retriever.conversation.HashingEmbedder`); a
        framework's embeddings too, through :func:`~synapse_retriever.conversation.as_embedder`.
    start_on : str, optional
        A role (``"user"``): the kept messages after the pinned ones begin with one of it
        (outside a tool-call group), those kept before it dropped (a tool-call group that
        cut splits, whole); where none of it is kept, none is dropped. Default: no such
        rule.

    Returns
    -------
    list of TrimmedMessage
        Dropped messages are absent; an empty history gives ``[]``.

    Raises
    ------
    InvalidValueError
        A message's text or the query holds a lone surrogate (what ``errors=
        "surrogateescape"`` leaves of bytes that are not UTF-8).
    ContextBudgetError
        Pinned messages (a system prompt) alone exceed ``max_tokens``, whatever
        ``config.overflow`` says; or, with ``config.overflow == "raise"``, pinned messages
        and working memory.

    Examples
    --------
    At 35 tokens the system prompt and the last two messages stay verbatim, the old fact
    is kept as its key sentence, and the tool call and its result are dropped together:

    >>> history = [
    ...     HistoryMessage("system", "You are a release assistant.", pinned=True),
    ...     HistoryMessage("user", "We moved the production deploy to Fridays. Nice day."),
    ...     HistoryMessage("assistant", "Noted, Fridays."),
    ...     HistoryMessage("user", "Is the build green?"),
    ...     HistoryMessage("assistant", "", tool_call_ids=("call_1",),
    ...                    fixed_text="build_status({})"),
    ...     HistoryMessage("tool", "Build 812 passed. All 340 tests are green.",
    ...                    tool_call_id="call_1"),
    ...     HistoryMessage("assistant", "Yes, build 812 passed."),
    ...     HistoryMessage("user", "When is the production deploy again?"),
    ... ]
    >>> kept = trim_history(history, "When is the production deploy again?", 35,
    ...                     config=ContextConfig(working_memory=2, working_share=1.0))
    >>> for message in kept:
    ...     print(message.index, message.level.value, message.text)
    0 full You are a release assistant.
    1 full We moved the production deploy to Fridays. Nice day.
    3 full Is the build green?
    6 full Yes, build 812 passed.
    7 full When is the production deploy again?

    At 23 tokens, what is kept after the system prompt opens with the assistant's "Noted,
    Fridays."; ``start_on="user"`` drops the messages kept before the first user message:

    >>> config, question = ContextConfig(working_memory=2, working_share=1.0), history[-1].text
    >>> [m.index for m in trim_history(history, question, 23, config=config)]
    [0, 2, 6, 7]
    >>> [m.index for m in trim_history(history, question, 23, config=config, start_on="user")]
    [0, 7]
    """
    max_tokens = check_tokens("max_tokens", max_tokens)
    if start_on is not None and not isinstance(start_on, str):
        raise InvalidTypeError(
            f"start_on must be a role (str) or None, got {type(start_on).__name__} "
            f"{shown(start_on)}"
        )
    for i, message in enumerate(messages):
        if not isinstance(message, HistoryMessage):
            raise InvalidTypeError(
                f"messages[{i}] must be a HistoryMessage, got {type(message).__name__} "
                f"{shown(message)}"
            )
        if not isinstance(message.text, str):
            raise InvalidTypeError(
                f"messages[{i}].text must be a str, got {type(message.text).__name__} "
                f"{shown(message.text)}"
            )
        check_unicode(f"messages[{i}].text", message.text)  # else its index raises midway
    if query is not None:
        if not isinstance(query, str):
            raise InvalidTypeError(
                f"query must be a str or None, got {type(query).__name__} {shown(query)}"
            )
        check_unicode("query", query)
    config = checked_context(config) or ContextConfig()
    count = checked_counter(token_counter)
    similar = as_embedder(embedder) if embedder is not None else HashingEmbedder()
    if not messages:
        return []
    texts = [m.text for m in messages]
    vectors = embedded(similar, texts)
    index = TurnIndex(similar.dim)
    novelty = np.zeros(len(messages))
    repeats = np.zeros(len(messages))
    for i, vector in enumerate(vectors):
        if np.any(vector):
            novelty[i] = 1.0 - index.nearest(vector)
            repeats[i] = index.count_at_least(vector, config.habituation_similarity)
        index.add(vector.reshape(1, -1))
    stats = TermStats(texts)
    extractive = ExtractiveSummarizer(count, stats.idf)
    groups = tool_groups(messages)
    view = TurnsView(
        texts=texts,
        index=index,
        surprise=novelty,
        repeats=repeats,
        boost=np.zeros(len(messages)),
        at=np.zeros(len(messages)),
        condensed=lambda i: None,
        pinned=[m.pinned for m in messages],
        groups=groups,
        degradable=[m.degradable for m in messages],
        fixed_tokens=[count(m.fixed_text) if m.fixed_text else 0 for m in messages],
        full_tokens=[count(text) for text in texts],
    )
    decisions = plan_context(
        view,
        query,
        max_tokens,
        config=config,
        embedder=similar,
        token_counter=count,
        fallback=lambda text: extractive.condense(
            text, chunks_ratio=config.chunks_ratio, summary_ratio=config.summary_ratio
        ),
        now=0.0,
    )
    kept = [TrimmedMessage(d.index, d.level, d.text, d.tokens) for d in decisions]
    return kept if start_on is None else _opened_on(kept, messages, groups, start_on)


def _opened_on(
    kept: list[TrimmedMessage],
    messages: Sequence[HistoryMessage],
    groups: Sequence[int | None],
    role: str,
) -> list[TrimmedMessage]:
    """``kept`` from its first message of ``role`` on (neither pinned nor in a tool-call
    group), the pinned messages before it kept, and a tool-call group with a member before
    it dropped whole; ``kept`` itself where no such message is kept."""
    first = next(
        (
            k
            for k, m in enumerate(kept)
            if messages[m.index].role == role
            and not messages[m.index].pinned
            and groups[m.index] is None
        ),
        None,
    )
    if first is None:
        if any(not messages[m.index].pinned for m in kept):
            log.warning(
                "start_on=%r: no message of that role is among the %d kept (the budget left "
                "none), so none was dropped; a model that needs one to begin with refuses this",
                role,
                len(kept),
            )
        return kept
    cut = {groups[m.index] for m in kept[:first] if not messages[m.index].pinned} - {None}
    return [
        m
        for k, m in enumerate(kept)
        if messages[m.index].pinned or (k >= first and groups[m.index] not in cut)
    ]
