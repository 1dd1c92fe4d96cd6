"""Tests for conversation/memory.py: the public API, persistence, consolidation, bad input."""

from __future__ import annotations

import contextlib
import copy
import itertools
import logging
import math
import pickle
import re
import sqlite3
import subprocess
import sys
import textwrap
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from store_backends import stored

from synapse_retriever import NotASynapseDatabaseError, SynapseStore
from synapse_retriever._text import blank
from synapse_retriever.conversation import (
    ROLES,
    Condensed,
    ContextBudgetError,
    ContextConfig,
    ConversationMemory,
    ExtractiveSummarizer,
    HashingEmbedder,
)
from synapse_retriever.conversation.assemble import working_span
from synapse_retriever.conversation.config import PRESETS
from synapse_retriever.errors import (
    ClosedError,
    CorruptDatabaseError,
    InvalidTypeError,
    InvalidValueError,
    ReadOnlyStoreError,
    SynapseError,
)
from synapse_retriever.persistence.sqlite import APPLICATION_ID
from synapse_retriever.persistence.sqlite import SCHEMA_VERSION as CORE_SCHEMA_VERSION

CHAT = [
    ("user", "Morning! I moved the production deploy to Fridays. Anyway, coffee time."),
    ("assistant", "Noted. Fridays it is. Enjoy the coffee, and maybe a croissant too."),
    ("user", "The weather is grey again today."),
    ("assistant", "Grey days are good for focused work. A walk at lunch could help."),
    ("user", "My sister Ingrid visits next month."),
    ("assistant", "How lovely. Do you have plans for her visit?"),
    ("user", "Maybe a museum. The weather is grey again, by the way."),
    ("assistant", "Museums are perfect for grey weather."),
]


def fill(memory: ConversationMemory, chat: list[tuple[str, str]] = CHAT, start: int = 0) -> None:
    for i, (role, text) in enumerate(chat):
        memory.add_turn(text, role=role, at=start + 60 * i, session="s1")


def test_the_api_of_the_issue() -> None:
    memory = ConversationMemory(":memory:", token_counter=None, config=None)
    turn_id = memory.add_turn("I moved the deploy to Fridays", role="user", at=None, session="s1")
    context = memory.assemble("when do we deploy?", budget_tokens=2000, at=None)
    assert [(t.turn_id, t.role, t.level, t.text) for t in context] == [
        (turn_id, "user", "full", "I moved the deploy to Fridays")
    ]
    assert context[0].session == "s1"
    memory.close()


def test_an_empty_history_assembles_to_nothing() -> None:
    with ConversationMemory() as memory:
        assert memory.assemble("anything?", 100) == []
        assert memory.assemble(None, 0) == []
        assert len(memory) == 0


def test_old_turns_fade_by_importance_and_the_context_fits(tmp_path: Path) -> None:
    gradient = ContextConfig.gradient()
    with ConversationMemory(tmp_path / "m.db", config=gradient, background=False) as memory:
        fill(memory)
        full = memory.assemble("when is the deploy?", 10_000, at=600)
        tight = memory.assemble("when is the deploy?", 60, at=600)
    assert [t.level for t in full][-5:] == ["full"] * 5  # working memory
    assert sum(t.tokens for t in tight) <= 60
    assert [t.level for t in tight][-5:] == ["full"] * 5
    first = tight[0]  # the deploy turn survives, condensed around the question
    assert first.turn_id == 1 and first.level != "full"
    assert "Fridays" in first.text


def test_every_decision_uses_the_callers_token_counter() -> None:
    def characters(text: str) -> int:
        return len(text)

    with ConversationMemory(token_counter=characters, background=False) as memory:
        fill(memory)
        context = memory.assemble("deploy", 400, at=600)
    assert all(t.tokens == len(t.text) for t in context)
    assert sum(len(t.text) for t in context) <= 400


def test_the_default_keeps_the_old_deploy_turn_whole_and_working_memory_in_a_tenth() -> None:
    with ConversationMemory(background=False) as memory:
        fill(memory)
        context = memory.assemble("when is the deploy?", 60, at=600)
    assert sum(t.tokens for t in context) <= 60
    # working memory: the newest turn (7 tokens, always kept), then older ones within 6
    # tokens (a tenth of 60): the one before (12 tokens) would make 19, so the newest alone
    assert (context[-1].turn_id, context[-1].level) == (8, "full")
    assert (context[0].turn_id, context[0].level) == (1, "full")  # first by relevance
    assert context[0].text == CHAT[0][1]


def test_a_budget_smaller_than_the_newest_turn_is_a_clear_error() -> None:
    with ConversationMemory() as memory:
        fill(memory)
        with pytest.raises(ContextBudgetError, match=r"working memory alone needs \d+ tokens"):
            memory.assemble("deploy", 3)


def test_a_budget_smaller_than_working_memory_is_a_clear_error() -> None:
    with ConversationMemory(config=ContextConfig.published()) as memory:
        fill(memory)
        with pytest.raises(ContextBudgetError, match=r"working memory alone needs \d+ tokens"):
            memory.assemble("deploy", 10)
        with pytest.raises(ContextBudgetError) as error:
            memory.assemble("deploy", 0)
        assert error.value.budget == 0 and error.value.needed > 0


def test_shrink_keeps_whole_turns_when_working_memory_does_not_fit() -> None:
    config = ContextConfig(overflow="shrink")
    with ConversationMemory(config=config) as memory:
        fill(memory)
        context = memory.assemble("deploy", 25)
    assert sum(t.tokens for t in context) <= 25
    assert context[-1].level == "full" and context[-1].text == CHAT[-1][1]


@pytest.mark.parametrize(
    ("text", "error", "message"),
    [
        ("", InvalidValueError, "empty turn"),
        ("   \n", InvalidValueError, "empty turn"),
        # shows nothing: a byte order mark, zero-width spaces and joiners, a soft hyphen
        ("\ufeff", InvalidValueError, "empty turn"),
        ("\u200b\u200c\u200d \u2060", InvalidValueError, "empty turn"),
        ("\u00ad\u180e\u3000", InvalidValueError, "empty turn"),
        ([{"type": "image_url", "image_url": "x.png"}], InvalidTypeError, "multimodal"),
        (None, InvalidTypeError, "text must be a str, got NoneType"),
    ],
)
def test_bad_turns_are_refused_before_anything_is_stored(
    text: object, error: type[Exception], message: str
) -> None:
    with ConversationMemory() as memory:
        with pytest.raises(error, match=message):
            memory.add_turn(text)  # type: ignore[arg-type]
        assert len(memory) == 0


def test_numpy_numbers_are_numbers() -> None:
    # k=np.int64(2) and budget np.int64 were InvalidTypeError, weights of NumPy numbers
    # "two finite numbers >= 0 ... got (np.float32(1.0), np.int64(1))", and a token counter
    # returning np.int64 "must return an integer"
    counter = lambda text: np.int64(len(text.split()))  # noqa: E731
    with ConversationMemory(token_counter=counter) as memory:
        memory.add_turn("The deploy moved to Fridays.", at=0)
        memory.add_turn("Lunch?", at=1)
        assert memory.assemble("deploy", np.int64(50), turn_overhead=np.int32(1)) == (
            memory.assemble("deploy", 50, turn_overhead=1)
        )
        weights = (np.float32(1.0), np.int64(1))
        assert memory.retrieve("deploy", k=np.int64(2), weights=weights) == memory.retrieve(
            "deploy", k=2, weights=(1.0, 1.0)
        )
        with pytest.raises(InvalidTypeError, match=r"k must be an int, got bool np\.True_"):
            memory.retrieve("deploy", k=np.bool_(True))  # type: ignore[arg-type]


def test_a_speaker_that_shows_nothing_or_holds_a_control_character_is_refused() -> None:
    with ConversationMemory() as memory:
        with pytest.raises(
            InvalidValueError, match=r"must not hold a control character, got '\\x07'"
        ):
            memory.add_turn("hi", speaker="a\x07b")
        with pytest.raises(InvalidValueError, match="speaker must be None or a name of 1 to 200"):
            memory.add_turn("hi", speaker="\u200b")
        assert len(memory) == 0
        assert memory.add_turn("hi \u200b there", speaker="Ann\u00e9") == 1  # visible: kept


