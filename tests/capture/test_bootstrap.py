"""Warm start from git: replay order, resumability, commits whose dates run backwards, and
files renamed in the history."""

from __future__ import annotations

import contextlib
import sqlite3
from pathlib import Path

import pytest
from git_history import BASE, DAY, FEATURES, commit, git, init, make_project
from hypothesis import given, settings
from hypothesis import strategies as st

import synapse_retriever.capture.bootstrap as bootstrap_module
from synapse_retriever import SynapseStore
from synapse_retriever.capture.bootstrap import BATCH, bootstrap, replay
from synapse_retriever.capture.gitlog import Commit, read_commits
from synapse_retriever.errors import InvalidValueError
from synapse_retriever.persistence.transfer import export_edges


@pytest.fixture(scope="module")
def project(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return make_project(tmp_path_factory.mktemp("bootstrap") / "project", cycles=3)


def test_each_eligible_commit_is_one_event_at_its_commit_time(project: Path) -> None:
    with SynapseStore(":memory:") as store:
        report = bootstrap(store, project)
        # 18 single-file commits are read but are no event; 3 cycles x 3 features are.
        assert (report.commits, report.eligible, report.replayed) == (27, 9, 9)
        assert (report.edges_written, report.already_seen, report.clamped) == (9, 0, 0)
        edge = store.edge("src/auth/jwt.py", "src/auth/keys.py", "shared")
        assert edge is not None
        # the auth commits are the 19th, 22nd and 25th of the history, one a day from BASE
        assert edge.activation_count == 3
        assert (edge.created_at, edge.last_reinforced_at) == (BASE + 18 * DAY, BASE + 24 * DAY)
        # the same three events replayed by hand give the same stored state
        with SynapseStore(":memory:") as manual:
            for day in (18, 21, 24):
                manual.reinforce(FEATURES[0][1:], namespace="shared", at=BASE + day * DAY)
            assert manual.edge("src/auth/jwt.py", "src/auth/keys.py", "shared") == edge
        assert store.edge("src/auth/jwt.py", "src/db/session.py", "shared") is None


def test_a_rerun_adds_only_new_commits(project: Path, tmp_path: Path) -> None:
    path = tmp_path / "store.db"
    with SynapseStore(path) as store:
        first = bootstrap(store, project, rev="HEAD~3")
    with SynapseStore(path) as store:
        second = bootstrap(store, project)
        third = bootstrap(store, project)
        edge = store.edge("src/web/render.py", "src/web/assets.py", "shared")
    assert (first.eligible, first.replayed) == (6, 6)
    assert (second.eligible, second.replayed, second.already_seen) == (9, 3, 6)
    assert (third.replayed, third.already_seen, third.edges_written) == (0, 9, 0)
    assert edge is not None and edge.activation_count == 3


def test_since_and_namespace(project: Path) -> None:
    with SynapseStore(":memory:") as store:
        report = bootstrap(store, project, since=BASE + 21 * DAY, namespace="branch:main")
        assert report.eligible == 6
        assert store.edge("src/auth/jwt.py", "src/auth/keys.py", "shared") is None
        edge = store.edge("src/auth/jwt.py", "src/auth/keys.py", "branch:main")
        assert edge is not None and edge.activation_count == 2


def test_a_namespace_near_the_cap_replays_a_history_and_its_renames_once(tmp_path: Path) -> None:
    # its commits' ids (git:<sha>@<namespace>) passed 2,048 bytes: bootstrap refused the run
    namespace = "branch:" + "x" * 2030
    repo = init(tmp_path / "repo")
    commit(repo, "jwt", {"jwt.py": "V = 1\n", "keys.py": "K = 1\n"}, at=BASE)
    _rename(repo, "jwt.py", "auth/jwt.py", BASE + DAY, also={"keys.py": "K = 2\n"})
    path = tmp_path / "store.db"
    with SynapseStore(path) as store:
        report = bootstrap(store, repo, namespace=namespace)
        assert (report.replayed, report.renamed) == (2, 1)
        edge = store.edge("auth/jwt.py", "keys.py", namespace)
        assert edge is not None and edge.activation_count == 2
    with SynapseStore(path) as store:
        again = bootstrap(store, repo, namespace=namespace)
        assert (again.replayed, again.already_seen, again.renamed) == (0, 2, 0)
        assert store.edge("auth/jwt.py", "keys.py", namespace) == edge
    with contextlib.closing(sqlite3.connect(path)) as db:  # two commits and the rename, hashed
        ids = [row[0] for row in db.execute("SELECT id FROM events")]
    forms = sorted((i.split("@")[1][:7], i.endswith("#0")) for i in ids)
    assert forms == [("sha256:", False), ("sha256:", False), ("sha256:", True)]


def test_an_older_commit_merged_later_is_replayed_at_the_edge_time(tmp_path: Path) -> None:
    repo = init(tmp_path / "repo")
    commit(repo, "one", {"a.py": "1\n", "b.py": "1\n"}, at=BASE)
    commit(repo, "two", {"a.py": "2\n", "b.py": "2\n"}, at=BASE + 10 * DAY)
    git(repo, "checkout", "-q", "-b", "side", "HEAD~1")
    commit(repo, "side", {"a.py": "s\n", "b.py": "s\n", "c.py": "s\n"}, at=BASE + 5 * DAY)
    git(repo, "checkout", "-q", "main")
    with SynapseStore(":memory:") as store:
        bootstrap(store, repo)  # main only: a-b last reinforced on day 10
        git(repo, "merge", "-q", "--no-ff", "-m", "merge", "side", "-X", "ours", at=BASE + 11 * DAY)
        # the side commit (day 5) is now reachable: reinforce(at=day 5) would raise
        with pytest.raises(InvalidValueError, match="earlier than the last reinforcement"):
            store.reinforce(["a.py", "b.py"], namespace="shared", at=BASE + 5 * DAY)
        report = bootstrap(store, repo)
        assert (report.replayed, report.already_seen, report.clamped) == (1, 2, 1)
        ab = store.edge("a.py", "b.py", "shared")
        ac = store.edge("a.py", "c.py", "shared")
        assert ab is not None and ab.activation_count == 3
        # the whole event moved to day 10, the newest last reinforcement among its edges
        assert ab.last_reinforced_at == ac.last_reinforced_at == BASE + 10 * DAY  # type: ignore[union-attr]


def test_a_fresh_replay_in_date_order_never_clamps(tmp_path: Path) -> None:
    repo = init(tmp_path / "repo")
    commit(repo, "one", {"a.py": "1\n", "b.py": "1\n"}, at=BASE)
    git(repo, "checkout", "-q", "-b", "side")
    commit(repo, "side", {"a.py": "s\n", "b.py": "s\n"}, at=BASE + 5 * DAY)
    git(repo, "checkout", "-q", "main")
    commit(repo, "two", {"a.py": "2\n", "c.py": "2\n"}, at=BASE + 3 * DAY)
    git(repo, "merge", "-q", "--no-ff", "-m", "merge", "side", "-X", "ours", at=BASE + 6 * DAY)
    commits = read_commits(repo)
    assert [c.message for c in commits] == ["one", "two", "side"]
    with SynapseStore(":memory:") as store:
        assert replay(store, commits).clamped == 0


def test_a_commit_is_clamped_to_the_newest_of_its_edges() -> None:
    with SynapseStore(":memory:") as store:
        store.reinforce(["a", "b"], namespace="shared", at=100.0)
        store.reinforce(["b", "c"], namespace="shared", at=300.0)
        commits = [
            Commit("1", (), 0.0, 50.0, "", ("a", "b", "c")),  # b-c was reinforced at 300
            Commit("2", (), 0.0, 200.0, "", ("a", "d")),  # no edge yet: its own time
            Commit("3", (), 0.0, 150.0, "", ("d", "a")),  # a-d, written by commit 2 at 200
        ]
        report = replay(store, commits)
        assert (report.replayed, report.clamped, report.edges_written) == (3, 2, 5)
        ac, ad = store.edge("a", "c", "shared"), store.edge("a", "d", "shared")
        assert ac is not None and ac.last_reinforced_at == 300.0
        assert ad is not None and (ad.created_at, ad.last_reinforced_at) == (200.0, 200.0)
        # another namespace has no such edges: nothing is clamped there
        assert replay(store, commits[:1], namespace="personal").clamped == 0
        edge = store.edge("a", "b", "personal")
        assert edge is not None and edge.last_reinforced_at == 50.0


def test_many_commits_go_in_batches_and_equal_one_reinforce_each() -> None:
    files = [f"src/f{i}.py" for i in range(12)]
    commits = [
        Commit(f"{n:06x}", (), 0.0, BASE + n * 600.0, "", (files[n % 12], files[(n * 7 + 1) % 12]))
        for n in range(2 * BATCH + 345)
    ]
    eligible = [c for c in commits if len(set(c.files)) == 2]  # all: no file pairs with itself
    assert eligible == commits
    calls: list[tuple[int, int]] = []
    with SynapseStore(":memory:") as store, SynapseStore(":memory:") as manual:
        report = replay(store, commits, progress=lambda done, total: calls.append((done, total)))
        assert (report.eligible, report.replayed, report.clamped) == (len(eligible),) * 2 + (0,)
        assert report.edges_written == len(eligible)
        assert calls == [(n, len(eligible)) for n in range(1, len(eligible) + 1)]
        for c in eligible:
            manual.reinforce(c.files, namespace="shared", at=c.commit_time)
        for a in files:
            for b in files:
                assert store.edge(a, b, "shared") == manual.edge(a, b, "shared")
        again = replay(store, commits)
        assert (again.replayed, again.already_seen, again.edges_written) == (0, len(eligible), 0)


def test_commits_ahead_of_the_clock_are_skipped_in_a_batch() -> None:
    ahead = 4e9  # the year 2096
    commits = [
        Commit("1", (), 0.0, 10.0, "", ("a", "b")),
        Commit("2", (), 0.0, ahead, "", ("a", "b")),
        Commit("3", (), 0.0, 20.0, "", ("a", "c")),
    ]
    with SynapseStore(":memory:") as store:
        report = replay(store, commits)
        assert (report.replayed, report.ahead, report.clamped) == (2, 1, 0)
        edge = store.edge("a", "b", "shared")
        assert edge is not None and edge.last_reinforced_at == 10.0


def test_progress_is_reported_per_eligible_commit() -> None:
    calls: list[tuple[int, int]] = []
    commits = [
        Commit("1", (), 0.0, 0.0, "", ("a", "b")),
        Commit("2", (), 0.0, 1.0, "", ("a",)),
        Commit("3", (), 0.0, 2.0, "", ("a", "c")),
    ]
    with SynapseStore(":memory:") as store:
        replay(store, commits, progress=lambda done, total: calls.append((done, total)))
    assert calls == [(1, 2), (2, 2)]


def _rename(repo: Path, old: str, new: str, at: float, also: dict[str, str] | None = None) -> None:
    """``git mv old new`` (and write ``also``), committed at ``at``."""
    (repo / new).parent.mkdir(parents=True, exist_ok=True)
    git(repo, "mv", old, new)
    commit(repo, f"move {old}", also or {}, at=at)


def test_a_renamed_file_keeps_what_it_learned_under_its_old_path(tmp_path: Path) -> None:
    repo = init(tmp_path / "repo")
    commit(repo, "jwt", {"jwt.py": "def verify(): ...\n", "keys.py": "KEYS = 1\n"}, at=BASE)
    commit(
        repo, "both", {"jwt.py": "def verify(): ...  # 2\n", "keys.py": "K = 2\n"}, at=BASE + DAY
    )
    _rename(repo, "jwt.py", "auth/jwt.py", BASE + 2 * DAY)  # alone: one file, no event
    commit(repo, "login", {"auth/jwt.py": "# 3\n", "login.py": "L = 1\n"}, at=BASE + 3 * DAY)
    path = tmp_path / "store.db"
    with SynapseStore(path) as store:
        report = bootstrap(store, repo)
        assert (report.commits, report.eligible, report.replayed, report.renamed) == (4, 3, 3, 1)
        moved = store.edge("auth/jwt.py", "keys.py", "shared")
        assert moved is not None and moved.activation_count == 2  # both commits before the move
        assert moved.last_reinforced_at == BASE + DAY
        assert store.edge("jwt.py", "keys.py", "shared") is None
        assert [other for other, _, _ in store.neighbours("jwt.py", at=BASE + 3 * DAY)] == []
        login = store.edge("auth/jwt.py", "login.py", "shared")
        assert login is not None and login.activation_count == 1
        before = store.graph(at=BASE + 3 * DAY, namespaces="shared")
    with SynapseStore(path) as store:  # a re-run: nothing to move, nothing to add
        again = bootstrap(store, repo)
        assert (again.replayed, again.already_seen, again.renamed) == (0, 3, 0)
        after = store.graph(at=BASE + 3 * DAY, namespaces="shared")
    assert sorted(before.edges(data=True)) == sorted(after.edges(data=True))


def test_a_rerun_leaves_a_new_file_of_the_old_name_where_it_is(tmp_path: Path) -> None:
    repo = init(tmp_path / "repo")
    commit(repo, "a", {"a.py": "A = 1\n", "b.py": "B = 1\n"}, at=BASE)
    _rename(repo, "a.py", "lib/a.py", BASE + DAY, also={"b.py": "B = 2\n"})  # an event too
    commit(repo, "a again", {"a.py": "NEW = 1\n", "d.py": "D = 1\n"}, at=BASE + 2 * DAY)
    path = tmp_path / "store.db"
    with SynapseStore(path) as store:
        first = bootstrap(store, repo)
        assert (first.replayed, first.renamed) == (3, 1)
    commit(repo, "later", {"a.py": "NEW = 2\n", "d.py": "D = 2\n"}, at=BASE + 3 * DAY)
    with SynapseStore(path) as store:
        second = bootstrap(store, repo)  # the rename is met again: a.py is another file now
        assert (second.replayed, second.already_seen, second.renamed) == (1, 3, 0)
        edge = store.edge("a.py", "d.py", "shared")
        assert edge is not None and edge.activation_count == 2
        moved = store.edge("lib/a.py", "b.py", "shared")
        assert moved is not None and moved.activation_count == 2  # before the move, and with it
        assert store.edge("lib/a.py", "d.py", "shared") is None


def test_a_store_holding_later_history_is_not_moved_by_an_earlier_rename(tmp_path: Path) -> None:
    # a first run from --since (or by a release before renames were followed), then all of
    # it: the rename of a.py, older than what the store holds, moved the later a.py's edges
    repo = init(tmp_path / "repo")
    commit(repo, "a", {"a.py": "A = 1\n", "b.py": "B = 1\n"}, at=BASE)
    _rename(repo, "a.py", "lib/a.py", BASE + DAY)
    commit(repo, "new a", {"a.py": "NEW = 1\n", "d.py": "D = 1\n"}, at=BASE + 2 * DAY)
    with SynapseStore(":memory:") as store:
        first = bootstrap(store, repo, since=BASE + 2 * DAY)
        assert (first.replayed, first.renamed) == (1, 0)
        second = bootstrap(store, repo)
        assert (second.replayed, second.already_seen, second.renamed) == (1, 1, 0)
        edge = store.edge("a.py", "d.py", "shared")
        assert edge is not None and edge.activation_count == 1
        assert store.edge("lib/a.py", "d.py", "shared") is None
        assert store.edge("a.py", "b.py", "shared") is not None  # its old past stays, unmoved


@pytest.mark.parametrize("last", [True, False], ids=["a commit after it", "at the end"])
def test_a_refused_rename_is_refused_again_on_a_rerun(last: bool) -> None:
    # a rename onto a path with a past recorded nothing: a re-run, once that past had moved
    # on, moved the current a.py (a later file) instead
    history = [
        Commit("1", (), 0.0, 0.0, "", ("a.py", "x.py")),
        Commit("2", (), 0.0, 1.0, "", ("t.py", "y.py")),
        Commit("3", (), 0.0, 2.0, "", ("y.py",), ("t.py",)),
        Commit("4", (), 0.0, 3.0, "", ("t.py",), ("a.py",), (("a.py", "t.py"),)),
        Commit("5", (), 0.0, 4.0, "", ("z.py",), ("t.py",), (("t.py", "z.py"),)),
        *([Commit("6", (), 0.0, 5.0, "", ("a.py", "w.py"))] if last else []),
    ]
    with SynapseStore(":memory:") as store:
        assert replay(store, history).renamed == 1
        before = _state(store)
        assert replay(store, history).renamed == 0
        assert _state(store) == before
        assert _stored(store, "a.py", "x.py") == 1  # refused: a.py's past stays with it


def _state(store: SynapseStore) -> list[tuple[str, str, int]]:
    graph = store.graph(at=BASE + 9000 * DAY, namespaces="shared")  # long dead: stored edges
    return sorted((*sorted((a, b)), n) for a, b, n in graph.edges(data="count"))


def _stored(store: SynapseStore, a: str, b: str) -> int:
    edge = store.edge(a, b, "shared")
    return 0 if edge is None else edge.activation_count


def test_a_path_taken_by_a_rename_after_its_file_moved_on_is_left_on_reruns() -> None:
    # c.py moved to d.py, then a.py to c.py: a re-run moved the new c.py's edges to d.py
    history = [
        Commit("1", (), 0.0, BASE, "", ("c.py",)),
        Commit("2", (), 0.0, BASE + DAY, "", ("a.py", "b.py")),
        Commit("3", (), 0.0, BASE + 2 * DAY, "", ("d.py",), ("c.py",), (("c.py", "d.py"),)),
        Commit("4", (), 0.0, BASE + 3 * DAY, "", ("c.py",), ("a.py",), (("a.py", "c.py"),)),
    ]
    with SynapseStore(":memory:") as store:
        runs = [replay(store, history).renamed for _ in range(3)]
        assert runs == [1, 0, 0]
        assert (_stored(store, "c.py", "b.py"), _stored(store, "d.py", "b.py")) == (1, 0)


def test_a_rename_moves_edges_dead_by_then_and_the_uses_as_watch_would() -> None:
    # a file whose edges had decayed kept its past (and its uses) on the old path
    history = [
        Commit("1", (), 0.0, BASE, "", ("a.py", "b.py")),
        Commit("2", (), 0.0, BASE + DAY, "", ("a.py", "b.py")),
        Commit(
            "3", (), 0.0, BASE + 600 * DAY, "", ("c.py", "x.py"), ("a.py",), (("a.py", "c.py"),)
        ),
    ]
    with SynapseStore(":memory:") as store, SynapseStore(":memory:") as manual:
        assert replay(store, history).renamed == 1
        for c in history:
            for old, new in c.renamed:
                manual.rename(old, new, "shared")
            manual.reinforce(c.files, namespace="shared", at=c.commit_time)
        assert _state(store) == _state(manual)
        assert (_stored(store, "c.py", "b.py"), _stored(store, "a.py", "b.py")) == (2, 0)


def test_a_name_learned_live_after_an_old_rename_keeps_its_live_edges() -> None:
    # the store learned a.py live (watch) before the history was bootstrapped: the 2024
    # rename of another a.py moved today's edges to b.py
    history = [
        Commit("1", (), 0.0, BASE, "", ("a.py", "x.py")),
        Commit("2", (), 0.0, BASE + DAY, "", ("b.py", "z.py"), ("a.py",), (("a.py", "b.py"),)),
    ]
    with SynapseStore(":memory:") as store:
        store.reinforce(["a.py", "live.py"], namespace="shared")  # now
        assert replay(store, history).renamed == 0
        assert _stored(store, "a.py", "live.py") == 1 and _stored(store, "b.py", "live.py") == 0
        assert _stored(store, "a.py", "x.py") == 1  # the old file's past stays with the name


def test_a_branch_rename_merged_after_a_run_is_followed_by_the_next_run() -> None:
    # a rename older (by date) than the newest commit the store held was passed over
    main = [
        Commit("1", (), 0.0, BASE, "", ("a.py", "x.py")),
        Commit("2", (), 0.0, BASE + DAY, "", ("a.py", "x.py")),
        Commit("5", (), 0.0, BASE + 4 * DAY, "", ("p.py", "q.py")),
    ]
    branch = [
        Commit("3", (), 0.0, BASE + 2 * DAY, "", ("b.py",), ("a.py",), (("a.py", "b.py"),)),
        Commit("4", (), 0.0, BASE + 3 * DAY, "", ("b.py", "x.py")),
    ]
    merged = sorted(main + branch, key=lambda c: c.commit_time)
    with SynapseStore(":memory:") as store, SynapseStore(":memory:") as fresh:
        replay(store, main)
        assert replay(store, merged).renamed == 1
        replay(fresh, merged)
        assert _state(store) == _state(fresh)


def test_a_rename_onto_a_path_with_a_past_moves_nothing() -> None:
    commits = [
        Commit("1", (), 0.0, 0.0, "", ("old.py", "x.py")),
        Commit("2", (), 0.0, 1.0, "", ("taken.py", "y.py")),
        Commit("3", (), 0.0, 2.0, "", ("taken.py",), ("old.py",), (("old.py", "taken.py"),)),
    ]
    with SynapseStore(":memory:") as store:
        report = replay(store, commits)
        assert report.renamed == 0  # a rename does not merge two files' pasts
        assert store.edge("old.py", "x.py", "shared") is not None
        assert store.edge("taken.py", "x.py", "shared") is None


_FILES = ["a.py", "b.py", "c.py", "d.py", "e.py"]


@st.composite
def _histories(draw: st.DrawFn) -> list[Commit]:
    """Commits of 0 to 4 files, some renaming a file that exists to a free path, a minute
    apart: the paths as a working tree would have them at each commit."""
    tree = set(_FILES[:3])
    commits: list[Commit] = []
    for n in range(draw(st.integers(1, 40))):
        renamed: list[tuple[str, str]] = []
        free = sorted(set(_FILES) - tree)
        if free and draw(st.booleans()):
            old, new = draw(st.sampled_from(sorted(tree))), draw(st.sampled_from(free))
            tree = (tree - {old}) | {new}
            renamed.append((old, new))
        touched = draw(st.lists(st.sampled_from(sorted(tree)), max_size=4, unique=True))
        files = tuple(dict.fromkeys([*(new for _, new in renamed), *touched]))
        deleted = tuple(old for old, _ in renamed)
        commits.append(Commit(f"{n:04x}", (), 0.0, 60.0 * n, "", files, deleted, tuple(renamed)))
    return commits


@settings(max_examples=60, deadline=None)
@given(_histories(), st.sampled_from([1, 2, 7]), st.data())
def test_a_replay_with_renames_equals_each_commit_written_then_moved_in_turn(
    commits: list[Commit], batch: int, data: st.DataObject
) -> None:
    """Batches are cut where a rename meets a file they hold: the same store as one commit
    at a time, each rename moved just before its commit, as watch would have done; and the
    same again when a first run read only part of the history, or a second run all of it
    (files renamed back and forth move once)."""
    saved = bootstrap_module.BATCH
    bootstrap_module.BATCH = batch
    try:
        with SynapseStore(":memory:") as store, SynapseStore(":memory:") as manual:
            replay(store, commits[: data.draw(st.integers(0, len(commits)), label="first run")])
            replay(store, commits)
            assert replay(store, commits).renamed == 0
            for c in commits:
                for old, new in c.renamed:
                    manual.rename(old, new, "shared")  # the new path is free: never refused
                if len(c.files) >= 2:
                    manual.reinforce(c.files, namespace="shared", at=c.commit_time)
            for a in _FILES:
                for b in _FILES:
                    assert store.edge(a, b, "shared") == manual.edge(a, b, "shared"), (a, b)
    finally:
        bootstrap_module.BATCH = saved


def test_bootstrap_learns_a_submodule_s_files_as_watch_does_not_its_gitlink(
    tmp_path: Path,
) -> None:
    library = init(tmp_path / "library")
    commit(library, "library", {"s.py": "lib\n"}, at=BASE)
    repo = init(tmp_path / "repo")
    commit(repo, "start", {"a.py": "a\n", "b.py": "b\n"}, at=BASE)
    git(repo, "-c", "protocol.file.allow=always", "submodule", "add", "-q", str(library), "sm")
    commit(repo, "add the submodule", {"a.py": "a 2\n", "b.py": "b 2\n"}, at=BASE + DAY)
    commit(repo / "sm", "library moves on", {"s.py": "lib 2\n"}, at=BASE + DAY)
    commit(repo, "bump the submodule", {"b.py": "b 3\n"}, at=BASE + 2 * DAY)
    with SynapseStore(":memory:") as store:
        report = bootstrap(store, repo)
        nodes = {end for e in export_edges(store, at=BASE + 2 * DAY) for end in (e.a, e.b)}
    assert (report.commits, report.eligible) == (3, 2)  # the bump alone touches one file
    assert nodes == {".gitmodules", "a.py", "b.py"}  # never "sm"
