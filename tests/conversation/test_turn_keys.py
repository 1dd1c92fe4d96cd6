"""A turn's own key (``add_turn(..., key=...)``): one turn per key and user, a retry stores
nothing twice, in this process or another, on every backend."""

from __future__ import annotations

import asyncio
import sqlite3
import threading
from pathlib import Path

import pytest
from store_backends import older_conversation_file

from synapse_retriever.conversation import ConversationMemory
from synapse_retriever.errors import InvalidTypeError, InvalidValueError, WriteConflictError
from synapse_retriever.persistence.conversation import open_conversation_storage
from synapse_retriever.persistence.conversation.protocol import TurnRecord
from synapse_retriever.persistence.conversation.sqlite import MIGRATIONS


def test_a_turn_added_again_with_its_key_is_stored_once(conversation_where: str) -> None:
    with (
        ConversationMemory(conversation_where, user="ann", background=False) as memory,
        ConversationMemory(conversation_where, user="ann", background=False) as other,
        ConversationMemory(conversation_where, user="bob", background=False) as bob,
    ):
        assert memory.add_turn("The deploy moves to Friday.", at=0, key="msg-1") == 1
        assert memory.add_turn("The deploy moves to Friday.", at=0, key="msg-1") == 1
        assert memory.add_turn("The deploy moves to Friday.", key="msg-1") == 1  # at: now
        assert other.add_turn("The deploy moves to Friday.", key="msg-1") == 1  # another memory
        assert bob.add_turn("The deploy moves to Friday.", at=0, key="msg-1") == 2  # his own
        assert memory.add_turn("The deploy moves to Friday.", at=5) == 3  # no key: a new turn
        assert other.add_turn("Noted.", role="assistant", at=9, key="msg-2") == 4
        assert memory.add_turn("Noted.", role="assistant", key="msg-2") == 4  # taken in
        assert [(t.id, t.key) for t in memory.turns()] == [(1, "msg-1"), (3, None), (4, "msg-2")]
        assert len(memory) == len(other) == 3 and len(bob) == 1
    with ConversationMemory(conversation_where, user="ann", background=False) as reopened:
        assert [t.key for t in reopened.turns()] == ["msg-1", None, "msg-2"]
        assert reopened.add_turn("Noted.", role="assistant", key="msg-2") == 4
        assert reopened.retrieve("when is the deploy", k=1)[0].turn_id in {1, 3}


def test_aadd_turn_takes_a_key_too(conversation_where: str) -> None:
    async def twice(memory: ConversationMemory) -> list[int]:
        first = await memory.aadd_turn("Deploys move to Fridays.", at=0, key="k")
        return [first, await memory.aadd_turn("Deploys move to Fridays.", key="k")]

    with ConversationMemory(conversation_where, background=False) as memory:
        assert asyncio.run(twice(memory)) == [1, 1] and len(memory) == 1


@pytest.mark.parametrize(
    ("changed", "says"),
    [
        ({"text": "The deploy moves to Monday."}, "stored with another text;"),
        ({"role": "assistant"}, "stored with another role;"),
        ({"session": "other"}, "stored with another session;"),
        ({"speaker": "Bob", "session": "other"}, "stored with another session and speaker;"),
    ],
)
def test_a_key_naming_another_turn_is_refused_and_nothing_is_stored(
    conversation_where: str, changed: dict[str, str], says: str
) -> None:
    turn = {"text": "The deploy moves to Friday.", "role": "user", "session": "default"}
    with ConversationMemory(conversation_where, background=False) as memory:
        memory.add_turn(**turn, at=0, key="msg-1")
        with pytest.raises(InvalidValueError, match=f"key 'msg-1' names turn 1, {says}"):
            memory.add_turn(**(turn | changed), at=1, key="msg-1")
        assert len(memory) == 1
        assert memory.add_turn("Later.", at=2, key="msg-2") == 2


@pytest.mark.parametrize(
    ("key", "error", "says"),
    [
        (7, InvalidTypeError, "key must be None or a str, got int 7"),
        (b"k", InvalidTypeError, "key must be None or a str, got bytes"),
        ("", InvalidValueError, "key must be None or a name of 1 to 200"),
        ("  \u200b", InvalidValueError, "key must be None or a name of 1 to 200"),
        ("k" * 201, InvalidValueError, "key must be None or a name of 1 to 200"),
        ("msg\n1", InvalidValueError, "key must not hold a control character"),
        ("msg\x001", InvalidValueError, "key must not hold a NUL character"),
        ("msg\udce9", InvalidValueError, "key must be valid Unicode"),
    ],
)
def test_a_bad_key_is_refused_by_name_and_nothing_is_stored(
    conversation_where: str, key: object, error: type[Exception], says: str
) -> None:
    with ConversationMemory(conversation_where, background=False) as memory:
        with pytest.raises(error, match=says):
            memory.add_turn("The deploy moves to Friday.", at=0, key=key)  # type: ignore[arg-type]
        assert len(memory) == 0


