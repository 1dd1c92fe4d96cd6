"""Unit tests for langchain_synapse_retriever.retrievers: SynapseRetriever over in-memory parts.

Tests of the published rule's mechanics (energies, boosts, candidates by energy) pin
``config=PUBLISHED``, ``SynapseConfig.published()``. Their worked numbers: one
reinforcement at strength 1 gives an edge weight of 0.3 (learning rate 0.3 × 1), so a
seed sends 1.0 × 0.3 × 0.6 (spread rate) = 0.18 to its neighbour, above the 0.15
injection threshold. The first 3 hits are seeds.

The other tests run with the default, the ACT-R rule; the section "the default rule"
works its numbers.
"""

from __future__ import annotations

import asyncio
import copy
import logging
import math
from collections.abc import Sequence
from datetime import datetime
from typing import Any

import numpy as np
import pytest
from langchain_core.callbacks import (
    AsyncCallbackManagerForRetrieverRun,
    BaseCallbackHandler,
    CallbackManagerForRetrieverRun,
)
from langchain_core.documents import Document
from langchain_core.embeddings import DeterministicFakeEmbedding
from langchain_core.retrievers import BaseRetriever
from langchain_core.runnables import RunnableLambda
from langchain_core.stores import InMemoryStore
from langchain_core.vectorstores import InMemoryVectorStore
from langchain_synapse_retriever import SynapseRetriever, document_id
from pydantic import Field, ValidationError

from synapse_retriever import (
    InvalidTypeError,
    InvalidValueError,
    NotASynapseDatabaseError,
    SynapseConfig,
    SynapseStore,
    content_id,
)

PUBLISHED = SynapseConfig.published()
UPSTREAM = ["a", "b", "c", "d", "e"]  # the upstream's ranking, best first
ABSENT = ["x", "y"]  # in the corpus, never returned by the upstream


class ListRetriever(BaseRetriever):
    """Returns the same Document objects every time; records what it was called with."""

    docs: list[Document]
    calls: list[dict[str, Any]] = Field(default_factory=list)

    def _get_relevant_documents(
        self, query: str, *, run_manager: CallbackManagerForRetrieverRun, **kwargs: Any
    ) -> list[Document]:
        self.calls.append({"query": query, **kwargs})
        return list(self.docs)

    async def _aget_relevant_documents(
        self, query: str, *, run_manager: AsyncCallbackManagerForRetrieverRun, **kwargs: Any
    ) -> list[Document]:
        self.calls.append({"query": query, "async": True, **kwargs})
        return list(self.docs)


@pytest.fixture
def corpus() -> dict[str, Document]:
    return {
        name: Document(page_content=f"text of {name}", id=name, metadata={"name": name})
        for name in UPSTREAM + ABSENT
    }


@pytest.fixture
def upstream(corpus: dict[str, Document]) -> ListRetriever:
    return ListRetriever(docs=[corpus[name] for name in UPSTREAM])


@pytest.fixture
def docstore(corpus: dict[str, Document]) -> InMemoryStore:
    store = InMemoryStore()
    store.mset(list(corpus.items()))
    return store


def make(upstream: Any, **fields: Any) -> SynapseRetriever:
    return SynapseRetriever(base_retriever=upstream, **{"store": ":memory:", **fields})


def ids(docs: list[Document]) -> list[str | None]:
    return [doc.id for doc in docs]


# -- cold graph and counts ---------------------------------------------------------------


def test_cold_graph_returns_the_upstream_documents_themselves(
    upstream: ListRetriever, docstore: InMemoryStore
) -> None:
    before = copy.deepcopy(upstream.docs)
    result = make(upstream, docstore=docstore).invoke("q")
    assert all(out is doc for out, doc in zip(result, upstream.docs, strict=True))
    assert result == before


UNSTORABLE = ["https://example.com/?q=" + "a" * 3000, "a\x00b", "\ud800"]  # no node ids


@pytest.mark.parametrize("config", [None, PUBLISHED, SynapseConfig(injection_enabled=False)])
def test_documents_whose_ids_no_store_could_hold_pass_through(config: Any) -> None:
    # a 3,000-byte URL as an id raised InvalidValueError on a cold graph, injection off too
    docs = [Document("x", id="ok"), *(Document(f"doc {i}", id=i) for i in UNSTORABLE)]
    fields = {} if config is None else {"config": config}
    retriever = make(RunnableLambda(lambda q: docs), **fields)
    assert all(out is doc for out, doc in zip(retriever.invoke("q"), docs, strict=True))
    retriever.record_usage(["ok", "z"])  # warm: the unknown ids are hits like any other
    out = retriever.invoke("q")
    assert len(out) == 4 and out[0] is docs[0]


def test_unrelated_edges_change_nothing(upstream: ListRetriever, docstore: InMemoryStore) -> None:
    retriever = make(upstream, docstore=docstore, config=PUBLISHED)
    retriever.record_usage(["x", "y"])  # an edge that no hit reaches
    result = retriever.invoke("q")
    assert all(out is doc for out, doc in zip(result, upstream.docs, strict=True))


@pytest.mark.parametrize(("k", "expected"), [(None, 5), (1, 1), (3, 3), (4, 4), (5, 5), (9, 5)])
def test_output_has_min_k_upstream_documents(
    upstream: ListRetriever, docstore: InMemoryStore, k: int | None, expected: int
) -> None:
    retriever = make(upstream, docstore=docstore)
    retriever.record_usage(["a", "x"])
    retriever.record_usage(["a", "y"])  # two candidates, enough to fill any free slot
    assert len(retriever.invoke("q", k=k)) == expected
    assert len(make(upstream, docstore=docstore, k=k).invoke("q")) == expected


