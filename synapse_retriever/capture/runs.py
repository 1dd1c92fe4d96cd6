"""Evidence of use gathered over nested runs: one co-activation event per top-level run.

Frameworks report work as a tree of runs: LangChain callbacks carry ``run_id`` and
``parent_run_id``, LlamaIndex instrumentation opens spans with a parent span. What a
top-level run and all its descendants used (the sources an answer cites, the files an
agent's tools read or edited) is one co-activation event, emitted when the top-level run
ends. Both adapters feed their run tree to a :class:`RunCollector` and reinforce what
:meth:`RunCollector.end` returns.

Examples
--------
>>> runs = RunCollector()
>>> runs.start("agent")
>>> runs.start("tool-1", parent="agent")
>>> runs.start("tool-2", parent="agent")
>>> runs.add("tool-1", ["auth/jwt.py"])
>>> runs.add("tool-2", ["config/secrets.py"])
>>> runs.end("tool-1") is None  # not a top-level run: nothing to emit yet
True
>>> runs.end("agent")
['auth/jwt.py', 'config/secrets.py']
>>> len(runs)  # everything about the finished run is forgotten
0
"""

from __future__ import annotations

import threading
from collections.abc import Hashable, Iterable
from typing import Generic, TypeVar

from synapse_retriever.errors import InvalidTypeError, shown

__all__ = ["RunCollector"]

T = TypeVar("T")


class RunCollector(Generic[T]):
    """Collect items per top-level run; hand them over when that run ends.

    Runs are any hashable ids (span ids, UUIDs). Thread-safe: frameworks report runs
    from worker threads and event loops.

    Notes
    -----
    A run whose parent is unknown (never started, or already ended) is a top-level run,
    and so is a run first seen in :meth:`add`. Items added outside any run (``run`` None)
    are a complete event at once. A run that fails ends like any other: what its finished
    parts used was used all the same (a caller that disagrees ignores what :meth:`end`
    returns).

    Examples
    --------
    >>> runs = RunCollector()
    >>> runs.start("agent-run")
    >>> runs.add("agent-run", ["auth/jwt.py"])
    >>> runs.add("agent-run", ["config/keys.py"])
    >>> runs.end("agent-run")
    ['auth/jwt.py', 'config/keys.py']
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._root: dict[Hashable, Hashable] = {}
        self._members: dict[Hashable, set[Hashable]] = {}
        self._items: dict[Hashable, list[T]] = {}

    def __len__(self) -> int:
        """The number of open runs, top-level or not."""
        with self._lock:
            return len(self._root)

    def start(self, run: Hashable, parent: Hashable | None = None) -> None:
        """Open ``run``, a descendant of ``parent``'s top-level run if ``parent`` is open.

        Examples
        --------
        >>> runs = RunCollector()
        >>> runs.start("query")
        >>> runs.start("retrieve", parent="query")
        >>> runs.add("retrieve", ["a.py"])  # collected for the top-level run "query"
        >>> runs.end("query")
        ['a.py']
        """
        with self._lock:
            root = self._root.get(parent, run) if parent is not None else run
            self._root[run] = root
            self._members.setdefault(root, set()).add(run)

    def add(self, run: Hashable | None, items: Iterable[T]) -> list[T] | None:
        """Collect ``items`` for ``run``'s top-level run.

        Returns
        -------
        list or None
            The items themselves, as a complete event, when ``run`` is None; else None
            (they are returned by :meth:`end` of the top-level run).

        Examples
        --------
        >>> RunCollector().add(None, ["a", "b"])
        ['a', 'b']
        """
        if isinstance(items, (str, bytes)):  # would be read as its characters
            raise InvalidTypeError(
                "items must be an iterable of items, got a bare "
                f"{type(items).__name__} {shown(items)}"
            )
        batch = list(items)
        if run is None:
            return batch
        with self._lock:
            if run not in self._root:
                self._root[run] = run
                self._members.setdefault(run, set()).add(run)
            self._items.setdefault(self._root[run], []).extend(batch)
        return None

    def end(self, run: Hashable) -> list[T] | None:
        """Close ``run``; a top-level run returns everything collected under it.

        Returns
        -------
        list or None
            For a top-level run, its items in arrival order (possibly empty); None for a
            descendant or an unknown run.

        Examples
        --------
        >>> runs = RunCollector()
        >>> runs.start("agent")
        >>> runs.start("tool", parent="agent")
        >>> runs.add("tool", ["a.py", "b.py"])
        >>> runs.end("tool") is None, runs.end("agent")
        (True, ['a.py', 'b.py'])
        >>> runs.end("never-started") is None
        True
        """
        with self._lock:
            root = self._root.pop(run, None)
            if root is None:
                return None
            if root != run:
                self._members.get(root, set()).discard(run)
                return None
            for member in self._members.pop(run, set()):
                self._root.pop(member, None)
            return self._items.pop(run, [])
