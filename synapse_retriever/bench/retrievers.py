"""Offline, deterministic vector baselines for the quality benchmark: TF-IDF and BM25.

A retriever is fitted once on the repository's files at the split point (collection
statistics: document frequencies, average length), then scores each query against
the files of the query's own tree. A file's representation depends only on its path
and content, so it is computed once per blob and reused across queries.

A retriever is any object with ``name``, ``fit(documents)`` and
``search(query, documents, k)``; register another one in :data:`RETRIEVERS`.
``minilm`` is a dense baseline (all-MiniLM-L6-v2, int8 ONNX) that runs only where its
optional packages are installed; it never downloads anything.

Examples
--------
>>> docs = [Document("auth/jwt.py", "1", lambda: "def verify_token(token): ..."),
...         Document("docs/index.md", "2", lambda: "Welcome to the project")]
>>> retriever = TfidfRetriever()
>>> retriever.fit(docs)
>>> [path for path, _ in retriever.search("Verify JWT tokens", docs, k=1)]
['auth/jwt.py']
"""

from __future__ import annotations

import hashlib
import math
import os
import re
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

import numpy as np

from synapse_retriever.conversation.minilm import MiniLmEncoder

__all__ = [
    "RETRIEVERS",
    "Bm25Retriever",
    "Document",
    "MiniLmRetriever",
    "Retriever",
    "TfidfRetriever",
    "tokenize",
]

_PIECE = re.compile(r"[A-Z]+(?=[A-Z][a-z])|[A-Z]?[a-z]+|[A-Z]+|[0-9]+")
_STOP = frozenset(
    re.findall(
        r"\S+",
        """
    a an and are as at be been but by can could did do does for from had has have how if in
    into is it its it's may more most no not of on or our should so such than that the their
    them then there these they this to too was we were what when where which while who why will
    with would you your also only use used using via per
    """,
    )
)


def tokenize(text: str) -> list[str]:
    """Lower-cased word pieces: identifiers split at ``_``, ``.``, ``/`` and camelCase.

    Pieces shorter than 2 characters, numbers and common English words are dropped; a
    trailing plural ``s`` is removed from words longer than 3 letters (not ``ss``).

    Examples
    --------
    >>> tokenize("Fix HTTPServer.make_class() for tests/test_funcs.py (#123)")
    ['fix', 'http', 'server', 'make', 'class', 'test', 'test', 'func', 'py']
    """
    tokens = []
    for piece in _PIECE.findall(text):
        token = piece.lower()
        if len(token) < 2 or token.isdigit() or token in _STOP:
            continue
        if len(token) > 3 and token.endswith("s") and not token.endswith("ss"):
            token = token[:-1]
        tokens.append(token)
    return tokens


@dataclass(frozen=True)
class Document:
    """A file as a retriever sees it.

    ``key`` identifies the content (the blob id) so that representations are cached;
    ``load`` reads the text on demand (only on a cache miss).
    """

    path: str
    key: str
    load: Callable[[], str]


class Retriever(Protocol):
    """What the benchmark needs of a vector baseline."""

    name: str

    def fit(self, documents: Sequence[Document]) -> None:
        """Compute collection statistics once (the benchmark fits at the split point)."""
        ...

    def search(self, query: str, documents: Sequence[Document], k: int) -> list[tuple[str, float]]:
        """The ``k`` best documents as ``(path, score)``, best first; ties by path."""
        ...


class _Bag:
    """Token counts of documents, cached by (path, content key)."""

    def __init__(self) -> None:
        self._cache: dict[tuple[str, str], tuple[Counter[str], float]] = {}

    def counts(self, document: Document) -> tuple[Counter[str], float]:
        key = (document.path, document.key)
        found = self._cache.get(key)
        if found is None:
            counts = Counter(tokenize(document.path))
            counts.update(tokenize(document.load()))
            found = (counts, float(sum(counts.values())))
            self._cache[key] = found
        return found


def _top(
    scored: list[tuple[float, str]], documents: Sequence[Document], k: int
) -> list[tuple[str, float]]:
    """The ``k`` best, filled with unscored documents (by path) so a top-k has k entries."""
    scored.sort(key=lambda pair: (-pair[0], pair[1]))
    best = [(path, score) for score, path in scored[:k] if score > 0.0]
    if len(best) < k:
        taken = {path for path, _ in best}
        rest = sorted(d.path for d in documents if d.path not in taken)
        best.extend((path, 0.0) for path in rest[: k - len(best)])
    return best