def test_k_truncates_before_recall_and_is_never_forwarded(
    upstream: ListRetriever, docstore: InMemoryStore
) -> None:
    retriever = make(upstream, docstore=docstore, k=5)
    retriever.record_usage(["a", "x"])
    assert ids(retriever.invoke("q", k=4)) == ["a", "b", "c", "x"]  # x displaced d, not e
    assert upstream.calls == [{"query": "q"}]


def test_invoke_k_overrides_the_field(upstream: ListRetriever) -> None:
    assert ids(make(upstream, k=2).invoke("q", k=4)) == ["a", "b", "c", "d"]
    assert ids(make(upstream).invoke("q", k=np.int64(2))) == ["a", "b"]  # was InvalidTypeError


def test_a_falsy_id_in_metadata_is_an_id() -> None:
    # {"row": 0} fell back to the content hash, {"row": 1} gave "1"
    assert document_id(Document("first", metadata={"row": 0}), "row") == "0"
    assert document_id(Document("blank", metadata={"row": ""}), "row").startswith("sha256:")


@pytest.mark.parametrize("k", [0, -1, 1.5, True])
def test_bad_k_is_refused(upstream: ListRetriever, k: Any) -> None:
    error = InvalidTypeError if isinstance(k, (bool, float)) else InvalidValueError
    with pytest.raises(error, match="k must be"):  # typed, as the core's errors are
        make(upstream).invoke("q", k=k)
    with pytest.raises(ValidationError):
        make(upstream, k=k)


def test_fewer_than_two_upstream_documents_come_back_as_they_are(
    corpus: dict[str, Document],
) -> None:
    single = ListRetriever(docs=[corpus["a"]])
    retriever = make(single, docstore=lambda node: corpus.get(node))
    retriever.record_usage(["a", "x"])
    assert retriever.invoke("q")[0] is corpus["a"]
    assert make(ListRetriever(docs=[])).invoke("q") == []


# -- injection and boosting ----------------------------------------------------------------


def test_a_co_used_document_displaces_the_weakest_hit_with_its_reasons(
    upstream: ListRetriever, docstore: InMemoryStore, corpus: dict[str, Document]
) -> None:
    retriever = make(upstream, docstore=docstore, config=PUBLISHED)
    assert retriever.record_usage([corpus["a"], corpus["x"]]) == 1
    result = retriever.invoke("q")
    assert ids(result) == ["a", "b", "c", "d", "x"]
    assert result[:4] == upstream.docs[:4]
    injected = result[4]
    assert injected.page_content == "text of x"
    assert injected.metadata == {
        "name": "x",
        "synapse_origin": "injected",
        "synapse_energy": 0.18,  # 0.3 × 0.6
        "synapse_path": "a -> x",
        "synapse_displaced": "e",
    }
    assert corpus["x"].metadata == {"name": "x"}  # the docstore's object is untouched
    assert docstore.mget(["x"])[0].metadata == {"name": "x"}


def test_upstream_documents_are_never_mutated(
    upstream: ListRetriever, docstore: InMemoryStore
) -> None:
    before = copy.deepcopy(upstream.docs)
    retriever = make(upstream, docstore=docstore, config=PUBLISHED)
    retriever.record_usage(["a", "d"])  # d is boosted
    retriever.record_usage(["b", "x"])  # x is injected
    result = retriever.invoke("q")
    assert upstream.docs == before
    boosted = result[3]
    assert boosted.id == "d" and boosted is not upstream.docs[3]
    assert boosted.metadata["synapse_origin"] == "boosted"
    assert boosted.metadata["synapse_path"] == "a -> d"
    assert "synapse_displaced" not in boosted.metadata


def test_without_a_docstore_only_boosts(upstream: ListRetriever) -> None:
    retriever = make(upstream, config=PUBLISHED)  # docstore=None
    retriever.record_usage(["a", "x"])
    retriever.record_usage(["a", "e"])
    result = retriever.invoke("q")
    assert ids(result) == UPSTREAM
    assert result[4].metadata["synapse_origin"] == "boosted"
    assert result[:4] == upstream.docs[:4]


@pytest.mark.parametrize("config", [None, PUBLISHED], ids=["default", "published"])
def test_an_id_the_docstore_cannot_return_never_displaces_anything(
    upstream: ListRetriever, corpus: dict[str, Document], config: SynapseConfig | None
) -> None:
    retriever = make(upstream, docstore=lambda node: corpus.get(node), config=config)
    # the first candidate, but unresolvable: published, ghost is stronger (energy 0.36 against
    # 0.18); by default both have the same activation and ghost comes first by id
    retriever.record_usage(["a", "ghost"], strength=2.0)
    retriever.record_usage(["a", "x"])
    result = retriever.invoke("q")
    assert ids(result) == ["a", "b", "c", "d", "x"]


def test_scores_in_metadata_drive_recall_and_are_updated(corpus: dict[str, Document]) -> None:
    scores = {"a": 0.9, "b": 0.8, "c": 0.7, "d": 0.65, "e": 0.5}
    docs = [corpus[n].model_copy(update={"metadata": {"score": s}}) for n, s in scores.items()]
    retriever = make(ListRetriever(docs=docs), score_key="score", config=PUBLISHED)
    retriever.record_usage(["a", "d"])
    retriever.record_usage(["a", "d"])  # weight 0.3 + 0.3 = 0.6: energy 0.36
    result = retriever.invoke("q")
    assert ids(result) == ["a", "b", "d", "c", "e"]  # d: 0.65 + 0.3 × 0.36 = 0.758 > 0.7
    assert math.isclose(result[2].metadata["score"], 0.758, abs_tol=1e-6)
    assert docs[3].metadata == {"score": 0.65}
    # Without score_key the same history only annotates: rank scores cannot lift d past c.
    assert ids(make(ListRetriever(docs=docs), store=retriever.store).invoke("q")) == UPSTREAM


