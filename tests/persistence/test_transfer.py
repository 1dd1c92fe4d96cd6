"""Export and import: round trips in both formats, and the merge rule (newer state wins)."""

from __future__ import annotations

import io
import json
import os
import re
import shlex
import shutil
import socket
import sqlite3
import stat
import subprocess
import sys
import tempfile
import threading
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st
from store_backends import tool

from synapse_retriever import Edge, SynapseConfig, SynapseStore
from synapse_retriever._text import blank
from synapse_retriever.cli import main
from synapse_retriever.errors import InvalidValueError
from synapse_retriever.persistence.sqlite import SQLiteStorage
from synapse_retriever.persistence.transfer import (
    MergeReport,
    export_edges,
    guess_format,
    merge_edges,
    read_edges,
    write_edges,
)

DAY = 86_400.0


def _learned(path: Path | str = ":memory:") -> SynapseStore:
    store = SynapseStore(path)
    store.reinforce(["a", "b", "c"], namespace="shared", at=0.0)
    store.reinforce(["a", "b"], namespace="shared", at=2 * DAY)
    store.reinforce(["a", "z"], namespace="personal", at=DAY)
    store.reinforce(["x", "y"], namespace="ephemeral", at=0.0)  # 1-day half-life
    return store


def test_export_leaves_out_pruned_edges_and_sorts() -> None:
    with _learned() as store:
        # at day 3 the ephemeral edge is 0.3 / 2^3 = 0.0375 (alive); at day 6, 0.0047 (pruned)
        assert len(export_edges(store, at=3 * DAY)) == 5
        edges = export_edges(store, at=6 * DAY)
    assert [(e.namespace, e.a, e.b) for e in edges] == [
        ("personal", "a", "z"),
        ("shared", "a", "b"),
        ("shared", "a", "c"),
        ("shared", "b", "c"),
    ]


def test_one_namespace_may_be_named_alone_and_a_non_namespace_is_refused_typed(
    tmp_path: Path,
) -> None:
    # a bare str was read as its characters (refused naming 's', not 'shared'), and a
    # value that is no iterable raised a raw TypeError
    from synapse_retriever.errors import InvalidTypeError

    with _learned() as store:
        assert write_edges(store, tmp_path / "shared.json", at=3 * DAY, namespaces="shared") == 3
        assert [e.namespace for e in export_edges(store, at=3 * DAY, namespaces="personal")] == [
            "personal"
        ]
        with pytest.raises(InvalidTypeError, match=r"namespaces must be a str.* got int 5"):
            export_edges(store, namespaces=5)  # type: ignore[arg-type]
    assert {e.namespace for e in read_edges(tmp_path / "shared.json")} == {"shared"}


