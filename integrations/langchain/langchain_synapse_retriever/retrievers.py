"""`SynapseRetriever`: wrap any retriever with associative recall that never grows its output."""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any, Literal, Self

from langchain_core.callbacks import (
    AsyncCallbackManagerForRetrieverRun,
    CallbackManagerForRetrieverRun,
)
from langchain_core.documents import Document
from langchain_core.retrievers import RetrieverLike
from langchain_core.runnables.config import run_in_executor
from langchain_core.stores import BaseStore
from langchain_core.vectorstores import VectorStore
from pydantic import (
    Field,
    InstanceOf,
    ValidationInfo,
    field_validator,
    model_validator,
)

from langchain_synapse_retriever.caller import CallerRetriever
from synapse_retriever import (
    ANNOTATION_KEYS,
    Hit,
    InvalidTypeError,
    InvalidValueError,
    ItemRecall,
    Recalled,
    SynapseConfig,
    SynapseStore,
    annotate,
    approximate_tokens,
    content_id,
    plan_items,
    usage_ids,
    validate_namespace,
)
from synapse_retriever.clock import Clock
from synapse_retriever.errors import shown
from synapse_retriever.recall.items import log_unfetched
from synapse_retriever.tokens import is_int

__all__ = ["SynapseRetriever", "document_id"]

Docstore = VectorStore | BaseStore[str, Document] | Callable[[str], Document | None]


def document_id(document: Document, id_key: str | None = None) -> str:
    """The graph id of ``document``: its ``id``, else ``metadata[id_key]``, else a content hash.

    Example:
        >>> from langchain_core.documents import Document
        >>> document_id(Document("def verify(): ...", id="auth/jwt.py"))
        'auth/jwt.py'
        >>> document_id(Document("def verify(): ...", metadata={"source": "auth/jwt.py"}), "source")
        'auth/jwt.py'
        >>> document_id(Document("def verify(): ..."))
        'sha256:f2993a9f47fcc2084f222bf1'
        >>> document_id(Document("first row", metadata={"row": 0}), "row")
        '0'
    """
    if document.id:
        return str(document.id)
    value = None if id_key is None else document.metadata.get(id_key)
    if value is not None and value != "":  # a row number 0 is an id: it was hashed
        return str(value)
    return content_id(document.page_content)


