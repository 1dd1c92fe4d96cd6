"""Reading a git history: commits with the files they touched, trees and file contents.

Everything goes through the ``git`` command line (``git log``, ``git ls-tree``,
``git cat-file --batch``), so a bare repository works as well as a checkout and
nothing here needs a git library.

Time
----
A commit has two dates. The *author* date is when the change was first written; it
survives rebases and cherry-picks, so along a history it often runs backwards. The
*committer* date is when the commit was created in this history. The warm start and
the benchmark use the committer date as the event's time and replay commits sorted
by it (ties keep git's topological order): that is the order in which the
co-activations became visible, and it is monotonic by construction.

Paths and messages are read as UTF-8. A path that is not (a file name from another
encoding) cannot be a node id, so it is left out of its commit's files, renames and tree,
as one over 2,048 bytes is; a message keeps such bytes as ``\\xNN`` escapes.

Examples
--------
>>> parse_since("2024-03-01")
1709251200.0
>>> eligible(Commit("c0ffee", (), 0.0, 0.0, "msg", ("a.py", "b.py")))
True
"""

from __future__ import annotations

import os
import re
import subprocess
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from types import TracebackType
from typing import IO

from synapse_retriever.capture.coactivation import is_node_id, namespaced_id
from synapse_retriever.errors import InvalidValueError, SynapseError, shown

__all__ = [
    "MAX_FILES",
    "MIN_FILES",
    "BlobReader",
    "Commit",
    "GitError",
    "TreeEntry",
    "check_repository",
    "eligible",
    "git_environment",
    "parse_since",
    "read_commits",
    "touched_pairs",
    "tree_files",
]

MIN_FILES = 2
"""A commit must touch at least this many files to be a co-activation event."""

MAX_FILES = 32
"""A commit touching more files (a reformat, a vendoring, a mass rename) is no event."""

_GITLINK = "160000"
"""The mode git gives a submodule (a gitlink: a commit of another repository, no file)."""

_RECORD = "\x1e"
_FIELD = "\x1f"
_FORMAT = f"{_RECORD}%H{_FIELD}%P{_FIELD}%at{_FIELD}%ct{_FIELD}%B{_FIELD}"
_TRAILER = re.compile(r"^(co-authored-by|signed-off-by|reviewed-by|acked-by):", re.IGNORECASE)


class GitError(SynapseError, ValueError):
    """Git could not be run, or the path is not a git repository, or a revision is unknown."""


@dataclass(frozen=True)
class Commit:
    """One non-merge commit as the warm start and the benchmark see it.

    Attributes
    ----------
    sha : str
        Full commit id.
    parents : tuple of str
        Parent ids (one for an ordinary commit, none for a root commit).
    author_time, commit_time : float
        POSIX seconds of the author and committer dates.
    message : str
        The full message, trailers such as ``Signed-off-by:`` removed.
    files : tuple of str
        Paths that exist after the commit and that it touched: added, modified,
        type-changed, and the new side of renames and copies. Deleted paths are left
        out (there is nothing left to recall), and so are submodules (mode 160000) and
        paths that cannot be node ids
        (:func:`~synapse_retriever.capture.coactivation.is_node_id`); the order is git's.
    deleted : tuple of str
        Paths the commit deleted (or renamed away from).
    renamed : tuple of (str, str)
        ``(old, new)`` for each file the commit renamed, both paths node ids, in git's
        order (a copy is no rename: its source stays).
    """

    sha: str
    parents: tuple[str, ...]
    author_time: float
    commit_time: float
    message: str
    files: tuple[str, ...]
    deleted: tuple[str, ...] = ()
    renamed: tuple[tuple[str, str], ...] = ()

    def event_id(self, namespace: str = "shared", tail: str = "") -> str:
        """The id under which this commit is reinforced in ``namespace``: ``git:<sha>``
        in ``shared``, else ``git:<sha>@<namespace>`` (:func:`namespaced_id`: a namespace
        near the 2,048-byte cap by its hash), so each namespace replays a history once;
        ``tail`` follows (a rename's ``#<index>``). Before ids named their namespace, every
        namespace got ``git:<sha>``: a store bootstrapped then outside ``shared`` replays
        the history there again.

        Examples
        --------
        >>> commit = Commit("c0ffee", (), 0.0, 0.0, "msg", ("a.py", "b.py"))
        >>> commit.event_id(), commit.event_id("branch:main"), commit.event_id("shared", "#0")
        ('git:c0ffee', 'git:c0ffee@branch:main', 'git:c0ffee#0')
        """
        if namespace == "shared":
            return f"git:{self.sha}{tail}"
        return namespaced_id(f"git:{self.sha}@", namespace, tail)


