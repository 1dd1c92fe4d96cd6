"""SynapsePostprocessor: count-preserving recall over NodeWithScore lists.

Tests of the published rule's mechanics (energies, boosts, candidates by energy, batches
of 2 × max_inject = 4) use the ``published`` fixture or ``config=PUBLISHED``,
``SynapseConfig.published()``: one reinforcement at strength 1 gives weight 0.3, so the
seed a sends 0.3 × 0.6 = 0.18 >= 0.15 to its neighbour. The others run with the default,
the ACT-R rule.
"""

from __future__ import annotations

import asyncio
import logging
import math
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from llama_index.core.bridge.pydantic import Field
from llama_index.core.schema import (
    BaseNode,
    MetadataMode,
    NodeRelationship,
    NodeWithScore,
    RelatedNodeInfo,
    TextNode,
)
from llama_index.core.storage.docstore import SimpleDocumentStore
from llama_index.core.vector_stores.types import (
    BasePydanticVectorStore,
    VectorStoreQuery,
    VectorStoreQueryResult,
)
from llama_index.postprocessor.synapse import SynapsePostprocessor, SynapseUsageHandler
from pydantic import ValidationError

from synapse_retriever import (
    ANNOTATION_KEYS,
    InvalidTypeError,
    SynapseConfig,
    SynapseStore,
    usable_scores,
)

IDS = "abcdefyz"
PUBLISHED = SynapseConfig.published()


def make_node(node_id: str, text: str | None = None, doc: str | None = None) -> TextNode:
    relationships = {NodeRelationship.SOURCE: RelatedNodeInfo(node_id=doc)} if doc else {}
    return TextNode(id_=node_id, text=text or f"text of {node_id}", relationships=relationships)


def ranked(ids: str, scores: list[float | None] | None = None) -> list[NodeWithScore]:
    values = scores if scores is not None else [1.0 - i / 10 for i in range(len(ids))]
    return [NodeWithScore(node=make_node(i), score=s) for i, s in zip(ids, values, strict=True)]


def ids_of(nodes: list[NodeWithScore]) -> list[str]:
    return [n.node.node_id for n in nodes]


def snapshot(nodes: list[NodeWithScore]) -> list[tuple[float | None, dict[str, Any]]]:
    return [(n.score, n.node.model_dump()) for n in nodes]


@pytest.fixture
def docstore() -> SimpleDocumentStore:
    store = SimpleDocumentStore()
    store.add_documents([make_node(i) for i in IDS])
    return store


@pytest.fixture
def synapse(docstore: SimpleDocumentStore) -> SynapsePostprocessor:
    return SynapsePostprocessor(store=SynapseStore(":memory:"), docstore=docstore)


@pytest.fixture
def published(docstore: SimpleDocumentStore) -> SynapsePostprocessor:
    """The postprocessor under the published rule."""
    return SynapsePostprocessor(store=":memory:", config=PUBLISHED, docstore=docstore)


def test_class_name_and_serialization_leave_out_live_objects(
    synapse: SynapsePostprocessor,
) -> None:
    assert SynapsePostprocessor.class_name() == "SynapsePostprocessor"
    data = synapse.to_dict()
    assert data["class_name"] == "SynapsePostprocessor"
    assert "store" not in data and "docstore" not in data
    assert data["id_mode"] == "node_id"


def test_cold_graph_returns_the_input_unchanged(synapse: SynapsePostprocessor) -> None:
    hits = ranked("abcd", [0.9, None, 0.95, 0.1])
    before = snapshot(hits)
    out = synapse.postprocess_nodes(hits)
    assert out is hits
    assert snapshot(out) == before


@pytest.mark.parametrize("config", [None, PUBLISHED, SynapseConfig(injection_enabled=False)])
def test_nodes_whose_ids_no_store_could_hold_pass_through(config: Any) -> None:
    # a node id of 3,000 characters raised InvalidValueError on a cold graph
    hits = [NodeWithScore(node=make_node(i), score=0.9 - n / 10)
            for n, i in enumerate(["ok", "a" * 3000, "a\x00b", "\ud800"])]  # fmt: skip
    fields = {} if config is None else {"config": config}
    postprocessor = SynapsePostprocessor(store=":memory:", **fields)
    before = snapshot(hits)
    assert postprocessor.postprocess_nodes(hits) is hits and snapshot(hits) == before
    postprocessor.record_usage(["ok", "z"])
    assert len(postprocessor.postprocess_nodes(hits)) == 4


def test_empty_input_stays_empty(synapse: SynapsePostprocessor) -> None:
    assert synapse.postprocess_nodes([]) == []


