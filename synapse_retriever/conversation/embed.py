"""Similarity between turns: a pluggable embedder and a FAISS index of turn vectors.

Every similarity of the conversation memory (surprise, habituation, relevance to the
query) is the inner product of L2-normalized vectors, clipped to [0, 1]. Nearest-turn
search runs in FAISS (an exact ``IndexFlatIP``), never in a Python loop over turns.

The default :class:`HashingEmbedder` needs no model and no network: each content term
(see :func:`~synapse_retriever.conversation.text.terms`) is hashed into one of ``dim``
signed buckets, counts are damped to 1 + log(count), and the vector is normalized.
Texts sharing terms are close, texts sharing none are orthogonal. Any other embedder
(a sentence-transformer, an API) plugs in through the :class:`Embedder` protocol, and a
framework's embeddings (LangChain, LlamaIndex) through the adapter its integration package
registers (see :func:`as_embedder`).

Examples
--------
>>> embedder = HashingEmbedder(dim=64)
>>> index = TurnIndex(embedder.dim)
>>> index.add(embedder.embed(["deploy on fridays", "lunch was great"]))
>>> round(index.nearest(embedder.embed(["fridays deploy"])[0]), 3)
1.0
"""

from __future__ import annotations

import hashlib
import inspect
import logging
import math
import threading
from collections import Counter, OrderedDict
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from importlib.metadata import entry_points
from numbers import Integral
from typing import Protocol, cast, runtime_checkable

import numpy as np
import numpy.typing as npt

from synapse_retriever.errors import MissingExtraError, shown

try:
    import faiss
except ImportError as exc:  # the store runs without it; only this index needs it
    raise MissingExtraError(
        "the conversation memory needs faiss-cpu: pip install 'synapse-retriever[conversation]'"
    ) from exc

from synapse_retriever.capture.coactivation import check_unicode
from synapse_retriever.conversation.text import latin_folded, terms
from synapse_retriever.errors import InvalidTypeError, InvalidValueError, refused_number

__all__ = [
    "EMBEDDER_ADAPTERS",
    "EXACT_BELOW",
    "NPROBE",
    "CachedEmbedder",
    "Embedder",
    "HashingEmbedder",
    "TurnIndex",
    "Vectors",
    "as_embedder",
    "checked_embedder",
    "embedded",
    "embedder_dim",
    "embedder_rows",
    "model_rows",
    "normalized",
    "text_list",
]

log = logging.getLogger(__name__)

EMBEDDER_ADAPTERS = "synapse_retriever.embedders"
"""The entry-point group of embedder adapters: each entry is a callable
``(obj) -> Embedder | None`` that returns an embedder for the objects it knows, else None."""

Vectors = npt.NDArray[np.float32]
"""A (rows, dim) float32 matrix of L2-normalized vectors (a zero row for an empty text)."""


@runtime_checkable
class Embedder(Protocol):
    """Turns texts into vectors; the memory normalizes them.

    ``name`` identifies the vector space: vectors stored under another name are
    recomputed when a memory is reopened with a different embedder.

    Examples
    --------
    Any object with ``name``, ``dim`` and ``embed(texts)`` will do (a sentence-transformer
    wrapped in three lines, an embedding API...); here, letter counts:

    >>> import numpy as np
    >>> class Letters:
    ...     name, dim = "letters-v1", 26
    ...     def embed(self, texts):
    ...         rows = np.zeros((len(texts), 26))
    ...         for row, text in enumerate(texts):
    ...             for char in text.lower():
    ...                 if "a" <= char <= "z":
    ...                     rows[row, ord(char) - ord("a")] += 1
    ...         return rows
    >>> isinstance(Letters(), Embedder)
    True
    >>> from synapse_retriever.conversation import ConversationMemory
    >>> with ConversationMemory(":memory:", embedder=Letters()) as memory:
    ...     memory.add_turn("I moved the deploy to Fridays.", at=0)
    1
    """

    @property
    def name(self) -> str:
        """A stable identifier of the model and its settings."""
        ...

    @property
    def dim(self) -> int:
        """The vector length."""
        ...

    def embed(self, texts: Sequence[str]) -> npt.NDArray[np.floating]:
        """One row per text."""
        ...


