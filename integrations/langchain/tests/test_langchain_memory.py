"""langchain_synapse_retriever.memory: trimming by importance, the middleware, a summarizer."""

from __future__ import annotations

from collections import Counter
from typing import Any

import pytest
from langchain_core.embeddings import DeterministicFakeEmbedding
from langchain_core.language_models import BaseChatModel
from langchain_core.language_models.fake_chat_models import FakeListChatModel
from langchain_core.messages import (
    AIMessage,
    BaseMessage,
    HumanMessage,
    HumanMessageChunk,
    SystemMessage,
    SystemMessageChunk,
    ToolMessage,
    trim_messages,
)
from langchain_core.outputs import ChatGeneration, ChatResult
from langchain_synapse_retriever import chat_model_summarizer, synapse_trim_messages
from langchain_synapse_retriever.memory import to_history
from loop_stalls import STALL_BOUND_S, SlowEmbedder, least_stall
from pydantic import Field

from synapse_retriever.bench.plain import last_n
from synapse_retriever.conversation import ContextBudgetError, ContextConfig, ConversationMemory
from synapse_retriever.errors import InvalidTypeError, InvalidValueError
from synapse_retriever.tokens import approximate_tokens


def history() -> list[BaseMessage]:
    return [
        SystemMessage("You are a helpful release assistant.", id="sys"),
        HumanMessage("We moved the production deploy to Fridays. Lovely weather.", id="h1"),
        AIMessage("Noted, Fridays. Anything else?", id="a1"),
        HumanMessage("Check the build status please.", id="h2"),
        AIMessage(
            "",
            id="a2",
            tool_calls=[
                {"name": "build_status", "args": {"branch": "main"}, "id": "call_1"},
                {"name": "build_logs", "args": {"lines": 20}, "id": "call_2"},
            ],
        ),
        ToolMessage("Build 812 passed. All 340 tests green.", tool_call_id="call_1", id="t1"),
        ToolMessage("Log: compiled. Log: tested. Log: wheel.", tool_call_id="call_2", id="t2"),
        AIMessage("The build passed, all tests are green.", id="a3"),
        HumanMessage("Great. Chat later.", id="h3"),
        AIMessage("Talk soon!", id="a4"),
        HumanMessage("Thanks.", id="h4"),
        AIMessage("You are welcome.", id="a5"),
    ]


def valid(messages: list[BaseMessage]) -> bool:
    """Every tool message answers a call of an earlier AI message, and every call of a
    kept AI message is answered."""
    calls: set[str] = set()
    answered: set[str] = set()
    for message in messages:
        if isinstance(message, AIMessage):
            calls |= {str(call["id"]) for call in message.tool_calls}
        if isinstance(message, ToolMessage):
            if message.tool_call_id not in calls:
                return False
            answered.add(message.tool_call_id)
    return calls == answered


def test_a_roomy_budget_returns_the_same_message_objects() -> None:
    messages = history()
    trimmed = synapse_trim_messages(messages, "when is the deploy?", max_tokens=10_000)
    assert [m.id for m in trimmed] == [m.id for m in messages]
    full = [
        m for m in trimmed if m.content == messages[[x.id for x in messages].index(m.id)].content
    ]
    assert all(any(m is original for original in messages) for m in full)


@pytest.mark.parametrize("budget", range(30, 100, 3))
def test_degradation_keeps_roles_and_tool_call_pairing_valid(budget: int) -> None:
    messages = history()
    trimmed = synapse_trim_messages(messages, "when is the deploy?", max_tokens=budget)
    assert valid(trimmed)
    assert trimmed[0].id == "sys"
    by_id = {m.id: m for m in messages}
    for message in trimmed:
        original = by_id[message.id]
        assert type(message) is type(original)
        if isinstance(message, AIMessage):
            assert message.tool_calls == original.tool_calls
    # the budget covers the text and the rendered tool calls of what is kept
    cost = sum(approximate_tokens(m.text + " " + to_history(m).fixed_text) for m in trimmed)
    assert cost <= budget


def test_an_old_fact_is_kept_whole_by_default_and_condensed_not_cut_by_the_gradient() -> None:
    query = "when is the production deploy?"
    trimmed = synapse_trim_messages(history(), query, max_tokens=38)
    assert [(m.id, m.content) for m in trimmed][:2] == [
        ("sys", "You are a helpful release assistant."),
        ("h1", "We moved the production deploy to Fridays. Lovely weather."),
    ]
    gradient = ContextConfig.gradient(overflow="shrink")
    trimmed = synapse_trim_messages(history(), query, max_tokens=38, config=gradient)
    assert [(m.id, m.content) for m in trimmed][:2] == [
        ("sys", "You are a helpful release assistant."),
        ("h1", "We moved the production deploy to Fridays."),
    ]