def test_an_export_is_one_state_of_the_store_while_another_process_renames(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # the export read the graph, then each edge again: a rename committed meanwhile (a
    # watch running beside it) left that node's edges out (1,132 of 20,000 exported)
    config = SynapseConfig.actr(refresh_interval_s=0.0)  # every read looks for writes
    path = tmp_path / "synapses.db"
    with _learned(path):
        pass
    store, other = SynapseStore(path, config=config), SynapseStore(path, config=config)
    graph = SynapseStore.graph

    def renamed_meanwhile(self: SynapseStore, *args: object, **kwargs: object) -> object:
        read = graph(self, *args, **kwargs)  # type: ignore[arg-type]
        if self is store:
            assert other.rename("a", "a2") == 3
        return read

    monkeypatch.setattr(SynapseStore, "graph", renamed_meanwhile)
    with store, other:
        edges = export_edges(store, at=3 * DAY)
    assert [(e.namespace, e.a, e.b) for e in edges] == [
        ("ephemeral", "x", "y"),
        ("personal", "a", "z"),
        ("shared", "a", "b"),
        ("shared", "a", "c"),
        ("shared", "b", "c"),
    ]  # as the store was when the export read it
    assert edges[2].created_at == 0.0 and edges[2].activation_count == 2


@pytest.mark.parametrize("name", ["edges.json", "edges.graphml"])
def test_round_trip_keeps_the_stored_state_exactly(tmp_path: Path, name: str) -> None:
    with _learned() as store:
        written = write_edges(store, tmp_path / name, at=3 * DAY)
        expected = export_edges(store, at=3 * DAY)
    edges = read_edges(tmp_path / name)
    assert written == len(edges) == 5
    assert sorted(edges, key=lambda e: (e.namespace, e.a, e.b)) == expected
    assert not list(tmp_path.glob(".*partial"))


@pytest.mark.parametrize("name", ["edges.json", "edges.graphml"])
def test_a_failed_export_leaves_no_file(
    tmp_path: Path, name: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / name).write_text("the previous export\n")

    def broken(*args: object) -> dict[str, object]:
        raise RuntimeError("disk full")

    monkeypatch.setattr("synapse_retriever.persistence.transfer._attributes", broken)
    with _learned() as store, pytest.raises(RuntimeError, match="disk full"):
        write_edges(store, tmp_path / name, at=3 * DAY)
    assert (tmp_path / name).read_text() == "the previous export\n"  # untouched
    assert sorted(p.name for p in tmp_path.iterdir()) == [name]  # no partial file left
    with _learned() as store, pytest.raises(IsADirectoryError, match="is a directory"):
        write_edges(store, tmp_path, fmt="json")


_EXPORT_OVER = """
import sys
from synapse_retriever import SynapseStore
from synapse_retriever.persistence.transfer import write_edges
with SynapseStore(sys.argv[1]) as store:
    write_edges(store, sys.argv[2])
"""


def test_an_export_refuses_a_file_this_process_may_not_write(tmp_path: Path) -> None:
    # renamed over, a 0444 file was replaced: its reader's permissions did not count
    with SynapseStore(tmp_path / "s.db") as store:
        store.reinforce(["a", "b"])
    target = tmp_path / "kept.json"
    target.write_text("the previous export\n")
    target.chmod(0o444)
    command = [sys.executable, "-c", _EXPORT_OVER, str(tmp_path / "s.db"), str(target)]
    if os.geteuid() == 0:  # root writes any file: as root without that capability
        tool(shutil.which("capsh"), "capsh (libcap2-bin)")  # under CI: fails, never skips
        drop = ["capsh", "--drop=cap_dac_override", "--", "-c", "true"]
        if subprocess.run(drop, check=False).returncode:  # a container that holds it back
            pytest.skip("the kernel lets no process here drop cap_dac_override (capsh failed)")
        command = ["capsh", "--drop=cap_dac_override", "--", "-c", shlex.join(command)]
    done = subprocess.run(command, capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode != 0 and "PermissionError" in done.stderr, done.stderr
    assert "may not write it" in done.stderr
    assert target.read_text() == "the previous export\n"
    assert sorted(p.name for p in tmp_path.iterdir() if "kept" in p.name) == ["kept.json"]


_FULL_DISK_EXPORT = """
import resource, signal, sys
from synapse_retriever.bench.perf import grow_graph
from synapse_retriever import SynapseStore
from synapse_retriever.persistence.transfer import write_edges
grow_graph(sys.argv[1], 2000)
store = SynapseStore(sys.argv[1])
signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # a write past the limit fails (EFBIG) instead
resource.setrlimit(resource.RLIMIT_FSIZE, (4096, 4096))
try:
    write_edges(store, sys.argv[2], fmt="json")
except OSError as error:
    print(type(error).__name__, error.errno, error)
"""


def test_an_export_that_cannot_be_written_names_the_file_asked_for(tmp_path: Path) -> None:
    # a read-only file system, a full disk or a file-size limit: the error named the
    # temporary file beside the target (".edges.json.1234.partial"), or no file at all
    done = subprocess.run(
        [sys.executable, "-c", _FULL_DISK_EXPORT, str(tmp_path / "s.db"), str(tmp_path / "e.json")],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    target = tmp_path / "e.json"
    assert done.stdout == f"OSError 27 [Errno 27] cannot write '{target}': File too large\n"
    assert "partial" not in done.stdout
    assert sorted(p.name for p in tmp_path.iterdir() if not p.name.startswith("s.db")) == []


def test_json_carries_the_decayed_weight_for_readers(tmp_path: Path) -> None:
    with _learned() as store:
        write_edges(store, tmp_path / "e.json", at=3 * DAY)
    document = json.loads((tmp_path / "e.json").read_text())
    ephemeral = next(e for e in document["edges"] if e["namespace"] == "ephemeral")
    # stored 0.3, three 1-day half-lives later: 0.3 / 8 = 0.0375
    assert ephemeral["stored_weight"] == 0.3
    assert ephemeral["weight"] == pytest.approx(0.0375)
    assert document["format"] == "synapse-retriever/edges" and document["version"] == 1


def _edge(last: float, *, weight: float = 0.5, count: int = 2, created: float = 0.0) -> Edge:
    return Edge("a", "b", "shared", weight, count, 30.0, created, last)


def _merged(path: Path, *batches: list[Edge]) -> list[MergeReport]:
    """Merge each batch through its own connection, as ``synapse-retriever import`` does."""
    reports = []
    for batch in batches:
        storage = SQLiteStorage(path)
        try:
            reports.append(merge_edges(storage, batch))
        finally:
            storage.close()
    return reports


def test_merge_inserts_replaces_older_and_keeps_newer(tmp_path: Path) -> None:
    first = [_edge(100.0), replace(_edge(100.0), b="c"), replace(_edge(100.0), b="d")]
    incoming = [
        _edge(200.0, weight=0.9, count=7, created=50.0),  # newer: replaces, keeps created 0.0
        replace(_edge(100.0, weight=0.1), b="c"),  # same time: the stored edge is kept
        replace(_edge(50.0, weight=0.1), b="d"),  # older: kept
        replace(_edge(10.0), b="e"),  # absent: inserted
    ]
    path = tmp_path / "s.db"
    assert _merged(path, first, incoming)[1] == MergeReport(inserted=1, replaced=1, kept=2)
    with SynapseStore(path) as store:
        assert store.edge("a", "b", "shared") == Edge("a", "b", "shared", 0.9, 7, 30.0, 0.0, 200.0)
        assert store.edge("a", "c", "shared") == replace(_edge(100.0), b="c")
        assert store.edge("a", "d", "shared") == replace(_edge(100.0), b="d")
        assert store.edge("a", "e", "shared") == replace(_edge(10.0), b="e")


def test_merge_twice_changes_nothing_the_second_time(tmp_path: Path) -> None:
    edges = [_edge(100.0), replace(_edge(5.0), namespace="personal")]
    assert _merged(tmp_path / "s.db", edges, edges) == [MergeReport(2, 0, 0), MergeReport(0, 0, 2)]


def test_merge_orders_ids_and_folds_duplicates_newest_first(tmp_path: Path) -> None:
    flipped = Edge("b", "a", "shared", 0.4, 1, 30.0, 20.0, 30.0)
    report = _merged(tmp_path / "s.db", [_edge(100.0, created=40.0), flipped])
    assert report == [MergeReport(1, 0, 0)]
    with SynapseStore(tmp_path / "s.db") as store:
        # the newer duplicate wins, with the earlier creation time of the two
        assert store.edge("a", "b", "shared") == _edge(100.0, created=20.0)


@pytest.mark.parametrize(
    ("edge", "message"),
    [
        (_edge(1.0, weight=1.5), "stored_weight must be in"),
        (_edge(1.0, weight=float("nan")), "must be a finite number, got nan"),
        (
            replace(_edge(1.0), weight=10**400),
            "stored_weight must be a finite number, got int past",
        ),
        (
            replace(_edge(1.0), created_at=-1e300, last_reinforced_at=-1e300),
            r"created_at=-1e\+300 is before the year 1",
        ),  # the LTP floor would keep it for ever
        (replace(_edge(1.0), created_at=-62_135_596_801.0), "created_at=.* is before the year 1"),
        (replace(_edge(1.0), created_at=10**400), "created_at must be a finite number, got int"),
        (_edge(1.0, count=0), "count must be an integer"),
        (_edge(1.0, count=2**31), r"count must be an integer in \[1, 2147483647\], got 2147483648"),
        (replace(_edge(1.0), half_life_days=-1.0), r"half_life_days must be in \[1e-06, 1e\+06\]"),
        (replace(_edge(1.0), half_life_days=1e308), r"got 1e\+308"),
        (replace(_edge(1.0), half_life_days=5e-324), "got 5e-324"),
        (_edge(1.0, created=2.0), "created_at 2.0 is after"),
        (replace(_edge(1.0), b="a"), "self-loop"),
        (replace(_edge(1.0), namespace="team"), "namespace must be"),
        (replace(_edge(1.0), a=""), "non-empty"),
    ],
)
def test_merge_refuses_bad_edges_and_writes_nothing(
    tmp_path: Path, edge: Edge, message: str
) -> None:
    with pytest.raises(InvalidValueError, match=message):
        _merged(tmp_path / "s.db", [replace(_edge(1.0), b="ok"), edge])
    with SynapseStore(tmp_path / "s.db") as store:
        assert store.edge("a", "ok", "shared") is None


def test_an_imported_time_of_minus_zero_is_zero_on_every_backend(store_path: str) -> None:
    # SQLite read -0.0 back as 0.0, PostgreSQL kept it: one export, two stores
    import math

    from synapse_retriever.persistence.postgres import PostgresStorage, is_postgres_url

    storage = (
        PostgresStorage(store_path) if is_postgres_url(store_path) else SQLiteStorage(store_path)
    )
    try:
        merge_edges(storage, [Edge("a", "b", "shared", 0.5, 2, 30.0, -0.0, -0.0)])
    finally:
        storage.close()
    with SynapseStore(store_path) as store:
        edge = store.edge("a", "b", "shared")
    assert edge is not None
    assert [math.copysign(1.0, t) for t in (edge.created_at, edge.last_reinforced_at)] == [1, 1]


def test_a_store_open_on_the_file_sees_the_import(tmp_path: Path) -> None:
    path = tmp_path / "live.db"
    with SynapseStore(path, config=SynapseConfig.actr(refresh_interval_s=0.0)) as store:
        store.reinforce(["p", "q"], namespace="shared", at=0.0)
        storage = SQLiteStorage(path)  # another connection, as the CLI uses
        merge_edges(storage, [_edge(100.0)])
        storage.close()
        assert store.edge("a", "b", "shared") == _edge(100.0)
        assert store.weight("p", "q", "shared", at=0.0) == 0.3


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ("not json", "not a JSON edge export"),
        ('{"format": "other"}', "not a synapse edge export"),
        ('{"format": "synapse-retriever/edges", "version": 99, "edges": []}', "version 99"),
        ('{"format": "synapse-retriever/edges", "version": 1, "edges": {}}', "no list of edges"),
        (
            '{"format": "synapse-retriever/edges", "version": 1, "edges": [{"a": "x"}]}',
            "has no 'b'",
        ),
        ('{"format": "synapse-retriever/edges", "version": 1, "edges": [3]}', "not an object"),
        ("[" * 100_000, "not a JSON edge export"),  # nested past Python's stack
        ('{"count": ' + "9" * 5000 + "}", "not a JSON edge export"),  # past int parsing's limit
    ],
)
def test_read_edges_names_what_is_wrong_with_a_file(
    tmp_path: Path, content: str, message: str
) -> None:
    path = tmp_path / "bad.json"
    path.write_text(content)
    with pytest.raises(InvalidValueError, match=message):
        read_edges(path)


@pytest.mark.parametrize("version", ["99", None], ids=["newer", "none"])
def test_a_graphml_export_of_another_version_is_refused_as_json_is(
    tmp_path: Path, version: str | None
) -> None:
    # JSON was checked for its version, GraphML not: a version 99 file was imported
    store = SynapseStore(":memory:")
    store.reinforce(["a", "b"], at=0.0)
    path = tmp_path / "x.graphml"
    write_edges(store, path, at=0.0)
    text = path.read_text()
    key = re.search(r'<key id="(d\d+)" for="graph" attr.name="version"', text)
    assert key is not None
    stamp = f'<data key="{key.group(1)}">1</data>'
    assert stamp in text
    path.write_text(text.replace(stamp, "" if version is None else stamp.replace(">1<", ">99<")))
    with pytest.raises(InvalidValueError, match=r"has export version (99|None); this library"):
        read_edges(path)


def test_read_edges_refuses_foreign_graphml(tmp_path: Path) -> None:
    import networkx as nx

    path = tmp_path / "other.graphml"
    graph = nx.Graph()
    graph.add_edge("a", "b", weight=1.0)
    nx.write_graphml(graph, path)
    with pytest.raises(InvalidValueError, match="not a synapse edge export"):
        read_edges(path)
    (tmp_path / "broken.graphml").write_text("<graphml><unclosed>")
    with pytest.raises(InvalidValueError, match="not a GraphML edge export"):
        read_edges(tmp_path / "broken.graphml")


@pytest.mark.parametrize(
    ("edited", "end"),
    [('<edge target="b.py" id="shared">', "only one end, 'b.py'"),
     ('<edge source="a.py" id="shared">', "only one end, 'a.py'"),
     ('<edge id="shared">', "no end at all")],
    ids=["no-source", "no-target", "neither"],
)  # fmt: skip
def test_a_graphml_edge_without_its_source_or_target_is_refused_by_name(
    tmp_path: Path, edited: str, end: str
) -> None:
    # networkx read the missing attribute as None, and str() made it a node named "None":
    # the import wrote an edge between "None" and b.py
    with SynapseStore(":memory:") as store:
        store.reinforce(["a.py", "b.py"], namespace="shared", at=0.0)
        store.reinforce(["a.py", "c.py"], namespace="personal", at=0.0)
        write_edges(store, tmp_path / "good.graphml", at=0.0)
    text = (tmp_path / "good.graphml").read_text()
    whole = '<edge source="a.py" target="b.py" id="shared">'
    assert whole in text
    path = tmp_path / "hand-edited.graphml"
    path.write_text(text.replace(whole, edited))
    with pytest.raises(InvalidValueError) as refused:
        read_edges(path)
    assert str(refused.value) == (
        f"{str(path)!r}: edge 'shared' has no source or target attribute ({end}); "
        "nothing was imported"
    )
    assert main(["import", str(tmp_path / "new.db"), str(path)]) == 2
    assert not (tmp_path / "new.db").exists()


@pytest.mark.parametrize("reverse", [False, True], ids=["same-way", "reversed"])
def test_a_graphml_edge_repeated_by_id_is_refused_not_merged(tmp_path: Path, reverse: bool) -> None:
    # networkx keeps one edge per id between two nodes, the later one's attributes merged
    # over the earlier's: a hand-edited file's older copy of an edge was imported silently
    with SynapseStore(":memory:") as store:
        store.reinforce(["a.py", "b.py"], namespace="shared", at=0.0)
        store.reinforce(["a.py", "c.py"], namespace="personal", at=0.0)
        write_edges(store, tmp_path / "good.graphml", at=0.0)
    text = (tmp_path / "good.graphml").read_text()
    start = text.index('<edge source="a.py" target="b.py" id="shared">')
    edge = text[start : text.index("</edge>", start) + len("</edge>")]
    copy = edge.replace('<data key="d6">1</data>', '<data key="d6">2</data>')  # count
    if reverse:
        copy = copy.replace('source="a.py" target="b.py"', 'source="b.py" target="a.py"')
    assert copy != edge
    path = tmp_path / "hand-edited.graphml"
    path.write_text(text.replace(edge, edge + copy))
    with pytest.raises(InvalidValueError) as refused:
        read_edges(path)
    ends = "'b.py' and 'a.py'" if reverse else "'a.py' and 'b.py'"
    assert str(refused.value) == (
        f"{str(path)!r}: edge 'shared' between {ends} appears twice (an edge's id is its "
        "namespace); nothing was imported"
    )
    assert main(["import", str(tmp_path / "new.db"), str(path)]) == 2
    assert not (tmp_path / "new.db").exists()
    assert len(read_edges(tmp_path / "good.graphml")) == 2  # one of each id: read as before


def test_a_graphml_file_with_a_second_graph_reads_the_first_as_before(tmp_path: Path) -> None:
    # every <edge> of the document was counted against the first graph's: a second graph
    # (which networkx does not read) was refused as "two of them share an id or key"
    with SynapseStore(":memory:") as store:
        store.reinforce(["a.py", "b.py"], namespace="shared", at=0.0)
        write_edges(store, tmp_path / "good.graphml", at=0.0)
        expected = export_edges(store, at=0.0)
    text = (tmp_path / "good.graphml").read_text()
    graph = text[text.index("  <graph ") : text.index("</graph>") + len("</graph>")]
    other = graph.replace('"a.py"', '"c.py"')
    path = tmp_path / "two.graphml"
    path.write_text(text.replace(graph, graph + "\n" + other))
    assert read_edges(path) == expected


def test_an_import_locks_use_rows_in_namespace_order_as_every_writer_does(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # the use rows were taken namespace by namespace in the file's order: two imports of
    # one team's namespaces in other orders could each hold a row the other waits for
    # (PostgreSQL reports the deadlock; the import retries)
    from synapse_retriever.persistence import sqlite as backend

    storage = SQLiteStorage(tmp_path / "s.db")
    merge_edges(
        storage, [Edge("a", "b", ns, 0.3, 1, 30.0, 0.0, 0.0) for ns in ("shared", "personal")]
    )
    asked: list[list[int]] = []
    uses_of = backend._SQLiteTransaction.uses_of

    def spy(self: Any, keys: Any) -> Any:
        asked.append(sorted({key.namespace for key in keys}))
        return uses_of(self, keys)

    monkeypatch.setattr(backend._SQLiteTransaction, "uses_of", spy)
    merge_edges(
        storage, [Edge("c", "d", ns, 0.3, 1, 30.0, 0.0, 0.0) for ns in ("shared", "personal")]
    )
    storage.close()
    assert asked == [[1], [2]]  # personal, then shared: the order the names were made in


def test_imported_nodes_get_uses_so_the_default_rule_can_recall_them(tmp_path: Path) -> None:
    day = 86400.0
    with SynapseStore(":memory:") as source:
        source.reinforce(["jwt", "keys"], namespace="shared", at=0)
        source.reinforce(["jwt", "keys"], namespace="shared", at=day)
        edges = export_edges(source, at=day)
    storage = SQLiteStorage(tmp_path / "imported.db")
    merge_edges(storage, edges)
    merge_edges(storage, edges)  # nodes that have uses get no second approximation
    db = storage._db
    assert db.execute("SELECT node, uses FROM node_uses ORDER BY node").fetchall() == [
        (1, 2),
        (2, 2),
    ]
    assert db.execute("SELECT events FROM namespace_events").fetchall() == [(1,)]
    storage.close()
    with SynapseStore(tmp_path / "imported.db") as store:
        hits = [("jwt", 0.9), ("login", 0.5)]
        # keys: 2 uses (the edge's count), the last a day before the query (1), the other
        # spread back to its creation: 1 × (2^0.5 − 1^0.5) / (0.5 × 1) = 0.82843; B =
        # ln 1.82843 = 0.60346; no lift (N = 1 event: ln(2 × 1 / 4) < 0); it beats login,
        # never used: -6 + 3
        plan = store.plan(hits, at=2 * day, active_namespace="shared")
        assert plan.activation["keys"] == pytest.approx(0.60346, abs=1e-5)
        assert [h.id for h in plan.inject()] == ["jwt", "keys"]


# -- refused outputs and formats ----------------------------------------------------------


def _sqlite_file(path: Path) -> Path:
    """An SQLite database of another application."""
    with sqlite3.connect(path) as db:
        db.execute("CREATE TABLE notes (body TEXT)")
    sqlite3.connect(path).close()
    return path


@pytest.mark.parametrize(
    ("target", "message"),
    [
        pytest.param(lambda d: d / "s.db", "the store being exported", id="the-store"),
        pytest.param(
            lambda d: d / "sub" / ".." / "s.db", "the store being exported", id="another-spelling"
        ),
        pytest.param(lambda d: d / "link.json", "the store being exported", id="a-symlink"),
        pytest.param(lambda d: d / "hard.json", "the store being exported", id="a-hard-link"),
        pytest.param(lambda d: d / "s.db-wal", "the store's -wal file", id="its-wal"),
        pytest.param(lambda d: d / "other.graphml", "a synapse store", id="another-store"),
        pytest.param(lambda d: d / "notes.json", "an SQLite database", id="foreign-sqlite"),
    ],
)
def test_write_edges_refuses_the_store_and_any_sqlite_file(
    tmp_path: Path, target: Callable[[Path], Path], message: str
) -> None:
    (tmp_path / "sub").mkdir()
    _learned(tmp_path / "other.graphml").close()  # another synapse store, named like an export
    _sqlite_file(tmp_path / "notes.json")
    with _learned(tmp_path / "s.db") as store:
        (tmp_path / "link.json").symlink_to(tmp_path / "s.db")
        (tmp_path / "hard.json").hardlink_to(tmp_path / "s.db")
        before = {p.name: p.read_bytes() for p in tmp_path.iterdir() if p.is_file()}
        with pytest.raises(InvalidValueError, match=message) as refused:
            write_edges(store, target(tmp_path), fmt="json", at=3 * DAY)
        assert os.fspath(target(tmp_path)) in str(refused.value)  # names the path
        assert {p.name: p.read_bytes() for p in tmp_path.iterdir() if p.is_file()} == before
        assert len(export_edges(store, at=3 * DAY)) == 5


@pytest.mark.parametrize("suffix", ["", "-wal", "-shm"])
def test_write_edges_refuses_the_files_of_a_store_named_by_a_file_uri(
    tmp_path: Path, suffix: str
) -> None:
    # the store named "file:...?mode=rwc" was compared as a path of that literal name: an
    # export over its -wal file was written (its -wal and -shm are not SQLite headers)
    with _learned(f"file:{tmp_path / 's.db'}?mode=rwc") as store:
        target = tmp_path / f"s.db{suffix}"
        before = {p.name: p.read_bytes() for p in tmp_path.iterdir() if p.is_file()}
        assert before.keys() >= {"s.db", "s.db-wal", "s.db-shm"}
        with pytest.raises(InvalidValueError, match="the store") as refused:
            write_edges(store, target, fmt="json", at=3 * DAY)
        assert os.fspath(target) in str(refused.value)
        assert {p.name: p.read_bytes() for p in tmp_path.iterdir() if p.is_file()} == before


def test_an_export_next_to_a_store_in_memory_named_like_a_file_is_written(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)  # "file:m?mode=memory" holds no file "m" here
    with _learned("file:m?mode=memory&cache=shared") as store:
        assert write_edges(store, tmp_path / "m", fmt="json", at=3 * DAY) == 5


def test_an_export_through_a_symlink_writes_its_target_and_keeps_the_link(
    tmp_path: Path,
) -> None:
    (tmp_path / "exports").mkdir()
    (tmp_path / "exports" / "edges.json").write_text("old\n")
    (tmp_path / "latest.json").symlink_to(tmp_path / "exports" / "edges.json")
    (tmp_path / "new.json").symlink_to(tmp_path / "exports" / "new-target.json")  # dangling
    with _learned() as store:
        assert write_edges(store, tmp_path / "latest.json", at=3 * DAY) == 5
        assert write_edges(store, tmp_path / "new.json", at=3 * DAY) == 5
        expected = export_edges(store, at=3 * DAY)
    assert (tmp_path / "latest.json").is_symlink() and (tmp_path / "new.json").is_symlink()
    assert read_edges(tmp_path / "exports" / "edges.json") == expected
    assert read_edges(tmp_path / "exports" / "new-target.json") == expected
    assert sorted(p.name for p in (tmp_path / "exports").iterdir()) == [
        "edges.json",
        "new-target.json",
    ]  # no partial file left beside them


@pytest.mark.parametrize("mode", [0o600, 0o640, 0o664], ids=oct)
def test_an_export_over_a_file_keeps_its_permissions_through_a_link_too(
    tmp_path: Path, mode: int
) -> None:
    # a new file with default permissions was renamed over it: a chmod 600 export of every
    # path a team touched became -rw-r--r--, world-readable
    old_umask = os.umask(0o022)
    try:
        (tmp_path / "private.json").write_text("{}\n")
        (tmp_path / "private.json").chmod(mode)
        (tmp_path / "link.json").symlink_to(tmp_path / "private.json")
        with _learned() as store:
            write_edges(store, tmp_path / "private.json", at=3 * DAY)
            assert stat.S_IMODE((tmp_path / "private.json").stat().st_mode) == mode
            write_edges(store, tmp_path / "link.json", at=3 * DAY)
            write_edges(store, tmp_path / "new.json", at=3 * DAY)
    finally:
        os.umask(old_umask)
    assert stat.S_IMODE((tmp_path / "private.json").stat().st_mode) == mode
    assert stat.S_IMODE((tmp_path / "new.json").stat().st_mode) == 0o644  # a new file's
    assert len(read_edges(tmp_path / "private.json")) == 5
    assert sorted(p.name for p in tmp_path.iterdir()) == ["link.json", "new.json", "private.json"]


def test_an_export_never_writes_through_a_link_planted_as_its_temporary_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # the temporary file's name was known (".edges.json.PID.partial") and opened following
    # links: whoever could write the folder had the export written over any file of ours
    (tmp_path / "victim.txt").write_text("mine\n")
    planted = [tmp_path / f".edges.json.{os.getpid()}{end}.partial" for end in ("", ".00000000")]
    for link in planted:  # the name it had, and the first it now draws
        link.symlink_to(tmp_path / "victim.txt")
    names = iter([b"\0" * 4, b"\1" * 4])
    monkeypatch.setattr(os, "urandom", lambda size: next(names))
    with _learned() as store:
        assert write_edges(store, tmp_path / "edges.json", at=3 * DAY) == 5
    assert (tmp_path / "victim.txt").read_text() == "mine\n"
    assert all(link.is_symlink() for link in planted)
    assert len(read_edges(tmp_path / "edges.json")) == 5
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(
        [*(link.name for link in planted), "edges.json", "victim.txt"]
    )


def _fifo(path: Path) -> Path:
    if not hasattr(os, "mkfifo"):
        pytest.skip("no FIFOs on this system")
    os.mkfifo(path)
    return path


def test_an_export_refuses_a_fifo_a_socket_and_a_link_to_them_never_opening_them(
    tmp_path: Path,
) -> None:
    pipe = _fifo(tmp_path / "pipe.json")
    (tmp_path / "link.json").symlink_to(pipe)
    with socket.socket(socket.AF_UNIX) as sock, _learned() as store:
        sock.bind(str(tmp_path / "s.json"))
        for target, kind in [
            ("pipe.json", "a FIFO"),
            ("link.json", "a FIFO"),
            ("s.json", "a socket"),
        ]:
            refused: list[Exception] = []

            def export(name: str = target, refused: list[Exception] = refused) -> None:
                try:
                    write_edges(store, tmp_path / name, at=3 * DAY)
                except InvalidValueError as exc:
                    refused.append(exc)

            exporting = threading.Thread(target=export, daemon=True)
            exporting.start()
            exporting.join(timeout=20)
            if exporting.is_alive():  # opened the FIFO, waiting for a writer: release it
                os.close(os.open(pipe, os.O_WRONLY | os.O_NONBLOCK))
                exporting.join(timeout=20)
                pytest.fail(f"write_edges opened {target} and waited for a writer")
            assert len(refused) == 1 and kind in str(refused[0]), (target, refused)
            assert str(tmp_path / target) in str(refused[0])
        assert pipe.is_fifo() and (tmp_path / "link.json").is_symlink()  # left untouched
        assert sorted(p.name for p in tmp_path.iterdir()) == ["link.json", "pipe.json", "s.json"]


def test_an_export_to_a_stream_writes_all_of_it_there(tmp_path: Path) -> None:
    with _learned() as store:
        for fmt in ("json", "graphml"):
            stream = io.BytesIO()
            assert write_edges(store, stream, fmt=fmt, at=3 * DAY) == 5  # type: ignore[arg-type]
            (tmp_path / f"e.{fmt}").write_bytes(stream.getvalue())
            assert read_edges(tmp_path / f"e.{fmt}") == export_edges(store, at=3 * DAY)
        with pytest.raises(InvalidValueError, match="needs fmt"):
            write_edges(store, io.BytesIO(), at=3 * DAY)


def test_guess_format_knows_three_suffixes_in_any_case() -> None:
    assert [guess_format(name) for name in ("e.json", "e.JSON", "e.graphml", "E.GraphML")] == [
        "json",
        "json",
        "graphml",
        "graphml",
    ]
    assert guess_format(Path("dir.json") / "e.xml") == "graphml"


@pytest.mark.parametrize(
    ("name", "message"),
    [
        ("edges.txt", "its suffix '.txt' is not one of .json, .graphml, .xml"),
        ("edges.json.gz", "its suffix '.gz' is not one of .json, .graphml, .xml"),
        ("edges", "it has no suffix; expected one of .json, .graphml, .xml"),
    ],
)
def test_an_unknown_suffix_is_refused_without_a_format(
    tmp_path: Path, name: str, message: str
) -> None:
    path = tmp_path / name
    with pytest.raises(InvalidValueError, match=re.escape(message)):
        guess_format(path)
    with _learned() as store, pytest.raises(InvalidValueError, match=re.escape(message)):
        write_edges(store, path, at=3 * DAY)
    assert list(tmp_path.iterdir()) == []  # nothing written
    with _learned() as store:
        assert write_edges(store, path, fmt="graphml", at=3 * DAY) == 5
    with pytest.raises(InvalidValueError, match=re.escape(message)):
        read_edges(path)
    assert len(read_edges(path, fmt="graphml")) == 5


def test_an_unknown_format_is_refused(tmp_path: Path) -> None:
    with _learned() as store, pytest.raises(InvalidValueError, match="format must be 'json' or"):
        write_edges(store, tmp_path / "e.xml", fmt="xml", at=3 * DAY)  # type: ignore[arg-type]
    with pytest.raises(InvalidValueError, match="got 'csv'"):
        read_edges(tmp_path / "e.xml", fmt="csv")  # type: ignore[arg-type]
    assert list(tmp_path.iterdir()) == []


# -- ids that XML cannot carry ------------------------------------------------------------


@pytest.mark.parametrize(
    ("a", "namespace", "named", "shown"),
    [
        ("auth\x01jwt.py", "shared", "node id 'auth\\x01jwt.py'", "U+0001"),
        ("\x0bvertical tab", "shared", "node id '\\x0bvertical tab'", "U+000B"),
        ("\x1f", "personal", "node id '\\x1f'", "U+001F"),
        ("not a char \ufffe", "shared", "node id 'not a char \\ufffe'", "U+FFFE"),
        ("ok", "branch:x\uffffy", "namespace 'branch:x\\uffffy'", "U+FFFF"),
    ],
)
def test_graphml_refuses_what_xml_cannot_carry_and_writes_nothing(
    tmp_path: Path, a: str, namespace: str, named: str, shown: str
) -> None:
    path = tmp_path / "edges.graphml"
    path.write_text("the previous export\n")
    with SynapseStore(":memory:") as store:
        store.reinforce([a, "other.py"], namespace=namespace, at=0.0)
        with pytest.raises(InvalidValueError) as refused:
            write_edges(store, path, at=0.0)
        assert f"{named} holds {shown}, which XML 1.0 cannot carry" in str(refused.value)
        assert "export as JSON" in str(refused.value)
        assert path.read_text() == "the previous export\n"
        assert sorted(p.name for p in tmp_path.iterdir()) == ["edges.graphml"]
        write_edges(store, tmp_path / "edges.json", at=0.0)  # JSON carries it
    assert [(e.a, e.b, e.namespace) for e in read_edges(tmp_path / "edges.json")] == [
        (a, "other.py", namespace)
    ]


ID_TEXT = st.text(
    st.one_of(
        st.sampled_from("\x01\t\n\r\x0b\x0c\x1f \x7f\x85\xa0\u2028\ufffe\uffff&<>\"';"),
        st.characters(exclude_categories=("Cs",), exclude_characters="\x00"),
    ),
    min_size=1,
    max_size=12,
)


def _xml_carries(text: str) -> bool:
    return all(
        ch in "\t\n\r" or " " <= ch <= "\ud7ff" or "\ue000" <= ch <= "\ufffd" or ch >= "\U00010000"
        for ch in text
    )


@settings(max_examples=150, deadline=None)
@given(a=ID_TEXT, b=ID_TEXT, branch=st.text(st.characters(exclude_categories=("Cc", "Cs"))))
def test_every_id_an_export_accepts_round_trips_exactly(a: str, b: str, branch: str) -> None:
    assume(a != b and not blank(branch))  # a name that shows something: a namespace
    namespace = f"branch:{branch}"
    with tempfile.TemporaryDirectory() as folder, SynapseStore(":memory:") as store:
        store.reinforce([a, b], namespace=namespace, at=0.0)
        expected = export_edges(store, at=0.0)
        for name in ("edges.json", "edges.graphml"):
            path = Path(folder) / name
            carried = name.endswith(".json") or _xml_carries(a + b + namespace)
            if not carried:
                with pytest.raises(InvalidValueError, match=re.escape("XML 1.0 cannot carry")):
                    write_edges(store, path, at=0.0)
                assert not path.exists()
                continue
            assert write_edges(store, path, at=0.0) == 1
            assert read_edges(path) == expected


def test_json_carries_every_id_exactly(tmp_path: Path) -> None:
    ids = ["soh\x01byte", "tab\there", "new\nline", "cr\rlf\r\n", "emoji \U0001f600", "  "]
    with SynapseStore(":memory:") as store:
        store.reinforce(ids, namespace="shared", at=0.0)
        expected = export_edges(store, at=0.0)
        write_edges(store, tmp_path / "edges.json", at=0.0)
    assert len(expected) == 15
    assert read_edges(tmp_path / "edges.json") == expected


def test_graphml_carries_whitespace_and_markup_in_ids_exactly(tmp_path: Path) -> None:
    ids = ["tab\there", "new\nline", "cr\rlf\r\n", " lead", "trail ", "a  b", "<&\"'>", "\x85\x7f"]
    with SynapseStore(":memory:") as store:
        store.reinforce(ids, namespace="branch: two  spaces ", at=0.0)
        expected = export_edges(store, at=0.0)
        write_edges(store, tmp_path / "edges.graphml", at=0.0)
    assert len(expected) == 28
    assert read_edges(tmp_path / "edges.graphml") == expected


def test_an_export_into_a_folder_that_cannot_be_written_names_the_file(tmp_path: Path) -> None:
    from files import read_only

    folder = tmp_path / "frozen"
    folder.mkdir()
    with SynapseStore(tmp_path / "s.db") as store:
        store.reinforce(["a", "b"])
        with read_only(folder), pytest.raises(PermissionError) as caught:
            write_edges(store, folder / "edges.json")
    message = str(caught.value)
    assert f"cannot write '{folder / 'edges.json'}'" in message and ".partial" not in message
    assert list(folder.iterdir()) == []


def test_an_export_onto_a_read_only_file_system_names_the_file_asked_for(tmp_path: Path) -> None:
    # removing the temporary there fails too (EROFS, even for a file that is not there),
    # and that error used to replace the one that names the file
    folder = tmp_path / "ro"
    folder.mkdir()
    mounted = subprocess.run(
        ["mount", "-o", "bind,ro", str(folder), str(folder)], capture_output=True, check=False
    )
    if mounted.returncode != 0:
        pytest.skip("a read-only bind mount needs root and mount here")
    try:
        with _learned() as store, pytest.raises(OSError) as raised:
            write_edges(store, folder / "e.json", at=3 * DAY)
        assert str(raised.value) == (
            f"[Errno 30] cannot write '{folder / 'e.json'}': Read-only file system"
        )
    finally:
        subprocess.run(["umount", str(folder)], check=True)
    assert list(folder.iterdir()) == []


def test_an_import_keeps_the_stores_recent_events_and_counts_only_new_ones(
    tmp_path: Path,
) -> None:
    # one old edge between two new nodes trimmed the log of 60 events to its own one, and a
    # store's own export merged back counted every event again
    path = tmp_path / "s.db"
    config = SynapseConfig.recency()
    hits = [("q1", 0.9), ("q2", 0.5), ("q3", 0.4)]
    now = 100 * DAY
    with SynapseStore(path, config=config) as store:
        for i in range(60):
            store.reinforce([f"old/{i}.py", f"older/{i}.py"], at=now - 50 * DAY + i)
        store.reinforce(["recent/a.py", "recent/b.py"], at=now - 1)
        before = store.recall(hits, at=now)
        own = export_edges(store, at=now)
    assert [h.id for h in before] == ["q1", "recent/a.py", "recent/b.py"]

    def counts() -> tuple[int, int]:
        with sqlite3.connect(path) as db:
            ((events,),) = db.execute("SELECT sum(events) FROM namespace_events")
            ((logged,),) = db.execute("SELECT count(*) FROM recent_uses")
        return events, logged

    assert counts() == (61, 61)
    stranger = Edge(
        "new/x.py", "new/y.py", "personal", 0.3, 1, 30.0, now - 10 * DAY, now - 10 * DAY
    )
    _merged(path, [stranger])
    assert counts() == (62, 62)  # its one co-use: the others are kept, not counted again
    with SynapseStore(path, config=config) as store:
        assert store.recall(hits, at=now) == before
    newer = [replace(e, last_reinforced_at=e.last_reinforced_at + 1) for e in own]
    _merged(path, [*newer, replace(stranger, b="new/z.py")])
    assert counts() == (63, 63)  # only new/z.py had no uses
    with SynapseStore(path, config=config) as store:
        assert store.recall(hits, at=now) == before
