"""ConversationMemory.retrieve: hybrid recall by mode over a real SQLite file and FAISS."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import networkx as nx
import pytest
from store_backends import stored

from synapse_retriever.conversation import ContextConfig, ConversationMemory
from synapse_retriever.conversation.graph import Relation
from synapse_retriever.conversation.relevance import fuse
from synapse_retriever.errors import InvalidTypeError, InvalidValueError, SynapseError

BUG = [
    ("user", "Checkout started returning HTTP 500 for EU customers this morning."),
    ("assistant", "I will pull the logs of payment_gateway.py to see what fails."),
    ("user", "The traceback ends in validate_vat() inside payment_gateway.py."),
    ("assistant", "Root cause: validate_vat() rejects the new VAT number format that Spain uses."),
    ("user", "Agreed, we replace validate_vat() with a lookup through vies_client.py."),
]
REPORT, CAUSE, FIX = 1, 4, 5  # turn ids
CHATTER = [
    "What should we order for the team lunch on Friday?",
    "Sushi from the place on Main Street works for everyone.",
    "The new onboarding slides need a fresher colour palette.",
    "Let's try the teal and sand palette from the Brand Guide.",
    "Marketing wants a name for the spring campaign.",
    "How about Bloom Week? It fits the product launch.",
    "Remind me to renew the SSL certificate before June 30.",
    "Done, the reminder is set for June 23.",
    "The office plants need watering twice a week.",
    "I added it to the facilities rota.",
    "Can you draft the quarterly newsletter intro?",
    "Sure: this quarter we shipped faster checkout and a cleaner dashboard.",
]
QUESTION = "Why did we change validate_vat?"


def build(
    path: str | Path = ":memory:", *, split: bool = False, **kwargs: object
) -> tuple[ConversationMemory, float]:
    """The bug, its cause and its fix, then twelve turns on other topics."""
    memory = ConversationMemory(path, background=False, **kwargs)  # type: ignore[arg-type]
    at = 0.0
    for i, (role, text) in enumerate(BUG):
        session = "follow-up" if split and i >= 3 else "incident"
        memory.add_turn(text, role=role, session=session, at=at)
        at += 600
    for i, text in enumerate(CHATTER):
        memory.add_turn(text, role="user" if i % 2 == 0 else "assistant", session="week", at=at)
        at += 600
    return memory, at


@pytest.mark.parametrize("split", [False, True], ids=["one session", "two sessions"])
def test_analytical_retrieval_returns_the_causal_chain_vector_recall_misses(split: bool) -> None:
    memory, now = build(split=split)
    with memory:
        hybrid = memory.retrieve(QUESTION, k=5, mode="analytical", at=now)
        vector = memory.retrieve(QUESTION, k=5, mode="analytical", at=now, weights=(1, 0))
    assert {REPORT, CAUSE, FIX} <= {r.turn_id for r in hybrid}
    assert REPORT not in {r.turn_id for r in vector}  # the report shares no word with it
    # two hops back in time from the cause, through the log reading (turn 2)
    report = next(r for r in hybrid if r.turn_id == REPORT)
    assert report.origin == "graph" and report.mode == "analytical"
    assert report.path[-1] == ("turn:1", "FOLLOWED_BY", "turn:2")  # reached from its reply
    assert all(r.origin in ("both", "lexical", "vector") and r.path == () for r in vector)
    if split:
        assert {r.session for r in hybrid} == {"incident", "follow-up"}


def test_auto_mode_is_detected_and_a_detector_can_replace_it() -> None:
    memory, now = build()
    with memory:
        assert {r.mode for r in memory.retrieve(QUESTION, at=now)} == {"analytical"}
        assert memory.retrieve("ideas for the spring campaign?", at=now)[0].mode == "creative"

    class Always:
        def mode(self, query: str) -> str:
            return "exploratory"

    memory, now = build(mode_detector=Always())
    with memory:
        assert {r.mode for r in memory.retrieve(QUESTION, at=now)} == {"creative"}


def test_sessions_restrict_the_results_not_the_walk() -> None:
    memory, now = build(split=True)
    with memory:
        results = memory.retrieve(QUESTION, k=5, mode="analytical", at=now, sessions=["incident"])
    assert {r.turn_id for r in results} == {1, 2, 3}
    assert all(r.session == "incident" for r in results)


def test_results_are_at_most_k_distinct_turns_best_first() -> None:
    memory, now = build()
    with memory:
        for k in (1, 2, 7, 40, 2**63):  # any k past the turns is all of them
            results = memory.retrieve(QUESTION, k=k, at=now)
            ids = [r.turn_id for r in results]
            assert len(ids) == len(set(ids)) <= k
            assert [r.score for r in results] == sorted((r.score for r in results), reverse=True)


def test_empty_memory_and_blank_query_give_nothing() -> None:
    with ConversationMemory(":memory:") as memory:
        assert memory.retrieve("anything?") == []
    memory, now = build()
    with memory:
        assert memory.retrieve("   ", at=now) == []


@pytest.mark.parametrize(
    ("kwargs", "error", "message"),
    [
        ({"k": 0}, InvalidValueError, "k must be >= 1, got 0"),
        ({"k": True}, InvalidTypeError, "k must be an int, got bool"),
        ({"mode": "angry"}, InvalidValueError, "got 'angry'"),
        ({"weights": (0, 0)}, InvalidValueError, "not both 0, got (0, 0)"),
        ({"weights": (float("nan"), 1)}, InvalidValueError, "got (nan, 1)"),
        ({"weights": (1, -1)}, InvalidValueError, "got (1, -1)"),
        ({"sessions": "incident"}, InvalidTypeError, "sessions must be a sequence of str"),
    ],
)
def test_bad_arguments_are_typed_errors_naming_the_value(
    kwargs: dict[str, object], error: type[Exception], message: str
) -> None:
    memory, now = build()
    with memory, pytest.raises(error, match=message.replace("(", r"\(").replace(")", r"\)")):
        memory.retrieve(QUESTION, at=now, **kwargs)  # type: ignore[arg-type]


def test_used_results_strengthen_their_edges_and_survive_a_restart(
    conversation_where: str,
) -> None:
    path = conversation_where
    memory, now = build(path, config=ContextConfig(reinforcement_threshold=2))
    with memory:
        results = memory.retrieve(QUESTION, k=5, mode="analytical", at=now)
        edge = ("turn:1", "turn:2", "FOLLOWED_BY")
        assert edge in {(s, t, kind) for r in results for s, kind, t in r.path}
        assert memory.used(results, at=now) > 0  # 1 traversal of 2: not stronger yet
        before = memory.graph(at=now).edges[("turn:1", "turn:2", "FOLLOWED_BY")]
        assert (before["count"], before["traversals"]) == (0, 1)
        memory.used(results, at=now)  # the 2nd: one reinforcement, the clock restarts
    with ConversationMemory(path) as reopened:
        after = reopened.graph(at=now).edges[("turn:1", "turn:2", "FOLLOWED_BY")]
    assert (after["count"], after["traversals"]) == (1, 0)
    # made at 600 s, strengthened at `now`: decay 1 at `now`; 0.5 + 0.5 × 1/10 = 0.55
    assert after["strength"] == pytest.approx(0.55)
    assert before["strength"] < after["strength"]


class _ReportCausedTheTraceback:
    """A relation extractor that links the report (turn 1) to the traceback (turn 2),
    which FOLLOWED_BY already joins."""

    def relations(self, turns: object) -> list[Relation]:
        return [Relation(REPORT, "CAUSED_BY", 2)]


def test_a_reopened_memory_names_the_same_edge_in_a_path(conversation_where: str) -> None:
    # two edges join turns 1 and 2 (FOLLOWED_BY, and CAUSED_BY from an extractor): a live
    # memory named the one it held first, a reopened one the first the database returned
    # (by key: CAUSED_BY), so the answer changed at a restart and used() reinforced the
    # other edge
    memory, now = build(conversation_where, relations=_ReportCausedTheTraceback())
    with memory:
        memory.consolidate()
        before = memory.retrieve(QUESTION, k=5, mode="analytical", at=now)
    with ConversationMemory(conversation_where, background=False) as reopened:
        after = reopened.retrieve(QUESTION, k=5, mode="analytical", at=now)
    assert {r.turn_id: r.path for r in after} == {r.turn_id: r.path for r in before}
    assert (("turn:1", "FOLLOWED_BY", "turn:2"),) in [r.path for r in after]


def test_two_memories_using_one_edge_each_count(conversation_where: str) -> None:
    # each memory stepped the edge from its own copy and wrote the result: the second's
    # write erased the first's traversal (two processes serving one user lost one in two)
    path = conversation_where
    memory, now = build(path, config=ContextConfig(reinforcement_threshold=1))
    config = ContextConfig(reinforcement_threshold=1)
    with memory, ConversationMemory(path, config=config, background=False) as other:
        edge = ("turn:1", "turn:2", "FOLLOWED_BY")
        mine = memory.retrieve(QUESTION, k=5, mode="analytical", at=now)
        theirs = other.retrieve(QUESTION, k=5, mode="analytical", at=now)
        assert memory.used(mine, at=now) > 0
        assert other.used(theirs, at=now) > 0  # its copy of the edge: count 0
        assert other.graph(at=now).edges[edge]["count"] == 2  # what it stored and holds
    with ConversationMemory(path) as reopened:
        assert reopened.graph(at=now).edges[edge]["count"] == 2


def test_results_that_reached_no_edge_write_nothing_and_wait_for_no_lock(tmp_path: Path) -> None:
    # used() took SQLite's write lock for nothing to write: it waited for another process's
    # write, then raised WriteConflictError
    path = tmp_path / "chat.db"
    with ConversationMemory(path, background=False, busy_timeout_s=1.0) as memory:
        memory.add_turn("Lunch at noon?", at=0)
        memory.add_turn("Coffee later.", at=10)
        results = [r for r in memory.retrieve("coffee", at=20) if not r.path]
        assert results  # a hit by its own words, reached by no edge
        locker = sqlite3.connect(path, isolation_level=None)
        locker.execute("BEGIN IMMEDIATE")  # another process writing
        try:
            assert memory.used(results, at=30) == 0
        finally:
            locker.execute("ROLLBACK")
            locker.close()


def test_used_refuses_what_retrieve_did_not_return() -> None:
    memory, now = build()
    with memory, pytest.raises(InvalidTypeError, match="Retrieval objects, got str"):
        memory.used(["turn:1"], at=now)  # type: ignore[list-item]


def test_graph_is_a_networkx_multidigraph_of_turns_entities_and_typed_edges() -> None:
    memory, now = build()
    with memory:
        graph = memory.graph(at=now)
    assert isinstance(graph, nx.MultiDiGraph)
    assert graph.nodes["turn:3"]["session"] == "incident"
    assert graph.nodes["code:validate_vat"] == {"kind": "code", "label": "validate_vat()"}
    assert graph.nodes["file:payment_gateway.py"]["kind"] == "file"
    mentions = sorted(u for u, v, t in graph.in_edges("code:validate_vat", keys=True))
    assert mentions == ["turn:3", "turn:4", "turn:5"]
    followed = [(u, v) for u, v, t in graph.edges(keys=True) if t == "FOLLOWED_BY"]
    assert ("turn:5", "turn:6") not in followed  # another session: no FOLLOWED_BY
    assert len(followed) == 4 + 11
    # made at 600 s, read at 10,200 s: 9,600 s = 0.1111 days, never reinforced:
    # exp(-0.05 × 0.1111) × (0.5 + 0) = 0.99446 × 0.5 = 0.49723
    data = graph.edges[("turn:1", "turn:2", "FOLLOWED_BY")]
    assert now == 10_200
    assert data["strength"] == pytest.approx(0.49723, abs=1e-5)


def test_a_memory_written_before_the_graph_is_linked_on_open(conversation_where: str) -> None:
    path = conversation_where
    memory, now = build(path)
    memory.close()
    for table in ("context_edges", "context_entities"):  # as a release without the graph
        stored(path, f"DELETE FROM {table}")
    stored(path, "DELETE FROM context_marks WHERE key = 'graph_through'")
    with ConversationMemory(path) as reopened:
        linked = reopened.graph(at=now)
        results = reopened.retrieve(QUESTION, k=5, mode="analytical", at=now)
    assert {REPORT, CAUSE, FIX} <= {r.turn_id for r in results}
    [(edges,)] = stored(path, "SELECT COUNT(*) FROM context_edges")
    assert edges == linked.number_of_edges() > 0


def test_edges_persist_with_the_turn_in_one_transaction(conversation_where: str) -> None:
    path = conversation_where
    with ConversationMemory(path) as memory:
        memory.add_turn("See src/app/views.py and views.py", session="a", at=0)
        memory.add_turn("The Blue Bottle order is in.", session="a", at=1)
    edges = sorted(stored(path, "SELECT source, target, type FROM context_edges"))
    entities = sorted(stored(path, "SELECT node, kind FROM context_entities"))
    assert edges == [
        ("turn:1", "file:views.py", "MENTIONS"),
        ("turn:1", "turn:2", "FOLLOWED_BY"),
        ("turn:2", "name:blue bottle", "MENTIONS"),
    ]
    assert entities == [("file:views.py", "file"), ("name:blue bottle", "name")]


def test_assemble_ranks_by_the_message_list_fusion_without_the_graph() -> None:
    # An assembly spends tokens, so it takes what answers (BM25, the embedder and novelty
    # fused as a message list is) and leaves the graph's neighbours to retrieve: the
    # graph's share changes nothing in it, and the cause and the fix come first.
    def kept(share: float) -> dict[int, str]:
        memory, now = build(config=ContextConfig(neighbour_share=share, working_memory=1))
        with memory:
            return {t.turn_id: t.level.value for t in memory.assemble(QUESTION, 100, at=now)}

    assert kept(0.0) == kept(0.6)
    assert {CAUSE, FIX} <= kept(0.6).keys()
    # the order by hand: fuse the three rankings as trim_history does, raise nothing
    memory, now = build()
    with memory:
        config, turns = memory.config, memory.turns()
        by_words = [turns[row].id for row, _ in memory._lexical.top(QUESTION, 1000)]
        vector = memory.embedder.embed([QUESTION])[0]
        by_meaning = [memory.turns()[row].id for row, _ in memory._index.top(vector, 1000)]
        by_novelty = [t.id for t in sorted(turns, key=lambda t: (-t.surprise, -t.id))]
        weights = [config.lexical_weight, 1.0, config.novelty_weight]
        fused = fuse([by_words, by_meaning, by_novelty], weights, k=config.rrf_k)
        expected = [turn_id - 1 for turn_id in sorted(fused, key=lambda t: (-fused[t], -t))]
        assert memory._assembly_ranking(QUESTION, vector, now) == expected


def test_neighbour_share_is_validated() -> None:
    with pytest.raises(InvalidValueError, match=r"neighbour_share must be a number in \[0, 1\]"):
        ContextConfig(neighbour_share=1.5)


def test_used_refuses_another_memorys_results_and_follows_edges_as_they_are() -> None:
    import dataclasses

    first, now = build()
    other, _ = build()
    with first, other:
        results = first.retrieve(QUESTION, k=5, mode="analytical", at=now)
        foreign = dataclasses.replace(results[0], text="something else entirely")
        with pytest.raises(InvalidValueError, match="was not retrieved from this memory"):
            other.used([foreign], at=now)
        with pytest.raises(InvalidValueError, match="turn 999"):
            other.used([dataclasses.replace(results[0], turn_id=999)], at=now)
        # a path written backwards names no edge; one of another turn's edges strengthened
        # that edge, unrelated to the result: refused, nothing written
        graph = first.graph(at=now)
        before = sorted(graph.edges(keys=True, data="count"))
        elsewhere = next(
            (u, k, v) for u, v, k in graph.edges(keys=True)
            if f"turn:{results[0].turn_id}" not in (u, v)
        )  # fmt: skip
        for path in ((("turn:2", "FOLLOWED_BY", "turn:1"),), (elsewhere,)):
            with pytest.raises(InvalidValueError, match="was not retrieved from this memory"):
                first.used([results[1], dataclasses.replace(results[0], path=path)], at=now)
        for path in ((("turn:1",),), (("turn:1", None, "turn:2"),), None):
            with pytest.raises(InvalidTypeError, match=r"path must be \(source, type, target\)"):
                first.used([dataclasses.replace(results[0], path=path)], at=now)
        assert sorted(first.graph(at=now).edges(keys=True, data="count")) == before
        lifted = next(r for r in results if r.path)
        assert first.used([lifted], at=now) == 1  # as retrieved


def test_sessions_may_be_any_iterable_read_once() -> None:
    memory, now = build(split=True)
    with memory:
        from_generator = memory.retrieve(QUESTION, k=5, at=now, sessions=(s for s in ["incident"]))
        from_list = memory.retrieve(QUESTION, k=5, at=now, sessions=["incident"])
    assert [r.turn_id for r in from_generator] == [r.turn_id for r in from_list] != []


def test_a_closed_memory_refuses_before_asking_the_detector() -> None:
    asked: list[str] = []

    class Detector:
        def mode(self, query: str) -> str:
            asked.append(query)
            return "analytical"

    memory, now = build(mode_detector=Detector())
    memory.close()
    for query in (QUESTION, "   "):
        with pytest.raises(SynapseError, match="closed"):
            memory.retrieve(query, at=now)
    assert asked == []


def test_assemble_resolves_auto_and_aliases_and_says_which_mode() -> None:
    memory, now = build()
    with memory:
        auto = memory.assemble(QUESTION, 200, at=now, mode="auto")
        balanced = memory.assemble(QUESTION, 200, at=now, mode="balanced")
        default = memory.assemble(QUESTION, 200, at=now)
        with pytest.raises(InvalidValueError, match="got 'angry'"):
            memory.assemble(QUESTION, 200, at=now, mode="angry")
    assert {t.mode for t in auto} == {"analytical"}
    assert {t.mode for t in balanced} == {t.mode for t in default} == {"conversational"}


def test_a_turn_and_its_edges_are_written_together_or_not_at_all(
    conversation_where: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    import psycopg

    from synapse_retriever.persistence.conversation import (
        PostgresConversationStorage,
        SQLiteConversationStorage,
    )

    path = conversation_where
    memory, _ = build(path)
    on_postgres = path.startswith("postgresql://")

    def broken(*args: object, **kwargs: object) -> None:  # the edges' write fails
        if on_postgres:
            raise psycopg.errors.DiskFull("could not extend file: No space left on device")
        raise sqlite3.OperationalError("disk I/O error")

    backend = PostgresConversationStorage if on_postgres else SQLiteConversationStorage
    monkeypatch.setattr(backend, "_link", broken)
    with pytest.raises((SynapseError, sqlite3.Error)) as raised:
        memory.add_turn("validate_vat() is fixed now.", at=20_000)
    assert isinstance(raised.value, SynapseError) or not on_postgres  # typed on PostgreSQL
    monkeypatch.undo()
    assert len(memory) == len(BUG) + len(CHATTER)
    memory.close()
    [(turns,)] = stored(path, "SELECT COUNT(*) FROM context_turns")
    [(edges,)] = stored(
        path, "SELECT COUNT(*) FROM context_edges WHERE source = 'turn:18' OR target = 'turn:18'"
    )
    assert (turns, edges) == (len(BUG) + len(CHATTER), 0)
