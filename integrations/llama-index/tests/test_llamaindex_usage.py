"""Usage capture: evidence of use, one co-activation event per query or agent run."""

from __future__ import annotations

import logging
import urllib.request
from collections.abc import Iterator
from typing import Any

import pytest
from llama_index.core import Document, VectorStoreIndex
from llama_index.core.agent.workflow import FunctionAgent
from llama_index.core.instrumentation import get_dispatcher
from llama_index.core.llms import MockFunctionCallingLLM, MockLLM
from llama_index.core.query_engine import CitationQueryEngine
from llama_index.core.schema import TextNode
from llama_index.core.tools import FunctionTool
from llama_index.postprocessor.synapse import (
    SynapsePostprocessor,
    SynapseUsageHandler,
    mark_used,
)

from synapse_retriever import InvalidTypeError, SynapseStore

dispatcher = get_dispatcher("tests.synapse")

TEXTS = {
    "jwt": "verify the jwt token signature and expiry",
    "login": "the login form posts the token to the session",
    "keys": "rotate the vault secrets every month",
    "logout": "logout clears the token from the session",
    "refresh": "refresh the token before it expires",
}


@pytest.fixture
def synapse() -> SynapsePostprocessor:
    return SynapsePostprocessor(store=":memory:")


@pytest.fixture
def handler(synapse: SynapsePostprocessor) -> Iterator[SynapseUsageHandler]:
    attached = SynapseUsageHandler(postprocessor=synapse).attach()
    yield attached
    attached.detach()


def edges(synapse: SynapsePostprocessor) -> set[frozenset[str]]:
    return {frozenset(edge) for edge in synapse.store.graph(namespaces="personal").edges}


def test_the_offline_guard_refuses_connections(offline: list[str]) -> None:
    for url in ("http://example.com", "http://93.184.216.34"):
        with pytest.raises(OSError, match="network access attempted"):
            urllib.request.urlopen(url, timeout=1)
    assert len(offline) == 2
    offline.clear()  # expected here; any other test that tries fails at teardown


def test_mark_used_outside_any_span_is_one_event(
    synapse: SynapsePostprocessor, handler: SynapseUsageHandler
) -> None:
    mark_used(["a", "b"])
    mark_used(["c"])  # a single node: no pair to reinforce
    assert edges(synapse) == {frozenset("ab")}


def test_mark_used_leaves_out_what_is_no_node_or_id_and_keeps_the_rest(
    synapse: SynapsePostprocessor, handler: SynapseUsageHandler, caplog: pytest.LogCaptureFixture
) -> None:
    # ["c", 3, "d"] was taken, and the span's end then failed, losing "c" and "d" too;
    # None and 5 raised a raw TypeError, and b"ab" was read as 97, 98
    for bad in (None, 5, b"ab", "ab"):
        with pytest.raises(InvalidTypeError, match="nodes_or_ids must be a list"):
            mark_used(bad)  # type: ignore[arg-type]

    @dispatcher.span
    def run() -> str:
        mark_used(["c", 3, "d\x00", "d"])  # type: ignore[list-item]
        return "done"

    with caplog.at_level(logging.WARNING):
        assert run() == "done"
    assert edges(synapse) == {frozenset("cd")}
    assert "mark_used: left out 3" in caplog.text and "left out 'd\\x00'" in caplog.text


def test_without_a_handler_mark_used_does_nothing(synapse: SynapsePostprocessor) -> None:
    mark_used(["a", "b"])
    assert edges(synapse) == set()


def test_marks_in_one_top_level_span_are_one_event_when_it_ends(
    synapse: SynapsePostprocessor, handler: SynapseUsageHandler
) -> None:
    @dispatcher.span
    def tool(node: str) -> None:
        mark_used([node])

    @dispatcher.span
    def run() -> set[frozenset[str]]:
        tool("a")
        tool("b")
        mark_used(["c"])
        return edges(synapse)  # nothing yet: the run is not over

    assert run() == set()
    assert edges(synapse) == {frozenset("ab"), frozenset("ac"), frozenset("bc")}
    assert synapse.store.edge("a", "b").activation_count == 1  # type: ignore[union-attr]


@pytest.mark.parametrize("namespace", ["personal", "branch:" + "x" * 2030])
def test_two_handlers_on_one_store_count_a_span_once(namespace: str) -> None:
    # a namespace near the 2,048-byte cap made the span's event id too long: nothing learned
    synapse = SynapsePostprocessor(store=":memory:", active_namespace=namespace)
    first = SynapseUsageHandler(postprocessor=synapse).attach()
    second = SynapseUsageHandler(postprocessor=synapse).attach()
    try:

        @dispatcher.span
        def run() -> None:
            mark_used(["a", "b"])

        run()
    finally:
        first.detach()
        second.detach()
    assert synapse.store.edge("a", "b", namespace).activation_count == 1  # type: ignore[union-attr]


