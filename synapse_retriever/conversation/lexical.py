"""The lexical channel: BM25 over turns through SQLite FTS5, for retrieve and assemble alike.

A question shares words with its evidence more often than an embedder shows (a name, a
number, a rare word): on both conversation benchmarks BM25 alone beats dense top-k by
far. Every ranking of turns by words goes through this module's :class:`LexicalIndex`, a
private in-memory FTS5 index: a :class:`~synapse_retriever.conversation.ConversationMemory`
keeps one over its user's turns (filled at open, then at every turn added or taken in
from another process), and :func:`~.history.trim_history` one over the messages it trims.

The index lives in the process, not in the database, so that its BM25 statistics (how
many turns hold a word, their average length) are one user's: another user's turns in
the same file or server never change this user's scores, and every backend gives the
same rankings by construction.

Notes
-----
1. **Tokenizer** (:data:`FTS_TOKENIZER`): FTS5's ``porter unicode61 remove_diacritics 2``:
   Unicode word runs, case and diacritics folded, English words reduced to their Porter
   stem. On RealMem (the set settings are chosen on) it found 2.8 points more gold
   sessions at k = 10 than the plain tokenizer without stems; on LoCoMo, which confirms,
   3.7 points more evidence turns.
2. **Words** (:func:`spaced`, :func:`~.text.word_text`, for the index and the query alike):
   Python's Unicode tables decide what a word is, not FTS5's older ones (which read newer
   emoji as letters: "thanks🥰" was one word). The text is case-folded (``ß`` is ``ss``) and
   composed, and the letters search engines fold are folded (Greek accents, ``ё``, Turkish
   ``ı``, Arabic's alef forms, teh marbuta and tatweel, Persian yeh and kaf, full- and
   half-width forms); combining marks stay in their word (``categories 'L* N* M*'``: the
   vowel signs of Devanagari, Tamil, Bengali and the other Indic scripts are marks, and
   ``unicode61`` alone cut every such word into pieces a query could not find); Hebrew
   points, Arabic harakat, Devanagari's nukta and joiners inside a word are dropped, and
   its candrabindu read as anusvara (a word written with them or without is one, as ``é``
   is ``e``), but in Arabic script a non-joiner parts a word's pieces, as a space does
   (Persian ``کتاب‌ها``, books, holds ``کتاب``); what is no part of a word (punctuation,
   symbols, emoji, private use, a mark after no letter) is a space. Thai, Lao, Myanmar,
   Khmer and the other scripts written without spaces between words are still cut at their
   marks, as before: pieces of one letter are left out of a query, so many of their words
   cannot be searched by BM25 (that needs a word segmenter). Of RealMem's and LoCoMo's
   114,019 texts, 27 tokenize otherwise than before: emoji no longer indexed as words (no
   query could match them), ``ß``, ``ı`` and Arabic's alef and teh marbuta folded, and one
   word with a mark.
3. **Query** (:func:`match_expression`): the query's distinct words, read as above,
   without stop words (:data:`~.text.STOPWORDS`) and one-letter words (a letter and its
   marks), at most :data:`MAX_QUERY_TERMS`, each quoted as an FTS5 string and joined by
   ``OR``; ``_`` separates words, as in the index. Nothing a user types is read as FTS5
   syntax; a query of only stop words matches nothing.
4. **Score**: ``-bm25()`` (FTS5's Okapi BM25, k1 = 1.2, b = 0.75, over the texts indexed
   now; higher is better), best first.

References
----------
Robertson and Zaragoza (2009), The probabilistic relevance framework: BM25 and beyond.
SQLite FTS5 (https://sqlite.org/fts5.html): the ``bm25()`` function and tokenizers.

Examples
--------
Two of five texts hold the stem ``deploy``: idf = ln((5 − 2 + 0.5) / (2 + 0.5)) = 0.3365;
the texts have 5, 3, 4, 2 and 1 tokens (stop words count in the index), so avgdl = 3,
and the 4-token text scores 0.3365 × 2.2 / (1 + 1.2 (0.25 + 0.75 × 4/3)) = 0.296, the
5-token one 0.3365 × 2.2 / (1 + 1.2 (0.25 + 0.75 × 5/3)) = 0.264:

>>> index = LexicalIndex(["The deploy moved to Fridays.", "Lunch at noon?",
...                       "Deploying broke the build", "Tests pass.", "Coffee?"])
>>> [(row, round(score, 3)) for row, score in index.top("when do we deploy?", 5)]
[(2, 0.296), (0, 0.264)]
>>> index.top("what is it?", 5)  # only stop words: nothing to match
[]
"""

from __future__ import annotations

import re
import sqlite3
from collections.abc import Iterable

from synapse_retriever.conversation.text import STOPWORDS, WORD_MARKS, letters, number, word_text
from synapse_retriever.tokens import CJK

__all__ = [
    "FTS_TOKENIZER",
    "MAX_QUERY_TERMS",
    "LexicalIndex",
    "fts_table",
    "match_expression",
    "spaced",
    "top_matches",
]

FTS_TOKENIZER = "porter unicode61 remove_diacritics 2 categories 'L* N* M*'"
"""The FTS5 tokenizer of every lexical index (see the module notes)."""

MAX_QUERY_TERMS = 64
"""The most distinct words of a query the lexical index is asked for (the first ones)."""


# a CJK character is a word of its own; any other word is letters and digits with their
# marks ("_" is FTS5's separator: "a_b" is two words, never a phrase of hostile length)
_QUERY_WORD = re.compile(rf"[{CJK}]|[^\W_{CJK}](?:[^\W_{CJK}]|[{WORD_MARKS}])*")
_CJK_CHARACTER = re.compile(rf"([{CJK}])")


