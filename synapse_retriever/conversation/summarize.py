"""Condensed versions of a turn: its key sentences (CHUNKS) and one sentence (SUMMARY).

The default :class:`ExtractiveSummarizer` needs no model: it keeps the turn's own
sentences, the most informative first (CHUNKS: whole sentences; SUMMARY: one, in telegram
style, which keeps negations, conditions and quantities but is lossy). Any other
summarizer (an LLM through the LangChain or LlamaIndex adapters) plugs in through the
:class:`Summarizer` protocol; it runs only in the background consolidation, never while a
context is assembled.

Notes
-----
A sentence's informativeness is the sum of the inverse document frequencies of its
distinct content terms (a rare name or number weighs more than "thanks"), divided by
the square root of its term count + 1, so long sentences do not win by length alone.
CHUNKS takes the best sentence, then the next best ones that keep the total within
``chunks_ratio`` of the turn's tokens, in their original order; SUMMARY is the single
best sentence in telegram style (:func:`~.text.telegraphic`: stopwords dropped, but not
a negation, a condition, an order or a quantity).

:func:`focus` does the same with the similarity to a query instead: the sentences of a
recalled turn that match the question, within the same token shares.

Examples
--------
>>> text = "Long day today. The staging database moved to host db-stg-7. Anyway, thanks!"
>>> ExtractiveSummarizer().condense(text, chunks_ratio=0.3, summary_ratio=0.1)
Condensed(chunks='The staging database moved to host db-stg-7.', \
summary='staging database moved to host db-stg-7.')
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import NamedTuple, Protocol, runtime_checkable

import numpy as np

from synapse_retriever._text import blank
from synapse_retriever.conversation.embed import Embedder, Vectors, embedded
from synapse_retriever.conversation.text import sentences, telegraphic, terms
from synapse_retriever.tokens import TokenCounter, approximate_tokens

__all__ = [
    "CHUNKS_PROMPT",
    "SUMMARY_PROMPT",
    "SUMMARY_STYLE",
    "Condensed",
    "ExtractiveSummarizer",
    "PromptSummarizer",
    "Summarizer",
    "focus",
    "restyled",
]

CHUNKS_PROMPT = (
    "Copy the key sentences of the message below: the facts, names, numbers, decisions "
    "and requests, about {words} words in all, in their original order, with nothing "
    "added. Reply with the sentences only.\n\nMessage:\n{text}"
)
"""Prompt for CHUNKS; ``{words}`` is ``chunks_ratio`` of the message's words."""

SUMMARY_PROMPT = (
    "Summarize the message below in one sentence of at most {words} words that keeps its "
    "most important fact (names, numbers, dates exactly). Reply with the sentence only."
    "\n\nMessage:\n{text}"
)
"""Prompt for SUMMARY; ``{words}`` is ``summary_ratio`` of the message's words (at least 8)."""


SUMMARY_STYLE = 2
"""The telegram rule of this release's extractive summaries (:func:`~.text.telegraphic`'s
``style``); each user's memory keeps the one its stored summaries follow (the storage's
``summary_style`` mark) and, opened by a release with a later rule, redoes the ones an
earlier rule made (:func:`restyled`)."""


class Condensed(NamedTuple):
    """A turn's pre-computed CHUNKS and SUMMARY texts.

    Examples
    --------
    >>> condensed = Condensed("We moved the deploy to Fridays.", "moved deploy Fridays.")
    >>> condensed.summary
    'moved deploy Fridays.'
    """

    chunks: str
    summary: str


@runtime_checkable
class Summarizer(Protocol):
    """Condenses a turn's text into key chunks (~``chunks_ratio`` of its tokens) and a
    one-sentence summary (~``summary_ratio``).

    Examples
    --------
    A summarizer that keeps the first sentence (a real one would ask a model: see
    :class:`PromptSummarizer` and the adapters' ``chat_model_summarizer`` and
    ``llm_summarizer``):

    >>> class FirstSentence:
    ...     def condense(self, text, *, chunks_ratio, summary_ratio):
    ...         first = text.split(". ")[0].rstrip(".") + "."
    ...         return Condensed(first, first)
    >>> isinstance(FirstSentence(), Summarizer)
    True
    >>> FirstSentence().condense("Deploys move to Fridays. Coffee?", chunks_ratio=0.3,
    ...                          summary_ratio=0.1)
    Condensed(chunks='Deploys move to Fridays.', summary='Deploys move to Fridays.')
    """

    def condense(self, text: str, *, chunks_ratio: float, summary_ratio: float) -> Condensed:
        """Both condensed versions of ``text``."""
        ...


