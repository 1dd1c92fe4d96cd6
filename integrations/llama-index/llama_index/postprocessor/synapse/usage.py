"""Usage capture: evidence of use becomes one co-activation event per query or agent run.

Evidence of use is what an answer cites (``CitationQueryEngine``), what an agent's tools
read or edited (:func:`mark_used` inside the tool), or what the application marks with
:func:`mark_used`. Everything reported inside one top-level span (a query, a chat turn,
an agent run) is reinforced together when that span ends; outside any span, each
:func:`mark_used` is an event of its own.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import re
import time
from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from llama_index.core.base.response.schema import Response
from llama_index.core.bridge.pydantic import ConfigDict, Field, PrivateAttr
from llama_index.core.instrumentation import Dispatcher, get_dispatcher
from llama_index.core.instrumentation.event_handlers import BaseEventHandler
from llama_index.core.instrumentation.events import BaseEvent
from llama_index.core.instrumentation.events.query import QueryEndEvent
from llama_index.core.instrumentation.events.retrieval import RetrievalEndEvent
from llama_index.core.instrumentation.span import BaseSpan
from llama_index.core.instrumentation.span_handlers import BaseSpanHandler
from llama_index.core.schema import BaseNode, MetadataMode, NodeWithScore
from llama_index.postprocessor.synapse.base import (
    NodeLike,
    SynapsePostprocessor,
    SynapseRecallEvent,
)
from pydantic import InstanceOf

from synapse_retriever import InvalidTypeError, RunCollector
from synapse_retriever.capture.coactivation import is_node_id, namespaced_id
from synapse_retriever.errors import shown

__all__ = ["SynapseUsageEvent", "SynapseUsageHandler", "mark_used"]

logger = logging.getLogger(__name__)
dispatcher = get_dispatcher(__name__)

_CITATION = re.compile(r"\[(\d+)\]")


class SynapseUsageEvent(BaseEvent):
    """Instrumentation event: nodes (or ids) used in the current query or agent run.

    Emitted by :func:`mark_used`; a :class:`SynapseUsageHandler` turns the events of one
    top-level span into one co-activation event.

    Example:
        >>> event = SynapseUsageEvent(used=["auth/jwt.py", "config/keys.py"])
        >>> event.class_name(), event.used
        ('SynapseUsageEvent', ['auth/jwt.py', 'config/keys.py'])
    """

    used: list[Any]

    @classmethod
    def class_name(cls) -> str:
        """The event's name in LlamaIndex instrumentation."""
        return "SynapseUsageEvent"


def mark_used(nodes_or_ids: Iterable[NodeLike]) -> None:
    """Report nodes as used, e.g. from inside an agent's tool; a no-op without a handler.

    Example:
        >>> from llama_index.core.tools import FunctionTool
        >>> def read_file(path: str) -> str:
        ...     '''Read a file of the repository.'''
        ...     mark_used([path])  # the file's node id, here its path
        ...     return open(path).read()
        >>> tool = FunctionTool.from_defaults(read_file)
    """
    if isinstance(nodes_or_ids, str | bytes | BaseNode | NodeWithScore) or not isinstance(
        nodes_or_ids, Iterable
    ):
        raise InvalidTypeError(
            f"nodes_or_ids must be a list, got {type(nodes_or_ids).__name__} {shown(nodes_or_ids)}"
        )
    # an item no store can hold is left out now, logged: at the span's end it failed the
    # span's whole event, the other marks with it (and a mark never breaks the application)
    used = [item for item in nodes_or_ids if _markable(item)]
    dispatcher.event(SynapseUsageEvent(used=used))


def _markable(item: object) -> bool:
    """Whether ``item`` is a node, or a str a store can hold as an id; else logged."""
    if isinstance(item, BaseNode | NodeWithScore) or is_node_id(item):
        return True
    logger.warning("mark_used: left out %.80r, which is no node and no id a store can hold", item)
    return False


