"""Tests for the async methods of conversation/memory.py: off the loop, same results, same
errors, and nothing half-written when an await is cancelled."""

from __future__ import annotations

import asyncio
import dataclasses
import threading
import time
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import numpy.typing as npt
import pytest
from loop_stalls import STALL_BOUND_S, SlowEmbedder, least_stall, longest_stall
from store_backends import holding_writes

from synapse_retriever.conversation import (
    ContextConfig,
    ConversationMemory,
    ExtractiveSummarizer,
    HashingEmbedder,
)
from synapse_retriever.conversation.summarize import Condensed
from synapse_retriever.errors import ClosedError, InvalidTypeError, InvalidValueError, SynapseError

CHAT = [
    ("user", "Login fails: verify_token() rejects valid tokens since Monday."),
    ("assistant", "Which service? The gateway or the API?"),
    ("user", "The API. The gateway is fine."),
    ("assistant", "Found it: the clock skew in verify_token() of auth/jwt.py."),
    ("user", "Lunch at noon? Pasta again."),
    ("assistant", "Sure, pasta at noon."),
    ("user", "We moved the production deploy to Fridays."),
]
QUERIES = ["why did verify_token fail?", "when is the deploy?", "lunch?"]


class SlowSummarizer(ExtractiveSummarizer):
    """The extractive summarizer, ``delay_s`` slower per turn (a model called remotely):
    ``started`` is set at each call's start, ``calls`` counts the calls finished."""

    def __init__(self, delay_s: float = 0.3) -> None:
        super().__init__()
        self.delay_s = delay_s
        self.started = threading.Event()
        self.calls = 0

    def condense(self, text: str, *, chunks_ratio: float, summary_ratio: float) -> Condensed:
        self.started.set()
        time.sleep(self.delay_s)
        self.calls += 1
        return super().condense(text, chunks_ratio=chunks_ratio, summary_ratio=summary_ratio)


class StuckSummarizer(SlowSummarizer):
    """A summarizer whose calls wait for ``release`` (15 s at most): a remote model that does
    not answer."""

    def __init__(self, release: threading.Event) -> None:
        super().__init__(0.0)
        self.release = release

    def condense(self, text: str, *, chunks_ratio: float, summary_ratio: float) -> Condensed:
        self.started.set()
        self.release.wait(15)
        return super().condense(text, chunks_ratio=chunks_ratio, summary_ratio=summary_ratio)


# every turn but the newest condensed at each turn: a consolidation of several calls
CONDENSING = ContextConfig(
    consolidation_interval=1, consolidation_ages=(1, 50), consolidation_threshold=0.0
)


def turns_of(path: str | Path) -> list[tuple[int, str, str]]:
    """The turns stored in the file, read by a memory of its own."""
    with ConversationMemory(path) as memory:
        return [(t.id, t.role, t.text) for t in memory.turns()]


def test_the_async_methods_give_what_the_sync_ones_give(tmp_path: Path) -> None:
    config = ContextConfig(working_memory=2, consolidation_interval=3)
    sync = ConversationMemory(tmp_path / "sync.db", config=config, background=False)
    sync_ids = [sync.add_turn(text, role, at=60 * i) for i, (role, text) in enumerate(CHAT)]

    async def chat() -> tuple[list[int], list[object], list[object]]:
        with ConversationMemory(tmp_path / "async.db", config=config, background=False) as mem:
            ids = [
                await mem.aadd_turn(text, role, at=60 * i) for i, (role, text) in enumerate(CHAT)
            ]
            assembled: list[object] = []
            retrieved: list[object] = []
            for query in QUERIES:
                for budget in (10, 50, 1000):  # 50: some turns at SUMMARY
                    assembled.append(await mem.aassemble(query, budget, at=600))
                retrieved.append(await mem.aretrieve(query, k=3, at=600))
                retrieved.append(
                    await mem.aretrieve(query, k=5, mode="analytical", at=600, weights=(0, 1))
                )
            assert [vars(t) for t in mem.turns()] == [vars(t) for t in sync.turns()]
            return ids, assembled, retrieved

    ids, assembled, retrieved = asyncio.run(chat())
    assert ids == sync_ids
    assert assembled == [
        sync.assemble(query, budget, at=600) for query in QUERIES for budget in (10, 50, 1000)
    ]
    assert retrieved == [
        found
        for query in QUERIES
        for found in (
            sync.retrieve(query, k=3, at=600),
            sync.retrieve(query, k=5, mode="analytical", at=600, weights=(0, 1)),
        )
    ]
    assert any(t.level.value == "summary" for turns in assembled for t in turns)  # type: ignore[attr-defined]
    sync.close()


