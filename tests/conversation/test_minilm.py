"""Tests for conversation/minilm.py: the offline MiniLM embedder (synapse-retriever[minilm])."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import numpy as np
import pytest

from synapse_retriever.conversation import (
    ConversationMemory,
    Embedder,
    MiniLmEmbedder,
    MiniLmUnavailableError,
)


@pytest.fixture(scope="module")
def embedder() -> MiniLmEmbedder:
    return MiniLmEmbedder(cache_dir="")  # the dev requirements install the extra


def test_it_is_an_embedder_of_unit_vectors(embedder: MiniLmEmbedder) -> None:
    assert isinstance(embedder, Embedder)
    vectors = embedder.embed(["We moved the deploy to Fridays.", "", "déjà vu 🚀"])
    assert vectors.shape == (3, 384) and vectors.dtype == np.float32
    assert np.allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-5)
    assert embedder.embed([]).shape == (0, 384)
    assert embedder.name == "all-MiniLM-L6-v2-int8-256"


def test_it_matches_by_meaning_where_hashing_sees_no_shared_word(
    embedder: MiniLmEmbedder,
) -> None:
    query, paraphrase, other = embedder.embed(
        ["When do we ship to production?", "Releases go live on Fridays.", "I baked bread."]
    )
    assert float(query @ paraphrase) > float(query @ other) + 0.1


def test_a_memory_recalls_a_paraphrase_with_it(embedder: MiniLmEmbedder) -> None:
    with ConversationMemory(":memory:", embedder=embedder, background=False) as memory:
        memory.add_turn("Releases go live on Fridays now.", at=0)
        for i in range(12):
            memory.add_turn(f"Small talk {i}: the weather and lunch again.", at=60 * (i + 1))
        kept = memory.assemble("When do we ship to production?", 20, at=1000)
    assert kept[0].text == "Releases go live on Fridays now." and kept[0].level == "full"


def test_vectors_persist_in_the_cache_folder(tmp_path: Path) -> None:
    first = MiniLmEmbedder(cache_dir=str(tmp_path))
    vectors = first.embed(["deploy", "deploy", "lunch"])
    assert len(list(tmp_path.iterdir())) == 2  # one file per distinct text
    again = MiniLmEmbedder(cache_dir=str(tmp_path)).embed(["lunch", "deploy"])
    assert np.array_equal(again, vectors[[2, 0]])


def test_without_the_extra_the_error_says_what_to_install(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    real = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util, "find_spec", lambda name: None if name == "tokenizers" else real(name)
    )
    with pytest.raises(MiniLmUnavailableError, match=r"needs tokenizers \(pip install "):
        MiniLmEmbedder()
