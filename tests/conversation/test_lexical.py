"""The lexical channel: FTS5 BM25 by hand, and no query a user types breaks it."""

from __future__ import annotations

import math
import unicodedata

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from synapse_retriever.conversation import ConversationMemory
from synapse_retriever.conversation.lexical import MAX_QUERY_TERMS, LexicalIndex, match_expression
from synapse_retriever.conversation.text import terms
from synapse_retriever.errors import InvalidValueError


def test_bm25_by_hand() -> None:
    # N = 4, "host" in 1: idf = ln((4 - 1 + 0.5) / 1.5); lengths 2, 2, 1, 1 so avgdl = 1.5;
    # the 2-token text: tf 1, norm 1.2 (0.25 + 0.75 × 2 / 1.5) = 1.5: idf × 2.2 / 2.5.
    index = LexicalIndex(["host db", "lunch menu", "coffee", "tea"])
    idf = math.log(3.5 / 1.5)
    [(row, score)] = index.top("which host?", 10)
    assert row == 0 and score == pytest.approx(idf * 2.2 / 2.5)
    assert index.scores("host") == [pytest.approx(idf * 2.2 / 2.5), 0.0, 0.0, 0.0]


def test_stems_fold_word_forms() -> None:
    index = LexicalIndex(["We deployed on Friday", "Lunch", "Tea", "Coffee"])
    assert [row for row, _ in index.top("deploying", 5)] == [0]


@pytest.mark.parametrize(
    "query",
    ['"', "*", "NEAR(", "-", "deploy -friday", 'a "b', "AND OR NOT", "^x", "col:deploy", "()", ""],
)
def test_fts5_syntax_is_read_as_words(query: str) -> None:
    index = LexicalIndex(["deploy friday near col", "lunch"])
    index.top(query, 5)  # never an sqlite3.OperationalError


def test_only_stop_words_or_blank_match_nothing() -> None:
    index = LexicalIndex(["what is it", "the a an"])
    assert index.top("what is it?", 5) == [] and index.top("   ", 5) == []


def test_a_huge_query_asks_for_at_most_max_query_terms_words() -> None:
    query = " ".join(f"word{i}" for i in range(200_000))  # about 1.5 MB
    assert match_expression(query).count(" OR ") == MAX_QUERY_TERMS - 1
    assert LexicalIndex(["word3 here", "nothing"]).top(query, 5)[0][0] == 0


@settings(max_examples=200, deadline=None)
@given(st.text())
def test_any_text_is_a_valid_query(query: str) -> None:
    index = LexicalIndex(["deploy on friday", "lunch at noon", "naïve café"])
    expression = match_expression(query)
    assert '"' not in expression.replace('" OR "', "").strip('"')
    index.top(query, 3)


def test_memory_queries_of_any_shape_get_a_result_or_a_typed_error() -> None:
    with ConversationMemory(":memory:", background=False) as memory:
        memory.add_turn("The deploy moved to Fridays.", at=0)
        memory.add_turn("NEAR the café, -- * stars", at=1)
        for query in ['"', "NEAR(", "*", "-", "what is it?", "x" * 1_000_000, "café"]:
            memory.retrieve(query, k=3, at=2)
            memory.assemble(query, 100, at=2)
        with pytest.raises(InvalidValueError, match="valid Unicode"):
            memory.retrieve("caf\udce9", k=3, at=2)
        with pytest.raises(InvalidValueError, match="valid Unicode"):
            memory.assemble("caf\udce9", 100, at=2)


def test_the_memory_index_follows_its_turns_and_survives_reopening(
    conversation_where: str,
) -> None:
    path = conversation_where
    with ConversationMemory(path, background=False) as memory:
        memory.add_turn("The staging host is db-stg-7.", at=0)
        memory.add_turn("Lunch?", at=1)
    with ConversationMemory(path, background=False) as memory:
        memory.add_turn("Coffee?", at=2)
        ids = [turn.id for turn in memory.turns()]
        assert ids[memory._lexical.top("which staging host", 5)[0][0]] == 1
        assert ids[memory._lexical.top("coffee", 5)[0][0]] == 3


def test_chinese_japanese_and_korean_are_searched_by_character() -> None:
    # a run of such characters was one FTS5 word: a question that did not repeat the whole
    # clause found nothing
    texts = ["我们把生产部署改到星期五。", "今天天气很好，我们去吃了意大利面。",
             "デプロイは金曜日です。", "배포는 금요일로 옮겼습니다."]  # fmt: skip
    index = LexicalIndex(texts)
    assert index.top("生产部署什么时候", 1)[0][0] == 0
    assert index.top("デプロイはいつ", 1)[0][0] == 2
    assert index.top("배포 언제", 1)[0][0] == 3
    assert [row for row, _ in LexicalIndex(["The deploy moved.", "Lunch?"]).top("deploy", 5)] == [0]


