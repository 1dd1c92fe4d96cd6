"""Python's cyclic garbage collector, paused while a write builds and frees its rows.

A batch of 1,000 ten-node events builds about 300,000 short-lived tuples (pairs, keys,
rows, statement parameters), none of them in a reference cycle: reference counting frees
each one. The cyclic collector does not know that. The allocations set it off again and
again, and each full collection walks every object alive at that moment, the batch's own
among them (measured at 1M edges: 9 full collections took 0.28 s of two batches' 1.44 s;
with the collector paused, the same batches ran 1.4 to 2 times faster). Mercurial pauses
it around its bulk builds for the same reason (``util.nogc``). A decay sweep runs paused
too (at 1M edges, 64,229 edges pruned in 0.33 to 0.37 s paused, 0.39 to 0.49 s not).

The collector is paused process-wide, so :func:`collector_paused` keeps the pause short
(one write transaction) and leaves the collector as it found it: enabled again when the
last of any nested or concurrent writes ends, and only if it was enabled when the first
began. Cycles made meanwhile (an exception's traceback) are collected after.

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
import threading
from collections.abc import Iterator
from contextlib import contextmanager

__all__ = ["collector_paused"]

_lock = threading.Lock()
_paused = 0  # writes inside collector_paused now
_resume = False  # whether the collector was enabled when the first of them began


@contextmanager
def collector_paused() -> Iterator[None]:
    """Run the body with the cyclic garbage collector disabled; afterwards it is enabled
    again if it was before the first of the bodies running at once began."""
    global _paused, _resume
    with _lock:
        if _paused == 0:
            _resume = gc.isenabled()
            gc.disable()
        _paused += 1
    try:
        yield
    finally:
        with _lock:
            _paused -= 1
            if _paused == 0 and _resume:
                gc.enable()