def test_the_async_methods_raise_the_sync_methods_typed_errors() -> None:
    async def misuse(memory: ConversationMemory) -> list[tuple[type[Exception], str]]:
        raised: list[tuple[type[Exception], str]] = []
        for call in (
            lambda: memory.aadd_turn("Noted.", role="god"),
            lambda: memory.aadd_turn(b"bytes"),  # type: ignore[arg-type]
            lambda: memory.aadd_turn("Late.", at=-1.0),
            lambda: memory.aassemble("deploy?", -1),
            lambda: memory.aassemble("deploy?", 1.5),  # type: ignore[arg-type]
            lambda: memory.aretrieve("deploy?", k=0),
            lambda: memory.aretrieve("deploy?", sessions="s1"),
        ):
            with pytest.raises(SynapseError) as caught:
                await call()
            raised.append((type(caught.value), str(caught.value)))
        return raised

    def sync_errors(memory: ConversationMemory) -> list[tuple[type[Exception], str]]:
        raised: list[tuple[type[Exception], str]] = []
        for call in (
            lambda: memory.add_turn("Noted.", role="god"),
            lambda: memory.add_turn(b"bytes"),  # type: ignore[arg-type]
            lambda: memory.add_turn("Late.", at=-1.0),
            lambda: memory.assemble("deploy?", -1),
            lambda: memory.assemble("deploy?", 1.5),  # type: ignore[arg-type]
            lambda: memory.retrieve("deploy?", k=0),
            lambda: memory.retrieve("deploy?", sessions="s1"),
        ):
            with pytest.raises(SynapseError) as caught:
                call()
            raised.append((type(caught.value), str(caught.value)))
        return raised

    memory = ConversationMemory(":memory:")
    memory.add_turn("We moved the deploy to Fridays.", at=0)
    async_errors = asyncio.run(misuse(memory))
    assert async_errors == sync_errors(memory)
    assert [kind for kind, _ in async_errors] == [
        InvalidValueError,
        InvalidTypeError,
        InvalidValueError,
        InvalidValueError,
        InvalidTypeError,
        InvalidValueError,
        InvalidTypeError,
    ]
    assert len(memory) == 1  # nothing stored by a refused turn
    memory.close()
    with pytest.raises(SynapseError, match="closed"):
        asyncio.run(memory.aadd_turn("After close."))
    with pytest.raises(SynapseError, match="closed"):
        asyncio.run(memory.aretrieve("deploy?"))


def test_the_loop_is_never_held_up_by_a_slow_embedder() -> None:
    embedder = SlowEmbedder(0.3)

    async def scenario() -> None:
        with ConversationMemory(":memory:", embedder=embedder) as memory:
            for i, (role, text) in enumerate(CHAT[:3]):
                await memory.aadd_turn(text, role, at=60 * i)
            turns = await memory.aassemble("why did verify_token fail?", 1000, at=300)
            found = await memory.aretrieve("why did verify_token fail?", k=2, at=300)
        assert [t.turn_id for t in turns] == [1, 2, 3]
        assert found[0].turn_id == 1

    calls = embedder.calls
    stall = least_stall(scenario)
    assert embedder.calls - calls >= 5  # every call embedded at 0.3 s: 1.5 s of embedding
    assert stall <= STALL_BOUND_S, f"the loop was held up {stall * 1000:.0f} ms"


