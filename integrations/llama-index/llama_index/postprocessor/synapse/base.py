"""`SynapsePostprocessor`: associative recall for any LlamaIndex query or chat engine."""

from __future__ import annotations

import asyncio
import functools
import inspect
import logging
from collections.abc import Awaitable, Callable, Iterable, Sequence
from typing import Any, Literal, Self

from llama_index.core.bridge.pydantic import Field
from llama_index.core.instrumentation import get_dispatcher
from llama_index.core.instrumentation.events import BaseEvent
from llama_index.core.postprocessor.types import BaseNodePostprocessor
from llama_index.core.schema import BaseNode, MetadataMode, NodeWithScore, QueryBundle
from llama_index.core.settings import Settings
from llama_index.core.storage.docstore.types import BaseDocumentStore
from llama_index.core.vector_stores.types import BasePydanticVectorStore
from pydantic import (
    ConfigDict,
    InstanceOf,
    ValidationInfo,
    field_validator,
    model_validator,
)

from synapse_retriever import (
    Hit,
    InvalidTypeError,
    InvalidValueError,
    ItemRecall,
    Recalled,
    SynapseConfig,
    SynapseStore,
    annotate,
    plan_items,
    usage_ids,
    validate_namespace,
)
from synapse_retriever.clock import Clock
from synapse_retriever.errors import shown
from synapse_retriever.recall.items import log_unfetched

__all__ = ["NodeFetcher", "SynapsePostprocessor", "SynapseRecallEvent"]

logger = logging.getLogger(__name__)
dispatcher = get_dispatcher(__name__)

NodeLike = NodeWithScore | BaseNode | str
NodeFetcher = Callable[[list[str]], Iterable[BaseNode] | Awaitable[Iterable[BaseNode]]]
"""``ids -> nodes``, sync or async: the nodes of candidate ids (missing ones are skipped)."""


class SynapseRecallEvent(BaseEvent):
    """Instrumentation event: the postprocessor boosted or injected; ``nodes`` is its output.

    Event handlers attached to a dispatcher above this module's (the root one, by default)
    receive it, inside the span of the query that ran the postprocessor.

    Example:
        >>> from llama_index.core.schema import NodeWithScore, TextNode
        >>> event = SynapseRecallEvent(nodes=[NodeWithScore(node=TextNode(id_="a"), score=0.9)])
        >>> event.class_name(), [n.node_id for n in event.nodes]
        ('SynapseRecallEvent', ['a'])
    """

    nodes: list[NodeWithScore]

    @classmethod
    def class_name(cls) -> str:
        """The event's name in LlamaIndex instrumentation."""
        return "SynapseRecallEvent"