def test_co_used_node_takes_the_weakest_slot_and_says_why(published: SynapsePostprocessor) -> None:
    published.record_usage(["a", "z"])  # w 0.3: energy 0.3 × 0.6 = 0.18 >= 0.15
    out = published.postprocess_nodes(ranked("abcd", [0.9, 0.8, 0.7, 0.4]))
    assert ids_of(out) == ["a", "b", "c", "z"]
    injected = out[3]
    assert injected.score == 0.4  # the victim's
    notes = {k: v for k, v in injected.node.metadata.items() if k in ANNOTATION_KEYS}
    assert notes == {
        "synapse_origin": "injected",
        "synapse_energy": 0.18,
        "synapse_path": "a -> z",
        "synapse_displaced": "d",
    }
    for key in notes:
        assert key in injected.node.excluded_llm_metadata_keys
        assert key in injected.node.excluded_embed_metadata_keys
    assert "synapse" not in injected.node.get_content(metadata_mode=MetadataMode.LLM)
    assert "synapse" not in injected.node.get_content(metadata_mode=MetadataMode.EMBED)
    assert "synapse_origin" in injected.node.get_content(metadata_mode=MetadataMode.ALL)


def test_by_default_a_used_node_takes_the_weakest_slot_and_says_why(
    synapse: SynapsePostprocessor,
) -> None:
    synapse.record_usage(["a", "z"])
    out = synapse.postprocess_nodes(ranked("abcd", [0.9, 0.8, 0.7, 0.4]))
    # The default rule (ACT-R): z was used once, just now (age clamped to 1 s): B = 0.5 ×
    # ln 86400 = 5.683; no association from a single event (ln(1 × 1 / (1 × 1)) = 0).
    # b, c, d were never used: −6 + 3 (keep bonus) = −3; z takes the weakest slot, d's
    # (ties: the later position), and its score; a, the first hit, never moves.
    assert ids_of(out) == ["a", "b", "c", "z"]
    injected = out[3]
    assert injected.score == 0.4
    notes = {k: v for k, v in injected.node.metadata.items() if k in ANNOTATION_KEYS}
    energy = notes.pop("synapse_energy")
    assert notes == {
        "synapse_origin": "injected",
        "synapse_path": "a -> z",
        "synapse_displaced": "d",
    }
    assert 0.5 * math.log(1440) <= energy <= 0.5 * math.log(86400) + 1e-6  # used within a minute
    assert "synapse" not in injected.node.get_content(metadata_mode=MetadataMode.LLM)


def test_annotations_go_on_copies_never_on_the_upstreams_nodes(
    published: SynapsePostprocessor, docstore: SimpleDocumentStore
) -> None:
    published.record_usage(["a", "f"], strength=2.0)
    published.record_usage(["a", "z"], strength=2.0)
    hits = ranked("abcdef")
    hits[5].node.metadata["team"] = "auth"
    hits[5].node.excluded_llm_metadata_keys.append("team")
    before = snapshot(hits)
    out = published.postprocess_nodes(hits)
    assert snapshot(hits) == before
    boosted = next(n for n in out if n.node.node_id == "f")
    assert boosted.node.metadata["synapse_origin"] == "boosted"
    assert boosted.node is not hits[5].node and boosted is not hits[5]
    assert boosted.node.metadata["team"] == "auth"  # the upstream's metadata is kept
    assert boosted.node.excluded_llm_metadata_keys[0] == "team"
    assert "synapse_origin" not in docstore.get_node("z").metadata
    plain = next(n for n in out if n.node.node_id == "a")
    assert plain is hits[0]  # a plain vector hit is passed through as it came


def test_usable_scores_give_the_methods_scores(published: SynapsePostprocessor) -> None:
    published.record_usage(["a", "f"], strength=2.0)  # w 0.6: energy 0.36, boost 0.108
    scores: list[float | None] = [0.9, 0.8, 0.7, 0.6, 0.5, 0.4]
    out = published.postprocess_nodes(ranked("abcdef", scores))
    assert ids_of(out) == ["a", "b", "c", "d", "f", "e"]
    assert out[4].score == pytest.approx(0.4 + 0.3 * 0.36)  # 0.508 > e's 0.5


def test_missing_scores_stay_none_and_only_the_order_changes(
    published: SynapsePostprocessor,
) -> None:
    published.record_usage(["a", "f"], strength=2.0)
    published.record_usage(["b", "f"], strength=2.0)  # energy 0.72 from two seeds
    published.record_usage(["a", "z"], strength=2.0)
    out = published.postprocess_nodes(ranked("abcdef", [None] * 6))
    # rank scores 1, .83, .67, .5, .33, .17: f rises to .17 + .216 = .38 > e's .33,
    # then z (energy .36) takes the weakest slot, e's.
    assert ids_of(out) == ["a", "b", "c", "d", "f", "z"]
    assert [n.score for n in out] == [None] * 6