def test_two_handlers_on_one_store_count_a_mark_outside_any_span_once(
    synapse: SynapsePostprocessor,
) -> None:
    # a notebook cell attaching a handler, run twice: each mark outside a span counted 2
    first = SynapseUsageHandler(postprocessor=synapse).attach()
    second = SynapseUsageHandler(postprocessor=synapse).attach()
    try:
        mark_used(["a", "b"])
        assert synapse.store.edge("a", "b").activation_count == 1  # type: ignore[union-attr]
        mark_used(["a", "b"])  # another mark: another event
    finally:
        first.detach()
        second.detach()
    assert synapse.store.edge("a", "b").activation_count == 2  # type: ignore[union-attr]


def test_a_handler_attached_twice_learns_each_event_once(synapse: SynapsePostprocessor) -> None:
    # it was added to the dispatcher twice: mark_used outside a span counted 2
    handler = SynapseUsageHandler(postprocessor=synapse).attach()
    try:
        assert handler.attach() is handler
        mark_used(["a", "b"])
    finally:
        handler.detach()
    assert synapse.store.edge("a", "b").activation_count == 1  # type: ignore[union-attr]
    mark_used(["a", "b"])  # detached once: nothing listens any more
    assert synapse.store.edge("a", "b").activation_count == 1  # type: ignore[union-attr]


def test_two_top_level_spans_are_two_events(
    synapse: SynapsePostprocessor, handler: SynapseUsageHandler
) -> None:
    @dispatcher.span
    def run(nodes: list[str]) -> None:
        mark_used(nodes)

    run(["a", "b"])
    run(["c", "d"])
    assert edges(synapse) == {frozenset("ab"), frozenset("cd")}


def test_a_failed_run_still_reinforces_what_was_used_before_the_failure(
    synapse: SynapsePostprocessor, handler: SynapseUsageHandler
) -> None:
    @dispatcher.span
    def run() -> None:
        mark_used(["a", "b"])
        raise RuntimeError("the agent crashed")

    with pytest.raises(RuntimeError):
        run()
    assert edges(synapse) == {frozenset("ab")}


def test_a_bad_mark_is_logged_and_never_breaks_the_application(
    synapse: SynapsePostprocessor,
    handler: SynapseUsageHandler,
    caplog: pytest.LogCaptureFixture,
) -> None:
    @dispatcher.span
    def run() -> str:
        mark_used([42])  # type: ignore[list-item]
        return "done"

    with caplog.at_level(logging.WARNING):
        assert run() == "done"
    assert "mark_used: left out 42" in caplog.text
    assert edges(synapse) == set()


def index_of(embedding: Any, texts: dict[str, str] = TEXTS) -> VectorStoreIndex:
    nodes = [TextNode(id_=key, text=text) for key, text in texts.items()]
    return VectorStoreIndex(nodes, embed_model=embedding)


def citation_engine(
    index: VectorStoreIndex, llm: Any, *postprocessors: SynapsePostprocessor
) -> CitationQueryEngine:
    return CitationQueryEngine.from_args(
        index, llm=llm, similarity_top_k=3, node_postprocessors=list(postprocessors)
    )


def test_citation_answers_reinforce_exactly_the_cited_sources(
    synapse: SynapsePostprocessor,
    handler: SynapseUsageHandler,
    embedding: Any,
    citing_llm: Any,
) -> None:
    engine = citation_engine(index_of(embedding), citing_llm(answer="See [1] and [3]."))
    response = engine.query("the token in the session")
    sources = response.source_nodes
    assert [s.node.get_content().split(":")[0] for s in sources] == [
        "Source 1",
        "Source 2",
        "Source 3",
    ]
    originals = [s.node.get_content().split("\n", 1)[1].strip() for s in sources]
    by_text = {text: key for key, text in TEXTS.items()}
    cited = {by_text[originals[0]], by_text[originals[2]]}
    assert edges(synapse) == {frozenset(cited)}  # source 2, retrieved but not cited: nothing


def test_citations_map_to_documents_in_ref_doc_id_mode(embedding: Any, citing_llm: Any) -> None:
    synapse = SynapsePostprocessor(store=":memory:", id_mode="ref_doc_id")
    handler = SynapseUsageHandler(postprocessor=synapse).attach()
    try:
        docs = [Document(id_=f"docs/{key}.md", text=text) for key, text in TEXTS.items()]
        index = VectorStoreIndex.from_documents(docs, embed_model=embedding)
        citation_engine(index, citing_llm(answer="[1][2]")).query("the token in the session")
    finally:
        handler.detach()
    (edge,) = edges(synapse)
    assert all(node.startswith("docs/") for node in edge)