@pytest.mark.parametrize("copied", [copy.copy, copy.deepcopy, pickle.dumps])
def test_a_memory_is_neither_pickled_nor_copied(copied: Callable[[object], object]) -> None:
    # a copy shared the storage, which the original's finalizer closed under it (a raw
    # sqlite3.ProgrammingError); a pickle failed on "cannot pickle 'mappingproxy' object"
    with ConversationMemory() as memory:
        memory.add_turn("deploys move to Fridays", at=0)
        with pytest.raises(InvalidTypeError, match="cannot pickle or copy a ConversationMemory"):
            copied(memory)
        assert [t.text for t in memory.turns()] == ["deploys move to Fridays"]


def test_a_session_name_over_200_characters_is_refused_and_named_in_short() -> None:
    # a session is stored with every turn and named in every result: a 1 MB name was kept
    with ConversationMemory() as memory:
        assert memory.add_turn("hi", session="s" * 200) == 1
        with pytest.raises(InvalidValueError, match="at most 200 characters, got 201") as refused:
            memory.add_turn("hi", session="s" * 201)
        with pytest.raises(InvalidValueError, match="got 1000000") as huge:
            memory.add_turn("hi", session="x" * 1_000_000)
        with pytest.raises(InvalidValueError, match="role must be one of") as role:
            memory.add_turn("hi", role="r" * 1_000_000)
        assert max(len(str(e.value)) for e in (refused, huge, role)) < 300
        assert [t.session for t in memory.turns()] == ["s" * 200]


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"text": "bad \udcff text"}, r"text must be valid Unicode, got 'bad \\udcff text'"),
        ({"text": "ok", "session": "s\udcff"}, r"session must be valid Unicode, got 's\\udcff'"),
        ({"text": "ok", "role": "user\udcff"}, r"role must be valid Unicode, got 'user\\udcff'"),
    ],
)
def test_a_lone_surrogate_is_refused_by_name_before_anything_is_stored(
    conversation_where: str, kwargs: dict[str, str], message: str
) -> None:
    # what os.fsdecode (surrogateescape) makes of bytes that are not UTF-8
    assert b"bad \xff text".decode("utf-8", "surrogateescape") == "bad \udcff text"
    path = conversation_where
    with ConversationMemory(path, background=False) as memory:
        with pytest.raises(InvalidValueError, match=message + r"; a lone surrogate '\\udcff'"):
            memory.add_turn(**kwargs, at=0)  # type: ignore[arg-type]
        assert len(memory) == 0
        memory.add_turn("next", at=0)  # the memory is still usable
    with ConversationMemory(path) as memory:
        assert [t.text for t in memory.turns()] == ["next"]


@pytest.mark.parametrize(
    "kwargs",
    [{"text": "a\x00b"}, {"text": "ok", "session": "s\x00"}, {"text": "ok", "speaker": "\x00x"}],
    ids=["text", "session", "speaker"],
)
def test_a_nul_is_refused_by_name_on_every_backend(
    conversation_where: str, kwargs: dict[str, str]
) -> None:
    # SQLite stored such a turn, PostgreSQL refused it: a memory moved to a team lost it
    name = next(iter(kwargs.keys() - {"text"}), "text")
    with ConversationMemory(conversation_where, background=False) as memory:
        with pytest.raises(InvalidValueError, match=f"{name} must not hold a NUL character"):
            memory.add_turn(**kwargs, at=0)  # type: ignore[arg-type]
        assert len(memory) == 0


def test_a_long_text_is_shown_shortened_with_where_its_surrogate_is() -> None:
    message = r"got 'a+'\.\.\.; a lone surrogate '\\udcff' at 500 "
    with ConversationMemory() as memory, pytest.raises(InvalidValueError, match=message):
        memory.add_turn("a" * 500 + "\udcff")


@pytest.mark.parametrize("role", ["god", "User", "usr", " user"])
def test_a_role_outside_the_documented_roles_is_refused(role: str) -> None:
    with ConversationMemory() as memory:
        with pytest.raises(InvalidValueError, match=rf"role must be one of \(.*\), got '{role}'"):
            memory.add_turn("hi", role=role)
        assert len(memory) == 0


def test_every_documented_role_is_stored_as_it_is() -> None:
    with ConversationMemory(background=False) as memory:
        for i, role in enumerate(ROLES):
            memory.add_turn(f"turn {i}", role=role, at=i)
        assert tuple(t.role for t in memory.turns()) == ROLES


def test_other_bad_arguments_name_the_value() -> None:
    with ConversationMemory() as memory:
        with pytest.raises(InvalidValueError, match="role must be a non-empty str"):
            memory.add_turn("hi", role="")
        with pytest.raises(InvalidValueError, match="session must be a non-empty str"):
            memory.add_turn("hi", session=" ")
        with pytest.raises(InvalidTypeError, match="role must be a non-empty str, got NoneType"):
            memory.add_turn("hi", role=None)  # type: ignore[arg-type]
        with pytest.raises(InvalidTypeError, match="session must be a non-empty str, got int 1"):
            memory.add_turn("hi", session=1)  # type: ignore[arg-type]
        memory.add_turn("hi", at=100)
        with pytest.raises(InvalidValueError, match="earlier than the previous turn"):
            memory.add_turn("back in time", at=50)
        with pytest.raises(InvalidTypeError, match="budget_tokens must be an int, got float"):
            memory.assemble("q", 10.5)  # type: ignore[arg-type]
        with pytest.raises(InvalidTypeError, match="budget_tokens must be an int, got bool"):
            memory.assemble("q", True)
        with pytest.raises(InvalidValueError, match="budget_tokens must be >= 0"):
            memory.assemble("q", -1)
        # past what a float holds: a raw OverflowError
        with pytest.raises(InvalidValueError, match=r"must be at most 2\*\*63 - 1, got 2\*\*1024"):
            memory.assemble("q", 2**1024)
        with pytest.raises(InvalidValueError, match="turn_overhead must be at most 2"):
            memory.assemble("q", 10, turn_overhead=10**400)
        with pytest.raises(InvalidValueError, match=r"weights must be \(vector, graph\)"):
            memory.retrieve("q", weights=(10**400, 1))
        for setting in ({"lexical_weight": 10**400}, {"rrf_k": 10**400},
                        {"temperatures": {"analytical": 10**400, "creative": 1.0,
                                          "conversational": 1.0}}):  # fmt: skip
            with pytest.raises(InvalidValueError, match="must be a"):
                ContextConfig(**setting)  # type: ignore[arg-type]
        assert memory.assemble("q", 2**63 - 1) is not None  # the largest budget
        with pytest.raises(InvalidTypeError, match="query must be a str or None"):
            memory.assemble(["q"], 10)  # type: ignore[arg-type]
        with pytest.raises(InvalidValueError, match="mode must be one of"):
            memory.assemble("q", 10, mode="sleepy")
        for mode in (["analytical"], {}):  # unhashable: a raw TypeError
            with pytest.raises(InvalidTypeError, match="mode must be a str, one of"):
                memory.assemble("q", 10, mode=mode)  # type: ignore[arg-type]
            with pytest.raises(InvalidTypeError, match="mode must be a str, one of"):
                memory.retrieve("q", mode=mode)  # type: ignore[arg-type]
            with pytest.raises(InvalidTypeError, match="mode must be one of"):
                ContextConfig(mode=mode)  # type: ignore[arg-type]
    with pytest.raises(InvalidTypeError, match="config must be a ContextConfig"):
        ConversationMemory(config={"working_memory": 3})  # type: ignore[arg-type]
    with pytest.raises(InvalidTypeError, match="summarizer must have condense"):
        ConversationMemory(summarizer=len)  # type: ignore[arg-type]
    with pytest.raises(InvalidTypeError, match=r"embedder must have name, dim and embed\(texts\)"):
        ConversationMemory(embedder="all-MiniLM-L6-v2")
    with pytest.raises(InvalidTypeError, match="token_counter must be a callable"):
        ConversationMemory(token_counter=5)  # type: ignore[arg-type]
    half = ConversationMemory(token_counter=lambda text: 0.5)  # type: ignore[arg-type,return-value]
    with pytest.raises(InvalidValueError, match="token_counter must return an integer"):
        half.add_turn("hi")
    half.close()