@dataclass(frozen=True)
class TreeEntry:
    """A file in a tree: its blob id and size in bytes."""

    blob: str
    size: int


def eligible(commit: Commit, *, min_files: int = MIN_FILES, max_files: int = MAX_FILES) -> bool:
    """Whether ``commit`` is one co-activation event: it touches ``min_files..max_files`` files.

    Examples
    --------
    >>> eligible(Commit("1", (), 0.0, 0.0, "", ("a",)))  # a single file has no pair
    False
    >>> eligible(Commit("1", (), 0.0, 0.0, "", tuple(f"f{i}" for i in range(33))))
    False
    """
    return min_files <= len(commit.files) <= max_files


def parse_since(text: str) -> float:
    """POSIX seconds of an ISO 8601 date or date-time; a date or naive time is read as UTC.

    Raises
    ------
    InvalidValueError
        ``text`` is not ISO 8601.

    Examples
    --------
    >>> parse_since("1970-01-02T00:00:00+01:00")
    82800.0
    >>> parse_since("last tuesday")
    Traceback (most recent call last):
    ...
    synapse_retriever.errors.InvalidValueError: expected an ISO 8601 date such as 2024-03-01 \
or 2024-03-01T12:00:00+02:00, got 'last tuesday'
    """
    try:
        moment = datetime.fromisoformat(text.strip())
    except ValueError:
        raise InvalidValueError(
            "expected an ISO 8601 date such as 2024-03-01 or 2024-03-01T12:00:00+02:00, "
            f"got {shown(text)}"
        ) from None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    return moment.timestamp()


def _git(repo: str | os.PathLike[str], *args: str) -> bytes:
    command = ["git", "-C", os.fspath(repo), "-c", "core.quotepath=off", *args]
    try:
        result = subprocess.run(command, capture_output=True, check=False, env=git_environment())
    except FileNotFoundError:
        raise GitError("git is not installed (no 'git' on PATH)") from None
    if result.returncode != 0:
        message = result.stderr.decode("utf-8", "replace").strip().splitlines()
        detail = message[-1] if message else f"exit code {result.returncode}"
        raise GitError(f"git {args[0]} failed in {os.fspath(repo)!r}: {detail}")
    return result.stdout


REPOSITORY_VARIABLES = frozenset(
    {
        "GIT_ALTERNATE_OBJECT_DIRECTORIES", "GIT_CONFIG", "GIT_CONFIG_PARAMETERS",
        "GIT_CONFIG_COUNT", "GIT_OBJECT_DIRECTORY", "GIT_DIR", "GIT_WORK_TREE",
        "GIT_IMPLICIT_WORK_TREE", "GIT_GRAFT_FILE", "GIT_INDEX_FILE", "GIT_NO_REPLACE_OBJECTS",
        "GIT_REPLACE_REF_BASE", "GIT_PREFIX", "GIT_INTERNAL_SUPER_PREFIX", "GIT_SHALLOW_FILE",
        "GIT_COMMON_DIR",
    }
)  # fmt: skip
"""What ``git rev-parse --local-env-vars`` lists: variables that point git at another
repository than the one it is run in (a git hook sets ``GIT_DIR``)."""


def git_environment() -> dict[str, str]:
    """The environment every git command of the library runs in: C locale, no prompt, no
    pager, and none of :data:`REPOSITORY_VARIABLES`, so ``git -C repo`` reads ``repo``.

    Examples
    --------
    >>> "GIT_DIR" in git_environment(), git_environment()["LC_ALL"]
    (False, 'C')
    """
    env = {k: v for k, v in os.environ.items() if k not in REPOSITORY_VARIABLES}
    env.update({"LC_ALL": "C", "GIT_TERMINAL_PROMPT": "0", "GIT_PAGER": "cat"})
    return env


