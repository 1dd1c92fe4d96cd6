"""The vector index's switch-over: exact below ``exact_below`` rows, IVF from it on."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from synapse_retriever.conversation import ConversationMemory, TurnIndex
from synapse_retriever.conversation import embed as embed_module
from synapse_retriever.conversation.embed import Vectors, normalized
from synapse_retriever.errors import InvalidValueError

DIM = 16


def _vectors(count: int, seed: int = 0) -> Vectors:
    return normalized(np.random.default_rng(seed).standard_normal((count, DIM)), DIM)


def _filled(vectors: Vectors, exact_below: int, step: int = 7) -> TurnIndex:
    index = TurnIndex(DIM, exact_below=exact_below)
    for start in range(0, len(vectors), step):  # a few rows at a time, as turns come
        index.add(vectors[start : start + step])
    return index


def test_below_the_threshold_every_answer_is_the_exact_ones() -> None:
    vectors = _vectors(300)
    switching, exact = _filled(vectors, 301), _filled(vectors, 10**9)
    assert not switching.approximate
    for query in _vectors(20, seed=1):
        assert switching.top(query, 10) == exact.top(query, 10)
        assert switching.nearest(query) == exact.nearest(query)
        assert switching.count_at_least(query, 0.3) == exact.count_at_least(query, 0.3)
        assert switching.nearest_and_count(query, 0.3) == exact.nearest_and_count(query, 0.3)
        assert switching.similarities(query).tolist() == exact.similarities(query).tolist()


def test_above_the_threshold_a_stored_vector_finds_itself_and_rows_keep_their_order() -> None:
    vectors = _vectors(1500)
    index = _filled(vectors, 200)
    assert index.approximate and len(index) == 1500
    assert np.array_equal(index.vectors(), vectors)  # row i is the i-th vector added
    assert np.array_equal(index.vectors(1400), vectors[1400:])
    for row in range(0, 1500, 37):
        best_row, best = index.top(vectors[row], 5)[0]
        assert best_row == row and best == pytest.approx(1.0, abs=1e-5)  # the exact top-1
        assert index.nearest(vectors[row]) == pytest.approx(1.0, abs=1e-5)
        assert index.count_at_least(vectors[row], 0.999) == 1
        nearest, count = index.nearest_and_count(vectors[row], 0.999)
        assert nearest == pytest.approx(1.0, abs=1e-5) and count == 1


def test_the_approximate_index_is_rebuilt_at_each_doubling_not_per_add() -> None:
    index = _filled(_vectors(1000), 100, step=1)
    assert index._built_at == 800  # built at 100, 200, 400 and 800 rows
    assert index._ivf is not None and index._ivf.ntotal == 1000


@settings(max_examples=25, deadline=None)
@given(
    count=st.integers(min_value=60, max_value=400),
    seed=st.integers(min_value=0, max_value=10_000),
    k=st.integers(min_value=1, max_value=30),
    threshold=st.floats(min_value=0.0, max_value=0.9),
)
def test_the_approximate_index_never_overstates(
    count: int, seed: int, k: int, threshold: float
) -> None:
    vectors = _vectors(count, seed)
    index = _filled(vectors, 50)
    query = _vectors(1, seed + 1)[0]
    exact = index.similarities(query)
    found = index.top(query, k)
    assert len(found) <= k and len({row for row, _ in found}) == len(found)
    for row, score in found:  # exact scores, of the rows they name
        assert score == pytest.approx(exact[row], abs=1e-5)
    assert [score for _, score in found] == sorted((score for _, score in found), reverse=True)
    assert index.nearest(query) <= exact.max() + 1e-5
    assert index.count_at_least(query, threshold) <= int(np.sum(exact >= threshold)) + 1
    nearest, count = index.nearest_and_count(query, threshold)  # one search, the same answers
    assert index.nearest(query) - 1e-5 <= nearest <= exact.max() + 1e-5
    assert count == index.count_at_least(query, threshold)


def test_exact_below_is_checked() -> None:
    with pytest.raises(InvalidValueError, match="exact_below must be an integer >= 1, got 0"):
        TurnIndex(DIM, exact_below=0)


def test_a_memory_reopened_above_the_threshold_works(
    conversation_where: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(embed_module, "EXACT_BELOW", 40)
    path = conversation_where
    texts = [f"turn {i} about topic{i % 9} and item{i}" for i in range(100)]
    with ConversationMemory(path, background=False) as memory:
        for at, text in enumerate(texts):
            memory.add_turn(text, at=at)
        assert memory._index.approximate
    with ConversationMemory(path, background=False) as memory:
        assert memory._index.approximate and len(memory._index) == 100
        turn_id = memory.add_turn(texts[12], at=200)  # said before: nothing new, a repeat
        turn = memory.turns()[-1]
        assert turn.id == turn_id and turn.surprise == pytest.approx(0.0, abs=1e-5)
        assert turn.repeats == 1
        hits = memory.retrieve("topic3 item21", k=3, at=201, weights=(1, 0))
        assert hits and hits[0].text == texts[21]
        vector = normalized(memory.embedder.embed([texts[57]]), memory.embedder.dim)[0]
        assert memory._index.top(vector, 1)[0][0] == 57  # row 57: the 58th turn


def test_single_vector_calls_run_faiss_on_one_thread_and_restore_the_callers_count(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import faiss

    seen: list[int] = []
    index = TurnIndex(3, exact_below=4)
    index.add(normalized(np.eye(3, dtype=np.float32).repeat(2, axis=0), 3))  # 6 rows: IVF
    search = type(index._ivf).search

    def watched(self: object, *args: object, **kwargs: object) -> object:
        seen.append(faiss.omp_get_max_threads())
        return search(self, *args, **kwargs)

    monkeypatch.setattr(type(index._ivf), "search", watched)
    before = faiss.omp_get_max_threads()
    faiss.omp_set_num_threads(2)
    try:
        vector = normalized([[1, 0, 0]], 3)[0]
        assert index.top(vector, 2)[0][0] in (0, 1)
        index.nearest_and_count(vector, 0.9)
        assert seen and set(seen) == {1}  # FAISS saw one thread inside the calls
        assert faiss.omp_get_max_threads() == 2  # and the caller's count is back
        with pytest.raises(AssertionError):  # FAISS's own check of the vector's length
            index.top(np.ones(5, dtype=np.float32), 2)  # a wrong shape fails...
        assert faiss.omp_get_max_threads() == 2  # ...and still restores it
    finally:
        faiss.omp_set_num_threads(before)