class ExtractiveSummarizer:
    """Keeps the turn's most informative sentences; no model, deterministic.

    Parameters
    ----------
    token_counter : callable, optional
        Counts tokens for the ratios (default :func:`~synapse_retriever.approximate_tokens`).
    term_weight : callable, optional
        Weight of a content term, e.g. an inverse document frequency over the
        conversation (the memory passes its own); default 1 for every term.

    Examples
    --------
    Three fifths of the tokens (10.8 of 18): the two sentences with rare terms, 5 tokens each.

    >>> weights = {"invoice": 3.0, "42": 3.0, "berlin": 3.0}
    >>> summarizer = ExtractiveSummarizer(term_weight=lambda t: weights.get(t, 1.0))
    >>> text = "Nice weather again. Invoice 42 is late. We met in Berlin. Nice weather again."
    >>> summarizer.condense(text, chunks_ratio=0.6, summary_ratio=0.1).chunks
    'Invoice 42 is late. We met in Berlin.'
    """

    def __init__(
        self,
        token_counter: TokenCounter | None = None,
        term_weight: Callable[[str], float] | None = None,
    ) -> None:
        self.token_counter = token_counter or approximate_tokens
        self.term_weight = term_weight or (lambda term: 1.0)

    def score(self, sentence: str) -> float:
        """Informativeness: Σ weights of distinct content terms / sqrt(term count + 1)."""
        found = terms(sentence)
        return sum(self.term_weight(t) for t in set(found)) / math.sqrt(len(found) + 1)

    def condense(self, text: str, *, chunks_ratio: float, summary_ratio: float) -> Condensed:
        """CHUNKS: the best sentences within ``chunks_ratio`` of the tokens, in order;
        SUMMARY: the best sentence, telegraphic. A text with no sentences gives ``("", "")``.
        """
        parts = sentences(text)
        if not parts:
            return Condensed("", "")
        scores = [self.score(part) for part in parts]
        return Condensed(
            _pick(parts, scores, chunks_ratio, self.token_counter, text),
            telegraphic(_pick(parts, scores, 0.0, self.token_counter, text)),
        )


class PromptSummarizer:
    """Condenses with a language model: any ``prompt -> completion`` callable.

    The LangChain and LlamaIndex adapters wrap a chat model or an LLM in one of these.
    It runs only in background consolidation. An empty completion falls back to the
    extractive default, so a misbehaving model never leaves a turn without a summary.

    Parameters
    ----------
    complete : callable
        Sends a prompt, returns the model's text.
    chunks_prompt, summary_prompt : str
        Templates with ``{text}`` and ``{words}``.
    fallback : Summarizer, optional
        Used when the model returns nothing (default: :class:`ExtractiveSummarizer`).

    Examples
    --------
    >>> echo = PromptSummarizer(lambda prompt: "Deploys move to Fridays.")
    >>> echo.condense("Hi! Deploys move to Fridays. Bye!", chunks_ratio=0.3, summary_ratio=0.1)
    Condensed(chunks='Deploys move to Fridays.', summary='Deploys move to Fridays.')
    """

    def __init__(
        self,
        complete: Callable[[str], str],
        *,
        chunks_prompt: str = CHUNKS_PROMPT,
        summary_prompt: str = SUMMARY_PROMPT,
        fallback: Summarizer | None = None,
    ) -> None:
        self.complete = complete
        self.chunks_prompt = chunks_prompt
        self.summary_prompt = summary_prompt
        self.fallback = fallback or ExtractiveSummarizer()

    def condense(self, text: str, *, chunks_ratio: float, summary_ratio: float) -> Condensed:
        """Two completions, one per prompt; the fallback fills in one that shows nothing."""
        words = len(text.split())
        chunks = self.complete(
            self.chunks_prompt.format(text=text, words=max(1, round(words * chunks_ratio)))
        ).strip()
        summary = self.complete(
            self.summary_prompt.format(text=text, words=max(8, round(words * summary_ratio)))
        ).strip()
        if blank(chunks) or blank(summary):  # "\u200b" is no answer either
            backup = self.fallback.condense(
                text, chunks_ratio=chunks_ratio, summary_ratio=summary_ratio
            )
            chunks = backup.chunks if blank(chunks) else chunks
            summary = backup.summary if blank(summary) else summary
        return Condensed(chunks, summary)


