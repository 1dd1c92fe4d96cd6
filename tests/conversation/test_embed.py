"""Tests for conversation/embed.py: the hashing embedder, the FAISS turn index, as_embedder."""

from __future__ import annotations

import importlib
import logging
import sys
import threading
import time
from collections.abc import Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from types import ModuleType
from typing import Any

import numpy as np
import pytest

from synapse_retriever.conversation import (
    CachedEmbedder,
    Embedder,
    HashingEmbedder,
    HistoryMessage,
    TurnIndex,
    as_embedder,
    trim_history,
)
from synapse_retriever.conversation.embed import Vectors, normalized
from synapse_retriever.errors import InvalidTypeError, InvalidValueError


def test_hashing_embedder_is_deterministic_unit_and_lexical() -> None:
    embedder = HashingEmbedder()
    assert isinstance(embedder, Embedder)
    a, b, c, empty = embedder.embed(["deploy on Fridays", "Fridays deploy", "lunch", "the a"])
    assert np.allclose(a, HashingEmbedder().embed(["deploy on Fridays"])[0])
    assert float(np.linalg.norm(a)) == pytest.approx(1.0)
    assert float(a @ b) == pytest.approx(1.0)  # same content terms
    assert float(a @ c) == pytest.approx(0.0)  # none shared
    assert not np.any(empty)  # stopwords only: the zero vector
    assert embedder.name == "hashing-v4-1024" and embedder.dim == 1024


def test_hashing_embedder_folds_latin_accents_as_bm25_does() -> None:
    # v3 read "cafe" and "café" as two terms: a question typed without accents missed the
    # turn in the dense channel, where BM25 (remove_diacritics 2) found it
    pairs = [
        ("Le déjeuner est à midi, café crème", "le dejeuner est a midi, cafe creme"),
        ("Überweisung für München", "uberweisung fur munchen"),
        ("Tiếng Việt có dấu", "tieng viet co dau"),
    ]
    for accented, plain in pairs:
        a, b = HashingEmbedder().embed([accented, plain])
        assert np.any(a) and float(a @ b) == pytest.approx(1.0), accented
    # other scripts keep their marks: a Hindi word and its vowel signs are one term
    hindi, cut = HashingEmbedder().embed(["किताब पढ़ो", "कतब पढ"])
    assert np.any(hindi) and float(hindi @ cut) < 0.5


def test_normalized_checks_shape_and_values() -> None:
    with pytest.raises(InvalidValueError, match=r"shape \(1, 3\), expected \(rows, 2\)"):
        normalized([[1.0, 2.0, 3.0]], 2)
    with pytest.raises(InvalidValueError, match="non-finite"):
        normalized([[np.nan, 1.0]], 2)
    with pytest.raises(InvalidValueError, match="dim must be an integer >= 8"):
        HashingEmbedder(dim=2)


def test_turn_index_searches_in_faiss() -> None:
    index = TurnIndex(2)
    east, north_east, north = normalized([[1, 0], [1, 1], [0, 1]], 2)
    assert index.nearest(east) == 0.0 and index.top(east, 3) == []  # empty
    index.add(np.stack([east, north_east, north]))
    assert len(index) == 3
    assert index.nearest(east) == pytest.approx(1.0)
    assert index.count_at_least(east, 0.9) == 1
    assert index.count_at_least(east, 0.7071) == 2  # cos 45° = 0.70711
    assert [(row, round(s, 3)) for row, s in index.top(north, 2)] == [(2, 1.0), (1, 0.707)]
    assert index.top(-east, 3) == [] and index.nearest(-east) == 0.0  # opposite: unrelated
    assert index.similarities(north).round(3).tolist() == [0.0, 0.707, 1.0]
    assert index.vectors().shape == (3, 2)


class LazyDim:
    """A native embedder whose ``dim`` is costly to read (as an adapter's probe would be)."""

    name = "lazy-v1"

    def __init__(self) -> None:
        self.dim_reads = 0

    @property
    def dim(self) -> int:
        self.dim_reads += 1
        return 8

    def embed(self, texts: Sequence[str]) -> Vectors:
        return np.ones((len(texts), 8), dtype=np.float32)


def test_as_embedder_returns_a_native_embedder_unchanged() -> None:
    hashing = HashingEmbedder(dim=64)
    assert as_embedder(hashing) is hashing
    lazy = LazyDim()
    assert as_embedder(lazy) is lazy
    assert lazy.dim_reads == 0  # recognized without reading a property (Python 3.11 would)


