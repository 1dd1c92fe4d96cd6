"""SynapseRetriever in a real chain: FAISS (langchain-community, faiss-cpu), real tools, SQLite.

The embedding is a bag of words hashed into 256 dimensions: offline, deterministic, and
lexical, so a document that shares no word with the query is one vector search misses.
Under the published rule (``SynapseConfig.published()``), two co-usage events at strength 1
give the edge jwt.py - keys.py a weight of 0.3 + 0.3 = 0.6, so the seed auth/jwt.py sends it
1.0 × 0.6 × 0.6 = 0.36 >= 0.15. The default rule (ACT-R) is worked out where it is used.
"""

from __future__ import annotations

import math
import re
import zlib
from pathlib import Path
from typing import Any

import pytest
from langchain_community.vectorstores import FAISS
from langchain_core.embeddings import Embeddings
from langchain_core.retrievers import BaseRetriever
from langchain_core.runnables import RunnableConfig, RunnableLambda
from langchain_core.tools import tool
from langchain_synapse_retriever import SynapseCallbackHandler, SynapseRetriever
from langchain_tests.integration_tests import RetrieversIntegrationTests

from synapse_retriever import SynapseConfig, SynapseStore

DIM = 256
REPO = {
    "auth/jwt.py": "verify the jwt token signature and its expiry",
    "auth/login.py": "login form checks the password then issues a jwt token",
    "docs/tokens.md": "token formats: the jwt access token and the refresh token",
    "auth/session.py": "the session cookie keeps the token after login",
    "auth/views.py": "views for login, logout and token refresh",
    "config/keys.py": "load signing keys from the environment",
    "billing/invoice.py": "compute invoice totals with tax",
    "ui/theme.css": "colors and fonts of the web ui",
}
QUERY = "verify jwt token signature"


class WordHashEmbedding(Embeddings):
    """Each lower-cased word adds 1 to dimension crc32(word) mod 256; L2-normalised."""

    def embed_query(self, text: str) -> list[float]:
        vector = [0.0] * DIM
        for word in re.findall(r"[a-z0-9]+", text.lower()):
            vector[zlib.crc32(word.encode()) % DIM] += 1.0
        norm = math.sqrt(sum(v * v for v in vector)) or 1.0
        return [v / norm for v in vector]

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        return [self.embed_query(text) for text in texts]


def vector_store() -> FAISS:
    paths = list(REPO)
    return FAISS.from_texts(
        [REPO[p] for p in paths], WordHashEmbedding(), [{"source": p} for p in paths], ids=paths
    )


# -- the standard LangChain retriever suite ----------------------------------------------------


class TestSynapseRetrieverStandard(RetrieversIntegrationTests):
    """Cold graph: the upstream returns 4 documents."""

    # The suite's async test needs the asyncio mark under pytest-asyncio's strict mode,
    # and the suite forbids overriding it; the mark warns on the sync tests, harmlessly.
    pytestmark = [  # noqa: RUF012
        pytest.mark.asyncio,
        pytest.mark.filterwarnings("ignore:.*marked with '@pytest.mark.asyncio'"),
    ]

    @property
    def retriever_constructor(self) -> type[BaseRetriever]:
        return SynapseRetriever

    @property
    def retriever_constructor_params(self) -> dict[str, Any]:
        vectors = vector_store()
        return {
            "base_retriever": vectors.as_retriever(search_kwargs={"k": 4}),
            "store": ":memory:",
            "docstore": vectors,
        }

    @property
    def retriever_query_example(self) -> str:
        return QUERY


class TestSynapseRetrieverStandardWarm(TestSynapseRetrieverStandard):
    """Warm graph: keys.py is injected wherever a slot is free, and counts still hold."""

    @property
    def retriever_constructor_params(self) -> dict[str, Any]:
        store = SynapseStore(":memory:")
        store.reinforce(["auth/jwt.py", "config/keys.py"], strength=2.0)
        return {**super().retriever_constructor_params, "store": store}

    def test_warm_graph_injects(self, retriever: BaseRetriever) -> None:
        docs = retriever.invoke(QUERY)
        assert [doc.id for doc in docs][-1] == "config/keys.py"
        assert len(docs) == 4


class TestSynapseRetrieverStandardPublished(TestSynapseRetrieverStandardWarm):
    """Warm graph under the published rule: the same suite, and keys.py is injected too."""

    @property
    def retriever_constructor_params(self) -> dict[str, Any]:
        store = SynapseStore(":memory:", config=SynapseConfig.published())
        store.reinforce(["auth/jwt.py", "config/keys.py"], strength=2.0)
        cold = TestSynapseRetrieverStandard.retriever_constructor_params.fget(self)  # type: ignore[attr-defined]
        return {**cold, "store": store}


