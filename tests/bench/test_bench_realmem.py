"""The RealMem benchmark on a tiny file in RealMem's format, written by each test."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any
from xml.etree import ElementTree

import pytest

from synapse_retriever.bench.realmem import (
    Item,
    RealMemFormatError,
    key_words,
    load_realmem,
    markdown_tables,
    merge_reports,
    run_realmem,
    score_context,
)
from synapse_retriever.bench.realmem_retrieve import ROWS, run_realmem_retrieval
from synapse_retriever.cli import main
from synapse_retriever.errors import InvalidValueError


def _turn(speaker: str, content: str, **extra: Any) -> dict[str, Any]:
    return {"speaker": speaker, "is_query": False, "content": content, "query_id": None, **extra}


TINY: dict[str, Any] = {
    "_metadata": {"person_name": "Tiny_Person", "total_sessions": 3},
    "dialogues": [
        {
            "session_uuid": "aaaa1111",
            "current_time": "2025-01-01 (Wednesday)",
            "dialogue_turns": [
                _turn("User", "My sister Ingrid is coming to visit in March."),
                _turn("Assistant", "Lovely, I will remember that Ingrid visits in March."),
            ],
        },
        {
            "session_uuid": "bbbb2222",
            "current_time": "2025-01-05 (Sunday)",
            "dialogue_turns": [
                _turn("User", "I adopted a cat called Miso."),
                _turn("Assistant", "   "),  # blank: not stored
                _turn("Assistant", "Congratulations on adopting Miso, cats are great company!"),
            ],
        },
        {
            "session_uuid": "cccc3333",
            "current_time": "2025-01-09 (Thursday)",
            "dialogue_turns": [
                {
                    **_turn("User", "Who is visiting me in March?"),
                    "is_query": True,
                    "query_id": "Q-0001",
                    "category_name": "Dynamic Incremental",
                },
                _turn(
                    "Assistant",
                    "Your sister Ingrid.",
                    memory_used=[
                        {
                            "session_uuid": "aaaa1111",
                            "content": "【Family】 Sister Ingrid visits in March.",
                        }
                    ],
                    memory_session_uuids=["aaaa1111"],
                ),
            ],
        },
    ],
}


@pytest.fixture
def tiny(tmp_path: Path) -> Path:
    path = tmp_path / "Tiny_Person_dialogues_256k.json"
    path.write_text(json.dumps(TINY), encoding="utf-8")
    return path


def test_the_loader_keeps_turns_in_order_and_finds_the_query(tiny: Path) -> None:
    (persona,) = load_realmem(tiny.parent)
    assert persona.name == "Tiny_Person"
    assert [t.session for t in persona.turns] == ["aaaa1111"] * 2 + ["bbbb2222"] * 2 + [
        "cccc3333"
    ] * 2
    assert [t.role for t in persona.turns[:2]] == ["user", "assistant"]
    day = 86_400.0
    first = persona.turns[0].at
    # a session starts at its date, then a minute per turn (the blank turn kept its minute)
    assert [t.at - first for t in persona.turns] == [
        0,
        60,
        4 * day,
        4 * day + 120,
        8 * day,
        8 * day + 60,
    ]
    (query,) = persona.queries
    assert query.index == 4  # the memory holds the four turns before it
    assert persona.turns[query.index].text == "Who is visiting me in March?"
    assert query.category == "Dynamic Incremental"
    assert dict(query.gold) == {"aaaa1111": frozenset({"sister", "ingrid", "visits", "march"})}


def test_key_words_drop_the_label_and_stop_words() -> None:
    assert key_words("【Family】 Sister Ingrid visits in March.") == {
        "sister",
        "ingrid",
        "visits",
        "march",
    }


def test_score_context_by_hand() -> None:
    gold = {"aaaa1111": frozenset({"sister", "ingrid", "visits", "march"})}
    user = "My sister Ingrid is coming to visit in March."  # sister, ingrid, march: 3 of 4
    # 3 >= 4 / 2: the session counts; the context holds 3 of the 4 key words ("visit")
    assert score_context([Item("aaaa1111", "full", user, 11)], gold) == (1.0, 0.75)
    # the same text as a summary does not count for recall, only for the key words
    assert score_context([Item("aaaa1111", "summary", user, 11)], gold) == (0.0, 0.75)
    # one key word of four in the session's turn: 1 < 2
    assert score_context([Item("aaaa1111", "chunks", "Ingrid?", 2)], gold) == (0.0, 0.25)
    # the words in a turn of another session do not count for recall
    assert score_context([Item("bbbb2222", "full", user, 11)], gold) == (0.0, 0.75)


def test_the_runner_scores_every_row_and_budget(tiny: Path) -> None:
    personas = load_realmem(tiny)
    report = run_realmem(personas, budgets=(12, 200))
    assert report["rows"] == [
        "default",
        "published",
        "gradient",
        "last-N",
        "BM25 top-k",
        "hashing top-k",
    ]
    assert report["baseline"] == "BM25 top-k"
    (entry,) = report["queries"]
    assert entry["ceiling"] == 1.0 and entry["turns_before"] == 4
    for row in report["rows"]:
        assert entry["scores"][row]["200"]["recall"] == 1.0  # everything fits
        assert entry["scores"][row]["200"]["words"] == 1.0
        assert entry["scores"][row]["12"]["tokens"] <= 12
    # 12 tokens: last-N keeps session B's last turn only (its 10 tokens: 8 words, "," and "!")
    assert entry["scores"]["last-N"]["12"] == {
        "recall": 0.0,
        "words": 0.0,
        "tokens": 10,
        "levels": {"full": 1, "chunks": 0, "summary": 0},
    }
    every = report["tables"]["all"]
    assert every["queries"] == 1 and every["last-N"]["12"]["delta"] == pytest.approx(
        every["last-N"]["12"]["recall"] - every["BM25 top-k"]["12"]["recall"]
    )
    assert "Dynamic Incremental (1)" in markdown_tables(report)


def test_rows_keep_only_those_and_the_baseline(
    tiny: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    personas = load_realmem(tiny)
    every = run_realmem(personas, budgets=(12, 200))
    some = run_realmem(personas, budgets=(12, 200), rows=["last-N", "default"])
    assert some["rows"] == ["default", "last-N", "BM25 top-k"]  # the report's order
    for row in some["rows"]:
        assert some["queries"][0]["scores"][row] == every["queries"][0]["scores"][row]
    with pytest.raises(InvalidValueError, match="no row 'fusion top-k' in this run"):
        run_realmem(personas, budgets=(12,), rows=["fusion top-k"])
    argv = ["bench", "memory", "--realmem", str(tiny), "--no-minilm", "--quiet"]
    assert main([*argv, "--rows", "last-N", "--markdown"]) == 0
    assert "| last-N |" in capsys.readouterr().out
    for bad, says in [
        (["--rows", "nope"], "no row 'nope'"),
        (["--presets", "published"], "with --realmem use --rows"),
        (["--retrieve", "--rows", "auto"], "--rows goes with the budgeted run"),
    ]:
        assert main([*argv, *bad]) == 2
        assert says in capsys.readouterr().err
    assert main(["bench", "memory", "--rows", "default"]) == 2  # only with --realmem


def test_the_cli_end_to_end(tiny: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "report.json"
    argv = ["bench", "memory", "--realmem", str(tiny), "--no-minilm", "--quiet"]
    code = main([*argv, "--budgets", "12", "200", "--json", str(out), "--markdown"])
    assert code == 0
    markdown = capsys.readouterr().out
    assert "| last-N | 0.0% (-" in markdown and "Note: the MiniLM rows were left out" in markdown
    report = json.loads(out.read_text())
    assert report["budgets"] == [12, 200] and report["queries"][0]["query_id"] == "Q-0001"
    assert main([*argv, "--personas", "1", "--max-queries", "1"]) == 0
    assert "gold-session recall, 1 queries" in capsys.readouterr().out


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (None, "does not exist"),
        ({"dialogues": "no"}, "is not a RealMem dialogues file"),
        ([1, 2], "is not a RealMem dialogues file"),
        ("{not json", "is not JSON"),
    ],
)
def test_bad_input_is_one_line_and_exit_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], content: object, message: str
) -> None:
    path = tmp_path / "data.json"
    if isinstance(content, str):
        path.write_text(content)
    elif content is not None:
        path.write_text(json.dumps(content))
    assert main(["bench", "memory", "--realmem", str(path), "--no-minilm"]) == 2
    err = capsys.readouterr().err
    assert message in err and err.count("\n") == 1


def test_a_folder_without_dialogues_and_an_unknown_persona(
    tiny: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    empty = tmp_path / "empty"
    empty.mkdir()
    (empty / "persona_all.json").write_text("{}")
    with pytest.raises(RealMemFormatError, match="holds no RealMem dialogues file"):
        load_realmem(empty)
    assert main(["bench", "memory", "--realmem", str(tiny), "--personas", "Nobody"]) == 2
    assert "no persona 'Nobody'" in capsys.readouterr().err
    assert main(["bench", "memory", "--max-queries", "3"]) == 2  # only with --realmem


def test_reports_merge_into_the_same_tables(tiny: Path) -> None:
    personas = load_realmem(tiny)
    one = run_realmem(personas, budgets=(12, 200))
    merged = merge_reports([one, one])
    assert merged["tables"]["all"]["queries"] == 2
    # the same query twice: the same means and intervals
    assert merged["tables"]["all"]["default"] == one["tables"]["all"]["default"]


def test_without_minilm_the_dense_rows_are_left_out_with_a_note(
    tiny: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from synapse_retriever.conversation import minilm

    def missing() -> tuple[str, str]:
        raise minilm.MiniLmUnavailableError("the minilm retriever needs onnxruntime")

    monkeypatch.setattr(minilm, "minilm_files", missing)
    assert main(["bench", "memory", "--realmem", str(tiny), "--quiet", "--markdown"]) == 0
    out = capsys.readouterr().out
    assert "dense top-k" not in out and "points against BM25 top-k" in out
    assert "Note: the MiniLM rows were left out: the minilm retriever needs onnxruntime." in out


# -- hybrid retrieval (realmem_retrieve) ---------------------------------------------


def test_every_row_retrieves_and_is_scored_at_every_k(tiny: Path) -> None:
    report = run_realmem_retrieval(load_realmem(tiny), ks=(1, 4))
    assert report["rows"] == list(ROWS) and report["baseline"] == "fusion top-k"
    assert report["unit"] == "k" and report["budgets"] == [1, 4]
    (entry,) = report["queries"]
    # "Who is visiting me in March?": the one turn that says so (session A) comes first
    # by the relevance channels and by each plain method; at k = 4 every earlier turn is there.
    for row in ("no graph", "BM25 top-k", "dense top-k", "fusion top-k"):
        assert entry["scores"][row]["1"]["recall"] == 1.0
    for row in ROWS:
        assert entry["scores"][row]["4"]["recall"] == 1.0
        assert entry["scores"][row]["4"]["tokens"] <= 4  # turns retrieved
    assert entry["scores"]["graph only"]["1"]["tokens"] <= 1
    markdown = markdown_tables(report)
    assert "| row | k = 1 | k = 4 |" in markdown
    assert "modes detected by auto: conversational 1" in markdown
    # the graph's own share, each mode against the fusion without it, from the same queries
    share = markdown.split("What the graph adds: each mode against `no graph`")[1]
    auto = entry["scores"]["auto"]["4"]["recall"] - entry["scores"]["no graph"]["4"]["recall"]
    assert f"| auto | {100 * (entry['scores']['auto']['1']['recall'] - 1.0):+.1f} " in share
    assert f"[{100 * auto:+.1f}, {100 * auto:+.1f}] |" in share.split("\n")[4]


def test_the_cli_runs_it_and_checks_its_flags(
    tiny: Path,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    out = tmp_path / "retrieve.json"
    argv = ["bench", "memory", "--realmem", str(tiny), "--no-minilm", "--quiet", "--retrieve"]
    assert main([*argv, "--ks", "2", "1", "2", "--json", str(out)]) == 0
    assert "k = 1" in capsys.readouterr().out
    assert json.loads(out.read_text())["budgets"] == [1, 2]
    for bad, message in (
        (["--ks", "0"], "--ks must be positive, got [0]"),
        (["--budgets", "100"], "--budgets does not go with --retrieve"),
    ):
        assert main([*argv, *bad]) == 2
        assert message in capsys.readouterr().err
    assert main(["bench", "memory", "--realmem", str(tiny), "--ks", "3"]) == 2
    assert "--ks goes with --retrieve" in capsys.readouterr().err
    assert main(["bench", "memory", "--retrieve"]) == 2
    assert "go with --realmem or --locomo" in capsys.readouterr().err


# -- LoCoMo: evidence turns ----------------------------------------------------------


LOCOMO = {
    "speaker_a": "Ann",
    "speaker_b": "Bo",
    "session_1_date_time": "1:56 pm on 8 May, 2023",
    "session_1": [
        {"speaker": "Ann", "dia_id": "D1:1", "text": "I started pottery classes last week."},
        {"speaker": "Bo", "dia_id": "D1:2", "text": "Nice! Where are they?"},
        {"speaker": "Ann", "dia_id": "D1:3", "text": "At the studio on Elm Street, Tuesdays."},
    ],
    "session_2_date_time": "10:00 am on 20 May, 2023",
    "session_2": [
        {"speaker": "Bo", "dia_id": "D2:1", "text": "My dog Rex learned to fetch."},
        {"speaker": "Ann", "dia_id": "D2:2", "text": "   "},
        {"speaker": "Ann", "dia_id": "D2:3", "text": "Rex is adorable."},
    ],
    "qa": [
        {"question": "Where are Ann's pottery classes?", "evidence": ["D1:3"], "category": 4},
        {"question": "What did Rex learn?", "evidence": ["D2:1", "D9:9"], "category": 1},
        {"question": "Unanswerable?", "evidence": [], "category": 5},
    ],
}


def test_locomo_is_read_in_both_layouts_and_scored_by_evidence_turns(tmp_path: Path) -> None:
    from synapse_retriever.bench.locomo import load_locomo

    folder = tmp_path / "locomo"
    folder.mkdir()
    (folder / "26.json").write_text(json.dumps(LOCOMO))
    listed = tmp_path / "locomo10.json"
    listed.write_text(
        json.dumps([{"sample_id": "conv-26", "conversation": LOCOMO, "qa": LOCOMO["qa"]}])
    )
    (one,) = load_locomo(folder)
    (same,) = load_locomo(listed)
    assert one.turns == same.turns and one.queries == same.queries and same.name == "conv-26"
    assert len(one.turns) == 5 and one.keys == ("D1:1", "D1:2", "D1:3", "D2:1", "D2:3")
    assert [q.evidence for q in one.queries] == [frozenset({"D1:3"}), frozenset({"D2:1"})]
    report = run_realmem_retrieval([one], ks=(1, 5))
    (first, second) = report["queries"]
    # the answer (D1:3) shares no word with the question: only the graph reaches it, two
    # turns after the one that matched (D1:1)
    found = {row: first["scores"][row]["5"]["recall"] for row in ROWS}
    assert found == {
        row: 0.0 if row in ("no graph", "BM25 top-k", "dense top-k", "fusion top-k") else 1.0
        for row in ROWS
    }
    assert first["scores"]["BM25 top-k"]["1"]["recall"] == 0.0  # "pottery classes": D1:1
    assert second["scores"]["BM25 top-k"]["1"]["recall"] == 1.0  # "Rex learned": D2:1
    assert second["ceiling"] == 1.0 and second["category"] == "multi-hop"
    budgeted = run_realmem([one], (20, 200))  # asked after the last turn: no turn of its own
    assert budgeted["queries"][1]["scores"]["BM25 top-k"]["200"]["recall"] == 1.0


def test_the_cli_reads_locomo_and_refuses_both_sets_or_bad_files(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "locomo10.json"
    path.write_text(json.dumps([LOCOMO]))
    argv = ["bench", "memory", "--locomo", str(path), "--no-minilm", "--quiet", "--retrieve"]
    report = tmp_path / "locomo.json"
    assert main([*argv, "--ks", "1", "2", "--json", str(report), "--markdown"]) == 0
    assert "| fusion top-k |" in capsys.readouterr().out
    assert json.loads(report.read_text())["dataset"] == "LoCoMo"
    picture = tmp_path / "recall.png"
    assert main(["bench", "memory", "--plot", str(picture), str(report), str(report)]) == 0
    assert picture.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    # evidence kept against the token budget, as SVG (what the benchmark pages commit)
    budgets = tmp_path / "locomo.budget.json"
    budgeted = ["bench", "memory", "--locomo", str(path), "--no-minilm", "--quiet"]
    assert main([*budgeted, "--budgets", "20", "200", "--json", str(budgets)]) == 0
    capsys.readouterr()
    drawing = tmp_path / "budget.svg"
    assert main(["bench", "memory", "--plot", str(drawing), str(report), str(budgets)]) == 0
    svg = drawing.read_text()
    ElementTree.fromstring(svg)  # well-formed
    texts = re.findall(r"<!-- (.*?) -->", svg)  # matplotlib names each text it draws
    assert {"token budget", "k (turns retrieved)", "LoCoMo: 2 queries"} <= set(texts)
    assert {"default", "last-N", "BM25 top-k"} <= set(texts)  # the budget panel's legend
    assert "Date" not in svg  # reproducible: the same reports draw the same bytes
    assert main(["bench", "memory", "--plot", str(drawing), str(report), str(budgets)]) == 0
    assert drawing.read_text() == svg
    assert main(["bench", "memory", "--plot", str(picture), str(path)]) == 2
    assert "is not a bench memory --json report" in capsys.readouterr().err
    data = path.read_bytes()  # a report never overwrites what the command reads
    assert main([*argv, "--json", str(path)]) == 2
    assert "which this command reads" in capsys.readouterr().err
    assert main(["bench", "memory", "--plot", str(report), str(report)]) == 2
    assert "which this command reads" in capsys.readouterr().err
    assert path.read_bytes() == data and json.loads(report.read_text())["dataset"] == "LoCoMo"
    inside = tmp_path / "conversations"  # a folder the command reads every JSON file of
    inside.mkdir()
    (inside / "locomo10.json").write_bytes(data)
    folder = ["bench", "memory", "--locomo", str(inside), "--no-minilm", "--quiet", "--retrieve"]
    assert main([*folder, "--json", str(inside / "report.json")]) == 2
    assert "or in it, which this command reads" in capsys.readouterr().err
    assert sorted(p.name for p in inside.iterdir()) == ["locomo10.json"]
    assert main([*argv, "--realmem", str(path)]) == 2
    assert "give one" in capsys.readouterr().err
    path.write_text(json.dumps([{"speaker_a": "x"}]))
    assert main(argv) == 2
    assert "is not a LoCoMo conversation" in capsys.readouterr().err


def _zipped(archive: Path, conversations: dict[str, dict[str, Any]]) -> None:
    """A zip shaped as the repository's data/locomo10.zip: one JSON file per conversation,
    named by its number, two folders down."""
    import zipfile

    with zipfile.ZipFile(archive, "w") as zipped:
        zipped.writestr("data/multimodal_dialog/locomo10_v2/", "")
        for name, conversation in conversations.items():
            zipped.writestr(
                f"data/multimodal_dialog/locomo10_v2/{name}.json", json.dumps(conversation)
            )


def test_locomo_is_read_as_the_repository_ships_it_zipped(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from synapse_retriever.bench.locomo import load_locomo

    other = {**LOCOMO, "speaker_a": "Cy", "speaker_b": "Di"}
    data = tmp_path / "locomo" / "data"  # a clone of snap-research/locomo: only the zip
    data.mkdir(parents=True)
    _zipped(data / "locomo10.zip", {"30": other, "26": LOCOMO})
    unzipped = tmp_path / "unzipped"
    (unzipped / "locomo10_v2").mkdir(parents=True)
    for name, conversation in (("26", LOCOMO), ("30", other)):
        (unzipped / "locomo10_v2" / f"{name}.json").write_text(json.dumps(conversation))
    expected = load_locomo(unzipped)
    for source in (data, data / "locomo10.zip", tmp_path / "locomo"):
        read = load_locomo(source)
        assert [p.name for p in read] == ["26", "30"]
        assert [(p.turns, p.queries, p.keys) for p in read] == [
            (p.turns, p.queries, p.keys) for p in expected
        ]
    # unzipped beside the archive: each conversation once, from the JSON files
    (data / "26.json").write_text(json.dumps(LOCOMO))
    assert [p.name for p in load_locomo(data)] == ["26"]
    (data / "26.json").unlink()
    # the command of the benchmark page, on the folder as cloned
    report = tmp_path / "r.json"
    argv = ["bench", "memory", "--locomo", str(data), "--no-minilm", "--quiet", "--retrieve"]
    assert main([*argv, "--ks", "1", "--json", str(report)]) == 0
    capsys.readouterr()
    assert [p["name"] for p in json.loads(report.read_text())["personas"]] == ["26", "30"]
    # a broken archive, and a folder with neither, are named
    (data / "locomo10.zip").write_bytes(b"PK\x03\x04 not a zip")
    with pytest.raises(RealMemFormatError, match=r"locomo10\.zip' is not a readable zip archive"):
        load_locomo(data)
    (data / "locomo10.zip").unlink()
    with pytest.raises(RealMemFormatError, match="no JSON file, and no zip archive"):
        load_locomo(data)
    assert main(argv) == 2
    assert "holds no LoCoMo conversation" in capsys.readouterr().err


def test_personas_takes_a_number_that_names_a_conversation_as_its_name(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    folder = tmp_path / "locomo10_v2"  # LoCoMo unzipped: conversations named by number
    folder.mkdir()
    for name in ("26", "30"):
        (folder / f"{name}.json").write_text(json.dumps(LOCOMO))
    report = tmp_path / "r.json"
    argv = ["bench", "memory", "--locomo", str(folder), "--no-minilm", "--quiet", "--retrieve"]
    argv += ["--ks", "1", "--json", str(report)]
    for chosen, kept in ((["30"], ["30"]), (["1"], ["26"]), (["30", "26"], ["26", "30"])):
        assert main([*argv, "--personas", *chosen]) == 0  # 30: that one, not the first 30
        capsys.readouterr()
        assert [p["name"] for p in json.loads(report.read_text())["personas"]] == kept
    assert main([*argv, "--personas", "26", "31"]) == 2
    assert "--personas: no persona '31'; there are ['26', '30']" in capsys.readouterr().err
