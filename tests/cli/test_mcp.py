"""synapse-retriever mcp STORE: the store as an MCP server, driven end to end by the official SDK's
client over stdio, in a real subprocess, on both backends."""

from __future__ import annotations

import asyncio
import json
import re
import select
import subprocess
import sys
import time
from collections.abc import Awaitable, Callable, Iterator
from contextlib import contextmanager
from functools import partial
from typing import Any

import pytest
from mcp import Client
from mcp.client.stdio import StdioServerParameters
from mcp.shared.exceptions import MCPError
from mcp.types import INVALID_PARAMS, INVALID_REQUEST, PARSE_ERROR

from synapse_retriever import CoActivation, InvalidTypeError, InvalidValueError, SynapseStore
from synapse_retriever.cli.mcp_server import (
    MAX_ANSWER,
    MAX_RECALL_HITS,
    MAX_RELATED_IDS,
    MAX_USAGE_IDS,
    related_report,
    why,
)
from synapse_retriever.cli.reports import neighbour_report, stats_report
from synapse_retriever.persistence.postgres import PostgresStorage, is_postgres_url
from synapse_retriever.recall.hits import Hit

DAY = 86_400.0
T0 = 1_700_000_000.0  # November 2023: explicit times, so every answer is reproducible
HITS = [("auth/jwt.py", 0.9), ("docs/intro.md", 0.7), ("README.md", 0.5), ("misc.txt", 0.2)]


def opened(path: str) -> SynapseStore:
    if is_postgres_url(path):
        return SynapseStore(storage=PostgresStorage(path))
    return SynapseStore(path)


def with_server(path: str, session: Callable[[Client], Awaitable[None]]) -> None:
    """Run ``session`` against ``synapse-retriever mcp path`` started as a subprocess."""
    params = StdioServerParameters(
        command=sys.executable, args=["-m", "synapse_retriever.cli", "mcp", path]
    )

    async def run() -> None:
        async with Client(params, read_timeout_seconds=60) as client:
            await session(client)

    asyncio.run(run())


async def call(client: Client, tool: str, arguments: dict[str, Any]) -> dict[str, Any]:
    result = await client.call_tool(tool, arguments)
    assert not result.is_error, result.content
    found: dict[str, Any] | None = result.structured_content
    assert found is not None
    return found


async def error(client: Client, tool: str, arguments: dict[str, Any]) -> str:
    result = await client.call_tool(tool, arguments)
    assert result.is_error, result.structured_content
    text: str = result.content[0].text  # type: ignore[union-attr]
    return text


def hits_json(hits: list[Hit]) -> list[dict[str, Any]]:
    return [
        {
            "id": h.id,
            "score": h.score,
            "origin": h.origin,
            "energy": h.energy,
            "path": list(h.path),
            "displaced": h.displaced,
            "why": why(h),
        }
        for h in hits
    ]