def test_unsorted_scores_are_kept_and_an_injected_document_takes_its_victims(
    corpus: dict[str, Document],
) -> None:
    scores = {"a": 0.2, "b": 0.9, "c": 0.5, "d": 0.4, "e": 0.1}  # e.g. after a reranker
    docs = [corpus[n].model_copy(update={"metadata": {"score": s}}) for n, s in scores.items()]
    retriever = make(ListRetriever(docs=docs), score_key="score", docstore=corpus.get)
    retriever.record_usage(["a", "x"])
    result = retriever.invoke("q")
    assert ids(result) == ["a", "b", "c", "d", "x"]  # rank scores drove recall: x took e's slot
    assert result[:4] == docs[:4]
    assert result[4].metadata["score"] == 0.1  # e's score, not a rank score
    assert corpus["x"].metadata == {"name": "x"}


def test_a_boosted_document_loses_annotations_it_came_with(corpus: dict[str, Document]) -> None:
    stale = {"synapse_origin": "injected", "synapse_displaced": "old", "name": "d"}
    docs = [corpus[n] for n in "abc"] + [Document(page_content="d", id="d", metadata=stale)]
    docs.append(corpus["e"])
    retriever = make(ListRetriever(docs=docs), config=PUBLISHED)
    retriever.record_usage(["a", "d"])
    boosted = retriever.invoke("q")[3]
    assert boosted.metadata == {
        "name": "d",
        "synapse_origin": "boosted",
        "synapse_energy": 0.18,  # 0.3 × 0.6
        "synapse_path": "a -> d",
    }
    assert docs[3].metadata == stale


class CountingStore(InMemoryStore):
    """Records the ids each mget / amget call asks for."""

    def __init__(self) -> None:
        super().__init__()
        self.asked: list[list[str]] = []

    def mget(self, keys: Any) -> list[Document | None]:
        self.asked.append(list(keys))
        return super().mget(keys)

    async def amget(self, keys: Any) -> list[Document | None]:
        self.asked.append(["async", *keys])
        return InMemoryStore.mget(self, keys)  # not self.mget: that would record twice


@pytest.mark.asyncio
async def test_candidates_are_fetched_a_few_at_a_time(upstream: ListRetriever) -> None:
    docstore = CountingStore()
    docstore.mset([(n, Document(page_content=f"text of {n}", id=n)) for n in ["k2", "k3", "k4"]])
    retriever = make(upstream, docstore=docstore, config=PUBLISHED)
    for i in range(10):  # ten candidates, k9 the strongest: energy 0.3 × (1 + i / 10) × 0.6
        retriever.record_usage(["a", f"k{i}"], strength=1 + i / 10)
    batches = [["k9", "k8", "k7", "k6"], ["k5", "k4", "k3", "k2"]]  # 2 × max_inject each
    assert ids(retriever.invoke("q")) == ["a", "b", "c", "k4", "k3"]  # k1, k0 never asked
    assert docstore.asked == batches
    docstore.asked.clear()
    assert ids(await retriever.ainvoke("q")) == ["a", "b", "c", "k4", "k3"]
    assert docstore.asked == [["async", *batch] for batch in batches]  # the native amget


# -- the default rule (ACT-R) ---------------------------------------------------------------
#
# record_usage runs on the clock, and invoke follows within a second: every use is "just
# now", its age clamped to 1 s, so one use has the base level B = ln (1 / 86400)^−0.5 =
# 0.5 × ln 86400 = 5.6834 (ages in days). A slow machine only ages it: within a minute,
# B >= 0.5 × ln 1440 = 3.6366. Hits never used have −6 and defend with the keep bonus 3:
# −3. Without score_key the hits' weights are their rank scores 1, 0.8, 0.6, 0.4, 0.2.

JUST_NOW = 0.5 * math.log(86400)  # 5.6834
WITHIN_A_MINUTE = 0.5 * math.log(1440)  # 3.6366


def test_by_default_recently_used_documents_unrelated_to_the_query_are_never_injected(
    upstream: ListRetriever, docstore: InMemoryStore
) -> None:
    retriever = make(upstream, docstore=docstore)
    retriever.record_usage(["x", "y"])  # nothing ties x and y to the query's documents
    assert retriever.invoke("q") == upstream.docs  # the association gate: nothing to inject


def test_the_recency_preset_injects_recently_used_documents_unasked(
    upstream: ListRetriever, docstore: InMemoryStore
) -> None:
    retriever = make(upstream, docstore=docstore, config=SynapseConfig.recency())
    retriever.record_usage(["x", "y"])  # nothing ties x and y to the query's documents
    result = retriever.invoke("q")
    # x and y: B = 5.6834, no association; both beat the −3 of e and d (ties: the later
    # position first) and take their slots, x (first by id) the better one
    assert ids(result) == ["a", "b", "c", "x", "y"]
    assert result[:3] == upstream.docs[:3]
    assert [doc.metadata["synapse_displaced"] for doc in result[3:]] == ["d", "e"]
    for doc in result[3:]:
        assert doc.metadata["synapse_origin"] == "injected"
        assert doc.metadata["synapse_path"] == ""  # reached from no hit
        assert WITHIN_A_MINUTE <= doc.metadata["synapse_energy"] <= JUST_NOW + 1e-6


def test_by_default_a_co_used_document_adds_its_association_with_the_hits(
    upstream: ListRetriever, docstore: InMemoryStore, corpus: dict[str, Document]
) -> None:
    retriever = make(upstream, docstore=docstore)
    retriever.record_usage([corpus["a"], corpus["x"]])
    retriever.record_usage(["y", "ghost"])  # ghost: not in the docstore
    result = retriever.invoke("q")
    # x: B = 5.6834 plus its association with the hits: it met a in 1 of N = 2 events, each
    # used once: S = ln(1 × 2 / (1 × 1)) = 0.6931, times a's weight 1 over all the hits'
    # weights 3.0: 0.2310. y and ghost met no hit: gated out, however recent.
    # x beats the weakest victim e (−3) and takes its slot
    assert ids(result) == ["a", "b", "c", "d", "x"]
    injected = result[4]
    assert injected.metadata["synapse_path"] == "a -> x"
    assert injected.metadata["synapse_displaced"] == "e"
    association = math.log(2) / 3.0
    energy = injected.metadata["synapse_energy"]
    assert WITHIN_A_MINUTE + association <= energy <= JUST_NOW + association + 1e-6
    assert corpus["x"].metadata == {"name": "x"}  # the docstore's object is untouched


