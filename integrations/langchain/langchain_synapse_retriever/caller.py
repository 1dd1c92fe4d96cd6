"""`CallerRetriever`: a retriever whose caller's config reaches the runnables it calls."""

from __future__ import annotations

from contextvars import ContextVar
from typing import Any

from langchain_core.documents import Document
from langchain_core.retrievers import BaseRetriever
from langchain_core.runnables import RunnableConfig
from langchain_core.runnables.config import ensure_config, patch_config
from pydantic import ConfigDict

_CALLER: ContextVar[RunnableConfig | None] = ContextVar("synapse_caller_config", default=None)
"""The config the retriever was invoked with: ``BaseRetriever`` hands
``_get_relevant_documents`` the run's callbacks only, not ``configurable``."""


class CallerRetriever(BaseRetriever):
    """A retriever that runs what it calls (an upstream retriever, a mode detector's chat
    model) under its caller's config, as if the caller had called it directly: its
    ``configurable`` fields, tags, metadata and limits reach it, its run a child of this one.
    An argument it has no field for is refused (pydantic's ``extra_forbidden``): a misspelt
    ``active_namepsace=`` was dropped without a word, and the default namespace written. A
    validation error does not echo the input (``hide_input_in_errors``): it held a store's
    PostgreSQL URL whole, password included; the library's own messages name bad values.

    Example:
        >>> from langchain_core.runnables import RunnableLambda
        >>> class Upstream(CallerRetriever):
        ...     def _get_relevant_documents(self, query, *, run_manager):
        ...         seen = RunnableLambda(lambda q, config: config["configurable"]["user"])
        ...         user = seen.invoke(query, self.child_config(run_manager))
        ...         return [Document(user)]
        >>> Upstream().invoke("q", {"configurable": {"user": "ada"}})[0].page_content
        'ada'
    """

    model_config = ConfigDict(extra="forbid", hide_input_in_errors=True)

    def invoke(
        self, input: str, config: RunnableConfig | None = None, **kwargs: Any
    ) -> list[Document]:
        """The documents for ``input``; what the retriever calls runs under ``config``,
        as if the caller had called it directly, its run a child of this one. Options a
        retriever reads per call (``k=``) go in ``kwargs``."""
        token = _CALLER.set(ensure_config(config))
        try:
            return super().invoke(input, config, **kwargs)
        finally:
            _CALLER.reset(token)

    async def ainvoke(
        self, input: str, config: RunnableConfig | None = None, **kwargs: Any
    ) -> list[Document]:
        """:meth:`invoke` on the async path: the event loop is never held up (the
        retriever's blocking work runs in a worker thread)."""
        token = _CALLER.set(ensure_config(config))
        try:
            return await super().ainvoke(input, config, **kwargs)
        finally:
            _CALLER.reset(token)

    def child_config(self, run_manager: Any) -> RunnableConfig:
        """The caller's config (``configurable``, tags, limits), under this run."""
        return patch_config(_CALLER.get(), callbacks=run_manager.get_child())
