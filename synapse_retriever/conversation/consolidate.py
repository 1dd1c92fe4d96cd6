"""Background consolidation: one worker thread that runs a job when asked, off the caller.

Like hippocampal replay between conversations, consolidation pre-computes condensed
turns and replays themes while the caller goes on; :meth:`Consolidator.request` returns
at once. Requests made while a run is under way coalesce into one more run. A job that
raises is logged and remembered in :attr:`Consolidator.last_error`; the caller's thread
never sees it.

Examples
--------
>>> import threading
>>> ran_on = []
>>> worker = Consolidator(lambda: ran_on.append(threading.get_ident()))
>>> worker.request()
>>> worker.wait(timeout=5)
True
>>> ran_on[0] != threading.get_ident()
True
>>> worker.close()
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from numbers import Real
from typing import TypeVar

from synapse_retriever.errors import InvalidTypeError, InvalidValueError, shown

__all__ = ["Consolidator", "wait_timeout"]

log = logging.getLogger(__name__)

_Result = TypeVar("_Result")


class Consolidator:
    """Runs ``job`` on a daemon thread each time it is requested (coalescing requests).

    Parameters
    ----------
    job : callable
        The work; called with no arguments on the worker thread (what it returns is
        ignored).
    background : bool
        False runs ``job`` in the caller's thread at each request (for scripts that want
        exact, reproducible timing).
    name : str
        The worker thread's name.

    Examples
    --------
    >>> runs = []
    >>> worker = Consolidator(lambda: runs.append("ran"), background=False)
    >>> worker.request()  # runs in the caller's thread: for exact replays
    >>> runs, worker.runs
    (['ran'], 1)
    """

    def __init__(
        self,
        job: Callable[[], object],
        *,
        background: bool = True,
        name: str = "synapse-consolidation",
    ) -> None:
        self._job = job
        self.background = background
        self.last_error: BaseException | None = None
        self.runs = 0
        self._cond = threading.Condition()
        self._pending = False
        self._running = False
        self._inline = 0  # runs under way in callers' threads (background=False, run_here)
        self._closed = False
        self._stopped = False  # the worker thread has left its loop
        self._then: Callable[[], object] | None = None  # close's cleanup, for the worker
        self._thread: threading.Thread | None = None
        self._name = name
        self._local = threading.local()  # .runs: the runs under way in this thread

    def request(self) -> None:
        """Ask for one run; returns at once when running in the background. Without a
        background thread the run is the caller's, and :meth:`wait` and :meth:`close` wait
        for it as for the worker's; after :meth:`close` nothing runs."""
        if not self.background:
            self.run_here(self._run_once)
            return
        with self._cond:
            if self._closed:
                return
            self._pending = True
            if self._thread is None:
                thread = threading.Thread(target=self._loop, name=self._name, daemon=True)
                try:
                    thread.start()
                except RuntimeError as exc:  # no new thread (an interpreter shutting down)
                    self._pending = False  # nothing runs: a later open consolidates
                    log.warning("conversation-memory consolidation not started: %s", exc)
                    return
                self._thread = thread
            self._cond.notify_all()

    def wait(
        self, timeout: float | None = None, *, until: Callable[[], bool] | None = None
    ) -> bool:
        """Block until no run is pending or under way; False if ``timeout`` passed first
        (checked: :func:`wait_timeout`), or ``until()`` turned true first (checked again at
        each :meth:`wake`). Called from the job itself (a summarizer closing the memory), False
        at once: the wait would be for the run it is part of, and never end."""
        timeout = wait_timeout(timeout)
        deadline = None if timeout is None else time.monotonic() + timeout
        with self._cond:
            while self._pending or self._running or self._inline:
                if self.running_here() or (until is not None and until()):
                    return False
                left = None if deadline is None else deadline - time.monotonic()
                if left is not None and left <= 0:
                    return False
                self._cond.wait(left)
        return True

    def run_here(self, job: Callable[[], _Result]) -> _Result | None:
        """Run ``job`` now, in the calling thread: a run of the caller's (an explicit
        consolidation), which :meth:`wait` and :meth:`close` wait for as for the worker's,
        and whose error the caller gets. After :meth:`close` nothing runs: None.

        Examples
        --------
        >>> worker = Consolidator(lambda: None)
        >>> worker.run_here(lambda: "ran"), worker.running_here()
        ('ran', False)
        >>> worker.close()
        >>> worker.run_here(lambda: "ran") is None
        True
        """
        with self._cond:
            if self._closed:
                return None
            self._inline += 1
        self._local.runs = getattr(self._local, "runs", 0) + 1
        try:
            return job()
        finally:
            self._local.runs -= 1
            with self._cond:
                self._inline -= 1
                self._cond.notify_all()
                then = self._last_out()  # close gave up waiting: its cleanup, if none runs
            if then is not None:
                _cleaned_up(then)

    def running_here(self) -> bool:
        """Whether the calling thread is running the job (a summarizer's call, say)."""
        return bool(getattr(self._local, "runs", 0))

    def wake(self) -> None:
        """Have the waits under way (:meth:`wait`) check their ``until`` again."""
        with self._cond:
            self._cond.notify_all()

    @property
    def busy(self) -> bool:
        """Whether a run is pending or under way."""
        with self._cond:
            return self._pending or self._running or bool(self._inline)

    def close(self, timeout: float | None = None, then: Callable[[], object] | None = None) -> None:
        """Finish what was requested, then stop the worker, then call ``then`` (the caller's
        cleanup: closing what the job uses). Past ``timeout`` the run under way goes on, and
        ``then`` is called on the worker's thread when it ends, never under it (without a
        background thread, on the thread of the caller whose run it is).

        Examples
        --------
        >>> import threading, time
        >>> closed = threading.Event()
        >>> worker = Consolidator(lambda: time.sleep(0.2))
        >>> worker.request()
        >>> worker.close(timeout=0.01, then=closed.set)  # the run goes on past the timeout
        >>> closed.is_set(), closed.wait(5)
        (False, True)
        """
        timeout = wait_timeout(timeout)  # checked before anything closes
        self.wait(timeout)
        with self._cond:
            self._closed = True
            self._cond.notify_all()
            thread = self._thread
        if thread is not None and thread is not threading.current_thread():
            thread.join(timeout)
        with self._cond:
            if thread is not None and not (self._running or self._pending):
                # idle: it leaves its loop at its next wake with nothing to do, so the
                # cleanup is not left to a thread that may not wake before this returns
                self._stopped = True
            if then is not None and (self._inline or (thread is not None and not self._stopped)):
                self._then = then  # the worker (or the caller's run) calls it as it stops
                return
        if then is not None:
            then()

    def _last_out(self) -> Callable[[], object] | None:
        """Close's cleanup, taken by the last run to end (the worker's or a caller's), so
        that it runs once and never beside a run: None while another still runs. The
        caller holds the lock."""
        worker_on = self._running or (self._thread is not None and not self._stopped)
        if self._inline or worker_on:
            return None
        then, self._then = self._then, None
        return then

    def _loop(self) -> None:
        while True:
            with self._cond:
                while not self._pending and not self._closed:
                    self._cond.wait()
                if not self._pending:
                    self._stopped = True
                    then = self._last_out()
                    break
                self._pending = False
                self._running = True
            try:
                self._run_once()
            except BaseException as exc:  # a job's CancelledError or SystemExit: the worker
                self.last_error = exc  # goes on, and close's cleanup is never lost with it
                log.exception("conversation-memory consolidation failed")
            finally:
                with self._cond:
                    self._running = False
                    self._cond.notify_all()
        if then is not None:
            _cleaned_up(then)

    def _run_once(self) -> None:
        self._local.runs = getattr(self._local, "runs", 0) + 1
        try:
            self._job()
            self.runs += 1
        except Exception as exc:  # the caller's thread must never see a background failure
            self.last_error = exc
            log.exception("conversation-memory consolidation failed")
        finally:
            self._local.runs -= 1


