"""gitlog: commits, touched files, dates and trees read from real (generated) repositories."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from git_history import BASE, DAY, commit, git, init

from synapse_retriever.capture.gitlog import (
    BlobReader,
    Commit,
    GitError,
    check_repository,
    eligible,
    git_environment,
    parse_since,
    read_commits,
    tree_files,
)
from synapse_retriever.errors import InvalidValueError


@pytest.fixture(scope="module")
def repo(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Adds, a rename, a deletion, odd file names, trailers, a merge, a backdated author."""
    repo = init(tmp_path_factory.mktemp("gitlog") / "repo")
    commit(repo, "first\n\nbody line", {"a.py": "alpha\n", "b.py": "beta\n"}, at=BASE)
    git(repo, "mv", "a.py", "renamed.py")
    commit(
        repo,
        "rename and touch\n\nSigned-off-by: Someone <s@example.com>",
        {"b.py": "beta 2\n", "dir with space/é.txt": "accent\n"},
        at=BASE + DAY,
    )
    commit(repo, "delete b", {"b.py": None, "c.py": "gamma\n"}, at=BASE + 2 * DAY)
    # a rebased commit: written long ago (author date), committed now
    commit(
        repo,
        "old work",
        {"c.py": "gamma 2\n", "d.py": "delta\n"},
        at=BASE + 3 * DAY,
        author_at=BASE - 100 * DAY,
    )
    git(repo, "checkout", "-q", "-b", "side", "HEAD~1")
    commit(repo, "side work", {"e.py": "eps\n", "f.py": "phi\n"}, at=BASE + 4 * DAY)
    git(repo, "checkout", "-q", "main")
    git(repo, "merge", "-q", "--no-ff", "-m", "merge side", "side", at=BASE + 5 * DAY)
    return repo


def test_read_commits_skips_merges_and_sorts_by_committer_date(repo: Path) -> None:
    commits = read_commits(repo)
    assert [c.message.splitlines()[0] for c in commits] == [
        "first",
        "rename and touch",
        "delete b",
        "old work",  # author date 100 days earlier, committer date day 3: placed by the latter
        "side work",
    ]
    assert [c.commit_time for c in commits] == [BASE + d * DAY for d in range(5)]
    assert commits[3].author_time == BASE - 100 * DAY
    assert all(len(c.parents) == 1 for c in commits[1:]) and commits[0].parents == ()


def test_files_are_the_post_image_renames_under_the_new_path(repo: Path) -> None:
    first, renamed, deleted, *_ = read_commits(repo)
    assert sorted(first.files) == ["a.py", "b.py"]
    assert sorted(renamed.files) == ["b.py", "dir with space/é.txt", "renamed.py"]
    assert renamed.deleted == ("a.py",)
    assert renamed.renamed == (("a.py", "renamed.py"),)
    assert first.renamed == deleted.renamed == ()
    assert deleted.files == ("c.py",) and deleted.deleted == ("b.py",)


def test_messages_keep_the_body_and_drop_trailers(repo: Path) -> None:
    first, renamed, *_ = read_commits(repo)
    assert first.message == "first\n\nbody line"
    assert renamed.message == "rename and touch"
    assert first.event_id() == f"git:{first.sha}"
    assert first.event_id("personal") == f"git:{first.sha}@personal"


def test_since_filters_by_committer_date(repo: Path) -> None:
    since = read_commits(repo, since=BASE + 2 * DAY)
    assert [c.message for c in since] == ["delete b", "old work", "side work"]


def test_rev_limits_the_history(repo: Path) -> None:
    assert [c.message for c in read_commits(repo, rev="main~1")] == [
        "first\n\nbody line",
        "rename and touch",
        "delete b",
        "old work",
    ]


def test_bare_clone_reads_the_same(repo: Path, tmp_path: Path) -> None:
    bare = tmp_path / "bare.git"
    git(tmp_path, "clone", "-q", "--bare", str(repo), str(bare))
    assert read_commits(bare) == read_commits(repo)


@pytest.mark.parametrize("depth", [1, 2, 3])
def test_a_shallow_clone_leaves_out_its_boundary_commits(
    repo: Path, tmp_path: Path, depth: int
) -> None:
    # git shows a commit whose parents are missing as adding its whole tree: a fake event
    # of every file (at depth 2 the boundary is the merge, no longer one once grafted)
    shallow = tmp_path / "shallow"
    git(tmp_path, "clone", "-q", f"--depth={depth}", f"file://{repo}", str(shallow))
    full = {c.sha: c for c in read_commits(repo)}
    read = read_commits(shallow)
    assert all(full[c.sha] == c for c in read)  # each as the full history has it
    boundary = set((shallow / ".git" / "shallow").read_text().split())
    assert boundary and not boundary & {c.sha for c in read}