def test_a_closed_memory_says_so() -> None:
    memory = ConversationMemory()
    memory.close()
    memory.close()  # idempotent
    with pytest.raises(ClosedError, match="closed"):
        memory.add_turn("hi")
    with pytest.raises(ValueError, match="closed"):  # as Python's closed files raise
        memory.assemble("hi", 10)
    with pytest.raises(ClosedError, match="closed"):
        memory.turns()  # answered from what it held, as if open
    with pytest.raises(ClosedError, match="closed"):
        len(memory)


def test_used_refuses_what_is_no_sequence_of_results() -> None:
    with ConversationMemory() as memory:
        memory.add_turn("The deploy moved to Fridays.")
        (result,) = memory.retrieve("deploy", k=1)
        for bad in (None, result, 5):  # a raw TypeError, or one result's fields iterated
            with pytest.raises(InvalidTypeError, match="results must be a sequence of Retrieval"):
                memory.used(bad)  # type: ignore[arg-type]
        assert memory.used([result]) >= 0


def test_habituation_counts_near_identical_turns() -> None:
    with ConversationMemory() as memory:
        for _ in range(3):
            memory.add_turn("The weather is grey again today.")
        memory.add_turn("ok")  # no content terms: nothing new, nothing to compare
        records = memory.turns()
    assert [r.repeats for r in records] == [0, 1, 2, 0]
    assert [r.surprise for r in records] == [1.0, 0.0, 0.0, 0.0]


class Recording:
    """A summarizer that records its thread and can be held on an event."""

    def __init__(self) -> None:
        self.threads: list[int] = []
        self.release = threading.Event()
        self.release.set()

    def condense(self, text: str, *, chunks_ratio: float, summary_ratio: float) -> Condensed:
        self.threads.append(threading.get_ident())
        assert self.release.wait(10)
        return Condensed(f"chunks of {text[:10]}", f"summary of {text[:10]}")


def test_consolidation_runs_off_the_calling_thread_and_never_blocks_it() -> None:
    summarizer = Recording()
    summarizer.release.clear()  # the background summarizer is stuck until released
    config = ContextConfig(consolidation_interval=4, consolidation_ages=(0, 20))
    memory = ConversationMemory(config=config, summarizer=summarizer)
    for i in range(8):  # a consolidation is due at the 4th turn; add_turn does not wait
        memory.add_turn(f"turn number {i} about topic {i}", at=i)
    assert memory.assemble("topic", 200, at=10)  # assembling does not wait either
    assert memory.turns()[0].chunks is None
    summarizer.release.set()
    assert memory.wait_for_consolidation(timeout=10)
    assert summarizer.threads and threading.get_ident() not in summarizer.threads
    assert memory.turns()[0].chunks == "chunks of turn numbe"
    memory.close()


def test_a_consolidation_asks_the_embedder_for_nothing() -> None:
    # it embedded the last turn again, under the memory's lock: every read waited out a
    # model's round trip (and paid for it) at each consolidation
    class Counted(HashingEmbedder):
        def __init__(self) -> None:
            super().__init__(dim=64)
            self.texts: list[tuple[int, str]] = []

        def embed(self, texts: Sequence[str]) -> npt.NDArray[np.float32]:
            self.texts += [(threading.get_ident(), text) for text in texts]
            return super().embed(texts)

    embedder = Counted()
    config = ContextConfig(consolidation_interval=3, consolidation_ages=(0, 20))
    with ConversationMemory(config=config, embedder=embedder, summarizer=Recording()) as memory:
        for i in range(9):  # three consolidations, in the background
            memory.add_turn(f"turn number {i} about topic {i}", at=i)
            assert memory.wait_for_consolidation(timeout=10)
        assert all(t.chunks is not None for t in memory.turns()[:6])
    me = threading.get_ident()
    assert embedder.texts == [(me, f"turn number {i} about topic {i}") for i in range(9)]


def test_a_failing_background_summarizer_is_logged_not_raised(
    caplog: pytest.LogCaptureFixture,
) -> None:
    class Broken:
        def condense(self, text: str, *, chunks_ratio: float, summary_ratio: float) -> Condensed:
            raise RuntimeError("model unavailable")

    config = ContextConfig(consolidation_interval=2, consolidation_ages=(0, 5))
    with (
        caplog.at_level(logging.ERROR),
        ConversationMemory(config=config, summarizer=Broken()) as memory,
    ):
        memory.add_turn("first turn here", at=0)
        memory.add_turn("second turn here", at=1)
        assert memory.wait_for_consolidation(timeout=10)
        assert isinstance(memory.consolidation_error, RuntimeError)
        assert memory.assemble("turn", 100, at=2)  # extractive fallback, no crash
    assert "consolidation failed" in caplog.text


def test_consolidation_condenses_aging_turns_and_replays_themes() -> None:
    config = ContextConfig(working_memory=2)
    with ConversationMemory(config=config, background=False) as memory:
        chat = [(r, t) for r, t in CHAT] + [("user", "Grey weather all week, honestly.")] * 2
        fill(memory, chat)  # 10 turns: one consolidation, in this thread
        records = memory.turns()
        replays = memory.replays()
    # ages 5 to 20 (turns 0 to 4) with importance > 0.2 got chunks and summary
    assert all(r.chunks is not None and r.summary is not None for r in records[:5])
    assert all(r.chunks is None for r in records[5:])
    # Terms used in 2+ of the last 10 turns, by TF-IDF: grey and weather (4 turns each),
    # coffee and friday (turns 0 and 1), honestly (the repeated last turn). Every turn
    # mentioning one gains 0.05 (the default); only the two turns about the sister do not.
    assert replays == [(10, ["grey", "weather", "coffee", "friday", "honestly"])]
    boosts = [0.05, 0.05, 0.05, 0.05, 0.0, 0.0, 0.05, 0.05, 0.05, 0.05]
    assert [r.boost for r in records] == boosts


@pytest.mark.parametrize("blank_text", ["", "   ", "\u200b", "\ufeff\n"])
def test_a_blank_condensation_is_condensed_extractively_and_never_assembled(
    blank_text: str, caplog: pytest.LogCaptureFixture
) -> None:
    # a model that answered nothing visible was stored as the turn's chunks or summary, and
    # assemble gave a CHUNKS turn of "   ": a message with no text, which chat APIs refuse
    class Blank:
        def condense(self, text: str, *, chunks_ratio: float, summary_ratio: float) -> Condensed:
            return Condensed(blank_text, blank_text)

    with (
        caplog.at_level(logging.WARNING),
        ConversationMemory(":memory:", summarizer=Blank(), background=False) as memory,
    ):
        for i in range(40):
            memory.add_turn(
                f"Turn {i}: we talked about deploy number {i} and the build of app{i}.py. "
                "Then lunch.",
                at=60 * i,
            )
        condensed = [t for t in memory.turns() if t.chunks is not None]
        assert condensed and not any(
            blank(t.chunks or "") or blank(t.summary or "") for t in condensed
        )
        for budget in (60, 150, 400):
            assert not any(blank(t.text) for t in memory.assemble("the build?", budget, at=3000))
    assert "condensed extractively instead" in caplog.text


@pytest.mark.parametrize("blank_half", ["chunks", "summary"])
def test_a_blank_half_of_a_condensation_is_replaced_and_the_other_kept(blank_half: str) -> None:
    # either half blank threw the model's good half away with it
    class Half:
        def condense(self, text: str, *, chunks_ratio: float, summary_ratio: float) -> Condensed:
            good = f"model's {'summary' if blank_half == 'chunks' else 'chunks'}"
            return Condensed(*(("\u200b", good) if blank_half == "chunks" else (good, " ")))

    config = ContextConfig(consolidation_interval=3, consolidation_ages=(1, 10))
    with ConversationMemory(":memory:", config=config, summarizer=Half(), background=False) as m:
        fill(m, CHAT[:3])
        first = m.turns()[0]
    extractive = ExtractiveSummarizer().condense(
        first.text, chunks_ratio=config.chunks_ratio, summary_ratio=config.summary_ratio
    )
    if blank_half == "chunks":
        assert (first.chunks, first.summary) == (extractive.chunks, "model's summary")
    else:
        assert (first.chunks, first.summary) == ("model's chunks", extractive.summary)