def _satisfies_protocol(obj: object) -> bool:
    """``name``, ``dim`` and a callable ``embed`` on an instance, found without calling anything.

    ``isinstance(obj, Embedder)`` would do on Python 3.12+, but on 3.11 it reads the
    properties, and an adapter's ``dim`` may embed a probe text to find its value.
    """
    if isinstance(obj, type):  # the class itself, not an instance of it
        return False
    missing = object()
    found = [inspect.getattr_static(obj, attr, missing) for attr in ("name", "dim", "embed")]
    return all(value is not missing for value in found) and callable(found[2])


def as_embedder(obj: object) -> Embedder:
    """``obj`` as an :class:`Embedder`: itself, or what an installed adapter makes of it.

    An object that already has ``name``, ``dim`` and ``embed(texts)`` is returned as it
    is. Anything else (a LangChain ``Embeddings``, a LlamaIndex ``BaseEmbedding``) is
    offered to the adapters that installed packages register under the entry-point
    group ``synapse_retriever.embedders``, in the order of their names; the first that
    returns an embedder wins. The core imports no framework: ``langchain-synapse-retriever``
    adapts LangChain's embeddings, ``llama-index-postprocessor-synapse`` LlamaIndex's.
    Every ``embedder=`` of the conversation memory goes through this function.

    Parameters
    ----------
    obj : object
        An embedder, or a framework's embeddings model.

    Returns
    -------
    Embedder
        ``obj`` itself, or an adapter around it.

    Raises
    ------
    InvalidTypeError
        No adapter takes ``obj`` (the message names its type and the packages that
        adapt the frameworks' embeddings), or an adapter returned something that is
        not an embedder.

    Examples
    --------
    >>> embedder = HashingEmbedder(dim=64)
    >>> as_embedder(embedder) is embedder
    True
    >>> try:
    ...     as_embedder("all-MiniLM-L6-v2")
    ... except TypeError as error:  # an InvalidTypeError is a TypeError too
    ...     print(str(error).split(";")[0])
    embedder must have name, dim and embed(texts), got str

    Notes
    -----
    An adapter package registers its function in its ``pyproject.toml``::

        [project.entry-points."synapse_retriever.embedders"]
        langchain = "langchain_synapse_retriever.embeddings:from_framework"

    An adapter whose package fails to import is skipped with a warning in the log, so
    a broken install of one framework does not stop another's embeddings.
    """
    if _satisfies_protocol(obj):
        return cast(Embedder, obj)
    for entry in sorted(entry_points(group=EMBEDDER_ADAPTERS), key=lambda e: (e.name, e.value)):
        try:
            adapter = entry.load()
        except ImportError as error:
            log.warning("embedder adapter %r (%s) did not load: %s", entry.name, entry.value, error)
            continue
        adapted = adapter(obj)
        if adapted is None:
            continue
        if not _satisfies_protocol(adapted):
            raise InvalidTypeError(
                f"embedder adapter {entry.name!r} ({entry.value}) returned "
                f"{type(adapted).__name__}, which has no name, dim and embed(texts)"
            )
        return cast(Embedder, adapted)
    what = f"the class {obj.__name__}" if isinstance(obj, type) else type(obj).__name__
    raise InvalidTypeError(
        f"embedder must have name, dim and embed(texts), got {what}; LangChain embeddings "
        "are adapted by the langchain-synapse-retriever package and LlamaIndex embeddings by "
        "llama-index-postprocessor-synapse (pip install the one for your framework)"
    )


