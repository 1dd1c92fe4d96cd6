"""Tests for context/embed.py: the hashing embedder and the FAISS turn index."""

from __future__ import annotations

import numpy as np
import pytest

from synapse_retriever.context import Embedder, HashingEmbedder, TurnIndex
from synapse_retriever.context.embed import normalized
from synapse_retriever.errors import InvalidValueError


def test_hashing_embedder_is_deterministic_unit_and_lexical() -> None:
    embedder = HashingEmbedder()
    assert isinstance(embedder, Embedder)
    a, b, c, empty = embedder.embed(["deploy on Fridays", "Fridays deploy", "lunch", "the a"])
    assert np.allclose(a, HashingEmbedder().embed(["deploy on Fridays"])[0])
    assert float(np.linalg.norm(a)) == pytest.approx(1.0)
    assert float(a @ b) == pytest.approx(1.0)  # same content terms
    assert float(a @ c) == pytest.approx(0.0)  # none shared
    assert not np.any(empty)  # stopwords only: the zero vector
    assert embedder.name == "hashing-v1-1024" and embedder.dim == 1024


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