def check_repository(repo: str | os.PathLike[str], rev: str = "HEAD") -> str:
    """Return the commit id ``rev`` names in ``repo`` (a bare repository or a checkout).

    Raises
    ------
    GitError
        ``repo`` is missing, not a git repository (or a folder inside one), or has no
        commit ``rev``.
    """
    path = Path(repo)
    if not path.exists():
        raise GitError(f"no such directory: {os.fspath(repo)!r}")
    if not path.is_dir():
        raise GitError(f"{os.fspath(repo)!r} is a file, not a git repository")
    try:
        inside = _git(repo, "rev-parse", "--show-prefix").decode("utf-8", "backslashreplace")
        inside = inside.strip()
    except GitError:
        raise GitError(f"{os.fspath(repo)!r} is not a git repository") from None
    if inside:  # the history is the whole repository's: do not pretend it is the folder's
        raise GitError(
            f"{os.fspath(repo)!r} is the folder {inside!r} of a git repository: give its top"
        )
    try:
        out = _git(repo, "rev-parse", "--verify", "--quiet", f"{rev}^{{commit}}")
    except GitError:
        raise GitError(f"{os.fspath(repo)!r} has no commit {rev!r}") from None
    return out.decode().strip()


def git_folders(repo: str | os.PathLike[str]) -> list[str]:
    """The folders git keeps ``repo``'s history in (its git folder, and a worktree's shared
    one), absolute; none where ``repo`` is not a repository. A command that reads the history
    writes nothing there.

    Examples
    --------
    >>> git_folders("/no-such-repository")
    []
    """
    try:
        found = _git(repo, "rev-parse", "--path-format=absolute", "--git-dir", "--git-common-dir")
    except GitError:
        return []
    return list(dict.fromkeys(os.fsdecode(line) for line in found.splitlines() if line))


def read_commits(
    repo: str | os.PathLike[str], *, rev: str = "HEAD", since: float | None = None
) -> list[Commit]:
    """Every non-merge commit reachable from ``rev``, in replay order (oldest first).

    Parameters
    ----------
    repo : path
        A git repository, bare or not.
    rev : str
        Where the history starts (its ancestors are read).
    since : float, optional
        Keep only commits whose committer date is at or after this (POSIX seconds).

    Returns
    -------
    list of Commit
        Sorted by committer date; commits with the same date keep git's topological
        order (parents first).

    Notes
    -----
    Renames are detected (``-M``), so a renamed file counts once, under its new path. In
    a shallow clone the commits at its boundary are left out: their parents are not there,
    so git shows each as adding every file of its tree. A path that cannot be a node id
    (over 2,048 bytes, or not UTF-8) is left out of ``files``, and so is a submodule (a
    gitlink, mode 160000): it is another repository's history, whose files ``watch``
    sees under their own paths (``sm/s.py``), not a file of this one.
    """
    check_repository(repo, rev)
    raw = _git(
        repo,
        "log",
        "--no-merges",
        "--topo-order",
        "--reverse",
        "-M",
        "--raw",
        "-z",
        "--no-color",
        "--no-show-signature",
        f"--format={_FORMAT}",
        rev,
        "--",
    )
    grafted = _shallow_boundary(repo)
    commits = [
        c for c in _parse_log(raw.decode("utf-8", "surrogateescape")) if c.sha not in grafted
    ]
    if since is not None:
        commits = [c for c in commits if c.commit_time >= since]
    order = {c.sha: i for i, c in enumerate(commits)}
    return sorted(commits, key=lambda c: (c.commit_time, order[c.sha]))


def _shallow_boundary(repo: str | os.PathLike[str]) -> frozenset[str]:
    """The commits a shallow clone holds without their parents (none in a full clone)."""
    where = _git(repo, "rev-parse", "--git-path", "shallow").decode().strip()
    shallow = Path(repo) / where  # relative to repo, or absolute (which / keeps)
    try:
        return frozenset(shallow.read_text(encoding="ascii").split())
    except FileNotFoundError:
        return frozenset()