def normalized(vectors: npt.ArrayLike, dim: int) -> Vectors:
    """``vectors`` as a C-contiguous float32 (rows, dim) matrix of unit rows (zero rows stay 0).

    Raises
    ------
    InvalidValueError
        The shape is not (rows, dim), or a value is not finite.

    Examples
    --------
    >>> normalized([[3.0, 4.0], [0.0, 0.0]], 2).tolist()
    [[0.6000000238418579, 0.800000011920929], [0.0, 0.0]]
    """
    matrix = np.array(vectors, dtype=np.float32, ndmin=2)
    if matrix.ndim != 2 or matrix.shape[1] != dim:
        raise InvalidValueError(f"embedder returned shape {matrix.shape}, expected (rows, {dim})")
    if not np.all(np.isfinite(matrix)):
        raise InvalidValueError("embedder returned a non-finite value")
    norms = np.linalg.norm(matrix, axis=1, keepdims=True)
    return np.ascontiguousarray(matrix / np.where(norms > 0, norms, 1.0), dtype=np.float32)


def embedded(embedder: Embedder, texts: Sequence[str]) -> Vectors:
    """``texts`` through ``embedder``, one unit row per text (:func:`normalized`).

    Raises
    ------
    InvalidValueError
        The embedder returned another number of rows than texts, another width than its
        ``dim``, or a value that is not finite.

    Examples
    --------
    >>> embedded(HashingEmbedder(dim=8), ["deploy", "lunch"]).shape
    (2, 8)
    """
    return normalized(embedder_rows(embedder, texts), embedder.dim)


def embedder_rows(embedder: Embedder, texts: Sequence[str]) -> npt.NDArray[np.float32]:
    """What ``embedder`` returns for ``texts``, as float32 rows, not normalized: checked as
    :func:`embedded` checks them.

    Examples
    --------
    >>> embedder_rows(HashingEmbedder(dim=8), ["deploy"]).shape
    (1, 8)
    """
    rows = np.array(embedder.embed(list(texts)), dtype=np.float32, ndmin=2)
    normalized(rows, embedder.dim)  # its width and values checked
    if len(rows) != len(texts):
        raise InvalidValueError(
            f"embedder {embedder.name!r} returned {len(rows)} vectors for {len(texts)} texts"
        )
    return rows