def test_multimodal_messages_are_kept_whole_or_dropped() -> None:
    image = HumanMessage(
        content=[
            {"type": "text", "text": "Here is the error. It happens on login. Any idea?"},
            {"type": "image_url", "image_url": {"url": "data:image/png;base64,AAAA"}},
        ],
        id="img",
    )
    messages = [image, AIMessage("Looks like a token issue.", id="a")]
    config = ContextConfig(working_memory=1)
    roomy = synapse_trim_messages(messages, max_tokens=100, config=config)
    assert roomy[0] is image
    tight = synapse_trim_messages(messages, max_tokens=10, config=config)
    assert [m.id for m in tight] == ["a"]


def test_the_budget_counts_with_a_models_tokenizer() -> None:
    class WordCounter(FakeListChatModel):
        def get_num_tokens(self, text: str) -> int:
            return len(text.split())

    model = WordCounter(responses=["-"])
    trimmed = synapse_trim_messages(history(), "deploy", max_tokens=40, token_counter=model)
    assert sum(len(m.text.split()) for m in trimmed) <= 40


def test_bad_input() -> None:
    assert synapse_trim_messages([], max_tokens=10) == []
    # a bare string was trimmed as one message per character; None and bad dicts raised raw
    for messages in ("hello", None, {"role": "user", "content": "hi"}, HumanMessage("hi")):
        with pytest.raises(InvalidTypeError, match="messages must be a sequence of messages"):
            synapse_trim_messages(messages, max_tokens=10)  # type: ignore[arg-type]
    for messages, detail in (([{"x": 1}], "must contain 'role' and 'content'"),
                             ([("god", "hi")], "Unexpected message type: 'god'")):  # fmt: skip
        with pytest.raises(InvalidValueError, match="could not be read as LangChain messages") as e:
            synapse_trim_messages(messages, max_tokens=10)  # type: ignore[arg-type]
        assert detail in str(e.value) and "\n" not in str(e.value)
    with pytest.raises(ValueError, match="max_tokens must be >= 0"):
        synapse_trim_messages(history(), max_tokens=-1)
    strict = ContextConfig(overflow="raise")
    with pytest.raises(ContextBudgetError, match="working memory alone needs"):
        synapse_trim_messages(history(), max_tokens=8, config=strict)  # the system prompt: 7
    with pytest.raises(ContextBudgetError, match="pinned turns alone need 7 tokens"):
        synapse_trim_messages(history(), max_tokens=5, config=strict)


def test_what_langchain_reads_as_messages_is_trimmed_as_those_messages() -> None:
    """Tuples, dicts, strings and a prompt's value, as ``trim_messages`` takes them: each was
    an ``AttributeError`` (``'tuple' object has no attribute 'type'``)."""
    from langchain_core.prompts import ChatPromptTemplate, MessagesPlaceholder
    from langchain_core.runnables import RunnableLambda

    plain = [m for m in history() if not to_history(m).tool_call_ids and m.type != "tool"]
    as_messages = synapse_trim_messages(plain, max_tokens=30)
    assert len(as_messages) < len(plain)  # the budget trims
    tuples = [(m.type, m.text) for m in plain]
    dicts = [{"role": m.type, "content": m.text} for m in plain]
    for given in (tuples, dicts):
        trimmed = synapse_trim_messages(given, max_tokens=30)
        assert [(m.type, m.text) for m in trimmed] == [(m.type, m.text) for m in as_messages]
    assert [m.text for m in synapse_trim_messages(["hi there"], max_tokens=10)] == ["hi there"]
    prompt = ChatPromptTemplate.from_messages(
        [("system", "You are a bot."), MessagesPlaceholder("history"), ("human", "{q}")]
    )
    chain = prompt | RunnableLambda(lambda value: synapse_trim_messages(value, max_tokens=2000))
    out = chain.invoke({"history": [HumanMessage("We moved the deploy to Fridays.")], "q": "When?"})
    assert [m.type for m in out] == ["system", "human", "human"]
    with pytest.raises(ValueError, match="Unexpected message type: 'nobody'"):
        synapse_trim_messages([("nobody", "hi")], max_tokens=10)  # refused as LangChain does