class SynapsePostprocessor(BaseNodePostprocessor):
    """Fold nodes used together with the top hits into the results, never adding a node.

    By default (the ACT-R rule) up to two absent nodes, fetched from ``docstore``, take
    the slots of the weakest hits when they beat them by a margin: nodes used with the
    hits (the association gate: nothing else is injected), the more recently and often the
    stronger (``SynapseConfig.recency()`` lifts the gate); the first hit never moves. Under
    ``SynapseConfig.published()`` nodes already present that were used with the top hits
    move up, and at most two strongly associated absent nodes are injected. The number of
    nodes never grows, an id that cannot be fetched displaces nothing, and on a cold graph
    the output is the input, unchanged. Changed nodes are copies that say why
    in ``metadata`` (``synapse_origin``, ``synapse_path``...), keys kept out of the prompt
    and the embedding. Associations are learned from use: :meth:`record_usage`, or
    :class:`~llama_index.postprocessor.synapse.SynapseUsageHandler`.

    Scores: when every node has a score and they are sorted best first, the output carries
    the method's scores (injected nodes take their victim's; under the published rule,
    boosted nodes gain ``boost × energy``). Otherwise (None scores, a reranker's order) the
    current order drives recall, only the order changes, and every kept node keeps its
    score (None stays None).

    Args:
        store: A ``SynapseStore``, or the path of its SQLite file (a store opened from a path
            is the postprocessor's: close it with ``synapse.store.close()``).
        docstore: Where injected nodes come from: a ``BaseDocumentStore`` (e.g.
            ``index.docstore``), a vector store that returns nodes by id, or a ``NodeFetcher``.
            None: nothing is injected (the published rule still boosts).
        id_mode: ``"node_id"``, or ``"ref_doc_id"`` to learn and recall whole documents
            (stable across re-ingestion; a docstore then injects a document's first node).
        active_namespace: Namespace that weighs 1.0 in recall and receives recorded usage.
        config: The method's constants, when ``store`` is a path.
        token_budget: ``"strict"``: an injection may not raise the total token count.
        token_counter: Tokens in a text for the budget; default ``Settings.tokenizer``.

    Example:
        >>> from llama_index.core.schema import NodeWithScore, TextNode
        >>> from llama_index.core.storage.docstore import SimpleDocumentStore
        >>> docstore = SimpleDocumentStore()
        >>> docstore.add_documents([TextNode(id_=i, text=f"node {i}") for i in "abcdz"])
        >>> synapse = SynapsePostprocessor(store=":memory:", docstore=docstore)
        >>> synapse.record_usage(["a", "z"])  # used together: one edge
        1
        >>> hits = [NodeWithScore(node=docstore.get_node(i), score=s)
        ...         for i, s in zip("abcd", [0.9, 0.8, 0.7, 0.4])]
        >>> [(n.node_id, n.score) for n in synapse.postprocess_nodes(hits)]
        [('a', 0.9), ('b', 0.8), ('c', 0.7), ('z', 0.4)]

        In an engine: ``index.as_query_engine(node_postprocessors=[synapse])``.
    """

    # a misspelt argument is refused; an error echoes no input (a store URL's password)
    model_config = ConfigDict(extra="forbid", hide_input_in_errors=True)

    docstore: (
        InstanceOf[BaseDocumentStore] | InstanceOf[BasePydanticVectorStore] | NodeFetcher | None
    ) = Field(default=None, exclude=True, description="Source of injected nodes.")
    id_mode: Literal["node_id", "ref_doc_id"] = Field(
        default="node_id", description="Which id of a node the graph learns."
    )
    active_namespace: str = Field(default="personal", description="Namespace weighing 1.0.")
    config: InstanceOf[SynapseConfig] | None = Field(
        default=None, exclude=True, description="The method's constants (store given as a path)."
    )
    token_budget: Literal["strict"] | None = Field(
        default=None, description="'strict': an injection may not raise the total tokens."
    )
    token_counter: Callable[[str], int] | None = Field(
        default=None, exclude=True, description="Tokens in a text; default Settings.tokenizer."
    )
    store: SynapseStore = Field(exclude=True, description="The association graph.")

    @field_validator("store", mode="plain")
    @classmethod
    def _check_store(cls, given: Any, info: ValidationInfo) -> Any:
        # a path is opened by _open_store, once every field (a subclass's too) passed
        return SynapseStore.check_field(given, info.data.get("config"))

    @model_validator(mode="after")
    def _open_store(self) -> Self:
        given: Any = self.store
        if not isinstance(given, SynapseStore):
            self.store = SynapseStore.coerce(given, self.config)
        return self

    def __init__(self, **data: Any) -> None:
        """Validated by pydantic; a store that cannot be opened raises the library's own
        error (:class:`~synapse_retriever.errors.StorageUnavailableError`,
        :class:`~synapse_retriever.errors.NotASynapseDatabaseError`...), as
        :class:`~synapse_retriever.SynapseStore` does, not a ``ValidationError``."""
        SynapseStore.validated(functools.partial(super().__init__, **data))

    @field_validator("active_namespace")
    @classmethod
    def _check_namespace(cls, namespace: str) -> str:
        return validate_namespace(namespace)

    @classmethod
    def class_name(cls) -> str:
        """The component's name in LlamaIndex serialization."""
        return "SynapsePostprocessor"

    @classmethod
    def from_dict(cls, data: dict[str, Any], **kwargs: Any) -> Self:
        """LlamaIndex's rebuild from :meth:`to_dict`, which keeps the settings but not the
        store, the docstore or the config (an open database and the objects around it):
        give them again, ``from_dict(data, store="synapses.db", docstore=index.docstore)``.
        Without ``store=``, :class:`~synapse_retriever.InvalidValueError` says so."""
        if "store" not in data and "store" not in kwargs:
            raise InvalidValueError(
                f"{cls.__name__}.from_dict needs store=: to_dict() keeps no store (an open "
                "database), nor docstore= or config=; give them again, e.g. "
                f"{cls.__name__}.from_dict(data, store='synapses.db', docstore=index.docstore)"
            )
        return super().from_dict(data, **kwargs)

    def __getstate__(self) -> dict[str, Any]:
        """Refused: a postprocessor holds an open store. (LlamaIndex's ``BaseComponent``
        pickles what it can and deletes the rest, the store and the docstore, from this very
        object's ``__dict__``: the postprocessor was left without a store, without a word.)"""
        raise TypeError(
            f"cannot pickle a {type(self).__name__}: it holds an open store; build one in "
            "each process from the store's path or URL"
        )

    def node_id(self, node: NodeLike) -> str:
        """The graph id of a node (a str is taken as an id): ``node_id`` or ``ref_doc_id``.

        Example:
            >>> from llama_index.core.schema import NodeRelationship, RelatedNodeInfo, TextNode
            >>> chunk = TextNode(id_="chunk-1", text="def verify(): ...")
            >>> chunk.relationships[NodeRelationship.SOURCE] = RelatedNodeInfo(node_id="jwt.py")
            >>> SynapsePostprocessor(store=":memory:").node_id(chunk)
            'chunk-1'
            >>> SynapsePostprocessor(store=":memory:", id_mode="ref_doc_id").node_id(chunk)
            'jwt.py'
        """
        if isinstance(node, str):
            return node
        base = node.node if isinstance(node, NodeWithScore) else node
        if not isinstance(base, BaseNode):
            raise InvalidTypeError(f"expected a node, NodeWithScore or id, got {shown(node)}")
        if self.id_mode == "ref_doc_id" and base.ref_doc_id:
            return base.ref_doc_id
        return base.node_id

    def record_usage(
        self,
        nodes_or_ids: Iterable[NodeLike],
        strength: float = 1.0,
        namespace: str | None = None,
        at: Clock = None,
        *,
        event_id: str | None = None,
    ) -> int:
        """Reinforce nodes used together (one co-activation event); returns edges written.

        Record what was *used* (cited, read, edited), not merely retrieved: reinforcing
        every retrieved node would feed recall's own output back into the graph.
        ``at`` is when they were used: an aware datetime or POSIX seconds (None: now),
        e.g. to replay a log of past tasks in time order. ``event_id`` makes the call safe to
        retry (a timed-out ``arecord_usage`` may have written): an id the store recorded
        before writes nothing and returns 0, as in ``SynapseStore.reinforce``.

        Example:
            >>> from llama_index.core.schema import TextNode
            >>> synapse = SynapsePostprocessor(store=":memory:")
            >>> synapse.record_usage([TextNode(id_="auth/jwt.py"), "config/keys.py"])
            1
            >>> synapse.store.weight("auth/jwt.py", "config/keys.py") > 0
            True
            >>> synapse.record_usage(["billing/invoice.py", "billing/tax.py"], at=1_700_000_000)
            1
            >>> synapse.record_usage(["a.py", "b.py"], event_id="task:7")
            1
            >>> synapse.record_usage(["a.py", "b.py"], event_id="task:7")  # a retry: once
            0
        """
        ids = usage_ids(nodes_or_ids, self.node_id, (BaseNode, NodeWithScore))
        return self.store.reinforce(
            ids, strength, namespace or self.active_namespace, at, event_id=event_id
        )

    async def arecord_usage(
        self,
        nodes_or_ids: Iterable[NodeLike],
        strength: float = 1.0,
        namespace: str | None = None,
        at: Clock = None,
        *,
        event_id: str | None = None,
    ) -> int:
        """:meth:`record_usage`, awaited without holding the loop: the same edges, count and
        errors. It runs in a worker thread, so a write waiting for another process's lock on
        the file (up to ``busy_timeout_s``) waits there. Cancelling the await does not stop a
        write its thread has begun.

        Example:
            >>> import asyncio
            >>> synapse = SynapsePostprocessor(store=":memory:")
            >>> asyncio.run(synapse.arecord_usage(["auth/jwt.py", "config/keys.py"]))
            1
        """
        return await asyncio.to_thread(
            self.record_usage, nodes_or_ids, strength, namespace, at, event_id=event_id
        )

    def _postprocess_nodes(
        self, nodes: list[NodeWithScore], query_bundle: QueryBundle | None = None
    ) -> list[NodeWithScore]:
        recall, fetch = self._plan(nodes), None if self.docstore is None else self._fetch
        return self._output(nodes, recall.resolve(fetch, self._cost(), log_unfetched))

    async def _apostprocess_nodes(
        self, nodes: list[NodeWithScore], query_bundle: QueryBundle | None = None
    ) -> list[NodeWithScore]:
        # in a worker thread: the store's lock may be held by a long write (on PostgreSQL
        # one waiting for a row another process locked), and a refresh may read what others
        # wrote
        recall = await asyncio.to_thread(self._plan, nodes)
        fetch = None if self.docstore is None else self._afetch
        return self._output(nodes, await recall.aresolve(fetch, self._cost(), log_unfetched))

    def _plan(self, nodes: Sequence[NodeWithScore]) -> ItemRecall[NodeWithScore]:
        if not isinstance(nodes, Sequence) or isinstance(nodes, str | bytes):  # None, say
            raise InvalidTypeError(
                f"nodes must be a list (or tuple) of NodeWithScore, got {type(nodes).__name__} "
                f"{shown(nodes)}"
            )
        wrong = next((node for node in nodes if not isinstance(node, NodeWithScore)), None)
        if wrong is not None:  # a retriever's results, scored: what a postprocessor is given
            raise InvalidTypeError(
                f"nodes must be NodeWithScore objects, got {type(wrong).__name__} {shown(wrong)}"
            )
        ids = [self.node_id(node) for node in nodes]
        scores = [node.score for node in nodes]
        return plan_items(
            self.store, nodes, ids=ids, scores=scores, active_namespace=self.active_namespace
        )

    def _fetch(self, ids: list[str]) -> dict[str, NodeWithScore]:
        """One batch of candidate ids -> the nodes ``docstore`` has for them."""
        source = self.docstore
        if isinstance(source, BaseDocumentStore):
            if self.id_mode == "ref_doc_id":
                ids = _first_node_ids([source.get_ref_doc_info(i) for i in ids])
            return self._keyed(source.get_nodes(ids, raise_error=False))
        if isinstance(source, BasePydanticVectorStore):
            return self._keyed(source.get_nodes(node_ids=ids))
        found = source(ids) if source is not None else []
        if inspect.isawaitable(found):
            _close(found)
            raise TypeError("an async NodeFetcher works only on the async path")
        return self._keyed(found)

    async def _afetch(self, ids: list[str]) -> dict[str, NodeWithScore]:
        source = self.docstore
        if isinstance(source, BaseDocumentStore):
            if self.id_mode == "ref_doc_id":
                ids = _first_node_ids([await source.aget_ref_doc_info(i) for i in ids])
            return self._keyed(await source.aget_nodes(ids, raise_error=False))
        if isinstance(source, BasePydanticVectorStore):
            return self._keyed(await source.aget_nodes(node_ids=ids))
        if source is None:
            return {}
        # a sync fetcher may wait on a database: in a worker thread, not on the event loop
        found = source(ids) if _is_async(source) else await asyncio.to_thread(source, ids)
        return self._keyed(await found if inspect.isawaitable(found) else found)

    def _keyed(self, nodes: Iterable[BaseNode]) -> dict[str, NodeWithScore]:
        """Fetched nodes by graph id; a node that maps to another id is not a candidate."""
        keyed: dict[str, NodeWithScore] = {}
        for node in nodes:
            if isinstance(node, BaseNode):
                keyed.setdefault(self.node_id(node), NodeWithScore(node=node))
        return keyed

    def _cost(self) -> Callable[[NodeWithScore], float] | None:
        """Tokens of a node as the LLM sees it, for ``token_budget="strict"``."""
        if self.token_budget != "strict":
            return None
        count = self.token_counter or (lambda text: len(Settings.tokenizer(text)))
        return lambda item: count(item.node.get_content(metadata_mode=MetadataMode.LLM))

    def _output(
        self, nodes: list[NodeWithScore], recalled: list[Recalled[NodeWithScore]]
    ) -> list[NodeWithScore]:
        if all(hit.origin == "vector" for _, hit, _ in recalled):
            return nodes  # nothing boosted or injected: the input, unchanged
        output = [
            item
            if hit.origin == "vector"
            else NodeWithScore(node=_annotated(item.node, hit), score=score)
            for item, hit, score in recalled
        ]
        dispatcher.event(SynapseRecallEvent(nodes=output))
        return output


def _annotated(node: BaseNode, hit: Hit) -> BaseNode:
    """A copy of ``node`` saying why it is here, the notes kept out of prompt and embedding."""
    notes = hit.annotation()
    llm_keys = [k for k in node.excluded_llm_metadata_keys if k not in notes]
    embed_keys = [k for k in node.excluded_embed_metadata_keys if k not in notes]
    return node.model_copy(
        update={
            "metadata": annotate(node.metadata, hit),
            "excluded_llm_metadata_keys": [*llm_keys, *notes],
            "excluded_embed_metadata_keys": [*embed_keys, *notes],
        }
    )


def _first_node_ids(infos: Iterable[Any]) -> list[str]:
    return [info.node_ids[0] for info in infos if info is not None and info.node_ids]


def _close(awaitable: Awaitable[Any]) -> None:
    if inspect.iscoroutine(awaitable):
        awaitable.close()


def _is_async(fetcher: Any) -> bool:
    """Whether ``fetcher`` is an async function (or an object whose ``__call__`` is one):
    awaited on the loop; any other is called in a worker thread."""
    call = type(fetcher).__call__ if not inspect.isroutine(fetcher) else None
    return inspect.iscoroutinefunction(fetcher) or inspect.iscoroutinefunction(call)