@pytest.mark.parametrize("form", ["NFC", "NFD"])
def test_a_query_typed_with_combining_accents_finds_the_accented_words(form: str) -> None:
    # macOS keyboards and text copied from PDFs spell "ü" as "u" + U+0308: the index folds
    # either spelling to "murren", but the query was cut at the mark into "mu" and "rren"
    # and found nothing (Vietnamese, with stacked marks, likewise)
    texts = [
        unicodedata.normalize(form, text)
        for text in ("We meet at the Café Mürren in Zürich.", "Tiếng Việt là ngôn ngữ.", "Lunch?")
    ]
    index = LexicalIndex(texts)
    for query, row in (("Mürren?", 0), ("café zürich", 0), ("tiếng việt", 1)):
        for typed in ("NFC", "NFD"):
            assert [r for r, _ in index.top(unicodedata.normalize(typed, query), 5)] == [row]


def test_korean_typed_as_jamo_and_unspaced_scripts_find_their_turns() -> None:
    # Korean typed as jamo (NFD) was indexed as jamo while the query was composed: nothing
    # matched; a Thai or Lao clause, written without spaces, is searched by its pieces
    texts = [
        "Lunch at noon?",
        "การปรับใช้ของเราล้มเหลวเมื่อวันศุกร์",
        "ການນຳໃຊ້ລົ້ມເຫຼວໃນວັນສຸກ",
        unicodedata.normalize("NFD", "배포는 금요일로 옮겼습니다"),
        "배포는 월요일입니다",
    ]
    index = LexicalIndex(texts)
    for query, row in (
        ("การปรับใช้ล้มเหลว", 1),
        ("ล้มเหลววันศุกร์", 1),
        ("ວັນສຸກລົ້ມເຫຼວ", 2),
        ("금요일로", 3),
        (unicodedata.normalize("NFD", "금요일로"), 3),
    ):
        assert [r for r, _ in index.top(query, 5)][:1] == [row], query


def test_words_with_vowel_signs_are_searched_whole() -> None:
    # Devanagari's, Tamil's and Bengali's vowel signs are combining marks: FTS5 cut every
    # word at them, and a question in Hindi, Tamil or Bengali found nothing
    texts = ["मैं कल दिल्ली जाऊँगा।", "நான் நாளை சென்னை போகிறேன்.", "আমি কাল কলকাতা যাব।",
             "दिल्ली में बारिश हो रही है।", "Lunch at noon?"]  # fmt: skip
    index = LexicalIndex(texts)
    for query, rows in (
        ("दिल्ली कब जाऊँगा?", [0, 3]),
        ("बारिश", [3]),
        ("சென்னை எப்போது?", [1]),
        ("কলকাতা", [2]),
    ):
        assert [row for row, _ in index.top(query, 5)] == rows, query
    # letters search folds: Greek accents and final sigma, ё, Turkish ı and İ, Arabic's alef
    # forms, teh marbuta and tatweel, Persian yeh and kaf, ß, full- and half-width forms
    pairs = [("Αθήνα", "ΑΘΗΝΑ"), ("ёлка", "елка"), ("KIŞLIK", "kışlık"), ("İstanbul", "istanbul"),
             ("مدرسة", "مدرسه"), ("أحمد", "احمد"), ("كـتـاب", "كتاب"), ("كتابي", "کتابی"),
             ("Straße", "STRASSE"), ("ＡＰＩ", "api"), ("ｻｰﾊﾞｰ", "サーバー"), ("दुसऱ्या", "दुसर्या"),
             ("شہر", "شهر"), ("ΐδιος", "ι\u0301\u0308διος")]  # fmt: skip
    index = LexicalIndex([text for text, _ in pairs])
    for row, (text, typed) in enumerate(pairs):
        assert [r for r, _ in index.top(typed, 5)][:1] == [row], typed
        assert terms(text) == terms(typed), text
    # Hindi spelled with or without the nukta, with candrabindu or anusvara, is one word
    index = LexicalIndex(["यह ज़रूरी है", "हम वहाँ गए", "Lunch?"])
    assert [row for row, _ in index.top("जरूरी", 5)] == [0]
    assert [row for row, _ in index.top("वहां", 5)] == [1]
    # a word is one letter and its marks: "है" ("is") is left out as "a" is, not sent as a
    # piece matching every word that starts with its letter
    assert match_expression("है") == "" and match_expression("क्या है") == '"क्या"'