def test_unsorted_scores_are_kept_by_every_kept_node(synapse: SynapsePostprocessor) -> None:
    synapse.record_usage(["a", "z"])
    scores: list[float | None] = [0.2, 0.9, 0.5, 0.1]  # e.g. after a reranker
    out = synapse.postprocess_nodes(ranked("abcd", scores))
    assert ids_of(out) == ["a", "b", "c", "z"]
    assert [n.score for n in out] == [0.2, 0.9, 0.5, 0.1]  # z took d's slot and score


def test_unresolvable_candidate_displaces_nothing(synapse: SynapsePostprocessor) -> None:
    synapse.record_usage(["a", "unknown"], strength=2.0)
    hits = ranked("abcd")
    assert synapse.postprocess_nodes(hits) is hits


def test_an_unresolvable_candidate_lets_the_next_one_in(synapse: SynapsePostprocessor) -> None:
    synapse.record_usage(["a", "unknown"], strength=2.0)  # energy 0.36, strongest
    synapse.record_usage(["a", "y"])  # energy 0.18
    out = synapse.postprocess_nodes(ranked("abcd"))
    assert ids_of(out) == ["a", "b", "c", "y"]


def test_without_a_docstore_it_only_boosts() -> None:
    synapse = SynapsePostprocessor(store=":memory:")
    synapse.record_usage(["a", "z"], strength=2.0)
    hits = ranked("abcd")
    assert synapse.postprocess_nodes(hits) is hits


class BrokenVectorStore(BasePydanticVectorStore):
    """A remote vector store whose lookup by id fails (or, with nodes, works)."""

    stores_text: bool = True
    nodes: list[TextNode] = Field(default_factory=list)

    @property
    def client(self) -> Any:
        return None

    def add(self, nodes: Any, **kwargs: Any) -> list[str]:
        raise NotImplementedError

    def delete(self, ref_doc_id: str, **kwargs: Any) -> None:
        raise NotImplementedError

    def query(self, query: VectorStoreQuery, **kwargs: Any) -> VectorStoreQueryResult:
        raise NotImplementedError

    def get_nodes(self, node_ids: Any = None, filters: Any = None) -> list[BaseNode]:
        if not self.nodes:
            raise ConnectionError("remote store unreachable")
        return [n for n in self.nodes if n.node_id in (node_ids or [])]


def test_a_failing_fetch_displaces_nothing_and_warns(caplog: pytest.LogCaptureFixture) -> None:
    synapse = SynapsePostprocessor(store=":memory:", docstore=BrokenVectorStore())
    synapse.record_usage(["a", "z"])
    hits = ranked("abcd")
    with caplog.at_level(logging.WARNING):
        assert synapse.postprocess_nodes(hits) is hits
    assert "displace nothing" in caplog.text


@pytest.mark.asyncio
async def test_a_failing_async_fetch_displaces_nothing() -> None:
    synapse = SynapsePostprocessor(store=":memory:", docstore=BrokenVectorStore())
    synapse.record_usage(["a", "z"])
    hits = ranked("abcd")
    assert await synapse.apostprocess_nodes(hits) is hits


def test_a_vector_store_that_returns_nodes_by_id_feeds_injection() -> None:
    store = BrokenVectorStore(nodes=[make_node("z", "from the vector store")])
    synapse = SynapsePostprocessor(store=":memory:", docstore=store)
    synapse.record_usage(["a", "z"])
    out = synapse.postprocess_nodes(ranked("abcd"))
    assert ids_of(out) == ["a", "b", "c", "z"]
    assert out[3].node.get_content() == "from the vector store"


def test_a_callable_fetches_nodes_sync_and_async() -> None:
    asked: list[list[str]] = []

    def fetch(ids: list[str]) -> list[BaseNode]:
        asked.append(ids)
        return [make_node(i) for i in ids if i == "z"]

    synapse = SynapsePostprocessor(store=":memory:", docstore=fetch)
    synapse.record_usage(["a", "z"])
    assert ids_of(synapse.postprocess_nodes(ranked("abcd"))) == ["a", "b", "c", "z"]
    assert asked == [["z"]]


