"""RunCollector: one co-activation event per top-level run."""

from __future__ import annotations

import threading

from synapse_retriever.capture.runs import RunCollector


def test_descendants_report_to_their_top_level_run() -> None:
    runs: RunCollector[str] = RunCollector()
    runs.start("query")
    runs.start("retrieve", parent="query")
    runs.start("tool", parent="retrieve")  # grandchild
    runs.add("tool", ["a"])
    runs.add("query", ["b"])
    assert runs.end("tool") is None
    assert runs.end("retrieve") is None
    assert runs.end("query") == ["a", "b"]


def test_two_top_level_runs_stay_apart() -> None:
    runs: RunCollector[str] = RunCollector()
    runs.start("q1")
    runs.start("q2")
    runs.add("q1", ["a", "b"])
    runs.add("q2", ["c"])
    assert runs.end("q2") == ["c"]
    assert runs.end("q1") == ["a", "b"]


def test_items_outside_any_run_are_an_event_at_once() -> None:
    runs: RunCollector[str] = RunCollector()
    assert runs.add(None, ["a", "b"]) == ["a", "b"]
    assert len(runs) == 0


def test_unknown_parent_makes_a_top_level_run() -> None:
    runs: RunCollector[str] = RunCollector()
    runs.start("child", parent="never-started")
    runs.add("child", ["a"])
    assert runs.end("child") == ["a"]


def test_a_run_first_seen_in_add_is_top_level() -> None:
    runs: RunCollector[str] = RunCollector()
    runs.add("late", ["a"])
    assert runs.end("late") == ["a"]


def test_a_top_level_run_without_items_returns_an_empty_event() -> None:
    runs: RunCollector[str] = RunCollector()
    runs.start("q")
    assert runs.end("q") == []
    assert runs.end("q") is None  # already ended


def test_a_descendant_that_failed_keeps_what_it_added() -> None:
    runs: RunCollector[str] = RunCollector()
    runs.start("agent")
    runs.start("tool", parent="agent")
    runs.add("tool", ["a"])
    runs.end("tool")  # the tool failed after reading "a"; the agent recovered
    runs.add("agent", ["b"])
    assert runs.end("agent") == ["a", "b"]


def test_ending_the_top_level_run_forgets_unfinished_descendants() -> None:
    runs: RunCollector[str] = RunCollector()
    runs.start("q")
    runs.start("stream", parent="q")  # never ends
    runs.add("q", ["a"])
    assert runs.end("q") == ["a"]
    assert len(runs) == 0


def test_concurrent_runs_from_threads_do_not_mix() -> None:
    runs: RunCollector[int] = RunCollector()
    results: dict[int, list[int] | None] = {}

    def work(n: int) -> None:
        runs.start(f"q{n}")
        for step in range(50):
            runs.start(f"q{n}/s{step}", parent=f"q{n}")
            runs.add(f"q{n}/s{step}", [n])
            runs.end(f"q{n}/s{step}")
        results[n] = runs.end(f"q{n}")

    threads = [threading.Thread(target=work, args=(n,)) for n in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert results == {n: [n] * 50 for n in range(8)}
    assert len(runs) == 0


def test_a_bare_str_of_items_is_refused() -> None:
    import pytest

    from synapse_retriever.errors import InvalidTypeError

    with pytest.raises(InvalidTypeError, match="got a bare str 'abc'"):
        RunCollector().add(None, "abc")  # would be the items 'a', 'b', 'c'