@pytest.mark.parametrize("bad", ["a\ud800", "a\x00b"], ids=["surrogate", "nul"])
def test_a_condensation_no_backend_can_store_is_condensed_extractively(
    conversation_where: str, bad: str, caplog: pytest.LogCaptureFixture
) -> None:
    # a summarizing model's answer with a lone surrogate stopped every consolidation
    # (UnicodeEncodeError); one with a NUL was stored on SQLite and refused by PostgreSQL
    class Garbled:
        def condense(self, text: str, *, chunks_ratio: float, summary_ratio: float) -> Condensed:
            return Condensed(bad, "fine")

    config = ContextConfig(consolidation_interval=3, consolidation_ages=(0, 10))
    with (
        caplog.at_level(logging.WARNING),
        ConversationMemory(
            conversation_where, config=config, summarizer=Garbled(), background=False
        ) as memory,
    ):
        fill(memory, CHAT[:3])
        turns = memory.turns()
    assert all(t.chunks is not None and bad not in t.chunks for t in turns)
    assert "condensed extractively instead" in caplog.text


@pytest.mark.parametrize(
    ("themes", "error"),
    [
        (None, "themes.themes must return a list of str, got NoneType None"),
        ("deploy", "themes.themes must return a list of str, got str 'deploy'"),
        ([1], "themes.themes must return a list of str, got list [1]"),
    ],
)
def test_a_theme_extractor_of_the_wrong_type_is_named(themes: object, error: str) -> None:
    class Wrong:
        def themes(self, texts: Sequence[str]) -> object:
            return themes

    with ConversationMemory(themes=Wrong(), background=False) as memory:  # type: ignore[arg-type]
        fill(memory, CHAT[:3])
        with pytest.raises(InvalidTypeError, match=re.escape(error)):
            memory.consolidate()


@pytest.mark.parametrize("kind", [set, iter, tuple])
def test_a_theme_extractor_may_answer_any_iterable_of_str(kind: Any) -> None:
    class Any_:
        def themes(self, texts: Sequence[str]) -> object:
            return kind(["deploy"])

    with ConversationMemory(themes=Any_(), background=False) as memory:  # type: ignore[arg-type]
        fill(memory, CHAT[:3])
        assert memory.consolidate()
        assert memory.replays()[-1][1] == ["deploy"]


def test_themes_that_span_lines_or_cannot_be_stored_are_left_out() -> None:
    class Odd:
        def themes(self, texts: Sequence[str]) -> list[str]:
            return ["a\nb", "c", " ", "d\x00", "e\ud800", "deploy"]

    with ConversationMemory(themes=Odd(), background=False) as memory:
        fill(memory, CHAT[:3])
        assert memory.consolidate()
        assert memory.replays()[-1][1] == ["c", "deploy"]


def test_numpy_timeouts_huge_ints_and_the_consolidators_own_close() -> None:
    from synapse_retriever.conversation import Consolidator

    with ConversationMemory() as memory:
        assert memory.wait_for_consolidation(np.int64(1)) and memory.wait_for_consolidation(
            np.float32(0.5)
        )
        with pytest.raises(InvalidValueError, match="got an int of 16610 bits"):
            memory.wait_for_consolidation(-(10**5000))  # str() of it: a raw ValueError
        with pytest.raises(InvalidValueError, match="working_memory must be an integer"):
            ContextConfig(working_memory=10**5000)
        with pytest.raises(InvalidValueError, match="budget_tokens must be >= 0, got an int of"):
            memory.assemble("q", -(10**5000))
    worker, stopped = Consolidator(lambda: None), threading.Event()
    worker.request()
    worker.close(math.inf, then=stopped.set)  # thread.join(inf): a raw OverflowError
    assert stopped.wait(5)


def test_a_close_past_its_timeout_with_an_idle_worker_cleans_up_before_it_returns() -> None:
    # join(0) returned before the idle worker woke: the cleanup (the database's close) was
    # left to it, and close(0) returned with the database open (50 times in 50)
    from synapse_retriever.conversation import Consolidator

    for _ in range(20):
        worker, cleaned = Consolidator(lambda: None), []
        worker.request()
        assert worker.wait(5)
        worker.close(0, then=lambda: cleaned.append(True))  # noqa: B023
        assert cleaned == [True]


def test_a_job_raising_past_exception_leaves_the_worker_running_and_its_close_whole() -> None:
    # a summarizer's CancelledError (an asyncio bridge) ended the worker thread: no later
    # run, a close() without a timeout hung, and one with a timeout left the database open
    import asyncio

    from synapse_retriever.conversation import Consolidator

    runs: list[int] = []

    def job() -> None:
        runs.append(len(runs))
        if len(runs) == 1:
            raise asyncio.CancelledError

    worker, cleaned = Consolidator(job), threading.Event()
    worker.request()
    assert worker.wait(5) and isinstance(worker.last_error, asyncio.CancelledError)
    worker.request()
    assert worker.wait(5) and runs == [0, 1]
    worker.close(5, then=cleaned.set)
    assert cleaned.wait(5)


