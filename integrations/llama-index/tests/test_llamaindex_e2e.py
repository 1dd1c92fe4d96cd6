"""End to end: a real VectorStoreIndex on FAISS, a deterministic embedding, MockLLM answers."""

from __future__ import annotations

from typing import Any

import faiss
import pytest
from llama_index.core import StorageContext, VectorStoreIndex
from llama_index.core.llms import MockLLM
from llama_index.core.memory import ChatMemoryBuffer
from llama_index.core.query_engine import CitationQueryEngine
from llama_index.core.schema import NodeWithScore, TextNode
from llama_index.postprocessor.synapse import SynapsePostprocessor, SynapseUsageHandler
from llama_index.vector_stores.faiss import FaissVectorStore

QUESTION = "how is the jwt token verified"

CORPUS = {
    "auth/jwt.py": "the jwt token is verified by checking its signature and expiry",
    "auth/login.py": "the login view exchanges a password for a jwt token",
    "auth/refresh.py": "refresh the token before the jwt expires",
    "auth/logout.py": "logout revokes the token and clears the session",
    "auth/middleware.py": "the auth middleware reads the token from the header",
    # Used with the verifier, but shares no word with the question: vector search misses it.
    "config/keys.py": "load rsa signing keys from vault at startup",
    "billing/invoice.py": "billing invoices go out monthly",
}


def faiss_index(embedding: Any, metric: str = "ip") -> VectorStoreIndex:
    flat = faiss.IndexFlatIP(embedding.dim) if metric == "ip" else faiss.IndexFlatL2(embedding.dim)
    storage = StorageContext.from_defaults(vector_store=FaissVectorStore(faiss_index=flat))
    nodes = [TextNode(id_=node_id, text=text) for node_id, text in CORPUS.items()]
    return VectorStoreIndex(nodes, storage_context=storage, embed_model=embedding)


def ids(nodes: list[NodeWithScore]) -> list[str]:
    return [n.node.node_id for n in nodes]


@pytest.fixture
def index(embedding: Any) -> VectorStoreIndex:
    return faiss_index(embedding)


@pytest.fixture
def synapse(index: VectorStoreIndex) -> SynapsePostprocessor:
    """A postprocessor whose graph learned that the verifier and the key loader go together."""
    synapse = SynapsePostprocessor(store=":memory:", docstore=index.docstore)
    synapse.record_usage(["auth/jwt.py", "config/keys.py"])
    return synapse


@pytest.mark.parametrize("metric", ["ip", "l2"])
def test_query_engine_returns_the_co_used_node_in_place_of_the_weakest(
    embedding: Any, metric: str
) -> None:
    index = faiss_index(embedding, metric)
    synapse = SynapsePostprocessor(store=":memory:", docstore=index.docstore)
    synapse.record_usage(["auth/jwt.py", "config/keys.py"])
    plain = index.as_query_engine(llm=MockLLM(), similarity_top_k=4).query(QUESTION)
    assert ids(plain.source_nodes)[0] == "auth/jwt.py"
    assert "config/keys.py" not in ids(plain.source_nodes)  # vector search misses it

    engine = index.as_query_engine(llm=MockLLM(), similarity_top_k=4, node_postprocessors=[synapse])
    response = engine.query(QUESTION)
    assert ids(response.source_nodes) == [*ids(plain.source_nodes)[:3], "config/keys.py"]
    injected = response.source_nodes[3]
    assert injected.score == plain.source_nodes[3].score  # the victim's (FAISS L2: distances)
    assert injected.node.metadata["synapse_displaced"] == ids(plain.source_nodes)[3]
    assert [n.score for n in response.source_nodes[:3]] == [n.score for n in plain.source_nodes[:3]]
    assert "load rsa signing keys" in str(response)  # MockLLM echoes the prompt: keys reached it
    assert "synapse_" not in str(response)  # the annotations did not


@pytest.mark.asyncio
async def test_sync_and_async_queries_give_the_same_nodes(
    index: VectorStoreIndex, synapse: SynapsePostprocessor
) -> None:
    engine = index.as_query_engine(llm=MockLLM(), similarity_top_k=4, node_postprocessors=[synapse])
    sync = engine.query(QUESTION).source_nodes
    asynchronous = (await engine.aquery(QUESTION)).source_nodes
    assert "config/keys.py" in ids(sync)
    assert ids(sync) == ids(asynchronous)
    assert len(asynchronous) == 4


@pytest.mark.asyncio
@pytest.mark.parametrize("mode", ["context", "condense_plus_context"])
async def test_it_works_inside_a_chat_engine(
    index: VectorStoreIndex, synapse: SynapsePostprocessor, mode: str
) -> None:
    def chat_engine() -> Any:
        # a buffer in memory: the default Memory's aiosqlite thread could answer after the
        # loop a sync chat ran on had closed (a warning from its thread, now and then)
        return index.as_chat_engine(
            chat_mode=mode,
            llm=MockLLM(),
            similarity_top_k=4,
            node_postprocessors=[synapse],
            memory=ChatMemoryBuffer.from_defaults(),
        )

    sync = chat_engine().chat(QUESTION).source_nodes
    asynchronous = (await chat_engine().achat(QUESTION)).source_nodes
    assert len(sync) == 4
    assert ids(sync)[-1] == "config/keys.py"
    assert ids(sync) == ids(asynchronous)


def test_learning_from_cited_sources_then_recalling(
    index: VectorStoreIndex, citing_llm: Any
) -> None:
    synapse = SynapsePostprocessor(store=":memory:", docstore=index.docstore)
    handler = SynapseUsageHandler(postprocessor=synapse).attach()
    try:
        # A question that retrieves both; the answer cites the verifier and the key loader.
        llm = citing_llm(cite=["jwt token is verified", "rsa signing keys"])
        engine = CitationQueryEngine.from_args(index, llm=llm, similarity_top_k=4)
        engine.query("jwt token verified with rsa signing keys")
    finally:
        handler.detach()
    assert synapse.store.weight("auth/jwt.py", "config/keys.py") > 0
    assert synapse.store.graph(namespaces="personal").number_of_edges() == 1  # cited pair only

    engine = index.as_query_engine(llm=MockLLM(), similarity_top_k=4, node_postprocessors=[synapse])
    assert ids(engine.query(QUESTION).source_nodes)[-1] == "config/keys.py"


def test_strict_token_budget_end_to_end(index: VectorStoreIndex) -> None:
    synapse = SynapsePostprocessor(
        store=":memory:", docstore=index.docstore, token_budget="strict"
    )  # default counter: Settings.tokenizer (tiktoken, bundled with llama-index-core)
    synapse.record_usage(["auth/jwt.py", "config/keys.py"])
    engine = index.as_query_engine(llm=MockLLM(), similarity_top_k=4, node_postprocessors=[synapse])
    nodes = engine.query(QUESTION).source_nodes
    assert ids(nodes)[-1] == "config/keys.py"  # the key loader costs no more than its victim