def _cleaned_up(then: Callable[[], object]) -> None:
    """Call close's cleanup after the run it waited for; a failure is logged: the thread
    that ran the job (the worker, or a caller's whose turn started the run) must never see
    it."""
    try:
        then()
    except Exception:
        log.exception("closing after consolidation failed")


def wait_timeout(timeout: object) -> float | None:
    """``timeout`` in seconds as a wait takes it: None (no limit) for None, ``inf``, or more
    than a wait can hold (``threading.TIMEOUT_MAX``: about 292 years on Linux, 49 days on
    Windows). A NumPy number is read as the number it is.

    Raises
    ------
    InvalidTypeError, InvalidValueError
        Not a number (a string, a bool), or NaN or below 0.

    Examples
    --------
    >>> wait_timeout(2), wait_timeout(float("inf")), wait_timeout(10**400)
    (2.0, None, None)
    >>> wait_timeout(-1)  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    synapse_retriever.errors.InvalidValueError: timeout must be None or seconds >= 0, got -1
    """
    if timeout is None:
        return None
    if isinstance(timeout, bool) or not isinstance(timeout, Real):
        raise InvalidTypeError(f"timeout must be None or seconds >= 0, got {shown(timeout)}")
    if timeout != timeout or timeout < 0:  # NaN, or a time past
        raise InvalidValueError(f"timeout must be None or seconds >= 0, got {shown(timeout)}")
    return None if timeout >= threading.TIMEOUT_MAX else float(timeout)  # type: ignore[operator]
