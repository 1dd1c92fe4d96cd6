"""``synapse-retriever mcp STORE``: the store as a Model Context Protocol server, for agents.

Five tools over stdio (the official ``mcp`` SDK, the ``[mcp]`` extra), on one store
opened for the server's life:

- ``recall``: vector hits in (at most :data:`MAX_RECALL_HITS`), hits out, each injected
  or boosted one saying why;
- ``related``: ids in (the files an agent has open, at most :data:`MAX_RELATED_IDS`), no
  scores needed; what the store associates with them out, strongest first, each with
  its energy, the path it comes through and its edges to the given ids;
- ``record_usage``: ids the agent used together (at most :data:`MAX_USAGE_IDS`), as one
  co-activation event;
- ``neighbours``: a node's strongest live associations (``synapse-retriever edges --json``);
- ``stats``: nodes, edges per namespace, histograms (``synapse-retriever stats --json``).

Arguments are checked twice: the SDK refuses a JSON value of the wrong type against
each tool's input schema; every value the schema admits reaches the same validation
as the Python API and fails with its error, named by type (``InvalidValueError: ...``).
A request the server cannot read, ``recall`` with more than :data:`MAX_RECALL_HITS`
hits, ``related`` with more than :data:`MAX_RELATED_IDS` ids or ``record_usage`` with more
than :data:`MAX_USAGE_IDS` gets a JSON-RPC error (-32700, -32600 or -32602; see
:mod:`.mcp_stdio`), never silence.

Examples
--------
>>> why(Hit("config/keys.py", 0.6, "injected", 0.54, ("auth/jwt.py", "config/keys.py"), "z"))
'injected in place of z: used with auth/jwt.py (energy 0.540)'
>>> why(Hit("a", 0.9)) is None
True
>>> route(("auth/jwt.py", "config/keys.py", "config/vault.py"))
'used with auth/jwt.py via config/keys.py'
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import TYPE_CHECKING, Annotated, Any, TypeVar

from synapse_retriever.errors import MissingExtraError, shown

try:
    import anyio
    from mcp.server import MCPServer
    from mcp.server.mcpserver.exceptions import ToolError
    from mcp.shared.exceptions import MCPError
    from mcp.types import INVALID_PARAMS, CallToolResult, TextContent, ToolAnnotations
    from pydantic import BaseModel, ConfigDict, Field, StrictFloat, StrictInt, StrictStr
except ImportError:  # pragma: no cover - the extra is in the dev requirements
    raise MissingExtraError(
        "synapse-retriever mcp needs the mcp extra: pip install 'synapse-retriever[mcp]'"
    ) from None

from synapse_retriever import __version__
from synapse_retriever.capture.coactivation import is_node_id
from synapse_retriever.cli._common import in_calendar, store_label
from synapse_retriever.cli.mcp_stdio import serve_stdio
from synapse_retriever.cli.reports import neighbour_report, stats_report
from synapse_retriever.clock import iso, to_seconds
from synapse_retriever.errors import InvalidValueError, SynapseError
from synapse_retriever.recall.hits import Hit, read_ids

if TYPE_CHECKING:
    from synapse_retriever.store import SynapseStore

__all__ = [
    "MAX_ANSWER",
    "MAX_RECALL_HITS",
    "MAX_RELATED_IDS",
    "MAX_USAGE_IDS",
    "ScoredId",
    "build_server",
    "related_report",
    "route",
    "serve",
    "why",
]

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

MAX_ANSWER = 1_000
"""``related`` and ``neighbours`` answer with this many nodes at most (``limit`` 0: as many;
``total`` says how many there are): the SDK writes an answer out on the event loop, and a
hub's whole neighbourhood (8 MB for 60,000 nodes) held up every other call 0.4 s."""

MAX_RELATED_IDS = 100
"""``related`` takes at most this many ids (the files an agent has open); more are
refused with JSON-RPC error -32602 naming their count, before any work."""

MAX_USAGE_IDS = 100
"""``record_usage`` takes at most this many ids; more are refused with JSON-RPC error
-32602 naming their count, before any work. The store reinforces the first
``max_coactivation`` distinct ones (32 by default) and the answer names the others in
``dropped``: uncapped, 300,000 ids took 1.8 s and came back as an 8.4 MB answer; capped,
``dropped`` holds at most 98 ids (68 by default)."""

_CAPS = {
    "recall": ("hits", MAX_RECALL_HITS, "your best"),
    "related": ("ids", MAX_RELATED_IDS, "the ones that matter most,"),
    "record_usage": ("ids", MAX_USAGE_IDS, "the ones that matter most,"),
}
"""Each capped tool's list argument, its cap, and what to pass instead of a longer list."""

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


