"""SynapseMemoryRetriever for LlamaIndex: real nodes, a real query engine, metadata kept out."""

from __future__ import annotations

import time
from typing import Any

from llama_index.core.llms import (
    CompletionResponse,
    CompletionResponseGen,
    CustomLLM,
    LLMMetadata,
    MockLLM,
)
from llama_index.core.llms.callbacks import llm_completion_callback
from llama_index.core.query_engine import RetrieverQueryEngine
from llama_index.core.schema import MetadataMode, NodeWithScore
from llama_index.postprocessor.synapse import SynapseMemoryRetriever, llm_relation_extractor
from loop_stalls import STALL_BOUND_S, SlowEmbedder, least_stall

from synapse_retriever.conversation import ConversationMemory

TURNS = [
    ("incident", "user", "Checkout returns HTTP 500 for EU customers."),
    ("incident", "assistant", "I will read the logs of payment_gateway.py."),
    ("incident", "user", "The traceback ends in validate_vat() in payment_gateway.py."),
    ("incident", "assistant", "Root cause: validate_vat() rejects the new VAT format."),
    ("incident", "user", "Agreed: we replace validate_vat() with vies_client.py."),
    ("week", "user", "Team lunch on Friday?"),
]


def filled(**kwargs: object) -> ConversationMemory:
    memory = ConversationMemory(":memory:", background=False, **kwargs)  # type: ignore[arg-type]
    start = time.time() - 3600 * len(TURNS)
    for i, (session, role, text) in enumerate(TURNS):
        memory.add_turn(text, role=role, session=session, at=start + 3600.0 * i)
    return memory


def test_nodes_carry_how_they_were_found_out_of_the_llms_view() -> None:
    with filled() as memory:
        retriever = SynapseMemoryRetriever(memory, similarity_top_k=5, mode="analytical")
        hits = retriever.retrieve("Why did we change validate_vat?")
    assert all(isinstance(hit, NodeWithScore) for hit in hits)
    by_id = {hit.node.node_id: hit for hit in hits}
    assert {"turn:1", "turn:4", "turn:5"} <= set(by_id)
    report = by_id["turn:1"].node
    assert report.metadata["origin"] == "graph"
    assert ["turn:1", "FOLLOWED_BY", "turn:2"] in report.metadata["path"]
    for mode in (MetadataMode.LLM, MetadataMode.EMBED):
        assert report.get_content(metadata_mode=mode) == TURNS[0][2]
    assert [hit.score for hit in hits] == sorted((hit.score for hit in hits), reverse=True)


def test_it_serves_a_real_query_engine() -> None:
    with filled() as memory:
        engine = RetrieverQueryEngine.from_args(
            SynapseMemoryRetriever(memory, similarity_top_k=3), llm=MockLLM(max_tokens=5)
        )
        response = engine.query("Why did we change validate_vat?")
    assert len(response.source_nodes) == 3
    assert all(n.node.metadata["mode"] == "analytical" for n in response.source_nodes)


def test_sessions_restrict_the_nodes() -> None:
    with filled() as memory:
        hits = SynapseMemoryRetriever(memory, similarity_top_k=6, sessions=["week"]).retrieve(
            "lunch on Friday?"
        )
    assert [hit.node.metadata["session"] for hit in hits] == ["week"]


def test_an_llm_that_does_not_answer_json_adds_no_relation() -> None:
    memory = filled(relations=llm_relation_extractor(MockLLM(max_tokens=4)))
    memory.consolidate()
    kinds = {t for _, _, t in memory.graph().edges(keys=True)}
    memory.close()
    assert kinds == {"FOLLOWED_BY", "MENTIONS"}


class JsonLLM(CustomLLM):
    """An LLM that answers every prompt with one JSON object, and keeps the prompts."""

    answer: str = '{"relations": [{"source": 1, "type": "SOLVED_BY", "target": 5}]}'
    prompts: list[str] = []  # noqa: RUF012 (a pydantic field)

    @property
    def metadata(self) -> LLMMetadata:
        return LLMMetadata()

    @llm_completion_callback()
    def complete(self, prompt: str, formatted: bool = False, **kwargs: Any) -> CompletionResponse:
        self.prompts.append(prompt)
        return CompletionResponse(text=self.answer)

    @llm_completion_callback()
    def stream_complete(
        self, prompt: str, formatted: bool = False, **kwargs: Any
    ) -> CompletionResponseGen:
        raise NotImplementedError


