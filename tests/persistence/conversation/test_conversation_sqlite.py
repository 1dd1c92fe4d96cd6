"""persistence/conversation/sqlite.py: users kept apart in one file, hostile names, files of
schema 4 (before users) opened as they are, the consolidation lease, the write lock."""

from __future__ import annotations

import contextlib
import sqlite3
import time
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path

import pytest

from synapse_retriever.errors import (
    CorruptDatabaseError,
    InvalidTypeError,
    InvalidValueError,
    NotASynapseDatabaseError,
    StorageUnavailableError,
    WriteConflictError,
)
from synapse_retriever.persistence.conversation import (
    MAX_USER_LENGTH,
    EntityRow,
    SQLiteConversationStorage,
    TurnRecord,
    TypedEdgeRow,
    open_conversation_storage,
)
from synapse_retriever.persistence.conversation import sqlite as backend
from synapse_retriever.persistence.sqlite import SQLiteStorage


def record(text: str, at: float = 0.0, session: str = "s1") -> TurnRecord:
    return TurnRecord(0, session, "user", text, at, 1.0, 0, 0.0, None, None)


def rows_of(previous: int | None, turn_id: int) -> tuple[list[EntityRow], list[TypedEdgeRow]]:
    """What a turn adds to the graph: MENTIONS of app.py, FOLLOWED_BY from the previous turn."""
    node = f"turn:{turn_id}"
    edges = [TypedEdgeRow(node, "file:app.py", "MENTIONS", 0.0)]
    if previous is not None:
        edges.append(TypedEdgeRow(f"turn:{previous}", node, "FOLLOWED_BY", 0.0))
    return [EntityRow("file:app.py", "file", "app.py")], edges


def fill(storage: SQLiteConversationStorage, texts: list[str]) -> list[int]:
    ids = [turn.id for turn in storage.load().turns]
    for i, text in enumerate(texts):
        previous = ids[-1] if ids else None

        def links(
            turn_id: int, previous: int | None = previous
        ) -> tuple[list[EntityRow], list[TypedEdgeRow]]:
            return rows_of(previous, turn_id)

        turn_id = storage.insert(record(text, at=i), "e", b"", links, after=previous or 0)
        assert turn_id is not None
        ids.append(turn_id)
    return ids[-len(texts) :]


@contextmanager
def opened(path: Path | str, user: str | None = None) -> Iterator[SQLiteConversationStorage]:
    storage = SQLiteConversationStorage(path, user=user)
    try:
        yield storage
    finally:
        storage.close()


def test_two_users_in_one_file_see_only_their_own_rows(tmp_path: Path) -> None:
    path = tmp_path / "chat.db"
    with opened(path, "alice") as alice, opened(path, "bob") as bob:
        mine = fill(alice, ["alice one", "alice two"])
        theirs = fill(bob, ["bob one", "alice one", "bob three"])  # the same text: bob's own
        assert mine == [1, 2] and theirs == [3, 4, 5]
        assert alice.consolidate([(1, "a", "a.")], [(2, 0.1)], ["alice"], through=2)
        # bob's consolidation mark is his own: alice's covers none of his turns
        assert bob.consolidate([(3, "b", "b.")], [], ["bob"], through=2)
        # rows named by another user's ids are not written, whatever the arguments
        assert bob.consolidate([(1, "hacked", "hacked")], [(2, 0.9)], [], through=3)
        bob.replace_embeddings("other", [(1, b"\x00" * 4)])
        assert (
            bob.traverse_edges(
                [("turn:1", "turn:2", "FOLLOWED_BY")], lambda e: e._replace(reinforcements=7)
            )
            == []
        )
        bob.add_graph([EntityRow("name:eve", "name", "Eve")], [], through=5)
        seen_by_alice, seen_by_bob = alice.load(), bob.load()
        alice_themes, bob_themes = alice.themes(), bob.themes()
    assert [t.id for t in seen_by_alice.turns] == mine
    assert [t.id for t in seen_by_bob.turns] == theirs
    assert [t.text for t in seen_by_bob.turns] == ["bob one", "alice one", "bob three"]
    first, second = seen_by_alice.turns
    assert (first.chunks, first.summary, second.boost) == ("a", "a.", 0.1)
    assert seen_by_alice.embedders == ["e", "e"]
    assert (seen_by_alice.consolidated_through, seen_by_bob.consolidated_through) == (2, 3)
    assert sorted(seen_by_alice.edges) == [
        TypedEdgeRow("turn:1", "file:app.py", "MENTIONS", 0.0),
        TypedEdgeRow("turn:1", "turn:2", "FOLLOWED_BY", 0.0),  # bob's update left it alone
        TypedEdgeRow("turn:2", "file:app.py", "MENTIONS", 0.0),
    ]
    assert {e.source for e in seen_by_bob.edges} == {"turn:3", "turn:4", "turn:5"}
    assert (seen_by_alice.graph_through, seen_by_bob.graph_through) == (2, 5)
    assert seen_by_alice.entities == [EntityRow("file:app.py", "file", "app.py")]
    assert sorted(seen_by_bob.entities) == [
        EntityRow("file:app.py", "file", "app.py"),
        EntityRow("name:eve", "name", "Eve"),
    ]
    assert alice_themes == [(2, ["alice"])]
    assert bob_themes == [(2, ["bob"]), (3, [])]


