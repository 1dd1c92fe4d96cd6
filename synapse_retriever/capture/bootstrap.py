"""Warm start: replay a git history into a store, so the graph does not start cold.

Each non-merge commit that touches 2 to 32 files is one co-activation event of its
files, reinforced at the commit's time, so decay and learned half-lives come out as
if the graph had watched the history happen.

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

from synapse_retriever.capture.gitlog import (
    MAX_FILES,
    MIN_FILES,
    Commit,
    eligible,
    read_commits,
    touched_pairs,
)
from synapse_retriever.config import validate_namespace
from synapse_retriever.errors import InvalidValueError
from synapse_retriever.store import SynapseStore

__all__ = ["BootstrapReport", "bootstrap", "event_time", "replay"]

Progress = Callable[[int, int], None]
"""``progress(done, total)``, called after each eligible commit."""


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
        their edges, so they were replayed at that time instead (see :func:`event_time`).
    edges_written : int
        Edge upserts (one per pair of files per replayed commit).
    ahead : int
        Eligible commits dated more than ``config.max_clock_skew_s`` ahead of the clock
        (a committer's clock set wrong), skipped: stored, such a time would never decay.
    first_time, last_time : float or None
        Committer dates of the first and last eligible commit, POSIX seconds.
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


def event_time(store: SynapseStore, files: Sequence[str], when: float, namespace: str) -> float:
    """The time to reinforce ``files`` at: ``when``, or later if an edge was reinforced later.

    ``SynapseStore.reinforce`` refuses an explicit time earlier than an edge's last
    reinforcement (time must not run backwards). A replay in committer-date order never
    meets one, but a resumed replay can: a branch merged after later commits were
    replayed brings commits with older dates, and a store that already learned from live
    use holds edges newer than any commit. Such a commit still counts as a co-activation;
    it is moved forward to the newest last reinforcement among its edges, as if it had
    been observed then.

    Examples
    --------
    >>> from synapse_retriever import SynapseStore
    >>> store = SynapseStore(":memory:")
    >>> _ = store.reinforce(["a", "b"], namespace="shared", at=100.0)
    >>> event_time(store, ["a", "b", "c"], 50.0, "shared")  # a-b was reinforced at 100
    100.0
    >>> event_time(store, ["a", "c"], 50.0, "shared")
    50.0
    """
    latest = when
    for a, b in touched_pairs(list(dict.fromkeys(files))):
        edge = store.edge(a, b, namespace)
        if edge is not None and edge.last_reinforced_at > latest:
            latest = edge.last_reinforced_at
    return latest


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
    longer history adds only the new commits, and another namespace replays it afresh.
    A commit dated more than ``store.config.max_clock_skew_s`` ahead of the clock is
    skipped and counted in ``ahead``.
    """
    ns = validate_namespace(namespace)
    events = [c for c in commits if eligible(c, min_files=min_files, max_files=max_files)]
    replayed = seen = clamped = written = ahead = 0
    limit = time.time() + store.config.max_clock_skew_s
    for done, commit in enumerate(events, start=1):
        if commit.commit_time > limit:
            ahead += 1
        elif (count := _reinforce(store, commit, ns)) is None:
            seen += 1
        else:
            replayed += 1
            written += count[0]
            clamped += count[1]
        if progress is not None:
            progress(done, len(events))
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
    )


def _reinforce(store: SynapseStore, commit: Commit, namespace: str) -> tuple[int, int] | None:
    """Edges written and whether the time was clamped; None if the event was seen before."""
    for attempt in range(2):
        at = event_time(store, commit.files, commit.commit_time, namespace)
        try:
            count = store.reinforce(
                commit.files, namespace=namespace, at=at, event_id=commit.event_id(namespace)
            )
        except InvalidValueError:
            if attempt == 0:
                continue  # another writer reinforced one of these edges in between
            raise
        if count == 0:
            return None
        return count, int(at > commit.commit_time)
    raise AssertionError("unreachable")  # pragma: no cover


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