@pytest.mark.asyncio
async def test_an_async_callable_works_on_the_async_path_only(
    caplog: pytest.LogCaptureFixture,
) -> None:
    async def fetch(ids: list[str]) -> list[BaseNode]:
        return [make_node(i) for i in ids]

    synapse = SynapsePostprocessor(store=":memory:", docstore=fetch)
    synapse.record_usage(["a", "z"])
    out = await synapse.apostprocess_nodes(ranked("abcd"))
    assert ids_of(out) == ["a", "b", "c", "z"]
    hits = ranked("abcd")
    with caplog.at_level(logging.WARNING):
        assert synapse.postprocess_nodes(hits) is hits  # sync path: nothing to await with
    assert "async NodeFetcher" in caplog.text


def ten_candidates(synapse: SynapsePostprocessor) -> None:
    """a used once with each of k0 … k9; published, k9 is the strongest: energy
    0.3 × (1 + i / 10) × 0.6."""
    for i in range(10):
        synapse.record_usage(["a", f"k{i}"], strength=1 + i / 10)


BATCHES = [["k9", "k8", "k7", "k6"], ["k5", "k4", "k3", "k2"]]  # 2 × max_inject each


@pytest.mark.asyncio
async def test_candidates_are_fetched_a_few_at_a_time_sync_and_async() -> None:
    asked: list[list[str]] = []

    def fetch(ids: list[str]) -> list[BaseNode]:
        asked.append(ids)
        return [make_node(i) for i in ids if i in {"k2", "k3", "k4"}]

    async def afetch(ids: list[str]) -> list[BaseNode]:
        return fetch(ids)

    synapse = SynapsePostprocessor(store=":memory:", config=PUBLISHED, docstore=fetch)
    ten_candidates(synapse)
    assert ids_of(synapse.postprocess_nodes(ranked("abcde"))) == ["a", "b", "c", "k4", "k3"]
    assert asked == BATCHES  # k1 and k0 are never asked for
    asked.clear()
    synapse.docstore = afetch
    assert ids_of(await synapse.apostprocess_nodes(ranked("abcde"))) == ["a", "b", "c", "k4", "k3"]
    assert asked == BATCHES


def test_a_docstore_that_fails_midway_is_asked_no_more(caplog: pytest.LogCaptureFixture) -> None:
    asked: list[list[str]] = []

    def fetch(ids: list[str]) -> list[BaseNode]:
        asked.append(ids)
        if len(asked) > 1:
            raise ConnectionError("remote store unreachable")
        return [make_node("k7")]

    synapse = SynapsePostprocessor(store=":memory:", config=PUBLISHED, docstore=fetch)
    ten_candidates(synapse)
    with caplog.at_level(logging.WARNING):
        out = synapse.postprocess_nodes(ranked("abcde"))
    assert ids_of(out) == ["a", "b", "c", "d", "k7"]  # what came back before the failure
    assert asked == BATCHES  # and no third call
    assert "could not fetch ['k5', 'k4', 'k3', 'k2']: they displace nothing" in caplog.text


def test_a_boosted_node_loses_annotations_it_came_with(published: SynapsePostprocessor) -> None:
    published.record_usage(["a", "d"])
    hits = ranked("abcd")
    hits[3].node.metadata.update(synapse_origin="injected", synapse_displaced="old")
    out = published.postprocess_nodes(hits)
    assert {k: v for k, v in out[3].node.metadata.items() if k in ANNOTATION_KEYS} == {
        "synapse_origin": "boosted",
        "synapse_energy": 0.18,  # 0.3 × 0.6
        "synapse_path": "a -> d",
    }
    assert hits[3].node.metadata["synapse_displaced"] == "old"  # the input is untouched


@pytest.mark.asyncio
@pytest.mark.parametrize(
    ("config", "expected"),
    [
        # published: f (energy 0.36) is boosted to 0.5 + 0.3 × 0.36 = 0.608, past e's 0.6;
        # z (energy 0.18) then takes the weakest slot, e's
        (PUBLISHED, "abcdfz"),
        # default (ACT-R): a, f, b and z were each used once, just now (age clamped to 1 s):
        # B = ln (1 / 86400)^-0.5 = 5.683; z's association: it met b in one of N = 2 events,
        # each used once: S = ln(1 × 2 / (1 × 1)) = 0.693, weighted by b's score over a's
        # (0.9) over all the hits' weights (1 + 0.9 + ... + 0.5 = 4.5): A = 5.683 + 0.139.
        # c, d and e were never used: −6 + 3 (keep bonus) = −3 < A; e, the later of the
        # weakest, is displaced; nothing is boosted.
        (None, "abcdzf"),
    ],
    ids=["published", "default"],
)
async def test_sync_and_async_give_the_same_nodes(
    docstore: SimpleDocumentStore, config: SynapseConfig | None, expected: str
) -> None:
    synapse = SynapsePostprocessor(store=":memory:", config=config, docstore=docstore)
    synapse.record_usage(["a", "f"], strength=2.0)
    synapse.record_usage(["b", "z"])
    sync = synapse.postprocess_nodes(ranked("abcdef"))
    asynchronous = await synapse.apostprocess_nodes(ranked("abcdef"))
    assert ids_of(sync) == ids_of(asynchronous) == list(expected)
    assert [n.score for n in sync] == pytest.approx([n.score for n in asynchronous])  # decay