def test_git_reads_the_repository_asked_for_whatever_the_environment_points_at(
    repo: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # inside a git hook GIT_DIR names the hook's repository: it read that one instead
    other = init(tmp_path / "other")
    commit(other, "only", {"x.py": "x\n", "y.py": "y\n"}, at=BASE)
    monkeypatch.setenv("GIT_DIR", str(repo / ".git"))
    monkeypatch.setenv("GIT_WORK_TREE", str(repo))
    monkeypatch.setenv("GIT_INDEX_FILE", str(repo / ".git" / "index"))
    assert [c.files for c in read_commits(other)] == [("x.py", "y.py")]
    assert "GIT_DIR" not in git_environment()


def test_a_path_that_cannot_be_a_node_id_is_left_out_of_a_commits_files(tmp_path: Path) -> None:
    # one path over 2,048 bytes failed a whole bootstrap batch
    repo = init(tmp_path / "long")
    deep = "/".join(["d" * 200] * 11) + "/long.py"
    commit(repo, "long", {deep: "x\n", "a.py": "a\n", "b.py": "b\n"}, at=BASE)
    (only,) = read_commits(repo)
    assert only.files == ("a.py", "b.py")


def test_tree_files_and_blob_contents(repo: Path) -> None:
    tree = tree_files(repo, "HEAD")
    assert sorted(tree) == ["c.py", "d.py", "dir with space/é.txt", "e.py", "f.py", "renamed.py"]
    assert tree["renamed.py"].size == len(b"alpha\n")
    with BlobReader(repo) as blobs:
        assert blobs.read(tree["dir with space/é.txt"].blob) == b"accent\n"
        assert blobs.read(tree["renamed.py"].blob) == b"alpha\n"
        with pytest.raises(GitError, match="missing"):
            blobs.read("0" * 40)


def test_eligible_counts_2_to_32_files() -> None:
    def touching(n: int) -> Commit:
        return Commit("x", (), 0.0, 0.0, "", tuple(f"f{i}" for i in range(n)))

    assert [eligible(touching(n)) for n in (0, 1, 2, 32, 33)] == [False, False, True, True, False]


def test_check_repository_names_the_problem(repo: Path, tmp_path: Path) -> None:
    assert len(check_repository(repo)) == 40
    with pytest.raises(GitError, match="no such directory"):
        check_repository(tmp_path / "missing")
    (tmp_path / "file").write_text("x")
    with pytest.raises(GitError, match="is a file"):
        check_repository(tmp_path / "file")
    plain = tmp_path / "plain"
    plain.mkdir()
    with pytest.raises(GitError, match="not a git repository"):
        read_commits(plain)
    with pytest.raises(GitError, match="no commit 'nope'"):
        read_commits(repo, rev="nope")
    empty = init(tmp_path / "empty")
    with pytest.raises(GitError, match="no commit 'HEAD'"):
        read_commits(empty)


def test_parse_since() -> None:
    assert parse_since("2023-11-14") == 1_699_920_000.0
    assert parse_since("2023-11-14T22:13:20Z") == BASE
    assert parse_since("2023-11-14T23:13:20+01:00") == BASE
    with pytest.raises(InvalidValueError, match="ISO 8601"):
        parse_since("yesterday")


def test_a_submodule_is_no_file_of_the_history(tmp_path: Path) -> None:
    """A gitlink (mode 160000) is another repository's commit: ``watch`` sees its files
    (``sm/s.py``), so the history must not name it as one file ``sm``."""
    library = init(tmp_path / "library")
    pinned = commit(library, "library", {"s.py": "lib\n"}, at=BASE)
    repo = init(tmp_path / "repo")
    commit(repo, "start", {"a.py": "a\n", "b.py": "b\n"}, at=BASE)
    git(repo, "-c", "protocol.file.allow=always", "submodule", "add", "-q", str(library), "sm")
    commit(repo, "add the submodule", {"a.py": "a 2\n"}, at=BASE + DAY)
    commit(repo / "sm", "library moves on", {"s.py": "lib 2\n"}, at=BASE + DAY)
    commit(repo, "bump the submodule", {"b.py": "b 2\n"}, at=BASE + 2 * DAY)
    git(repo, "rm", "-q", "--cached", "sm")  # a gitlink replaced by a file: a file of ours
    shutil.rmtree(repo / "sm")
    commit(repo, "sm is a file now", {"sm": "a file\n", "a.py": "a 3\n"}, at=BASE + 3 * DAY)
    git(repo, "rm", "-q", "--cached", "sm")  # the file replaced by a gitlink: the file is gone
    git(repo, "update-index", "--add", "--cacheinfo", f"160000,{pinned},sm")
    (repo / "b.py").write_text("b 3\n")
    git(repo, "add", "b.py")
    git(repo, "commit", "-qm", "sm is a submodule again", at=BASE + 4 * DAY)
    git(repo, "rm", "-q", "--cached", "sm")  # the gitlink removed: no file deleted
    (repo / "a.py").write_text("a 4\n")
    git(repo, "add", "a.py")
    git(repo, "commit", "-qm", "no submodule", at=BASE + 5 * DAY)
    kinds = git(repo, "log", "--format=", "--raw", "--no-abbrev").split()
    assert "160000" in kinds and {"A", "M", "T", "D"} <= set(kinds)  # each way a gitlink shows
    _, added, bumped, to_file, to_link, removed = read_commits(repo)
    assert sorted(added.files) == [".gitmodules", "a.py"] and added.deleted == ()
    assert bumped.files == ("b.py",) and bumped.deleted == ()
    assert sorted(to_file.files) == ["a.py", "sm"] and to_file.deleted == ()
    assert to_link.files == ("b.py",) and to_link.deleted == ("sm",)
    assert removed.files == ("a.py",) and removed.deleted == ()
