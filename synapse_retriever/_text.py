"""What shows nothing when printed: :func:`blank`, the one test of it.

A conversation turn of zero-width characters is refused as empty, a framework's message
of them is not stored, and a branch namespace named by them is refused: each would be an
entry a reader sees as nothing. (A name with such characters beside visible ones is
taken: ``branch:main\u200b`` is a branch of its own, as git takes it.)
"""

from __future__ import annotations

import re

__all__ = ["blank"]

_INVISIBLE = re.compile(
    "[\\s\u2800\u00ad\u034f\u061c\u115f\u1160\u17b4\u17b5\u180b-\u180f\u200b-\u200f"
    "\u202a-\u202e\u2060-\u206f\u3164\ufe00-\ufe0f\ufeff\uffa0\ufff0-\ufff8"
    "\U0001bca0-\U0001bca3\U0001d173-\U0001d17a\U000e0000-\U000e0fff]*"
)
"""Characters that show nothing: whitespace, the Braille blank, and Unicode's
Default_Ignorable_Code_Point set (Unicode 15.1, DerivedCoreProperties.txt: soft hyphen,
zero-width spaces and joiners, direction marks, variation selectors alone, the byte order
mark, Hangul fillers, tag characters...)."""


def blank(text: str) -> bool:
    """Whether ``text`` shows nothing: a turn of it is refused as empty, a framework's
    message of it is not stored, and a branch namespace of it is refused.

    Examples
    --------
    >>> blank("  \\n"), blank("\\u200b\\ufeff"), blank("a\\u200b"), blank("\\U0001f44d\\ufe0f")
    (True, True, False, False)
    """
    return _INVISIBLE.fullmatch(text) is not None
