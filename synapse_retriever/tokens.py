"""Token counts for a strict token budget: the one home of the token counter.

A counter is any ``str -> int`` callable (:data:`TokenCounter`): ``len(encoding.encode(text))``
with tiktoken, a Hugging Face tokenizer...; :func:`approximate_tokens` is the default of the
adapters' cost functions and of the conversation memory's budget. Every budget decision goes
through one counter, so a caller who counts tokens another way (their model's tokenizer) gets a
context that fits by their own count; :func:`checked_counter` checks what a counter returns.

The default is :func:`approximate_tokens` (one token per word run or punctuation mark), not
tiktoken, even when tiktoken is installed: tiktoken downloads its encoding files on first use,
so a tiktoken default would reach the network, or fail offline, and budgets would depend on the
machine's cache. :func:`tiktoken_counter` opts in explicitly.

Examples
--------
>>> approximate_tokens("def load_keys(): ...")
8
>>> count = checked_counter(None)
>>> count("I moved the deploy to Fridays")
6
>>> checked_counter(lambda text: -1)("hi")
Traceback (most recent call last):
...
synapse_retriever.errors.InvalidValueError: token_counter must return an integer >= 0, got -1 \
for 'hi'
"""

from __future__ import annotations

import os
import re
import threading
from collections.abc import Callable
from numbers import Integral
from typing import Any, TypeGuard

from synapse_retriever.errors import InvalidTypeError, InvalidValueError, shown

__all__ = [
    "CJK",
    "MAX_TOKENS",
    "TokenCounter",
    "approximate_tokens",
    "check_tokens",
    "checked_counter",
    "is_int",
    "tiktoken_counter",
]

TokenCounter = Callable[[str], int]
"""Counts the tokens of a text."""

MAX_TOKENS = 2**63 - 1
"""The largest token count a budget may name (what a 64-bit integer holds)."""


def is_int(value: object) -> TypeGuard[Integral]:
    """Whether ``value`` is an integer: an int or a NumPy integer, not a bool.

    Examples
    --------
    >>> import numpy as np
    >>> [is_int(v) for v in (3, np.int64(3), True, 3.0, "3")]
    [True, True, False, False, False]
    """
    return isinstance(value, Integral) and not isinstance(value, bool)


def check_tokens(name: str, value: object) -> int:
    """``value``, a token count ``name``: an int from 0 to :data:`MAX_TOKENS`.

    Raises
    ------
    InvalidTypeError, InvalidValueError
        Not an int (a float, a bool), or out of that range.

    Examples
    --------
    >>> check_tokens("budget_tokens", 500)
    500
    >>> check_tokens("budget_tokens", 2**1024)  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    synapse_retriever.errors.InvalidValueError: budget_tokens must be at most 2**63 - 1, got 2**1024
    """
    if not is_int(value):
        raise InvalidTypeError(f"{name} must be an int, got {type(value).__name__} {shown(value)}")
    count = int(value)  # a NumPy integer too
    if count < 0:
        raise InvalidValueError(f"{name} must be >= 0, got {shown(count)}")
    if count > MAX_TOKENS:
        power = count & (count - 1) == 0
        size = f"2**{count.bit_length() - 1}" if power else f"an int of {count.bit_length()} bits"
        raise InvalidValueError(f"{name} must be at most 2**63 - 1, got {size}")
    return count


CJK = (
    "\u1100-\u11ff\u3005-\u3007\u3040-\u30ff\u3130-\u318f\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af"
    "\uf900-\ufaff\uff66-\uff9f\U00020000-\U0003134f"
)
"""Kana (half-width too), CJK ideographs (and their extensions, the iteration mark 々 and the
ideographic zero 〇) and Hangul (syllables and jamo), as a regex character range: scripts
written without spaces between words, counted and searched by character."""
_PIECE = re.compile(rf"[^\W{CJK}]+|[{CJK}]|[^\w\s]")  # word runs first: the most common
_SPACE = re.compile(r"\s")
_SLICE_CHARS = 1 << 16
"""How much of a text :func:`approximate_tokens` counts in one call of the regex engine,
which holds the interpreter while it runs: a 2 MB text counted whole held an async caller's
event loop for 70 ms; in slices, other threads run between them."""

_ENV_LOCK = threading.Lock()