def test_a_fetched_node_that_maps_to_another_id_is_not_injected() -> None:
    synapse = SynapsePostprocessor(store=":memory:", docstore=lambda ids: [make_node("other")])
    synapse.record_usage(["a", "z"])
    hits = ranked("abcd")
    assert synapse.postprocess_nodes(hits) is hits


def test_ref_doc_id_mode_learns_and_injects_documents() -> None:
    chunks = {
        "a1": "A",
        "a2": "A",
        "b1": "B",
        "c1": "C",
        "d1": "D",
        "z1": "Z",
        "z2": "Z",
    }
    docstore = SimpleDocumentStore()
    docstore.add_documents([make_node(n, doc=doc) for n, doc in chunks.items()])
    synapse = SynapsePostprocessor(store=":memory:", docstore=docstore, id_mode="ref_doc_id")
    synapse.record_usage([docstore.get_node("a2"), docstore.get_node("z2")])
    assert synapse.store.weight("A", "Z") > 0  # documents, not chunks, are learned
    hits = [NodeWithScore(node=docstore.get_node(n), score=0.5) for n in ["a1", "a2", "b1", "d1"]]
    out = synapse.postprocess_nodes(hits)
    assert ids_of(out) == ["a1", "a2", "b1", "z1"]  # Z enters as its first node
    assert out[3].node.metadata["synapse_displaced"] == "D"
    assert synapse.node_id(out[3]) == "Z"


def test_ref_doc_id_mode_falls_back_to_node_id() -> None:
    synapse = SynapsePostprocessor(store=":memory:", id_mode="ref_doc_id")
    assert synapse.node_id(make_node("n1")) == "n1"
    assert synapse.node_id(make_node("n1", doc="D")) == "D"


def words(text: str) -> int:
    return len(text.split())


def test_strict_token_budget_refuses_an_injection_that_costs_more() -> None:
    docstore = SimpleDocumentStore()
    docstore.add_documents([make_node("z", "long " * 50)])
    synapse = SynapsePostprocessor(
        store=":memory:", docstore=docstore, token_budget="strict", token_counter=words
    )
    synapse.record_usage(["a", "z"])
    hits = ranked("abcd")  # 3 words each
    assert synapse.postprocess_nodes(hits) is hits
    synapse.token_budget = None
    assert ids_of(synapse.postprocess_nodes(ranked("abcd"))) == ["a", "b", "c", "z"]


def test_strict_token_budget_counts_each_chunk_of_a_document_at_its_own_tokens() -> None:
    # in ref_doc_id mode the two chunks of D share an id; the 9-word one is the weakest hit.
    # Counted by id, both cost 9 words and X (9 words) and Y (3 words) took both slots.
    docstore = SimpleDocumentStore()
    docstore.add_documents([make_node("x1", "x " * 9, doc="X"), make_node("y1", "y y y", doc="Y")])
    synapse = SynapsePostprocessor(
        store=":memory:",
        docstore=docstore,
        id_mode="ref_doc_id",
        token_budget="strict",
        token_counter=words,
        config=PUBLISHED,
    )
    synapse.record_usage(["A", "X"], strength=2.0)  # E(X) 0.36: the last slot
    synapse.record_usage(["A", "Y"])  # E(Y) 0.18: the 1-word chunk's slot, 3 words > 1
    texts = [("a1", "a a a", "A"), ("b1", "b b b", "B"), ("c1", "c c c", "C"), ("d1", "d", "D")]
    nodes = [make_node(n, text, doc=doc) for n, text, doc in texts]
    nodes.append(make_node("d2", "d " * 9, doc="D"))
    hits = [NodeWithScore(node=node, score=1.0 - i / 10) for i, node in enumerate(nodes)]
    out = synapse.postprocess_nodes(hits)
    assert ids_of(out) == ["a1", "b1", "c1", "d1", "x1"]
    assert sum(words(n.node.get_content()) for n in out) == 19  # as many as the hits