def test_async_with_closes_off_the_loop_while_a_consolidation_finishes() -> None:
    # `with` in a coroutine closed on the loop, waiting for the consolidation under way:
    # its embedder's call held the loop (0.5 s and more for a 0.5 s embedder)
    config = ContextConfig(consolidation_interval=1)  # one under way at every turn

    async def scenario() -> None:
        embedder = SlowEmbedder(0.2)
        async with ConversationMemory(":memory:", embedder=embedder, config=config) as memory:
            for i, (role, text) in enumerate(CHAT[:3]):
                await memory.aadd_turn(text, role, at=60 * i)
        with pytest.raises(SynapseError, match="closed"):
            memory.turns()

    stall = least_stall(scenario)
    assert stall <= STALL_BOUND_S, f"the loop was held up {stall * 1000:.0f} ms"


def test_the_heartbeat_sees_a_slow_embedder_called_on_the_loop() -> None:
    """The measure itself: the sync calls from a coroutine hold the loop for the delay."""

    async def on_the_loop() -> None:
        with ConversationMemory(":memory:", embedder=SlowEmbedder(0.3)) as memory:
            memory.add_turn("We moved the deploy to Fridays.", at=0)

    assert asyncio.run(longest_stall(on_the_loop())) >= 0.25


def test_a_turn_cancelled_while_embedded_is_not_stored(conversation_where: str) -> None:
    path = conversation_where
    embedder = SlowEmbedder(0.5)

    async def cancelled() -> None:
        with ConversationMemory(path, embedder=embedder) as memory:
            await memory.aadd_turn("We moved the deploy to Fridays.", at=0)
            embedder.started.clear()
            embedder.finished.clear()
            task = asyncio.ensure_future(memory.aadd_turn("Lunch at noon?", at=60))
            await asyncio.to_thread(embedder.started.wait, 10)
            task.cancel()
            with pytest.raises(asyncio.CancelledError):
                await task
            await asyncio.to_thread(embedder.finished.wait, 10)  # the embedding ran out
            await asyncio.sleep(0.2)  # and nothing was written after it
            assert [t.text for t in memory.turns()] == ["We moved the deploy to Fridays."]
            assert await memory.aadd_turn("Sure.", role="assistant", at=120) == 2

    asyncio.run(cancelled())
    assert turns_of(path) == [
        (1, "user", "We moved the deploy to Fridays."),
        (2, "assistant", "Sure."),
    ]


def test_a_turn_cancelled_while_written_is_stored_whole_before_the_await_ends(
    conversation_where: str,
) -> None:
    path = conversation_where
    counted: list[str] = []

    def tokens(text: str) -> int:
        counted.append(text)  # the last step before the write
        return len(text.split())

    async def cancelled() -> None:
        with ConversationMemory(path, tokens, embedder=HashingEmbedder()) as memory:
            await memory.aadd_turn("We moved the deploy to Fridays.", at=0)
            with holding_writes(path):  # another process holds the write lock
                task = asyncio.ensure_future(memory.aadd_turn("Lunch at noon?", at=60))
                while "Lunch at noon?" not in counted:
                    await asyncio.sleep(0.01)
                await asyncio.sleep(0.5)  # the write has begun: it waits for the lock
                task.cancel()
                await asyncio.sleep(0.3)
                assert not task.done()  # the await ends when the write does, not before
                task.cancel()  # a second cancellation (a timeout after a task group's) too
                await asyncio.sleep(0.3)
                assert not task.done()
            with pytest.raises(asyncio.CancelledError):
                await task
            assert [t.text for t in memory.turns()][-1] == "Lunch at noon?"  # at once
            assert len(memory) == 2

    asyncio.run(cancelled())
    assert turns_of(path) == [
        (1, "user", "We moved the deploy to Fridays."),
        (2, "user", "Lunch at noon?"),
    ]


