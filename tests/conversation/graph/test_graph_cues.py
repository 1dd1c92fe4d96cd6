"""Speakers and dates a question names: the pure rules, then retrieve on a real file."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st
from store_backends import older_conversation_file

from synapse_retriever.conversation import ContextConfig, ConversationMemory
from synapse_retriever.conversation.graph.cues import cue_factor, date_window, named
from synapse_retriever.errors import InvalidTypeError, InvalidValueError
from synapse_retriever.persistence.conversation.sqlite import MIGRATIONS


def day(text: str) -> float:
    return datetime.fromisoformat(text).replace(tzinfo=UTC).timestamp()


NOV_2023 = day("2023-11-14")


@pytest.mark.parametrize(
    ("question", "start", "end"),
    [
        ("What happened on 2023-10-13?", "2023-10-13", "2023-10-14"),
        ("What painting did Mel show on October 13, 2023?", "2023-10-13", "2023-10-14"),
        ("What did Gina find on 1 February, 2023?", "2023-02-01", "2023-02-02"),
        ("Who came on the 3rd May 2023?", "2023-05-03", "2023-05-04"),
        ("Dinner on Sept. 9th, 2022?", "2022-09-09", "2022-09-10"),
        ("What did Maria donate in December 2023?", "2023-12-01", "2024-01-01"),
        ("What did Maria start in Jul 2023?", "2023-07-01", "2023-08-01"),
        ("How many times in 2023?", "2023-01-01", "2024-01-01"),
        ("When did Melanie go camping in June?", "2023-06-01", "2023-07-01"),  # this year's
        ("Whom did she meet in December?", "2022-12-01", "2023-01-01"),  # last year's
        ("WHAT DID WE SHIP IN\nMARCH 2023?", "2023-03-01", "2023-04-01"),
    ],
)
def test_each_form_of_date_gives_its_window(question: str, start: str, end: str) -> None:
    assert date_window(question, now=NOV_2023) == (day(start), day(end))


@pytest.mark.parametrize(
    "question",
    [
        "When is the next release?",
        "What happened on 31 February 2023?",  # no such day
        "What about 2023-13-01?",
        "May I ask what the plan is?",  # "may" alone is not a month
        "Is 2023 a good year?",  # a bare number is not a year
        "",
    ],
)
def test_no_date_or_an_impossible_one_names_nothing(question: str) -> None:
    assert date_window(question, now=NOV_2023) is None


def test_a_bare_month_resolves_against_any_now() -> None:
    assert date_window("in June", now=-1e18) == (day("1969-06-01"), day("1969-07-01"))
    assert date_window("in June", now=1e18) == (day("9999-06-01"), day("9999-07-01"))
    assert date_window("in December", now=1e18) is None  # 9999-12 ends past year 9999


def test_named_speakers_are_whole_words_case_folded() -> None:
    speakers = ["Caroline", "Mel", "Jon Snow", "Ann-Marie"]
    assert named("What did caroline and MEL paint?", speakers) == {"Caroline", "Mel"}
    assert named("Did Melanie go?", speakers) == frozenset()  # "Mel" is not "Melanie"
    assert named("What did Jon Snow say?", speakers) == {"Jon Snow"}
    assert named("What did Jon say?", speakers) == frozenset()
    assert named("And ann-marie?", speakers) == {"Ann-Marie"}
    assert named("anything", ["", "  "]) == frozenset()


@given(st.text(max_size=200), st.lists(st.text(max_size=20), max_size=5))
def test_named_is_a_subset_and_a_named_speaker_is_found(query: str, speakers: list[str]) -> None:
    found = named(query, speakers)
    assert found <= set(speakers)
    assert all(speaker in named(f"{query} {speaker}?", speakers) for speaker in found)


@given(st.text(max_size=300), st.floats(allow_nan=False, allow_infinity=False))
def test_a_window_is_never_empty(query: str, now: float) -> None:
    window = date_window(query, now)
    assert window is None or window[0] < window[1]


def test_cue_factor_by_hand() -> None:
    assert cue_factor(spoke=True, dated=False, speaker_boost=0.5, date_boost=1.0) == 1.5
    assert cue_factor(spoke=False, dated=True, speaker_boost=0.5, date_boost=1.0) == 2.0
    assert cue_factor(spoke=True, dated=True, speaker_boost=0.5, date_boost=1.0) == 3.0
    assert cue_factor(spoke=False, dated=False, speaker_boost=9.0, date_boost=9.0) == 1.0


# Two people tell of the same thing; a third turn is another topic.
SAID = [
    ("Caroline", "I went to the pottery class and made a bowl."),
    ("Melanie", "I went to the pottery class and made a bowl."),
    ("Caroline", "Lunch was great today."),
]


def speakers_memory(path: str | Path = ":memory:", **config: float) -> ConversationMemory:
    memory = ConversationMemory(path, config=ContextConfig(**config), background=False)  # type: ignore[arg-type]
    for i, (who, text) in enumerate(SAID):
        memory.add_turn(text, role="user" if i % 2 == 0 else "assistant", at=60.0 * i,
                        speaker=who)  # fmt: skip
    return memory


def test_a_question_naming_a_speaker_finds_what_they_said_first() -> None:
    with speakers_memory() as memory, speakers_memory(speaker_boost=0.0) as blind:
        # two equal texts: whoever is named comes first, either way round
        for asked, first in [
            ("What did Melanie make at the pottery class?", 2),
            ("what did MELANIE make at pottery?", 2),
            ("What did Caroline make at the pottery class?", 1),
        ]:
            assert memory.retrieve(asked, k=1, at=600)[0].turn_id == first, asked
        # by hand, without the graph: the named speaker's fused score times 1 + 0.5
        asked = "What did Caroline make at the pottery class?"
        cued = {r.turn_id: r.score for r in memory.retrieve(asked, k=3, weights=(1, 0))}
        plain = {r.turn_id: r.score for r in blind.retrieve(asked, k=3, weights=(1, 0))}
        assert cued.keys() == plain.keys() == {1, 2}  # the cue reorders; it finds nothing new
        assert cued[1] == pytest.approx(1.5 * plain[1]) and cued[2] == pytest.approx(plain[2])


def dinners(**config: float) -> ConversationMemory:
    memory = ConversationMemory(":memory:", config=ContextConfig(**config), background=False)  # type: ignore[arg-type]
    memory.add_turn("We had dinner with the Okafors.", at=MAY_3, session="may")
    memory.add_turn("We had dinner with the Okafors.", at=JUNE_20, session="june")
    return memory


MAY_3, JUNE_20 = day("2024-05-03T18:00:00"), day("2024-06-20T18:00:00")
LATER = JUNE_20 + 86_400


def test_a_question_naming_a_date_finds_what_was_said_then() -> None:
    with dinners() as memory, dinners(date_boost=0.0) as blind:
        # equal texts: whichever time is named comes first, either way round
        assert memory.retrieve("Dinner with whom on 20 June 2024?", k=1, at=LATER)[0].turn_id == 2
        for asked in ("Who did we have dinner with on May 3, 2024?",
                      "Who did we have dinner with in May 2024?",
                      "Who did we have dinner with in May?"):  # fmt: skip
            assert memory.retrieve(asked, k=1, at=LATER)[0].turn_id == 1, asked
        # by hand, without the graph: the turn said then scores twice (1 + date_boost)
        asked = "Who did we have dinner with in May 2024?"
        cued = {r.turn_id: r.score for r in memory.retrieve(asked, k=2, at=LATER, weights=(1, 0))}
        plain = {r.turn_id: r.score for r in blind.retrieve(asked, k=2, at=LATER, weights=(1, 0))}
        assert cued[1] == pytest.approx(2 * plain[1]) and cued[2] == pytest.approx(plain[2])
        # told up to a week after: still that time (the margin); two months after: not
        assert memory.retrieve("Dinner with whom on 29 April 2024?", k=1, at=LATER)[0].turn_id == 1
        asked = "Dinner with whom on 1 March 2024?"
        assert [r.score for r in memory.retrieve(asked, k=2, at=LATER)] == [
            r.score for r in blind.retrieve(asked, k=2, at=LATER)
        ]


def test_speakers_persist(conversation_where: str) -> None:
    speakers_memory(conversation_where).close()
    with ConversationMemory(conversation_where, background=False) as memory:
        assert [t.speaker for t in memory.turns()] == ["Caroline", "Melanie", "Caroline"]
        assert memory.retrieve("What did Caroline make at the pottery class?", k=1)[0].turn_id == 1


def test_a_file_from_before_speakers_opens(tmp_path: Path) -> None:
    assert "speaker" in MIGRATIONS[3] and "speaker" not in "".join(MIGRATIONS[:3])
    older = older_conversation_file(tmp_path / "older.db", 3)  # schema 3, before speakers
    with ConversationMemory(older, background=False) as memory:
        assert [(t.text, t.speaker) for t in memory.turns()] == [
            ("An old turn about pottery.", None)
        ]
        memory.add_turn("A new one, by Ann.", at=60, speaker="Ann")
        assert memory.retrieve("What did Ann say?", k=1)[0].turn_id == 2


@pytest.mark.parametrize(
    ("speaker", "says"),
    [
        ("", "speaker must be None or a name"),
        ("   ", "speaker must be None or a name"),
        ("x" * 201, "speaker must be None or a name of 1 to 200"),
        ("Ann\udce9", "speaker must be valid Unicode"),
    ],
)
def test_a_bad_speaker_is_refused_and_nothing_is_stored(speaker: object, says: str) -> None:
    with ConversationMemory(":memory:", background=False) as memory:
        with pytest.raises(InvalidValueError, match=says):
            memory.add_turn("hello", speaker=speaker)  # type: ignore[arg-type]
        assert len(memory) == 0


def test_a_speaker_that_is_not_a_str_is_a_type_error() -> None:
    with ConversationMemory(":memory:", background=False) as memory:
        with pytest.raises(InvalidTypeError, match="speaker must be None or a str, got int 42"):
            memory.add_turn("hello", speaker=42)  # type: ignore[arg-type]
        assert len(memory) == 0


def test_hostile_speakers_are_stored_as_they_are() -> None:
    hostile = [
        "Robert'); DROP TABLE context_turns;--",
        'quo"te',
        "名前",
        "a\u200bb",
    ]  # a NUL: refused
    with ConversationMemory(":memory:", background=False) as memory:
        for i, who in enumerate(hostile):
            memory.add_turn(f"turn {i} about tea", at=i, speaker=who)
        assert [t.speaker for t in memory.turns()] == hostile
        assert memory.retrieve("What did 名前 say about tea?", k=1)[0].turn_id == 3


@pytest.mark.parametrize("name", ["speaker_boost", "date_boost", "date_margin_days"])
@pytest.mark.parametrize("value", [-0.1, float("nan"), float("inf"), "1"])
def test_the_boosts_are_validated(name: str, value: object) -> None:
    refused = InvalidTypeError if isinstance(value, str) else InvalidValueError  # no number
    with pytest.raises(refused, match=name):
        ContextConfig(**{name: value})  # type: ignore[arg-type]


def test_aadd_turn_takes_the_speaker_too() -> None:
    import asyncio

    with ConversationMemory(":memory:", background=False) as memory:
        asyncio.run(memory.aadd_turn("I paint on Sundays.", at=0, speaker="Ann"))
        with pytest.raises(InvalidValueError, match="speaker must be None or a name"):
            asyncio.run(memory.aadd_turn("And I?", at=1, speaker=""))
        assert [t.speaker for t in memory.turns()] == ["Ann"]