async def _refusing_long_lists(ctx: Any, call_next: Any) -> Any:
    """Middleware: ``recall`` with more than :data:`MAX_RECALL_HITS` hits, ``related`` with
    more than :data:`MAX_RELATED_IDS` ids, or ``record_usage`` with more than
    :data:`MAX_USAGE_IDS` ids, is refused (-32602, naming the count) before its list is
    read."""
    params = ctx.params if ctx.method == "tools/call" and isinstance(ctx.params, dict) else {}
    tool, arguments = params.get("name"), params.get("arguments")
    argument, cap, instead = _CAPS.get(tool, ("", 0, "")) if isinstance(tool, str) else ("", 0, "")
    items = arguments.get(argument) if isinstance(arguments, dict) and argument else None
    if isinstance(items, list) and len(items) > cap:
        raise MCPError(
            INVALID_PARAMS,
            f"Invalid params: {tool} takes at most {cap:,} {argument}, got "
            f"{len(items):,}; pass {instead} {cap:,}",
        )
    return await call_next(ctx)


def route(path: tuple[str, ...]) -> str:
    """How a reached node is reached: from the seed of ``path`` (and the node between)."""
    seed, *via = path[:-1] or ("?",)
    return f"used with {seed}" + (f" via {via[0]}" if via else "")


def why(hit: Hit) -> str | None:
    """A sentence saying why a hit is where it is (None for a plain vector hit)."""
    if hit.origin == "vector":
        return None
    place = f" in place of {hit.displaced}" if hit.displaced is not None else ""
    return f"{hit.origin}{place}: {route(hit.path)} (energy {hit.energy:.3f})"


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
        raise InvalidValueError(f"at must fall in the years 1 to 9999, got {shown(at)}")
    return seconds


def _answered(limit: int) -> int:
    """How many nodes a ``limit`` asks for: 0 is all, up to :data:`MAX_ANSWER`.

    Examples
    --------
    >>> _answered(0), _answered(20)
    (1000, 20)
    """
    if limit < 0 or limit > MAX_ANSWER:
        raise InvalidValueError(
            f"limit must be 0 (all, up to {MAX_ANSWER:,}) to {MAX_ANSWER:,}, got {shown(limit)}"
        )
    return limit or MAX_ANSWER


def related_report(
    store: SynapseStore, ids: list[str], at: float, namespace: str, limit: int
) -> dict[str, Any]:
    """What the MCP ``related`` tool returns: the nodes the store associates with ``ids``
    at ``at``, strongest first, the first ``limit`` (0: all) of ``total``.

    Each comes with its ``energy``, the spreading activation from ``ids`` (energy 1.0 per
    id, two hops over the live graph merged for ``namespace``, hub factors applied:
    :meth:`SynapseStore.spread <synapse_retriever.store.SynapseStore.spread>`); ``path``,
    the route of its largest share (``[given id, node]`` or ``[given id, via, node]``)
    and ``why`` in words; and ``edges``, its live edges with the given ids
    (:meth:`SynapseStore.neighbours <synapse_retriever.store.SynapseStore.neighbours>`)
    in the namespaces the merge reads, each with its decayed ``weight``, the merge
    ``factor`` of its namespace, its ``count`` and learned ``half_life_days``. An id the
    store does not know adds nothing.

    Examples
    --------
    >>> from synapse_retriever import SynapseStore
    >>> store = SynapseStore(":memory:")
    >>> _ = store.reinforce(["auth/jwt.py", "config/keys.py"], strength=2.0, at=0)
    >>> _ = store.reinforce(["config/keys.py", "config/vault.py"], at=0)
    >>> report = related_report(store, ["auth/jwt.py", "unknown.py"], 0.0, "personal", 20)
    >>> [(r["id"], round(r["energy"], 4), r["why"]) for r in report["related"]]
    [('config/keys.py', 0.36, 'used with auth/jwt.py (energy 0.360)'), \
('config/vault.py', 0.0648, 'used with auth/jwt.py via config/keys.py (energy 0.065)')]
    >>> [(e["with"], e["weight"], e["factor"]) for e in report["related"][0]["edges"]]
    [('auth/jwt.py', 0.6, 1.0)]
    >>> report["related"][1]["edges"]  # two hops away: no edge with a given id
    []
    """
    factors = store.config.merge_factors(namespace)
    given = read_ids(ids, "ids")  # an id no store could hold adds nothing, as one unknown
    activation = store.spread(given, at, namespace)
    found = sorted(activation.energy.items(), key=lambda item: (-item[1], item[0]))
    listed = found[:limit] if limit else found
    wanted = {node for node, _ in listed}
    edges: dict[str, list[dict[str, Any]]] = {node: [] for node in wanted}
    for seed in filter(is_node_id, given):
        for other, edge, weight in store.neighbours(seed, at=at):
            if other in wanted and edge.namespace in factors:
                edges[other].append(
                    {
                        "with": seed,
                        "namespace": edge.namespace,
                        "weight": weight,
                        "factor": factors[edge.namespace],
                        "count": edge.activation_count,
                        "half_life_days": edge.half_life_days,
                        "last_reinforced_at": iso(edge.last_reinforced_at),
                    }
                )
    related = [
        {
            "id": node,
            "energy": energy,
            "path": list(activation.paths[node]),
            "why": f"{route(activation.paths[node])} (energy {energy:.3f})",
            "edges": edges[node],
        }
        for node, energy in listed
    ]
    return {"ids": given, "namespace": namespace, "at": iso(at), "related": related,
            "total": len(found)}  # fmt: skip