@pytest.mark.parametrize(
    ("junk", "named"),
    [
        (object(), "got object"),
        ("all-MiniLM-L6-v2", "got str"),
        (np.zeros(3), "got ndarray"),
        (HashingEmbedder, "got the class HashingEmbedder"),  # not an instance
    ],
)
def test_as_embedder_refuses_junk_naming_its_type_and_the_adapter_packages(
    junk: object, named: str
) -> None:
    with pytest.raises(InvalidTypeError) as raised:
        as_embedder(junk)
    message = str(raised.value)
    assert message.startswith(f"embedder must have name, dim and embed(texts), {named};")
    assert (
        "langchain-synapse-retriever" in message and "llama-index-postprocessor-synapse" in message
    )


ADAPTERS = '''
import numpy as np


class Letters:
    """What a framework's embeddings might be: no name, dim or embed."""


class Junk:
    pass


class LettersEmbedder:
    name, dim = "letters-v1", 26

    def __init__(self, letters):
        self.letters = letters

    def embed(self, texts):
        return np.ones((len(texts), 26))


def adapt(obj):
    return LettersEmbedder(obj) if isinstance(obj, Letters) else None


def junk(obj):
    return "not an embedder" if isinstance(obj, Junk) else None
'''


@pytest.fixture
def installed_adapters(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[ModuleType]:
    """A distribution really installed on sys.path, registering three adapters: one whose
    module is missing, one that adapts ``Letters``, one that answers ``Junk`` with junk."""
    (tmp_path / "toy_adapters.py").write_text(ADAPTERS)
    info = tmp_path / "toy_adapters-0.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: toy-adapters\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text(
        "[synapse_retriever.embedders]\n"
        "aaa_missing = toy_adapters_not_installed:adapt\n"
        "letters = toy_adapters:adapt\n"
        "junk = toy_adapters:junk\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    yield importlib.import_module("toy_adapters")
    sys.modules.pop("toy_adapters", None)


def test_as_embedder_asks_the_installed_adapters_in_name_order(
    installed_adapters: ModuleType, caplog: pytest.LogCaptureFixture
) -> None:
    letters = installed_adapters.Letters()
    with caplog.at_level(logging.WARNING, logger="synapse_retriever.conversation.embed"):
        adapted = as_embedder(letters)
    assert isinstance(adapted, installed_adapters.LettersEmbedder)
    assert adapted.letters is letters
    assert "embedder adapter 'aaa_missing'" in caplog.text  # skipped, not fatal
    with pytest.raises(InvalidTypeError, match=r"adapter 'junk' .* returned str"):
        as_embedder(installed_adapters.Junk())
    with pytest.raises(InvalidTypeError, match="got object"):
        as_embedder(object())


@pytest.mark.parametrize(
    ("name", "dim", "says"),
    [
        (None, 4, "embedder.name must be a non-empty str, got None"),
        ("e", -1, "embedder.dim must be an int of at least 1, got -1"),
        ("e", "4", "embedder.dim must be an int of at least 1, got '4'"),
    ],
)
def test_an_embedder_with_a_bad_name_or_dim_is_refused_before_the_file_is_made(
    tmp_path: Path, name: object, dim: object, says: str
) -> None:
    from synapse_retriever.conversation import ConversationMemory

    class Bad:
        def __init__(self) -> None:
            self.name, self.dim = name, dim

        def embed(self, texts: Sequence[str]) -> np.ndarray:
            return np.ones((len(texts), 4))

    with pytest.raises(InvalidTypeError, match=says):
        ConversationMemory(tmp_path / "chat.db", embedder=Bad())
    assert list(tmp_path.iterdir()) == []


def test_an_embedder_with_a_blank_name_is_a_value_error(tmp_path: Path) -> None:
    from synapse_retriever.conversation import ConversationMemory

    class Blank:
        name, dim = "  ", 4

        def embed(self, texts: Sequence[str]) -> np.ndarray:
            return np.ones((len(texts), 4))

    with pytest.raises(
        InvalidValueError, match=r"embedder\.name must be a non-empty str, got '  '"
    ):
        ConversationMemory(tmp_path / "chat.db", embedder=Blank())
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize(
    ("name", "says"),
    [
        ("mini\ud800lm", "embedder.name must be valid Unicode"),
        ("mini\x00lm", "must not hold a NUL"),
    ],
)
def test_an_embedder_name_no_backend_can_store_is_refused_before_the_file_is_made(
    tmp_path: Path, name: str, says: str
) -> None:
    # a lone surrogate raised a raw UnicodeEncodeError at the first turn, on both backends;
    # a NUL was stored on SQLite and refused by PostgreSQL
    from synapse_retriever.conversation import ConversationMemory

    class Odd:
        dim = 4

        def embed(self, texts: Sequence[str]) -> np.ndarray:
            return np.ones((len(texts), 4))

    Odd.name = name  # type: ignore[attr-defined]
    with pytest.raises(InvalidValueError, match=says):
        ConversationMemory(tmp_path / "chat.db", embedder=Odd())  # type: ignore[arg-type]
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("rows", [0, 2])
def test_an_embedder_that_returns_another_number_of_rows_is_a_typed_error(rows: int) -> None:
    from synapse_retriever.conversation import ConversationMemory

    class Wrong:
        name, dim = "wrong", 4

        def embed(self, texts: Sequence[str]) -> np.ndarray:
            return np.ones((rows, 4))

    with ConversationMemory(":memory:", embedder=Wrong(), background=False) as memory:
        with pytest.raises(InvalidValueError, match=f"returned {rows} vectors for 1 texts"):
            memory.add_turn("hello", at=0)
        assert len(memory) == 0


def test_the_hashing_embedder_reads_words_with_marks_whole() -> None:
    # v2 cut a Hindi or Tamil word at each vowel sign into one-letter pieces, all left out:
    # a turn in Hindi had no terms, a zero vector, and the dense channel never found it
    from synapse_retriever.conversation.text import terms

    assert terms("दिल्ली में बारिश हो रही है।") == ["दिल्ली", "बारिश", "रही"]  # "में": a letter
    assert terms("שָׁלוֹם") == terms("שלום") == ["שלום"]
    assert terms("کتاب\u200cها 1\u0301 x") == ["كتاب", "ها", "1\u0301"]  # Persian's pieces; a digit
    a, b, c = HashingEmbedder().embed(["दिल्ली में बारिश", "बारिश कब?", "சென்னை"])
    assert float(a @ b) > 0.3 and float(a @ c) == 0.0 and float(c @ c) == pytest.approx(1.0)


class CountingHashing(HashingEmbedder):
    """The hashing embedder, recording each call's texts."""

    def __init__(self, dim: int = 64) -> None:
        super().__init__(dim=dim)
        self.calls: list[list[str]] = []

    def embed(self, texts: Sequence[str]) -> Any:
        self.calls.append(list(texts))
        return super().embed(texts)


def test_a_cached_embedder_asks_for_each_text_once_and_answers_the_same_rows() -> None:
    inner = CountingHashing()
    cached = CachedEmbedder(inner, max_texts=3)
    assert (cached.name, cached.dim) == (inner.name, inner.dim)
    texts = ["deploy", "lunch", "deploy", "friday"]
    assert np.array_equal(cached.embed(texts), np.asarray(HashingEmbedder(dim=64).embed(texts)))
    assert cached.embed(["friday", "lunch"]).shape == (2, 64)
    assert cached.embed([]).shape == (0, 64)
    assert inner.calls == [["deploy", "lunch", "friday"]]  # each distinct text once
    cached.embed(["coffee"])  # a fourth text: the least recently used (deploy) goes
    cached.embed(["deploy", "coffee"])
    assert inner.calls[1:] == [["coffee"], ["deploy"]]


class FailingBatches(CountingHashing):
    """The hashing embedder, ``batch_size`` texts a model call, failing at the calls named."""

    def __init__(self, batch_size: int, failing: set[int]) -> None:
        super().__init__()
        self.batch_size, self.failing = batch_size, failing

    def embed(self, texts: Sequence[str]) -> Any:
        if len(self.calls) in self.failing:
            self.calls.append(["failed", *texts])
            raise ConnectionError("the model's API timed out")
        return super().embed(texts)


def test_a_cached_embedder_keeps_each_batch_before_one_that_fails() -> None:
    inner = FailingBatches(batch_size=2, failing={2})
    cached = CachedEmbedder(inner)
    texts = ["a", "b", "c", "d", "e", "b"]
    with pytest.raises(ConnectionError, match="timed out"):
        cached.embed(texts)
    assert inner.calls == [["a", "b"], ["c", "d"], ["failed", "e"]]
    rows = cached.embed(texts)  # asked again: only what is still missing
    assert inner.calls[3:] == [["e"]]
    assert np.array_equal(rows, np.asarray(HashingEmbedder(dim=64).embed(texts)))


@pytest.mark.parametrize("size", [None, 0, True, 2.5, "2"])
def test_a_cached_embedder_asks_at_once_without_a_usable_batch_size(size: object) -> None:
    inner = CountingHashing()
    inner.batch_size = size  # type: ignore[attr-defined]
    CachedEmbedder(inner).embed(["a", "b", "c"])
    assert inner.calls == [["a", "b", "c"]]


def test_trimming_with_a_cached_embedder_keeps_what_it_keeps_without() -> None:
    history = [HistoryMessage("system", "Be brief.", pinned=True)] + [
        HistoryMessage("user" if i % 2 else "assistant", f"Turn {i}: deploy on friday {i % 3}.")
        for i in range(12)
    ]
    cached = CachedEmbedder(HashingEmbedder(dim=64))
    for budget in (20, 40, 80):
        for _ in range(2):  # the second time from the kept vectors
            assert trim_history(history, "deploy?", budget, embedder=cached) == trim_history(
                history, "deploy?", budget, embedder=HashingEmbedder(dim=64)
            )


class HeldFirstCall(CountingHashing):
    """The hashing embedder whose first call waits for ``release`` (and then fails, if
    ``fail``): a slow model another thread meets meanwhile."""

    def __init__(self, fail: bool = False) -> None:
        super().__init__()
        self.release, self.fail = threading.Event(), fail

    def embed(self, texts: Sequence[str]) -> Any:
        first = not self.calls
        self.calls.append(list(texts))
        if first:
            assert self.release.wait(30)
            if self.fail:
                raise ConnectionError("the model's API timed out")
        return HashingEmbedder.embed(self, texts)


def _until(condition: Any) -> None:
    for _ in range(3000):
        if condition():
            return
        time.sleep(0.01)
    raise AssertionError("the other thread never got there")


def test_a_text_another_thread_is_embedding_is_waited_for_not_asked_again() -> None:
    inner = HeldFirstCall()
    cached = CachedEmbedder(inner)
    with ThreadPoolExecutor(2) as pool:
        first = pool.submit(cached.embed, ["x", "y"])
        _until(lambda: len(inner.calls) == 1)
        second = pool.submit(cached.embed, ["z", "x"])
        _until(lambda: len(inner.calls) == 2)  # z asked for; x waited for
        inner.release.set()
        rows = first.result(30), second.result(30)
    assert inner.calls == [["x", "y"], ["z"]]
    reference = HashingEmbedder(dim=64)
    assert np.array_equal(rows[0], reference.embed(["x", "y"]))
    assert np.array_equal(rows[1], reference.embed(["z", "x"]))


def test_a_thread_that_waited_for_a_failed_call_asks_for_its_text_itself() -> None:
    inner = HeldFirstCall(fail=True)
    cached = CachedEmbedder(inner)
    with ThreadPoolExecutor(2) as pool:
        first = pool.submit(cached.embed, ["x"])
        _until(lambda: len(inner.calls) == 1)
        second = pool.submit(cached.embed, ["x"])
        time.sleep(0.1)  # the second waits for the first (it asks the same either way)
        inner.release.set()
        with pytest.raises(ConnectionError, match="timed out"):
            first.result(30)
        assert np.array_equal(second.result(30), HashingEmbedder(dim=64).embed(["x"]))
    assert inner.calls == [["x"], ["x"]]
    assert not cached._pending


def test_a_cached_embedder_serves_threads_at_once() -> None:
    cached = CachedEmbedder(HashingEmbedder(dim=32), max_texts=50)
    texts = [f"text {i}" for i in range(200)]
    expected = np.asarray(HashingEmbedder(dim=32).embed(texts))

    def work(seed: int) -> bool:
        order = np.random.default_rng(seed).permutation(200)[:60].tolist()
        rows = cached.embed([texts[i] for i in order])
        return bool(np.array_equal(rows, expected[order]))

    with ThreadPoolExecutor(8) as pool:
        assert all(pool.map(work, range(64)))
    assert len(cached._rows) <= 50
    assert all(row.base is None for row in cached._rows.values())  # not views of a batch


def test_a_cached_embedder_refuses_a_bad_size_by_name() -> None:
    with pytest.raises(InvalidTypeError, match=r"max_texts must be an int, got float 1\.5"):
        CachedEmbedder(HashingEmbedder(), max_texts=1.5)  # type: ignore[arg-type]
    with pytest.raises(InvalidTypeError, match="max_texts must be an int, got bool"):
        CachedEmbedder(HashingEmbedder(), max_texts=True)
    with pytest.raises(InvalidValueError, match="max_texts must be >= 1, got 0"):
        CachedEmbedder(HashingEmbedder(), max_texts=0)
    with pytest.raises(InvalidTypeError, match="embedder must have name, dim and embed"):
        CachedEmbedder(object())
    with pytest.raises(InvalidTypeError, match="texts must be a list of str, got a bare str 'abc'"):
        CachedEmbedder(HashingEmbedder()).embed("abc")  # not three texts of one letter
