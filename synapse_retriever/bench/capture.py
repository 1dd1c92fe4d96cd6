"""``synapse-retriever bench capture``: what the ``watch`` and ``mcp`` commands cost.

Watching: :func:`make_tree` writes a git working tree of N small text files (10,000 by
default, a hundred to a folder, two folders deep, a ``.gitignore``d ``build/``) and
commits it; :func:`watch_costs` runs :func:`~synapse_retriever.capture.watch.watch` on
it in a thread, writing to a real SQLite store with ``SynapseStore.reinforce``, with a
quiet spell of 0.25 s, and measures end to end, from what reaches the store:

- start-up: from starting the watch until a save anywhere in the tree is taken in.
  Rounds of probe saves, one file in every folder every 25 ms, run until the window
  closes; the start-up is when the first round whose saves all reached the store began;
- CPU while idle: the whole process's CPU seconds (``time.process_time``, all threads)
  per wall second over ``idle_s`` with nothing saved, at the default tick (0.5 s);
- saves absorbed per second: bursts of saves to distinct files of the tree, written as
  fast as a separate process can (a writer, as an editor is one), each burst twice, in
  two watches. The first watch's window holds the whole tree (``limit``) so that the
  event counts every save taken in: the burst's saves missing from it are ``lost``.
  The second keeps ``max_coactivation`` files, as ``synapse-retriever watch`` does, and ticks
  every 5 ms: a burst is absorbed in the time from its first save to the event's
  write, less the quiet spell and less what the watch does before writing (filtering
  the window with ``ignored``, reading the branch; timed again on the same files).
  Watchdog's warnings that the kernel's inotify queue overflowed are counted in both.

Either way, the store gets the ``max_coactivation`` most recent files of an event.

The MCP server: :func:`mcp_recall_latency` writes a graph of a few thousand edges over
Zipf-popular nodes with ``reinforce_many``, starts ``synapse-retriever mcp STORE`` in a subprocess
through the official SDK's client (stdio) and times ``recall`` round trips of 10 hits
(p50, p90), next to ``SynapseStore.recall`` in process on the same store and hits.

This is a script, not a timed test; the suite runs it on a small tree.

Examples
--------
>>> import tempfile
>>> paths = make_tree(Path(tempfile.mkdtemp()) / "tree", files=150)
>>> len(paths), paths[0], paths[-1]
(150, 'pkg00/mod00/file000.py', 'pkg00/mod01/file049.py')
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import platform
import queue
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from synapse_retriever.bench.perf import zipf_events
from synapse_retriever.capture.coactivation import CoActivation
from synapse_retriever.capture.watch import branch_namespace, ignored, watch
from synapse_retriever.config import SynapseConfig
from synapse_retriever.errors import InvalidValueError, shown
from synapse_retriever.store import SynapseStore

__all__ = ["make_tree", "mcp_recall_latency", "run_capture", "watch_costs"]

PER_FOLDER = 100
"""Files in each folder of the tree."""

FOLDERS_PER_PACKAGE = 10
"""Folders in each top-level folder of the tree."""

QUIET_S = 0.25
"""The watch's quiet spell: how soon a burst's window closes after its last save."""

PROBE_EVERY_S = 0.025
"""The gap between two rounds of start-up probes (the start-up's resolution)."""

AT = 1_700_000_000.0
"""The MCP graph's clock (November 2023): events before it, recalls just after."""

_WRITER = """\
import sys, time
paths = sys.stdin.read().split("\\n")
start = time.time()
for path in paths:
    with open(path, "a") as handle:
        handle.write("# saved\\n")
print(start, time.time())
"""
"""A separate process that saves each path read from stdin once, as fast as it can, and
prints when it began and ended (``time.time()``, the watch's clock)."""

_GIT = ["git", "-c", "user.name=bench", "-c", "user.email=bench@example.invalid"]


def make_tree(root: str | os.PathLike[str], files: int = 10_000) -> list[str]:
    """Write a committed git working tree of ``files`` small text files at ``root``.

    Files go ``PER_FOLDER`` to a folder, ``pkgII/modJJ/fileKKK.py``; a ``build/``
    folder of a few files is ignored by ``.gitignore``. Returns the files' paths,
    relative to ``root``, in order.
    """
    if isinstance(files, bool) or not isinstance(files, int) or files < 2:
        raise InvalidValueError(f"files must be an integer >= 2, got {shown(files)}")
    base = Path(root)
    paths = []
    for number in range(files):
        folder, index = divmod(number, PER_FOLDER)
        package, module = divmod(folder, FOLDERS_PER_PACKAGE)
        paths.append(f"pkg{package:02d}/mod{module:02d}/file{index:03d}.py")
    for path in paths:
        target = base / path
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(f'"""{path}."""\n\nVALUE = {len(path)}\n')
    (base / ".gitignore").write_text("build/\n")
    (base / "build").mkdir()
    for index in range(5):
        (base / "build" / f"out{index}.js").write_text("built();\n")
    for args in (["init", "-q", "-b", "main"], ["add", "-A"], ["commit", "-q", "-m", "tree"]):
        subprocess.run([*_GIT, "-C", os.fspath(base), *args], check=True, capture_output=True)
    return paths


class _Watching:
    """``watch`` on a tree in a thread, writing to an SQLite store; each event it writes
    is queued with the time it was written (``time.time()``)."""

    def __init__(self, root: Path, store: Path, *, limit: int, tick_s: float) -> None:
        self.root, self.store, self.limit, self.tick_s = root, store, limit, tick_s
        self.events: queue.Queue[tuple[float, list[str]]] = queue.Queue()
        self.stop = threading.Event()
        self.error: Exception | None = None
        self.thread = threading.Thread(target=self._run, name="bench-watch", daemon=True)

    def _run(self) -> None:
        try:
            with SynapseStore(self.store) as store:

                def write(files: list[str], namespace: str) -> int:
                    self.events.put((time.time(), files))
                    kept = files[
                        : store.config.learning.max_coactivation
                    ]  # as synapse-retriever watch keeps
                    return store.reinforce(kept, namespace=namespace)

                watch(
                    self.root,
                    write,
                    quiet_s=QUIET_S,
                    limit=self.limit,
                    stop=self.stop,
                    tick_s=self.tick_s,
                )
        except Exception as exc:  # pragma: no cover - raised again by close()
            self.error = exc

    def start(self) -> float:
        """Start watching; returns when (``time.time()``)."""
        started = time.time()
        self.thread.start()
        return started

    def collect(self, wait_s: float, *, follow: bool = False) -> tuple[float, set[str]]:
        """The files of the event written within ``wait_s`` (and, ``follow``ing, of each
        next one within a quiet spell and a tick: a window that split); when the last
        was written (0.0: none)."""
        files: set[str] = set()
        last = 0.0
        timeout = wait_s
        while True:
            try:
                last, written = self.events.get(timeout=timeout)
            except queue.Empty:
                return last, files
            files.update(written)
            if not follow:
                return last, files
            timeout = QUIET_S + self.tick_s + 0.1

    def close(self) -> None:
        self.stop.set()
        self.thread.join(timeout=60)
        if self.error is not None:
            raise self.error


class _Overflows(logging.Handler):
    """Counts watchdog's warnings that the kernel's inotify queue overflowed: saves lost."""

    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.count = 0

    def emit(self, record: logging.LogRecord) -> None:
        if record.getMessage().startswith("Inotify queue overflowed; filesystem events"):
            self.count += 1


@contextlib.contextmanager
def _counting_overflows() -> Iterator[_Overflows]:
    """Watchdog's overflow warnings counted (not printed) while the block runs."""
    logger = logging.getLogger("watchdog")
    handler = _Overflows()
    logger.addHandler(handler)
    try:
        yield handler
    finally:
        logger.removeHandler(handler)


def _folders(paths: Sequence[str]) -> list[list[str]]:
    by_folder: dict[str, list[str]] = {}
    for path in paths:
        by_folder.setdefault(path.rsplit("/", 1)[0], []).append(path)
    return list(by_folder.values())


def _start_up(watching: _Watching, paths: Sequence[str], *, deadline_s: float = 120.0) -> float:
    """Start the watch; seconds until a save in every folder of ``paths`` is taken in
    (the watch's window must hold every file: ``limit`` as large as the tree)."""
    folders = _folders(paths)
    rounds: list[tuple[float, list[str]]] = []
    seen: set[str] = set()
    started = watching.start()
    span = 0.5
    while time.time() - started < deadline_s:
        end = time.time() + span
        while time.time() < end:
            at = time.time()
            probes = [files[len(rounds) % len(files)] for files in folders]
            _probe(watching.root, probes)
            rounds.append((at, probes))
            time.sleep(PROBE_EVERY_S)
        seen |= watching.collect(QUIET_S + watching.tick_s + 2.0)[1]
        for at, probes in rounds:
            if seen.issuperset(probes):
                return at - started
        span *= 2
    raise RuntimeError(f"the watch took no save in within {deadline_s:.0f} s")


def _ready(watching: _Watching, paths: Sequence[str], *, deadline_s: float = 120.0) -> None:
    """Start the watch; return once an event it wrote holds a probe save. Watchdog adds
    every folder's watch before it reads the first change, so from then on (an event
    is written after its saves were read) every save in the tree is seen."""
    started = watching.start()
    number = 0
    while time.time() - started < deadline_s:
        probes = []
        for _ in range(10):
            probes.append(paths[number % len(paths)])
            _probe(watching.root, probes[-1:])
            number += 1
            time.sleep(PROBE_EVERY_S)
        if watching.collect(QUIET_S + watching.tick_s + 2.0)[1] & set(probes):
            return
    raise RuntimeError(f"the watch took no save in within {deadline_s:.0f} s")


def _probe(root: Path, paths: Sequence[str]) -> None:
    for path in paths:
        with open(root / path, "a") as handle:
            handle.write("# probe\n")


def _save(root: Path, paths: Sequence[str]) -> tuple[float, float]:
    """Save each of ``paths`` once from a separate process; when it began and ended."""
    done = subprocess.run(
        [sys.executable, "-c", _WRITER],
        input="\n".join(os.fspath(root / path) for path in paths),
        capture_output=True,
        text=True,
        check=True,
    )
    began, ended = done.stdout.split()
    return float(began), float(ended)


def _burst_losses(
    base: Path, paths: Sequence[str], bursts: Sequence[list[str]], overflows: _Overflows
) -> list[tuple[int, int]]:
    """Each burst saved once, in a watch whose window holds the whole tree: how many of
    its saves the event misses, and how often the kernel's queue overflowed meanwhile."""
    watching = _Watching(base / "tree", base / "count.db", limit=len(paths), tick_s=0.005)
    lost = []
    try:
        _ready(watching, paths)
        for burst in bursts:
            before = overflows.count
            _save(watching.root, burst)
            missing = len(set(burst) - watching.collect(60.0, follow=True)[1])
            lost.append((missing, overflows.count - before))
    finally:
        watching.close()
    return lost


def _burst_times(
    base: Path, bursts: Sequence[list[str]], overflows: _Overflows
) -> list[tuple[float, float, float, float, int]]:
    """Each burst saved once, in a watch that keeps ``max_coactivation`` files, as
    ``synapse-retriever watch`` does: when the saves began and ended, when the event was written,
    how long what the watch does before writing it takes (filtering the window, reading
    the branch, timed again on the same files), and the kernel queue's overflows. The
    tick is 5 ms, so the event is written within 5 ms of its quiet spell."""
    limit = SynapseConfig().learning.max_coactivation
    watching = _Watching(base / "tree", base / "timed.db", limit=limit, tick_s=0.005)
    times = []
    try:
        _ready(watching, bursts[0])
        for burst in bursts:
            before = overflows.count
            began, ended = _save(watching.root, burst)
            written, taken = watching.collect(60.0, follow=True)
            if not taken:
                raise RuntimeError(f"the watch wrote no event for a burst of {len(burst)} saves")
            flushing = time.perf_counter()
            ignored(watching.root, sorted(taken))
            branch_namespace(watching.root)
            flushing = time.perf_counter() - flushing
            times.append((began, ended, written, flushing, overflows.count - before))
    finally:
        watching.close()
    return times


def _start_up_and_idle(
    base: Path, paths: Sequence[str], idle_s: float, overflows: _Overflows
) -> dict[str, Any]:
    """The start-up, then the process's CPU over ``idle_s`` with nothing saved, at the
    default tick (0.5 s)."""
    tick_s = 0.5
    watching = _Watching(base / "tree", base / "idle.db", limit=len(paths), tick_s=tick_s)
    try:
        start_up = _start_up(watching, paths)
        time.sleep(0.2)  # the probes' event is written; its git calls are done
        cpu, wall = time.process_time(), time.perf_counter()
        time.sleep(idle_s)
        cpu, wall = time.process_time() - cpu, time.perf_counter() - wall
    finally:
        watching.close()
    return {
        "startup_s": round(start_up, 3),
        "startup_overflows": overflows.count,
        "idle_tick_s": tick_s,
        "idle_s": round(wall, 2),
        "idle_cpu_s": round(cpu, 4),
        "idle_cpu_percent": round(100.0 * cpu / wall, 3),
    }


def watch_costs(
    folder: str | os.PathLike[str],
    *,
    files: int = 10_000,
    idle_s: float = 10.0,
    bursts: Sequence[int] = (100, 1000, 10_000),
    seed: int = 0,
    progress: Callable[[str], None] | None = None,
) -> dict[str, Any]:
    """Start-up, idle CPU and saves absorbed per second of ``watch`` on a tree of
    ``files`` files made in ``folder``; a JSON-ready report.

    Each burst (cut to the tree's size) saves distinct files chosen at random. Its row:
    ``lost`` saves and kernel queue ``overflows`` in the watch that counts them, the
    time it took to save them (``saved_in_s``) and to absorb them (``absorbed_in_s``,
    see the module's text) in the watch that times them, with its overflows
    (``timed_overflows``), and ``saves_per_s``: the saves over that time (None where
    that watch's queue overflowed: how many it took in is unknown). ``saves_per_s`` of
    the report is the largest burst's with no save lost and no overflow in either watch
    (None if there is none).
    """
    say = progress or (lambda _: None)
    base = Path(folder)
    say(f"a git tree of {files:,} files")
    paths = make_tree(base / "tree", files)
    report: dict[str, Any] = {"files": files, "folders": len(_folders(paths)), "quiet_s": QUIET_S}
    sizes = sorted({min(size, len(paths)) for size in bursts})
    rng = np.random.default_rng(seed)
    chosen = [[paths[i] for i in rng.permutation(len(paths))[:size].tolist()] for size in sizes]
    with _counting_overflows() as overflows:
        say("watch: start-up and idle")
        report.update(_start_up_and_idle(base, paths, idle_s, overflows))
        say("watch: bursts of saves")
        lost = _burst_losses(base, paths, chosen, overflows)
        timed = _burst_times(base, chosen, overflows)
    rows = []
    for burst, (missing, lost_overflows), (began, ended, written, flushing, overflowed) in zip(
        chosen, lost, timed, strict=True
    ):
        absorbed = max(written - QUIET_S - flushing, ended) - began
        rows.append(
            {
                "saves": len(burst),
                "lost": missing,
                "overflows": lost_overflows,
                "saved_in_s": round(ended - began, 4),
                "flush_s": round(flushing, 4),
                "absorbed_in_s": round(absorbed, 4),
                "timed_overflows": overflowed,
                # an overflow drops saves: those the timed watch took in are unknown
                "saves_per_s": None if overflowed else round(len(burst) / absorbed),
            }
        )
    report["bursts"] = rows
    whole = [r for r in rows if r["lost"] == 0 and r["overflows"] == r["timed_overflows"] == 0]
    report["saves_per_s"] = whole[-1]["saves_per_s"] if whole else None
    return report


def _percentile_ms(values: Sequence[float], share: float) -> float:
    ordered = sorted(values)
    return 1000.0 * ordered[min(len(ordered) - 1, int(share * len(ordered)))]


def mcp_recall_latency(
    folder: str | os.PathLike[str],
    *,
    calls: int = 300,
    warmup: int = 20,
    nodes: int = 2000,
    events: int = 600,
    seed: int = 0,
    progress: Callable[[str], None] | None = None,
) -> dict[str, Any]:
    """``recall`` round trips through ``synapse-retriever mcp STORE`` (the SDK's stdio client, a
    subprocess) against ``SynapseStore.recall`` in process, on the same store and hits.

    The store: ``events`` 5-node events over ``nodes`` Zipf-popular nodes, an hour apart,
    written with ``reinforce_many``; each call recalls 10 Zipf-popular hits an hour after
    the last event. Returns p50 and p90 in milliseconds, their ratio, and whether the
    server answered every call with the ids the store gives in process.
    """
    from mcp import Client
    from mcp.client.stdio import StdioServerParameters, stdio_client

    say = progress or (lambda _: None)
    path = Path(folder) / "mcp.db"
    names = [f"src/module_{i:05d}.py" for i in range(nodes)]
    say("MCP: a Zipf graph")
    with SynapseStore(path) as store:
        store.reinforce_many(
            CoActivation([names[i] for i in row], at=AT - (events - n) * 3600.0)
            for n, row in enumerate(zipf_events(nodes, events, size=5, seed=seed).tolist())
        )
        edges = store.graph(at=AT).number_of_edges()
    queries = [
        [(names[i], 1.0 - rank / 10) for rank, i in enumerate(row)]
        for row in zipf_events(nodes, warmup + calls, size=10, seed=seed + 1).tolist()
    ]
    at = AT + 3600.0

    say("MCP: recall in process")
    local: list[float] = []
    with SynapseStore(path, read_only=True) as store:
        for hits in queries[:warmup]:
            store.recall(hits, at=at)
        expected = []
        for hits in queries[warmup:]:
            started = time.perf_counter()
            found = store.recall(hits, at=at)
            local.append(time.perf_counter() - started)
            expected.append([hit.id for hit in found])

    say("MCP: recall through synapse-retriever mcp")
    server = StdioServerParameters(
        command=sys.executable, args=["-m", "synapse_retriever.cli", "mcp", os.fspath(path)]
    )
    remote: list[float] = []
    answered: list[list[str]] = []

    async def session() -> float:
        started = time.perf_counter()
        with open(Path(folder) / "mcp-server.log", "w") as log:  # the server's stderr
            async with Client(stdio_client(server, errlog=log), read_timeout_seconds=60) as client:
                start_up = time.perf_counter() - started
                for number, hits in enumerate(queries):
                    arguments = {"hits": [{"id": i, "score": s} for i, s in hits], "at": at}
                    started = time.perf_counter()
                    result = await client.call_tool("recall", arguments)
                    took = time.perf_counter() - started
                    if result.is_error or result.structured_content is None:
                        raise RuntimeError(
                            f"synapse-retriever mcp refused a recall: {result.content}"
                        )
                    if number >= warmup:
                        remote.append(took)
                        answered.append([hit["id"] for hit in result.structured_content["hits"]])
        return start_up

    try:
        server_start = asyncio.run(session())
    except Exception as exc:
        said = (Path(folder) / "mcp-server.log").read_text().strip()[-2000:] or "nothing"
        raise RuntimeError(
            f"synapse-retriever mcp failed ({exc!r}); on stderr it said: {said}"
        ) from exc
    p50, local_p50 = statistics.median(remote), statistics.median(local)
    return {
        "nodes": nodes,
        "edges": edges,
        "hits": 10,
        "calls": calls,
        "warmup": warmup,
        "server_start_s": round(server_start, 3),
        "p50_ms": round(1000.0 * p50, 3),
        "p90_ms": round(_percentile_ms(remote, 0.9), 3),
        "in_process_p50_ms": round(1000.0 * local_p50, 3),
        "in_process_p90_ms": round(_percentile_ms(local, 0.9), 3),
        "ratio": round(p50 / local_p50, 1),
        "same_hits": answered == expected,
    }


def run_capture(
    *,
    files: int = 10_000,
    idle_s: float = 10.0,
    calls: int = 300,
    bursts: Sequence[int] = (100, 1000, 10_000),
    folder: str | os.PathLike[str] | None = None,
    progress: Callable[[str], None] | None = None,
) -> dict[str, Any]:
    """:func:`watch_costs` and :func:`mcp_recall_latency` in a temporary folder (made in
    ``folder``, default the system's); a JSON-ready report with the machine."""
    with tempfile.TemporaryDirectory(dir=folder) as work:
        watching = watch_costs(
            Path(work) / "watch", files=files, idle_s=idle_s, bursts=bursts, progress=progress
        )
        (Path(work) / "mcp").mkdir()
        serving = mcp_recall_latency(Path(work) / "mcp", calls=calls, progress=progress)
    return {
        "machine": {
            "cpus": os.cpu_count(),
            "system": platform.platform(),
            "python": platform.python_version(),
        },
        "watch": watching,
        "mcp": serving,
    }
