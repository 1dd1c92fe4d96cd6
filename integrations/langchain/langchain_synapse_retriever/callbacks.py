"""`SynapseCallbackHandler`: learn co-usage from what an agent's tools read and edit."""

from __future__ import annotations

import logging
from collections.abc import Callable, Collection, Iterable, Mapping
from typing import Any
from uuid import UUID

from langchain_core.callbacks import BaseCallbackHandler

from synapse_retriever import (
    InvalidTypeError,
    RunCollector,
    SynapseStore,
    validate_namespace,
)
from synapse_retriever.capture.coactivation import is_node_id, namespaced_id
from synapse_retriever.clock import finite_real
from synapse_retriever.errors import shown

logger = logging.getLogger(__name__)

__all__ = ["DEFAULT_INPUT_KEYS", "SynapseCallbackHandler"]

DEFAULT_INPUT_KEYS = (
    "path",
    "paths",
    "file_path",
    "file_paths",
    "filename",
    "source_path",
    "destination_path",
    "document_id",
    "document_ids",
)
"""Tool arguments read as the ids of the files or documents a tool reads or edits."""


class SynapseCallbackHandler(BaseCallbackHandler):
    """Reinforce, as one co-activation event, what the tools of one run read or edited.

    A run is a top-level invocation (an agent, a graph, a chain) and every run nested
    in it. Each tool that finishes without error (a handled error, a tool call's
    ``ToolMessage`` of status ``"error"``, is one) contributes the ids found in its
    arguments (the keys in ``input_keys``, a str or a list of str each), or whatever
    ``extract`` returns. When the top-level run ends (or fails), the ids of all its
    successful tool calls are reinforced together in ``store``, once per run even when
    several handlers on the same store and namespace see it. Retrievals are ignored
    on purpose: documents retrieved together are similar already, and reinforcing them
    would feed vector search back into the graph (a rich-get-richer loop).

    Args:
        store: The association graph, e.g. ``retriever.store``.
        namespace: Namespace of the edges written.
        strength: Strength of each event (Δw = learning_rate × strength).
        tools: Names of the tools to listen to; None listens to every tool.
        input_keys: Tool arguments that name files or documents.
        extract: ``(tool_name, tool_input) -> ids``, replacing the lookup of
            ``input_keys``; ``tool_input`` is the arguments dict, or the input string.

    Example:
        >>> from langchain_core.runnables import RunnableLambda
        >>> from langchain_core.tools import tool
        >>> from synapse_retriever import SynapseStore
        >>> @tool
        ... def read_file(path: str) -> str:
        ...     '''Read a file.'''
        ...     return "..."
        >>> store = SynapseStore(":memory:")
        >>> agent = RunnableLambda(
        ...     lambda task, config: [
        ...         read_file.invoke({"path": p}, config) for p in ["auth/jwt.py", "keys.py"]
        ...     ]
        ... )
        >>> _ = agent.invoke("fix the token check", {"callbacks": [SynapseCallbackHandler(store)]})
        >>> store.weight("auth/jwt.py", "keys.py") > 0
        True
    """

    def __init__(
        self,
        store: SynapseStore,
        *,
        namespace: str = "personal",
        strength: float = 1.0,
        tools: Collection[str] | None = None,
        input_keys: Collection[str] = DEFAULT_INPUT_KEYS,
        extract: Callable[[str, Any], Iterable[str]] | None = None,
    ) -> None:
        if not isinstance(store, SynapseStore):
            raise InvalidTypeError(
                f"store must be a SynapseStore, got {type(store).__name__} {shown(store)}"
            )
        if extract is not None and not callable(extract):
            raise InvalidTypeError(
                f"extract must be a callable (tool, input) -> ids, got {type(extract).__name__} "
                f"{shown(extract)}"
            )
        self.store = store
        # checked here: at a run's end LangChain logs a callback's error and goes on, and the
        # handler learned nothing, saying so in a log line only
        self.namespace = validate_namespace(namespace)
        self.strength = finite_real(strength, "strength", "a number")
        self.tools = None if tools is None else frozenset(_names("tools", tools))
        self.input_keys = tuple(_names("input_keys", input_keys))
        self.extract = extract or self._ids_in_arguments
        self._runs: RunCollector[str] = RunCollector()
        self._pending: dict[UUID, list[str]] = {}  # tool runs in flight -> ids in their input

    def _ids_in_arguments(self, tool: str, tool_input: Any) -> list[str]:
        if not isinstance(tool_input, Mapping):
            return []
        ids: list[str] = []
        for key in self.input_keys:
            value = tool_input.get(key)
            values = [value] if isinstance(value, str) else value
            if isinstance(values, (list, tuple)):
                ids.extend(item for item in values if isinstance(item, str) and item)
        return ids

    def _end(self, run_id: UUID) -> None:
        used = self._runs.end(run_id)
        ids = [node for node in used or () if is_node_id(node)]
        if used and len(ids) < len(used):  # one bad id lost the whole run's event
            logger.warning(
                "synapse: left out ids no store can hold: %.200r",
                [node for node in used if not is_node_id(node)],
            )
        used = ids
        if used:  # an event id: handlers sharing a store count a run once
            event = namespaced_id("langchain:", self.namespace, f":{run_id}")
            self.store.reinforce(used, self.strength, self.namespace, event_id=event)

    # -- callbacks -----------------------------------------------------------------------

    def on_chain_start(
        self,
        serialized: Any,
        inputs: Any,
        *,
        run_id: UUID,
        parent_run_id: UUID | None = None,
        **kwargs: Any,
    ) -> None:
        """A run (agent, graph, chain) starts: nested in ``parent_run_id``'s run, if any."""
        self._runs.start(run_id, parent_run_id)

    def on_chain_end(self, outputs: Any, *, run_id: UUID, **kwargs: Any) -> None:
        """A run ends: a top-level run reinforces what its tools read or edited, as one event."""
        self._end(run_id)

    def on_chain_error(self, error: BaseException, *, run_id: UUID, **kwargs: Any) -> None:
        """A run fails: it ends like :meth:`on_chain_end` (its finished tools' use counts)."""
        self._end(run_id)  # what finished tools read or edited was used all the same

    def on_tool_start(
        self,
        serialized: Any,
        input_str: str,
        *,
        run_id: UUID,
        parent_run_id: UUID | None = None,
        inputs: dict[str, Any] | None = None,
        **kwargs: Any,
    ) -> None:
        """A tool starts: the ids in its arguments are kept until it ends without error."""
        self._runs.start(run_id, parent_run_id)
        name = str((serialized or {}).get("name") or kwargs.get("name") or "")
        if self.tools is None or name in self.tools:
            found = self.extract(name, input_str if inputs is None else inputs)
            if isinstance(found, str | bytes):  # would be read as its characters
                raise InvalidTypeError(
                    f"extract must return the ids a tool used (a list of str), got a bare "
                    f"{type(found).__name__} {shown(found)}"
                )
            self._pending[run_id] = list(found)

    def on_tool_end(self, output: Any, *, run_id: UUID, **kwargs: Any) -> None:
        """A tool succeeded: its ids join its top-level run's event. A tool whose error was
        handled (``handle_tool_error``, ``handle_validation_error``) ends here too, with a
        ``ToolMessage`` of status ``"error"``: it failed, and its ids are dropped."""
        ids = self._pending.pop(run_id, ())
        if getattr(output, "status", None) != "error":
            self._runs.add(run_id, ids)
        self._end(run_id)

    def on_tool_error(self, error: BaseException, *, run_id: UUID, **kwargs: Any) -> None:
        """A tool failed: its ids are dropped (a failed read or edit used nothing)."""
        self._pending.pop(run_id, None)  # a failed read or edit used nothing
        self._end(run_id)


def _names(what: str, names: Collection[str]) -> list[str]:
    """``names``, a collection of str, read once (a generator too: checking it first would
    use it up, and leave no name); a bare str (read as its characters) is refused."""
    if isinstance(names, str | bytes):
        raise InvalidTypeError(f"{what} must be a collection of str, got {shown(names)}")
    listed = list(names)
    if not all(isinstance(n, str) for n in listed):
        raise InvalidTypeError(f"{what} must be a collection of str, got {shown(listed)}")
    return listed