class CachedEmbedder:
    """An embedder that keeps the vectors of the ``max_texts`` texts it embedded last.

    What repeats a conversation's texts wants: LangChain's ``SynapseMemoryMiddleware``
    trims the whole history before every model call, so without it each message is
    embedded again at every call (a paid model's tokens, each time). A text is embedded
    once while it stays among the last ``max_texts``: a thread that meets a text another
    is embedding waits for it, and asks for it only if that call failed or the text was
    dropped since. Each vector is what the wrapped embedder returned for that text, so
    where it returns the same vector for a text in any batch (the core's embedders do),
    what uses them is unchanged to the bit. An embedder that
    calls its model ``batch_size`` texts at a time (LangChain's, through
    :func:`as_embedder`) is asked for one batch at a time, each kept as it arrives: a batch
    that fails loses none of the (paid) vectors before it, and asked again it embeds only
    what is still missing. Safe to share between threads; it asks its embedder for nothing
    until it is asked for a vector.

    Parameters
    ----------
    embedder : Embedder
        The embedder to call for texts not kept (or a framework's, through
        :func:`as_embedder`).
    max_texts : int
        Texts whose vectors are kept, the least recently used dropped first.

    Examples
    --------
    >>> class Counting(HashingEmbedder):
    ...     calls = []
    ...     def embed(self, texts):
    ...         self.calls.append(list(texts))
    ...         return super().embed(texts)
    >>> cached = CachedEmbedder(Counting(dim=8))
    >>> cached.embed(["deploy", "lunch"]).shape
    (2, 8)
    >>> _ = cached.embed(["lunch", "friday", "friday"])
    >>> Counting.calls
    [['deploy', 'lunch'], ['friday']]
    """

    def __init__(self, embedder: object, max_texts: int = 4096) -> None:
        if isinstance(max_texts, bool) or not isinstance(max_texts, Integral):
            raise InvalidTypeError(
                f"max_texts must be an int, got {type(max_texts).__name__} {shown(max_texts)}"
            )
        if max_texts < 1:
            raise InvalidValueError(f"max_texts must be >= 1, got {max_texts}")
        self.embedder: Embedder = as_embedder(embedder)
        self.max_texts: int = int(max_texts)
        self._rows: OrderedDict[str, npt.NDArray[np.float32]] = OrderedDict()
        self._pending: dict[str, threading.Event] = {}  # texts being embedded, by whom's event
        self._lock: threading.Lock = threading.Lock()

    @property
    def name(self) -> str:
        """The wrapped embedder's name: vectors stored under it are the same."""
        return self.embedder.name

    @property
    def dim(self) -> int:
        """The wrapped embedder's vector length (read when asked: a framework's embedder
        learns it from its first embedding)."""
        return self.embedder.dim

    def embed(self, texts: Sequence[str]) -> npt.NDArray[np.float32]:
        """The rows of ``texts``: those kept, and the others from the wrapped embedder, each
        distinct text once, in one call or one per batch of its ``batch_size``; a text
        another thread is embedding is waited for, not asked again."""
        texts = text_list(texts)
        wanted = list(dict.fromkeys(texts))
        found: dict[str, npt.NDArray[np.float32]] = {}
        while len(found) < len(wanted):
            with self._lock:
                for text in wanted:
                    if text not in found and text in self._rows:
                        found[text] = self._rows[text]
                        self._rows.move_to_end(text)
                missing = [text for text in wanted if text not in found]
                theirs = {self._pending[text] for text in missing if text in self._pending}
                mine = [text for text in missing if text not in self._pending]
                done = threading.Event()
                self._pending.update(dict.fromkeys(mine, done))
            try:
                self._embed_missing(mine, found)
            finally:
                with self._lock:
                    for text in mine:
                        del self._pending[text]
                done.set()
            for other in theirs:  # then kept, or gone (failed, or dropped): asked next round
                other.wait()
        if not texts:
            return np.zeros((0, self.dim), np.float32)
        return np.stack([found[text] for text in texts])

    def _embed_missing(self, missing: list[str], found: dict[str, npt.NDArray[np.float32]]) -> None:
        """Embed ``missing`` into ``found`` and keep each batch as it arrives."""
        step = _batch_size(self.embedder) or max(1, len(missing))
        for start in range(0, len(missing), step):
            part = missing[start : start + step]
            rows = embedder_rows(self.embedder, part)
            found.update(zip(part, rows, strict=True))
            with self._lock:  # copies: a row kept must not keep its whole batch alive
                self._rows.update((text, row.copy()) for text, row in zip(part, rows, strict=True))
                while len(self._rows) > self.max_texts:
                    self._rows.popitem(last=False)


def _batch_size(embedder: Embedder) -> int | None:
    """The texts ``embedder`` sends its model per call (its ``batch_size``, an int of at
    least 1), or None where it has none."""
    size = getattr(embedder, "batch_size", None)
    if isinstance(size, bool) or not isinstance(size, Integral) or size < 1:
        return None
    return int(size)


def checked_embedder(embedder: Embedder) -> Embedder:
    """``embedder`` if its ``name`` is a non-empty str every backend can store and its
    ``dim`` an int of at least 1. A ``dim`` that is a property (an adapter's, which may ask
    its model) is not read here, but where it is needed (:func:`embedder_dim`): a memory
    reopened over its stored vectors never needs it.

    Examples
    --------
    >>> checked_embedder(HashingEmbedder(dim=8)).dim
    8
    """
    name = embedder.name
    if not isinstance(name, str):
        raise InvalidTypeError(f"embedder.name must be a non-empty str, got {shown(name)}")
    if not name.strip():
        raise InvalidValueError(f"embedder.name must be a non-empty str, got {shown(name)}")
    check_unicode("embedder.name", name)  # stored with every turn's vector: UTF-8
    if "\x00" in name:  # which PostgreSQL's text cannot hold: every backend refuses it
        raise InvalidValueError(f"embedder.name must not hold a NUL character, got {shown(name)}")
    if not isinstance(inspect.getattr_static(embedder, "dim", None), property):
        embedder_dim(embedder)
    return embedder


def embedder_dim(embedder: Embedder) -> int:
    """``embedder.dim``, if it is an int of at least 1.

    Examples
    --------
    >>> embedder_dim(HashingEmbedder(dim=8))
    8
    """
    dim = embedder.dim
    if isinstance(dim, bool) or not isinstance(dim, Integral) or dim < 1:
        raise InvalidTypeError(f"embedder.dim must be an int of at least 1, got {shown(dim)}")
    return int(dim)


