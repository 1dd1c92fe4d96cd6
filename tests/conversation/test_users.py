"""Users of one conversation memory file: no call on one user's memory returns, counts,
summarises or links another user's turns; hostile names; files from before users."""

from __future__ import annotations

import dataclasses
import sqlite3
from pathlib import Path

import pytest

from synapse_retriever.conversation import ContextConfig, ConversationMemory
from synapse_retriever.conversation.graph.relations import Relation
from synapse_retriever.errors import InvalidTypeError, InvalidValueError

ALICE = [
    "The deploy of app.py fails on Fridays since the base image changed.",
    "My locker code is 4711, please remember it.",
    "We pinned the base image of app.py and the deploy works again.",
    "Alice likes green tea with lunch.",
]
BOB = [
    "The deploy of app.py fails on Fridays since the base image changed.",  # alice's words too
    "Bob's sister Ingrid visits Zurich in May.",
    "The deploy of billing.py needs the Vault token renewed.",
    "Lunch with Ingrid at the museum cafe.",
]


class Everything:
    """A relation extractor that links every turn it reads to every turn id of the file
    (RELATES_TO): another user's ids among them, which the memory must refuse."""

    def relations(self, turns: list[tuple[int, str, str]]) -> list[Relation]:
        return [
            Relation(turn_id, "RELATES_TO", other)
            for turn_id, _, _ in turns
            for other in range(1, 9)
            if other != turn_id
        ]


def memories(path: Path, **kwargs: object) -> tuple[ConversationMemory, ConversationMemory]:
    config = ContextConfig(consolidation_interval=4, working_memory=1)
    alice = ConversationMemory(
        path, config=config, background=False, user="alice", relations=Everything(), **kwargs
    )
    bob = ConversationMemory(
        path, config=config, background=False, user="bob", relations=Everything(), **kwargs
    )
    return alice, bob


def fill(alice: ConversationMemory, bob: ConversationMemory) -> None:
    """Turns of both, interleaved in one file (ids 1, 3, 5, 7 are alice's)."""
    for i, (mine, theirs) in enumerate(zip(ALICE, BOB, strict=True)):
        alice.add_turn(mine, at=60 * i, session="work")
        bob.add_turn(theirs, at=60 * i, session="work")


def test_two_users_in_one_file_never_see_each_others_turns(tmp_path: Path) -> None:
    alice, bob = memories(tmp_path / "team.db")
    with alice, bob:
        fill(alice, bob)
        for memory, own, other in ((alice, ALICE, BOB), (bob, BOB, ALICE)):
            ids = {t.id for t in memory.turns()}
            assert [t.text for t in memory.turns()] == own and len(memory) == 4
            foreign = {text for text in other if text not in own}
            for question in [*other, "deploy app.py Fridays", "Ingrid", "locker code", "lunch"]:
                found = memory.retrieve(question, k=10, at=600)
                assert {r.turn_id for r in found} <= ids
                assert not {r.text for r in found} & foreign
                assert all(t.turn_id in ids for t in memory.assemble(question, 10_000, at=600))
                graph_only = memory.retrieve(question, k=10, at=600, weights=(0, 1))
                assert {r.turn_id for r in graph_only} <= ids
            graph = memory.graph(at=600)
            turn_nodes = {n for n, d in graph.nodes(data=True) if d["kind"] == "turn"}
            assert turn_nodes == {f"turn:{i}" for i in ids}
            assert all(
                not (u.startswith("turn:") and u not in turn_nodes)
                and not (v.startswith("turn:") and v not in turn_nodes)
                for u, v in graph.edges()
            )  # no edge reaches the other's turns, consolidation's relations included
            texts = {d["text"] for _, d in graph.nodes(data=True) if d["kind"] == "turn"}
            assert not texts & foreign
            replays = memory.replays()
            assert [covered for covered, _ in replays] == [4]  # one each: 4 of its own turns
        # the same text said by both is two turns, one each
        assert alice.turns()[0].text == bob.turns()[0].text
        assert alice.turns()[0].id != bob.turns()[0].id
        assert "ingrid" not in " ".join(theme for _, themes in alice.replays() for theme in themes)
        assert "locker" not in " ".join(theme for _, themes in bob.replays() for theme in themes)
        # a result of one user's memory is refused by the other's
        found = alice.retrieve("deploy app.py", k=3, at=600)
        with pytest.raises(InvalidValueError, match="was not retrieved from this memory"):
            bob.used(found, at=600)
        same_id = dataclasses.replace(bob.retrieve("Ingrid", k=1, at=600)[0])
        with pytest.raises(InvalidValueError, match="was not retrieved from this memory"):
            alice.used([same_id], at=600)


def test_condensations_are_per_user(tmp_path: Path) -> None:
    alice, bob = memories(tmp_path / "team.db")
    with alice, bob:
        fill(alice, bob)
        alice.add_turn("One more of alice, to age her first turns.", at=600)
        assert alice.consolidate() and not alice.consolidate()  # nothing new the second time
        condensed = {t.id for t in alice.turns() if t.chunks is not None}
    with ConversationMemory(tmp_path / "team.db", user="bob") as reopened:
        assert not condensed & {t.id for t in reopened.turns() if t.chunks is not None}