def test_strict_token_budget_lets_a_cheaper_injection_in(synapse: SynapsePostprocessor) -> None:
    synapse.token_budget = "strict"  # default counter: Settings.tokenizer, offline
    synapse.record_usage(["a", "z"])
    hits = ranked("abcd")
    hits[3].node.set_content("a weak hit that is much longer than the node replacing it")
    assert ids_of(synapse.postprocess_nodes(hits)) == ["a", "b", "c", "z"]
    hits[3].node.set_content("d")  # 1 token: "text of z" (3 words, 3 tokens or more) costs more
    assert synapse.postprocess_nodes(hits) is hits


@pytest.mark.parametrize(
    "bad", [{"id_mode": "doc"}, {"active_namespace": "team"}, {"token_budget": "loose"}]
)
def test_a_bad_field_opens_no_store_at_the_path(tmp_path: Any, bad: dict[str, Any]) -> None:
    path = tmp_path / "synapses.db"
    with pytest.raises(ValidationError, match=next(iter(bad))):
        SynapsePostprocessor(store=path, **bad)
    assert list(tmp_path.iterdir()) == []  # no file created, nothing left open
    assert SynapsePostprocessor(store=path).store.path == str(path)


class _WithOwnField(SynapsePostprocessor):
    folders: int = Field(default=1, ge=1)  # declared after store: validated after it


def test_a_subclass_field_refused_opens_no_store_at_the_path(tmp_path: Any) -> None:
    # the store, validated before the subclass's fields, was opened: a file made, left open
    path = tmp_path / "synapses.db"
    with pytest.raises(ValidationError, match="folders"):
        _WithOwnField(store=path, folders=0)
    assert list(tmp_path.iterdir()) == []
    synapse = _WithOwnField(store=path, folders=2)
    assert synapse.store.path == str(path) and synapse.folders == 2
    synapse.store.close()


def test_store_as_a_path_with_a_config(tmp_path: Any) -> None:
    path = tmp_path / "synapses.db"
    synapse = SynapsePostprocessor(store=path, config=SynapseConfig.actr(max_inject=1))
    assert synapse.store.config.recall.max_inject == 1
    synapse.record_usage(["a", "b"])
    assert SynapseStore(path).weight("a", "b") > 0


def test_config_that_contradicts_the_store_is_refused() -> None:
    with pytest.raises(ValidationError, match="config differs") as refused:
        SynapsePostprocessor(
            store=SynapseStore(":memory:"), config=SynapseConfig.actr(max_inject=1)
        )
    assert refused.value.errors()[0]["loc"] == ("store",)  # the field named


def test_what_is_not_a_scored_node_is_refused_by_type(synapse: SynapsePostprocessor) -> None:
    with pytest.raises(InvalidTypeError, match="nodes must be NodeWithScore objects, got str 'a'"):
        synapse.postprocess_nodes(["a"], query_str="q")  # type: ignore[list-item]
    for nodes, shown in ((None, "NoneType None"), ("ab", "str 'ab'"), (iter([]), "list_iterator")):
        with pytest.raises(
            InvalidTypeError,
            match=rf"nodes must be a list \(or tuple\) of NodeWithScore, got {shown}",
        ):
            synapse.postprocess_nodes(nodes, query_str="q")  # type: ignore[arg-type]
    with pytest.raises(InvalidTypeError, match="got NoneType None"):
        asyncio.run(synapse.apostprocess_nodes(None, query_str="q"))  # type: ignore[arg-type]


def test_from_dict_takes_the_store_again_and_without_it_says_so(tmp_path: Path) -> None:
    # a new user's probe: to_dict() keeps no store, and from_dict() then failed with
    # pydantic's bare "store: Field required"
    from synapse_retriever import InvalidValueError

    path = str(tmp_path / "synapses.db")
    synapse = SynapsePostprocessor(store=path, active_namespace="branch:x", token_budget="strict")
    synapse.record_usage(["a", "b"])
    data = synapse.to_dict()
    synapse.store.close()
    assert "store" not in data
    with pytest.raises(InvalidValueError, match=r"from_dict needs store=: to_dict\(\) keeps no"):
        SynapsePostprocessor.from_dict(data)
    again = SynapsePostprocessor.from_dict(data, store=path)
    try:
        assert (again.active_namespace, again.token_budget) == ("branch:x", "strict")
        assert again.store.weight("a", "b", namespace="branch:x") > 0
    finally:
        again.store.close()