def test_by_default_a_cold_store_and_a_store_without_docstore_change_nothing(
    upstream: ListRetriever, docstore: InMemoryStore
) -> None:
    cold = make(upstream, docstore=docstore).invoke("q")
    assert all(out is doc for out, doc in zip(cold, upstream.docs, strict=True))
    retriever = make(upstream)  # docstore=None: nothing can be injected, nothing is boosted
    retriever.record_usage(["a", "x"])
    retriever.record_usage(["a", "e"])
    result = retriever.invoke("q")
    assert all(out is doc for out, doc in zip(result, upstream.docs, strict=True))


# -- strict token budget -------------------------------------------------------------------


def test_strict_budget_skips_an_injection_that_would_add_tokens(
    upstream: ListRetriever, corpus: dict[str, Document]
) -> None:
    long = corpus["x"].model_copy(update={"page_content": "many more words than the victim"})
    short = corpus["y"]  # "text of y": 3 tokens, as many as the victim "text of e"
    resolve = {"x": long, "y": short}.get
    kwargs = {"docstore": resolve, "token_budget": "strict", "config": PUBLISHED}
    retriever = make(upstream, **kwargs)
    retriever.record_usage(["a", "x"], strength=2.0)  # x is the stronger candidate
    retriever.record_usage(["a", "y"])
    assert ids(retriever.invoke("q", k=4)) == ["a", "b", "c", "y"]
    assert ids(make(upstream, store=retriever.store, docstore=resolve).invoke("q", k=4)) == [
        "a",
        "b",
        "c",
        "x",
    ]


def test_strict_budget_uses_the_given_token_counter(
    upstream: ListRetriever, corpus: dict[str, Document]
) -> None:
    seen: list[str] = []

    def count(text: str) -> int:
        seen.append(text)
        return 1 if text == "text of x" else 5

    retriever = make(upstream, docstore=corpus.get, token_budget="strict", token_counter=count)
    retriever.record_usage(["a", "x"])
    assert ids(retriever.invoke("q")) == ["a", "b", "c", "d", "x"]
    assert "text of x" in seen and "text of e" in seen


def test_strict_budget_counts_chunks_of_one_source_at_their_own_tokens() -> None:
    # linked by id_key, the two chunks of d.py share an id; the 9-word one is the weakest
    # hit. Counted by id, both cost 9 words: x (9 words) and y (3 words) took both slots,
    # 3 + 3 + 3 + 1 + 9 = 19 words became 3 + 3 + 3 + 3 + 9 = 21.
    chunks = [("a.py", "a a a"), ("b.py", "b b b"), ("c.py", "c c c"), ("d.py", "d")]
    docs = [Document(text, metadata={"source": name}) for name, text in chunks]
    docs.append(Document("d " * 9, metadata={"source": "d.py"}))
    extra = {
        "x.py": Document("x " * 9, metadata={"source": "x.py"}),
        "y.py": Document("y y y", metadata={"source": "y.py"}),
    }
    retriever = make(
        ListRetriever(docs=docs),
        id_key="source",
        docstore=extra.get,
        token_budget="strict",
        token_counter=lambda text: len(text.split()),
        config=PUBLISHED,
    )
    retriever.record_usage(["a.py", "x.py"], strength=2.0)  # E(x) 0.36: the last slot
    retriever.record_usage(["a.py", "y.py"])  # E(y) 0.18: the 1-word chunk's slot, 3 > 1
    out = retriever.invoke("q")
    assert [doc.page_content for doc in out] == ["a a a", "b b b", "c c c", "d", "x " * 9]
    assert sum(len(doc.page_content.split()) for doc in out) == 19


def test_token_budget_accepts_only_strict(upstream: ListRetriever) -> None:
    with pytest.raises(ValidationError, match="strict"):
        make(upstream, token_budget="loose")


# -- ids -------------------------------------------------------------------------------


def test_document_id_prefers_id_then_metadata_then_content_hash() -> None:
    assert document_id(Document(page_content="t", id="i", metadata={"src": "s"}), "src") == "i"
    assert document_id(Document(page_content="t", metadata={"src": "s"}), "src") == "s"
    assert document_id(Document(page_content="t", metadata={"src": "s"})) == content_id("t")
    assert document_id(Document(page_content="t")) == content_id("t")


def test_documents_without_ids_are_linked_by_metadata_key() -> None:
    docs = [Document(page_content=f"text {n}", metadata={"source": n}) for n in UPSTREAM]
    extra = Document(page_content="text x", metadata={"source": "x"})
    retriever = make(ListRetriever(docs=docs), id_key="source", docstore={"x": extra}.get)
    retriever.record_usage([docs[0], extra])
    result = retriever.invoke("q")
    assert [doc.metadata["source"] for doc in result] == ["a", "b", "c", "d", "x"]


# -- async, batch, vector store docstore -----------------------------------------------------


@pytest.mark.asyncio
async def test_sync_and_async_return_the_same_documents(
    upstream: ListRetriever, docstore: InMemoryStore
) -> None:
    retriever = make(upstream, docstore=docstore)
    retriever.record_usage(["a", "x"])
    retriever.record_usage(["b", "d"])
    expected = retriever.invoke("q")
    assert ids(expected) == ["a", "b", "c", "d", "x"]
    assert await retriever.ainvoke("q") == expected
    assert await retriever.ainvoke("q", k=4) == retriever.invoke("q", k=4)
    assert upstream.calls[1] == {"query": "q", "async": True}  # the upstream's native async