def build_server(store: SynapseStore, *, store_name: str = "store") -> MCPServer:
    """An MCP server whose tools read and write ``store`` (which the caller closes);
    ``stats`` reports it as ``store_name``.

    Examples
    --------
    >>> import asyncio
    >>> from synapse_retriever import SynapseStore
    >>> server = build_server(SynapseStore(":memory:"))
    >>> sorted(tool.name for tool in asyncio.run(server.list_tools()))
    ['neighbours', 'recall', 'record_usage', 'related', 'stats']

    ``server.run("stdio")`` then serves it until the client hangs up (what :func:`serve`
    does).
    """
    known: dict[str, set[str]] = {}  # each tool's arguments, from its signature below
    server: MCPServer = MCPServer(
        SERVER_NAME,
        version=__version__,
        instructions=INSTRUCTIONS,
        log_level="WARNING",
        middleware=[_refusing_long_lists, _refusing_unknown_arguments(known)],
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

    @server.tool(annotations=reading)
    def related(
        ids: Annotated[
            list[StrictStr],
            Field(
                description="ids you have open or work on (e.g. file paths): at most "
                f"{MAX_RELATED_IDS:,}",
                max_length=MAX_RELATED_IDS,
            ),
        ],
        namespace: Namespace = "personal",
        limit: Annotated[
            StrictInt, Field(description=f"how many, 0 for all up to {MAX_ANSWER:,} (20)")
        ] = 20,
        at: At = None,
    ) -> dict[str, Any]:
        """What the store associates with these ids, strongest first; no scores needed.

        Each associated id comes with its energy (spreading activation from your ids over
        the learned graph, two hops), the path it comes through and why in words, and
        its edges with your ids (decayed weight, merge factor of the namespace, count,
        half-life). Ids the store does not know add nothing: unknown ids give an empty
        answer. At most 100 ids (MAX_RELATED_IDS); more are refused.
        """

        def read() -> dict[str, Any]:
            return related_report(store, ids, _report_time(at), namespace, _answered(limit))

        return _checked(read)

    @server.tool(annotations=ToolAnnotations(read_only_hint=False, open_world_hint=False))
    def record_usage(
        ids: Annotated[
            list[StrictStr],
            Field(
                description=f"ids used together for one task: at most {MAX_USAGE_IDS:,}",
                max_length=MAX_USAGE_IDS,
            ),
        ],
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
        the others come back as ``dropped``. At most 100 ids (MAX_USAGE_IDS); more are
        refused.
        """
        edges = _checked(lambda: store.reinforce(ids, strength, namespace, at, event_id=event_id))
        distinct = list(dict.fromkeys(ids))
        return {"edges": edges, "dropped": distinct[store.config.learning.max_coactivation :]}

    @server.tool(annotations=reading)
    def neighbours(
        id: Annotated[StrictStr, Field(description="a document or file id")],
        namespace: Annotated[
            StrictStr | None, Field(description="one namespace (default: all)")
        ] = None,
        limit: Annotated[
            StrictInt, Field(description=f"how many, 0 for all up to {MAX_ANSWER:,} (20)")
        ] = 20,
        at: At = None,
    ) -> dict[str, Any]:
        """An id's live associations, strongest first, with their decayed weights, counts
        and learned half-lives: the first ``limit`` of ``total``.
        """

        def read() -> dict[str, Any]:
            return neighbour_report(store, id, _report_time(at), namespace, _answered(limit))

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

    for tool in (recall, related, record_usage, neighbours, stats):
        known[tool.__name__] = set(inspect.signature(tool).parameters)
    return server


def serve(store: SynapseStore, path: str) -> None:
    """Serve ``store`` (opened from ``path``) over stdio until the client hangs up."""
    anyio.run(serve_stdio, build_server(store, store_name=store_label(path)))  # no password for it
