"""The conversation-memory benchmark on a tiny input, and its CLI command."""

from __future__ import annotations

import json

import pytest

from synapse_retriever.bench.memory import (
    _FACTS,
    generate_conversation,
    markdown_table,
    pool_reports,
    run_memory_bench,
)
from synapse_retriever.bench.plain import last_n, vector_top_k
from synapse_retriever.cli import main
from synapse_retriever.conversation import ContextConfig
from synapse_retriever.conversation.text import telegraphic
from synapse_retriever.errors import InvalidValueError


def test_the_generated_conversation_plants_facts_and_asks_them_later() -> None:
    conversation = generate_conversation(turns=80, facts=4, sessions=2, distractors=3, seed=3)
    assert len(conversation.turns) == 80
    assert [t.role for t in conversation.turns[:4]] == ["user", "assistant"] * 2
    assert {t.session for t in conversation.turns} == {"s1", "s2"}
    times = [t.at for t in conversation.turns]
    assert times == sorted(times)
    for question in conversation.questions:
        assert question.answer in conversation.turns[question.fact_turn].text
        assert question.asked_after - question.fact_turn > 80 // 4
        later = conversation.turns[question.fact_turn + 1 :]
        assert not any(question.answer in t.text for t in later)
    again = generate_conversation(turns=80, facts=4, sessions=2, distractors=3, seed=3)
    assert again == conversation  # deterministic


def test_a_conversation_that_cannot_be_generated_is_refused_by_name() -> None:
    with pytest.raises(InvalidValueError, match="sessions must be 1 to 80"):
        generate_conversation(turns=80, sessions=0)
    with pytest.raises(InvalidValueError, match="distractors must be 0 or more, got -1"):
        generate_conversation(turns=80, facts=4, distractors=-1)
    with pytest.raises(InvalidValueError, match="20 turns hold at most 5 facts"):
        generate_conversation(turns=20, facts=6)
    with pytest.raises(InvalidValueError, match="facts must be 1 to 16, got -1"):
        generate_conversation(turns=80, facts=-1)  # random's own error, naming no argument


def test_answers_survive_telegraphic_summaries() -> None:
    for fact, _, _, _, answers in _FACTS:
        for answer in answers:
            assert answer in telegraphic(fact.format(k=answer))


def test_the_baselines() -> None:
    assert last_n([5, 3, 4, 2], 9) == [1, 2, 3]
    assert last_n([5], 4) == []
    # best first: 0 (6 tokens), then 2 (3, would make 9 > 8: skipped), then 1 (2)
    assert vector_top_k([0.9, 0.1, 0.5], [6, 2, 3], 8) == [0, 1]


def test_the_benchmark_runs_on_a_tiny_input() -> None:
    conversation = generate_conversation(turns=60, facts=3, sessions=2, distractors=2, seed=5)
    presets = {"default": ContextConfig(), "published": ContextConfig.published()}
    report = run_memory_bench(conversation, budgets=(300, 600, 100_000), presets=presets)
    assert report["methods"] == [
        "default", "published", "last-N", "vector top-k", "BM25 top-k", "fusion top-k"
    ]  # fmt: skip
    assert [row["budget"] for row in report["rows"]] == [300, 600, 100_000]
    # every plain row keeps everything when everything fits; the question's words find the
    # fact turn by BM25 (the facts share their topic's words with the question)
    assert all(report["rows"][2][m] == 1.0 for m in report["methods"][2:])
    assert report["rows"][1]["BM25 top-k"] >= report["rows"][1]["last-N"]
    for row in report["rows"]:
        assert all(0.0 <= row[m] <= 1.0 for m in report["methods"])
    assert report["questions"] == 3
    pooled = pool_reports([report, report])
    assert pooled["questions"] == 6 and pooled["rows"] == report["rows"]
    table = markdown_table(pooled)
    assert table.splitlines()[0] == (
        "| budget (tokens) | synapse (default) | synapse (published) | last-N | vector top-k "
        "| BM25 top-k | fusion top-k |"
    )


TINY = ["--turns", "60", "--facts", "3", "--sessions", "2", "--distractors", "2"]


def test_synapse_bench_memory_prints_a_table_json_and_markdown(
    capsys: pytest.CaptureFixture[str],
) -> None:
    args = ["bench", "memory", *TINY, "--seeds", "5", "--budgets", "300", "600", "--quiet"]
    assert main(args) == 0
    out = capsys.readouterr().out
    assert "synapse (default)" in out and "vector top-k" in out and "300" in out
    assert main([*args, "--json", "-"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["questions"] == 3 and [r["budget"] for r in report["rows"]] == [300, 600]
    assert main([*args, "--markdown", "--presets", "published"]) == 0
    assert capsys.readouterr().out.startswith("| budget (tokens) | synapse (published) | last-N |")


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--facts", "40"], "facts must be 1 to 16, got 40"),
        (["--turns", "12", "--facts", "4"], "12 turns hold at most 3 facts"),
        (["--sessions", "61"], "sessions must be 1 to 60 (the turns), got 61"),
        (["--budgets", "0"], "budgets must be positive"),
        (["--json", "/no/such/dir/r.json"], "no such directory"),
    ],
)
def test_synapse_bench_memory_refuses_bad_arguments(
    extra: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["bench", "memory", *TINY, "--quiet", *extra]) == 2
    assert message in capsys.readouterr().err


@pytest.mark.parametrize(
    ("extra", "low"),
    [
        (["--turns", "9"], 10),
        (["--facts", "0"], 1),
        (["--sessions", "0"], 1),  # was a ZeroDivisionError's traceback
        (["--sessions", "-3"], 1),  # was a run at negative times, in session 's-3'
        (["--distractors", "-1"], 0),
    ],
)
def test_synapse_bench_memory_refuses_too_small_runs(
    extra: list[str], low: int, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as stopped:
        main(["bench", "memory", *TINY, "--quiet", *extra])
    assert stopped.value.code == 2 and f"must be at least {low}" in capsys.readouterr().err
