"""Tests for checked_counter and tiktoken_counter (tokens.py): the default and tiktoken, offline."""

from __future__ import annotations

import importlib.util
import socket
from pathlib import Path
from typing import Any

import pytest

from synapse_retriever.conversation import checked_counter, tiktoken_counter
from synapse_retriever.errors import InvalidValueError
from synapse_retriever.tokens import approximate_tokens


@pytest.fixture
def offline(monkeypatch: pytest.MonkeyPatch) -> list[Any]:
    """Any attempt to reach the network fails, and is recorded."""
    attempts: list[Any] = []

    def refuse(*args: Any, **kwargs: Any) -> Any:
        attempts.append(args)
        raise OSError("network access attempted in an offline test")

    monkeypatch.setattr(socket, "getaddrinfo", refuse)
    monkeypatch.setattr(socket.socket, "connect", refuse)
    return attempts


def test_the_default_counter_is_the_documented_approximation() -> None:
    assert checked_counter(None) is approximate_tokens


def test_tiktoken_offline_without_a_cached_file_is_a_clear_error(
    tmp_path: Path, offline: list[Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    registry = pytest.importorskip("tiktoken.registry")
    # an encoding another test (or a docs example) loaded stays in the process: forget it,
    # as a fresh process would not have it
    monkeypatch.setattr(registry, "ENCODINGS", {})
    with pytest.raises(InvalidValueError, match="cannot load the tiktoken encoding"):
        tiktoken_counter("cl100k_base", cache_dir=str(tmp_path))


def test_tiktoken_counts_offline_from_a_cached_file(offline: list[Any]) -> None:
    pytest.importorskip("tiktoken")
    spec = importlib.util.find_spec("llama_index.core")
    if spec is None or not spec.submodule_search_locations:
        pytest.skip("no bundled tiktoken cache (llama-index-core) to read offline")
    cache = Path(next(iter(spec.submodule_search_locations))) / "_static" / "tiktoken_cache"
    if not cache.is_dir():
        pytest.skip("llama-index-core ships no tiktoken cache here")
    count = tiktoken_counter("cl100k_base", cache_dir=str(cache))
    assert count("hello world") == 2
    assert count("") == 0
    assert not offline