def test_a_turn_cancelled_while_written_still_requests_the_consolidation_it_makes_due(
    conversation_where: str,
) -> None:
    # the request came after the write's await, which a cancellation ends: the consolidation
    # the turn made due waited for the next turn, or the next open
    path = conversation_where
    config = ContextConfig(consolidation_interval=1)

    async def cancelled() -> bool:
        with ConversationMemory(path, config=config, embedder=HashingEmbedder()) as memory:
            with holding_writes(path):  # another process holds the write lock
                task = asyncio.ensure_future(memory.aadd_turn("Lunch at noon?", at=60))
                await asyncio.sleep(0.5)  # the write has begun: it waits for the lock
                task.cancel()
            with pytest.raises(asyncio.CancelledError):
                await task
            assert len(memory) == 1  # cancelled in its write, not before: stored
            assert memory.wait_for_consolidation(30)
            return memory.consolidate()  # False: the turn was consolidated already

    assert asyncio.run(cancelled()) is False


def test_reads_cancelled_midway_leave_the_memory_as_it_was(conversation_where: str) -> None:
    path = conversation_where
    embedder = SlowEmbedder(0.3)

    async def cancelled() -> None:
        with ConversationMemory(path, embedder=embedder) as memory:
            await memory.aadd_turn("We moved the deploy to Fridays.", at=0)
            before = [vars(t) for t in memory.turns()]
            for read in (
                memory.aassemble("deploy?", 100, at=60),
                memory.aretrieve("deploy?", at=60),
            ):
                embedder.finished.clear()
                task = asyncio.ensure_future(read)
                await asyncio.sleep(0.05)
                task.cancel()
                with pytest.raises(asyncio.CancelledError):
                    await task
                await asyncio.to_thread(embedder.finished.wait, 10)
            assert [vars(t) for t in memory.turns()] == before
            assert [t.text for t in await memory.aassemble("deploy?", 100, at=60)] == [
                "We moved the deploy to Fridays."
            ]

    asyncio.run(cancelled())


def test_a_cancelled_aclose_leaves_the_memory_closed_when_the_cancellation_is_raised(
    tmp_path: Path,
) -> None:
    # the close went on in its worker thread, waiting for the consolidation: the memory
    # answered calls after the cancelled await, and was closed under them a moment later
    path = tmp_path / "chat.db"
    summarizer = SlowSummarizer(0.3)

    async def cancelled() -> None:
        memory = ConversationMemory(path, summarizer=summarizer, config=CONDENSING)
        for i, (role, text) in enumerate(CHAT):
            await memory.aadd_turn(text, role, at=60 * i)
        await asyncio.to_thread(summarizer.started.wait, 10)  # a consolidation under way
        task = asyncio.ensure_future(memory.aclose())
        await asyncio.sleep(0.05)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        with pytest.raises(ClosedError):
            memory.turns()  # closed when the cancellation is raised, not some time after
        calls = summarizer.calls
        await memory.aclose()  # closed already: nothing to do
        assert await asyncio.to_thread(memory.wait_for_consolidation, 10)
        # the consolidation stopped at its next turn: the call under way ended, no other began
        assert summarizer.calls <= calls + 1

    asyncio.run(cancelled())
    assert [text for _, _, text in turns_of(path)] == [text for _, text in CHAT]


