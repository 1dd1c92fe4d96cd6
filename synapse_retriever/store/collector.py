"""Python's cyclic garbage collector, paused while a big write builds and frees its rows.

A batch of 1,000 ten-node events builds about 300,000 short-lived tuples (pairs, keys,
rows, statement parameters), none of them in a reference cycle: reference counting frees
each one. The cyclic collector does not know that. The allocations set it off again and
again, and each full collection walks every object alive at that moment, the batch's own
among them (measured at 1M edges: 9 full collections took 0.28 s of two batches' 1.44 s;
batches in turn with the collector on and off ran at 39,000 to 64,000 and 79,000 to
86,000 upserts per second). Mercurial pauses it around its bulk builds for the same reason
(``util.nogc``).

The store pauses it for a write of :data:`PAUSE_PAIRS` pairs or more and for a decay
sweep where writers take turns (SQLite), from the moment the transaction holds the store's
write lock to the moment the mirror holds the write, and while such a write reads its pairs
ahead of its transaction (measured at 1M edges: a full collection there took 40 ms of two
batches in five): never while waiting for another writer's lock, or between retries. On
PostgreSQL a transaction takes its locks statement by statement, and may wait for each: it
is never paused. ``config.operations.pause_collector`` False turns the pause off.

The pause is process-wide. :func:`collector_paused` enables the collector again when the
last of any nested or concurrent pauses ends, and only if it was enabled when the first
began; a ``gc.disable()`` another thread makes meanwhile is undone then. A child process
forked meanwhile keeps only the forking thread's pauses, and its collector comes back when
they end (at once, if that thread held none). Cycles made meanwhile (an exception's
traceback, another thread's garbage) are collected after.

Examples
--------
>>> import gc
>>> with collector_paused():
...     gc.isenabled()
False
>>> gc.isenabled()
True
"""

from __future__ import annotations

import gc
import os
import threading
from collections.abc import Iterator
from contextlib import contextmanager

__all__ = ["PAUSE_PAIRS", "collector_paused"]

PAUSE_PAIRS = 1_000
"""The pairs a write must reinforce for the store to pause the collector: about 22 ten-node
events (measured at 1M edges in memory: batches of 25 events wrote 17% faster paused, of
10 events 7%, single events no faster)."""

_lock = threading.Lock()
_paused = 0  # pauses running now
_resume = False  # whether the collector was enabled when the first of them began
_held = threading.local()  # .pauses: this thread's pauses running now


@contextmanager
def collector_paused() -> Iterator[None]:
    """Run the body with the cyclic garbage collector disabled; afterwards it is enabled
    again if it was before the first of the bodies running at once began."""
    global _paused, _resume
    entered = False
    try:
        with _lock:
            first = _paused == 0
            if first:
                _resume = gc.isenabled()
            mine = getattr(_held, "pauses", 0) + 1
            # no call from here to `entered`, and the call that disables after it: a signal
            # (raised as a call returns) finds the pause either not begun or counted, and
            # the finally below undoes a counted one
            _paused += 1
            _held.pauses = mine
            entered = True
            if first:
                gc.disable()
        yield
    finally:
        if entered:
            with _lock:
                _paused -= 1
                _held.pauses -= 1
                if _paused == 0 and _resume:
                    gc.enable()


def _after_fork_in_child() -> None:
    """A forked child has only the forking thread: the other threads' pauses never end."""
    global _lock, _paused
    _lock = threading.Lock()
    _paused = getattr(_held, "pauses", 0)
    if _paused == 0 and _resume:
        gc.enable()


if hasattr(os, "register_at_fork"):  # POSIX
    os.register_at_fork(after_in_child=_after_fork_in_child)