def test_the_last_n_baseline_of_the_benchmark_is_trim_messages() -> None:
    messages = [m for m in history() if m.text][1:]  # plain chat
    tokens = [approximate_tokens(m.text) for m in messages]
    for budget in range(0, 80, 5):
        ours = [messages[i].id for i in last_n(tokens, budget)]
        theirs = trim_messages(
            messages,
            max_tokens=budget,
            strategy="last",
            token_counter=lambda batch: sum(approximate_tokens(m.text) for m in batch),
        )
        assert ours == [m.id for m in theirs]


def test_a_chat_model_condenses_turns_in_the_background() -> None:
    model = FakeListChatModel(responses=["The deploy moved to Fridays.", "Deploy: Fridays."])
    config = ContextConfig(consolidation_interval=1, consolidation_ages=(0, 0))
    with ConversationMemory(config=config, summarizer=chat_model_summarizer(model)) as memory:
        memory.add_turn("Morning! The deploy moved to Fridays. Coffee?", at=0)
        assert memory.wait_for_consolidation(timeout=10)
        turn = memory.turns()[0]
    assert (turn.chunks, turn.summary) == ("The deploy moved to Fridays.", "Deploy: Fridays.")


class Recorder(BaseChatModel):
    """A chat model that records what it was sent and answers "ok"."""

    seen: list[list[BaseMessage]] = Field(default_factory=list)

    @property
    def _llm_type(self) -> str:
        return "recorder"

    def _generate(self, messages: list[BaseMessage], *args: Any, **kwargs: Any) -> ChatResult:
        self.seen.append(list(messages))
        return ChatResult(generations=[ChatGeneration(message=AIMessage("ok"))])

    def bind_tools(self, tools: Any, **kwargs: Any) -> Recorder:
        return self


@pytest.fixture
def create_agent() -> Any:
    agents = pytest.importorskip("langchain.agents", reason="the middleware needs langchain>=1")
    return agents.create_agent


def long_chat() -> list[BaseMessage]:
    messages: list[BaseMessage] = [HumanMessage("We moved the production deploy to Fridays.")]
    for i in range(30):
        messages.append(AIMessage(f"Small talk reply {i}. The weather is nice. Enjoy the day."))
        messages.append(HumanMessage(f"More small talk number {i}, about lunch and coffee."))
    messages.append(HumanMessage("When is the production deploy?"))
    return messages


@pytest.mark.parametrize(
    ("settings", "error", "match"),
    [
        ({"max_tokens": None}, InvalidTypeError, "max_tokens must be an int, got NoneType None"),
        ({"max_tokens": "100"}, InvalidTypeError, "max_tokens must be an int, got str '100'"),
        ({"max_tokens": -5}, InvalidValueError, "max_tokens must be >= 0, got -5"),
        ({"max_tokens": 100, "token_counter": "tiktoken"}, InvalidTypeError, "token_counter"),
        ({"max_tokens": 100, "config": {"overflow": "shrink"}}, InvalidTypeError, "ContextConfig"),
        ({"max_tokens": 100, "start_on": "user"}, InvalidValueError, "got 'user'"),
        ({"max_tokens": 100, "start_on": ["human"]}, InvalidTypeError, "got list"),
    ],
    ids=[
        "none",
        "str",
        "negative",
        "counter-name",
        "config-dict",
        "start-on-user",
        "start-on-list",
    ],
)
def test_the_middleware_checks_its_settings_when_it_is_made(
    create_agent: Any, settings: dict[str, Any], error: type[Exception], match: str
) -> None:
    from langchain_synapse_retriever import SynapseMemoryMiddleware

    with pytest.raises(error, match=match):  # not at the agent's first model call
        SynapseMemoryMiddleware(**settings)


@pytest.mark.parametrize("config", [{}, {"overflow": "shrink"}, "published"])
def test_trimming_refuses_a_config_that_is_not_a_context_config(config: Any) -> None:
    with pytest.raises(InvalidTypeError, match="config must be a ContextConfig"):
        synapse_trim_messages([HumanMessage("hi")], max_tokens=100, config=config)


def fact_in_the_answer() -> list[BaseMessage]:
    """A chat whose fact is in the AI's answer to small talk: trimmed to 18 tokens, what is
    kept after the system prompt opens with that answer."""
    return [
        SystemMessage("You are a helpful assistant."),
        HumanMessage("Hi there, how are you doing this fine morning with the sun out?"),
        AIMessage("The production database password rotates every Friday at noon UTC."),
        HumanMessage("Thanks a lot, that is nice to know, cheers."),
        AIMessage("You're welcome."),
        HumanMessage("When does the database password rotate?"),
    ]