def test_catching_up_reads_only_this_users_new_rows(tmp_path: Path) -> None:
    path = tmp_path / "chat.db"
    with opened(path, "alice") as alice, opened(path, "bob") as bob:
        fill(alice, ["a1"])
        assert alice.changed()  # the first call
        fill(bob, ["b1", "b2"])
        assert alice.changed()  # the file changed (bob's turns): load finds nothing new
        assert alice.load(after=1).turns == [] and alice.load(after=1).edges == []
        fill(alice, ["a2"])  # this connection's own commit
        fill(bob, ["b3"])
        assert alice.changed() and not alice.changed()
        new = alice.load(after=1)
    assert [t.text for t in new.turns] == ["a2"]  # id 4, after bob's 2 and 3
    assert sorted((e.source, e.target) for e in new.edges) == [
        ("turn:1", "turn:4"),  # FOLLOWED_BY from alice's previous turn, not bob's
        ("turn:4", "file:app.py"),
    ]


def test_insert_after_compares_with_this_users_last_turn(tmp_path: Path) -> None:
    path = tmp_path / "chat.db"
    with opened(path, "alice") as alice, opened(path, "bob") as bob:
        assert alice.insert(record("a1"), "e", b"", after=0) == 1
        assert bob.insert(record("b1"), "e", b"", after=0) == 2  # alice's turn is not bob's
        assert alice.insert(record("a2"), "e", b"", after=0) is None  # alice has turn 1
        with pytest.raises(StorageUnavailableError, match="the last is 1, not 2"):
            alice.insert(record("a2"), "e", b"", after=2)  # 2 is bob's: alice holds none
        assert alice.insert(record("a2"), "e", b"", after=1) == 3
        assert [t.text for t in alice.load().turns] == ["a1", "a2"]


HOSTILE = [
    "O'Brien",
    'say "hi"',
    "'; DROP TABLE context_turns; --",
    "Robert'); DROP TABLE context_marks;--",
    "alice' OR '1'='1",
    "%",
    "_",
    "\\",
    "turn:1",
    " ",
    "alice ",  # not alice
    "ALICE",  # not alice
    "名前",
    "🧠 memory",
    "مستخدم",
    "e\u0301",  # e and a combining accent: stored as given, not normalised
    "x" * MAX_USER_LENGTH,
]


