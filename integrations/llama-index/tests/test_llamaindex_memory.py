"""llama_index.postprocessor.synapse.memory: the memory block, message trimming, a summarizer."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from llama_index.core.base.llms.types import ImageBlock, MessageRole, TextBlock, ToolCallBlock
from llama_index.core.chat_engine import SimpleChatEngine
from llama_index.core.llms import ChatMessage, MockLLM
from llama_index.core.memory import Memory
from llama_index.postprocessor.synapse import (
    SynapseMemoryBlock,
    llm_summarizer,
    synapse_trim_chat_messages,
)
from llama_index.postprocessor.synapse.memory import message_text, to_history
from loop_stalls import STALL_BOUND_S, SlowEmbedder, least_stall
from pydantic import ValidationError

from synapse_retriever.conversation import (
    ContextBudgetError,
    ContextConfig,
    ConversationMemory,
    HashingEmbedder,
)
from synapse_retriever.errors import ClosedError, InvalidTypeError, InvalidValueError
from synapse_retriever.tokens import approximate_tokens

FACT = "We moved the production deploy to Fridays. Lovely weather today."


def chatter(memory: Memory, rounds: int = 20) -> None:
    memory.put(ChatMessage(role="user", content=FACT))
    memory.put(ChatMessage(role="assistant", content="Noted, Fridays."))
    for i in range(rounds):
        memory.put(ChatMessage(role="user", content=f"Small talk {i} about lunch and coffee."))
        memory.put(ChatMessage(role="assistant", content=f"Reply {i}: enjoy the sunshine."))


def small_memory(block: SynapseMemoryBlock) -> Memory:
    return Memory.from_defaults(
        session_id="me",
        token_limit=200,
        token_flush_size=40,
        chat_history_token_ratio=0.5,
        memory_blocks=[block],
        tokenizer_fn=str.split,  # offline and exact
    )


def test_flushed_turns_come_back_graded_for_the_question() -> None:
    block = SynapseMemoryBlock(budget_tokens=40)
    memory = small_memory(block)
    chatter(memory)
    assert len(block.memory) > 10  # the short-term queue flushed into the block
    messages = memory.get(input="When is the production deploy?")
    system = messages[0]
    assert system.role.value == "system" and "<synapse_memory>" in system.content
    rendered = system.content.split("<synapse_memory>")[1].split("</synapse_memory>")[0]
    assert any("deploy" in line and "Fridays" in line for line in rendered.splitlines())
    assert approximate_tokens(rendered.strip()) <= 40  # labels included


def test_a_chat_engine_sees_the_old_fact() -> None:
    block = SynapseMemoryBlock(budget_tokens=40)
    memory = small_memory(block)
    chatter(memory)
    engine = SimpleChatEngine.from_defaults(llm=MockLLM(), memory=memory)
    answer = engine.chat("When is the production deploy?")  # MockLLM echoes its prompt
    assert any("deploy" in line and "Fridays" in line for line in str(answer).splitlines())


def session_memory(session: str, block: SynapseMemoryBlock) -> Memory:
    """A ``Memory`` of ``session`` whose queue flushes into ``block`` after a few messages."""
    return Memory.from_defaults(
        session_id=session, token_limit=300, chat_history_token_ratio=0.5, token_flush_size=60,
        memory_blocks=[block], tokenizer_fn=str.split,
    )  # fmt: skip


def test_a_block_reads_only_its_memorys_session(tmp_path: Any) -> None:
    # two Memory objects on one file: Bob's rendered Alice's secret, as LlamaIndex's own
    # VectorMemoryBlock never does (it filters by session_id)
    path = str(tmp_path / "chat.db")
    alice = session_memory("alice", SynapseMemoryBlock(path, budget_tokens=200))
    alice.put(ChatMessage(role="user", content="My bank PIN is 4711, keep it secret."))
    for i in range(30):
        alice.put(ChatMessage(role="user", content=f"Lunch talk {i}: pasta and coffee."))
    bob = session_memory("bob", SynapseMemoryBlock(path, budget_tokens=200))
    bob.put(ChatMessage(role="user", content="Hello, I am Bob."))
    assert "4711" not in str(bob.get(input="What is my bank PIN?")[0].content)
    assert "4711" in str(alice.get(input="What is my bank PIN?")[0].content)


def test_a_session_id_longer_than_a_memorys_session_is_stored_and_read_apart(
    tmp_path: Any,
) -> None:
    # Memory sets no cap on session_id, the memory takes 200 characters: every flush was
    # refused, and the facts Memory had moved out of its queue were lost
    path, head = str(tmp_path / "chat.db"), "tenant-42:" + "x" * 200
    alice = session_memory(head + "alice", SynapseMemoryBlock(path, budget_tokens=200))
    alice.put(ChatMessage(role="user", content="My bank PIN is 4711, keep it secret."))
    for i in range(30):
        alice.put(ChatMessage(role="user", content=f"Lunch talk {i}: pasta and coffee."))
    bob = session_memory(head + "bob", SynapseMemoryBlock(path, budget_tokens=200))
    bob.put(ChatMessage(role="user", content="Hello, I am Bob."))
    assert "4711" in str(alice.get(input="What is my bank PIN?")[0].content)
    assert "4711" not in str(bob.get(input="What is my bank PIN?")[0].content)
    with ConversationMemory(path) as stored:  # Alice's turns (Bob's one is not flushed yet)
        sessions = {turn.session for turn in stored.turns()}
        assert len(stored) >= 10 and len(sessions) == 1, sessions
    assert all(s.startswith(head[:150] + "…sha256:") and len(s) <= 200 for s in sessions)


@pytest.mark.asyncio
async def test_memories_sharing_one_block_never_read_each_others_session(tmp_path: Any) -> None:
    # the block kept the session of the last read on itself: two reads at once mixed them
    # (Bob saw Alice's PIN in 3 of 20 concurrent reads)
    block = SynapseMemoryBlock(str(tmp_path / "chat.db"), budget_tokens=200)
    alice, bob = session_memory("alice", block), session_memory("bob", block)
    await alice.aput(ChatMessage(role="user", content="My bank PIN is 4711, keep it secret."))
    for i in range(30):
        await alice.aput(ChatMessage(role="user", content=f"Lunch talk {i}: pasta and coffee."))
    await bob.aput(ChatMessage(role="user", content="Hello, I am Bob."))
    for _ in range(20):
        seen_by_bob, seen_by_alice = await asyncio.gather(
            bob.aget(input="What is my bank PIN?"), alice.aget(input="What is my bank PIN?")
        )
        assert "4711" not in str(seen_by_bob[0].content)
        assert "4711" in str(seen_by_alice[0].content)


@pytest.mark.asyncio
async def test_a_refused_message_in_a_flush_loses_none_of_the_others() -> None:
    # the flush was stored one message at a time and stopped at the first refused one:
    # Memory had moved the whole flush out of its queue, so the valid ones after it were lost
    block = SynapseMemoryBlock(budget_tokens=60)
    flush = [ChatMessage(role="user", content=f"Lunch talk {i}, coffee.") for i in range(5)]
    flush[1] = ChatMessage(role="user", content="a NUL \x00 here")
    flush[3] = ChatMessage(role="user", content="elsewhere", additional_kwargs={"session_id": b"x"})
    flush.append(ChatMessage(role="assistant", content="\u200b"))  # shows nothing: skipped
    with pytest.raises(InvalidValueError) as refused:
        await block.aput(flush)
    message = str(refused.value)
    assert message.startswith("2 of the 6 messages flushed to long-term memory were refused")
    assert "message 1 (text must not hold a NUL" in message
    assert "message 3 (session_id must be a str, got bytes b'x')" in message
    assert [t.text for t in block.memory.turns()] == [
        "Lunch talk 0, coffee.", "Lunch talk 2, coffee.", "Lunch talk 4, coffee."
    ]  # fmt: skip


def test_a_first_message_over_the_limit_truncates_an_empty_block() -> None:
    # Memory truncates a block that gave nothing with content=[]: a TypeError in tiktoken
    memory = Memory.from_defaults(
        session_id="s", token_limit=200, memory_blocks=[SynapseMemoryBlock(":memory:")]
    )
    engine = SimpleChatEngine.from_defaults(llm=MockLLM(max_tokens=5), memory=memory)
    assert engine.chat("Please review this log:\n" + "ERROR timeout at line 42\n" * 100)


@pytest.mark.asyncio
async def test_truncation_reassembles_smaller_instead_of_vanishing() -> None:
    block = SynapseMemoryBlock(budget_tokens=60)
    await block.aput(
        [ChatMessage(role="user", content=FACT)]
        + [ChatMessage(role="user", content=f"Lunch talk {i}, coffee again.") for i in range(8)]
    )
    content = await block.aget([ChatMessage(role="user", content="When do we deploy?")])
    smaller = await block.atruncate(content, 20)
    assert smaller and "Fridays" in smaller
    assert approximate_tokens(smaller) <= approximate_tokens(content) - 20
    assert await block.atruncate(content, 10_000) is None


@pytest.mark.asyncio
async def test_every_llamaindex_role_is_a_role_the_memory_stores() -> None:
    block = SynapseMemoryBlock(budget_tokens=100)
    await block.aput(
        [ChatMessage(role=role, content=f"a {role.value} turn") for role in MessageRole]
    )
    assert [turn.role for turn in block.memory.turns()] == [role.value for role in MessageRole]


def test_a_block_over_a_persistent_memory_survives_a_restart(tmp_path: object) -> None:
    path = f"{tmp_path}/chat.db"
    block = SynapseMemoryBlock(path, budget_tokens=100)
    memory = small_memory(block)
    chatter(memory)
    block.memory.close()
    with ConversationMemory(path) as reopened:
        assert any("Fridays" in t.text for t in reopened.turns())
        assert {t.session for t in reopened.turns()} == {"me"}


def test_blocks_of_two_users_on_one_database_keep_apart_and_close(tmp_path: object) -> None:
    # a block opened from a path could not name its user: every block shared the default one
    path = f"{tmp_path}/team.db"
    alice = SynapseMemoryBlock(path, user="alice", budget_tokens=100)
    bob = SynapseMemoryBlock(path, user="bob", budget_tokens=100)
    chatter(small_memory(alice))
    assert alice.memory.user == "alice" and bob.memory.user == "bob"
    assert len(alice.memory) > 0 and len(bob.memory) == 0
    alice.close()
    bob.close()
    with ConversationMemory(path, user="alice") as reopened:
        assert any("Fridays" in t.text for t in reopened.turns())
    with pytest.raises(InvalidValueError, match="user go with a path"):
        SynapseMemoryBlock(ConversationMemory(), user="carol")


def tool_history() -> list[ChatMessage]:
    return [
        ChatMessage(role="system", content="You are a release assistant."),
        ChatMessage(role="user", content=FACT),
        ChatMessage(role="assistant", content="Noted, Fridays. Anything else?"),
        ChatMessage(
            role="assistant",
            blocks=[
                TextBlock(text="Let me check the build and the logs for you."),
                ToolCallBlock(tool_call_id="c1", tool_name="build_status", tool_kwargs={"b": 1}),
            ],
        ),
        ChatMessage(
            role="tool",
            content="Build 812 passed. All 340 tests green. Nothing else to report.",
            additional_kwargs={"tool_call_id": "c1"},
        ),
        ChatMessage(
            role="assistant",
            content="",
            additional_kwargs={
                "tool_calls": [
                    {"id": "c2", "function": {"name": "deploy_window", "arguments": "{}"}}
                ]
            },
        ),
        ChatMessage(
            role="tool", content="Window: Fridays 10:00.", additional_kwargs={"tool_call_id": "c2"}
        ),
        ChatMessage(role="assistant", content="The build passed."),
        ChatMessage(role="user", content="Great, thanks."),
        ChatMessage(role="assistant", content="Anytime."),
        ChatMessage(role="user", content="Bye."),
    ]


def pairs_valid(messages: list[ChatMessage]) -> bool:
    calls: set[str] = set()
    answered: set[str] = set()
    for message in messages:
        calls |= set(to_history(message).tool_call_ids)
        answer = message.additional_kwargs.get("tool_call_id")
        if message.role.value == "tool":
            if answer not in calls:
                return False
            answered.add(answer)
    return calls == answered


@pytest.mark.parametrize("budget", range(20, 110, 4))
def test_trimming_keeps_roles_and_tool_call_pairing(budget: int) -> None:
    messages = tool_history()
    trimmed = synapse_trim_chat_messages(messages, "when is the deploy?", max_tokens=budget)
    assert pairs_valid(trimmed)
    assert trimmed[0].role.value == "system"

    def signature(m: ChatMessage) -> tuple[object, ...]:
        calls = [b for b in m.blocks if isinstance(b, ToolCallBlock)]
        return (m.role, repr(m.additional_kwargs), calls)

    originals = [signature(m) for m in messages]
    assert all(signature(m) in originals for m in trimmed)  # same roles, same tool calls
    cost = sum(
        approximate_tokens(message_text(m) + " " + to_history(m).fixed_text) for m in trimmed
    )
    assert cost <= budget


@pytest.mark.parametrize("start_on", ["user", MessageRole.USER])
def test_start_on_user_opens_the_trimmed_chat_on_a_user_message(start_on: Any) -> None:
    chat = [
        ChatMessage(role="system", content="You are a helpful assistant."),
        ChatMessage(role="user", content="Hi there, how are you doing this fine morning with "
                    "the sun out?"),
        ChatMessage(role="assistant", content="The production database password rotates every "
                    "Friday at noon UTC."),
        ChatMessage(role="user", content="Thanks a lot, that is nice to know, cheers."),
        ChatMessage(role="assistant", content="You're welcome."),
        ChatMessage(role="user", content="When does the database password rotate?"),
    ]  # fmt: skip
    kept = synapse_trim_chat_messages(chat, max_tokens=18)
    assert [m.role.value for m in kept] == ["system", "assistant", "user"]
    assert synapse_trim_chat_messages(chat, max_tokens=18, start_on=start_on) == [kept[0], kept[2]]
    for role, error in [("human", InvalidValueError), ("system", InvalidValueError),
                        ("tool", InvalidValueError), (MessageRole, InvalidTypeError)]:  # fmt: skip
        with pytest.raises(error, match="start_on must be"):  # not a chat cut to its prompt
            synapse_trim_chat_messages(chat, max_tokens=18, start_on=role)
    developer = [ChatMessage(role="developer", content=chat[0].content), *chat[1:]]
    assert synapse_trim_chat_messages(developer, max_tokens=18, start_on=start_on) == [
        developer[0],
        developer[5],
    ]  # a developer prompt is kept as a system prompt is


def test_degraded_messages_are_copies_with_their_tool_calls() -> None:
    messages = tool_history()
    roomy = synapse_trim_chat_messages(messages, "deploy", max_tokens=10_000)
    assert all(any(m is o for o in messages) for m in roomy if message_text(m) in {
        message_text(o) for o in messages
    })  # fmt: skip
    gradient = ContextConfig.gradient(overflow="shrink")  # the default keeps the fact whole
    tight = synapse_trim_chat_messages(
        messages, "when is the deploy?", max_tokens=40, config=gradient
    )
    fact = [m for m in tight if "Fridays" in message_text(m) and m.role.value == "user"]
    assert fact and message_text(fact[0]) != FACT  # condensed, not cut
    assert messages[1].content == FACT  # the original is untouched


def test_images_are_kept_whole_or_dropped() -> None:
    image = ChatMessage(
        role="user",
        blocks=[
            TextBlock(text="Here is the error. It happens at login. Ideas?"),
            ImageBlock(url="https://example.invalid/error.png"),
        ],
    )
    reply = ChatMessage(role="assistant", content="A token issue.")
    config = ContextConfig(working_memory=1)
    assert synapse_trim_chat_messages([image, reply], max_tokens=100, config=config)[0] is image
    assert synapse_trim_chat_messages([image, reply], max_tokens=5, config=config) == [reply]


def test_bad_input() -> None:
    assert synapse_trim_chat_messages([], max_tokens=10) == []
    with pytest.raises(InvalidTypeError, match="messages must be a sequence of ChatMessage"):
        synapse_trim_chat_messages(None, max_tokens=10)  # type: ignore[arg-type]
    with pytest.raises(InvalidTypeError, match=r"messages\[0\] must be a ChatMessage, got str"):
        synapse_trim_chat_messages(["hi"], max_tokens=10)  # type: ignore[list-item]
    with pytest.raises(ValueError, match="max_tokens must be >= 0"):
        synapse_trim_chat_messages(tool_history(), max_tokens=-1)
    with pytest.raises(ContextBudgetError):
        synapse_trim_chat_messages(tool_history(), max_tokens=3, config=ContextConfig())
    with pytest.raises(InvalidTypeError, match="config must be a ContextConfig, got dict"):
        synapse_trim_chat_messages(tool_history(), max_tokens=30, config={})  # type: ignore[arg-type]


def test_a_block_checks_its_mode_and_budget_when_it_is_made(tmp_path: Path) -> None:
    # a mode was refused at the first read, inside Memory.get; True was a budget of 1 token
    with pytest.raises(InvalidValueError, match=r"mode must be one of .* got 'fast'"):
        SynapseMemoryBlock(budget_tokens=200, mode="fast")
    with pytest.raises(InvalidTypeError, match="budget_tokens must be an int, got bool"):
        SynapseMemoryBlock(budget_tokens=True)
    with pytest.raises(ValidationError, match="budget_tokens"):
        SynapseMemoryBlock(budget_tokens=0)
    assert SynapseMemoryBlock(budget_tokens=np.int64(500)).budget_tokens == 500
    with pytest.raises(InvalidTypeError, match="config must be a ContextConfig, got dict"):
        SynapseMemoryBlock(config={})  # type: ignore[arg-type]  # an empty one: the default
    with ConversationMemory() as memory:  # a memory given stays open when its block is refused
        with pytest.raises(InvalidValueError, match="got 'fast'"):
            SynapseMemoryBlock(memory, mode="fast")
        memory.add_turn("still open", role="user")
    path = tmp_path / "new.db"
    with pytest.raises(InvalidValueError, match="got 'fast'"):
        SynapseMemoryBlock(path, mode="fast")
    assert not path.exists()  # refused before its memory was opened


def test_an_llm_condenses_turns_in_the_background() -> None:
    config = ContextConfig(consolidation_interval=1, consolidation_ages=(0, 0))
    summarizer = llm_summarizer(MockLLM(max_tokens=3))  # MockLLM(max_tokens) says "text text.."
    with ConversationMemory(config=config, summarizer=summarizer) as memory:
        memory.add_turn("Morning! The deploy moved to Fridays. Coffee?", at=0)
        assert memory.wait_for_consolidation(timeout=10)
        turn = memory.turns()[0]
    assert turn.chunks and turn.summary


@pytest.mark.asyncio
async def test_a_block_closes_from_a_coroutine(tmp_path: Path) -> None:
    block = SynapseMemoryBlock(str(tmp_path / "chat.db"), budget_tokens=60)
    await block.memory.aadd_turn(FACT)
    await block.aclose(timeout=5.0)
    with pytest.raises(ClosedError, match="closed"):
        await block.aget([ChatMessage(role="user", content="When do we deploy?")])
    again = SynapseMemoryBlock(str(tmp_path / "chat.db"), budget_tokens=60)
    assert "Fridays" in await again.aget([ChatMessage(role="user", content="When?")])
    again.close(timeout=5.0)


def test_the_blocks_truncation_counts_tokens_off_the_loop() -> None:
    # atruncate and its rendering called the memory's token counter on the loop
    def slow_count(text: str) -> int:
        time.sleep(0.06)
        return len(text.split())

    async def scenario() -> None:
        block = SynapseMemoryBlock(budget_tokens=60, token_counter=slow_count)
        talk = [ChatMessage(role="user", content=f"Lunch talk {i}, coffee.") for i in range(4)]
        await block.memory.aadd_turn(FACT)
        for message in talk:
            await block.memory.aadd_turn(str(message.content))
        content = await block.aget([ChatMessage(role="user", content="When do we deploy?")])
        assert await block.atruncate(content, 10)
        await block.memory.aclose()

    stall = least_stall(scenario)
    assert stall <= STALL_BOUND_S, f"the loop was held up {stall * 1000:.0f} ms"


def test_the_blocks_async_paths_never_hold_up_the_event_loop() -> None:
    """``Memory.aput``/``aget`` await the block; its 0.3 s embedder runs in worker threads."""
    embedder = SlowEmbedder(0.3)
    contents: list[tuple[str, str | None]] = []

    async def scenario() -> None:
        block = SynapseMemoryBlock(budget_tokens=60, embedder=embedder)
        talk = [
            ChatMessage(role="user", content=f"Lunch talk {i}, coffee again.") for i in range(2)
        ]
        await block.aput([ChatMessage(role="user", content=FACT), *talk])
        content = await block.aget([ChatMessage(role="user", content="When do we deploy?")])
        contents.append((content, await block.atruncate(content, 10)))
        block.memory.close()

    calls = embedder.calls
    stall = least_stall(scenario)
    assert embedder.calls - calls >= 5  # 3 turns, 2 assemblies: 1.5 s of embedding per run
    assert stall <= STALL_BOUND_S, f"the loop was held up {stall * 1000:.0f} ms"
    # what the block renders with the slow embedder is what it renders with the fast one
    fast = SynapseMemoryBlock(budget_tokens=60, embedder=HashingEmbedder())
    fast.memory.add_turn(FACT)
    for i in range(2):
        fast.memory.add_turn(f"Lunch talk {i}, coffee again.")
    content, smaller = contents[-1]
    assert FACT.split(".")[0] in content and smaller is not None and "Fridays" in smaller
    question = [ChatMessage(role="user", content="When do we deploy?")]
    assert content == asyncio.run(fast.aget(question))
    fast.memory.close()


@pytest.mark.parametrize(
    "text",
    [
        "Talk {i}: we moved the production deploy to day {i} of the month, after lunch.",
        "Run `kubectl rollout restart deploy/api-{i}` then check https://grafana.example.com/d/{i}.",
        "会話 {i}: 本番デプロイは月の{i}日に移動しました。",
    ],
    ids=["prose", "code and links", "CJK"],
)
@pytest.mark.parametrize("tokenizer", [None, list], ids=["LlamaIndex's", "Memory's own"])
def test_a_truncated_block_shrinks_in_memorys_tokens_not_its_own(text: str, tokenizer: Any) -> None:
    # the block took Memory's tokens to cut (its tokenizer's) from its own count (the
    # approximate one): for code, links or CJK it came out too big or at 0, and Memory dropped it
    chat = ConversationMemory(":memory:", config=ContextConfig(working_memory=0), background=False)
    block = SynapseMemoryBlock(chat, budget_tokens=1000, tokenizer_fn=tokenizer)
    memory = Memory.from_defaults(
        session_id="me",
        token_limit=600,
        chat_history_token_ratio=0.5,
        token_flush_size=40,
        memory_blocks=[block],
        **({} if tokenizer is None else {"tokenizer_fn": tokenizer}),  # a character each
    )
    for i in range(80):
        memory.put(ChatMessage(role="user", content=text.format(i=i)))
    content = memory.get(input="When is the production deploy?")[0].content or ""
    assert "<synapse_memory>" in content
    assert len(memory.tokenizer_fn(content)) <= 600


class FailingOnce:
    """The hashing embedder, but the first text with ``down`` in it times out (an API's
    moment): the flush stops there with the error."""

    def __init__(self) -> None:
        self.inner = HashingEmbedder(dim=64)
        self.name, self.dim, self.failed = "failing-once-64", 64, False

    def embed(self, texts: Sequence[str]) -> Any:
        if not self.failed and any("down" in text for text in texts):
            self.failed = True
            raise TimeoutError("the embeddings API did not answer")
        return self.inner.embed(texts)


@pytest.mark.asyncio
async def test_what_a_failed_flush_left_unstored_is_stored_by_the_next() -> None:
    # Memory has moved a flush out of its short-term queue before the block stores it: a
    # failure midway (not a refused message) lost the messages after it, in neither memory
    block = SynapseMemoryBlock(ConversationMemory(":memory:", embedder=FailingOnce()))
    first = [ChatMessage(role="user", content=text) for text in ["one", "API down", "three"]]
    with pytest.raises(TimeoutError):
        await block.aput(first)
    assert [t.text for t in block.memory.turns()] == ["one"]
    await block.aput([ChatMessage(role="user", content="four")])
    assert [t.text for t in block.memory.turns()] == ["one", "API down", "three", "four"]
    block.close()


def stored(path: str) -> list[str]:
    embedder = FailingOnce()
    embedder.failed = True  # its moment has passed
    with ConversationMemory(path, embedder=embedder) as memory:
        return [turn.text for turn in memory.turns()]


FIRST = ["one", "API down", "three"]


def test_closing_a_block_stores_what_a_failed_flush_left(tmp_path: Path) -> None:
    path = str(tmp_path / "chat.db")
    block = SynapseMemoryBlock(ConversationMemory(path, embedder=FailingOnce()))
    with pytest.raises(TimeoutError):
        asyncio.run(block.aput([ChatMessage(role="user", content=text) for text in FIRST]))
    block.close()
    assert stored(path) == FIRST


@pytest.mark.asyncio
async def test_aclose_stores_what_a_failed_flush_left_and_close_in_a_coroutine_warns(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    for name, closing in [("a.db", "aclose"), ("b.db", "close")]:
        path = str(tmp_path / name)
        block = SynapseMemoryBlock(ConversationMemory(path, embedder=FailingOnce()))
        with pytest.raises(TimeoutError):
            await block.aput([ChatMessage(role="user", content=text) for text in FIRST])
        if closing == "aclose":
            await block.aclose()
            assert stored(path) == FIRST
        else:  # no flush can run on this loop from a sync call: said, and closed
            with caplog.at_level("WARNING"):
                block.close()
            assert "2 message(s) a failed flush left were not stored" in caplog.text
            assert stored(path) == FIRST[:1]
        with pytest.raises(ClosedError):
            block.memory.turns()


@pytest.mark.asyncio
async def test_a_cancelled_flush_is_stored_whole_before_the_cancellation_is_raised() -> None:
    # Memory moves a flush out of its queue, then awaits the block (in a wait_for, a task
    # group): cancelled after the first message, the block stopped there and the messages
    # after it were in neither memory
    embedder = SlowEmbedder(0.1)
    block = SynapseMemoryBlock(ConversationMemory(":memory:", embedder=embedder))
    flush = [ChatMessage(role="user", content=f"Lunch talk {i}, coffee.") for i in range(4)]
    task = asyncio.ensure_future(block.aput(flush))
    await asyncio.to_thread(embedder.started.wait, 10)
    await asyncio.sleep(0.15)  # the first message is stored, the second being embedded
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert [t.text for t in block.memory.turns()] == [m.content for m in flush]  # at once
    block.close()