@pytest.mark.asyncio
async def test_batch_and_abatch(upstream: ListRetriever, docstore: InMemoryStore) -> None:
    retriever = make(upstream, docstore=docstore)
    retriever.record_usage(["a", "x"])
    single = retriever.invoke("q")
    assert retriever.batch(["q", "r"]) == [single, single]
    assert await retriever.abatch(["q", "r"]) == [single, single]


class AsyncOnlyVectorStore(InMemoryVectorStore):
    """Fails if the async path falls back to the sync get_by_ids."""

    async_calls: int = 0

    def get_by_ids(self, ids: Any, /) -> list[Document]:
        raise AssertionError("the async path must use aget_by_ids")

    async def aget_by_ids(self, ids: Any, /) -> list[Document]:
        self.async_calls += 1
        return InMemoryVectorStore.get_by_ids(self, ids)


@pytest.mark.asyncio
async def test_async_resolves_injected_ids_with_aget_by_ids(corpus: dict[str, Document]) -> None:
    vectors = AsyncOnlyVectorStore(DeterministicFakeEmbedding(size=8))
    vectors.add_documents(list(corpus.values()))
    retriever = make(ListRetriever(docs=[corpus[n] for n in UPSTREAM]), docstore=vectors)
    retriever.record_usage(["a", "x"])
    result = await retriever.ainvoke("q")
    assert ids(result) == ["a", "b", "c", "d", "x"]
    assert result[4].metadata["synapse_displaced"] == "e"
    assert vectors.async_calls == 1


@pytest.mark.asyncio
async def test_a_docstore_document_that_names_another_id_is_not_injected(
    corpus: dict[str, Document],
) -> None:
    # the docstore's entry for x is b's document (keys and ids out of step): injected, it
    # put b in the output twice
    wrong = InMemoryStore()
    wrong.mset([("x", corpus["b"]), ("y", corpus["y"].model_copy(update={"id": None}))])
    for docstore in (wrong, {"x": corpus["b"]}.get):
        retriever = make(ListRetriever(docs=[corpus[n] for n in UPSTREAM]), docstore=docstore)
        retriever.record_usage(["a", "x"])
        assert ids(retriever.invoke("q")) == UPSTREAM
        assert ids(await retriever.ainvoke("q")) == UPSTREAM
    retriever = make(ListRetriever(docs=[corpus[n] for n in UPSTREAM]), docstore=wrong)
    retriever.record_usage(["a", "y"])  # an entry that names no id is taken as asked
    assert [doc.page_content for doc in retriever.invoke("q")][-1] == "text of y"
    # keyed by id_key, its documents carrying a vector store's UUIDs: still x's document
    keyed = InMemoryStore()
    keyed.mset([("x", Document("text of x", id="5f1c-uuid", metadata={"name": "x"}))])
    upstream = ListRetriever(docs=[corpus[n].model_copy(update={"id": None}) for n in UPSTREAM])
    retriever = make(upstream, docstore=keyed, id_key="name")
    retriever.record_usage(["a", "x"])
    assert [doc.metadata["name"] for doc in retriever.invoke("q")] == ["a", "b", "c", "d", "x"]


def test_a_vector_store_docstore_resolves_by_id(corpus: dict[str, Document]) -> None:
    vectors = InMemoryVectorStore(DeterministicFakeEmbedding(size=8))
    vectors.add_documents(list(corpus.values()))
    retriever = make(ListRetriever(docs=[corpus[n] for n in UPSTREAM]), docstore=vectors)
    retriever.record_usage(["a", "x"])
    assert ids(retriever.invoke("q")) == ["a", "b", "c", "d", "x"]


def test_an_injected_document_without_an_id_comes_back_with_the_one_it_was_fetched_by(
    upstream: ListRetriever,
) -> None:
    pages = {"x": Document("the key loader")}  # a docstore of documents without ids
    retriever = make(upstream, docstore=pages.get)
    retriever.record_usage(["a", "x"])
    docs = retriever.invoke("q")
    assert ids(docs) == ["a", "b", "c", "d", "x"]
    assert docs[-1].page_content == "the key loader" and pages["x"].id is None  # a copy
    # used and fed back, it reinforces x, not a node named by its content's hash
    retriever.record_usage([docs[0], docs[-1]])
    assert sorted(retriever.store.graph().nodes()) == ["a", "x"]
    assert retriever.store.edge("a", "x").activation_count == 2  # type: ignore[union-attr]


def test_a_parent_document_retrievers_docstore_injects_its_parents() -> None:
    from langchain_classic.retrievers import ParentDocumentRetriever
    from langchain_text_splitters import CharacterTextSplitter

    parents = [
        Document(f"part one of file {n}. part two of file {n}.", id=f"f{n}.py") for n in range(8)
    ]
    search = ParentDocumentRetriever(
        vectorstore=InMemoryVectorStore(DeterministicFakeEmbedding(size=16)),
        docstore=InMemoryStore(),
        child_splitter=CharacterTextSplitter(separator=". ", chunk_size=20, chunk_overlap=0),
        search_kwargs={"k": 4},
    )
    # keyed by the parents' own ids, as the how-to says: the ids the graph learns
    search.add_documents(parents, ids=[doc.id for doc in parents])
    retriever = make(search, docstore=search.docstore)
    found = retriever.invoke("part one of file 3")
    assert found and all(doc.id in {p.id for p in parents} for doc in found)
    absent = next(p for p in parents if p.id not in ids(found))
    retriever.record_usage([found[0], absent])
    warm = retriever.invoke("part one of file 3")
    assert len(warm) == len(found) and warm[-1].id == absent.id
    assert warm[-1].metadata["synapse_origin"] == "injected"


def test_a_runnable_upstream_works(corpus: dict[str, Document]) -> None:
    search = RunnableLambda(lambda query: [corpus[n] for n in UPSTREAM])
    retriever = make(search, docstore=corpus.get)
    retriever.record_usage(["a", "x"])
    assert ids(retriever.invoke("q")) == ["a", "b", "c", "d", "x"]