def test_an_agent_records_recalls_and_reads_what_the_api_would(store_path: str) -> None:
    hits_in = [{"id": node, "score": score} for node, score in HITS]
    answers: dict[str, Any] = {}

    async def session(client: Client) -> None:
        tools = {tool.name: tool for tool in (await client.list_tools()).tools}
        assert set(tools) == {"recall", "related", "record_usage", "neighbours", "stats"}
        assert tools["recall"].input_schema["required"] == ["hits"]
        assert tools["record_usage"].input_schema["required"] == ["ids"]
        assert tools["recall"].annotations is not None
        assert tools["recall"].annotations.read_only_hint is True
        # the cold graph gives the hits back as they came
        cold = await call(client, "recall", {"hits": hits_in, "at": T0})
        answers["cold"] = cold["hits"]
        # an agent used jwt.py with keys.py three times, and once with login.py, in the team
        for day in range(3):
            done = await call(
                client,
                "record_usage",
                {"ids": ["auth/jwt.py", "config/keys.py"], "at": T0 + day * DAY},
            )
            assert done == {"edges": 1, "dropped": []}
        three = {"ids": ["auth/jwt.py", "auth/login.py", "config/keys.py"], "at": T0 + 3 * DAY}
        args = {**three, "namespace": "shared", "strength": 0.5, "event_id": "task-7"}
        assert await call(client, "record_usage", args) == {"edges": 3, "dropped": []}
        again = await call(client, "record_usage", args)  # a retry counts once
        assert again == {"edges": 0, "dropped": []}
        with opened(store_path) as other:  # another writer, e.g. synapse-retriever watch
            other.reinforce(["auth/jwt.py", "tests/test_jwt.py"], at=T0 + 3 * DAY)
        at = T0 + 4 * DAY
        # the server's store catches up within its refresh interval (1 s): wait for it
        deadline = time.monotonic() + 30
        while (await call(client, "stats", {"at": at}))["edges"] < 5:
            assert time.monotonic() < deadline, "the server never saw the other writer"
            await asyncio.sleep(0.05)
        answers["warm"] = (await call(client, "recall", {"hits": hits_in, "at": at}))["hits"]
        shared = {"hits": hits_in, "at": at, "namespace": "shared"}
        answers["shared"] = (await call(client, "recall", shared))["hits"]
        answers["neighbours"] = await call(client, "neighbours", {"id": "auth/jwt.py", "at": at})
        answers["one"] = await call(
            client, "neighbours", {"id": "auth/jwt.py", "at": at, "limit": 1, "namespace": "shared"}
        )
        answers["stats"] = await call(client, "stats", {"at": at})

    with_server(store_path, session)
    at = T0 + 4 * DAY
    with opened(store_path) as store:  # what the server wrote, read through the API
        assert answers["cold"] == hits_json([Hit(node, score) for node, score in HITS])
        assert answers["warm"] == hits_json(store.recall(HITS, at=at))
        assert answers["shared"] == hits_json(store.recall(HITS, at=at, active_namespace="shared"))
        assert answers["neighbours"] == neighbour_report(store, "auth/jwt.py", at, None, 20)
        assert answers["one"] == neighbour_report(store, "auth/jwt.py", at, "shared", 1)
        assert answers["stats"] == stats_report(store, at, None, name=answers["stats"]["store"])
        edge = store.edge("auth/jwt.py", "config/keys.py")
        assert edge is not None and edge.activation_count == 3
    # both absent neighbours of the top hit take the two weakest slots, the stronger the better
    injected = [(hit["id"], hit["displaced"]) for hit in answers["warm"][2:]]
    assert injected == [("config/keys.py", "README.md"), ("tests/test_jwt.py", "misc.txt")]
    keys = answers["warm"][2]
    assert (
        keys["why"]
        == f"injected in place of README.md: used with auth/jwt.py (energy {keys['energy']:.3f})"
    )
    assert answers["warm"][0]["why"] is None  # a plain vector hit
    assert len(answers["warm"]) == len(HITS)  # never grows
    assert answers["one"]["total"] == 2 and len(answers["one"]["neighbours"]) == 1
    assert answers["stats"]["edges"] == 5  # the other writer's edge too: one store, kept current
    assert "tests/test_jwt.py" in [row["neighbour"] for row in answers["neighbours"]["neighbours"]]
    if is_postgres_url(store_path):  # the agent never sees a password or the full URL
        assert "postgresql://" not in answers["stats"]["store"]


def without_clock(text: str) -> str:
    """An error with the clock reading it names left out (server and test read it apart)."""
    return re.sub(r"ahead of the clock \([0-9.]+\)", "ahead of the clock", text)