def spaced(text: str) -> str:
    """``text`` as the index and its queries read it (:func:`~.text.word_text`: case-folded,
    composed, its marks as the module notes say, a space for what is no part of a word),
    each Chinese, Japanese or Korean character set apart by spaces (FTS5's ``unicode61``
    would take a run of them, a whole clause, for one word, and a question that did not
    repeat the clause found nothing).

    Examples
    --------
    >>> spaced("部署改到星期五, OK")
    ' 部  署  改  到  星  期  五 , ok'
    """
    # read as the queries are: Korean typed as jamo (NFD) is its syllables
    return _CJK_CHARACTER.sub(r" \1 ", word_text(text))


def match_expression(query: str) -> str:
    """The FTS5 ``MATCH`` expression for ``query``: its distinct content words, quoted, OR-ed.

    Words are runs of letters and digits with their marks, read as :func:`spaced` reads the
    index's texts (case-folded, composed: a letter typed with a combining accent is one
    letter; ``_`` separates); stop words and one-letter words (but digits) are left out,
    and at most :data:`MAX_QUERY_TERMS` words are kept. Each is quoted as an FTS5 string, so
    nothing in a query is read as FTS5 syntax (``"``, ``*``, ``NEAR(``, ``-``, ``AND``):
    punctuation only separates words. An empty result (a blank query, only stop words)
    matches nothing.

    Examples
    --------
    >>> match_expression('Why did the "deploy" fail -- NEAR(x*, AND)? OR 42')
    '"deploy" OR "fail" OR "near" OR "42"'
    >>> match_expression("what is it?")
    ''
    >>> match_expression("部署什么时候")  # one word per CJK character
    '"部" OR "署" OR "什" OR "么" OR "时" OR "候"'
    """
    words: list[str] = []
    # composed first: "u" + U+0308 (macOS input, text copied from a PDF) is one letter "ü",
    # as the index reads it, not a word cut in two at the mark
    for word in dict.fromkeys(_QUERY_WORD.findall(word_text(query))):
        if word in STOPWORDS or (letters(word) < 2 and not number(word) and not _cjk(word)):
            continue
        words.append(word)
        if len(words) == MAX_QUERY_TERMS:
            break
    return " OR ".join(f'"{word}"' for word in words)


def _cjk(word: str) -> bool:
    return bool(_CJK_CHARACTER.match(word))


def fts_table(name: str) -> str:
    """The ``CREATE VIRTUAL TABLE`` statement of a contentless FTS5 index over one ``text``
    column: it keeps the terms, their positions and each text's length (all ``bm25()``
    reads), not the texts themselves (the caller has them), a third of the memory.

    Examples
    --------
    >>> print(fts_table("t"))
    CREATE VIRTUAL TABLE t USING fts5(text, content='',
        tokenize="porter unicode61 remove_diacritics 2 categories 'L* N* M*'")
    """
    tokenize = f'tokenize="{FTS_TOKENIZER}"'
    return f"CREATE VIRTUAL TABLE {name} USING fts5(text, content='',\n    {tokenize})"


def top_matches(
    db: sqlite3.Connection, table: str, query: str, limit: int
) -> list[tuple[int, float]]:
    """The ``limit`` rows of FTS5 ``table`` best matching ``query`` by BM25: ``(rowid,
    score)``, best first, score ``-bm25()``; ``[]`` when the query has no content word."""
    expression = match_expression(query)
    if not expression or limit <= 0:
        return []
    rows = db.execute(
        f"SELECT rowid, -bm25({table}) FROM {table} WHERE {table} MATCH ? ORDER BY rank LIMIT ?",
        (expression, limit),
    ).fetchall()
    return [(int(row), float(score)) for row, score in rows]


class LexicalIndex:
    """A private in-memory FTS5 index over texts, rows counted from 0 in the order added.

    A :class:`~synapse_retriever.conversation.ConversationMemory` keeps one over its user's
    turns (row ``i`` is its ``i``-th turn); a message list trimmed to a budget and a
    benchmark's plain BM25 row use one too. The memory calls it under its own lock.
    """

    def __init__(self, texts: Iterable[str] = ()) -> None:
        self._db = sqlite3.connect(":memory:", check_same_thread=False)
        self._db.execute(fts_table("texts"))
        self._count = 0
        self.add(texts)

    def __len__(self) -> int:
        return self._count

    def add(self, texts: Iterable[str]) -> None:
        """Index more texts (rows ``len(self)`` onwards).

        When the index at least doubles (a memory's turns read at open), its segments are
        merged into one (FTS5's ``optimize``): the same scores, read from one b-tree
        instead of many (at 100,000 turns: p50 0.25 ms a query instead of 0.35), for about
        a fifth more than the inserts cost, once per doubling.
        """
        rows = [(self._count + i, spaced(text)) for i, text in enumerate(texts)]
        with self._db:  # one transaction
            self._db.executemany("INSERT INTO texts (rowid, text) VALUES (?, ?)", rows)
            if rows and len(rows) >= self._count:
                self._db.execute("INSERT INTO texts (texts) VALUES ('optimize')")
        self._count += len(rows)

    def top(self, query: str, limit: int) -> list[tuple[int, float]]:
        """The ``limit`` best rows for ``query`` by BM25, ``(row, score)``, best first."""
        return top_matches(self._db, "texts", query, limit)

    def scores(self, query: str) -> list[float]:
        """Every row's BM25 score for ``query`` (0.0 where it shares no word)."""
        scores = [0.0] * self._count
        for row, score in self.top(query, self._count):
            scores[row] = score
        return scores