class FailingStore(InMemoryStore):
    """A docstore whose answers are wrong (``answer``) or that raises."""

    def __init__(self, answer: Any) -> None:
        super().__init__()
        self.answer = answer

    def mget(self, keys: Sequence[str]) -> list[Any]:
        if isinstance(self.answer, Exception):
            raise self.answer
        return self.answer  # type: ignore[no-any-return]


@pytest.mark.parametrize(
    ("docstore", "logged"),
    [
        (lambda node: "not a document", "docstore returned 'not a document' for id 'x'"),
        (FailingStore(answer=RuntimeError("docstore down")), "docstore down"),
        (FailingStore(answer=None), "docstore returned NoneType None for 1 ids"),
        (FailingStore(answer=[None, None]), "docstore returned 2 answers for 1 ids"),
    ],
    ids=["not-a-document", "raises", "none", "too-many"],
)
def test_a_docstore_that_fails_displaces_nothing_and_is_logged(
    upstream: ListRetriever, docstore: Any, logged: str, caplog: pytest.LogCaptureFixture
) -> None:
    # the whole retrieval failed, the upstream's results with it (LlamaIndex's postprocessor
    # logged it and went on, as the docs promise: an id that cannot be fetched displaces
    # nothing); a None or a list of another length raised raw TypeError or zip's ValueError
    retriever = make(upstream, docstore=docstore)
    retriever.record_usage(["a", "x"])
    with caplog.at_level(logging.WARNING):
        assert retriever.invoke("q") == upstream.invoke("q")
    assert "could not fetch ['x']: they displace nothing" in caplog.text
    assert logged in caplog.text


def test_an_upstream_that_returns_no_documents_is_an_error() -> None:
    with pytest.raises(InvalidTypeError, match="must return Documents, got str 'a'"):
        make(RunnableLambda(lambda query: ["a", "b"])).invoke("q")
    # a str was read as its characters: "got ['n', 'o', 'p', 'e']"
    with pytest.raises(InvalidTypeError, match="a list of Documents, got str 'nope'"):
        make(RunnableLambda(lambda query: "nope")).invoke("q")
    with pytest.raises(InvalidTypeError, match="a list of Documents, got Document"):
        make(RunnableLambda(lambda query: Document("one"))).invoke("q")


# -- errors and construction -----------------------------------------------------------------


class Boom(RuntimeError):
    pass


def test_upstream_errors_propagate_unchanged() -> None:
    error = Boom("upstream down")

    def fail(query: str) -> list[Document]:
        raise error

    retriever = make(RunnableLambda(fail))
    with pytest.raises(Boom) as caught:
        retriever.invoke("q")
    assert caught.value is error


@pytest.mark.asyncio
async def test_upstream_errors_propagate_unchanged_async() -> None:
    error = Boom("upstream down")

    async def fail(query: str) -> list[Document]:
        raise error

    with pytest.raises(Boom) as caught:
        await make(RunnableLambda(fail)).ainvoke("q")
    assert caught.value is error


def test_a_store_path_that_cannot_be_opened_fails_at_construction(tmp_path: Any) -> None:
    bad = tmp_path / "notes.txt"
    bad.write_text("not a database")
    # the library's own errors, as SynapseStore raises them (they were ValidationErrors)
    with pytest.raises(NotASynapseDatabaseError, match=r"notes\.txt"):
        make(ListRetriever(docs=[]), store=str(bad))
    with pytest.raises(NotASynapseDatabaseError, match="is a directory"):
        make(ListRetriever(docs=[]), store=tmp_path)  # a directory
    assert bad.read_text() == "not a database"


@pytest.mark.parametrize(
    "bad", [{"k": 0}, {"active_namespace": "team"}, {"token_budget": "loose"}, {"config": "x"}]
)
def test_a_bad_field_opens_no_store_at_the_path(tmp_path: Any, bad: dict[str, Any]) -> None:
    path = tmp_path / "synapses.db"
    with pytest.raises(ValidationError, match=next(iter(bad))):
        make(ListRetriever(docs=[]), store=path, **bad)
    assert list(tmp_path.iterdir()) == []  # no file created, nothing left open
    assert make(ListRetriever(docs=[]), store=path).store.path == str(path)


class _WithOwnField(SynapseRetriever):
    folders: int = Field(default=1, ge=1)  # declared after store: validated after it


def test_a_subclass_field_refused_opens_no_store_at_the_path(tmp_path: Any) -> None:
    # the store, validated before the subclass's fields, was opened: a file made, left open
    path = tmp_path / "synapses.db"
    with pytest.raises(ValidationError, match="folders"):
        _WithOwnField(base_retriever=ListRetriever(docs=[]), store=path, folders=0)
    assert list(tmp_path.iterdir()) == []
    retriever = _WithOwnField(base_retriever=ListRetriever(docs=[]), store=path, folders=2)
    assert retriever.store.path == str(path) and retriever.folders == 2
    retriever.store.close()


@pytest.mark.parametrize(
    ("keys", "refused"),
    [
        ({"score_key": "synapse_energy"}, "score_key may not be 'synapse_energy'"),
        ({"id_key": "synapse_origin"}, "id_key may not be 'synapse_origin'"),
        ({"id_key": "source", "score_key": "source"}, "score_key may not be id_key 'source'"),
    ],
)
def test_keys_that_a_copy_would_overwrite_are_refused(keys: dict[str, str], refused: str) -> None:
    with pytest.raises(ValidationError, match=refused):
        make(ListRetriever(docs=[]), **keys)
    make(ListRetriever(docs=[]), id_key="source", score_key="similarity")  # distinct: taken