class SynapseRetriever(CallerRetriever):
    """Fold learned co-usage into any retriever's results without ever adding a document.

    Documents used together (see :meth:`record_usage` and
    :class:`~langchain_synapse_retriever.SynapseCallbackHandler`) are linked in a
    :class:`~synapse_retriever.SynapseStore`. At query time, by default (the ACT-R
    rule), up to two documents it missed (resolved through ``docstore``) take the
    slots of its weakest hits when they beat them by a margin: documents used with the
    hits (the association gate: nothing else is injected), the more recently and often the
    stronger (``SynapseConfig.recency()`` lifts the gate); the first hit never moves. Under
    ``SynapseConfig.published()`` the upstream's documents present in the graph's
    neighbourhood are boosted, and at most two strongly associated documents are
    injected. The output has exactly ``min(k, len(upstream))`` documents; a cold graph
    returns the upstream's own Document objects. Boosted and injected documents are
    annotated copies whose ``metadata`` says why they are there (``synapse_origin``,
    ``synapse_energy``, ``synapse_path``, ``synapse_displaced``).

    The upstream runs under the caller's config as if called directly: its ``configurable``
    fields, tags and limits reach it, its run a child of this one. ``ainvoke`` never holds
    up the event loop: the upstream's ``ainvoke``, the docstore's async reads, and recall in
    a worker thread.

    Example:
        A runnable stands in for a vector store retriever here; with a real one, pass
        ``vectorstore.as_retriever()`` as ``base_retriever`` and the vector store itself as
        ``docstore``.

        >>> from langchain_core.documents import Document
        >>> from langchain_core.runnables import RunnableLambda
        >>> from langchain_core.stores import InMemoryStore
        >>> from langchain_synapse_retriever import SynapseRetriever
        >>> names = ["auth/jwt.py", "auth/login.py", "auth/views.py", "README.md", "keys.py"]
        >>> corpus = {name: Document(page_content=f"source of {name}", id=name) for name in names}
        >>> docstore = InMemoryStore()
        >>> docstore.mset(list(corpus.items()))
        >>> search = RunnableLambda(lambda query: [corpus[name] for name in names[:4]])
        >>> retriever = SynapseRetriever(base_retriever=search, store=":memory:", docstore=docstore)
        >>> retriever.record_usage(["auth/jwt.py", "keys.py"])  # used together: 1 edge
        1
        >>> docs = retriever.invoke("verify a token")  # keys.py takes README.md's slot
        >>> [doc.id for doc in docs]
        ['auth/jwt.py', 'auth/login.py', 'auth/views.py', 'keys.py']
        >>> docs[-1].metadata["synapse_path"], docs[-1].metadata["synapse_displaced"]
        ('auth/jwt.py -> keys.py', 'README.md')
    """

    base_retriever: RetrieverLike = Field(
        description="The upstream: any retriever or runnable that maps a query to Documents."
    )
    docstore: Docstore | None = Field(
        default=None,
        description=(
            "How injected ids become Documents: a VectorStore (get_by_ids / aget_by_ids), a "
            "BaseStore[str, Document] (mget / amget) or a callable id -> Document | None. "
            "None injects nothing (the published rule still boosts and re-ranks)."
        ),
    )
    id_key: str | None = Field(
        default=None,
        description="Metadata key holding a document's id when Document.id is empty "
        "(e.g. 'source'); without either, the id is a hash of page_content.",
    )
    score_key: str | None = Field(
        default=None,
        description="Metadata key holding a similarity score (higher is better); when every "
        "document has one and they are sorted, they drive recall instead of rank scores "
        "1 - rank / n. An injected document's copy carries the score of the document it "
        "displaced; under the published rule a boosted document's copy carries its new score.",
    )
    k: int | None = Field(
        default=None,
        ge=1,
        strict=True,
        description="Keep the first k upstream documents before recall (never forwarded "
        "upstream); None keeps them all. invoke(query, k=...) overrides it per call.",
    )
    active_namespace: str = Field(
        default="personal",
        description="Namespace weighted 1.0 when merging the graph; record_usage's default.",
    )
    config: InstanceOf[SynapseConfig] | None = Field(
        default=None,
        description="The method's constants, used to open `store` when it is a path.",
    )
    token_budget: Literal["strict"] | None = Field(
        default=None,
        description="'strict': an injection may not raise the output's total token count.",
    )
    token_counter: Callable[[str], int] = Field(
        default=approximate_tokens,
        description="Tokens in a page_content, for token_budget='strict'.",
    )
    store: SynapseStore = Field(
        description="The association graph, or a path to its SQLite file (opened at "
        "construction, once every field passed; close it with retriever.store.close())."
    )

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

    @field_validator("id_key", "score_key")
    @classmethod
    def _check_key(cls, key: str | None, info: ValidationInfo) -> str | None:
        # an annotated copy's metadata holds the annotations and the score: an id read from
        # them would record "injected" or a score as the document's id
        if key in ANNOTATION_KEYS:
            raise ValueError(f"{info.field_name} may not be {key!r}: the copies' annotation key")
        if key is not None and info.field_name == "score_key" and key == info.data.get("id_key"):
            raise ValueError(f"score_key may not be id_key {key!r}: a copy's score would be its id")
        return key

    def record_usage(
        self,
        used: Iterable[Document | str],
        strength: float = 1.0,
        namespace: str | None = None,
        at: Clock = None,
        *,
        event_id: str | None = None,
    ) -> int:
        """Reinforce documents (or ids) the application used together, as one event.

        Only use is evidence: do not record documents merely because they were retrieved
        together, or vector similarity feeds back into the graph.

        Args:
            used: Documents (their id as in retrieval: ``Document.id``, else
                ``metadata[id_key]``, else a content hash) or ids, used together.
            strength: Δw = learning_rate × strength, clamped to ``[0, max_strength]``.
            namespace: Where the edges go; ``active_namespace`` by default.
            at: When they were used: an aware datetime or POSIX seconds (None: now), e.g.
                to replay a log of past tasks in time order.
            event_id: Makes the call safe to retry (a timed-out ``arecord_usage`` may have
                written): an id this store recorded before writes nothing and returns 0,
                as in ``SynapseStore.reinforce``.

        Returns:
            The number of edges written (pairs of distinct ids).

        Example:
            >>> from langchain_core.documents import Document
            >>> from langchain_core.runnables import RunnableLambda
            >>> retriever = SynapseRetriever(
            ...     base_retriever=RunnableLambda(lambda query: []), store=":memory:"
            ... )
            >>> cited = [Document("...", id="auth/jwt.py"), Document("...", id="config/keys.py")]
            >>> retriever.record_usage(cited)  # Documents...
            1
            >>> retriever.record_usage(["auth/jwt.py", "config/keys.py", "tests/test_jwt.py"])
            3
            >>> retriever.record_usage(["billing/invoice.py", "billing/tax.py"], at=1_700_000_000)
            1
            >>> retriever.record_usage(["a.py", "b.py"], event_id="task:7")
            1
            >>> retriever.record_usage(["a.py", "b.py"], event_id="task:7")  # a retry: counted once
            0
        """
        ids = usage_ids(used, lambda doc: document_id(doc, self.id_key), Document)
        return self.store.reinforce(
            ids, strength, namespace or self.active_namespace, at, event_id=event_id
        )

    async def arecord_usage(
        self,
        used: Iterable[Document | str],
        strength: float = 1.0,
        namespace: str | None = None,
        at: Clock = None,
        *,
        event_id: str | None = None,
    ) -> int:
        """:meth:`record_usage` on the async path: the same edges, count and errors.

        It runs in a worker thread, so the event loop is never held up, even while the write
        waits for another process's lock on the file (up to ``busy_timeout_s``). Cancelling
        the await does not stop a write its thread has begun.

        Example:
            >>> import asyncio
            >>> from langchain_core.runnables import RunnableLambda
            >>> retriever = SynapseRetriever(
            ...     base_retriever=RunnableLambda(lambda query: []), store=":memory:"
            ... )
            >>> asyncio.run(retriever.arecord_usage(["auth/jwt.py", "config/keys.py"]))
            1
        """
        return await run_in_executor(
            None, self.record_usage, used, strength, namespace, at, event_id=event_id
        )

    def _get_relevant_documents(
        self,
        query: str,
        *,
        run_manager: CallbackManagerForRetrieverRun,
        k: int | None = None,
        **kwargs: Any,
    ) -> list[Document]:
        upstream = self.base_retriever.invoke(
            _query(query), self.child_config(run_manager), **kwargs
        )
        recall = self._plan(upstream, k)
        fetch = None if self.docstore is None else self._fetch
        return self._annotated(recall.resolve(fetch, self._cost(), log_unfetched))

    async def _aget_relevant_documents(
        self,
        query: str,
        *,
        run_manager: AsyncCallbackManagerForRetrieverRun,
        k: int | None = None,
        **kwargs: Any,
    ) -> list[Document]:
        upstream = await self.base_retriever.ainvoke(
            _query(query), self.child_config(run_manager), **kwargs
        )
        # in a worker thread: the store's lock may be held by a long write (on PostgreSQL
        # one waiting for a row another process locked), and a refresh may read what others
        # wrote
        recall = await run_in_executor(None, self._plan, upstream, k)
        fetch = None if self.docstore is None else self._afetch
        return self._annotated(await recall.aresolve(fetch, self._cost(), log_unfetched))

    def _plan(self, upstream: Sequence[Document], k: int | None) -> ItemRecall[Document]:
        limit = self.k if k is None else k
        if limit is not None and not is_int(limit):
            raise InvalidTypeError(f"k must be an int or None, got {shown(limit)}")
        limit = None if limit is None else int(limit)  # a NumPy integer too
        if limit is not None and limit < 1:
            raise InvalidValueError(f"k must be at least 1, got {limit}")
        if isinstance(upstream, (str, bytes, Document)) or not isinstance(upstream, Iterable):
            raise InvalidTypeError(
                f"base_retriever must return a list of Documents, got {type(upstream).__name__} "
                f"{shown(upstream, 200)}"
            )
        docs = list(upstream)[:limit]
        wrong = [doc for doc in docs if not isinstance(doc, Document)]
        if wrong:
            raise InvalidTypeError(
                f"base_retriever must return Documents, got {type(wrong[0]).__name__} "
                f"{shown(wrong[0], 200)}"
            )
        key = self.score_key
        return plan_items(
            self.store,
            docs,
            ids=[document_id(doc, self.id_key) for doc in docs],
            scores=[None if key is None else doc.metadata.get(key) for doc in docs],
            active_namespace=self.active_namespace,
        )

    def _fetch(self, ids: list[str]) -> dict[str, Document]:
        """One batch of candidate ids -> the Documents ``docstore`` has for them."""
        store = self.docstore
        if store is None:
            return {}
        if isinstance(store, VectorStore):
            return _by_id(ids, store.get_by_ids(ids))
        if isinstance(store, BaseStore):
            return _by_id(ids, store.mget(ids), aligned=True, id_key=self.id_key)
        return _by_id(ids, [store(node) for node in ids], aligned=True, id_key=self.id_key)

    async def _afetch(self, ids: list[str]) -> dict[str, Document]:
        store = self.docstore
        if isinstance(store, VectorStore):
            return _by_id(ids, await store.aget_by_ids(ids))
        if isinstance(store, BaseStore):
            return _by_id(ids, await store.amget(ids), aligned=True, id_key=self.id_key)
        return await run_in_executor(None, self._fetch, ids)

    def _cost(self) -> Callable[[Document], float] | None:
        if self.token_budget != "strict":
            return None
        count = self.token_counter
        return lambda doc: count(doc.page_content)

    def _annotated(self, recalled: list[Recalled[Document]]) -> list[Document]:
        """Plain hits as they came; boosted and injected ones as copies that say why."""
        return [
            doc if hit.origin == "vector" else self._copy(doc, hit, score)
            for doc, hit, score in recalled
        ]

    def _copy(self, doc: Document, hit: Hit, score: float | None) -> Document:
        metadata = annotate(doc.metadata, hit)
        if self.score_key is not None and score is not None:
            metadata[self.score_key] = score  # the method's, or an injected one's victim's
        return doc.model_copy(update={"metadata": metadata})