@pytest.mark.parametrize("user", HOSTILE)
def test_a_hostile_user_name_is_plain_data(tmp_path: Path, user: str) -> None:
    path = tmp_path / "chat.db"
    with opened(path, "alice") as alice, opened(path, user) as hostile:
        fill(alice, ["alice's turn"])
        fill(hostile, ["the hostile user's turn"])
        assert hostile.consolidate([], [], ["theme"], through=1)
        with hostile.consolidation_turn() as held:
            assert held
        assert [t.text for t in hostile.load().turns] == ["the hostile user's turn"]
        assert [t.text for t in alice.load().turns] == ["alice's turn"]
        assert alice.load().consolidated_through == 0 and alice.themes() == []
    db = sqlite3.connect(path)
    try:
        tables = {name for (name,) in db.execute("SELECT name FROM sqlite_master")}
        users = db.execute("SELECT user FROM context_turns ORDER BY id").fetchall()
        marks = db.execute("SELECT DISTINCT user FROM context_marks ORDER BY user").fetchall()
    finally:
        db.close()
    assert {"context_turns", "context_marks", "context_edges", "context_entities"} <= tables
    assert users == [("alice",), (user,)]  # the exact name, byte for byte
    assert sorted(marks) == sorted([("alice",), (user,)])


@pytest.mark.parametrize(
    ("user", "error", "says"),
    [
        ("", InvalidValueError, "must not be empty"),
        ("a\x00b", InvalidValueError, "control character"),
        ("line\nbreak", InvalidValueError, "control character"),
        ("tab\t", InvalidValueError, "control character"),
        ("\x7f", InvalidValueError, "control character"),
        ("a\ud800b", InvalidValueError, "lone surrogate"),
        ("x" * (MAX_USER_LENGTH + 1), InvalidValueError, "more than 256"),
        (42, InvalidTypeError, "must be a str or None, got int"),
        (b"alice", InvalidTypeError, "must be a str or None, got bytes"),
    ],
)
def test_a_bad_user_name_is_refused_before_the_file_is_touched(
    tmp_path: Path, user: object, error: type[Exception], says: str
) -> None:
    path = tmp_path / "chat.db"
    with pytest.raises(error, match=says):
        SQLiteConversationStorage(path, user=user)  # type: ignore[arg-type]
    assert not path.exists()


# The conversation-memory schema as version 4 left it, before users: copied here as it was
# written, so the test does not change when the module's migrations do.
SCHEMA_4 = [
    """
    CREATE TABLE context_turns (
        id              INTEGER PRIMARY KEY AUTOINCREMENT,
        session         TEXT    NOT NULL,
        role            TEXT    NOT NULL,
        text            TEXT    NOT NULL,
        at              REAL    NOT NULL,
        surprise        REAL    NOT NULL,
        repeats         INTEGER NOT NULL,
        boost           REAL    NOT NULL DEFAULT 0,
        chunks          TEXT,
        summary         TEXT,
        embedder        TEXT    NOT NULL,
        embedding       BLOB    NOT NULL
    );
    CREATE INDEX context_turns_by_session ON context_turns (session, id);
    CREATE TABLE context_replays (
        id       INTEGER PRIMARY KEY AUTOINCREMENT,
        turns    INTEGER NOT NULL,
        themes   TEXT    NOT NULL
    );
    """,
    """
    CREATE TABLE context_entities (
        node     TEXT PRIMARY KEY,
        kind     TEXT NOT NULL,
        label    TEXT NOT NULL
    ) WITHOUT ROWID;
    CREATE TABLE context_edges (
        source      TEXT    NOT NULL,
        target      TEXT    NOT NULL,
        type        TEXT    NOT NULL,
        at          REAL    NOT NULL,
        count       INTEGER NOT NULL DEFAULT 0,
        traversals  INTEGER NOT NULL DEFAULT 0,
        PRIMARY KEY (source, target, type)
    ) WITHOUT ROWID;
    CREATE INDEX context_edges_by_target ON context_edges (target);
    """,
    """
    CREATE VIRTUAL TABLE context_turns_fts USING fts5(text, content='context_turns',
        content_rowid='id', tokenize='porter unicode61 remove_diacritics 2');
    INSERT INTO context_turns_fts (context_turns_fts) VALUES ('rebuild');
    """,
    "ALTER TABLE context_turns ADD COLUMN speaker TEXT",
]