def test_a_store_path_is_opened_and_persists(tmp_path: Any, upstream: ListRetriever) -> None:
    path = tmp_path / "synapses.db"
    first = make(upstream, store=path, config=SynapseConfig.actr(max_inject=1))
    assert first.store.config.recall.max_inject == 1
    first.record_usage(["a", "x"])
    first.store.close()
    with SynapseStore(path) as reopened:
        assert math.isclose(reopened.weight("a", "x"), 0.3, rel_tol=1e-6)


@pytest.mark.parametrize(
    "config",
    [{"max_inject": 1}, {"recall": {"rule": "actr", "keep_bonus": -1}}, "published"],
    ids=["unknown-key", "bad-value", "a-name"],
)
def test_a_config_that_is_not_a_synapse_config_is_refused(
    upstream: ListRetriever, config: Any
) -> None:
    # pydantic made a dict into a SynapseConfig: an unknown key dropped, a bad value of
    # the ACT-R rule read as the published rule
    with pytest.raises(ValidationError, match="instance of SynapseConfig"):
        make(upstream, config=config)


def test_a_query_or_usage_that_is_none_is_refused_by_name(upstream: ListRetriever) -> None:
    retriever = make(upstream)
    with pytest.raises(InvalidTypeError, match="query must be given, got None"):
        retriever.invoke(None)  # type: ignore[arg-type]
    with pytest.raises(InvalidTypeError, match="query must be given, got None"):
        asyncio.run(retriever.ainvoke(None))  # type: ignore[arg-type]
    assert upstream.calls == []  # the upstream was not asked
    with pytest.raises(InvalidTypeError, match="list of ids or Document objects, got None"):
        retriever.record_usage(None)  # type: ignore[arg-type]


def test_a_query_the_upstream_takes_goes_to_it_as_it_is() -> None:
    search = RunnableLambda(lambda given: [Document(given["q"], id="a")])  # a dict's reader
    assert make(search).invoke({"q": "hello"})[0].page_content == "hello"  # type: ignore[arg-type]


def test_config_must_match_a_given_store(upstream: ListRetriever) -> None:
    store = SynapseStore(":memory:")
    assert make(upstream, store=store, config=SynapseConfig()).store is store
    with pytest.raises(ValidationError, match="config differs") as refused:
        make(upstream, store=store, config=SynapseConfig.actr(max_inject=1))
    assert refused.value.errors()[0]["loc"] == ("store",)  # the field named


def test_recorded_usage_with_an_event_id_is_counted_once_however_often_sent(
    upstream: ListRetriever,
) -> None:
    # a timed-out arecord_usage may have written: its retry counted the use twice
    retriever = make(upstream)
    assert retriever.record_usage(["a", "x"], event_id="task:7") == 1
    assert retriever.record_usage(["a", "x"], event_id="task:7") == 0
    assert asyncio.run(retriever.arecord_usage(["a", "x"], event_id="task:7")) == 0
    assert asyncio.run(retriever.arecord_usage(["a", "x"], event_id="task:8")) == 1
    assert retriever.store.edge("a", "x").activation_count == 2  # type: ignore[union-attr]


def test_record_usage_defaults_to_the_active_namespace(upstream: ListRetriever) -> None:
    retriever = make(upstream, active_namespace="branch:feature")
    assert retriever.record_usage(["a", "b", "c"]) == 3  # 3 pairs
    assert retriever.store.edge("a", "b", "branch:feature") is not None
    assert retriever.store.edge("a", "b", "personal") is None
    retriever.record_usage(["a", "x"], namespace="shared")
    assert retriever.store.edge("a", "x", "shared") is not None


def test_a_bad_active_namespace_fails_at_construction(upstream: ListRetriever) -> None:
    with pytest.raises(ValidationError, match="namespace must be 'personal'"):
        make(upstream, active_namespace="team")


def test_record_usage_refuses_bad_input(upstream: ListRetriever) -> None:
    retriever = make(upstream)
    with pytest.raises(TypeError, match="must be a list of ids or Document objects, got 'ab'"):
        retriever.record_usage("ab")  # not the ids 'a' and 'b'
    with pytest.raises(TypeError, match="must be a list of ids or Document objects"):
        retriever.record_usage(upstream.docs[0])  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="expected an id or a Document, got int 3"):
        retriever.record_usage(["a", 3])  # type: ignore[list-item]
    with pytest.raises(ValueError, match="strength must be a finite number"):
        retriever.record_usage(["a", "b"], strength=float("nan"))
    with pytest.raises(ValueError, match="namespace"):
        retriever.record_usage(["a", "b"], namespace="team")


def test_arecord_usage_refuses_what_record_usage_refuses(upstream: ListRetriever) -> None:
    retriever = make(upstream)
    retriever.record_usage(["a", "b"])
    refused: list[tuple[Any, dict[str, Any]]] = [
        ("ab", {}),  # not the ids 'a' and 'b'
        (upstream.docs[0], {}),
        (["a", 3], {}),
        (["a", "b"], {"strength": float("nan")}),
        (["a", "b"], {"namespace": "team"}),
        (["a", "b"], {"at": datetime(2025, 1, 1)}),  # naive: in which time zone?
    ]
    for used, kwargs in refused:
        with pytest.raises((TypeError, ValueError)) as sync:
            retriever.record_usage(used, **kwargs)
        with pytest.raises((TypeError, ValueError)) as awaited:
            asyncio.run(retriever.arecord_usage(used, **kwargs))
        assert (type(awaited.value), str(awaited.value)) == (type(sync.value), str(sync.value))
    edge = retriever.store.edge("a", "b")
    assert edge is not None and edge.activation_count == 1  # nothing refused was written


