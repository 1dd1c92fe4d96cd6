"""Token counts for a strict token budget, when the caller brings no tokenizer.

Adapters accept any ``text -> int`` counter (``len(encoding.encode(text))`` with
tiktoken, a Hugging Face tokenizer...); :func:`approximate_tokens` is their default.

Examples
--------
>>> approximate_tokens("def load_keys(): ...")
8
"""

from __future__ import annotations

import re

from synapse_retriever.errors import InvalidTypeError

__all__ = ["approximate_tokens"]

_PIECE = re.compile(r"\w+|[^\w\s]")


def approximate_tokens(text: str) -> int:
    """Approximate token count: one per run of word characters, one per other non-space character.

    Subword tokenizers split long or rare words further, so this undercounts them, but it
    grows with the text the way they do: what a strict budget needs is that a longer
    document costs more, and that the same text always costs the same.

    Parameters
    ----------
    text : str
        The text to count.

    Returns
    -------
    int
        The number of pieces matched by ``\\w+|[^\\w\\s]``.

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
    """
    if not isinstance(text, str):
        raise InvalidTypeError(f"text must be a str, got {type(text).__name__}")
    return len(_PIECE.findall(text))
