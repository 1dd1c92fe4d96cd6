"""A pytest plugin (``-p head_start`` in pyproject.toml): the suite's long subprocesses,
run one after the other from the end of collection where a collected test needs them, so that
they run on the other core beside the tests before those (about a minute and a half saved on
two cores; one at a time, so the tests beside them keep a core of their own):

- ``mkdocs build --strict`` of the documentation site, the notebooks executed into their pages,
  for the modules that read it (tests/test_docs.py, tests/test_docs_browser.py): the ``site``
  fixture;
- ``mypy --strict`` on the three distributions (tests/test_code_quality.py): the ``mypy``
  fixture;
- every regular expression over adversarial runs of text (tests/test_patterns.py): the
  ``patterns`` fixture.

A plugin rather than a conftest.py: ``--doctest-modules`` imports every conftest.py under one
module name, and integrations/llama-index/tests has one already.
"""

from __future__ import annotations

import importlib
import os
import shutil
import subprocess
import sys
import tempfile
import threading
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SITE_MODULES = ("mkdocs", "material", "mkdocstrings_handlers.python", "mkdocs_jupyter")
"""What building the site needs: without one, the tests that read it are skipped."""
# Packages rather than paths: `llama_index` is a namespace package shared with
# llama-index-core, so mypy finds ours through the editable install (as users import it).
# One run, so the three share the analysis of their common dependencies.
TYPED = ("synapse_retriever", "langchain_synapse_retriever", "llama_index.postprocessor.synapse")
BUILD_TIMEOUT_S = 400


class _Jobs:
    """Commands run in turn in a thread of their own; each one's exit code and output (a
    command that cannot start: -1 and why)."""

    def __init__(self) -> None:
        self.queued: list[tuple[str, list[str], dict[str, str] | None]] = []
        self.done: dict[str, threading.Event] = {}
        self.results: dict[str, tuple[int, str]] = {}
        self.running: subprocess.Popen[str] | None = None
        self.stopped = False
        self.guard = threading.Lock()  # stop() and a job's start: never a job left running

    def add(self, name: str, command: list[str], env: dict[str, str] | None = None) -> None:
        self.queued.append((name, command, env))
        self.done[name] = threading.Event()

    def start(self) -> None:
        if self.queued:
            threading.Thread(target=self._run, daemon=True).start()

    def _run(self) -> None:
        for name, command, env in self.queued:
            try:
                with self.guard:
                    if self.stopped:
                        continue
                    self.running = job = subprocess.Popen(
                        command,
                        cwd=ROOT,
                        stdout=subprocess.PIPE,
                        stderr=subprocess.STDOUT,
                        text=True,
                        env=env,
                    )
                output, _ = job.communicate()
                self.results[name] = (job.returncode, output)
            except Exception as exc:  # cannot start: the test that needs it says so at once
                self.results[name] = (-1, f"{command[:3]} could not run: {exc!r}")
            finally:
                self.done[name].set()

    def result(self, name: str) -> tuple[int, str]:
        """Job ``name``'s exit code and output, waited for (the jobs before it too)."""
        timeout_s = BUILD_TIMEOUT_S * len(self.queued)
        assert self.done[name].wait(timeout_s), f"{name} still runs after {timeout_s} s"
        return self.results.get(name, (-1, f"{name} was stopped before it ran"))

    def stop(self) -> None:
        with self.guard:
            self.stopped = True
            if self.running is not None and self.running.poll() is None:
                self.running.kill()


_jobs = _Jobs()
_site_dir: list[Path] = []


def _importable(modules: tuple[str, ...]) -> bool:
    try:
        for module in modules:
            importlib.import_module(module)
    except ImportError:
        return False
    return True


def pytest_collection_finish(session: pytest.Session) -> None:
    """Start the jobs the collected tests need (by their fixtures), afresh for each session
    (``pytest.main`` run twice in one process gets its own)."""
    global _jobs
    _jobs = _Jobs()
    _site_dir.clear()
    wanted = {name for item in session.items for name in getattr(item, "fixturenames", ())}
    if "site" in wanted and _importable(SITE_MODULES):
        out = Path(tempfile.mkdtemp(prefix="synapse-site-"))
        _site_dir.append(out)
        # the notebooks' kernels draw inline: no MPLBACKEND (Agg) inherited from a test run
        env = {k: v for k, v in os.environ.items() if k != "MPLBACKEND"}
        command = ["mkdocs", "build", "--strict", "--site-dir", str(out)]
        _jobs.add("site", [sys.executable, "-m", *command], {**env, "NO_MKDOCS_2_WARNING": "1"})
    if "mypy" in wanted:
        typed = (arg for package in TYPED for arg in ("-p", package))
        _jobs.add("mypy", [sys.executable, "-m", "mypy", "--strict", *typed])
    if "patterns" in wanted:
        _jobs.add("patterns", [sys.executable, str(ROOT / "tests" / "test_patterns.py")])
    _jobs.start()


def pytest_sessionfinish(session: pytest.Session) -> None:
    _jobs.stop()
    for out in _site_dir:
        shutil.rmtree(out, ignore_errors=True)


@pytest.fixture(scope="session")
def site() -> Path:
    """The documentation site, built by ``mkdocs build --strict`` into a temporary folder."""
    for module in SITE_MODULES:
        pytest.importorskip(module, reason=f"building the docs needs {module}")
    code, output = _jobs.result("site")
    assert code == 0, output
    return _site_dir[0]


@pytest.fixture(scope="session")
def mypy() -> tuple[int, str]:
    """``mypy --strict`` on the three distributions: its exit code and output."""
    return _jobs.result("mypy")


@pytest.fixture(scope="session")
def patterns() -> tuple[int, str]:
    """tests/test_patterns.py run as a script: its exit code and output."""
    return _jobs.result("patterns")