def test_hebrew_and_arabic_points_are_folded() -> None:
    # the same word written with its points or without is one word, as "é" is "e"
    texts = ["שָׁלוֹם עֲלֵיכֶם", "שלום לכולם", "السَّلَامُ عَلَيْكُمْ", "مرحبا بكم", "Lunch?"]
    index = LexicalIndex(texts)
    for query, rows in (("שלום", {0, 1}), ("שָׁלוֹם", {0, 1}), ("السلام", {2}), ("عليكم", {2})):
        assert {row for row, _ in index.top(query, 5)} == rows, query


def test_marks_after_no_letter_and_emoji_selectors_do_not_join_words() -> None:
    # a variation selector (an emoji's U+FE0F) or a mark after a space is no part of a word
    index = LexicalIndex(["the deploy ❤️works", "the build \u0301failed", "Lunch?"])
    assert [row for row, _ in index.top("works", 5)] == [0]
    assert [row for row, _ in index.top("failed", 5)] == [1]
    assert match_expression("❤️works \u0301failed") == '"works" OR "failed"'


def test_long_queries_in_scripts_with_marks_stay_words() -> None:
    # each word with its marks is one FTS5 term, never a phrase of pieces: the cap counts
    # words, and a word repeated 100,000 times over is one term
    words = [f"शब्द{i}" for i in range(200)]
    assert match_expression(" ".join(words)).count(" OR ") == MAX_QUERY_TERMS - 1
    index = LexicalIndex(["शब्द3 यहाँ है", "कुछ नहीं"])
    assert index.top(" ".join(words), 5)[0][0] == 0
    assert index.top("कि" * 100_000, 5) == [] and match_expression("कि" * 100_000).count('"') == 2


def test_an_underscore_separates_query_words() -> None:
    # FTS5 reads "a_b" as two words: a query word holding "_" was sent as a phrase, and a
    # crafted one of thousands of pieces ("the_the_...") took seconds a query on a big index
    assert match_expression("snake_case") == '"snake" OR "case"'
    assert match_expression("_".join(["the"] * 10_000)) == ""
    index = LexicalIndex(["we name things in snake_case", "Lunch?"])
    assert [row for row, _ in index.top("snake_case", 5)] == [0]


def test_emoji_and_symbols_never_join_a_word() -> None:
    # SQLite's FTS5 reads newer emoji (and skin tones) as letters: "thanks🥰" was one word,
    # and "thanks" found nothing
    texts = ["thanks🥰 see you 👍🏽great 🤣funny", "the deploy ❤️works", "the build \u0301failed",
             "1\u20e3 release⃣ keycap", "Lunch?"]  # fmt: skip
    index = LexicalIndex(texts)
    for query, row in (("thanks", 0), ("great", 0), ("funny", 0), ("works", 1), ("failed", 2),
                       ("release", 3)):  # fmt: skip
        assert [r for r, _ in index.top(query, 5)] == [row], query
    assert match_expression("❤️works \u0301failed 1\u20e3") == '"works" OR "failed" OR "1"'


def test_case_is_folded_as_python_folds_it() -> None:
    # FTS5's own tables are older: Cherokee's lower case (Unicode 8) was not folded, so a
    # word typed in the other case found nothing
    index = LexicalIndex(["ᏣᎳᎩ ᎦᏬᏂᎯᏍᏗ", "ꮳꮃꭹ ꭶꮼꮒꭿꮝꮧ", "ΟΔΟΣ ΑΘΗΝΑΣ", "Lunch?"])
    assert {row for row, _ in index.top("ꮳꮃꭹ", 5)} == {0, 1}
    assert {row for row, _ in index.top("ᏣᎳᎩ", 5)} == {0, 1}
    assert [row for row, _ in index.top("οδος", 5)] == [2]


def test_joiners_in_a_word_and_unspaced_scripts() -> None:
    # a zero-width joiner inside a Devanagari or Sinhala word: the same word typed without
    # it; in Persian a non-joiner parts a word's pieces ("books" is "book" + "-s"), as a
    # space does; Javanese, written without spaces, is searched by pieces
    texts = ["नमस्\u200dते दोस्त", "ꦲꦏꦸꦩꦁꦏꦠ꧀ꦱꦺꦴꦤ꧀ꦤꦺ", "کتاب\u200cها را خواندم", "ශ්\u200dරී ලංකාව",
             "Lunch?"]  # fmt: skip
    index = LexicalIndex(texts)
    for query, row in (("नमस्ते", 0), ("ꦩꦁꦏꦠ꧀", 1), ("کتاب", 2), ("کتاب\u200cها", 2),
                       ("کتاب ها", 2), ("ශ්රී", 3)):  # fmt: skip
        assert [r for r, _ in index.top(query, 5)] == [row], query