def schema_4_file(path: Path, texts: list[str]) -> None:
    """A file as version 4 wrote it: ``texts`` as turns of one session (with hashing vectors
    of 8 dimensions), linked by FOLLOWED_BY, consolidated through the first two, one replay."""
    SQLiteStorage(path).close()  # a synapse file, as the memory made it
    db = sqlite3.connect(path, isolation_level=None)
    try:
        db.execute("BEGIN")
        for migration in SCHEMA_4:
            for statement in migration.split(";"):
                if statement.strip():
                    db.execute(statement)
        db.execute(
            "CREATE TABLE context_meta (key TEXT PRIMARY KEY, value TEXT NOT NULL) WITHOUT ROWID"
        )
        for i, text in enumerate(texts, start=1):
            db.execute(
                "INSERT INTO context_turns (session, role, text, at, surprise, repeats, embedder, "
                "embedding, speaker) VALUES ('s1', 'user', ?, ?, 1.0, 0, 'e', x'', 'Ann')",
                (text, 60.0 * i),
            )
            db.execute("INSERT INTO context_turns_fts (rowid, text) VALUES (?, ?)", (i, text))
            if i > 1:
                db.execute(
                    "INSERT INTO context_edges VALUES (?, ?, 'FOLLOWED_BY', ?, 2, 1)",
                    (f"turn:{i - 1}", f"turn:{i}", 60.0 * i),
                )
        db.execute("INSERT INTO context_entities VALUES ('file:app.py', 'file', 'app.py')")
        db.execute(
            "INSERT INTO context_edges VALUES ('turn:1', 'file:app.py', 'MENTIONS', 60, 0, 0)"
        )
        db.execute("UPDATE context_turns SET summary = 'old.', chunks = 'old' WHERE id = 1")
        db.execute("INSERT INTO context_replays (turns, themes) VALUES (2, 'deploy\nfriday')")
        db.executemany(
            "INSERT INTO context_meta VALUES (?, ?)",
            [
                ("schema_version", "4"),
                ("consolidated_through", "2"),
                ("graph_through", str(len(texts))),
                ("relations_through", "1"),
            ],
        )
        db.execute("COMMIT")
    finally:
        db.close()


def test_a_file_of_schema_4_opens_with_every_turn_as_the_default_users(tmp_path: Path) -> None:
    path = tmp_path / "old.db"
    texts = ["Deploys move to Fridays.", "Edit app.py first.", "Lunch?"]
    schema_4_file(path, texts)
    with opened(path) as default, opened(path, "alice") as alice:
        loaded = default.load()
        assert alice.load().turns == [] and alice.load().edges == [] and alice.themes() == []
        themes = default.themes()
    assert [(t.id, t.text, t.speaker) for t in loaded.turns] == [
        (1, texts[0], "Ann"),
        (2, texts[1], "Ann"),
        (3, texts[2], "Ann"),
    ]
    assert (loaded.turns[0].chunks, loaded.turns[0].summary) == ("old", "old.")
    assert (loaded.consolidated_through, loaded.graph_through, loaded.relations_through) == (
        2,
        3,
        1,
    )
    assert sorted(loaded.edges) == [
        TypedEdgeRow("turn:1", "file:app.py", "MENTIONS", 60.0, 0, 0),
        TypedEdgeRow("turn:1", "turn:2", "FOLLOWED_BY", 120.0, 2, 1),
        TypedEdgeRow("turn:2", "turn:3", "FOLLOWED_BY", 180.0, 2, 1),
    ]
    assert loaded.entities == [EntityRow("file:app.py", "file", "app.py")]
    assert themes == [(2, ["deploy", "friday"])]
    db = sqlite3.connect(path)
    try:
        tables = {name for (name,) in db.execute("SELECT name FROM sqlite_master")}
        meta = dict(db.execute("SELECT key, value FROM context_meta"))
        keys = db.execute("SELECT sql FROM sqlite_master WHERE name = 'context_edges'").fetchone()
    finally:
        db.close()
    assert not any(name.startswith("context_turns_fts") for name in tables)  # dropped
    assert meta == {"schema_version": str(backend.SCHEMA_VERSION)}  # the marks moved, per user
    assert "PRIMARY KEY (user, source, target, type)" in keys[0]