def test_an_answer_citing_nothing_reinforces_nothing(
    synapse: SynapsePostprocessor,
    handler: SynapseUsageHandler,
    embedding: Any,
    citing_llm: Any,
) -> None:
    citation_engine(index_of(embedding), citing_llm(answer="No idea.")).query("token session")
    assert edges(synapse) == set()


def test_a_cited_injected_node_is_recognized(
    synapse: SynapsePostprocessor,
    handler: SynapseUsageHandler,
    embedding: Any,
    citing_llm: Any,
) -> None:
    index = index_of(embedding)
    synapse.docstore = index.docstore
    synapse.record_usage(["jwt", "keys"], strength=2.0)  # keys shares no word with the query
    answer = citing_llm(answer="Verify it [1], with the keys [4].")
    engine = CitationQueryEngine.from_args(
        index, llm=answer, similarity_top_k=4, node_postprocessors=[synapse]
    )
    response = engine.query("verify the jwt token")
    origins = [s.node.metadata.get("synapse_origin") for s in response.source_nodes]
    assert origins == [None, None, None, "injected"]  # keys, in the weakest hit's slot
    assert synapse.store.edge("jwt", "keys").activation_count == 2  # type: ignore[union-attr]


@pytest.mark.asyncio
async def test_async_citation_queries_are_captured_too(
    synapse: SynapsePostprocessor,
    handler: SynapseUsageHandler,
    embedding: Any,
    citing_llm: Any,
) -> None:
    engine = citation_engine(index_of(embedding), citing_llm(answer="[1][2]"))
    await engine.aquery("the token in the session")
    await handler.aflush()  # written by the handler's thread: the loop never waits on a lock
    assert len(edges(synapse)) == 1


def test_retrieved_source_nodes_are_not_reinforced_by_default(
    synapse: SynapsePostprocessor, handler: SynapseUsageHandler, embedding: Any
) -> None:
    engine = index_of(embedding).as_query_engine(llm=MockLLM(), similarity_top_k=3)
    assert len(engine.query("the token in the session").source_nodes) == 3
    assert edges(synapse) == set()


def test_reinforce_retrieved_is_an_explicit_opt_in(
    synapse: SynapsePostprocessor, embedding: Any
) -> None:
    handler = SynapseUsageHandler(postprocessor=synapse, reinforce_retrieved=True).attach()
    try:
        engine = index_of(embedding).as_query_engine(llm=MockLLM(), similarity_top_k=3)
        response = engine.query("the token in the session")
    finally:
        handler.detach()
    ids = [s.node.node_id for s in response.source_nodes]
    assert len(edges(synapse)) == 3  # one event: every pair of the 3 retrieved nodes
    assert synapse.store.weight(ids[0], ids[2]) > 0


@pytest.mark.asyncio
@pytest.mark.filterwarnings("ignore::DeprecationWarning:inspect")  # FunctionAgent's own
async def test_what_an_agents_tools_read_in_one_run_is_one_event(
    synapse: SynapsePostprocessor, handler: SynapseUsageHandler
) -> None:
    def read_verifier() -> str:
        """Read the JWT verifier."""
        mark_used(["auth/jwt.py"])
        return "def verify(token): ..."

    async def read_key_loader() -> str:
        """Read the key loader."""
        mark_used(["config/keys.py"])
        return "def load_keys(): ..."

    agent = FunctionAgent(
        tools=[
            FunctionTool.from_defaults(read_verifier),
            FunctionTool.from_defaults(async_fn=read_key_loader),
        ],
        llm=MockFunctionCallingLLM(),  # calls every tool once, then answers
    )
    await agent.run("why does token verification fail?")
    await handler.aflush()
    assert edges(synapse) == {frozenset({"auth/jwt.py", "config/keys.py"})}
    assert synapse.store.edge("auth/jwt.py", "config/keys.py").activation_count == 1  # type: ignore[union-attr]
    await agent.run("and now?")
    await handler.aflush()
    assert synapse.store.edge("auth/jwt.py", "config/keys.py").activation_count == 2  # type: ignore[union-attr]


def test_a_span_ending_on_the_loop_never_waits_there_for_a_write(tmp_path: Any) -> None:
    # a long write holds the store: the usage write waited for it on the loop's thread,
    # holding the loop as long (0.54 s here with a 0.5 s hold)
    from loop_stalls import STALL_BOUND_S, least_stall, store_busy

    store = SynapseStore(tmp_path / "s.db")
    synapse = SynapsePostprocessor(store=store)
    handler = SynapseUsageHandler(postprocessor=synapse).attach()

    async def scenario() -> None:
        async with store_busy(store):
            mark_used(["auth/jwt.py", "config/keys.py"])  # on the loop's thread
        await handler.aflush()

    try:
        assert least_stall(scenario) <= STALL_BOUND_S
    finally:
        handler.detach()
    assert store.weight("auth/jwt.py", "config/keys.py") > 0