def text_list(texts: Sequence[str]) -> list[str]:
    """``texts`` as a list; a bare ``str`` (a common slip) is refused by name.

    Examples
    --------
    >>> text_list(("a", "b"))
    ['a', 'b']
    """
    if isinstance(texts, str):
        raise InvalidTypeError(f"texts must be a list of str, got a bare str {texts[:40]!r}")
    return list(texts)


def model_rows(vectors: Sequence[Sequence[float]], count: int, model: str) -> Vectors:
    """A model's answer for ``count`` texts as a float32 (count, dim) matrix, checked.

    For the framework adapters: ``model`` names the model in the error when it returned
    another number of vectors, vectors of different lengths or empty ones.

    Examples
    --------
    >>> model_rows([[1.0, 2.0]], 1, "Letters").shape
    (1, 2)
    >>> model_rows([[1.0], [2.0, 3.0]], 2, "Letters")
    Traceback (most recent call last):
    ...
    synapse_retriever.errors.InvalidValueError: Letters returned vectors of different lengths
    """
    if len(vectors) != count:
        raise InvalidValueError(f"{model} returned {len(vectors)} vectors for {count} texts")
    try:
        rows = np.array(vectors, dtype=np.float32, ndmin=2)
    except ValueError as error:  # vectors of different lengths
        raise InvalidValueError(f"{model} returned vectors of different lengths") from error
    if rows.ndim != 2 or rows.shape[1] == 0:
        raise InvalidValueError(
            f"{model} returned shape {rows.shape}, expected one non-empty vector per text"
        )
    return rows


class HashingEmbedder:
    """Signed feature hashing of content terms: offline, deterministic, no model.

    Parameters
    ----------
    dim : int
        Number of hash buckets (the vector length).

    Examples
    --------
    >>> embedder = HashingEmbedder(dim=256)
    >>> a, b, c = embedder.embed(["staging database host", "the staging database", "lunch"])
    >>> round(float(a @ b), 3), round(float(a @ c), 3)  # 2 shared terms of 3 and 2; none
    (0.816, 0.0)
    >>> x, y = embedder.embed(["déjà vu", "deja vu"])  # accents folded, as BM25 folds them
    >>> round(float(x @ y), 3)
    1.0
    """

    def __init__(self, dim: int = 1024) -> None:
        if isinstance(dim, bool) or not isinstance(dim, int) or dim < 8:
            raise refused_number(dim)(f"dim must be an integer >= 8, got {shown(dim)}")
        self._dim = dim

    @property
    def name(self) -> str:
        """``hashing-v4-<dim>``: vectors of another ``dim`` are another space (v1 read a
        CJK run as one term, v2 cut words at their combining marks: Hindi or Tamil gave no
        terms, v3 kept Latin accents: ``cafe`` and ``café`` were two terms; a memory's older
        vectors are recomputed when it opens)."""
        return f"hashing-v4-{self._dim}"

    @property
    def dim(self) -> int:
        """The vector length (number of hash buckets)."""
        return self._dim

    def embed(self, texts: Sequence[str]) -> Vectors:
        """One unit row per text (a zero row for a text with no content terms)."""
        matrix = np.zeros((len(texts), self._dim), dtype=np.float32)
        for row, text in enumerate(texts):
            for term, count in Counter(terms(latin_folded(text))).items():
                bucket, sign = self._bucket(term)
                matrix[row, bucket] += sign * (1.0 + math.log(count))
        return normalized(matrix, self._dim)

    def _bucket(self, term: str) -> tuple[int, float]:
        digest = int.from_bytes(hashlib.blake2b(term.encode(), digest_size=8).digest(), "big")
        return digest % self._dim, 1.0 if (digest >> 63) & 1 else -1.0


EXACT_BELOW = 10_000
"""The size from which a :class:`TurnIndex` answers searches approximately (see its Notes)."""

