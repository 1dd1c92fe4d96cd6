"""Tests for tokens.py: the default counter of a strict token budget."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from synapse_retriever import tokens
from synapse_retriever.errors import InvalidTypeError
from synapse_retriever.tokens import approximate_tokens


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("", 0),
        ("   \n\t", 0),
        ("hello", 1),
        ("load the keys", 3),  # load | the | keys
        ("jwt.decode(token)", 6),  # jwt | . | decode | ( | token | )
        ("naïve café", 2),  # \w is Unicode-aware: naïve | café
    ],
)
def test_approximate_tokens_counts_words_and_punctuation(text: str, expected: int) -> None:
    assert approximate_tokens(text) == expected


def test_approximate_tokens_grows_with_the_text() -> None:
    assert approximate_tokens("a b") < approximate_tokens("a b c")


def test_approximate_tokens_refuses_non_strings() -> None:
    with pytest.raises(InvalidTypeError, match="text must be a str, got bytes"):
        approximate_tokens(b"bytes")  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("text", "least"),
    [
        ("我们把生产部署改到星期五", 12),
        ("数据" * 2000, 4000),
        ("日本語のテキスト", 8),
        ("한국어텍스트", 6),
        ("ｶﾀｶﾅﾃﾞｽ", 7),  # half-width kana
        ("ㅎㅎㅎㅎ", 4),  # Hangul jamo
    ],
)
def test_text_without_spaces_between_words_is_counted_by_character(text: str, least: int) -> None:
    # a CJK run counted as one token: a 4,000-character turn fit a budget of 10
    assert approximate_tokens(text) >= least


def test_a_cjk_turn_is_kept_within_its_budget() -> None:
    from synapse_retriever.conversation import ContextBudgetError, ContextConfig, ConversationMemory

    with ConversationMemory(":memory:", background=False) as memory:
        memory.add_turn("我们把生产部署改到星期五。", at=0)
        memory.add_turn("数据" * 2000, at=1)
        with pytest.raises(ContextBudgetError, match="needs 4000 tokens"):  # it was "1"
            memory.assemble("数据", 10, at=2)
    graded = ContextConfig(working_memory=0)
    with ConversationMemory(":memory:", config=graded, background=False) as memory:
        memory.add_turn("我们把生产部署改到星期五。", at=0)
        memory.add_turn("数据" * 2000, at=1)
        turns = memory.assemble("部署", 20, at=2)
        assert sum(approximate_tokens(t.text) for t in turns) <= 20


@settings(max_examples=300)
@given(
    st.text(alphabet=st.sampled_from("ab_9 \t\n\u3000.,!部署é\u0301"), max_size=60),
    st.integers(1, 9),
)
def test_counting_in_slices_counts_what_counting_whole_does(text: str, slice_chars: int) -> None:
    # a long text is counted in slices cut at white space, so that other threads run between
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(tokens, "_SLICE_CHARS", slice_chars)
        assert approximate_tokens(text) == len(tokens._PIECE.findall(text))
