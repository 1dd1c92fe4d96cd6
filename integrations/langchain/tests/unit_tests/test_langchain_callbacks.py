"""Unit tests for langchain_synapse_retriever.callbacks: learning from what one run's tools used.

One event at strength 1 gives each pair an edge of weight 0.3 (learning rate 0.3 × 1).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import math
import threading
from typing import Any

import pytest
from langchain_core.documents import Document
from langchain_core.runnables import RunnableConfig, RunnableLambda
from langchain_core.tools import ToolException, tool
from langchain_synapse_retriever import SynapseCallbackHandler, SynapseRetriever

from synapse_retriever import InvalidTypeError, InvalidValueError, SynapseStore


@tool
def read_file(path: str) -> str:
    """Read a file."""
    return f"contents of {path}"


@tool
def edit_file(file_path: str, text: str) -> str:
    """Replace a file's contents."""
    return "ok"


@tool
def move_file(source_path: str, destination_path: str) -> str:
    """Move a file."""
    return "moved"


@tool
def open_files(paths: list[str]) -> str:
    """Read several files."""
    return "ok"


@tool
def search(query: str) -> str:
    """Search the code base."""
    return "auth/login.py auth/views.py"


@tool
def broken_read(path: str) -> str:
    """A read that fails."""
    raise OSError(f"cannot read {path}")


@tool
def grep(pattern: str) -> str:
    """Search file contents with a string argument."""
    return "found"


def agent(*steps: tuple[Any, dict[str, Any]], fail: bool = False) -> RunnableLambda:
    """A small agent-like run: a chain that calls tools one after the other."""

    def run(task: str, config: RunnableConfig) -> str:
        for step_tool, args in steps:
            with contextlib.suppress(OSError):  # the agent carries on after a failed tool
                step_tool.invoke(args, config)
        if fail:
            raise RuntimeError("the agent gave up")
        return "done"

    return RunnableLambda(run)


@pytest.fixture
def store() -> SynapseStore:
    return SynapseStore(":memory:")


def weight(store: SynapseStore, a: str, b: str, namespace: str = "personal") -> float:
    return store.weight(a, b, namespace)


def pairs(store: SynapseStore) -> set[frozenset[str]]:
    return {frozenset(edge) for edge in store.graph().edges()}


def test_what_one_run_read_and_edited_is_one_event(store: SynapseStore) -> None:
    handler = SynapseCallbackHandler(store)
    run = agent(
        (search, {"query": "where are tokens verified"}),
        (read_file, {"path": "auth/jwt.py"}),
        (read_file, {"path": "config/keys.py"}),
        (edit_file, {"file_path": "auth/jwt.py", "text": "..."}),
        (open_files, {"paths": ["tests/test_jwt.py"]}),
    )
    run.invoke("fix the token check", {"callbacks": [handler]})
    assert pairs(store) == {
        frozenset({"auth/jwt.py", "config/keys.py"}),
        frozenset({"auth/jwt.py", "tests/test_jwt.py"}),
        frozenset({"config/keys.py", "tests/test_jwt.py"}),
    }
    assert math.isclose(weight(store, "auth/jwt.py", "config/keys.py"), 0.3, rel_tol=1e-6)
    edge = store.edge("auth/jwt.py", "config/keys.py")
    assert edge is not None and edge.activation_count == 1  # one event, not one per tool


def test_settings_that_would_learn_nothing_are_refused_at_construction(
    store: SynapseStore,
) -> None:
    # each was accepted, and a run then learned nothing: LangChain logged the handler's error
    # at the run's end ("team", NaN), or no tool matched ("read_file" read as its letters)
    with pytest.raises(InvalidValueError, match="namespace"):
        SynapseCallbackHandler(store, namespace="team")
    with pytest.raises(InvalidValueError, match="strength must be a finite number"):
        SynapseCallbackHandler(store, strength=math.nan)
    with pytest.raises(InvalidTypeError, match="tools must be a collection of str, got 'read"):
        SynapseCallbackHandler(store, tools="read_file")
    with pytest.raises(InvalidTypeError, match="input_keys must be a collection of str"):
        SynapseCallbackHandler(store, input_keys="path")


def test_ids_no_store_can_hold_are_left_out_not_the_whole_run(
    store: SynapseStore, caplog: pytest.LogCaptureFixture
) -> None:
    # one id of 3,000 bytes refused the run's whole event; an extract returning a bare str
    # wrote edges between its letters
    handler = SynapseCallbackHandler(store)
    run = agent((read_file, {"path": "a.py"}), (read_file, {"path": "x" * 3000}),
                (read_file, {"path": "b.py"}))  # fmt: skip
    with caplog.at_level(logging.WARNING):
        run.invoke("read", {"callbacks": [handler]})
    assert pairs(store) == {frozenset({"a.py", "b.py"})}
    assert "left out ids no store can hold" in caplog.text
    letters = SynapseCallbackHandler(store, extract=lambda name, args: args["path"])
    agent((read_file, {"path": "c.py"}), (read_file, {"path": "d.py"})).invoke(
        "read", {"callbacks": [letters]}
    )
    assert store.weight("c", ".", "personal") == 0 and pairs(store) == {frozenset({"a.py", "b.py"})}


