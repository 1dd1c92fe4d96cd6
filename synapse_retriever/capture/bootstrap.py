"""Warm start: replay a git history into a store, so the graph does not start cold.

Each non-merge commit that touches 2 to 32 files is one co-activation event of its
files, reinforced at the commit's time, so decay and learned half-lives come out as
if the graph had watched the history happen. The commits are written in batches of
:data:`BATCH` events, one transaction each
(:meth:`~synapse_retriever.store.SynapseStore.reinforce_many`). A file a commit renamed
takes what it learned under its old path with it
(:meth:`~synapse_retriever.store.SynapseStore.rename`), after the commits before and before
the commit itself, as ``synapse-retriever watch`` moves a file renamed while it watches.

Examples
--------
>>> from synapse_retriever import SynapseStore
>>> from synapse_retriever.capture.gitlog import Commit
>>> history = [Commit("a1", (), 0.0, 0.0, "add jwt", ("auth/jwt.py", "config/keys.py"))]
>>> with SynapseStore(":memory:") as store:
...     first = replay(store, history)
...     again = replay(store, history)  # resumable: a re-run adds nothing
>>> (first.replayed, first.edges_written, again.replayed, again.already_seen)
(1, 1, 0, 1)
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from synapse_retriever.capture.coactivation import CoActivation
from synapse_retriever.capture.gitlog import (
    MAX_FILES,
    MIN_FILES,
    Commit,
    eligible,
    read_commits,
)
from synapse_retriever.config import validate_namespace
from synapse_retriever.store import SynapseStore
from synapse_retriever.store.rename import MergeRefusedError

__all__ = ["BATCH", "BootstrapReport", "bootstrap", "replay"]

BATCH = 1_000
"""Commits written per transaction."""

Progress = Callable[[int, int], None]
"""``progress(done, total)``, called for each eligible commit once its batch is written."""


@dataclass(frozen=True)
class BootstrapReport:
    """What a warm start did.

    Attributes
    ----------
    commits : int
        Non-merge commits read (after ``since``).
    eligible : int
        Of those, the ones that touch ``min_files..max_files`` files.
    replayed : int
        Eligible commits reinforced by this run.
    already_seen : int
        Eligible commits skipped because their event id was recorded by an earlier run.
    clamped : int
        Replayed commits whose date was earlier than the last reinforcement of one of
        their edges (a branch merged after later commits were replayed, or a store that
        already learned from live use), so they were replayed at that time instead, as
        if observed then (``late="clamp"`` of
        :meth:`~synapse_retriever.store.SynapseStore.reinforce_many`).
    edges_written : int
        Edge upserts (one per pair of files per replayed commit).
    ahead : int
        Eligible commits dated more than ``config.operations.max_clock_skew_s`` ahead of the clock
        (a committer's clock set wrong), skipped: stored, such a time would never decay.
    renamed : int
        Files renamed in the history whose edges (and uses) this run moved to the new path.
        A rename met by a run before (its id is recorded) moves nothing; nor does one whose
        old path has an edge reinforced after it (a later file of that name, learned live
        or from the later history first), or whose new path has associations there.
    first_time, last_time : float or None
        Committer dates of the first and last eligible commit, POSIX seconds.

    Examples
    --------
    >>> from synapse_retriever import SynapseStore
    >>> with SynapseStore(":memory:") as store:
    ...     replay(store, [Commit("a1", (), 0.0, 5.0, "", ("a.py", "b.py"))])
    BootstrapReport(commits=1, eligible=1, replayed=1, already_seen=0, clamped=0, \
edges_written=1, first_time=5.0, last_time=5.0, ahead=0, renamed=0)
    """

    commits: int
    eligible: int
    replayed: int
    already_seen: int
    clamped: int
    edges_written: int
    first_time: float | None
    last_time: float | None
    ahead: int = 0
    renamed: int = 0


def replay(
    store: SynapseStore,
    commits: Sequence[Commit],
    *,
    namespace: str = "shared",
    min_files: int = MIN_FILES,
    max_files: int = MAX_FILES,
    progress: Progress | None = None,
) -> BootstrapReport:
    """Reinforce every eligible commit of ``commits`` (in the given order) into ``store``.

    Each commit is reinforced under its :meth:`~synapse_retriever.capture.gitlog.Commit.event_id`
    in ``namespace``, so a commit replayed there before is a no-op: re-running over a
    longer history adds only the new commits, and another namespace replays it afresh
    (where the store keeps ids for ``event_ids_kept_days``, only those seen within it: each
    run sees its commits' ids again).
    The commits go in batches of :data:`BATCH`, one transaction each: a batch is written
    whole or not at all, and an interrupted run resumes after its last written batch. A
    commit older than the last reinforcement of one of its edges is replayed at that time
    (counted in ``clamped``). A commit dated more than ``store.config.operations.max_clock_skew_s``
    ahead of the clock is skipped and counted in ``ahead``.

    Examples
    --------
    A side branch's commit (day 5) merged after a later one (day 10) on the same files:

    >>> from synapse_retriever import SynapseStore
    >>> day = 86400.0
    >>> history = [
    ...     Commit("c1", (), 0.0, 10 * day, "", ("a.py", "b.py")),
    ...     Commit("c2", (), 0.0, 5 * day, "", ("a.py", "b.py", "c.py")),
    ... ]
    >>> with SynapseStore(":memory:") as store:
    ...     report = replay(store, history)
    ...     edge = store.edge("a.py", "c.py", "shared")
    >>> report.replayed, report.clamped, report.edges_written, edge.last_reinforced_at / day
    (2, 1, 4, 10.0)
    """
    ns = validate_namespace(namespace)
    events = [c for c in commits if eligible(c, min_files=min_files, max_files=max_files)]
    replayed = seen = clamped = written = ahead = renamed = done = 0
    limit = time.time() + store.config.operations.max_clock_skew_s
    batch: list[Commit] = []  # eligible commits not written yet
    pending: set[str] = set()  # their files

    def flush() -> None:
        nonlocal replayed, seen, clamped, written, ahead, done
        due = [commit for commit in batch if commit.commit_time <= limit]
        ahead += len(batch) - len(due)
        results = store.reinforce_many(
            [
                CoActivation(c.files, namespace=ns, at=c.commit_time, event_id=c.event_id(ns))
                for c in due
            ],
            late="clamp",
        )
        for commit, result in zip(due, results, strict=True):
            if result.replayed:
                seen += 1
            else:
                replayed += 1
                written += result.edges
                clamped += int(result.at > commit.commit_time)
        if progress is not None:
            for count in range(done + 1, done + len(batch) + 1):
                progress(count, len(events))
        done += len(batch)
        batch.clear()
        pending.clear()

    for commit in commits:
        if commit.renamed:
            if pending.intersection(path for pair in commit.renamed for path in pair):
                flush()  # the commits before it use the old path: written under it first
            renamed += sum(_moved(store, commit, ns, i) for i in range(len(commit.renamed)))
        if eligible(commit, min_files=min_files, max_files=max_files):
            batch.append(commit)
            pending.update(commit.files)
            if len(batch) == BATCH:
                flush()
    if batch:
        flush()
    return BootstrapReport(
        commits=len(commits),
        eligible=len(events),
        replayed=replayed,
        already_seen=seen,
        clamped=clamped,
        edges_written=written,
        first_time=events[0].commit_time if events else None,
        last_time=events[-1].commit_time if events else None,
        ahead=ahead,
        renamed=renamed,
    )


def _moved(store: SynapseStore, commit: Commit, namespace: str, index: int) -> bool:
    """Move the ``index``-th file ``commit`` renamed to its new path in ``namespace``
    (:meth:`SynapseStore.rename`); whether edges moved. The rename is recorded under an
    event id of the commit's, so a run that meets it again moves nothing. Nothing moves
    where the old path has an edge reinforced after the rename (the store knows a later
    file of that name: from live use, or from the later history learned first), where it
    learned nothing, or where the new path has associations there (a rename does not merge
    two files' pasts)."""
    old, new = commit.renamed[index]
    known = store.neighbours(old, at=commit.commit_time, namespace=namespace)
    if any(edge.last_reinforced_at > commit.commit_time for _, edge, _ in known):
        return False
    event_id = commit.event_id(namespace, f"#{index}")
    try:
        return store.rename(old, new, namespace, event_id=event_id) > 0
    except MergeRefusedError:
        return False


def bootstrap(
    store: SynapseStore,
    repo: str | os.PathLike[str],
    *,
    rev: str = "HEAD",
    since: float | None = None,
    namespace: str = "shared",
    progress: Progress | None = None,
) -> BootstrapReport:
    """Read ``repo``'s history with :func:`~synapse_retriever.capture.gitlog.read_commits` and
    :func:`replay` it into ``store``."""
    validate_namespace(namespace)
    commits = read_commits(repo, rev=rev, since=since)
    return replay(store, commits, namespace=namespace, progress=progress)
