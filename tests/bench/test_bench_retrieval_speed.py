"""The retrieval speed benchmark: it runs end to end on a tiny input (no timed assertion)."""

from __future__ import annotations

import json
import re
from pathlib import Path
from xml.etree import ElementTree

import pytest

from synapse_retriever.bench.retrieval_speed import markdown_table, run_retrieval_speed
from synapse_retriever.cli import main
from synapse_retriever.errors import InvalidValueError


def test_every_size_is_timed_and_weighed() -> None:
    report = run_retrieval_speed(turns=(40, 80), adds=10, queries=3)
    assert [(row["embedder"], row["turns"]) for row in report["rows"]] == [
        ("hashing", 40),
        ("hashing", 80),
        ("dense-384", 40),
        ("dense-384", 80),
    ]
    for row in report["rows"]:
        assert 0 < row["add_p50_ms"] <= row["add_p95_ms"] <= row["add_p99_ms"]
        assert row["add_cpu_p50_ms"] > 0 and row["retrieve_cpu_p50_ms"] > 0
        assert 0 < row["retrieve_p50_ms"] <= row["retrieve_p95_ms"]
        assert 0 < row["dense_p50_ms"] <= row["dense_p95_ms"]
        assert 0 < row["lexical_p50_ms"] <= row["lexical_p95_ms"]
        assert row["open_s"] >= 0 and row["approximate"] is False  # 80 turns: exact
        assert row["nodes"] >= row["turns"] and row["edges"] >= row["turns"] - 1
        assert row["bytes_per_turn"] > 0
    assert markdown_table(report).splitlines()[2].startswith("| hashing (1024) | 40 |")


def test_an_unknown_embedder_is_refused_by_name() -> None:
    with pytest.raises(InvalidValueError, match="'minilm'"):
        run_retrieval_speed(turns=(10,), queries=1, embedders=("minilm",))


def test_the_cli_writes_the_report(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "speed.json"
    argv = ["bench", "retrieve", "--turns", "30", "--adds", "5", "--queries", "2"]
    argv += ["--embedders", "hashing"]
    argv.append("--quiet")
    assert main([*argv, "--json", str(out)]) == 0
    assert json.loads(out.read_text())["rows"][0]["turns"] == 30
    picture = tmp_path / "speed.svg"  # time against size, as the benchmark pages show it
    assert main([*argv, "--turns", "20", "40", "--json", str(out), "--plot", str(picture)]) == 0
    svg = picture.read_text()
    ElementTree.fromstring(svg)  # well-formed
    texts = re.findall(r"<!-- (.*?) -->", svg)  # matplotlib names each text it draws
    assert {"retrieve(k=10)", "add_turn", "turns in the conversation"} <= set(texts)
    assert {"hashing (1024), wall p50", "hashing (1024), CPU p50"} <= set(texts)
    assert [row["turns"] for row in json.loads(out.read_text())["rows"]] == [20, 40]
    assert main(argv) == 0
    assert "| hashing (1024) | 30 |" in capsys.readouterr().out
    with pytest.raises(SystemExit) as exit_info:  # argparse's own usage error
        main(["bench", "retrieve", "--turns", "0"])
    assert exit_info.value.code == 2
    assert "must be at least 1, got 0" in capsys.readouterr().err


def test_on_postgresql_one_user_is_timed_beside_the_others_in_a_schema_dropped_after(
    postgres_database: str, capsys: pytest.CaptureFixture[str]
) -> None:
    import psycopg

    def schemas() -> set[str]:
        with psycopg.connect(postgres_database) as conn:
            rows = conn.execute("SELECT nspname FROM pg_namespace WHERE nspname LIKE 'synapse%'")
            return {row[0] for row in rows}

    before = schemas()
    argv = ["bench", "retrieve", "--postgres", postgres_database, "--turns", "30", "--adds", "5"]
    argv += ["--queries", "2", "--embedders", "dense-384", "--users", "3", "--user-turns", "20"]
    assert main([*argv, "--quiet", "--json", "-"]) == 0
    [row] = json.loads(capsys.readouterr().out)["rows"]
    assert (row["backend"], row["users"], row["turns"], row["adds"]) == ("postgresql", 4, 30, 5)
    assert row["nodes"] >= 35 and row["add_p50_ms"] > 0 and row["retrieve_p50_ms"] > 0
    assert row["bytes_per_turn"] > 0
    assert schemas() == before  # its schema is gone
