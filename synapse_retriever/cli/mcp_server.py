"""``synapse-retriever mcp STORE``: the store as a Model Context Protocol server, for agents.

Four tools over stdio (the official ``mcp`` SDK, the ``[mcp]`` extra), on one store
opened for the server's life:

- ``recall``: vector hits in (at most :data:`MAX_RECALL_HITS`), hits out, each injected
  or boosted one saying why;
- ``record_usage``: ids the agent used together, as one co-activation event;
- ``neighbours``: a node's strongest live associations (``synapse-retriever edges --json``);
- ``stats``: nodes, edges per namespace, histograms (``synapse-retriever stats --json``).

Arguments are checked twice: the SDK refuses a JSON value of the wrong type against
each tool's input schema; every value the schema admits reaches the same validation
as the Python API and fails with its error, named by type (``InvalidValueError: ...``).
A request the server cannot read, or ``recall`` with more than :data:`MAX_RECALL_HITS`
hits, gets a JSON-RPC error (-32700, -32600 or -32602; see :mod:`.mcp_stdio`), never
silence.

Examples
--------
>>> why(Hit("config/keys.py", 0.6, "injected", 0.54, ("auth/jwt.py", "config/keys.py"), "z"))
'injected in place of z: used with auth/jwt.py (energy 0.540)'
>>> why(Hit("a", 0.9)) is None
True
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import TYPE_CHECKING, Annotated, Any, TypeVar

try:
    import anyio
    from mcp.server import MCPServer
    from mcp.server.mcpserver.exceptions import ToolError
    from mcp.shared.exceptions import MCPError
    from mcp.types import INVALID_PARAMS, CallToolResult, TextContent, ToolAnnotations
    from pydantic import BaseModel, ConfigDict, Field, StrictFloat, StrictInt, StrictStr
except ImportError:  # pragma: no cover - the extra is in the dev requirements
    raise ImportError(
        "synapse-retriever mcp needs the mcp extra: pip install 'synapse-retriever[mcp]'"
    ) from None

from synapse_retriever import __version__
from synapse_retriever.cli._common import in_calendar
from synapse_retriever.cli.mcp_stdio import serve_stdio
from synapse_retriever.cli.store_commands import neighbour_report, stats_report
from synapse_retriever.clock import to_seconds
from synapse_retriever.errors import InvalidValueError, SynapseError
from synapse_retriever.persistence.postgres import is_postgres_url, split_url
from synapse_retriever.recall.hits import Hit

if TYPE_CHECKING:
    from synapse_retriever.store import SynapseStore

__all__ = ["MAX_RECALL_HITS", "ScoredId", "build_server", "serve", "why"]

SERVER_NAME = "synapse-retriever"

INSTRUCTIONS = (
    "An associative memory of which documents or files are used together. Call "
    "record_usage with the ids you actually used together for a task (not everything you "
    "retrieved); pass your vector or search hits through recall, best first, to have "
    "associated ids take the weakest slots; the list never grows."
)

MAX_RECALL_HITS = 1_000
"""``recall`` takes at most this many hits (a top-k list; the store's recall reads each
once). A longer list is refused with JSON-RPC error -32602 naming its length, before any
work: 100,000 hits took 10.6 s and held up every other call."""

_Result = TypeVar("_Result")


class ScoredId(BaseModel):
    """One hit of a recall: an id and its retrieval score (higher is better)."""

    model_config = ConfigDict(strict=True, extra="forbid")

    id: str = Field(description="document or file id, e.g. a path")
    score: float = Field(description="similarity score; the hits must be sorted best first")


Namespace = Annotated[
    StrictStr,
    Field(description="'personal', 'shared', 'ephemeral' or 'branch:<name>': weighs most"),
]
At = Annotated[StrictFloat | None, Field(description="the time, POSIX seconds (default: now)")]


def _refusing_unknown_arguments(known: dict[str, set[str]]) -> Any:
    """Middleware: a call naming an argument its tool (in ``known``: tool -> arguments)
    does not have fails, so that a misspelt ``namespace`` never writes to the default."""

    async def refuse(ctx: Any, call_next: Any) -> Any:
        params = ctx.params if ctx.method == "tools/call" and isinstance(ctx.params, dict) else {}
        arguments, tool = params.get("arguments") or {}, params.get("name")
        takes = known.get(tool) if isinstance(tool, str) else None
        if takes is None or not isinstance(arguments, dict) or set(arguments) <= takes:
            return await call_next(ctx)
        unknown = sorted(set(arguments) - takes)
        text = (
            f"Error executing tool {tool}: InvalidValueError: unknown "
            f"argument{'s' if len(unknown) > 1 else ''} {', '.join(map(repr, unknown))}; "
            f"{tool} takes {', '.join(sorted(takes))}"
        )
        return CallToolResult(content=[TextContent(type="text", text=text)], is_error=True)

    return refuse


async def _refusing_long_hit_lists(ctx: Any, call_next: Any) -> Any:
    """Middleware: ``recall`` with more than :data:`MAX_RECALL_HITS` hits is refused
    (-32602, naming the count) before its hits are read."""
    params = ctx.params if ctx.method == "tools/call" and isinstance(ctx.params, dict) else {}
    arguments = params.get("arguments")
    hits = arguments.get("hits") if isinstance(arguments, dict) else None
    if params.get("name") == "recall" and isinstance(hits, list) and len(hits) > MAX_RECALL_HITS:
        raise MCPError(
            INVALID_PARAMS,
            f"Invalid params: recall takes at most {MAX_RECALL_HITS:,} hits, got "
            f"{len(hits):,}; pass your best {MAX_RECALL_HITS:,}",
        )
    return await call_next(ctx)


def why(hit: Hit) -> str | None:
    """A sentence saying why a hit is where it is (None for a plain vector hit)."""
    if hit.origin == "vector":
        return None
    seed, *via = hit.path[:-1] or ("?",)
    route = f"used with {seed}" + (f" via {via[0]}" if via else "")
    place = f" in place of {hit.displaced}" if hit.displaced is not None else ""
    return f"{hit.origin}{place}: {route} (energy {hit.energy:.3f})"


def _hit_json(hit: Hit) -> dict[str, Any]:
    return {
        "id": hit.id,
        "score": hit.score,
        "origin": hit.origin,
        "energy": hit.energy,
        "path": list(hit.path),
        "displaced": hit.displaced,
        "why": why(hit),
    }


def _checked(call: Callable[[], _Result]) -> _Result:
    """Run an API call; its typed error becomes the tool's error, named by its type."""
    try:
        return call()
    except SynapseError as exc:
        raise ToolError(f"{type(exc).__name__}: {exc}") from exc