# -- end to end -----------------------------------------------------------------------------


@tool
def read_file(path: str) -> str:
    """Read a file of the repository."""
    return REPO[path]


@tool
def edit_file(file_path: str, text: str) -> str:
    """Replace a file's contents."""
    return "edited"


@tool
def search_code(query: str) -> str:
    """Search the repository."""
    return "auth/login.py"


def agent_run(*reads: str, edits: tuple[str, ...] = ()) -> RunnableLambda:
    """An agent-like run: it searches, reads and edits files through real tools."""

    def run(task: str, config: RunnableConfig) -> str:
        search_code.invoke({"query": task}, config)
        for path in reads:
            read_file.invoke({"path": path}, config)
        for path in edits:
            edit_file.invoke({"file_path": path, "text": "..."}, config)
        return "done"

    return RunnableLambda(run)


def test_a_co_used_document_vector_search_misses_takes_the_weakest_slot(tmp_path: Path) -> None:
    vectors = vector_store()
    upstream = vectors.as_retriever(search_kwargs={"k": 4})
    top = upstream.invoke(QUERY)
    assert "config/keys.py" not in [doc.id for doc in top]  # shares no word with the query
    assert top[0].id == "auth/jwt.py"

    published = SynapseConfig.published()  # the energies below are the published rule's
    retriever = SynapseRetriever(
        base_retriever=upstream, store=tmp_path / "synapses.db", docstore=vectors, config=published
    )
    assert retriever.invoke(QUERY) == top  # cold graph: the upstream's output

    # Usage history: the application used the two together once...
    used = vectors.get_by_ids(["auth/jwt.py", "config/keys.py"])
    assert retriever.record_usage(used) == 1
    # ...and an agent read one and edited the other in one run (and unrelated files in another).
    handler = SynapseCallbackHandler(retriever.store)
    agent_run("auth/jwt.py", edits=("config/keys.py",)).invoke(
        "fix the token check", {"callbacks": [handler]}
    )
    agent_run("billing/invoice.py", "ui/theme.css").invoke(
        "restyle invoices", {"callbacks": [handler]}
    )
    retrieval_only = {"callbacks": [handler]}
    retriever.invoke(QUERY, retrieval_only)  # retrieval with the handler: learns nothing
    assert math.isclose(retriever.store.weight("auth/jwt.py", "config/keys.py"), 0.6, rel_tol=1e-6)

    result = retriever.invoke(QUERY)
    assert len(result) == len(top) == 4
    assert [doc.id for doc in result] == [doc.id for doc in top[:3]] + ["config/keys.py"]
    assert result[:3] == top[:3]
    injected = result[3]
    assert injected.page_content == REPO["config/keys.py"]
    assert injected.metadata == {
        "source": "config/keys.py",
        "synapse_origin": "injected",
        "synapse_energy": 0.36,  # 0.6 × 0.6
        "synapse_path": "auth/jwt.py -> config/keys.py",
        "synapse_displaced": top[3].id,
    }
    assert vectors.get_by_ids(["config/keys.py"])[0].metadata == {"source": "config/keys.py"}

    # The graph persists: a new retriever on the same file recalls the same.
    retriever.store.close()
    reopened = SynapseRetriever(
        base_retriever=upstream,
        store=str(tmp_path / "synapses.db"),
        docstore=vectors,
        config=published,
    )
    assert reopened.invoke(QUERY) == result
    assert reopened.batch([QUERY, QUERY]) == [result, result]