def test_start_on_human_opens_the_trimmed_chat_on_a_human_message() -> None:
    chat = fact_in_the_answer()
    kept = synapse_trim_messages(chat, max_tokens=18)
    assert [m.type for m in kept] == ["system", "ai", "human"]  # what Bedrock's Claude refuses
    started = synapse_trim_messages(chat, max_tokens=18, start_on="human")
    assert started == [kept[0], kept[2]]
    assert synapse_trim_messages(chat, max_tokens=18, start_on=HumanMessage) == started
    for role, error in [("user", InvalidValueError), ("system", InvalidValueError),
                        ("tool", InvalidValueError), (BaseMessage, InvalidValueError),
                        (HumanMessage("hi"), InvalidTypeError)]:  # fmt: skip
        with pytest.raises(error, match="start_on must be"):  # not a chat cut to its prompt
            synapse_trim_messages(chat, max_tokens=18, start_on=role)  # type: ignore[arg-type]


def test_start_on_reads_chunks_as_their_messages() -> None:
    chat = fact_in_the_answer()
    chunked = [SystemMessageChunk(chat[0].text), *chat[1:]]
    chunked[5] = HumanMessageChunk(chat[5].text)
    for start_on in ["human", HumanMessage, HumanMessageChunk]:
        kept = synapse_trim_messages(chunked, max_tokens=18, start_on=start_on)
        assert kept == [chunked[0], chunked[5]]  # the system chunk kept, a human chunk opens
    assert synapse_trim_messages(chat, max_tokens=200, start_on="human") == chat  # all fits


class CountingEmbeddings(DeterministicFakeEmbedding):
    """langchain-core's fake embeddings, recording every text they are asked for."""

    texts: list[str] = Field(default_factory=list)

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        self.texts.extend(texts)
        return super().embed_documents(texts)

    def embed_query(self, text: str) -> list[float]:
        self.texts.append(text)
        return super().embed_query(text)


def test_the_middleware_embeds_each_text_once_across_model_calls(create_agent: Any) -> None:
    from langchain_synapse_retriever import SynapseMemoryMiddleware

    embeddings, model = CountingEmbeddings(size=32), Recorder()
    middleware = SynapseMemoryMiddleware(max_tokens=120, embedder=embeddings)
    assert embeddings.texts == []  # made without a call to the model (not even its length)
    cached = middleware.embedder
    assert SynapseMemoryMiddleware(max_tokens=120, embedder=cached).embedder is cached
    agent = create_agent(model, tools=[], middleware=[middleware])
    state = agent.invoke({"messages": long_chat()})
    second = [*state["messages"], HumanMessage("And which host runs staging?")]
    agent.invoke({"messages": second})
    assert len(model.seen) == 2
    assert Counter(embeddings.texts).most_common(1)[0][1] == 1  # none asked for twice
    uncached = synapse_trim_messages(
        second, max_tokens=120, embedder=DeterministicFakeEmbedding(size=32)
    )
    assert [(m.type, m.text) for m in model.seen[-1]] == [(m.type, m.text) for m in uncached]


def test_the_middleware_passes_start_on(create_agent: Any) -> None:
    from langchain_synapse_retriever import SynapseMemoryMiddleware

    model = Recorder()
    agent = create_agent(
        model, tools=[], middleware=[SynapseMemoryMiddleware(max_tokens=18, start_on="human")]
    )
    agent.invoke({"messages": fact_in_the_answer()})
    assert [m.type for m in model.seen[-1]] == ["system", "human"]


def test_the_middleware_trims_what_the_model_sees_not_the_state(create_agent: Any) -> None:
    from langchain_synapse_retriever import SynapseMemoryMiddleware

    model = Recorder()
    agent = create_agent(
        model,
        tools=[],
        system_prompt="You are terse.",
        middleware=[SynapseMemoryMiddleware(max_tokens=120)],
    )
    chat = long_chat()
    result = agent.invoke({"messages": chat})
    seen = model.seen[-1]
    assert seen[0].type == "system" and seen[0].text == "You are terse."
    assert sum(approximate_tokens(m.text) for m in seen) <= 120
    assert len(seen) < len(chat)
    assert any("Fridays" in m.text for m in seen)  # the relevant old fact, condensed or not
    assert len(result["messages"]) == len(chat) + 1  # the state keeps every message