def _report_time(at: float | None) -> float:
    """``at`` for a report that prints it as a date: within the years 1 to 9999."""
    seconds = to_seconds(at)
    if not in_calendar(seconds):
        raise InvalidValueError(f"at must fall in the years 1 to 9999, got {at!r}")
    return seconds


def build_server(store: SynapseStore, *, store_name: str = "store") -> MCPServer:
    """An MCP server whose tools read and write ``store`` (which the caller closes);
    ``stats`` reports it as ``store_name``.

    Examples
    --------
    >>> import asyncio
    >>> from synapse_retriever import SynapseStore
    >>> server = build_server(SynapseStore(":memory:"))
    >>> sorted(tool.name for tool in asyncio.run(server.list_tools()))
    ['neighbours', 'recall', 'record_usage', 'stats']

    ``server.run("stdio")`` then serves it until the client hangs up (what :func:`serve`
    does).
    """
    known: dict[str, set[str]] = {}  # each tool's arguments, from its signature below
    server: MCPServer = MCPServer(
        SERVER_NAME,
        version=__version__,
        instructions=INSTRUCTIONS,
        log_level="WARNING",
        middleware=[_refusing_long_hit_lists, _refusing_unknown_arguments(known)],
    )
    reading = ToolAnnotations(read_only_hint=True, open_world_hint=False)

    @server.tool(annotations=reading)
    def recall(
        hits: Annotated[
            list[ScoredId],
            Field(
                description=f"your hits, best first: at most {MAX_RECALL_HITS:,}",
                max_length=MAX_RECALL_HITS,
            ),
        ],
        namespace: Namespace = "personal",
        at: At = None,
    ) -> dict[str, Any]:
        """Fold learned associations into your hits, best first: at most two absent ids
        that were used with the top hits take the weakest slots; the list never grows.

        Each hit comes back with its origin (vector, boosted or injected) and, unless it
        is a plain vector hit, why it is there: the hit it was used with and the one it
        replaced. At most 1,000 hits (MAX_RECALL_HITS); more are refused.
        """
        pairs = [(hit.id, hit.score) for hit in hits]
        found = _checked(lambda: store.recall(pairs, at=at, active_namespace=namespace))
        return {"hits": [_hit_json(hit) for hit in found]}

    @server.tool(annotations=ToolAnnotations(read_only_hint=False, open_world_hint=False))
    def record_usage(
        ids: Annotated[list[StrictStr], Field(description="ids used together for one task")],
        strength: Annotated[
            StrictFloat, Field(description="how strongly (1.0; 0 records nothing)")
        ] = 1.0,
        namespace: Namespace = "personal",
        event_id: Annotated[
            StrictStr | None, Field(description="an id for the event: a retry counts once")
        ] = None,
        at: At = None,
    ) -> dict[str, Any]:
        """Record that these ids were used together for one task: every pair of them is
        reinforced (one event, one transaction). Record only what was used, not all that
        was retrieved. At most ``max_coactivation`` distinct ids count (the first ones);
        the others come back as ``dropped``.
        """
        edges = _checked(lambda: store.reinforce(ids, strength, namespace, at, event_id=event_id))
        distinct = list(dict.fromkeys(ids))
        return {"edges": edges, "dropped": distinct[store.config.max_coactivation :]}

    @server.tool(annotations=reading)
    def neighbours(
        id: Annotated[StrictStr, Field(description="a document or file id")],
        namespace: Annotated[
            StrictStr | None, Field(description="one namespace (default: all)")
        ] = None,
        limit: Annotated[StrictInt, Field(description="how many, 0 for all (20)")] = 20,
        at: At = None,
    ) -> dict[str, Any]:
        """An id's live associations, strongest first, with their decayed weights, counts
        and learned half-lives: the first ``limit`` of ``total``.
        """

        def read() -> dict[str, Any]:
            if limit < 0:
                raise InvalidValueError(f"limit must be 0 (all) or more, got {limit!r}")
            return neighbour_report(store, id, _report_time(at), namespace, limit)

        return _checked(read)

    @server.tool(annotations=reading)
    def stats(
        namespace: Annotated[
            StrictStr | None, Field(description="one namespace (default: all)")
        ] = None,
        at: At = None,
    ) -> dict[str, Any]:
        """Nodes and live edges, per namespace, with weight and half-life histograms."""
        return _checked(lambda: stats_report(store, _report_time(at), namespace, name=store_name))

    for tool in (recall, record_usage, neighbours, stats):
        known[tool.__name__] = set(inspect.signature(tool).parameters)
    return server


def serve(store: SynapseStore, path: str) -> None:
    """Serve ``store`` (opened from ``path``) over stdio until the client hangs up."""
    name = split_url(path)[1] if is_postgres_url(path) else path  # no password for the agent
    anyio.run(serve_stdio, build_server(store, store_name=name))
