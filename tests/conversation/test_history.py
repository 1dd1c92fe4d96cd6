"""Tests for conversation/history.py: degrading a message list, keeping it valid for a model."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from synapse_retriever.conversation import (
    ContextBudgetError,
    ContextConfig,
    HistoryMessage,
    tool_groups,
    trim_history,
)
from synapse_retriever.errors import InvalidTypeError, InvalidValueError
from synapse_retriever.tokens import checked_counter

count = checked_counter(None)


def agent_history() -> list[HistoryMessage]:
    return [
        HistoryMessage("system", "You are a helpful release assistant.", pinned=True),
        HistoryMessage("user", "We moved the production deploy to Fridays. Lovely weather."),
        HistoryMessage("assistant", "Noted, Fridays. Anything else?"),
        HistoryMessage("user", "Check the build status please."),
        HistoryMessage(
            "assistant",
            "",
            tool_call_ids=("call_1", "call_2"),
            fixed_text='build_status({"branch": "main"}) build_logs({"lines": 20})',
        ),
        HistoryMessage("tool", "Build 812 passed. All 340 tests green.", tool_call_id="call_1"),
        HistoryMessage(
            "tool", "Log: compiled. Log: tested. Log: packaged wheel.", tool_call_id="call_2"
        ),
        HistoryMessage("assistant", "The build passed, all tests are green."),
        HistoryMessage("user", "Great. Chat later."),
        HistoryMessage("assistant", "Talk soon!"),
        HistoryMessage("user", "Thanks."),
        HistoryMessage("assistant", "You are welcome."),
    ]


def cost(history: list[HistoryMessage], kept: list) -> int:  # type: ignore[type-arg]
    return sum(m.tokens + count(history[m.index].fixed_text) for m in kept)


def test_an_empty_history_gives_nothing() -> None:
    assert trim_history([], "q", 10) == []


def test_a_roomy_budget_keeps_everything_verbatim() -> None:
    history = agent_history()
    kept = trim_history(history, "when is the deploy?", 10_000)
    assert [m.index for m in kept] == list(range(len(history)))
    assert all(m.text == history[m.index].text for m in kept if m.level == "full")


@pytest.mark.parametrize("budget", range(40, 140, 7))
def test_tool_calls_and_their_results_stay_paired(budget: int) -> None:
    history = agent_history()
    try:
        kept = trim_history(history, "when is the deploy?", budget)
    except ContextBudgetError:
        return
    indices = {m.index for m in kept}
    assert 0 in indices  # the system prompt is pinned
    assert {4, 5, 6} <= indices or not ({4, 5, 6} & indices)
    assert cost(history, kept) <= budget
    roles = [history[m.index].role for m in kept]
    assert roles == [history[i].role for i in sorted(indices)]


def test_the_deploy_fact_outlives_small_talk_when_the_budget_shrinks() -> None:
    history = agent_history()
    kept = trim_history(history, "when is the production deploy?", 38)
    # 38 tokens: system 7 + the newest messages (working memory within a fifth) leave
    # room for the deploy message whole, first by relevance; the tool call group does not
    # fit whole and is dropped whole.
    assert [(m.index, m.level, m.text) for m in kept][:2] == [
        (0, "full", "You are a helpful release assistant."),
        (1, "full", history[1].text),
    ]
    assert not {4, 5, 6} & {m.index for m in kept} and cost(history, kept) <= 38
    gradient = trim_history(
        history, "when is the production deploy?", 38, config=ContextConfig.gradient()
    )
    # The gradient: system 7 + working memory 23 leave 8, so the deploy message is
    # condensed to its key sentence; small talk and the tool call group are dropped.
    assert [(m.index, m.level, m.text) for m in gradient][:2] == [
        (0, "full", "You are a helpful release assistant."),
        (1, "chunks", "We moved the production deploy to Fridays."),
    ]
    assert not {2, 3, 4, 5, 6} & {m.index for m in gradient}


def test_non_degradable_messages_are_kept_whole_or_dropped() -> None:
    history = [
        HistoryMessage("user", "Here is my screenshot. It shows the error. Please look.",
                       degradable=False),
        HistoryMessage("assistant", "I see it."),
    ]  # fmt: skip
    config = ContextConfig(working_memory=1)
    assert [m.level for m in trim_history(history, None, 100, config=config)] == ["full"] * 2
    kept = trim_history(history, None, 8, config=config)
    assert [m.index for m in kept] == [1]


def test_bad_input_is_refused_clearly() -> None:
    with pytest.raises(InvalidTypeError, match=r"messages\[0\] must be a HistoryMessage"):
        trim_history([{"role": "user", "content": "hi"}], None, 10)  # type: ignore[list-item]
    with pytest.raises(InvalidTypeError, match=r"messages\[0\].text must be a str, got list"):
        trim_history([HistoryMessage("user", [{"type": "text"}])], None, 10)  # type: ignore[arg-type]
    with pytest.raises(InvalidValueError, match="max_tokens must be at most 2"):
        trim_history([], "q", 10**400)  # a raw OverflowError
    with pytest.raises(InvalidValueError, match="max_tokens must be >= 0"):
        trim_history([HistoryMessage("user", "hi")], None, -5)
    with pytest.raises(InvalidTypeError, match="max_tokens must be an int"):
        trim_history([HistoryMessage("user", "hi")], None, "10")  # type: ignore[arg-type]
    with pytest.raises(InvalidTypeError, match=r"embedder must have name, dim and embed\(texts\)"):
        trim_history([], None, 10, embedder=object())  # refused even with nothing to trim
    # a lone surrogate (a tool's output decoded with surrogateescape): a raw
    # UnicodeEncodeError from the lexical index, and only when there was a query
    escaped = b"caf\xe9".decode("utf-8", "surrogateescape")
    for messages, query in [([HistoryMessage("user", escaped)], None),
                            ([HistoryMessage("user", escaped), HistoryMessage("user", "q")], "q"),
                            ([HistoryMessage("user", "hi")], escaped)]:  # fmt: skip
        with pytest.raises(InvalidValueError, match="must be valid Unicode"):
            trim_history(messages, query, 10)
    with pytest.raises(InvalidTypeError, match="query must be a str or None, got int"):
        trim_history([HistoryMessage("user", "hi")], 7, 10)  # type: ignore[arg-type]
    # a dict of its fields was an AttributeError, and an empty one read as the default
    for config in [{"overflow": "shrink"}, {}]:
        with pytest.raises(InvalidTypeError, match="config must be a ContextConfig, got dict"):
            trim_history([HistoryMessage("user", "hi")], None, 10, config=config)  # type: ignore[arg-type]
    with pytest.raises(InvalidTypeError, match="token_counter must be a callable"):
        trim_history([], None, 10, token_counter="tiktoken")  # type: ignore[arg-type]


ROLES = st.sampled_from(["user", "assistant"])
TEXT = st.lists(
    st.sampled_from(["deploy", "friday", "build", "green", "weather", "the", "tests."]),
    max_size=20,
).map(" ".join)


@st.composite
def histories(draw: st.DrawFn) -> list[HistoryMessage]:
    messages = [HistoryMessage("system", "Be brief.", pinned=True)] if draw(st.booleans()) else []
    for turn in range(draw(st.integers(0, 12))):
        kind = draw(st.sampled_from(["call", "call", "message", "message", "system"]))
        if kind == "call":
            calls = tuple(f"c{turn}_{k}" for k in range(draw(st.integers(1, 3))))
            messages.append(
                HistoryMessage("assistant", draw(TEXT), tool_call_ids=calls, fixed_text="f(x)")
            )
            answers = [HistoryMessage("tool", draw(TEXT), tool_call_id=c) for c in calls]
            if draw(st.booleans()):  # a user's message between a call and its answers
                answers.insert(draw(st.integers(0, len(answers))), HistoryMessage("user", "ok"))
            messages += answers
        elif kind == "system":  # a system message mid-chat
            messages.append(HistoryMessage("system", "Mind the tests.", pinned=True))
        else:
            messages.append(HistoryMessage(draw(ROLES), draw(TEXT)))
    return messages


@settings(max_examples=60, deadline=None)
@given(history=histories(), budget=st.integers(0, 300), shrink=st.booleans())
def test_trimming_fits_the_budget_and_never_breaks_a_tool_call_group(
    history: list[HistoryMessage], budget: int, shrink: bool
) -> None:
    config = ContextConfig(overflow="shrink" if shrink else "raise")
    try:
        kept = trim_history(history, "deploy on friday?", budget, config=config)
    except ContextBudgetError as error:
        assert error.needed > budget
        return
    assert cost(history, kept) <= budget
    indices = {m.index for m in kept}
    for i, message in enumerate(history):
        if message.pinned:
            assert i in indices
        if message.tool_call_ids:
            answers = {j for j, m in enumerate(history) if m.tool_call_id in message.tool_call_ids}
            assert (i in indices) == (answers <= indices) and (answers & indices) in (
                set(), answers,
            )  # fmt: skip


@settings(max_examples=80, deadline=None)
@given(history=histories(), budget=st.integers(0, 300), role=st.sampled_from(["user", "tool"]))
def test_start_on_drops_only_what_was_kept_before_the_first_message_of_its_role(
    history: list[HistoryMessage], budget: int, role: str
) -> None:
    config = ContextConfig(overflow="shrink")
    try:
        kept = trim_history(history, "deploy on friday?", budget, config=config)
    except ContextBudgetError:
        return
    started = trim_history(history, "deploy on friday?", budget, config=config, start_on=role)
    assert [m for m in kept if m in started] == started  # the same plan, some dropped
    groups = tool_groups(history)
    openers = [
        m.index
        for m in kept
        if history[m.index].role == role and not history[m.index].pinned and groups[m.index] is None
    ]
    if not openers:  # none to begin on: an empty conversation helps no one
        assert started == kept
        return
    first = openers[0]
    assert [m.index for m in started if not history[m.index].pinned][:1] == [first]
    indices = {m.index for m in started}
    assert all(i in indices for i, m in enumerate(history) if m.pinned)
    for group in {groups[i] for i in indices} - {None}:  # whole, as kept before
        assert {i for i in indices if groups[i] == group} == {
            m.index for m in kept if groups[m.index] == group
        }
    split = {groups[m.index] for m in kept if m.index < first} - {None}
    assert [m for m in kept if m.index >= first and groups[m.index] not in split] == [
        m for m in started if m.index >= first
    ]  # nothing else dropped


def test_start_on_keeps_the_conversation_opening_on_a_user_message(
    caplog: pytest.LogCaptureFixture,
) -> None:
    history = [
        HistoryMessage("system", "You are a release assistant.", pinned=True),
        HistoryMessage("user", "Hello! Lovely weather here today."),
        HistoryMessage("assistant", "Production deploys moved to Fridays."),
        HistoryMessage("user", "Is the build green?"),
        HistoryMessage("assistant", "", tool_call_ids=("c1",), fixed_text="build_status({})"),
        HistoryMessage("tool", "Build 812 passed. All 340 tests are green.", tool_call_id="c1"),
        HistoryMessage("assistant", "Yes, build 812 passed."),
        HistoryMessage("user", "When is the production deploy again?"),
    ]
    config = ContextConfig(working_memory=2, working_share=1.0)
    kept = trim_history(history, None, 28, config=config)
    assert [m.index for m in kept] == [0, 2, 3, 6, 7]  # opens on the assistant's answer
    started = trim_history(history, None, 28, config=config, start_on="user")
    assert started == [kept[0], *kept[2:]]
    with caplog.at_level("WARNING"):
        assert trim_history(history, None, 28, config=config, start_on="nobody") == kept
    assert "start_on='nobody': no message of that role is among the 5 kept" in caplog.text
    roomy = trim_history(history, None, 200, config=config)
    assert [m.index for m in roomy] == list(range(8))
    # a tool's answer belongs to its call's group: never an opener, so nothing is dropped
    assert trim_history(history, None, 200, config=config, start_on="tool") == roomy
    # a pinned message of the role is kept where it is, and is no opener
    rules = [HistoryMessage("user", "Rules: be brief.", pinned=True), *history[2:4], history[7]]
    opened = trim_history(rules, None, 200, start_on="user")
    assert [m.index for m in opened] == [0, 2, 3]  # the assistant's answer (1) went
    with pytest.raises(
        InvalidTypeError, match=r"start_on must be a role \(str\) or None, got type"
    ):
        trim_history(history, None, 60, start_on=HistoryMessage)  # type: ignore[arg-type]
