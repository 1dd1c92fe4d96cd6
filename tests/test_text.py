"""`blank`: what shows nothing when printed (_text.py)."""

from __future__ import annotations

import pytest

from synapse_retriever._text import blank

# Default_Ignorable_Code_Point, Unicode 15.1 (DerivedCoreProperties.txt), range by range
_DEFAULT_IGNORABLE = [
    (0x00AD, 0x00AD), (0x034F, 0x034F), (0x061C, 0x061C), (0x115F, 0x1160),
    (0x17B4, 0x17B5), (0x180B, 0x180F), (0x200B, 0x200F), (0x202A, 0x202E),
    (0x2060, 0x206F), (0x3164, 0x3164), (0xFE00, 0xFE0F), (0xFEFF, 0xFEFF),
    (0xFFA0, 0xFFA0), (0xFFF0, 0xFFF8), (0x1BCA0, 0x1BCA3), (0x1D173, 0x1D17A),
    (0xE0000, 0xE0FFF),
]  # fmt: skip


@pytest.mark.parametrize(("first", "last"), _DEFAULT_IGNORABLE)
def test_every_default_ignorable_character_shows_nothing(first: int, last: int) -> None:
    for code in (first, (first + last) // 2, last):
        assert blank(chr(code)), hex(code)
        assert blank(f" {chr(code)}\u2800\n"), hex(code)  # with whitespace and a Braille blank
        assert not blank(f"a{chr(code)}"), hex(code)  # a visible letter with it shows


@pytest.mark.parametrize("shown", ["\u0600", "\u06dd", "\U0001f44d", "\u00a0x", "."])
def test_what_prints_something_is_not_blank(shown: str) -> None:
    assert not blank(shown)  # Arabic number signs, an emoji, a no-break space with a letter