def test_another_users_turns_change_no_score(tmp_path: Path) -> None:
    # BM25's statistics (how many turns hold a word, their mean length) are one user's:
    # alice's scores are the same in a file of hers alone and in one shared with bob, who
    # says the query's words often
    config = ContextConfig(consolidation_interval=1000)
    alone = ConversationMemory(tmp_path / "alone.db", config=config, background=False)
    shared = ConversationMemory(tmp_path / "shared.db", config=config, background=False, user="a")
    noisy = ConversationMemory(tmp_path / "shared.db", config=config, background=False, user="b")
    with alone, shared, noisy:
        for i, text in enumerate(ALICE):
            alone.add_turn(text, at=i)
            shared.add_turn(text, at=i)
            for j in range(5):
                noisy.add_turn(f"deploy Fridays base image {j} " + BOB[j % 4], at=i)
        for question in ["why did the deploy fail on Fridays?", "base image", "tea"]:
            here = [(r.score, r.text) for r in alone.retrieve(question, k=4, at=10)]
            there = [(r.score, r.text) for r in shared.retrieve(question, k=4, at=10)]
            assert here == there
            kept = [(t.text, t.level) for t in alone.assemble(question, 30, at=10)]
            assert kept == [(t.text, t.level) for t in shared.assemble(question, 30, at=10)]


def test_a_memory_takes_in_its_users_turns_from_other_processes_only(tmp_path: Path) -> None:
    path = tmp_path / "team.db"
    reader = ConversationMemory(path, user="alice", background=False)
    with reader:
        assert len(reader) == 0
        with ConversationMemory(path, user="bob", background=False) as bob:
            bob.add_turn("Bob's secret: the vault token is in the drawer.", at=0)
        with ConversationMemory(path, user="alice", background=False) as writer:
            writer.add_turn("Alice's note: the demo is on Monday.", at=1)
        assert [t.text for t in reader.turns()] == ["Alice's note: the demo is on Monday."]
        assert [r.turn_id for r in reader.retrieve("vault token drawer secret", at=2)] == []
        reader.add_turn("Alice again.", at=2)  # after her own last turn, not bob's
        assert [t.id for t in reader.turns()] == [2, 3]


def test_user_names_the_memory_and_none_is_the_default_user(tmp_path: Path) -> None:
    path = tmp_path / "team.db"
    with ConversationMemory(path) as default, ConversationMemory(path, user="O'Brien") as named:
        default.add_turn("The default user's turn.", at=0)
        named.add_turn("O'Brien's turn.", at=0)
        assert (default.user, named.user) == (None, "O'Brien")
        assert repr(named) == f'ConversationMemory({str(path)!r}, user="O\'Brien", turns=1)'
        assert repr(default) == f"ConversationMemory({str(path)!r}, turns=1)"
        again = ConversationMemory(path, user=named.user)  # the attribute opens the same memory
        with again:
            assert [t.text for t in again.turns()] == ["O'Brien's turn."]
        assert [t.text for t in default.turns()] == ["The default user's turn."]


@pytest.mark.parametrize(
    "user",
    ["'; DROP TABLE context_turns; --", 'a "quoted" name', "名前", "x" * 256, "%", "alice "],
)
def test_a_hostile_user_name_is_stored_as_it_is(tmp_path: Path, user: str) -> None:
    path = tmp_path / "team.db"
    with ConversationMemory(path, user="alice", background=False) as alice:
        alice.add_turn("Alice's turn about the deploy.", at=0)
    with ConversationMemory(path, user=user, background=False) as hostile:
        hostile.add_turn("The hostile user's turn about the deploy.", at=1)
        assert [r.text for r in hostile.retrieve("deploy", at=2)] == [
            "The hostile user's turn about the deploy."
        ]
    with ConversationMemory(path, user="alice", background=False) as alice:
        assert [t.text for t in alice.turns()] == ["Alice's turn about the deploy."]
    db = sqlite3.connect(path)
    try:
        assert db.execute("SELECT user FROM context_turns ORDER BY id").fetchall() == [
            ("alice",),
            (user,),
        ]
    finally:
        db.close()


@pytest.mark.parametrize(
    ("user", "error"),
    [
        ("", InvalidValueError),
        ("a\x00b", InvalidValueError),
        ("new\nline", InvalidValueError),
        ("x" * 257, InvalidValueError),
        (7, InvalidTypeError),
    ],
)
def test_a_bad_user_name_is_refused_and_no_file_is_made(
    tmp_path: Path, user: object, error: type[Exception]
) -> None:
    path = tmp_path / "team.db"
    with pytest.raises(error, match="user"):
        ConversationMemory(path, user=user)  # type: ignore[arg-type]
    assert not path.exists()