def approximate_tokens(text: str) -> int:
    """Approximate token count: one per run of word characters, one per other non-space
    character, and one per character of Chinese, Japanese or Korean (written without spaces
    between words, where a run would be a whole clause).

    Subword tokenizers split long or rare words further, so this undercounts them, but it
    grows with the text the way they do: what a strict budget needs is that a longer
    document costs more, and that the same text always costs the same. (cl100k counts a
    CJK character as one token or two.)

    Parameters
    ----------
    text : str
        The text to count.

    Returns
    -------
    int
        The number of pieces: word runs, other non-space characters, CJK characters.

    Raises
    ------
    InvalidTypeError
        ``text`` is not a str.

    Examples
    --------
    >>> approximate_tokens("verify_token(jwt, keys)")  # verify_token ( jwt , keys )
    6
    >>> approximate_tokens("")
    0
    >>> approximate_tokens("我们把部署改到星期五")  # ten characters, not one run
    10
    """
    if not isinstance(text, str):
        raise InvalidTypeError(f"text must be a str, got {type(text).__name__} {shown(text)}")
    total, start, size = 0, 0, len(text)
    while start < size:  # in slices: a call of the regex engine holds the interpreter
        space = _SPACE.search(text, min(start + _SLICE_CHARS, size))
        end = space.start() if space else size  # at white space, which no piece holds
        total += len(_PIECE.findall(text, start, end))
        start = end
    return total


def checked_counter(token_counter: TokenCounter | None) -> TokenCounter:
    """``token_counter`` (default :func:`~synapse_retriever.approximate_tokens`), checked to
    return a non-negative integer for every text.

    Examples
    --------
    >>> checked_counter(None)("I moved the deploy to Fridays.")  # 6 words and a period
    7
    >>> checked_counter(lambda text: len(text.split()))("I moved the deploy to Fridays.")
    6
    """
    if token_counter is None:
        return approximate_tokens
    if not callable(token_counter):
        raise InvalidTypeError(
            f"token_counter must be a callable str -> int, got {type(token_counter).__name__} "
            f"{shown(token_counter)}"
        )

    def count(text: str) -> int:
        value: Any = token_counter(text)
        if not is_int(value) or value < 0:  # a NumPy integer too
            raise InvalidValueError(
                f"token_counter must return an integer >= 0, got {shown(value)} for {text[:40]!r}"
            )
        return int(value)

    return count


def tiktoken_counter(
    encoding: str = "cl100k_base", *, cache_dir: str | None = None
) -> TokenCounter:
    """A counter with a tiktoken encoding: ``len(encoding.encode(text))``.

    tiktoken fetches the encoding file on first use and caches it (in ``cache_dir``,
    else ``$TIKTOKEN_CACHE_DIR``, else a temporary folder). Offline, point ``cache_dir``
    at a folder that holds it (llama-index-core ships one in ``_static/tiktoken_cache``).

    Raises
    ------
    InvalidValueError
        tiktoken is not installed, or the encoding cannot be loaded (e.g. offline with
        no cached file).

    Examples
    --------
    Not run here: it needs tiktoken and, once, the encoding file (or a cached copy).

    >>> count = tiktoken_counter("cl100k_base", cache_dir="tiktoken_cache")  # doctest: +SKIP
    >>> count("I moved the deploy to Fridays")  # doctest: +SKIP
    6
    >>> memory = ConversationMemory("chat.db", token_counter=count)  # doctest: +SKIP
    """
    try:
        import tiktoken
    except ImportError:
        raise InvalidValueError("tiktoken_counter needs tiktoken (pip install tiktoken)") from None
    with _ENV_LOCK:
        previous = os.environ.get("TIKTOKEN_CACHE_DIR")
        if cache_dir is not None:
            os.environ["TIKTOKEN_CACHE_DIR"] = cache_dir
        try:
            codec = tiktoken.get_encoding(encoding)
        except Exception as exc:
            raise InvalidValueError(
                f"cannot load the tiktoken encoding {encoding!r} ({exc}); offline, pass "
                "cache_dir= a folder holding its cached file"
            ) from None
        finally:
            if cache_dir is not None:
                if previous is None:
                    os.environ.pop("TIKTOKEN_CACHE_DIR", None)
                else:
                    os.environ["TIKTOKEN_CACHE_DIR"] = previous

    def count(text: str) -> int:
        return len(codec.encode(text, disallowed_special=()))

    return count