def test_a_newer_schema_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "new.db"
    with opened(path):
        pass
    db = sqlite3.connect(path)
    db.execute("UPDATE context_meta SET value = '99' WHERE key = 'schema_version'")
    db.commit()
    db.close()
    with pytest.raises(NotASynapseDatabaseError, match="schema version 99, newer"):
        SQLiteConversationStorage(path, user="alice")


def _edited(path: Path, edit: str) -> Path:
    """A consolidated memory of 12 turns at ``path``, then ``edit`` run on it by hand."""
    from synapse_retriever.conversation import ConversationMemory

    with ConversationMemory(path, background=False) as memory:
        for i in range(12):
            memory.add_turn(f"Alice met Bob in Paris, time {i}.", at=i)
        memory.consolidate()
    with contextlib.closing(sqlite3.connect(path)) as db:
        assert db.execute(edit).rowcount > 0
        db.commit()
    return path


@pytest.mark.parametrize(
    ("edit", "says"),
    [
        ("UPDATE context_meta SET value = 'abc' WHERE key = 'schema_version'", "schema_version"),
        ("UPDATE context_turns SET surprise = 'x'", "turn 1: a column of another type"),
        ("UPDATE context_turns SET repeats = 1.5 WHERE id = 2", "turn 2: a column"),
        ("UPDATE context_turns SET text = x'00ff'", "turn 1: a column"),
        ("UPDATE context_turns SET embedding = 'text'", "turn 1: a column"),
        ("UPDATE context_marks SET value = 'zz'", "a mark of"),
        ("UPDATE context_edges SET at = 'q'", "an edge: could not convert"),
        # and those a review found still raw: an OverflowError, a ValueError at the first
        # retrieval, sqlite3's decoding error, a replay's ValueError or TypeError
        ("UPDATE context_edges SET count = 1e999", "an edge: cannot convert float infinity"),
        ("UPDATE context_edges SET at = 1e999", "an edge's time inf"),
        ("UPDATE context_edges SET source = 'turn:abc' WHERE source LIKE 'turn:%'", "turn:abc"),
        ("UPDATE context_turns SET at = 1e999", "turn 1: a column of another type or infinite"),
        ("UPDATE context_turns SET text = CAST(x'ff41' AS TEXT)", "a text that is not UTF-8"),
    ],
)
def test_a_file_edited_by_hand_is_refused_as_damaged_and_left_as_it_is(
    tmp_path: Path, edit: str, says: str
) -> None:
    # each was a raw ValueError at open, or a TypeError in the first assembly
    from synapse_retriever.conversation import ConversationMemory

    path = _edited(tmp_path / "edited.db", edit)
    before = path.read_bytes()
    with pytest.raises(CorruptDatabaseError, match=says), ConversationMemory(path) as memory:
        memory.assemble("Paris", 50, at=100)
        memory.retrieve("Paris", at=100)
    assert path.read_bytes() == before


@pytest.mark.parametrize(
    "edit",
    ["UPDATE context_replays SET turns = 'abc'", "UPDATE context_replays SET themes = x'ff'"],
)
def test_a_replay_edited_by_hand_is_refused_as_damaged(tmp_path: Path, edit: str) -> None:
    # a ValueError or a TypeError where the replays were read
    from synapse_retriever.conversation import ConversationMemory

    path = _edited(tmp_path / "edited.db", edit)
    with pytest.raises(CorruptDatabaseError, match="a replay"), ConversationMemory(path) as memory:
        memory.replays()