def _query(query: Any) -> Any:
    """``query``, given (an upstream's error for None names no argument); anything else goes
    to the upstream as it is: a runnable may take a dict."""
    if query is None:
        raise InvalidTypeError("query must be given, got None")
    return query


def _by_id(
    ids: list[str],
    found: Sequence[object],
    *,
    aligned: bool = False,
    id_key: str | None = None,
) -> dict[str, Document]:
    """Asked ids -> Documents, matched by position (``aligned``) or else by ``Document.id``.
    Matched by position, a Document that names ids (its ``id``, ``metadata[id_key]``) but
    not the one asked for is another document: no candidate (injected, it could be a hit
    already, and be in the output twice); one that names none is the one asked for, and
    comes back as a copy with that id (used and fed back, it reinforces the same node)."""
    if not isinstance(found, Iterable) or isinstance(found, str | bytes | Mapping):
        raise InvalidTypeError(
            f"docstore returned {type(found).__name__} {shown(found)} for {len(ids)} ids, "
            "expected a list"
        )
    found = list(found)  # a generator: read once
    if aligned and len(found) != len(ids):
        raise InvalidValueError(f"docstore returned {len(found)} answers for {len(ids)} ids")
    keys = ids if aligned else [getattr(doc, "id", None) for doc in found]
    resolved: dict[str, Document] = {}
    for node, doc in zip(keys, found, strict=True):
        if doc is None or node is None:
            continue
        if not isinstance(doc, Document):
            raise InvalidTypeError(
                f"docstore returned {shown(doc)} for id {node!r}, expected a Document"
            )
        named = {
            str(i)
            for i in (doc.id, doc.metadata.get(id_key) if id_key else None)
            if i is not None and i != ""
        }
        if named and node not in named:
            continue
        resolved[node] = doc if named else doc.model_copy(update={"id": node})
    return resolved