@pytest.mark.asyncio
async def test_the_middleware_works_async(create_agent: Any) -> None:
    from langchain_synapse_retriever import SynapseMemoryMiddleware

    model = Recorder()
    agent = create_agent(model, tools=[], middleware=[SynapseMemoryMiddleware(max_tokens=120)])
    await agent.ainvoke({"messages": long_chat()})
    assert sum(approximate_tokens(m.text) for m in model.seen[-1]) <= 120


def test_the_async_middleware_trims_off_the_event_loop(create_agent: Any) -> None:
    """A 0.3 s embedder: the async agent's trimming runs in a worker thread."""
    from langchain_synapse_retriever import SynapseMemoryMiddleware

    embedder = SlowEmbedder(0.3)
    model = Recorder()
    middleware = SynapseMemoryMiddleware(max_tokens=120, embedder=embedder)
    create_agent(model, tools=[], middleware=[middleware]).invoke({"messages": long_chat()})
    sync_seen = model.seen[-1]  # what the sync path shows the model
    agents = [  # one per attempt of least_stall, each with no vector kept yet
        create_agent(
            model, tools=[], middleware=[SynapseMemoryMiddleware(max_tokens=120, embedder=embedder)]
        )
        for _ in range(3)
    ]

    async def scenario() -> None:
        await agents.pop().ainvoke({"messages": long_chat()})

    calls = embedder.calls
    stall = least_stall(scenario)
    assert embedder.calls > calls
    assert stall <= STALL_BOUND_S, f"the loop was held up {stall * 1000:.0f} ms"
    assert [m.text for m in model.seen[-1]] == [m.text for m in sync_seen]


def test_a_tool_result_just_returned_stays_whole_with_its_call() -> None:
    # the relevance pass left out the cost of the newest turn's call (its group), overfilled
    # the budget with older turns, and the result the agent had just received was condensed
    log = "Build 3 passed. All 340 tests are green. " + "Log line. " * 30
    history = [
        HumanMessage("Is build 2 green? My dog is called Biscuit."),
        AIMessage("Build 2 is green."),
        HumanMessage("Is build 3 green?"),
        AIMessage("", tool_calls=[{"name": "build_status", "args": {"build": 3}, "id": "c3"}]),
        ToolMessage(log, tool_call_id="c3"),
    ]
    for budget in (115, 125):
        for config in (None, ContextConfig()):  # shrink, as the adapters default; raise
            kept = synapse_trim_messages(history, max_tokens=budget, config=config)
            assert kept[-1].content == log and kept[-2].tool_calls, (budget, config)


def test_a_system_prompt_over_the_budget_says_what_to_do() -> None:
    # with the adapters' overflow="shrink" the advice was "use overflow='shrink'"
    messages = [
        SystemMessage("You are a release assistant. Always answer briefly."),
        HumanMessage("Hi"),
    ]
    for config in (None, ContextConfig()):  # overflow="shrink", as the adapters; "raise"
        with pytest.raises(ContextBudgetError, match="pinned turns alone need ") as raised:
            synapse_trim_messages(messages, max_tokens=5, config=config)
        assert "raise the budget" in str(raised.value) and "overflow" not in str(raised.value)


def test_results_of_parallel_tool_calls_just_returned_stay_whole() -> None:
    # only the newest message was working memory: the other result of the same step was a
    # member of its group, and the gradient condensed it before an older message
    log1 = "Build 3 passed. All 340 tests are green. " + "Log line. " * 30
    log2 = "Deploy 3 queued for Friday. " + "Queue line. " * 25
    calls = [
        {"name": "build_status", "args": {"build": 3}, "id": "c3"},
        {"name": "deploy_status", "args": {"d": 3}, "id": "d3"},
    ]
    history = [
        HumanMessage("Is build 2 green? My dog is called Biscuit."),
        AIMessage("Build 2 is green."),
        HumanMessage("Is build 3 green and is deploy 3 queued?"),
        AIMessage("", tool_calls=calls),
        ToolMessage(log1, tool_call_id="c3"),
        ToolMessage(log2, tool_call_id="d3"),
    ]
    step = 201  # the call and its two results, whole
    for budget in range(step, 320, 5):
        for config in (None, ContextConfig()):  # shrink, as the adapters default; raise
            kept = synapse_trim_messages(history, max_tokens=budget, config=config)
            assert [m.content for m in kept[-2:]] == [log1, log2], (budget, config)
            assert [call["id"] for call in kept[-3].tool_calls] == ["c3", "d3"]
    with pytest.raises(ContextBudgetError, match=f"working memory alone needs {step} tokens"):
        synapse_trim_messages(history, max_tokens=step - 1, config=ContextConfig())