@pytest.mark.parametrize("mark", ["abc x", "inf someone"])
def test_a_lease_edited_by_hand_is_taken_over(tmp_path: Path, mark: str) -> None:
    # an unreadable lease mark raised a ValueError at every consolidation
    from synapse_retriever.conversation import ConversationMemory

    path = tmp_path / "leased.db"
    with ConversationMemory(path, background=False) as memory:
        memory.add_turn("Alice met Bob in Paris.", at=0)
    with contextlib.closing(sqlite3.connect(path)) as db:
        db.execute(
            "INSERT INTO context_marks (user, key, value) VALUES ('', ?, ?)",
            (backend._LEASE, mark),
        )
        db.commit()
    with ConversationMemory(path, background=False) as memory:
        memory.consolidate()  # a ValueError: could not convert string to float: 'abc'
    with contextlib.closing(sqlite3.connect(path)) as db:  # taken over, then released
        assert db.execute("SELECT 1 FROM context_marks WHERE value = ?", (mark,)).fetchall() == []


def test_consolidate_writes_nothing_when_its_window_is_covered(tmp_path: Path) -> None:
    path = tmp_path / "chat.db"
    with opened(path, "alice") as one, opened(path, "alice") as two:
        fill(one, ["a", "b", "c"])
        assert one.consolidate([(1, "a", "a.")], [], ["x"], through=3)
        # another process of alice, with the same window or an older one: refused whole
        assert not two.consolidate([(2, "b", "b.")], [(3, 0.5)], ["y"], through=3)
        assert not two.consolidate([(2, "b", "b.")], [], ["y"], through=2)
        loaded = two.load()
        assert [(t.chunks, t.boost) for t in loaded.turns] == [("a", 0.0), (None, 0.0), (None, 0.0)]
        assert two.themes() == [(3, ["x"])] and loaded.consolidated_through == 3


def test_the_lease_is_one_process_at_a_time_per_user(tmp_path: Path) -> None:
    path = tmp_path / "chat.db"
    with opened(path, "alice") as one, opened(path, "alice") as two, opened(path, "bob") as bob:
        with one.consolidation_turn() as first:
            with two.consolidation_turn() as second, bob.consolidation_turn() as bobs:
                assert (first, second, bobs) == (True, False, True)  # bob's is his own
            with one.consolidation_turn() as again:  # the same object, another thread's turn
                assert again
            with two.consolidation_turn() as second:  # still held: the nested one kept it
                assert not second
        with two.consolidation_turn() as second:  # released at the end of the block
            assert second