def test_a_cancelled_aclose_ends_while_the_summarizers_call_goes_on(tmp_path: Path) -> None:
    # the cancellation waited for the close, which waited for the summarizer's call under
    # way: a timeout around aclose lasted as long as the slowest call to a remote model
    release = threading.Event()

    summarizer = StuckSummarizer(release)

    async def cancelled() -> float:
        memory = ConversationMemory(tmp_path / "chat.db", summarizer=summarizer, config=CONDENSING)
        for i, (role, text) in enumerate(CHAT[:3]):
            await memory.aadd_turn(text, role, at=60 * i)
        await asyncio.to_thread(summarizer.started.wait, 10)  # a call that does not return
        began = time.monotonic()
        with pytest.raises(TimeoutError):
            await asyncio.wait_for(memory.aclose(), 0.1)
        took = time.monotonic() - began
        with pytest.raises(ClosedError):
            memory.turns()
        release.set()  # the call returns, and the consolidation stops, storing nothing
        assert await asyncio.to_thread(memory.wait_for_consolidation, 10)
        return took

    try:
        assert asyncio.run(cancelled()) < 10  # not the 15 s the call lasts
    finally:
        release.set()


@pytest.mark.parametrize("background", [False, True], ids=["inline", "background"])
@pytest.mark.parametrize("timeout", [None, 0.2], ids=["waits", "times-out"])
def test_close_waits_for_a_consolidation_called_in_another_thread(
    tmp_path: Path, background: bool, timeout: float | None, caplog: pytest.LogCaptureFixture
) -> None:
    # consolidate() ran uncounted: close closed the database under it, so its work was
    # lost and the user's consolidation lease stayed held, as a background=False run's was;
    # then, beside an idle background worker, the worker's exit ran close's cleanup under it
    release = threading.Event()
    release.set()
    summarizer = StuckSummarizer(release)
    config = ContextConfig(
        consolidation_interval=2, consolidation_ages=(1, 50), consolidation_threshold=0.0
    )
    memory = ConversationMemory(
        tmp_path / "chat.db", summarizer=summarizer, config=config, background=background
    )
    memory.add_turn("The deploy moved to Fridays.", at=0)
    memory.add_turn("Lunch at noon?", at=60)  # a consolidation: on the worker, if any
    assert memory.wait_for_consolidation(10)
    memory.add_turn("Sure.", at=120)  # none due: left for the explicit one
    release.clear()
    summarizer.started.clear()
    ran: list[bool] = []
    running = threading.Thread(target=lambda: ran.append(memory.consolidate()))
    running.start()
    assert summarizer.started.wait(10)
    closed = threading.Event()
    closing = threading.Thread(target=lambda: (memory.close(timeout), closed.set()))
    closing.start()
    try:
        if timeout is None:
            assert not closed.wait(0.5)  # the run under way is waited for, not cut
        else:
            assert closed.wait(10)  # closed past its timeout; the run stores nothing
    finally:
        release.set()
    running.join(15)
    closing.join(15)
    assert ran == [timeout is None] and closed.is_set()
    assert "lease" not in caplog.text  # let go, not left held on a closed database
    later = dataclasses.replace(config, consolidation_interval=100)  # only when asked
    with ConversationMemory(tmp_path / "chat.db", config=later, background=False) as again:
        condensed = [t.chunks is not None for t in again.turns()]
        assert condensed == [True, timeout is None, False]
        again.add_turn("One more.", at=600)
        assert again.consolidate()  # the lease was let go