NPROBE = 32
"""How many of the approximate index's ``sqrt(rows)`` lists a search reads."""

_SQ8_MARGIN = 0.05
"""How far below a threshold the 8-bit codes are read before the exact check: their
inner products err by a few thousandths on unit vectors, far less than this."""


_CANDIDATES = 64
"""How many candidates :meth:`TurnIndex.nearest_and_count` rescores."""


@contextmanager
def _one_thread() -> Iterator[None]:
    """Run FAISS on the calling thread alone while the block (or the decorated call) runs;
    OpenMP's thread count is per thread, so other threads' FAISS calls keep theirs.

    A single-vector add or search gains nothing from FAISS's OpenMP team, and waits for
    it: on two busy cores adding one vector to the IVF index took 3.5 ms at p50 (21 ms in
    a profile of ``add_turn``) with two threads and 0.04 ms with one.
    """
    previous = faiss.omp_get_max_threads()
    faiss.omp_set_num_threads(1)
    try:
        yield
    finally:
        faiss.omp_set_num_threads(previous)


class TurnIndex:
    """A FAISS inner-product index over turn vectors, in insertion order: exact, then
    approximate once it holds ``exact_below`` rows.

    Row ``i`` of the index is the ``i``-th vector added. Similarities are clipped to
    [0, 1] (for unit vectors they lie in [−1, 1]; opposite texts count as unrelated).

    Parameters
    ----------
    dim : int
        The vector length.
    exact_below : int, optional
        Below this many rows every search is exact (``IndexFlatIP``); from it on,
        :meth:`top`, :meth:`nearest` and :meth:`count_at_least` read an IVF index
        (default :data:`EXACT_BELOW`).

    Raises
    ------
    InvalidValueError
        ``exact_below`` is not an integer >= 1.

    Notes
    -----
    The rows are always kept in an exact ``IndexFlatIP``: :meth:`similarities` and
    :meth:`vectors` read it in place, and every score returned is exact. From
    ``exact_below`` rows on, an ``IndexIVFScalarQuantizer`` (8-bit codes, a quarter of the
    float vectors' memory) over ``round(sqrt(rows))`` k-means lists finds the candidates:
    a search reads the :data:`NPROBE` lists whose centroids are nearest the query, then
    rescores the candidates exactly. :meth:`top` asks for ``2k`` candidates; :meth:`nearest`
    for 10; :meth:`count_at_least` range-searches the probed lists
    :data:`_SQ8_MARGIN` below the threshold and counts the candidates that reach it
    exactly. So a search costs about ``NPROBE × sqrt(rows)`` vectors instead of ``rows``,
    and what it misses are rows in lists it did not read: :meth:`nearest` can only be
    lower than the exact value, :meth:`count_at_least` only smaller, :meth:`top` only
    lacks rows (never a wrong score). The 8-bit codes are trained on the sample (their
    range per dimension), so a later value outside it is clipped: its row's score is still
    exact once found, but it may rank too low to be a candidate; the measured recall
    includes this. A vector already in the index sits in the list of
    its nearest centroid, the first one read, so it is found unless more candidates than
    asked for score within the codes' error of it (near-copies of it, as good).

    The IVF index is trained (k-means on ``32 × lists`` rows, 10 iterations) and filled
    when the index reaches ``exact_below`` rows and again each time it doubles (the
    lists grow with it), so adding stays amortised constant; a memory opened at that
    size builds it once. Measured on generated conversations (``docs/benchmarks/speed.md``):
    recall@10 0.995 and recall@100 0.977 of the exact top-k at 10,000 hashing vectors,
    0.989 and 0.961 at 100,000.

    Examples
    --------
    >>> index = TurnIndex(2)
    >>> index.add(normalized([[1, 0], [1, 1], [0, 1]], 2))
    >>> index.nearest(normalized([[1, 0]], 2)[0])
    1.0
    >>> index.count_at_least(normalized([[1, 0]], 2)[0], 0.7)  # cos 1.0 and cos 0.707
    2
    >>> [round(float(s), 3) for s in index.similarities(normalized([[0, 1]], 2)[0])]
    [0.0, 0.707, 1.0]
    >>> index.approximate
    False
    """

    def __init__(self, dim: int, *, exact_below: int | None = None) -> None:
        exact_below = EXACT_BELOW if exact_below is None else exact_below
        if isinstance(exact_below, bool) or not isinstance(exact_below, int) or exact_below < 1:
            raise InvalidValueError(
                f"exact_below must be an integer >= 1, got {shown(exact_below)}"
            )
        self.dim = dim
        self.exact_below = exact_below
        self._index = faiss.IndexFlatIP(dim)
        self._ivf: faiss.IndexIVFScalarQuantizer | None = None
        self._built_at = 0

    def __len__(self) -> int:
        return int(self._index.ntotal)

    @property
    def approximate(self) -> bool:
        """Whether searches read the approximate index (``len(self) >= exact_below``)."""
        return self._ivf is not None

    def add(self, vectors: Vectors) -> None:
        """Append rows (unit vectors, float32); (re)builds the approximate index on
        reaching ``exact_below`` rows and at each doubling after."""
        if not len(vectors):
            return
        rows = np.ascontiguousarray(vectors, dtype=np.float32)
        self._index.add(rows)
        if len(self) >= max(self.exact_below, 2 * self._built_at):
            self._build()  # many rows: FAISS's threads help here
        elif self._ivf is not None:
            with _one_thread():
                self._ivf.add(rows)

    def _build(self) -> None:
        """Train the IVF lists on a sample of the rows and fill them with every row."""
        count = len(self)
        lists = max(1, round(math.sqrt(count)))
        quantizer = faiss.IndexFlatIP(self.dim)
        ivf = faiss.IndexIVFScalarQuantizer(
            quantizer, self.dim, lists, faiss.ScalarQuantizer.QT_8bit, faiss.METRIC_INNER_PRODUCT
        )
        ivf.cp.niter = 10
        ivf.cp.min_points_per_centroid, ivf.cp.max_points_per_centroid = 1, 32
        ivf.cp.seed = 1234
        rows = self._rows()
        sample = np.random.default_rng(0).choice(count, min(count, 32 * lists), replace=False)
        ivf.train(np.ascontiguousarray(rows[np.sort(sample)]))
        ivf.add(rows)
        ivf.nprobe = min(NPROBE, lists)
        self._ivf, self._built_at = ivf, count

    def _rows(self) -> Vectors:
        """The rows FAISS stores, read in place (valid until the next add)."""
        count = len(self)
        return faiss.rev_swig_ptr(self._index.get_xb(), count * self.dim).reshape(count, self.dim)

    def _rescored(
        self, vector: Vectors, candidates: npt.NDArray[np.int64]
    ) -> list[tuple[int, float]]:
        """``candidates`` (rows; -1 for none) with their exact similarity, best first."""
        found = np.unique(candidates[candidates >= 0])
        scores = self._rows()[found] @ np.asarray(vector, dtype=np.float32).reshape(-1)
        order = np.lexsort((found, -scores))
        return [(int(found[i]), float(scores[i])) for i in order]

    @_one_thread()
    def nearest(self, vector: Vectors) -> float:
        """The highest similarity of ``vector`` to any indexed row; 0.0 when empty."""
        if len(self) == 0:
            return 0.0
        if self._ivf is not None:
            _, rows = self._ivf.search(vector.reshape(1, -1), 10)
            found = self._rescored(vector, rows[0])
            return float(np.clip(found[0][1], 0.0, 1.0)) if found else 0.0
        scores, _ = self._index.search(vector.reshape(1, -1), 1)
        return float(np.clip(scores[0, 0], 0.0, 1.0))

    @_one_thread()
    def count_at_least(self, vector: Vectors, threshold: float) -> int:
        """How many indexed rows have a similarity of at least ``threshold`` to ``vector``."""
        if len(self) == 0 or not np.any(vector):
            return 0
        if self._ivf is not None:
            _, _, rows = self._ivf.range_search(vector.reshape(1, -1), threshold - _SQ8_MARGIN)
            least = np.float32(threshold)
            return sum(1 for _, score in self._rescored(vector, rows) if score >= least)
        radius = float(np.nextafter(np.float32(threshold), np.float32(-np.inf)))
        limits, _, _ = self._index.range_search(vector.reshape(1, -1), radius)
        return int(limits[1] - limits[0])

    @_one_thread()
    def nearest_and_count(self, vector: Vectors, threshold: float) -> tuple[float, int]:
        """:meth:`nearest` and :meth:`count_at_least` of ``vector`` from one search (what
        a new turn's novelty and repeats need).

        Exact below ``exact_below`` rows, as the two methods. Above, the approximate
        index's 64 best candidates, rescored: the highest is the nearest (at least the
        one :meth:`nearest` finds), and those reaching ``threshold`` are the count, the
        same as :meth:`count_at_least` unless the 64th could still reach it (then that
        method counts).

        Examples
        --------
        >>> index = TurnIndex(2)
        >>> index.add(normalized([[1, 0], [1, 1], [0, 1]], 2))
        >>> index.nearest_and_count(normalized([[1, 0]], 2)[0], 0.7)
        (1.0, 2)
        """
        if self._ivf is None or not np.any(vector):
            return self.nearest(vector), self.count_at_least(vector, threshold)
        approximate, rows = self._ivf.search(vector.reshape(1, -1), _CANDIDATES)
        found = self._rescored(vector, rows[0])
        nearest = float(np.clip(found[0][1], 0.0, 1.0)) if found else 0.0
        if rows[0, -1] >= 0 and approximate[0, -1] >= threshold - _SQ8_MARGIN:
            return nearest, self.count_at_least(vector, threshold)  # more may reach it
        near = rows[0][approximate[0] >= threshold - _SQ8_MARGIN]  # what the range search reads
        least = np.float32(threshold)
        return nearest, sum(1 for _, score in self._rescored(vector, near) if score >= least)

    @_one_thread()
    def top(self, vector: Vectors, k: int) -> list[tuple[int, float]]:
        """The ``k`` most similar rows as (row, similarity), best first; similarity > 0 only."""
        k = min(k, len(self))
        if k <= 0 or not np.any(vector):
            return []
        if self._ivf is not None:
            _, rows = self._ivf.search(vector.reshape(1, -1), 2 * k)
            found = self._rescored(vector, rows[0])[:k]
            return [(row, min(score, 1.0)) for row, score in found if score > 1e-6]
        scores, rows = self._index.search(vector.reshape(1, -1), k)
        return [
            (int(r), float(min(s, 1.0)))
            for r, s in zip(rows[0], scores[0], strict=True)
            if s > 1e-6
        ]

    def similarities(self, vector: Vectors) -> npt.NDArray[np.float64]:
        """Similarity of ``vector`` to every row, in row order (one product over the rows
        FAISS stores, read in place)."""
        count = len(self)
        if count == 0 or not np.any(vector):
            return np.zeros(count, dtype=np.float64)
        scores = self._rows() @ np.asarray(vector, dtype=np.float32).reshape(-1)
        return np.clip(scores.astype(np.float64), 0.0, 1.0)

    def rows(self, rows: Sequence[int]) -> Vectors:
        """The vectors of ``rows``, in that order, as a (len(rows), dim) matrix.

        Examples
        --------
        >>> index = TurnIndex(2)
        >>> index.add(np.array([[1.0, 0.0], [0.0, 1.0]], dtype=np.float32))
        >>> index.rows([1, 0]).tolist()
        [[0.0, 1.0], [1.0, 0.0]]
        """
        if not len(rows):
            return np.zeros((0, self.dim), dtype=np.float32)
        keys = np.asarray(rows, dtype=np.int64)
        return np.asarray(self._index.reconstruct_batch(keys), dtype=np.float32)

    def vectors(self, start: int = 0) -> Vectors:
        """The rows from ``start`` on (every row by default), as a (rows, dim) matrix."""
        start = min(max(start, 0), len(self))
        if start == len(self):
            return np.zeros((0, self.dim), dtype=np.float32)
        return np.asarray(self._index.reconstruct_n(start, len(self) - start), dtype=np.float32)