def test_a_worker_thread_that_cannot_start_runs_nothing_and_closes_whole(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Thread.start() refused (an interpreter shutting down): the unstarted thread was kept,
    # and close raised "cannot join thread before it is started", the database left open
    from synapse_retriever.conversation import Consolidator

    def refused(self: threading.Thread) -> None:
        raise RuntimeError("can't create new thread at interpreter shutdown")

    worker, cleaned = Consolidator(lambda: None), []
    with monkeypatch.context() as patch:
        patch.setattr(threading.Thread, "start", refused)
        worker.request()  # nothing runs, and the caller is not failed for it
    assert worker.wait(1)
    worker.close(1, then=lambda: cleaned.append(True))
    assert cleaned == [True]


@pytest.mark.parametrize("background", [True, False])
def test_a_memory_closed_from_its_own_consolidation_closes_and_lets_the_lease_go(
    tmp_path: Path, background: bool
) -> None:
    # close() called from a summarizer's call waited for the run it was part of, for ever:
    # the worker thread hung (background), or the caller's add_turn (background=False)
    class Closing(ExtractiveSummarizer):
        memory: ConversationMemory | None = None

        def condense(self, text: str, *, chunks_ratio: float, summary_ratio: float) -> Condensed:
            if self.memory is not None:
                memory, self.memory = self.memory, None
                memory.close()
            return super().condense(text, chunks_ratio=chunks_ratio, summary_ratio=summary_ratio)

    path = tmp_path / "chat.db"
    summarizer = Closing()
    config = ContextConfig(
        consolidation_interval=1, consolidation_ages=(1, 50), consolidation_threshold=0.0
    )
    memory = ConversationMemory(path, summarizer=summarizer, config=config, background=background)
    memory.add_turn("The deploy moved to Fridays.", at=0)
    summarizer.memory = memory
    added = threading.Event()

    def add() -> None:
        memory.add_turn("Lunch at noon?", at=60)  # its consolidation condenses the first turn
        added.set()

    threading.Thread(target=add, daemon=True).start()
    assert added.wait(10)
    assert memory.wait_for_consolidation(10)
    assert summarizer.memory is None  # closed from the summarizer
    with pytest.raises(ClosedError):
        memory.turns()
    with ConversationMemory(path, background=False) as again:
        again.add_turn("After the restart.", at=120)
        assert again.consolidate()  # the run let its lease go before the database closed


def test_a_bad_timeout_closes_nothing_and_no_limit_closes_the_database(tmp_path: Path) -> None:
    # close(inf) raised OverflowError from the wait, after marking the memory closed: the
    # database was never closed, and a second close() did nothing
    for no_limit in (math.inf, 10**400, 1e300):
        memory = ConversationMemory(tmp_path / f"{no_limit!r:.5}.db")
        fill(memory)
        for bad, error in (("1", InvalidTypeError), (True, InvalidTypeError),
                           (-1, InvalidValueError), (math.nan, InvalidValueError)):  # fmt: skip
            with pytest.raises(error, match="timeout must be None or seconds >= 0"):
                memory.close(bad)  # type: ignore[arg-type]
            with pytest.raises(error, match="timeout must be None or seconds >= 0"):
                memory.wait_for_consolidation(bad)  # type: ignore[arg-type]
        assert memory.add_turn("Still open.") > 0
        assert memory.wait_for_consolidation(no_limit)
        memory.close(no_limit)
        with pytest.raises(SynapseError, match="closed"):
            memory.turns()
        deadline = time.monotonic() + 10  # the database too, once the worker let go
        while time.monotonic() < deadline:
            try:
                memory._storage._db.execute("SELECT 1")  # type: ignore[attr-defined]
            except sqlite3.ProgrammingError:
                break
            time.sleep(0.01)
        else:
            raise AssertionError("the database stayed open")


def test_a_restart_loses_nothing(conversation_where: str) -> None:
    path = conversation_where
    config = ContextConfig(consolidation_interval=5)
    memory = ConversationMemory(path, config=config)
    fill(memory, CHAT * 2)
    assert memory.wait_for_consolidation(timeout=10)
    before_turns = memory.turns()
    before = memory.assemble("when is the deploy?", 80, at=2000)
    memory.close()

    reopened = ConversationMemory(path, config=config)
    assert reopened.turns() == before_turns  # texts, signals, condensations, boosts
    assert any(t.chunks for t in before_turns) and any(t.boost for t in before_turns)
    assert reopened.assemble("when is the deploy?", 80, at=2000) == before
    new_id = reopened.add_turn("And the retro is on Monday.", at=3000)
    assert new_id == before_turns[-1].id + 1
    reopened.close()


def test_a_due_consolidation_resumes_after_a_restart(conversation_where: str) -> None:
    class Unavailable:
        def condense(self, text: str, *, chunks_ratio: float, summary_ratio: float) -> Condensed:
            raise ConnectionError("the summarizing model is down")

    path = conversation_where
    config = ContextConfig(consolidation_interval=3, consolidation_ages=(0, 10))
    with ConversationMemory(path, config=config, summarizer=Unavailable()) as memory:
        fill(memory, CHAT[:3])  # the due consolidation fails: nothing recorded
        assert memory.wait_for_consolidation(timeout=10)
        assert all(t.chunks is None for t in memory.turns())
    with ConversationMemory(path, config=config, background=False) as reopened:
        assert all(t.chunks is not None for t in reopened.turns())  # run at open


def test_the_memory_shares_its_file_with_a_synapse_store(tmp_path: Path) -> None:
    path = tmp_path / "app.db"
    with SynapseStore(path) as store:
        store.reinforce(["auth/jwt.py", "config/keys.py"], at=0)
    with ConversationMemory(path) as memory:
        memory.add_turn("hello there", at=0)
    with SynapseStore(path) as store:
        assert store.weight("auth/jwt.py", "config/keys.py", at=0) == pytest.approx(0.3)
    with ConversationMemory(path) as memory:
        assert [t.text for t in memory.turns()] == ["hello there"]
    db = sqlite3.connect(path)
    assert db.execute("PRAGMA application_id").fetchone()[0] == APPLICATION_ID
    assert db.execute("PRAGMA user_version").fetchone()[0] == CORE_SCHEMA_VERSION
    tables = {row[0] for row in db.execute("SELECT name FROM sqlite_master WHERE type='table'")}
    assert {"edges", "context_turns", "context_meta", "context_replays"} <= tables
    db.close()


def test_a_new_file_is_stamped_as_a_synapse_database(tmp_path: Path) -> None:
    path = tmp_path / "new.db"
    ConversationMemory(path).close()
    with SynapseStore(path) as store:  # the core accepts it
        assert store.reinforce(["a", "b"], at=0) == 1


def test_files_of_other_applications_are_refused_and_left_untouched(tmp_path: Path) -> None:
    text = tmp_path / "notes.txt"
    text.write_text("not a database")
    with pytest.raises(NotASynapseDatabaseError, match="not an SQLite file"):
        ConversationMemory(text)
    assert text.read_text() == "not a database"
    other = tmp_path / "other.db"
    db = sqlite3.connect(other)
    db.execute("PRAGMA application_id = 1234")
    db.execute("CREATE TABLE t (x)")
    db.commit()
    db.close()
    content = other.read_bytes()
    with pytest.raises(NotASynapseDatabaseError, match="another application"):
        ConversationMemory(other)
    assert other.read_bytes() == content


def test_a_newer_memory_schema_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "m.db"
    ConversationMemory(path).close()
    db = sqlite3.connect(path)
    db.execute("UPDATE context_meta SET value = '99' WHERE key = 'schema_version'")
    db.commit()
    db.close()
    with pytest.raises(NotASynapseDatabaseError, match="schema version 99, newer"):
        ConversationMemory(path)


def test_reopening_with_another_embedder_recomputes_the_vectors(conversation_where: str) -> None:
    path = conversation_where
    with ConversationMemory(path, embedder=HashingEmbedder(dim=64), background=False) as memory:
        fill(memory)
        expected = memory.assemble("deploy", 10_000, at=600)
    with ConversationMemory(path, embedder=HashingEmbedder(dim=128)) as memory:
        assert [t.text for t in memory.assemble("deploy", 10_000, at=600)] == [
            t.text for t in expected
        ]
    assert stored(path, "SELECT DISTINCT embedder FROM context_turns") == [("hashing-v4-128",)]


def test_vectors_of_an_older_hashing_embedder_are_recomputed(conversation_where: str) -> None:
    path = conversation_where
    with ConversationMemory(path, background=False) as memory:
        memory.add_turn("Le déjeuner d'équipe est à midi, au café.", role="user", at=0)
        memory.add_turn("Noted.", role="assistant", at=60)
    stored(path, "UPDATE context_turns SET embedder = 'hashing-v3-1024'")  # as v3 left them
    with ConversationMemory(path) as memory:
        hits = memory.retrieve("dejeuner equipe cafe", k=1, at=120)
        assert hits[0].text.startswith("Le déjeuner")
        assert hits[0].origin == "both"  # the dense channel found it too, without accents
    assert stored(path, "SELECT DISTINCT embedder FROM context_turns") == [("hashing-v4-1024",)]


class Ones:
    """Every text the same vector: an embedder whose name does not say its size."""

    name = "ones"

    def __init__(self, dim: int) -> None:
        self.dim = dim

    def embed(self, texts: Sequence[str]) -> npt.NDArray[np.float32]:
        return np.ones((len(texts), self.dim), dtype=np.float32)


def test_vectors_of_another_size_under_the_same_name_are_recomputed(
    conversation_where: str,
) -> None:
    path = conversation_where
    with ConversationMemory(path, embedder=Ones(8), background=False) as memory:
        memory.add_turn("We moved the deploy to Fridays.", at=0)
    with ConversationMemory(path, embedder=Ones(16), background=False) as memory:
        assert [t.text for t in memory.assemble("deploy?", 100, at=1)] == [
            "We moved the deploy to Fridays."
        ]
    assert stored(path, "SELECT length(embedding) FROM context_turns") == [(16 * 4,)]


class Counted(Ones):
    """:class:`Ones` that counts the texts of each call, and fails while ``down``."""

    def __init__(self, dim: int) -> None:
        super().__init__(dim)
        self.calls: list[int] = []
        self.down = False

    def embed(self, texts: Sequence[str]) -> npt.NDArray[np.float32]:
        if self.down:
            raise ConnectionError("the embedding service is down")
        self.calls.append(len(texts))
        return super().embed(texts)


def test_a_memory_reopened_over_its_vectors_asks_the_model_nothing(
    conversation_where: str,
) -> None:
    # a new user's probe: each open embedded a probe text to learn the vector length, a
    # paid call per process start, and a memory could not even open while the model was down
    path = conversation_where
    with ConversationMemory(path, embedder=Ones(8), background=False) as memory:
        memory.add_turn("We moved the deploy to Fridays.", at=0)
    model = Counted(8)
    model.down = True
    with ConversationMemory(path, embedder=model, background=False) as memory:
        assert len(memory) == 1 and memory.turns()[0].text.startswith("We moved")
        with pytest.raises(ConnectionError):  # what needs the model fails as the model does
            memory.retrieve("deploy?", at=1)
        model.down = False
        assert [hit.text for hit in memory.retrieve("deploy?", at=1)] == [
            "We moved the deploy to Fridays."
        ]
    assert model.calls == [1]  # the question only


@pytest.mark.parametrize("first", ["add_turn", "retrieve"])
def test_a_model_resized_under_its_name_is_found_at_its_first_embedding(
    conversation_where: str, first: str
) -> None:
    path = conversation_where
    with ConversationMemory(path, embedder=Ones(8), background=False) as memory:
        memory.add_turn("We moved the deploy to Fridays.", at=0)
        memory.add_turn("Lunch at noon.", at=60)
    model = Counted(16)
    with ConversationMemory(path, embedder=model, background=False) as memory:
        assert model.calls == []
        if first == "add_turn":
            memory.add_turn("Coffee after lunch.", at=120)
        hits = memory.retrieve("deploy?", k=5, at=180)
    assert len(hits) == (3 if first == "add_turn" else 2)
    assert model.calls == [1, 2] + ([1] if first == "add_turn" else [])  # then every turn
    assert stored(path, "SELECT DISTINCT length(embedding) FROM context_turns") == [(16 * 4,)]


WORDS = ["deploy", "friday", "weather", "grey", "sister", "museum", "coffee", "report", "the"]


@settings(max_examples=40, deadline=None)
@given(
    turns=st.lists(
        st.lists(st.sampled_from(WORDS), min_size=1, max_size=30)
        .map(" ".join)
        .map(lambda words: words.replace(" the ", ". The ")),
        max_size=30,
    ),
    query=st.sampled_from(["", "deploy on friday?", "who is my sister", "grey weather"]),
    budget=st.integers(0, 400),
    preset=st.sampled_from(PRESETS),
)
def test_the_context_never_exceeds_the_budget_and_working_memory_stays_full(
    turns: list[str], query: str, budget: int, preset: str
) -> None:
    config = ContextConfig.preset(preset, consolidation_interval=7)
    with ConversationMemory(config=config, background=False) as memory:
        for i, text in enumerate(turns):
            memory.add_turn(text, role="user" if i % 2 else "assistant", at=i)
        working = memory.turns()[-config.working_memory :] if turns else []
        if config.working_share < 1 and working:  # the newest turns within the share
            tokens = [memory.token_counter(t.text) for t in working]
            span = working_span(tokens, config.working_memory, config.working_share * budget)
            working = working[len(working) - span :]
        needed = sum(memory.token_counter(t.text) for t in working)
        if needed > budget:
            with pytest.raises(ContextBudgetError):
                memory.assemble(query, budget, at=len(turns))
            return
        context = memory.assemble(query, budget, at=len(turns))
    assert sum(memory.token_counter(t.text) for t in context) <= budget
    tail = context[-len(working) :] if working else []
    assert [(t.turn_id, t.level, t.text) for t in tail] == [(w.id, "full", w.text) for w in working]
    assert [t.turn_id for t in context] == sorted(t.turn_id for t in context)


def test_a_per_turn_overhead_counts_toward_the_budget() -> None:
    with ConversationMemory(background=False) as memory:
        fill(memory)
        plain = memory.assemble("deploy", 80, at=600)
        labelled = memory.assemble("deploy", 80, at=600, turn_overhead=3)
        with pytest.raises(InvalidValueError, match="turn_overhead must be >= 0"):
            memory.assemble("deploy", 80, turn_overhead=-1)
    assert sum(t.tokens + 3 for t in labelled) <= 80
    assert sum(t.tokens for t in labelled) < sum(t.tokens for t in plain)


def test_working_memory_counts_the_per_turn_overhead_in_its_share() -> None:
    # working memory took the newest turns while their texts fit a tenth of the budget,
    # leaving out what each costs besides (turn_overhead, a tool call's arguments): five
    # 2-token turns at 15 tokens of overhead each held 85 of 100 tokens, and the fact
    # asked about, which needed 25, was dropped
    fact = "We moved the production deploy to Fridays."
    with ConversationMemory(background=False) as memory:
        memory.add_turn(fact, at=0)
        for i, text in enumerate(["Ok.", "Sure.", "Fine.", "Yes.", "Right."], start=1):
            memory.add_turn(text, role="assistant" if i % 2 else "user", at=60 * i)
        context = memory.assemble("When is the production deploy?", 100, at=600, turn_overhead=15)
    assert sum(t.tokens + 15 for t in context) <= 100
    assert (context[0].turn_id, context[0].level, context[0].text) == (1, "full", fact)
    assert (context[-1].turn_id, context[-1].level) == (6, "full")  # the newest turn, always


def test_turns_added_while_other_threads_assemble_never_break_a_context() -> None:
    errors: list[BaseException] = []
    with ConversationMemory() as memory:
        fill(memory)

        def reader() -> None:
            try:
                for _ in range(30):
                    context = memory.assemble("deploy", 400)
                    assert sum(t.tokens for t in context) <= 400
            except BaseException as exc:  # reported to the main thread
                errors.append(exc)

        readers = [threading.Thread(target=reader) for _ in range(3)]
        for thread in readers:
            thread.start()
        for i in range(60):
            memory.add_turn(f"more chat {i} about the deploy and the weather")
        for thread in readers:
            thread.join()
        assert memory.wait_for_consolidation(timeout=10)
    assert not errors


WRITER = textwrap.dedent(
    """
    import sys
    from synapse_retriever.conversation import ConversationMemory

    path, writer = sys.argv[1], int(sys.argv[2])
    with ConversationMemory(path, background=False) as memory:
        for i in range(50):
            turn = memory.add_turn(f"writer {writer} note {i}: deploys moved", session=f"w{writer}")
            ids = [t.id for t in memory.turns()]  # every turn stored, by any process, in order
            assert turn in ids and ids == list(range(1, len(ids) + 1)), (turn, ids)
    """
)


def test_a_memory_sees_the_turns_other_processes_add_without_reopening(
    conversation_where: str,
) -> None:
    path = conversation_where
    with ConversationMemory(path) as reader:
        reader.add_turn("Before the writers came: deploys move to Fridays.", session="r")
        context = reader.assemble("deploys", 100_000)  # the view it keeps, opened before them
        writers = [
            subprocess.Popen([sys.executable, "-c", WRITER, str(path), str(writer)])
            for writer in range(4)
        ]
        assert [writer.wait(timeout=300) for writer in writers] == [0, 0, 0, 0]
        # 4 writers x 50 turns: the reader sees every one, once, without reopening
        turns = reader.turns()
        expected = {f"writer {w} note {i}: deploys moved" for w in range(4) for i in range(50)}
        assert len(turns) == len(reader) == 201 and {t.text for t in turns[1:]} == expected
        assert [t.id for t in turns] == list(range(1, 202))
        assert [t.at for t in turns] == sorted(t.at for t in turns)  # times in id order
        assert len(context) == 1 and len(reader.assemble("deploys", 100_000)) == 201
        found = reader.retrieve("what did writer 3 note 49 say?", k=300)
        assert "writer 3 note 49: deploys moved" in {r.text for r in found}
        # each session's turns are linked in id order, whichever process stored them
        graph = reader.graph()
        followed = sorted(
            (u, v) for u, v, kind in graph.edges(data="type") if kind == "FOLLOWED_BY"
        )
        chains = []
        for writer in range(4):
            ids = [t.id for t in turns if t.session == f"w{writer}"]
            chains += [(f"turn:{a}", f"turn:{b}") for a, b in itertools.pairwise(ids)]
        assert followed == sorted(chains)
        assert sum(kind == "turn" for _, kind in graph.nodes(data="kind")) == 201
        assert reader.add_turn("And the reader again.", session="r") == 202


def test_a_turn_comes_after_the_turns_another_memory_stored_in_time_and_id(
    conversation_where: str,
) -> None:
    path = conversation_where
    with ConversationMemory(path) as a, ConversationMemory(path) as b:
        a.add_turn("Deploys move to Fridays.", at=100)
        later = time.time() + 3600  # ahead of the clock, within the allowed skew
        assert b.add_turn("Noted, Fridays.", role="assistant", at=later) == 2
        # a never looked again: its own turns still go after b's, in time and in id
        with pytest.raises(InvalidValueError, match=f"earlier than the previous turn's {later}"):
            a.add_turn("Too early.", at=200)
        assert a.add_turn("And the retro is on Monday.") == 3  # now: b's time, not earlier
        assert [(t.id, t.at) for t in b.turns()] == [(1, 100.0), (2, later), (3, later)]
        assert [t.text for t in a.turns()] == [t.text for t in b.turns()]


class Flaky:
    """A token counter and an embedder of another name that fail while ``down``: a remote
    embedding API timing out, say."""

    name = "flaky"
    dim = 64

    def __init__(self) -> None:
        self.down = False

    def count(self, text: str) -> int:
        if self.down and "second" in text:
            raise ValueError("counter down")
        return len(text.split())

    def embed(self, texts: Sequence[str]) -> npt.NDArray[np.float32]:
        if self.down and any("second" in text for text in texts):
            raise ConnectionError("embedder down")
        return HashingEmbedder(dim=64).embed(texts)


@pytest.mark.parametrize("failing", ["count", "embed"])
def test_a_failure_taking_in_another_writers_turns_leaves_the_memory_whole(
    conversation_where: str, failing: str
) -> None:
    # the turns were appended first, then counted and embedded: one failure there left the
    # turn list ahead of the rest, and every later call raised KeyError or paired one
    # turn's id with another's text, until the memory was reopened
    path = conversation_where
    flaky = Flaky()
    counter = flaky.count if failing == "count" else None
    with (
        ConversationMemory(path, token_counter=counter, embedder=flaky, listen=False) as a,
        ConversationMemory(path, listen=False) as b,
    ):
        a.add_turn("first turn about deploy", at=0)
        b.add_turn("second turn about deploy", at=1)  # another embedder's vector
        flaky.down = True
        for _ in range(2):  # and again: still the same failure, nothing half taken in
            with pytest.raises((ValueError, ConnectionError), match="down"):
                a.assemble("deploy", 100, at=2)
        flaky.down = False
        assert [t.text for t in a.assemble("deploy", 100, at=2)] == [
            "first turn about deploy",
            "second turn about deploy",
        ]
        b.add_turn("third turn about lunch", at=3)
        a.add_turn("fourth turn about deploy", at=4)
        texts = {t.id: t.text for t in b.turns()}
        assert len(texts) == 4 and [t.text for t in a.turns()] == list(texts.values())
        for found in a.retrieve("turn about", k=4, at=5):
            assert found.text == texts[found.turn_id]


def test_a_turn_at_minus_zero_reads_back_as_it_is_shown_on_every_backend(
    conversation_where: str,
) -> None:
    # SQLite stores a REAL without a fraction as an integer: -0.0 came back 0.0, while
    # PostgreSQL and the live memory kept -0.0 (equal, but printed and hashed apart)
    def signs(memory: ConversationMemory) -> list[float]:
        [turn] = memory.turns()
        [found] = memory.retrieve("deploy app.py", at=0)
        graph = memory.graph(at=0)
        edge_times = [edge.at for edge in memory._graph.edges.values()]
        return [math.copysign(1.0, t) for t in (turn.at, found.at, graph.nodes["turn:1"]["at"])] + [
            math.copysign(1.0, t) for t in edge_times
        ]

    with ConversationMemory(conversation_where, background=False) as memory:
        memory.add_turn("The deploy of app.py failed.", at=-0.0)
        live = signs(memory)
    with ConversationMemory(conversation_where, background=False) as reopened:
        assert signs(reopened) == live == [1.0] * len(live)


def test_a_turn_ahead_of_the_clock_is_refused_and_nothing_is_stored() -> None:
    with ConversationMemory(":memory:", background=False) as memory:
        with pytest.raises(InvalidValueError, match="in milliseconds it would be"):
            memory.add_turn("Deploys move to Fridays.", at=time.time() * 1000)
        assert memory.add_turn("Deploys move to Fridays.", at=time.time()) == 1
        assert memory.add_turn("Noted.") == 2  # now: not held back by a time far ahead


def test_using_results_at_a_time_ahead_of_the_clock_is_refused_and_nothing_is_stored() -> None:
    with ConversationMemory(":memory:", background=False) as memory:
        for at, text in enumerate(["Deploys of app.py fail.", "Lunch?", "We fixed app.py."]):
            memory.add_turn(text, at=at * 10)
        results = memory.retrieve("what broke app.py?", k=3, at=30)
        before = memory.graph(at=40).edges(data=True)
        with pytest.raises(InvalidValueError, match=r"at=1e\+300 is more than 86400 s ahead"):
            memory.used(results, at=1e300)  # its edges would never decay
        assert list(memory.graph(at=40).edges(data=True)) == list(before)
        assert memory.used(results, at=40) > 0


def test_a_read_only_file_is_refused_in_a_typed_error_and_left_untouched(tmp_path: Path) -> None:
    from files import read_only  # the immutable attribute, for root too

    path = tmp_path / "chat.db"
    with ConversationMemory(path, background=False) as memory:
        memory.add_turn("Deploys move to Fridays.", at=0)
    before = path.read_bytes()
    with read_only(path), pytest.raises(ReadOnlyStoreError, match="writes every turn"):
        ConversationMemory(path)
    assert path.read_bytes() == before


def test_a_new_memory_file_is_made_with_the_stores_small_pages(tmp_path: Path) -> None:
    # made through the store's SQLiteStorage: PAGE_SIZE, as a store file is
    path = tmp_path / "chat.db"
    with ConversationMemory(path, background=False) as memory:
        memory.add_turn("Deploys move to Fridays.", at=0)
    with contextlib.closing(sqlite3.connect(path)) as db:
        assert db.execute("PRAGMA page_size").fetchone()[0] == 2048


def test_a_damaged_turns_table_is_refused_at_open(tmp_path: Path) -> None:
    path = tmp_path / "chat.db"
    with ConversationMemory(path, background=False) as memory:
        for minute in range(40):
            memory.add_turn(f"Turn {minute} about the deploy and the build.", at=60 * minute)
    with sqlite3.connect(path) as db:
        page = db.execute("PRAGMA page_size").fetchone()[0]
        root = db.execute(
            "SELECT rootpage FROM sqlite_master WHERE name = 'context_turns'"
        ).fetchone()[0]
    db.close()
    with path.open("r+b") as file:  # a page overwritten, as by a bad disk
        file.seek((root - 1) * page)
        file.write(bytes(range(256)) * (page // 256))
    with pytest.raises(CorruptDatabaseError, match=r"chat\.db' is a damaged database"):
        ConversationMemory(path)


@pytest.mark.parametrize(
    ("timeout", "message"),
    [
        (float("nan"), "busy_timeout_s must be a finite number > 0, got nan"),
        (1e308, "busy_timeout_s must be at most 2,147,483 s"),
        (-1, "busy_timeout_s must be a finite number > 0, got -1"),
    ],
)
def test_a_bad_busy_timeout_is_refused_before_the_file_is_made(
    tmp_path: Path, timeout: float, message: str
) -> None:
    with pytest.raises(InvalidValueError, match=message):
        ConversationMemory(tmp_path / "chat.db", busy_timeout_s=timeout)
    assert not list(tmp_path.iterdir())


def test_a_session_filter_finds_its_turns_below_the_other_sessions_best() -> None:
    # the filter ran after each channel kept its best 100 turns of every session: a session
    # whose turn ranked below them returned nothing at k=5, and its turn at k=200
    memory = ConversationMemory(":memory:", background=False)
    for i in range(150):
        memory.add_turn(f"The deploy of service {i} is done.", session="ops", at=i)
    planning = memory.add_turn(
        "After a long meeting about budgets and hiring, we agreed the deploy of billing moves "
        "to Fridays.",
        session="planning",
        at=200,
    )
    for k in (5, 200):
        found = memory.retrieve("deploy", k=k, sessions=["planning"], at=300)
        assert [r.turn_id for r in found] == [planning]
    unfiltered = memory.retrieve("deploy", k=200, at=300)  # the same scores, filtered
    assert [r for r in unfiltered if r.session == "planning"] == found
    memory.close()


@pytest.mark.parametrize("query", ["When is the billing deploy?", None])
def test_assembling_sessions_reads_only_their_turns(query: str | None) -> None:
    # the LlamaIndex block rendered every session's turns: assemble had no session filter
    memory = ConversationMemory(":memory:", background=False)
    planning: list[int] = []
    for i in range(40):
        session = "planning" if i % 3 == 0 else "ops"
        text = (f"Turn {i}: we agreed the billing deploy moves to Friday {i}." if i % 7 == 0
                else f"Turn {i}: coffee, lunch and the weather, round {i}.")  # fmt: skip
        turn = memory.add_turn(text, session=session, at=i * 60)
        if session == "planning":
            planning.append(turn)
    for budget in (30, 80, 400):
        mine = memory.assemble(query, budget, at=3_000, sessions=["planning"])
        assert mine and {t.session for t in mine} == {"planning"}
        assert mine[-1].turn_id == planning[-1]  # working memory: the session's newest turn
        assert sum(t.tokens for t in mine) <= budget
    everything = memory.assemble(query, 400, at=3_000, sessions=["planning", "ops"])
    assert everything == memory.assemble(query, 400, at=3_000)
    assert memory.assemble(query, 100, at=3_000, sessions=["nowhere"]) == []
    with pytest.raises(InvalidTypeError, match="sessions must be a sequence of str"):
        memory.assemble(query, 100, sessions="planning")  # type: ignore[arg-type]
    memory.close()


class _HeldSummarizer:
    """Condenses as an LLM would, each call held until the test lets it go."""

    def __init__(self) -> None:
        self.started, self.go = threading.Event(), threading.Event()
        self.calls = 0

    def condense(self, text: str, *, chunks_ratio: float, summary_ratio: float) -> Condensed:
        self.calls += 1
        self.started.set()
        self.go.wait(30)
        return Condensed(text[:20], text[:10])


def test_closing_before_a_consolidation_ends_releases_its_lease(conversation_where: str) -> None:
    # the database was closed under the running consolidation, which then could not release
    # the lease: the user's consolidation stayed locked out for 600 s, across restarts
    held = _HeldSummarizer()
    memory = ConversationMemory(conversation_where, summarizer=held)
    for i in range(10):
        memory.add_turn(f"Turn {i}: the deploy of app.py moves to Friday {i}.", at=i)
    assert held.started.wait(10)
    memory.close(timeout=0.05)  # the run goes on, holding the lease
    with pytest.raises(SynapseError, match="closed"):
        memory.add_turn("too late", at=20)
    held.go.set()  # the run ends: it stores nothing, and lets the lease go
    again = ConversationMemory(conversation_where, background=False)
    again.add_turn("A turn after the restart.", at=30)
    deadline = time.monotonic() + 30
    while not again.consolidate() and time.monotonic() < deadline:
        time.sleep(0.05)  # until the closed memory's run has ended
    assert time.monotonic() < deadline, "the lease was left behind"
    assert held.calls == 1  # the run stopped at its next turn: no summaries paid for nothing
    again.close()


def _ours() -> list[str]:
    """The library's threads now running: consolidation workers and listeners."""
    return sorted(
        thread.name
        for thread in threading.enumerate()
        if thread.name.startswith(("synapse-consolidation", "synapse listen"))
    )


def _files_open() -> int:
    import os

    return len(os.listdir(f"/proc/{os.getpid()}/fd"))


@pytest.mark.skipif(sys.platform != "linux", reason="counts open files in /proc")
def test_memories_dropped_without_close_give_their_threads_files_and_connections_back(
    conversation_where: str,
) -> None:
    # a consolidation thread kept every memory alive: 300 unclosed memories held 117 files
    # and 49 threads, and on PostgreSQL their share of the connections and the listener
    import gc

    ConversationMemory(conversation_where, user="first").close()  # the schema, made once
    gc.collect()
    threads, files = _ours(), _files_open()
    config = ContextConfig(consolidation_interval=1)  # each turn starts the worker thread
    for n in range(25):
        memory = ConversationMemory(conversation_where, user=f"u{n}", config=config)
        memory.add_turn(f"Turn {n}: the deploy moved to Friday.")
    assert len(_ours()) > len(threads)
    del memory
    gc.collect()
    deadline = time.monotonic() + 10
    while (len(_ours()) > len(threads) or _files_open() > files) and time.monotonic() < deadline:
        time.sleep(0.05)
        gc.collect()
    assert len(_ours()) <= len(threads)  # none left (an earlier test's may have ended too)
    assert _files_open() <= files
    with ConversationMemory(conversation_where, user="u3") as again:  # written, whole
        assert [turn.text for turn in again.turns()] == ["Turn 3: the deploy moved to Friday."]


def _timed(call: Any) -> float:
    start = time.perf_counter()
    call()
    return time.perf_counter() - start


def test_reads_go_on_while_a_turn_waits_for_another_process_lock(tmp_path: Path) -> None:
    # add_turn held the memory's lock across the insert's busy wait: retrieve, assemble and
    # turns waited as long as another process held the write lock
    path = tmp_path / "chat.db"
    memory = ConversationMemory(path, background=False, busy_timeout_s=5.0)
    for i in range(20):
        memory.add_turn(f"The deploy moved to Friday, note {i}.", at=1_700_000_000 + i)
    locker = sqlite3.connect(path, isolation_level=None)
    locker.execute("BEGIN IMMEDIATE")  # another process holds the write lock for 2 s
    adding = threading.Thread(target=memory.add_turn, args=("a turn waiting for the lock",))
    adding.start()
    try:
        time.sleep(0.3)
        assert adding.is_alive()
        waited = max(
            _timed(lambda: memory.retrieve("deploy", k=5)),
            _timed(lambda: memory.assemble("deploy", 500)),
            _timed(memory.turns),
        )
        assert waited < 0.5
        assert adding.is_alive()
        time.sleep(1.7)
    finally:
        locker.execute("ROLLBACK")
        locker.close()
    adding.join(10)
    assert not adding.is_alive()
    assert [t.text for t in memory.turns()].count("a turn waiting for the lock") == 1
    memory.close()
    again = ConversationMemory(path, background=False)
    assert [t.text for t in again.turns()].count("a turn waiting for the lock") == 1
    again.close()


@pytest.mark.parametrize("write", ["used", "consolidation", "its lease"])
def test_reads_go_on_while_a_used_or_a_consolidation_waits_for_another_process_lock(
    tmp_path: Path, write: str
) -> None:
    # each held a lock reads take (the memory's, or its storage's for the lease) across its
    # write's busy wait, as add_turn did
    path = tmp_path / "chat.db"
    config = ContextConfig(
        reinforcement_threshold=1, consolidation_ages=(0, 50), consolidation_interval=1000
    )  # nothing consolidated before the test's own run
    memory = ConversationMemory(path, config=config, background=False, busy_timeout_s=5.0)
    for i in range(20):
        memory.add_turn(f"The deploy of app.py moved to Friday, note {i}.", at=1_700_000_000 + i)
    results = memory.retrieve("deploy app.py", k=5)
    done: list[object] = []
    leased, locked = threading.Event(), threading.Event()

    def used() -> None:
        done.append(memory.used(results))

    def consolidation() -> None:
        with memory._storage.consolidation_turn() as mine:  # the lease, taken before the lock
            assert mine
            leased.set()
            locked.wait(10)
            done.append(memory._consolidate_held(force=True))

    def lease() -> None:
        done.append(memory.consolidate())  # the lease waited for too

    if write == "consolidation":
        holding = threading.Thread(target=consolidation)
        holding.start()
        assert leased.wait(10)
    locker = sqlite3.connect(path, isolation_level=None)
    locker.execute("BEGIN IMMEDIATE")  # another process holds the write lock for 2 s
    locked.set()
    writing = {
        "used": lambda: threading.Thread(target=used),
        "its lease": lambda: threading.Thread(target=lease),
    }.get(write, lambda: holding)()
    if write != "consolidation":
        writing.start()
    try:
        time.sleep(0.3)
        assert writing.is_alive()
        waited = max(_timed(lambda: memory.retrieve("deploy", k=5)), _timed(memory.turns))
        assert waited < 0.5
        time.sleep(1.7)
    finally:
        locker.execute("ROLLBACK")
        locker.close()
    writing.join(10)
    assert not writing.is_alive() and len(done) == 1
    assert done[0] if write != "used" else done[0] > 0  # type: ignore[operator]
    memory.close()


def test_a_turn_never_given_the_lock_fails_within_busy_timeout_s(tmp_path: Path) -> None:
    from synapse_retriever import WriteConflictError

    path = tmp_path / "chat.db"
    memory = ConversationMemory(path, background=False, busy_timeout_s=1.0)
    memory.add_turn("The deploy moved to Friday.", at=1_700_000_000)
    locker = sqlite3.connect(path, isolation_level=None)
    locker.execute("BEGIN IMMEDIATE")
    failed: list[BaseException] = []

    def add() -> None:
        try:
            memory.add_turn("never stored")
        except WriteConflictError as exc:
            failed.append(exc)

    start = time.perf_counter()
    adding = threading.Thread(target=add)
    adding.start()
    try:
        time.sleep(0.2)
        assert _timed(lambda: memory.retrieve("deploy", k=5)) < 0.5
        adding.join(10)
        elapsed = time.perf_counter() - start
    finally:
        locker.execute("ROLLBACK")
        locker.close()
    assert len(failed) == 1 and "nothing was written" in str(failed[0])
    assert 0.9 < elapsed < 3.0
    assert [t.text for t in memory.turns()] == ["The deploy moved to Friday."]
    memory.close()