def test_an_llm_answers_relations_through_structured_predict() -> None:
    llm = JsonLLM(prompts=[])
    memory = filled(relations=llm_relation_extractor(llm))
    memory.consolidate()
    graph = memory.graph()
    memory.close()
    assert graph.has_edge("turn:1", "turn:5", key="SOLVED_BY")
    assert len(llm.prompts) == 1 and "schema" in llm.prompts[0]  # the structured path
    plain = JsonLLM(prompts=[])
    memory = filled(relations=llm_relation_extractor(plain, structured=False))
    memory.consolidate()
    memory.close()
    assert "schema" not in plain.prompts[0]


def test_a_model_names_the_mode() -> None:
    from llama_index.postprocessor.synapse import llm_mode_detector

    memory = filled(mode_detector=llm_mode_detector(JsonLLM(answer="creative", prompts=[])))
    with memory:
        assert {r.mode for r in memory.retrieve("the checkout bug", k=2)} == {"creative"}


def test_aretrieve_gives_what_retrieve_does_without_holding_up_the_loop() -> None:
    embedder = SlowEmbedder(0.3)
    memory = filled(embedder=embedder)
    retriever = SynapseMemoryRetriever(memory, similarity_top_k=3)
    query = "why does checkout fail for EU customers?"
    found: list[list[NodeWithScore]] = []

    async def scenario() -> None:
        found.append(await retriever.aretrieve(query))

    stall = least_stall(scenario)
    assert stall <= STALL_BOUND_S, f"the loop was held up {stall * 1000:.0f} ms"
    expected = retriever.retrieve(query)
    assert [(n.node.node_id, n.score, n.node.metadata) for n in found[-1]] == [
        (n.node.node_id, n.score, n.node.metadata) for n in expected
    ]
    assert len(expected) == 3
    memory.close()


def test_what_it_cannot_retrieve_with_is_refused_when_it_is_made() -> None:
    # None failed at the first query with a raw AttributeError; similarity_top_k=0 and an
    # unknown mode were taken, and refused at a query under another name (k)
    import pytest

    from synapse_retriever.errors import InvalidTypeError, InvalidValueError

    with pytest.raises(InvalidTypeError, match="memory must be a ConversationMemory, got NoneType"):
        SynapseMemoryRetriever(None)  # type: ignore[arg-type]
    with ConversationMemory() as memory:
        with pytest.raises(InvalidValueError, match="similarity_top_k must be an int >= 1, got 0"):
            SynapseMemoryRetriever(memory, similarity_top_k=0)
        with pytest.raises(InvalidValueError, match="mode must be one of"):
            SynapseMemoryRetriever(memory, mode="bogus")
        assert SynapseMemoryRetriever(memory, similarity_top_k=2, mode=None).similarity_top_k == 2


def test_sessions_are_read_once_when_it_is_made() -> None:
    # a generator was kept as given: the first query used it up, and every later one
    # returned nothing; a list was kept as given and changed with the caller's; a bare str
    # was taken, and refused at the first query
    import pytest

    from synapse_retriever.errors import InvalidTypeError

    memory = filled()
    retriever = SynapseMemoryRetriever(memory, similarity_top_k=3, sessions=(s for s in ["week"]))
    for _ in range(2):
        assert [n.node.metadata["session"] for n in retriever.retrieve("lunch on Friday")] == [
            "week"
        ]
    chosen = ["week"]
    retriever = SynapseMemoryRetriever(memory, similarity_top_k=3, sessions=chosen)
    chosen.append("incident")
    assert retriever.sessions == ["week"]
    for bad in ("week", ["week", 3]):
        with pytest.raises(InvalidTypeError, match="sessions must be a sequence of str"):
            SynapseMemoryRetriever(memory, sessions=bad)  # type: ignore[arg-type]
    memory.close()