def _parse_log(text: str) -> Iterator[Commit]:
    tokens = text.split("\0")
    i = 0
    while i < len(tokens):
        header = tokens[i].lstrip("\n")
        i += 1
        if not header:
            continue
        if not header.startswith(_RECORD):
            raise GitError(f"unexpected git log output near {header[:60]!r}")
        sha, parents, author, committer, rest = header[1:].split(_FIELD, 4)
        message = rest[:-1] if rest.endswith(_FIELD) else rest
        files: list[str] = []
        deleted: list[str] = []
        renamed: list[tuple[str, str]] = []
        while i < len(tokens):
            raw = tokens[i].lstrip("\n")  # ":OLD_MODE NEW_MODE OLD_BLOB NEW_BLOB STATUS"
            if not raw or raw.startswith(_RECORD):
                break
            old_mode, new_mode, _, _, status = raw[1:].split(maxsplit=4)
            was_file, is_file = old_mode != _GITLINK, new_mode != _GITLINK
            kind = status[0]
            if kind in "RC":
                old, new = tokens[i + 1], tokens[i + 2]
                i += 3
                if kind == "R" and was_file:
                    deleted.append(old)
                    if is_file:
                        renamed.append((old, new))
                if is_file:
                    files.append(new)
            else:
                path = tokens[i + 1]
                i += 2
                if kind == "D":
                    if was_file:
                        deleted.append(path)
                elif is_file:
                    files.append(path)
                elif was_file and kind == "T":  # a file replaced by a submodule: it is gone
                    deleted.append(path)
        yield Commit(
            sha=sha,
            parents=tuple(parents.split()),
            author_time=float(author),
            commit_time=float(committer),
            message=_clean_message(_escaped(message)),
            files=tuple(dict.fromkeys(path for path in files if is_node_id(path))),
            deleted=tuple(dict.fromkeys(path for path in deleted if is_node_id(path))),
            renamed=tuple((a, b) for a, b in renamed if is_node_id(a) and is_node_id(b)),
        )


def _escaped(text: str) -> str:
    """``text`` read with ``surrogateescape``, its bytes that are not UTF-8 as ``\\xNN``."""
    return (
        text
        if text.isascii()
        else text.encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace")
    )


def _clean_message(message: str) -> str:
    lines = [line for line in message.strip().splitlines() if not _TRAILER.match(line.strip())]
    return "\n".join(lines).strip()


def tree_files(repo: str | os.PathLike[str], commit: str) -> dict[str, TreeEntry]:
    """The regular files (blobs) of ``commit``'s tree: ``path -> TreeEntry``.

    Submodules are left out, and paths that cannot be node ids; symbolic links are blobs
    and stay in.
    """
    raw = _git(repo, "ls-tree", "-r", "-l", "-z", "--full-tree", commit)
    files: dict[str, TreeEntry] = {}
    for record in raw.decode("utf-8", "surrogateescape").split("\0"):
        if not record:
            continue
        meta, path = record.split("\t", 1)
        _, kind, blob, size = meta.split()
        if kind == "blob" and is_node_id(path):
            files[path] = TreeEntry(blob, int(size) if size.isdigit() else 0)
    return files


class BlobReader:
    """Reads blobs by id through one long-running ``git cat-file --batch`` process.

    Use it as a context manager, or call :meth:`close`.
    """

    def __init__(self, repo: str | os.PathLike[str]) -> None:
        self.repo = os.fspath(repo)
        try:
            self._process: subprocess.Popen[bytes] = subprocess.Popen(
                ["git", "-C", self.repo, "cat-file", "--batch"],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=subprocess.DEVNULL,
                env=git_environment(),
            )
        except FileNotFoundError:
            raise GitError("git is not installed (no 'git' on PATH)") from None

    def read(self, blob: str) -> bytes:
        """The content of ``blob``.

        Raises
        ------
        GitError
            The object is missing (e.g. a file left out of a partial snapshot).
        """
        stdin, stdout = self._pipes()
        stdin.write(blob.encode() + b"\n")
        stdin.flush()
        header = stdout.readline().decode().split()
        if len(header) < 2 or header[1] == "missing" or len(header) != 3:
            raise GitError(f"git object {blob} is missing in {self.repo!r}")
        size = int(header[2])
        data = stdout.read(size)
        stdout.read(1)  # the newline after the content
        return data

    def _pipes(self) -> tuple[IO[bytes], IO[bytes]]:
        stdin, stdout = self._process.stdin, self._process.stdout
        if stdin is None or stdout is None or self._process.poll() is not None:
            raise GitError(f"git cat-file stopped in {self.repo!r}")
        return stdin, stdout

    def close(self) -> None:
        """Stop the git process."""
        if self._process.stdin is not None:
            self._process.stdin.close()
        self._process.wait()
        if self._process.stdout is not None:
            self._process.stdout.close()

    def __enter__(self) -> BlobReader:
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        value: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.close()


def touched_pairs(files: Sequence[str]) -> Iterable[tuple[str, str]]:
    """Every unordered pair of ``files``, each once, in ``(smaller, larger)`` order.

    Examples
    --------
    >>> list(touched_pairs(["b", "a", "c"]))
    [('a', 'b'), ('b', 'c'), ('a', 'c')]
    """
    for i, x in enumerate(files):
        for y in files[i + 1 :]:
            yield (x, y) if x < y else (y, x)