class SynapseUsageHandler(BaseEventHandler):
    """Learn from evidence of use: one co-activation event per top-level span.

    Attach it once (:meth:`attach`). It reinforces, through ``postprocessor`` (its store,
    id mode and namespace): the sources a ``CitationQueryEngine`` answer cites as ``[n]``,
    and the nodes passed to :func:`mark_used` during the same query or agent run. Plain
    ``source_nodes`` are only what was retrieved (injected nodes included): reinforcing
    them feeds recall's output back into the graph, so that needs ``reinforce_retrieved``.

    Args:
        postprocessor: The ``SynapsePostprocessor`` whose store learns.
        reinforce_retrieved: Also reinforce every source node of a query's response when
            it cites nothing. Off by default (a rich-get-richer loop).
        strength: Strength of each event (Δw = learning_rate × strength).

    Example:
        >>> from llama_index.postprocessor.synapse import SynapsePostprocessor
        >>> synapse = SynapsePostprocessor(store=":memory:")
        >>> handler = SynapseUsageHandler(postprocessor=synapse).attach()
        >>> mark_used(["auth/jwt.py", "config/secrets.py"])  # outside any span: one event
        >>> synapse.store.weight("auth/jwt.py", "config/secrets.py") > 0
        True
        >>> handler.detach()
    """

    # a misspelt argument is refused; an error echoes no input (a store URL's password)
    model_config = ConfigDict(extra="forbid", hide_input_in_errors=True)

    postprocessor: InstanceOf[SynapsePostprocessor]
    reinforce_retrieved: bool = Field(default=False, description="Reinforce retrieved nodes.")
    strength: float = Field(default=1.0, description="Strength of each event.")
    _runs: RunCollector[tuple[str, Any]] = PrivateAttr(default_factory=RunCollector)
    _spans: _SpanTree = PrivateAttr()
    _writer: ThreadPoolExecutor = PrivateAttr()

    def model_post_init(self, context: Any, /) -> None:
        """Pydantic hook: create the span handler that feeds the span tree to this handler,
        and the thread that writes what a span on an event loop's thread learned."""
        self._spans = _SpanTree(self)
        self._writer = ThreadPoolExecutor(max_workers=1, thread_name_prefix="synapse-usage")

    def flush(self, timeout: float | None = None) -> None:
        """Wait until every event learned on an event loop's thread is written.

        A span that ends on a loop's thread (``aquery``, an async agent run) is written by
        a thread of the handler's, in order, so that a write waiting for another process's
        lock never holds the loop; elsewhere events are written before the span returns.

        Raises:
            TimeoutError: The writes took longer than ``timeout`` seconds.

        Example:
            >>> from llama_index.postprocessor.synapse import SynapsePostprocessor
            >>> handler = SynapseUsageHandler(postprocessor=SynapsePostprocessor(store=":memory:"))
            >>> handler.flush()
        """
        self._writer.submit(lambda: None).result(timeout)

    async def aflush(self, timeout: float | None = None) -> None:
        """:meth:`flush`, awaited without holding the loop.

        Example:
            >>> import asyncio
            >>> from llama_index.postprocessor.synapse import SynapsePostprocessor
            >>> handler = SynapseUsageHandler(postprocessor=SynapsePostprocessor(store=":memory:"))
            >>> asyncio.run(handler.aflush())
        """
        await asyncio.to_thread(self.flush, timeout)

    @classmethod
    def class_name(cls) -> str:
        """The handler's name in LlamaIndex instrumentation."""
        return "SynapseUsageHandler"

    def attach(self, dispatcher: Dispatcher | None = None) -> SynapseUsageHandler:
        """Listen to ``dispatcher`` (default: the root one, which sees every event); attached
        already, it stays attached once (each event is learned once).

        Example:
            >>> from llama_index.postprocessor.synapse import SynapsePostprocessor
            >>> synapse = SynapsePostprocessor(store=":memory:")
            >>> handler = SynapseUsageHandler(postprocessor=synapse).attach()
            >>> mark_used(["a.py", "b.py"])
            >>> handler.detach()
            >>> mark_used(["a.py", "c.py"])  # detached: not learned
            >>> synapse.store.weight("a.py", "b.py") > 0, synapse.store.weight("a.py", "c.py")
            (True, 0.0)
        """
        target = dispatcher or get_dispatcher()
        if not any(handler is self for handler in target.event_handlers):  # twice: once
            target.add_event_handler(self)
        if not any(handler is self._spans for handler in target.span_handlers):
            target.add_span_handler(self._spans)
        return self

    def detach(self, dispatcher: Dispatcher | None = None) -> None:
        """Stop listening to ``dispatcher`` (default: the root one); see :meth:`attach`.

        Example:
            >>> from llama_index.postprocessor.synapse import SynapsePostprocessor
            >>> handler = SynapseUsageHandler(postprocessor=SynapsePostprocessor(store=":memory:"))
            >>> handler.attach().detach()
        """
        target = dispatcher or get_dispatcher()
        target.event_handlers = [h for h in target.event_handlers if h is not self]
        target.span_handlers = [h for h in target.span_handlers if h is not self._spans]
        if not _on_a_loop():  # on a loop's thread: await aflush() instead of holding it
            self.flush()  # what was learned before detaching is written

    def handle(self, event: BaseEvent, **kwargs: Any) -> None:
        """Collect the evidence of use in one event (the dispatcher calls it)."""
        if isinstance(event, SynapseUsageEvent):
            items = [("used", node) for node in event.used]
        elif isinstance(event, RetrievalEndEvent | SynapseRecallEvent):
            items = [("seen", node) for node in event.nodes]
        elif isinstance(event, QueryEndEvent):
            sources = list(getattr(event.response, "source_nodes", None) or [])
            citing = bool(sources) and _chunk_text(sources[0], 1) is not None
            used = _cited(event.response, sources) if citing else []
            if not used and self.reinforce_retrieved:
                used = sources
            items = [("chunk" if citing else "used", node) for node in used]
        else:
            return
        # outside any span the event is the whole run: its id keys it, as a span's id does
        self._record(self._runs.add(event.span_id, items), f"event:{event.id_}")

    def _record(self, items: list[tuple[str, Any]] | None, span: str) -> None:
        """Reinforce the ids of one top-level span's evidence of use, as one event.

        The span id (outside any span, the dispatched event's id) becomes the event id, so
        handlers sharing a store count a span, or a mark outside any, once.
        """
        if not items:
            return
        try:
            seen = [node for kind, node in items if kind == "seen"]
            ids = [
                self._source_id(node, seen) if kind == "chunk" else self.postprocessor.node_id(node)
                for kind, node in items
                if kind != "seen"
            ]
            used = [node for node in ids if node]
            if len(set(used)) > 1:
                processor = self.postprocessor
                namespace = processor.active_namespace
                event = namespaced_id("llamaindex:", namespace, f":{span}")
                write = functools.partial(  # at the span's end, whenever it is written
                    processor.store.reinforce,
                    used,
                    self.strength,
                    namespace,
                    time.time(),
                    event_id=event,
                )
                if _on_a_loop():  # never wait for a lock on the loop's thread
                    self._writer.submit(_logged, write)
                else:
                    write()
        except Exception:  # the dispatcher would swallow it silently
            logger.exception("synapse usage capture failed; nothing was reinforced")

    def _source_id(self, chunk: NodeWithScore, seen: list[NodeWithScore]) -> str | None:
        """The graph id of the node a citation chunk was cut from (the chunk's id is new)."""
        if self.postprocessor.id_mode == "ref_doc_id" and chunk.node.ref_doc_id:
            return chunk.node.ref_doc_id
        text = _words(chunk.node.get_content().split("\n", 1)[-1])
        for node in reversed(seen):  # the latest first: postprocessed after retrieved
            for mode in (MetadataMode.NONE, MetadataMode.LLM):
                if text and text in _words(node.node.get_content(metadata_mode=mode)):
                    return self.postprocessor.node_id(node)
        return None


