"""Warm start from git: replay order, resumability, and commits whose dates run backwards."""

from __future__ import annotations

from pathlib import Path

import pytest
from git_history import BASE, DAY, FEATURES, commit, git, init, make_project

from synapse_retriever import SynapseStore
from synapse_retriever.capture.bootstrap import BATCH, bootstrap, replay
from synapse_retriever.capture.gitlog import Commit, read_commits
from synapse_retriever.errors import InvalidValueError


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