@pytest.mark.parametrize("cancelled", [False, True], ids=["close-timeout", "cancelled-aclose"])
def test_a_close_past_its_timeout_does_not_wait_for_an_embedders_call(
    tmp_path: Path, cancelled: bool
) -> None:
    # a consolidation's catch-up re-embeds the turns another embedder stored, under the
    # memory's lock, and close took that lock to mark the memory closed: close(timeout=0.1),
    # or a cancelled aclose, lasted as long as the call (3 s for a remote model's)
    release = threading.Event()

    class Stuck(HashingEmbedder):
        started = threading.Event()

        @property
        def name(self) -> str:
            return "stuck-hash"

        def embed(self, texts: Sequence[str]) -> npt.NDArray[np.float32]:
            if threading.current_thread().name == "consolidating-here":
                self.started.set()
                release.wait(15)
            return super().embed(texts)

    embedder = Stuck(dim=64)
    memory = ConversationMemory(tmp_path / "chat.db", embedder=embedder, config=CONDENSING)
    try:
        memory.add_turn("The deploy moved to Fridays.", at=0)
        assert memory.wait_for_consolidation(10)
        with ConversationMemory(tmp_path / "chat.db", embedder=HashingEmbedder(dim=64)) as other:
            other.add_turn("Lunch at noon?", at=60)  # another embedder's vector
        # the consolidation takes that turn in first, re-embedding it: and waits
        running = threading.Thread(target=memory.consolidate, name="consolidating-here")
        running.start()
        assert embedder.started.wait(10)
        began = time.monotonic()
        if cancelled:

            async def close() -> None:
                with pytest.raises(TimeoutError):
                    await asyncio.wait_for(memory.aclose(), 0.1)

            asyncio.run(close())
        else:
            memory.close(timeout=0.1)
        took = time.monotonic() - began
    finally:
        release.set()  # the call returns; the run stops at its next turn, storing nothing
    running.join(15)
    assert took < 10  # not the 15 s the embedder's call lasts
    with pytest.raises(ClosedError):
        memory.turns()


@pytest.mark.parametrize("timeout", [None, 0.1])
def test_a_close_while_another_threads_close_runs_returns_with_the_memory_closed(
    tmp_path: Path, timeout: float | None
) -> None:
    # the second close returned at once while the first waited for the consolidation, and
    # the memory took a turn after it (id 3): closed, as its own close had said, only later
    release = threading.Event()

    summarizer = StuckSummarizer(release)
    memory = ConversationMemory(tmp_path / "chat.db", summarizer=summarizer, config=CONDENSING)
    try:
        for i, (role, text) in enumerate(CHAT[:3]):
            memory.add_turn(text, role, at=60 * i)
        assert summarizer.started.wait(10)  # a consolidation under way, in a call
        first = threading.Thread(target=memory.close)  # waits for the consolidation
        first.start()
        deadline = time.monotonic() + 10
        while memory._release.alive and time.monotonic() < deadline:  # the first close began
            time.sleep(0.01)
        assert not memory._release.alive
        if timeout is None:
            threading.Timer(0.3, release.set).start()  # the call returns: both closes end
        memory.close(timeout)
        with pytest.raises(ClosedError):
            memory.add_turn("After the close.", at=600)
    finally:
        release.set()
    first.join(10)
    assert not first.is_alive()


def test_a_turn_cancelled_while_it_consolidates_inline_is_waited_for_by_aclose(
    tmp_path: Path,
) -> None:
    # background=False: the turn's consolidation ran on in its worker thread after the
    # cancelled await, unseen by close(), which closed the database under it: the run could
    # not release its lease, and the user's consolidation stayed locked out for 600 s
    path = tmp_path / "chat.db"
    summarizer = SlowSummarizer(0.0)

    async def cancelled() -> None:
        memory = ConversationMemory(
            path, summarizer=summarizer, config=CONDENSING, background=False
        )
        for i, (role, text) in enumerate(CHAT[:-1]):
            await memory.aadd_turn(text, role, at=60 * i)
        summarizer.delay_s = 0.3
        summarizer.started.clear()
        task = asyncio.ensure_future(memory.aadd_turn(CHAT[-1][1], at=600))
        await asyncio.to_thread(summarizer.started.wait, 10)  # its consolidation runs
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        await memory.aclose()  # waits for the run, then closes the database

    asyncio.run(cancelled())
    with ConversationMemory(path, summarizer=SlowSummarizer(0.0), background=False) as again:
        assert [t.text for t in again.turns()][-1] == CHAT[-1][1]  # the turn stored whole
        again.add_turn("A turn after the restart.", at=660)
        assert again.consolidate()  # the lease was released: this user consolidates again