def focus(
    text: str,
    query: Vectors,
    embedder: Embedder,
    *,
    chunks_ratio: float,
    token_counter: TokenCounter,
) -> Condensed:
    """Condense ``text`` around ``query``: its sentences most similar to the query.

    CHUNKS: the best sentence, then the next best that keep the total within
    ``chunks_ratio`` of the tokens, in their order; SUMMARY: the best sentence in
    telegram style. Ties (e.g. sentences sharing nothing with the query) go to the
    earlier sentence.

    Examples
    --------
    >>> from synapse_retriever.conversation.embed import HashingEmbedder
    >>> embedder = HashingEmbedder(dim=256)
    >>> query = embedder.embed(["which host runs the staging database?"])[0]
    >>> text = "Long day. Staging database lives on host db-stg-7. Pizza tonight?"
    >>> focus(text, query, embedder, chunks_ratio=0.3, token_counter=len)
    Condensed(chunks='Staging database lives on host db-stg-7.', \
summary='Staging database lives on host db-stg-7.')
    """
    parts = sentences(text)
    if not parts:
        return Condensed("", "")
    vectors = embedded(embedder, parts)
    scores = [float(s) for s in vectors @ np.asarray(query, dtype=np.float32)]
    return Condensed(
        _pick(parts, scores, chunks_ratio, token_counter, text),
        telegraphic(_pick(parts, scores, 0.0, token_counter, text)),
    )


def _pick(
    parts: Sequence[str],
    scores: Sequence[float],
    ratio: float,
    token_counter: TokenCounter,
    text: str,
) -> str:
    """Best-scored sentences (stable on ties) within ``ratio`` of ``text``'s tokens; in order.

    The best sentence is always kept; the next ones only while the total stays within
    the share (a sentence that would pass it is skipped, a shorter later one may fit).
    """
    order = sorted(range(len(parts)), key=lambda i: -scores[i])
    target = ratio * token_counter(text)
    chosen = [order[0]]
    used = token_counter(parts[order[0]])
    for i in order[1:]:
        tokens = token_counter(parts[i])
        if used + tokens <= target:
            chosen.append(i)
            used += tokens
    return " ".join(parts[i] for i in sorted(chosen))


def restyled(text: str, summary: str) -> str | None:
    """``summary`` in today's telegram style, if release 0.1.0's rule made it from one of
    ``text``'s sentences and today's rule says something else; else None (a model's summary,
    one in today's style already, one that is a whole sentence of ``text``). The sentence is
    looked for as today's split finds them, then as 0.1.0's did (it ended none at ``。`` or
    ``।``).

    Release 0.1.0 dropped every stopword, negations too: its stored summaries may say the
    opposite of their turn. A model's summary is never recognised as one of them unless it
    is, word for word, such a telegram; redoing it then keeps the same sentence's words.

    Examples
    --------
    >>> text = "Long day. The migration did not succeed; do not retry it before Monday."
    >>> restyled(text, "migration succeed; retry Monday.")
    'migration not succeed; not retry before Monday.'
    >>> restyled(text, "The migration failed; retry after Monday.") is None  # a model's
    True
    >>> restyled("Long day.", "Long day.") is None  # the same in either style
    True
    >>> restyled("The rollout is not done。Do not announce it.", "rollout done。Do announce.")
    'rollout not done。Do not announce.'
    """
    if telegraphic(summary, style=1) != summary:  # it holds a stopword: no 0.1.0 telegram
        return None
    split = [sentences(text), sentences(text, style=1)]  # today's, then 0.1.0's
    if any(summary in found for found in split):  # a whole sentence: nothing was dropped
        return None
    for sentence in (sentence for found in split for sentence in found):
        if telegraphic(sentence, style=1) == summary:
            today = telegraphic(sentence)
            return None if today == summary else today
    return None