def test_pickling_is_refused_and_leaves_the_postprocessor_whole() -> None:
    # LlamaIndex's BaseComponent pickled what it could and deleted the rest (the store, the
    # docstore) from this very object: record_usage and postprocessing then raised
    # AttributeError, and the unpickled copy had no store either
    import copy
    import pickle

    synapse = SynapsePostprocessor(store=":memory:", docstore=lambda ids: [])
    with pytest.raises(TypeError, match="cannot pickle a SynapsePostprocessor: it holds an open"):
        pickle.dumps(synapse)
    with pytest.raises(TypeError):
        pickle.dumps(SynapseUsageHandler(postprocessor=synapse))
    with pytest.raises(TypeError):
        copy.deepcopy(synapse)
    synapse.record_usage(["a", "b"])
    assert synapse.store.weight("a", "b") > 0 and synapse.docstore is not None


def test_bad_namespace_and_id_mode_are_refused() -> None:
    with pytest.raises(ValidationError, match="namespace"):
        SynapsePostprocessor(store=":memory:", active_namespace="team")
    with pytest.raises(ValidationError):
        SynapsePostprocessor(store=":memory:", id_mode="hash")


def test_record_usage_takes_nodes_scored_nodes_and_ids(synapse: SynapsePostprocessor) -> None:
    assert synapse.record_usage([NodeWithScore(node=make_node("a")), make_node("b"), "c"]) == 3
    assert synapse.store.weight("a", "c") > 0


def test_recorded_usage_with_an_event_id_is_counted_once_however_often_sent(
    synapse: SynapsePostprocessor,
) -> None:
    # a timed-out arecord_usage may have written: its retry counted the use twice
    assert synapse.record_usage(["a", "b"], event_id="task:7") == 1
    assert synapse.record_usage(["a", "b"], event_id="task:7") == 0
    assert asyncio.run(synapse.arecord_usage(["a", "b"], event_id="task:7")) == 0
    assert asyncio.run(synapse.arecord_usage(["a", "b"], event_id="task:8")) == 1
    assert synapse.store.edge("a", "b").activation_count == 2  # type: ignore[union-attr]


def test_record_usage_writes_to_the_active_namespace() -> None:
    synapse = SynapsePostprocessor(store=":memory:", active_namespace="branch:auth")
    synapse.record_usage(["a", "b"])
    assert synapse.store.weight("a", "b", namespace="branch:auth") > 0
    assert synapse.store.weight("a", "b", namespace="personal") == 0


def test_record_usage_refuses_a_bare_string_or_node(synapse: SynapsePostprocessor) -> None:
    with pytest.raises(TypeError, match="must be a list"):
        synapse.record_usage("ab")
    with pytest.raises(TypeError, match="must be a list"):
        synapse.record_usage(make_node("a"))  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="expected an id or a BaseNode/NodeWithScore, got int 1"):
        synapse.record_usage([1, 2])  # type: ignore[list-item]


def test_arecord_usage_refuses_what_record_usage_refuses(synapse: SynapsePostprocessor) -> None:
    synapse.record_usage(["a", "b"])
    refused: list[tuple[Any, dict[str, Any]]] = [
        ("ab", {}),  # not the ids 'a' and 'b'
        (make_node("a"), {}),
        ([1, 2], {}),
        (["a", "b"], {"strength": float("nan")}),
        (["a", "b"], {"namespace": "team"}),
        (["a", "b"], {"at": datetime(2025, 1, 1)}),  # naive: in which time zone?
    ]
    for used, kwargs in refused:
        with pytest.raises((TypeError, ValueError)) as sync:
            synapse.record_usage(used, **kwargs)
        with pytest.raises((TypeError, ValueError)) as awaited:
            asyncio.run(synapse.arecord_usage(used, **kwargs))
        assert (type(awaited.value), str(awaited.value)) == (type(sync.value), str(sync.value))
    edge = synapse.store.edge("a", "b")
    assert edge is not None and edge.activation_count == 1  # nothing refused was written


def test_arecord_usage_never_blocks_the_loop_while_another_process_holds_the_lock(
    tmp_path: Any,
) -> None:
    # record_usage from a coroutine waited for the file's write lock on the loop's thread:
    # another process holding it 3 s held the loop 3 s (up to busy_timeout_s, 30 s)
    from loop_stalls import STALL_BOUND_S, file_write_locked, least_stall

    runs: list[tuple[bool, int, int]] = []  # waited for the lock, edges written, activations

    async def scenario() -> None:
        with SynapseStore(tmp_path / f"s{len(runs)}.db") as store:
            synapse = SynapsePostprocessor(store=store)
            async with file_write_locked(store.path, hold_s=0.5):
                write = asyncio.ensure_future(synapse.arecord_usage([make_node("a"), "x"]))
                await asyncio.sleep(0.1)
                waited = not write.done()
                written = await write
            edge = store.edge("a", "x")
            runs.append((waited, written, 0 if edge is None else edge.activation_count))

    assert least_stall(scenario) <= STALL_BOUND_S
    assert runs[-1] == (True, 1, 1)  # it waited for the lock, then wrote the edge once