def test_separate_runs_are_separate_events(store: SynapseStore) -> None:
    handler = SynapseCallbackHandler(store)
    config: RunnableConfig = {"callbacks": [handler]}
    agent((read_file, {"path": "a.py"}), (read_file, {"path": "b.py"})).invoke("1", config)
    agent((read_file, {"path": "c.py"}), (read_file, {"path": "d.py"})).invoke("2", config)
    assert pairs(store) == {frozenset({"a.py", "b.py"}), frozenset({"c.py", "d.py"})}


def test_runs_in_parallel_do_not_mix(store: SynapseStore) -> None:
    handler = SynapseCallbackHandler(store)
    barrier = threading.Barrier(2, timeout=5)

    def run(task: str, config: RunnableConfig) -> str:
        read_file.invoke({"path": f"{task}1.py"}, config)
        barrier.wait()  # both runs are in flight here
        read_file.invoke({"path": f"{task}2.py"}, config)
        return task

    RunnableLambda(run).batch(["a", "b"], {"callbacks": [handler], "max_concurrency": 2})
    assert pairs(store) == {frozenset({"a1.py", "a2.py"}), frozenset({"b1.py", "b2.py"})}


def test_nested_chains_belong_to_the_outer_run(store: SynapseStore) -> None:
    handler = SynapseCallbackHandler(store)
    inner = agent((read_file, {"path": "b.py"}))
    outer = agent((read_file, {"path": "a.py"})) | RunnableLambda(
        lambda result, config: inner.invoke(result, config)
    )
    outer.invoke("task", {"callbacks": [handler]})
    assert pairs(store) == {frozenset({"a.py", "b.py"})}


def test_retrieval_alone_reinforces_nothing(store: SynapseStore) -> None:
    docs = [Document(page_content=f"doc {n}", id=n) for n in "abcd"]
    retriever = SynapseRetriever(base_retriever=RunnableLambda(lambda q: docs), store=store)
    handler = SynapseCallbackHandler(store)
    retriever.invoke("q", {"callbacks": [handler]})
    agent((search, {"query": "tokens"})).invoke("task", {"callbacks": [handler]})
    assert pairs(store) == set()


def test_a_failed_tool_used_nothing(store: SynapseStore) -> None:
    handler = SynapseCallbackHandler(store)
    run = agent(
        (read_file, {"path": "a.py"}),
        (broken_read, {"path": "missing.py"}),
        (read_file, {"path": "b.py"}),
    )
    run.invoke("task", {"callbacks": [handler]})
    assert pairs(store) == {frozenset({"a.py", "b.py"})}


@tool
def denied_edit(path: str) -> str:
    """An edit the file system refuses, its error handed back to the model."""
    raise ToolException(f"permission denied: {path}")


denied_edit.handle_tool_error = True


def test_a_tool_whose_error_was_handled_used_nothing(store: SynapseStore) -> None:
    # an agent calls tools by tool call: a handled error ends the run as a ToolMessage of
    # status "error" through on_tool_end, which counted it as used
    def run(task: str, config: RunnableConfig) -> str:
        for name, step, args in [("1", read_file, {"path": "a.py"}),
                                 ("2", denied_edit, {"path": "b.py"}),
                                 ("3", read_file, {"path": "c.py"})]:  # fmt: skip
            answer = step.invoke(
                {"name": step.name, "args": args, "id": name, "type": "tool_call"}, config
            )
            assert answer.status == ("error" if step is denied_edit else "success")
        return "done"

    RunnableLambda(run).invoke("task", {"callbacks": [SynapseCallbackHandler(store)]})
    assert pairs(store) == {frozenset({"a.py", "c.py"})}


def test_a_failed_run_still_learns_from_its_finished_tools(store: SynapseStore) -> None:
    handler = SynapseCallbackHandler(store)
    run = agent(
        (read_file, {"path": "a.py"}), (edit_file, {"file_path": "b.py", "text": ""}), fail=True
    )
    with pytest.raises(RuntimeError, match="the agent gave up"):
        run.invoke("task", {"callbacks": [handler]})
    assert pairs(store) == {frozenset({"a.py", "b.py"})}


def test_a_tool_called_alone_is_its_own_run(store: SynapseStore) -> None:
    handler = SynapseCallbackHandler(store)
    move_file.invoke(
        {"source_path": "old.py", "destination_path": "new.py"}, {"callbacks": [handler]}
    )
    read_file.invoke({"path": "other.py"}, {"callbacks": [handler]})  # one id: no pair
    assert pairs(store) == {frozenset({"old.py", "new.py"})}