class TfidfRetriever:
    """Cosine similarity of TF-IDF vectors: a deterministic sparse embedding.

    Notes
    -----
    With N documents at fit time and df(t) the number containing term t::

        idf(t) = ln((1 + N) / (1 + df(t))) + 1
        w(t, d) = (1 + ln tf(t, d)) × idf(t)
        score(q, d) = Σ_t w(t, q) × w(t, d) / (|w(q)| × |w(d)|)

    A term unseen at fit time gets the largest idf, ln(1 + N) + 1.

    Examples
    --------
    >>> docs = [Document("a.py", "1", lambda: "alpha beta"), Document("b.py", "2", lambda: "beta")]
    >>> r = TfidfRetriever()
    >>> r.fit(docs)
    >>> round(r.idf("alpha"), 4), round(r.idf("beta"), 4)  # ln(3/2) + 1, ln(3/3) + 1
    (1.4055, 1.0)
    """

    name = "tfidf"

    def __init__(self) -> None:
        self._bag = _Bag()
        self._df: Counter[str] = Counter()
        self._n = 0
        self._norms: dict[tuple[str, str], float] = {}

    def fit(self, documents: Sequence[Document]) -> None:
        self._df = Counter()
        for document in documents:
            self._df.update(self._bag.counts(document)[0].keys())
        self._n = len(documents)
        self._norms = {}

    def idf(self, term: str) -> float:
        """Smoothed inverse document frequency of ``term`` at fit time."""
        return math.log((1 + self._n) / (1 + self._df.get(term, 0))) + 1.0

    def _norm(self, document: Document) -> float:
        key = (document.path, document.key)
        norm = self._norms.get(key)
        if norm is None:
            counts = self._bag.counts(document)[0]
            norm = math.sqrt(
                sum(((1.0 + math.log(tf)) * self.idf(term)) ** 2 for term, tf in counts.items())
            )
            self._norms[key] = norm
        return norm

    def search(self, query: str, documents: Sequence[Document], k: int) -> list[tuple[str, float]]:
        weights = {
            term: (1.0 + math.log(tf)) * self.idf(term)
            for term, tf in Counter(tokenize(query)).items()
        }
        q_norm = math.sqrt(sum(w * w for w in weights.values()))
        scored: list[tuple[float, str]] = []
        if q_norm > 0.0:
            for document in documents:
                counts = self._bag.counts(document)[0]
                dot = 0.0
                for term, qw in weights.items():
                    tf = counts.get(term)
                    if tf:
                        dot += qw * (1.0 + math.log(tf)) * self.idf(term)
                if dot > 0.0:
                    scored.append((dot / (q_norm * self._norm(document)), document.path))
        return _top(scored, documents, k)


class Bm25Retriever:
    """Okapi BM25 over path and content tokens.

    Notes
    -----
    With N documents and average length L̄ at fit time, |d| the length of d::

        idf(t) = ln(1 + (N − df(t) + 0.5) / (df(t) + 0.5))
        score(q, d) = Σ_{t ∈ q} idf(t) × tf × (k1 + 1) / (tf + k1 × (1 − b + b × |d| / L̄))

    Each distinct query term counts once; k1 = 1.2, b = 0.75.

    Examples
    --------
    >>> docs = [Document("a.py", "1", lambda: "alpha beta"), Document("b.py", "2", lambda: "beta")]
    >>> r = Bm25Retriever()
    >>> r.fit(docs)
    >>> round(r.idf("alpha"), 4)  # ln(1 + 1.5 / 1.5)
    0.6931
    """

    name = "bm25"

    def __init__(self, *, k1: float = 1.2, b: float = 0.75) -> None:
        self.k1 = k1
        self.b = b
        self._bag = _Bag()
        self._df: Counter[str] = Counter()
        self._n = 0
        self._average = 1.0

    def fit(self, documents: Sequence[Document]) -> None:
        self._df = Counter()
        total = 0.0
        for document in documents:
            counts, length = self._bag.counts(document)
            self._df.update(counts.keys())
            total += length
        self._n = len(documents)
        self._average = total / self._n if self._n and total > 0 else 1.0

    def idf(self, term: str) -> float:
        """BM25 inverse document frequency of ``term`` at fit time."""
        df = self._df.get(term, 0)
        return math.log(1.0 + (self._n - df + 0.5) / (df + 0.5))

    def search(self, query: str, documents: Sequence[Document], k: int) -> list[tuple[str, float]]:
        terms = [(term, self.idf(term)) for term in dict.fromkeys(tokenize(query))]
        k1, b = self.k1, self.b
        scored: list[tuple[float, str]] = []
        if terms:
            for document in documents:
                counts, length = self._bag.counts(document)
                norm = k1 * (1.0 - b + b * length / self._average)
                score = 0.0
                for term, idf in terms:
                    tf = counts.get(term)
                    if tf:
                        score += idf * tf * (k1 + 1.0) / (tf + norm)
                if score > 0.0:
                    scored.append((score, document.path))
        return _top(scored, documents, k)