def test_an_expired_lease_is_taken_over_and_a_late_release_leaves_the_new_one(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "chat.db"
    monkeypatch.setattr(backend, "CONSOLIDATION_LEASE_S", 0.2)
    with (
        opened(path, "alice") as slow,
        opened(path, "alice") as other,
        opened(path, "alice") as third,
        ExitStack() as later,
    ):
        with slow.consolidation_turn() as held:
            assert held
            with other.consolidation_turn() as taken:
                assert not taken
            time.sleep(0.3)  # slow outlives its lease
            monkeypatch.setattr(backend, "CONSOLIDATION_LEASE_S", 60.0)
            assert later.enter_context(other.consolidation_turn())  # taken over
        # slow's block ended after its lease had passed to other: other keeps it
        with third.consolidation_turn() as taken:
            assert not taken
        later.close()  # other's block ends
        with third.consolidation_turn() as taken:
            assert taken


def test_a_lease_left_by_a_dead_process_expires(tmp_path: Path) -> None:
    path = tmp_path / "chat.db"
    with opened(path, "alice") as storage:
        db = sqlite3.connect(path)
        db.execute(  # a lease as a process killed mid-consolidation left it
            "INSERT INTO context_marks VALUES ('alice', 'consolidation_lease', ?)",
            (f"{time.time() + 0.3!r} 4242-dead",),
        )
        db.commit()
        db.close()
        with storage.consolidation_turn() as held:
            assert not held
        time.sleep(0.4)
        with storage.consolidation_turn() as held:
            assert held


def test_a_held_write_lock_is_a_write_conflict_not_a_driver_error(tmp_path: Path) -> None:
    path = tmp_path / "chat.db"
    with opened(path, "alice"):
        pass
    storage = SQLiteConversationStorage(path, user="alice", busy_timeout_s=0.1)
    other = sqlite3.connect(path, isolation_level=None)
    try:
        other.execute("BEGIN IMMEDIATE")
        with pytest.raises(WriteConflictError, match="nothing was written"):
            storage.insert(record("hi"), "e", b"")
        other.execute("ROLLBACK")
        assert storage.load().turns == []
    finally:
        other.close()
        storage.close()


def test_a_file_deleted_while_open_refuses_turns_instead_of_losing_them(tmp_path: Path) -> None:
    path = tmp_path / "chat.db"
    with opened(path, "alice") as storage:
        fill(storage, ["The deploy moved to Fridays."])
        for side in ("", "-wal", "-shm"):
            Path(f"{path}{side}").unlink(missing_ok=True)
        with pytest.raises(StorageUnavailableError, match="was deleted, moved or replaced while"):
            fill(storage, ["Noted."])
    assert not path.exists()


def test_open_conversation_storage_opens_sqlite_for_a_path_and_the_server_for_a_url(
    tmp_path: Path,
) -> None:
    storage = open_conversation_storage(tmp_path / "chat.db", user="alice", busy_timeout_s=1.0)
    try:
        assert isinstance(storage, SQLiteConversationStorage)
        assert (storage.user, storage.where) == ("alice", str(tmp_path / "chat.db"))
    finally:
        storage.close()
    with pytest.raises(StorageUnavailableError, match="cannot be reached"):  # tried the server
        open_conversation_storage("postgresql://127.0.0.1:1/team", user=None, busy_timeout_s=1.0)


def test_a_memory_on_a_schema_4_file_keeps_every_turn_as_the_default_users(
    tmp_path: Path,
) -> None:
    from synapse_retriever.conversation import ConversationMemory

    path = tmp_path / "old.db"
    texts = ["Deploys move to Fridays.", "Edit app.py first.", "Lunch?"]
    schema_4_file(path, texts)
    with ConversationMemory(path, background=False) as memory:
        assert [(t.id, t.text) for t in memory.turns()] == [
            (1, texts[0]),
            (2, texts[1]),
            (3, texts[2]),
        ]
        assert [r.turn_id for r in memory.retrieve("when do deploys happen?", k=1, at=200)] == [1]
        assert memory.graph(at=200).has_edge("turn:1", "turn:2", key="FOLLOWED_BY")
        assert memory.replays() == [(2, ["deploy", "friday"])]
        assert memory.add_turn("A new turn after the upgrade.", at=240) == 4
    with ConversationMemory(path, user="alice", background=False) as alice:
        assert len(alice) == 0 and alice.retrieve("deploys Fridays", at=300) == []


def test_a_file_holding_fewer_turns_than_its_open_memory_is_found_at_the_next_write(
    tmp_path: Path,
) -> None:
    # turns are never deleted: a file that lost some under an open memory was restored into
    # (or edited); the memory was refused 3 times as if another process had written first
    from synapse_retriever.conversation import ConversationMemory

    path = tmp_path / "chat.db"
    with ConversationMemory(path, background=False) as memory:
        for i in range(3):
            memory.add_turn(f"fact {i}", at=i)
        with contextlib.closing(sqlite3.connect(path)) as db, db:
            db.execute("DELETE FROM context_turns WHERE id = 3")
        with pytest.raises(StorageUnavailableError, match=r"the last is 2, not 3.*open it again"):
            memory.add_turn("after", at=10)
        with pytest.raises(StorageUnavailableError, match=r"\(2 turns, not 3\)"):
            memory.consolidate()  # a review's finding: it marked turns it could not find
    with ConversationMemory(path, background=False) as memory:
        assert [turn.text for turn in memory.turns()] == ["fact 0", "fact 1"]