def test_arecord_usage_never_blocks_the_loop_while_another_process_holds_the_lock(
    upstream: ListRetriever, tmp_path: Any
) -> None:
    # record_usage from a coroutine waited for the file's write lock on the loop's thread:
    # another process holding it 3 s held the loop 3 s (up to busy_timeout_s, 30 s)
    from loop_stalls import STALL_BOUND_S, file_write_locked, least_stall

    runs: list[tuple[bool, int, int]] = []  # waited for the lock, edges written, activations

    async def scenario() -> None:
        with SynapseStore(tmp_path / f"s{len(runs)}.db") as store:
            retriever = make(upstream, store=store)
            async with file_write_locked(store.path, hold_s=0.5):
                write = asyncio.ensure_future(retriever.arecord_usage(["a", "x"]))
                await asyncio.sleep(0.1)
                waited = not write.done()
                written = await write
            edge = store.edge("a", "x")
            runs.append((waited, written, 0 if edge is None else edge.activation_count))

    assert least_stall(scenario) <= STALL_BOUND_S
    assert runs[-1] == (True, 1, 1)  # it waited for the lock, then wrote the edge once


# -- tracing -----------------------------------------------------------------------------------


class Runs(BaseCallbackHandler):
    def __init__(self) -> None:
        self.starts: list[tuple[str, Any, Any]] = []

    def on_retriever_start(
        self, serialized: Any, query: str, *, run_id: Any, parent_run_id: Any = None, **kw: Any
    ) -> None:
        self.starts.append((kw.get("name", ""), run_id, parent_run_id))


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_the_upstream_run_nests_under_the_synapse_run(upstream: ListRetriever, mode: str) -> None:
    runs = Runs()
    retriever = make(upstream)
    config: Any = {"callbacks": [runs]}
    if mode == "sync":
        retriever.invoke("q", config)
    else:
        import asyncio

        asyncio.run(retriever.ainvoke("q", config))
    (outer, outer_id, outer_parent), (inner, _, inner_parent) = runs.starts
    assert (outer, inner) == ("SynapseRetriever", "ListRetriever")
    assert outer_parent is None and inner_parent == outer_id


def test_extra_invoke_kwargs_reach_the_upstream(upstream: ListRetriever) -> None:
    make(upstream).invoke("q", k=2, filter={"lang": "py"})
    assert upstream.calls == [{"query": "q", "filter": {"lang": "py"}}]


def test_every_field_is_described() -> None:
    own = set(SynapseRetriever.model_fields) - {"name", "tags", "metadata"}
    assert {"base_retriever", "store", "docstore", "id_key", "k", "active_namespace"} <= own
    assert all(SynapseRetriever.model_fields[f].description for f in own)


def test_record_usage_takes_the_time_of_use() -> None:
    retriever = SynapseRetriever(base_retriever=RunnableLambda(lambda query: []), store=":memory:")
    day = 86_400
    assert retriever.record_usage(["a", "x"], at=0) == 1
    assert retriever.record_usage([Document("...", id="a"), "x"], at=10 * day) == 1
    edge = retriever.store.edge("a", "x")
    assert edge is not None and edge.last_reinforced_at == 10 * day
    # a day after 10: 0.3 decayed over 10 days then + 0.3, as two reinforce(at=) calls leave it
    twin = SynapseStore(":memory:")
    twin.reinforce(["a", "x"], at=0)
    twin.reinforce(["a", "x"], at=10 * day)
    assert retriever.store.weight("a", "x", at=11 * day) == twin.weight("a", "x", at=11 * day)
    with pytest.raises(ValueError, match="earlier"):
        retriever.record_usage(["a", "x"], at=day)  # before the edge's last reinforcement


def test_ainvoke_counts_tokens_off_the_loop_under_a_strict_budget(
    upstream: ListRetriever, docstore: InMemoryStore
) -> None:
    # the caller's token counter ran on the loop: a 0.1 s counter held it 1.2 s
    import time

    from loop_stalls import STALL_BOUND_S, least_stall

    def slow_count(text: str) -> int:
        time.sleep(0.02)
        return len(text.split())

    retriever = make(upstream, docstore=docstore, token_budget="strict", token_counter=slow_count)
    retriever.record_usage(["a", "x"])

    async def scenario() -> None:
        assert ids(await retriever.ainvoke("q"))[-1] == "x"

    assert least_stall(scenario) <= STALL_BOUND_S


def test_ainvoke_never_blocks_the_loop_while_a_write_waits(
    upstream: ListRetriever, tmp_path: Any
) -> None:
    # a long write holds the store (a big batch; on PostgreSQL a write waiting for a row
    # another process locked): recall waits for it too, in a worker thread, not on the loop
    from loop_stalls import STALL_BOUND_S, least_stall, store_busy

    store = SynapseStore(tmp_path / "s.db")
    store.reinforce(["a", "x"], at=0)
    retriever = make(upstream, store=store)

    async def scenario() -> None:
        async with store_busy(store):
            assert ids(await retriever.ainvoke("q"))[0] == "a"

    assert least_stall(scenario) <= STALL_BOUND_S


def test_the_upstream_gets_the_callers_config(upstream: ListRetriever) -> None:
    # a configurable upstream (here its k) is configured through the wrapper as it would be
    # without it; the wrapper's own run stays the parent of the upstream's
    from langchain_core.runnables import ConfigurableField

    class Ranked(BaseRetriever):
        k: int = 4

        def _get_relevant_documents(
            self, query: str, *, run_manager: CallbackManagerForRetrieverRun
        ) -> list[Document]:
            return upstream.docs[: self.k]

    configurable = Ranked().configurable_fields(k=ConfigurableField(id="upstream_k"))
    config: Any = {"configurable": {"upstream_k": 2}, "tags": ["mine"]}
    retriever = make(configurable)
    assert ids(configurable.invoke("q", config=config)) == ["a", "b"]
    assert ids(retriever.invoke("q", config=config)) == ["a", "b"]

    async def both() -> list[list[str | None]]:
        return [ids(await retriever.ainvoke("q", config=config)), ids(retriever.invoke("q"))]

    assert asyncio.run(both()) == [["a", "b"], ["a", "b", "c", "d"]]