EDGES = st.lists(st.lists(st.sampled_from(IDS), min_size=2, max_size=4), max_size=6)
SCORES = st.one_of(
    st.none(), st.floats(min_value=0, max_value=1, allow_nan=False, allow_infinity=False)
)


@settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    events=EDGES,
    hits=st.lists(st.tuples(st.sampled_from(IDS), SCORES), min_size=1, max_size=7),
    config=st.sampled_from([SynapseConfig(), PUBLISHED]),
)
def test_never_more_nodes_out_than_in_and_upstream_untouched(
    docstore: SimpleDocumentStore,
    events: list[list[str]],
    hits: list[tuple[str, float | None]],
    config: SynapseConfig,
) -> None:
    synapse = SynapsePostprocessor(store=":memory:", config=config, docstore=docstore)
    for event in events:
        synapse.record_usage(event, strength=2.0)
    nodes = [NodeWithScore(node=make_node(i), score=s) for i, s in hits]
    before = snapshot(nodes)
    out = synapse.postprocess_nodes(nodes)
    assert len(out) == len(nodes)
    assert snapshot(nodes) == before
    scored = usable_scores([s for _, s in hits])
    kept = [n for n in out if n.node.metadata.get("synapse_origin") != "injected"]
    injected = [n for n in out if n.node.metadata.get("synapse_origin") == "injected"]
    assert len(injected) <= config.recall.max_inject  # 2, by default and published
    assert {n.node.node_id for n in injected}.isdisjoint(i for i, _ in hits)
    if not scored:  # scores are the upstream's, None included: only the order changes
        key = lambda s: (s is None, s or 0.0)  # noqa: E731
        assert sorted(map(key, (n.score for n in out))) == sorted(key(s) for _, s in hits)
        upstream: dict[str, list[float | None]] = {}
        for node_id, score in hits:
            upstream.setdefault(node_id, []).append(score)
        assert all(n.score in upstream[n.node.node_id] for n in kept)


def test_record_usage_takes_the_time_of_use() -> None:
    synapse = SynapsePostprocessor(store=":memory:")
    day = 86_400
    assert synapse.record_usage(["a", make_node("x")], at=0) == 1
    assert synapse.record_usage(["a", "x"], at=10 * day) == 1
    edge = synapse.store.edge("a", "x")
    assert edge is not None and edge.last_reinforced_at == 10 * day
    with pytest.raises(ValueError, match="earlier"):
        synapse.record_usage(["a", "x"], at=day)  # before the edge's last reinforcement


def test_the_async_path_calls_a_sync_fetcher_and_a_strict_counter_off_the_loop(
    docstore: SimpleDocumentStore,
) -> None:
    # a sync NodeFetcher (a database behind it) and the token counter ran on the loop:
    # 0.5 s each held it 0.5 s
    import time

    from loop_stalls import STALL_BOUND_S, least_stall

    def slow_fetch(ids: list[str]) -> list[Any]:
        time.sleep(0.2)
        return docstore.get_nodes(ids, raise_error=False)

    def slow_count(text: str) -> int:
        time.sleep(0.02)
        return len(text.split())

    for fields in ({}, {"token_budget": "strict", "token_counter": slow_count}):
        synapse = SynapsePostprocessor(store=":memory:", docstore=slow_fetch, **fields)
        synapse.record_usage(["a", "z"])

        async def scenario(synapse: SynapsePostprocessor = synapse) -> None:
            assert ids_of(await synapse.apostprocess_nodes(ranked("abcd")))[-1] == "z"

        assert least_stall(scenario) <= STALL_BOUND_S, fields


def test_the_async_path_never_blocks_the_loop_while_a_write_waits(
    docstore: SimpleDocumentStore, tmp_path: Any
) -> None:
    # a long write holds the store (a big batch; on PostgreSQL a write waiting for a row
    # another process locked): recall waits for it too, in a worker thread, not on the loop
    from loop_stalls import STALL_BOUND_S, least_stall, store_busy

    store = SynapseStore(tmp_path / "s.db")
    store.reinforce(["a", "x"], at=0)
    synapse = SynapsePostprocessor(store=store, docstore=docstore)

    async def scenario() -> None:
        async with store_busy(store):
            assert ids_of(await synapse.apostprocess_nodes(ranked("abcd")))[0] == "a"

    assert least_stall(scenario) <= STALL_BOUND_S