class MiniLmRetriever:
    """Dense baseline: cosine similarity of all-MiniLM-L6-v2 sentence embeddings.

    Each document is embedded once per content (its path, a newline, then its text,
    truncated to ``max_tokens`` WordPiece tokens); the query is the commit message.
    Embeddings are mean-pooled over the attention mask and L2-normalized, so the score
    is a dot product. With ``cache_dir`` (default: ``$SYNAPSE_EMBEDDING_CACHE`` if set)
    embeddings persist in one ``.npy`` file per content, keyed by a hash of path, key
    and ``max_tokens``. Everything runs offline on the CPU (``threads`` intra-op
    threads); nothing is downloaded.
    """

    name = "minilm"

    def __init__(
        self,
        *,
        max_tokens: int = 128,
        batch: int = 32,
        threads: int = 2,
        cache_dir: str | None = None,
    ) -> None:
        self._encoder = MiniLmEncoder(max_tokens=max_tokens, batch=batch, threads=threads)
        self.max_tokens = max_tokens
        self.cache_dir = (
            cache_dir if cache_dir is not None else os.environ.get("SYNAPSE_EMBEDDING_CACHE")
        )
        if self.cache_dir:
            os.makedirs(self.cache_dir, exist_ok=True)
        self._vectors: dict[tuple[str, str], np.ndarray[Any, np.dtype[np.float32]]] = {}

    def embed(self, texts: Sequence[str]) -> np.ndarray[Any, np.dtype[np.float32]]:
        """Unit-length embeddings of ``texts``, one row each (384 columns)."""
        return self._encoder.encode(texts)

    def _cache_path(self, key: tuple[str, str]) -> str | None:
        if not self.cache_dir:
            return None
        digest = hashlib.sha1(f"{key[0]}\0{key[1]}\0{self.max_tokens}".encode()).hexdigest()
        return os.path.join(self.cache_dir, digest + ".npy")

    def _ensure(self, documents: Sequence[Document]) -> None:
        todo: list[Document] = []
        for document in documents:
            key = (document.path, document.key)
            if key in self._vectors:
                continue
            path = self._cache_path(key)
            if path is not None and os.path.exists(path):
                self._vectors[key] = np.load(path)
            else:
                todo.append(document)
        if todo:
            texts = [f"{d.path}\n{d.load()[: 16 * self.max_tokens]}" for d in todo]
            for document, vector in zip(todo, self.embed(texts), strict=True):
                key = (document.path, document.key)
                self._vectors[key] = vector
                path = self._cache_path(key)
                if path is not None:
                    np.save(path, vector)

    def fit(self, documents: Sequence[Document]) -> None:
        self._ensure(documents)

    def search(self, query: str, documents: Sequence[Document], k: int) -> list[tuple[str, float]]:
        if not documents:
            return []
        self._ensure(documents)
        matrix = np.stack([self._vectors[(d.path, d.key)] for d in documents])
        scores = matrix @ self.embed([query])[0]
        scored = [(float(s), d.path) for s, d in zip(scores.tolist(), documents, strict=True)]
        return _top(scored, documents, k)


RETRIEVERS: dict[str, Callable[[], Retriever]] = {
    "tfidf": TfidfRetriever,
    "bm25": Bm25Retriever,
    "minilm": MiniLmRetriever,
}
"""Vector baselines by name; ``tfidf`` is the default; ``minilm`` needs optional packages."""
