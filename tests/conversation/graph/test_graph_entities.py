"""The deterministic entity extractor: kinds, normalisation, one node per thing."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from synapse_retriever.conversation.graph.entities import (
    ENTITY_KINDS,
    MAX_KEY_CHARS,
    extract_entities,
    singular,
)


def nodes(text: str) -> list[str]:
    return [entity.node for entity in extract_entities(text)]


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("Open src/auth/jwt.py now", ["file:jwt.py"]),
        ("./scripts/deploy.sh and ../README.md", ["file:deploy.sh", "file:readme.md"]),
        ("The file Settings.YAML", ["file:settings.yaml"]),
        (
            "Call memory.assemble() then np.linalg.norm",
            ["code:memory.assemble", "code:np.linalg.norm"],
        ),
        ("retry_policy and _private", ["code:retry_policy", "code:_private"]),
        ("getUser or ConversationMemory", ["code:getuser", "code:conversationmemory"]),
        ("run flush() twice", ["code:flush"]),
        ("Shipped on 2024-05-01.", ["date:2024-05-01"]),
        ("Due March 3, 2025 or 4th July", ["date:2025-03-03", "date:july 4"]),
        ("It took 250 ms, then 1.5 s", ["quantity:250 ms", "quantity:1.5 s"]),
        (
            "Budget $20, or €1,200, or £3k",
            ["quantity:20 usd", "quantity:1200 eur", "quantity:3000 gbp"],
        ),
        ("A 30% drop in 3 days", ["quantity:30 %", "quantity:3 day"]),
        ('We call it "Blue Sky Plans"', ["quoted:blue sky plan"]),
        ("the `cache_dir` option", ["quoted:cache_dir"]),
        ("Sarah Miller met Project Phoenix", ["name:sarah miller", "name:project phoenix"]),
        ("The Lord of the Rings", ["name:lord of the ring"]),
        ("Yesterday Tom left.", []),  # one capitalised word after a leading one: no name
        ("I don't know, it's fine", []),  # apostrophes are not quotes
        ("and/or km/h", []),  # a slash is not a path
        ("", []),
        ("Café Olé in São Paulo", ["name:café olé", "name:são paulo"]),
    ],
)
def test_extracts_each_kind(text: str, expected: list[str]) -> None:
    assert nodes(text) == expected


def test_a_file_name_with_marks_is_one_whole_node() -> None:
    # Hindi's vowel signs are no word characters to Python: "रिपोर्ट.csv" was cut to
    # "ट.csv", which "चार्ट.csv" gave too, linking unrelated turns; Tamil's was not found
    assert nodes("रिपोर्ट.csv और चार्ट.csv देखो") == ["file:रिपोर्ट.csv", "file:चार्ट.csv"]
    assert nodes("প্রতিবেদন.py") == ["file:প্রতিবেদন.py"]
    assert nodes("அறிக்கை.csv") == ["file:அறிக்கை.csv"]
    assert nodes("दस्तावेज़/रिपोर्ट.csv") == ["file:रिपोर्ट.csv"]
    assert nodes("ข้อมูล.csv ឯកសារ.csv") == ["file:ข้อมูล.csv", "file:ឯកសារ.csv"]  # unspaced too


def test_one_thing_is_one_node_however_it_is_written() -> None:
    assert nodes("src/api/views.py, views.py and VIEWS.PY") == ["file:views.py"]
    assert nodes('"Retry Policies" and "retry policy"') == ["quoted:retry policy"]
    assert nodes("New York, NEW YORK? New York") == ["name:new york"]


def test_an_earlier_kind_claims_its_characters() -> None:
    # the path is not also read as a dotted identifier, the quote not also as a name
    assert nodes("src/auth/jwt.py") == ["file:jwt.py"]
    assert nodes('"Project Phoenix"') == ["quoted:project phoenix"]


@pytest.mark.parametrize(
    ("word", "expected"),
    [("deploys", "deploy"), ("Policies", "policy"), ("boxes", "box"), ("matches", "match"),
     ("status", "status"), ("class", "class"), ("analysis", "analysis"), ("gas", "gas"),
     ("bus", "bus"), ("days", "day")],
)  # fmt: skip
def test_singular(word: str, expected: str) -> None:
    assert singular(word) == expected


@given(st.text(max_size=300))
def test_any_text_gives_distinct_nodes_of_known_kinds(text: str) -> None:
    found = extract_entities(text)
    assert len({e.node for e in found}) == len(found)
    assert all(e.kind in ENTITY_KINDS and 0 < len(e.key) <= MAX_KEY_CHARS for e in found)
    assert all(e.surface in text for e in found)


def test_a_name_never_spans_a_line_break() -> None:
    # a list of attendees, one a line, used to be one name of them all
    listed = "Attendees:\nSarah Miller\nBob Stone\r\nNew York City\u2028Ada Lovelace"
    assert nodes(listed) == ["name:sarah miller", "name:bob stone", "name:new york city",
                             "name:ada lovelace"]  # fmt: skip
    assert nodes("Sarah\nMiller met Bank of the West") == ["name:bank of the west"]


@pytest.mark.parametrize(
    ("long", "short"),
    [(" ".join(["Alphonse", "Bertrand"] * 30), "Sarah Miller"),  # capitalised words
     ("_".join(["part"] * 60), "verify_token"), ("x" * 300 + ".py", "jwt.py")],
    ids=["name", "code", "file"],
)  # fmt: skip
def test_a_key_longer_than_max_key_chars_is_no_entity(long: str, short: str) -> None:
    (kept,) = extract_entities(f"{long} then {short}")  # a blob names nothing to meet again
    assert kept.surface == short


def test_numbers_that_are_no_day_are_no_date() -> None:
    # "May 40" and "0 May" are not dates (they used to stop add_turn); "may" is a verb too
    assert nodes("Sales in May 40 percent up; it may 45 times; 0 May") == []
    assert nodes("see you May 3") == ["date:may 3"]


@pytest.mark.parametrize(
    "text",
    [
        "1," * 10_000,  # a quantity pattern that rescanned from every digit
        "[" + ", ".join(str(i) for i in range(3000)) + "]",
        "Q" + "a" * 16_000,  # one long capitalised token
        "a." * 10_000 + "!",
        "a/" * 10_000 + "!",
        '"' * 20_000,
        "Aa " * 7_000,
    ],
    ids=["commas", "json ints", "long token", "dots", "slashes", "quotes", "names"],
)
def test_hostile_texts_are_read_in_one_pass(text: str) -> None:
    # Each took seconds to minutes with backtracking patterns; now milliseconds. No time
    # is asserted: a regression shows as a test that does not end.
    found = extract_entities(text * 3)  # past MAX_CHARS: only the start is read
    assert len(found) <= len(text)