class _SpanTree(BaseSpanHandler[BaseSpan]):
    """Feeds LlamaIndex's span tree to the handler's runs; a top-level span's end records."""

    _handler: SynapseUsageHandler = PrivateAttr()

    def __init__(self, handler: SynapseUsageHandler) -> None:
        super().__init__()
        self._handler = handler

    @classmethod
    def class_name(cls) -> str:
        return "SynapseSpanTree"

    def new_span(
        self, id_: str, bound_args: Any, instance: Any = None, parent_span_id: str | None = None,
        tags: Any = None, **kwargs: Any,
    ) -> None:  # fmt: skip
        self._handler._runs.start(id_, parent_span_id)

    def prepare_to_exit_span(
        self, id_: str, bound_args: Any, instance: Any = None, result: Any = None, **kwargs: Any
    ) -> None:
        self._handler._record(self._handler._runs.end(id_), id_)

    def prepare_to_drop_span(
        self, id_: str, bound_args: Any, instance: Any = None, err: Any = None, **kwargs: Any
    ) -> None:
        self._handler._record(self._handler._runs.end(id_), id_)  # used all the same


def _on_a_loop() -> bool:
    """Whether this thread runs an asyncio event loop."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return False
    return True


def _logged(write: Callable[[], object]) -> None:
    """Run ``write`` in the handler's thread; a failure is logged, as inline."""
    try:
        write()
    except Exception:
        logger.exception("synapse usage capture failed; nothing was reinforced")


def _cited(response: Any, sources: list[NodeWithScore]) -> list[NodeWithScore]:
    """The sources a citation answer cites as ``[n]``."""
    if not isinstance(response, Response) or not response.response:
        return []
    numbers = {int(n) for n in _CITATION.findall(response.response)}
    return [s for i, s in enumerate(sources, 1) if i in numbers and _chunk_text(s, i) is not None]


def _chunk_text(source: NodeWithScore, number: int) -> str | None:
    text = source.node.get_content()
    return text if text.startswith(f"Source {number}:") else None


def _words(text: str) -> str:
    return " ".join(text.split())