def test_ids_beyond_the_cap_come_back_as_dropped(tmp_path: Any) -> None:
    ids = [f"f{i:02d}.py" for i in range(40)] + ["f00.py"]  # 40 distinct, one repeated
    done: dict[str, Any] = {}

    async def session(client: Client) -> None:
        done.update(await call(client, "record_usage", {"ids": ids, "at": T0}))

    with_server(str(tmp_path / "synapses.db"), session)
    with SynapseStore(tmp_path / "synapses.db") as store:
        cap = store.config.learning.max_coactivation
    assert done == {"edges": cap * (cap - 1) // 2, "dropped": ids[cap:40]}


def api_error(call: Callable[[], object]) -> str:
    """The API's own error for a call, as the server names it."""
    with pytest.raises((InvalidValueError, InvalidTypeError)) as caught:
        call()
    return f"{type(caught.value).__name__}: {caught.value}"


def test_every_bad_value_the_schema_admits_fails_as_in_the_api(tmp_path: Any) -> None:
    path = str(tmp_path / "synapses.db")
    unsorted = [{"id": "a", "score": 0.1}, {"id": "b", "score": 0.5}]
    far = 1e13  # milliseconds read as seconds: some 300,000 years ahead
    cases: list[tuple[str, dict[str, Any], Callable[[SynapseStore], object]]] = [
        ("recall", {"hits": unsorted}, lambda s: s.recall([("a", 0.1), ("b", 0.5)])),
        ("recall", {"hits": [{"id": "", "score": 1}]}, lambda s: s.recall([("", 1.0)])),
        (
            "recall",
            {"hits": [{"id": "a", "score": 1}], "namespace": "Bad Space"},
            lambda s: s.recall([("a", 1.0)], active_namespace="Bad Space"),
        ),
        ("record_usage", {"ids": ["a", "b\x00"]}, lambda s: s.reinforce(["a", "b\x00"])),
        (
            "record_usage",
            {"ids": ["a", "b"], "namespace": ""},
            lambda s: s.reinforce(["a", "b"], namespace=""),
        ),
        ("record_usage", {"ids": ["a", "b"], "at": far}, lambda s: s.reinforce(["a", "b"], at=far)),
        (
            "record_usage",
            {"ids": ["a", "b"], "event_id": ""},
            lambda s: s.reinforce(["a", "b"], event_id=""),
        ),
        ("neighbours", {"id": ""}, lambda s: s.neighbours("")),
        ("stats", {"namespace": "no such/ns"}, lambda s: s.graph(namespaces="no such/ns")),
    ]
    found: list[str] = []

    async def session(client: Client) -> None:
        for tool, arguments, _ in cases:
            found.append(await error(client, tool, arguments))
        found.append(await error(client, "neighbours", {"id": "a", "limit": -1}))
        far_report = await error(client, "stats", {"at": 1e300})
        assert far_report.endswith(
            "InvalidValueError: at must fall in the years 1 to 9999, got 1e+300"
        )
        # a JSON value of another type is refused by the schema, before the API: never
        # coerced (the API refuses a bool or a numeric string for a number too)
        wrongs: list[tuple[str, dict[str, Any]]] = [
            ("record_usage", {"ids": ["a", "b"], "strength": "strong"}),
            ("record_usage", {"ids": ["a", "b"], "strength": "0.5"}),
            ("record_usage", {"ids": ["a", "b"], "at": True}),
            ("record_usage", {"ids": ["a", "b"], "at": "1700000000"}),
            ("record_usage", {"ids": ["a", 1]}),
            ("recall", {"hits": "a"}),
            ("recall", {"hits": [{"id": "a", "score": True}]}),
            ("recall", {"hits": [{"id": "a", "score": 1, "rank": 1}]}),
            ("neighbours", {"id": "a", "limit": False}),
            ("neighbours", {"id": "a", "limit": 2.5}),
        ]
        for tool, wrong in wrongs:
            text = await error(client, tool, wrong)
            assert "validation error" in text, (wrong, text)
        # an argument the tool does not take is refused, not dropped: a misspelt
        # namespace would write to the default one
        misspelt = await error(client, "record_usage", {"ids": ["a", "b"], "namespce": "shared"})
        assert misspelt == (
            "Error executing tool record_usage: InvalidValueError: unknown argument "
            "'namespce'; record_usage takes at, event_id, ids, namespace, strength"
        )
        # nothing above was written: the store is as empty as it began
        empty = await call(client, "stats", {})
        assert (empty["nodes"], empty["edges"]) == (0, 0)

    with_server(path, session)
    with SynapseStore(path) as store:
        assert store.graph().number_of_edges() == 0  # nothing refused was written
        expected = [api_error(partial(run, store)) for _, _, run in cases]
    for tool, text, wanted in zip([c[0] for c in cases], found, expected, strict=False):
        assert without_clock(text) == without_clock(f"Error executing tool {tool}: {wanted}")
    limit = "InvalidValueError: limit must be 0 (all, up to 1,000) to 1,000, got -1"
    assert found[-1] == f"Error executing tool neighbours: {limit}"


def test_without_a_store_folder_the_command_fails_in_one_line(tmp_path: Any) -> None:
    from synapse_retriever.cli import main

    missing = str(tmp_path / "no" / "such" / "synapses.db")
    assert main(["mcp", missing]) == 2


def test_recall_refuses_more_hits_than_its_cap_naming_the_count(tmp_path: Any) -> None:
    many = [{"id": f"doc{i:04d}.md", "score": 1.0} for i in range(MAX_RECALL_HITS + 1)]
    answers: dict[str, Any] = {}

    async def session(client: Client) -> None:
        recall = {tool.name: tool for tool in (await client.list_tools()).tools}["recall"]
        answers["description"] = recall.description
        answers["schema"] = recall.input_schema["properties"]["hits"]
        with pytest.raises(MCPError) as refused:
            await client.call_tool("recall", {"hits": many, "at": T0})
        answers["refused"] = refused.value
        answers["cap"] = await call(client, "recall", {"hits": many[:-1], "at": T0})

    with_server(str(tmp_path / "synapses.db"), session)
    assert answers["refused"].code == INVALID_PARAMS  # -32602, a JSON-RPC error
    assert answers["refused"].message == (
        "Invalid params: recall takes at most 1,000 hits, got 1,001; pass your best 1,000"
    )
    assert len(answers["cap"]["hits"]) == MAX_RECALL_HITS  # the cap itself is served
    # the cap is stated where an agent reads it: the tool's description and its schema
    assert "At most 1,000 hits" in answers["description"]
    assert answers["schema"]["maxItems"] == MAX_RECALL_HITS


def test_record_usage_refuses_more_ids_than_its_cap_and_its_answer_stays_small(
    tmp_path: Any,
) -> None:
    # uncapped, 300,000 ids were read and 299,968 came back in dropped: an 8.4 MB answer
    path = str(tmp_path / "synapses.db")
    many = [f"src/module_{i:03d}.py" for i in range(MAX_USAGE_IDS + 1)]
    answers: dict[str, Any] = {}

    async def session(client: Client) -> None:
        tool = {tool.name: tool for tool in (await client.list_tools()).tools}["record_usage"]
        answers["description"] = tool.description
        answers["schema"] = tool.input_schema["properties"]["ids"]
        with pytest.raises(MCPError) as refused:
            await client.call_tool("record_usage", {"ids": many, "at": T0})
        answers["refused"] = refused.value
        answers["written"] = (await call(client, "stats", {}))["edges"]
        answers["cap"] = await call(client, "record_usage", {"ids": many[:-1], "at": T0})

    with_server(path, session)
    assert answers["refused"].code == INVALID_PARAMS  # -32602, a JSON-RPC error
    assert answers["refused"].message == (
        "Invalid params: record_usage takes at most 100 ids, got 101; "
        "pass the ones that matter most, 100"
    )
    assert answers["written"] == 0  # refused before any work
    with SynapseStore(path) as store:
        kept = store.config.learning.max_coactivation
    # the cap itself is served: the first 32 ids are reinforced, the other 68 dropped
    assert answers["cap"] == {"edges": kept * (kept - 1) // 2, "dropped": many[kept:-1]}
    assert len(answers["cap"]["dropped"]) == MAX_USAGE_IDS - kept
    # the cap is stated where an agent reads it: the tool's description and its schema
    assert f"At most {MAX_USAGE_IDS} ids" in answers["description"]  # the text keeps up
    assert answers["schema"]["maxItems"] == MAX_USAGE_IDS


def test_related_tells_an_agent_without_vectors_what_goes_with_its_files(store_path: str) -> None:
    with opened(store_path) as store:
        store.reinforce(["auth/jwt.py", "config/keys.py"], strength=2.0, at=T0)  # w 0.6
        store.reinforce(["auth/login.py", "config/keys.py"], at=T0)  # w 0.3
        store.reinforce(["config/keys.py", "config/vault.py"], at=T0)  # w 0.3
        store.reinforce(["auth/jwt.py", "docs/team.md"], namespace="shared", at=T0)  # w 0.3
    at = T0 + DAY
    open_files = ["auth/jwt.py", "auth/login.py"]
    answers: dict[str, Any] = {}

    async def session(client: Client) -> None:
        tools = {tool.name: tool for tool in (await client.list_tools()).tools}
        related = tools["related"]
        assert related.input_schema["required"] == ["ids"]
        assert related.input_schema["properties"]["ids"]["maxItems"] == MAX_RELATED_IDS
        assert related.annotations is not None and related.annotations.read_only_hint is True
        answers["open"] = await call(client, "related", {"ids": open_files, "at": at})
        answers["shared"] = await call(
            client, "related", {"ids": open_files, "at": at, "namespace": "shared", "limit": 1}
        )
        answers["unknown"] = await call(client, "related", {"ids": ["nobody/knows.py"], "at": at})
        answers["none"] = await call(client, "related", {"ids": [], "at": at})

    with_server(store_path, session)
    with opened(store_path) as store:
        assert answers["open"] == related_report(store, open_files, at, "personal", 20)
        assert answers["shared"] == related_report(store, open_files, at, "shared", 1)
    related = {row["id"]: row for row in answers["open"]["related"]}
    # a day into a 30-day half-life: each weight times 2^(-1/30)
    decay = 2 ** (-1 / 30)
    keys = related["config/keys.py"]
    # keys.py is reached from both open files: 0.6 × 0.6 + 0.3 × 0.6, the first the larger
    assert keys["energy"] == pytest.approx((0.6 + 0.3) * decay * 0.6)
    assert keys["path"] == ["auth/jwt.py", "config/keys.py"]
    assert keys["why"] == f"used with auth/jwt.py (energy {keys['energy']:.3f})"
    assert [(e["with"], e["namespace"], e["count"], e["factor"]) for e in keys["edges"]] == [
        ("auth/jwt.py", "personal", 1, 1.0),
        ("auth/login.py", "personal", 1, 1.0),
    ]
    assert [e["weight"] for e in keys["edges"]] == pytest.approx([0.6 * decay, 0.3 * decay])
    # vault.py is two hops away, through keys.py: keys.py's energy × 0.3 × 0.6
    vault = related["config/vault.py"]
    assert vault["energy"] == pytest.approx(keys["energy"] * 0.3 * decay * 0.6)
    assert vault["path"] == ["auth/jwt.py", "config/keys.py", "config/vault.py"]
    assert vault["why"].startswith("used with auth/jwt.py via config/keys.py (energy")
    assert vault["edges"] == []
    team = related["docs/team.md"]  # a shared edge: it counts at 0.5 for personal
    shared_decay = 2 ** (-1 / 60)  # shared edges start with a 60-day half-life
    assert team["energy"] == pytest.approx(0.3 * shared_decay * 0.5 * 0.6)
    assert [(e["namespace"], e["factor"]) for e in team["edges"]] == [("shared", 0.5)]
    assert [row["id"] for row in answers["open"]["related"]] == [
        "config/keys.py", "config/vault.py", "docs/team.md"
    ]  # fmt: skip
    assert answers["open"]["total"] == 3
    # in the shared namespace the team's doc weighs 1.0 and personal edges 0.8
    assert answers["shared"]["total"] == 3 and len(answers["shared"]["related"]) == 1
    assert answers["shared"]["related"][0]["id"] == "config/keys.py"
    assert answers["shared"]["related"][0]["edges"][0]["factor"] == 0.8
    # an id the store does not know: an empty answer, not an error
    assert answers["unknown"]["related"] == [] and answers["unknown"]["total"] == 0
    assert answers["none"]["related"] == [] and answers["none"]["ids"] == []


def test_a_hubs_whole_neighbourhood_is_answered_up_to_the_cap(tmp_path: Any) -> None:
    # limit 0 answered a hub's every neighbour: 8 MB, written out on the server's loop
    path = str(tmp_path / "synapses.db")
    with SynapseStore(path) as store:
        store.reinforce_many(
            [CoActivation(["hub.py", f"src/f{i:04d}.py"], at=T0) for i in range(MAX_ANSWER + 5)]
        )
    answers: dict[str, Any] = {}

    async def session(client: Client) -> None:
        for tool, arguments in (("related", {"ids": ["hub.py"]}), ("neighbours", {"id": "hub.py"})):
            answers[tool] = await call(client, tool, {**arguments, "limit": 0, "at": T0})
            answers[f"{tool} over"] = await error(client, tool, {**arguments, "limit": 1001})

    with_server(path, session)
    for tool, key in (("related", "related"), ("neighbours", "neighbours")):
        assert len(answers[tool][key]) == MAX_ANSWER and answers[tool]["total"] == MAX_ANSWER + 5
        assert answers[f"{tool} over"].endswith("to 1,000, got 1001")


def test_related_refuses_what_the_api_refuses_and_more_ids_than_its_cap(tmp_path: Any) -> None:
    path = str(tmp_path / "synapses.db")
    many = [f"src/f{i:03d}.py" for i in range(MAX_RELATED_IDS + 1)]
    answers: dict[str, Any] = {}

    async def session(client: Client) -> None:
        answers["empty id"] = await error(client, "related", {"ids": ["a.py", ""]})
        answers["namespace"] = await error(client, "related", {"ids": ["a"], "namespace": "Bad"})
        answers["limit"] = await error(client, "related", {"ids": ["a"], "limit": -1})
        answers["type"] = await error(client, "related", {"ids": "a.py"})
        answers["unknown"] = await error(client, "related", {"ids": ["a"], "k": 3})
        with pytest.raises(MCPError) as refused:
            await client.call_tool("related", {"ids": many})
        answers["refused"] = refused.value
        answers["cap"] = await call(client, "related", {"ids": many[:-1], "at": T0})

    with_server(path, session)
    with SynapseStore(path) as store:
        assert answers["empty id"] == "Error executing tool related: " + api_error(
            lambda: store.spread(["a.py", ""])
        ).replace("seeds: ", "ids: ")
        assert answers["namespace"] == "Error executing tool related: " + api_error(
            lambda: store.spread(["a"], active_namespace="Bad")
        )
    assert answers["limit"] == (
        "Error executing tool related: InvalidValueError: limit must be 0 (all, up to 1,000) "
        "to 1,000, got -1"
    )
    assert "validation error" in answers["type"]
    assert answers["unknown"] == (
        "Error executing tool related: InvalidValueError: unknown argument 'k'; "
        "related takes at, ids, limit, namespace"
    )
    assert answers["refused"].code == INVALID_PARAMS  # -32602, a JSON-RPC error
    assert answers["refused"].message == (
        "Invalid params: related takes at most 100 ids, got 101; "
        "pass the ones that matter most, 100"
    )
    assert answers["cap"]["related"] == [] and len(answers["cap"]["ids"]) == MAX_RELATED_IDS


def exchange(server: subprocess.Popen[bytes], message: str | bytes, wait_s: float = 10.0) -> Any:
    """Send one line to a raw stdio server: its reply, or None after ``wait_s`` of silence."""
    assert server.stdin is not None and server.stdout is not None
    server.stdin.write((message if isinstance(message, bytes) else message.encode()) + b"\n")
    server.stdin.flush()
    ready, _, _ = select.select([server.stdout], [], [], wait_s)
    return json.loads(server.stdout.readline()) if ready else None


@contextmanager
def raw_server(path: str) -> Iterator[subprocess.Popen[bytes]]:
    """``synapse-retriever mcp path`` as a subprocess written to line by line, initialized."""
    command = [sys.executable, "-m", "synapse_retriever.cli", "mcp", path]
    hello = {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {}}
    start = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": hello}
    with subprocess.Popen(command, stdin=subprocess.PIPE, stdout=subprocess.PIPE) as server:
        try:
            assert exchange(server, json.dumps(start), wait_s=60.0) is not None
            assert server.stdin is not None  # a notification: no reply to wait for
            server.stdin.write(b'{"jsonrpc": "2.0", "method": "notifications/initialized"}\n')
            yield server
        finally:
            server.kill()


def test_a_line_the_server_cannot_read_gets_a_json_rpc_error_and_it_reads_on(
    tmp_path: Any,
) -> None:
    call_with = '{"jsonrpc": "2.0", "id": %s, "method": "tools/call", "params": %s}'
    lines: list[tuple[str, object, int, str]] = [
        ('{"jsonrpc": "2.0", "id": 2, "method": "ping"', None, PARSE_ERROR, "Parse error"),
        ("nonsense", None, PARSE_ERROR, "Parse error: not JSON (Expecting value"),
        (  # valid JSON, but no UTF-8 text: the request's own id, and where the value is
            call_with % (3, '{"name": "record_usage", "arguments": {"ids": ["a\\udce9", "b"]}}'),
            3,
            INVALID_PARAMS,
            "Invalid params: params.arguments.ids[0] must be valid Unicode, got 'a\\udce9'",
        ),
        (
            call_with % ('"r4"', '{"name": "recall", "arguments": {"hits": [{"id": "\\ud800"}]}}'),
            "r4",
            INVALID_PARAMS,
            "Invalid params: params.arguments.hits[0].id must be valid Unicode",
        ),
        ('{"id": 5, "hello": "world"}', 5, INVALID_REQUEST, "Invalid request"),
    ]
    with raw_server(str(tmp_path / "synapses.db")) as server:
        for number, (line, request, code, start_of_message) in enumerate(lines):
            reply = exchange(server, line)
            assert reply is not None, f"no reply to {line}"
            assert (reply["id"], reply["error"]["code"]) == (request, code), line
            assert reply["error"]["message"].startswith(start_of_message), reply
            ping = {"jsonrpc": "2.0", "id": 100 + number, "method": "ping"}
            pong = exchange(server, json.dumps(ping))  # it reads on
            assert pong == {"jsonrpc": "2.0", "id": 100 + number, "result": {}}


def test_bytes_that_are_not_utf8_are_refused_by_name_never_replaced(tmp_path: Any) -> None:
    # the SDK read them as U+FFFD: caf\xe9.py and caf\xe8.py (Latin-1) became one id, written
    path = str(tmp_path / "synapses.db")
    record = b'{"jsonrpc": "2.0", "id": %b, "method": "tools/call", "params": %b}'
    usage = b'{"name": "record_usage", "arguments": {"ids": ["%b", "b.py"]}}'
    lines: list[tuple[bytes, object, int, str]] = [
        (
            record % (b"3", usage % b"caf\xe9.py"),
            3,
            INVALID_PARAMS,
            "Invalid params: params.arguments.ids[0] must be valid Unicode, got 'caf\\udce9.py'",
        ),
        (
            record % (b'"r4"', usage % b"caf\xe8.py"),
            "r4",
            INVALID_PARAMS,
            "Invalid params: params.arguments.ids[0] must be valid Unicode, got 'caf\\udce8.py'",
        ),
        (  # in the id itself: an id that cannot be echoed is answered with null
            record % (b'"r\xe9"', usage % b"ok.py"),
            None,
            INVALID_REQUEST,
            "Invalid request: message.id must be valid Unicode, got 'r\\udce9'",
        ),
        (
            b'{"jsonrpc": "2.0", "id": 6, "method": "pi\xffng"}',
            6,
            INVALID_REQUEST,
            "Invalid request: message.method must be valid Unicode, got 'pi\\udcffng'",
        ),
        (b'{"jsonrpc": "2.0", "id": 7, \xe9}', None, PARSE_ERROR, "Parse error: not JSON"),
    ]
    with raw_server(path) as server:
        for number, (line, request, code, start_of_message) in enumerate(lines):
            reply = exchange(server, line)
            assert reply is not None, f"no reply to {line!r}"
            assert (reply["id"], reply["error"]["code"]) == (request, code), (line, reply)
            assert reply["error"]["message"].startswith(start_of_message), reply
            ping = {"jsonrpc": "2.0", "id": 100 + number, "method": "ping"}
            assert exchange(server, json.dumps(ping))["id"] == 100 + number  # it reads on
        utf8 = exchange(server, record % (b"8", usage % "café.py".encode()))
        assert utf8["result"]["structuredContent"] == {"edges": 1, "dropped": []}
    with SynapseStore(path) as store:  # only the UTF-8 call wrote
        assert sorted(store.graph().nodes) == ["b.py", "café.py"]


def test_a_request_whose_id_is_not_an_integer_or_a_string_gets_an_answer_and_never_runs(
    tmp_path: Any,
) -> None:
    # the SDK read each as a notification: no answer, and a client waiting on it hung
    path = str(tmp_path / "synapses.db")
    usage = {"name": "record_usage", "arguments": {"ids": ["a.py", "b.py"]}}
    wrong: list[object] = [1.5, 1.0, True, None, {}, [7]]
    requests = [{"jsonrpc": "2.0", "id": found, "method": "ping"} for found in wrong]
    requests.append({"jsonrpc": "2.0", "id": 2.5, "method": "tools/call", "params": usage})
    with raw_server(path) as server:
        assert server.stdin is not None
        for number, request in enumerate(requests):
            reply = exchange(server, json.dumps(request))
            why = f"id must be an integer or a string, got {json.dumps(request['id'])}"
            assert reply == {
                "jsonrpc": "2.0",
                "id": None,
                "error": {"code": INVALID_REQUEST, "message": f"Invalid request: {why}"},
            }, request
            ping = {"jsonrpc": "2.0", "id": 100 + number, "method": "ping"}
            assert exchange(server, json.dumps(ping))["id"] == 100 + number  # it reads on
        # a notification (no id) is still never answered: the next reply is the ping's
        server.stdin.write(b'{"jsonrpc": "2.0", "method": "notifications/roots/list_changed"}\n')
        assert (
            exchange(server, '{"jsonrpc": "2.0", "id": "last", "method": "ping"}')["id"] == "last"
        )
    with SynapseStore(path) as store:  # the tools/call with id 2.5 never ran
        assert store.graph().number_of_edges() == 0
