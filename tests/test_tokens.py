"""Tests for tokens.py: the default counter of a strict token budget."""

from __future__ import annotations

import pytest

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