def test_a_hostile_key_is_stored_as_it_is(conversation_where: str) -> None:
    keys = ["'; DROP TABLE context_turns; --", "🔑 ключ 鍵", "%(key)s", "k" * 200]
    with ConversationMemory(conversation_where, background=False) as memory:
        ids = [memory.add_turn(f"Turn {i}.", at=i, key=key) for i, key in enumerate(keys)]
        again = [memory.add_turn(f"Turn {i}.", key=key) for i, key in enumerate(keys)]
    assert ids == again == [1, 2, 3, 4]
    with ConversationMemory(conversation_where, background=False) as reopened:
        assert [t.key for t in reopened.turns()] == keys


def test_the_storage_stores_nothing_for_a_key_it_holds(conversation_where: str) -> None:
    # not a driver's unique-constraint error: None, as for a turn stored meanwhile
    ann, bob = (
        open_conversation_storage(conversation_where, user=user, busy_timeout_s=5)
        for user in ("ann", "bob")
    )
    try:
        record = TurnRecord(0, "s", "user", "Hi.", 0.0, 1.0, 0, 0.0, None, None, None, "k")
        assert ann.insert(record, "e", b"") == 1
        assert (
            ann.insert(record, "e", b"") is None and ann.insert(record, "e", b"", after=1) is None
        )
        assert (bob.insert(record, "e", b"", after=0) or 0) > 1  # another user's key
        assert [t.key for t in ann.load().turns] == ["k"]
    finally:
        ann.close()
        bob.close()


def test_two_memories_adding_one_key_at_once_store_one_turn(conversation_where: str) -> None:
    # each inserts only after the last turn it has seen: the second finds the first's turn,
    # takes it in, and returns its id
    memories = [
        ConversationMemory(conversation_where, user="ann", background=False) for _ in range(2)
    ]
    start = threading.Barrier(2)
    ids: list[int] = []

    def add(memory: ConversationMemory) -> None:
        start.wait()
        for i in range(20):
            ids.append(memory.add_turn(f"Turn number {i}.", key=f"msg-{i}"))

    try:
        threads = [threading.Thread(target=add, args=(memory,)) for memory in memories]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        assert sorted(set(ids)) == list(range(1, 21)) and len(ids) == 40
        for memory in memories:
            memory.turns()  # catch up
            assert [t.key for t in memory.turns()] == [f"msg-{i}" for i in range(20)]
    finally:
        for memory in memories:
            memory.close()


def test_a_file_from_before_keys_opens_and_takes_keys(tmp_path: Path) -> None:
    assert "key TEXT" in MIGRATIONS[5] and "key TEXT" not in "".join(MIGRATIONS[:5])
    older = older_conversation_file(tmp_path / "older.db", 5)  # schema 5, before keys
    with ConversationMemory(older, background=False) as memory:
        assert [(t.text, t.key) for t in memory.turns()] == [("An old turn about pottery.", None)]
        assert memory.add_turn("A new one.", at=60, key="m") == 2
        assert memory.add_turn("A new one.", key="m") == 2 and len(memory) == 2


def test_a_key_held_by_a_turn_the_memory_cannot_read_is_a_typed_error(tmp_path: Path) -> None:
    # a row written by hand below the ids a memory reads: each insert was refused for its
    # key and no catch-up found the turn holding it; the loop never ended
    path = tmp_path / "chat.db"
    with ConversationMemory(path, background=False) as memory:
        memory.add_turn("First.", at=0)
    db = sqlite3.connect(path)
    db.execute(
        "INSERT INTO context_turns (id, user, session, role, text, at, surprise, repeats, "
        "embedder, embedding, key) VALUES (-1, '', 'default', 'user', 'Hidden.', 0, 1, 0, "
        "'x', x'', 'k')"
    )
    db.commit()
    db.close()
    errors: list[BaseException] = []

    def add() -> None:
        with ConversationMemory(path, background=False) as memory:
            try:
                memory.add_turn("Second.", at=1, key="k")
            except BaseException as exc:
                errors.append(exc)

    thread = threading.Thread(target=add, daemon=True)
    thread.start()
    thread.join(60)
    assert not thread.is_alive()
    [error] = errors
    assert isinstance(error, WriteConflictError) and "nothing was stored" in str(error)