def test_namespace_strength_and_tool_filter(store: SynapseStore) -> None:
    handler = SynapseCallbackHandler(store, namespace="shared", strength=2.0, tools=["edit_file"])
    run = agent(
        (read_file, {"path": "ignored.py"}),
        (edit_file, {"file_path": "a.py", "text": ""}),
        (edit_file, {"file_path": "b.py", "text": ""}),
    )
    run.invoke("task", {"callbacks": [handler]})
    assert pairs(store) == {frozenset({"a.py", "b.py"})}
    assert math.isclose(weight(store, "a.py", "b.py", "shared"), 0.6, rel_tol=1e-6)  # 0.3 × 2
    assert weight(store, "a.py", "b.py", "personal") == 0.0


def test_tools_and_input_keys_given_as_generators_are_read_once(store: SynapseStore) -> None:
    # the check read the generators to their end, and the handler kept none of them: it
    # listened to no tool (tools) or found no id (input_keys), and learned nothing, silently
    tools = [read_file, edit_file]
    handler = SynapseCallbackHandler(
        store, tools=(t.name for t in tools), input_keys=(key for key in ("path", "file_path"))
    )
    assert handler.tools == {"read_file", "edit_file"}
    assert handler.input_keys == ("path", "file_path")
    run = agent((read_file, {"path": "a.py"}), (edit_file, {"file_path": "b.py", "text": ""}))
    run.invoke("task", {"callbacks": [handler]})
    assert pairs(store) == {frozenset({"a.py", "b.py"})}
    with pytest.raises(
        InvalidTypeError, match=r"tools must be a collection of str, got \['a', 1\]"
    ):
        SynapseCallbackHandler(store, tools=(name for name in ["a", 1]))  # type: ignore[misc]


def test_a_custom_extractor_sees_the_tool_name_and_input(store: SynapseStore) -> None:
    seen: list[tuple[str, Any]] = []

    def extract(name: str, tool_input: Any) -> list[str]:
        seen.append((name, tool_input))
        return [f"pattern:{tool_input['pattern']}"] if name == "grep" else []

    handler = SynapseCallbackHandler(store, extract=extract)
    run = agent((grep, {"pattern": "jwt"}), (grep, {"pattern": "keys"}), (read_file, {"path": "x"}))
    run.invoke("task", {"callbacks": [handler]})
    assert pairs(store) == {frozenset({"pattern:jwt", "pattern:keys"})}
    assert seen[0] == ("grep", {"pattern": "jwt"})


def test_custom_input_keys(store: SynapseStore) -> None:
    handler = SynapseCallbackHandler(store, input_keys=["pattern"])
    agent((grep, {"pattern": "jwt"}), (grep, {"pattern": "keys"})).invoke(
        "task", {"callbacks": [handler]}
    )
    assert pairs(store) == {frozenset({"jwt", "keys"})}


def test_async_runs_learn_the_same(store: SynapseStore) -> None:
    handler = SynapseCallbackHandler(store)

    async def run(task: str, config: RunnableConfig) -> str:
        await read_file.ainvoke({"path": "a.py"}, config)
        await asyncio.gather(
            read_file.ainvoke({"path": "b.py"}, config),
            edit_file.ainvoke({"file_path": "c.py", "text": ""}, config),
        )
        return "done"

    asyncio.run(RunnableLambda(run).ainvoke("task", {"callbacks": [handler]}))
    assert pairs(store) == {
        frozenset({"a.py", "b.py"}),
        frozenset({"a.py", "c.py"}),
        frozenset({"b.py", "c.py"}),
    }


@pytest.mark.parametrize("namespace", ["personal", "branch:" + "x" * 2030])
def test_two_handlers_on_one_store_count_a_run_once(store: SynapseStore, namespace: str) -> None:
    # a namespace near the 2,048-byte cap made the run's event id too long: nothing learned
    handlers = [SynapseCallbackHandler(store, namespace=namespace) for _ in range(2)]
    run = agent((read_file, {"path": "a.py"}), (read_file, {"path": "b.py"}))
    run.invoke("task", {"callbacks": handlers})
    edge = store.edge("a.py", "b.py", namespace)
    assert edge is not None and edge.activation_count == 1
    run.invoke("again", {"callbacks": handlers})  # another run is another event
    edge = store.edge("a.py", "b.py", namespace)
    assert edge is not None and edge.activation_count == 2


def test_nothing_is_left_in_flight_after_a_run(store: SynapseStore) -> None:
    handler = SynapseCallbackHandler(store)
    agent((read_file, {"path": "a.py"}), (broken_read, {"path": "b.py"})).invoke(
        "task", {"callbacks": [handler]}
    )
    assert (len(handler._runs), handler._pending) == (0, {})


def test_the_store_must_be_a_synapse_store() -> None:
    with pytest.raises(TypeError, match="store must be a SynapseStore, got str"):
        SynapseCallbackHandler("synapses.db")  # type: ignore[arg-type]
