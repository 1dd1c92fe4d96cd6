"""SynapseMemoryRetriever against the standard LangChain retriever suite and a real file."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path
from typing import Any
from uuid import UUID

import pytest
from langchain_core.callbacks import BaseCallbackHandler
from langchain_core.documents import Document
from langchain_core.language_models import FakeListChatModel
from langchain_core.retrievers import BaseRetriever
from langchain_core.runnables import RunnableConfig
from langchain_synapse_retriever import SynapseMemoryRetriever, chat_model_relation_extractor
from langchain_tests.integration_tests import RetrieversIntegrationTests
from loop_stalls import STALL_BOUND_S, SlowEmbedder, least_stall

from synapse_retriever.conversation import ConversationMemory

TURNS = [
    ("incident", "user", "Checkout returns HTTP 500 for EU customers."),
    ("incident", "assistant", "I will read the logs of payment_gateway.py."),
    ("incident", "user", "The traceback ends in validate_vat() in payment_gateway.py."),
    ("incident", "assistant", "Root cause: validate_vat() rejects the new VAT format."),
    ("incident", "user", "Agreed: we replace validate_vat() with vies_client.py."),
    ("week", "user", "Team lunch on Friday?"),
    ("week", "assistant", "Sushi works for everyone."),
    ("week", "user", "The slides need a fresher palette."),
]


def filled(path: str | Path = ":memory:", **kwargs: Any) -> ConversationMemory:
    memory = ConversationMemory(path, background=False, **kwargs)
    start = time.time() - 3600 * len(TURNS)  # an hour apart, ending now
    for i, (session, role, text) in enumerate(TURNS):
        memory.add_turn(text, role=role, session=session, at=start + 3600.0 * i)
    return memory


class TestSynapseMemoryRetrieverStandard(RetrieversIntegrationTests):
    """The standard suite: k in the constructor and per call, sync and async."""

    pytestmark = [  # noqa: RUF012
        pytest.mark.asyncio,
        pytest.mark.filterwarnings("ignore:.*marked with '@pytest.mark.asyncio'"),
    ]

    @property
    def retriever_constructor(self) -> type[BaseRetriever]:
        return SynapseMemoryRetriever

    @property
    def retriever_constructor_params(self) -> dict[str, Any]:
        return {"memory": filled()}

    @property
    def retriever_query_example(self) -> str:
        return "Why did we change validate_vat?"


def test_documents_carry_origin_mode_and_path(tmp_path: Path) -> None:
    memory = filled(tmp_path / "chat.db")
    retriever = SynapseMemoryRetriever(memory=memory, k=5, mode="analytical")
    docs = retriever.invoke("Why did we change validate_vat?")
    memory.close()
    assert all(isinstance(d, Document) for d in docs)
    by_id = {d.id: d for d in docs}
    assert {"1", "4", "5"} <= set(by_id)  # the report, the cause, the fix
    report = by_id["1"].metadata
    assert report["origin"] == "graph" and report["mode"] == "analytical"
    assert report["session"] == "incident" and report["role"] == "user"
    assert ["turn:1", "FOLLOWED_BY", "turn:2"] in report["path"]


def test_per_call_mode_and_sessions() -> None:
    memory = filled()
    retriever = SynapseMemoryRetriever(memory=memory, k=8)
    docs = retriever.invoke("lunch ideas?", mode="creative", sessions=["week"])
    memory.close()
    assert docs and {d.metadata["session"] for d in docs} == {"week"}
    assert {d.metadata["mode"] for d in docs} == {"creative"}


def test_a_chat_model_extracts_relations_in_consolidation() -> None:
    model = FakeListChatModel(
        responses=['{"relations": [{"source": 1, "type": "SOLVED_BY", "target": 5}]}']
    )
    memory = filled(relations=chat_model_relation_extractor(model))
    memory.consolidate()
    assert memory.graph().has_edge("turn:1", "turn:5", key="SOLVED_BY")
    memory.close()


def test_structured_output_is_used_where_the_model_has_it() -> None:
    from langchain_core.runnables import RunnableLambda
    from langchain_synapse_retriever.memory_retriever import RELATIONS_SCHEMA

    class StructuredModel(FakeListChatModel):
        """A chat model whose structured output answers the schema with a dict."""

        def with_structured_output(self, schema: Any, **kwargs: Any) -> Any:  # type: ignore[override]
            assert schema is RELATIONS_SCHEMA
            return RunnableLambda(
                lambda prompt: {
                    "relations": [{"source": 1, "type": "SOLVED_BY", "target": 5}],
                    "decisions": [{"turn": 5, "decision": "use vies_client"}],
                }
            )

    memory = filled(relations=chat_model_relation_extractor(StructuredModel(responses=["x"])))
    memory.consolidate()
    graph = memory.graph()
    memory.close()
    assert graph.has_edge("turn:1", "turn:5", key="SOLVED_BY")
    assert graph.has_edge("turn:5", "decision:use vies_client", key="MENTIONS")


def test_a_model_that_answers_the_mode_is_asked() -> None:
    from langchain_synapse_retriever import chat_model_mode_detector

    detector = chat_model_mode_detector(FakeListChatModel(responses=["analytical"]))
    memory = filled(mode_detector=detector)
    results = memory.retrieve("tell me about checkout", k=2)
    memory.close()
    assert {r.mode for r in results} == {"analytical"}


class _Runs(BaseCallbackHandler):
    """Which run started under which: (kind, run id, parent run id), and with what tags."""

    def __init__(self) -> None:
        self.started: list[tuple[str, UUID, UUID | None]] = []
        self.tagged: list[tuple[str, UUID, UUID | None, list[str] | None]] = []

    def on_retriever_start(self, *args: Any, run_id: UUID, **kwargs: Any) -> None:
        self._start("retriever", run_id, kwargs)

    def on_chat_model_start(self, *args: Any, run_id: UUID, **kwargs: Any) -> None:
        self._start("chat model", run_id, kwargs)

    def _start(self, kind: str, run_id: UUID, kwargs: dict[str, Any]) -> None:
        self.started.append((kind, run_id, kwargs.get("parent_run_id")))
        self.tagged.append((kind, run_id, kwargs.get("parent_run_id"), kwargs.get("tags")))


@pytest.mark.parametrize("call", ["invoke", "ainvoke"])
def test_the_mode_detectors_model_call_is_traced_under_the_retrievers_run(call: str) -> None:
    # the model was invoked with no config: a top-level run of its own, beside the retrieval
    from langchain_synapse_retriever import chat_model_mode_detector

    detector = chat_model_mode_detector(FakeListChatModel(responses=["analytical"] * 2))
    with filled(mode_detector=detector) as memory:
        retriever = SynapseMemoryRetriever(memory=memory, k=2)
        runs = _Runs()
        config: RunnableConfig = {"callbacks": [runs]}
        if call == "invoke":
            docs = retriever.invoke("tell me about checkout", config=config)
        else:
            docs = asyncio.run(retriever.ainvoke("tell me about checkout", config=config))
    assert {d.metadata["mode"] for d in docs} == {"analytical"}
    (kind, retrieval, parent), (model_kind, _, model_parent) = runs.started
    assert (kind, parent, model_kind, model_parent) == ("retriever", None, "chat model", retrieval)


@pytest.mark.parametrize("call", ["invoke", "ainvoke"])
def test_the_mode_detectors_model_runs_under_the_callers_config(call: str) -> None:
    # it got the run's callbacks only: a configurable model (here its answers) was not
    # configured through the retriever, and the caller's tags did not reach its run
    from langchain_core.runnables import ConfigurableField
    from langchain_synapse_retriever import chat_model_mode_detector

    model = FakeListChatModel(responses=["analytical"] * 2).configurable_fields(
        responses=ConfigurableField(id="answers")
    )
    with filled(mode_detector=chat_model_mode_detector(model)) as memory:
        retriever = SynapseMemoryRetriever(memory=memory, k=2)
        runs = _Runs()
        config: RunnableConfig = {
            "callbacks": [runs],
            "configurable": {"answers": ["creative"] * 2},
            "tags": ["mine"],
        }
        if call == "invoke":
            docs = retriever.invoke("tell me about checkout", config=config)
        else:
            docs = asyncio.run(retriever.ainvoke("tell me about checkout", config=config))
        assert {d.metadata["mode"] for d in docs} == {"creative"}
        # and its tokens are not streamed to the agent's user (LangGraph's nostream tag)
        assert [tags for _, _, _, tags in runs.tagged] == [["mine"], ["mine", "nostream"]]
        assert {d.metadata["mode"] for d in retriever.invoke("tell me about checkout")} == {
            "analytical"
        }


def test_k_none_per_call_is_the_retrievers_k() -> None:
    # refused with "k must be an int", where SynapseRetriever reads None as its own k
    with filled() as memory:
        retriever = SynapseMemoryRetriever(memory=memory, k=2)
        assert retriever.invoke("checkout", k=None) == retriever.invoke("checkout")
        assert len(retriever.invoke("checkout", k=None)) == 2


def test_ainvoke_gives_what_invoke_does_without_holding_up_the_loop() -> None:
    memory = filled(embedder=SlowEmbedder(0.3))
    retriever = SynapseMemoryRetriever(memory=memory, k=3)
    query = "Why did we change validate_vat?"
    found: list[list[Document]] = []

    async def scenario() -> None:
        found.append(await retriever.ainvoke(query))
        found.append(await retriever.ainvoke(query, k=1, mode="analytical"))

    stall = least_stall(scenario)
    assert stall <= STALL_BOUND_S, f"the loop was held up {stall * 1000:.0f} ms"
    assert found[-2] == retriever.invoke(query) and len(found[-2]) == 3
    assert found[-1] == retriever.invoke(query, k=1, mode="analytical")
    memory.close()


def test_what_it_cannot_retrieve_with_is_refused() -> None:
    # mode="bogus" was taken and refused at the first query; k=True became 1, and an option
    # it does not read (similarity_top_k) was ignored without a word
    from pydantic import ValidationError

    from synapse_retriever.errors import InvalidValueError

    with ConversationMemory() as memory:
        memory.add_turn("The deploy moved to Fridays.", at=0)
        with pytest.raises(ValidationError, match="mode must be one of"):
            SynapseMemoryRetriever(memory=memory, mode="bogus")
        for k in (True, 1.0):
            with pytest.raises(ValidationError):
                SynapseMemoryRetriever(memory=memory, k=k)
        retriever = SynapseMemoryRetriever(memory=memory)
        with pytest.raises(InvalidValueError, match="reads k, mode and sessions, got similarity"):
            retriever.invoke("deploy", similarity_top_k=2)
        assert len(retriever.invoke("deploy", k=1)) == 1


def test_an_agents_stream_shows_its_user_no_token_of_the_mode_detector() -> None:
    # a retrieval tool's mode detector streamed "a", "n", "a", "l", ... into the agent's
    # stream_mode="messages", as if the model had said it to the user
    agents = pytest.importorskip("langchain.agents", reason="the agent needs langchain>=1")
    from langchain_core.language_models import BaseChatModel
    from langchain_core.messages import AIMessage, BaseMessage, HumanMessage
    from langchain_core.outputs import ChatGeneration, ChatResult
    from langchain_core.tools import create_retriever_tool
    from langchain_synapse_retriever import chat_model_mode_detector

    class Agent(BaseChatModel):
        """Calls the search tool once, then answers."""

        @property
        def _llm_type(self) -> str:
            return "scripted"

        def bind_tools(self, tools: Any, **kwargs: Any) -> Any:
            return self

        def _generate(self, messages: list[BaseMessage], *args: Any, **kwargs: Any) -> ChatResult:
            call = {"name": "search_chat", "args": {"query": "why did it fail"}, "id": "c1"}
            answer = (
                AIMessage("", tool_calls=[call])
                if messages[-1].type == "human"
                else AIMessage("Because of the image.")
            )
            return ChatResult(generations=[ChatGeneration(message=answer)])

    detector = chat_model_mode_detector(FakeListChatModel(responses=["analytical"] * 4))
    with filled(mode_detector=detector) as memory:
        search = SynapseMemoryRetriever(memory=memory, k=2)
        agent = agents.create_agent(Agent(), [create_retriever_tool(search, "search_chat", "")])
        shown = [
            chunk.content
            for chunk, _ in agent.stream(
                {"messages": [HumanMessage("why?")]}, stream_mode="messages"
            )
            if chunk.type in ("AIMessageChunk", "ai") and chunk.content
        ]
    assert shown == ["Because of the image."]