def test_by_default_association_decides_and_recent_use_orders_on_faiss(tmp_path: Path) -> None:
    vectors = vector_store()
    upstream = vectors.as_retriever(search_kwargs={"k": 4})
    top = upstream.invoke(QUERY)
    assert [doc.id for doc in top] == [
        "auth/jwt.py",
        "auth/login.py",
        "docs/tokens.md",
        "auth/session.py",
    ]
    retriever = SynapseRetriever(
        base_retriever=upstream, store=tmp_path / "synapses.db", docstore=vectors
    )
    assert retriever.invoke(QUERY) == top  # cold graph: the upstream's output
    retriever.record_usage(vectors.get_by_ids(["auth/jwt.py", "config/keys.py"]))
    handler = SynapseCallbackHandler(retriever.store)
    agent_run("auth/jwt.py", edits=("config/keys.py",)).invoke(
        "fix the token check", {"callbacks": [handler]}
    )
    agent_run("billing/invoice.py", "ui/theme.css").invoke(
        "restyle invoices", {"callbacks": [handler]}
    )

    result = retriever.invoke(QUERY)
    # The default rule (ACT-R), every use just now (ages clamped to 1 s: one use gives
    # B = 0.5 × ln 86400 = 5.683). keys.py, used twice: B = 5.683 + ln 2 = 6.377, plus its
    # association with the hits: it met jwt.py in 2 of N = 3 events, each used twice:
    # S = ln(2 × 3 / (2 × 2)) = 0.405, times jwt.py's weight 1 over the rank weights
    # 1 + 0.75 + 0.5 + 0.25 = 2.5: 0.162, A = 6.539. invoice.py and theme.css, used once
    # together in an unrelated run (B = 5.683), share no edge with a hit: the association
    # gate keeps them out. login.py, tokens.md and session.py were never used: −6 + 3 (keep
    # bonus) = −3. keys.py takes the weakest slot (ties: the later position), session.py's.
    assert [doc.id for doc in result] == [
        "auth/jwt.py",
        "auth/login.py",
        "docs/tokens.md",
        "config/keys.py",
    ]
    assert result[:3] == top[:3]
    keys = result[3]
    assert keys.metadata["synapse_path"] == "auth/jwt.py -> config/keys.py"
    assert keys.metadata["synapse_displaced"] == "auth/session.py"
    expected = 0.5 * math.log(86400) + math.log(2) + math.log(1.5) / 2.5  # 6.539
    slack = 0.5 * math.log(60)  # on a slow machine: every use aged up to a minute
    assert expected - slack <= keys.metadata["synapse_energy"] <= expected + 1e-6

    # The recency prior lets invoice.py in on its base level alone: the two weakest slots
    # go to keys.py, the better one, and invoice.py (ahead of theme.css, its equal, by id).
    prior = SynapseRetriever(
        base_retriever=upstream,
        store=str(tmp_path / "synapses.db"),
        docstore=vectors,
        config=SynapseConfig.recency(),
    )
    recency = prior.invoke(QUERY)
    assert [doc.id for doc in recency] == [
        "auth/jwt.py",
        "auth/login.py",
        "config/keys.py",
        "billing/invoice.py",
    ]
    assert recency[3].metadata["synapse_path"] == ""
    assert recency[3].metadata["synapse_displaced"] == "auth/session.py"
    prior.store.close()

    # Reopened, the store rebuilds its use history from the edges (approximately: the
    # docs/concepts.md, "Time, storage and concurrency"), and recalls the same documents.
    retriever.store.close()
    reopened = SynapseRetriever(
        base_retriever=upstream, store=str(tmp_path / "synapses.db"), docstore=vectors
    )
    assert [doc.id for doc in reopened.invoke(QUERY)] == [doc.id for doc in result]


@pytest.mark.asyncio
async def test_async_and_batch_match_sync_on_faiss(tmp_path: Path) -> None:
    vectors = vector_store()
    retriever = SynapseRetriever(
        base_retriever=vectors.as_retriever(search_kwargs={"k": 5}),
        store=tmp_path / "synapses.db",
        docstore=vectors,
        k=4,
    )
    retriever.record_usage(["auth/jwt.py", "config/keys.py"], strength=2.0)
    expected = retriever.invoke(QUERY)
    assert expected[-1].id == "config/keys.py"
    assert await retriever.ainvoke(QUERY) == expected
    assert await retriever.abatch([QUERY, "login form"]) == retriever.batch([QUERY, "login form"])
    assert len(await retriever.ainvoke(QUERY, k=5)) == 5


def test_strict_token_budget_on_faiss() -> None:
    vectors = vector_store()
    upstream = vectors.as_retriever(search_kwargs={"k": 4})
    top = upstream.invoke(QUERY)
    assert top[3].id == "auth/session.py"  # the weakest hit: 8 tokens
    store = SynapseStore(":memory:")
    store.reinforce(["auth/jwt.py", "config/keys.py"], strength=2.0)

    def strict(**fields: Any) -> SynapseRetriever:
        return SynapseRetriever(
            base_retriever=upstream, store=store, docstore=vectors, token_budget="strict", **fields
        )

    # Default counter: keys.py has 6 tokens (load signing keys from the environment) <= 8.
    assert [doc.id for doc in strict().invoke(QUERY)][3] == "config/keys.py"
    # A counter under which keys.py costs more than the hit it would displace: no injection.
    costly = strict(token_counter=lambda text: 100 if "signing" in text else 8)
    assert costly.invoke(QUERY) == top
