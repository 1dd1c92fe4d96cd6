"""Shared parts: an offline guard, a deterministic embedding, an LLM that cites."""

from __future__ import annotations

import hashlib
import math
import re
import socket
from collections.abc import Iterator
from typing import Any

import pytest
from llama_index.core.base.embeddings.base import BaseEmbedding
from llama_index.core.bridge.pydantic import Field
from llama_index.core.instrumentation import get_dispatcher
from llama_index.core.llms import CompletionResponse, CustomLLM, LLMMetadata
from llama_index.core.llms.callbacks import llm_completion_callback


@pytest.fixture(autouse=True)
def offline(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[str]]:
    """Refuse the network (NLTK data, tiktoken files, model APIs), and fail the test on any
    attempt, even one the library caught and swallowed (NLTK's downloader does)."""
    attempts: list[str] = []

    def refuse(what: object) -> OSError:
        attempts.append(repr(what))
        return OSError(f"network access attempted in an offline test: {what!r}")

    def connect(self: socket.socket, address: Any, *args: Any) -> Any:
        if self.family in (socket.AF_INET, socket.AF_INET6):
            raise refuse(address)
        return real_connect(self, address, *args)

    def resolve(host: Any, *args: Any, **kwargs: Any) -> Any:
        if host not in (None, "localhost", "127.0.0.1", "::1"):
            raise refuse(host)
        return real_getaddrinfo(host, *args, **kwargs)

    real_connect, real_getaddrinfo = socket.socket.connect, socket.getaddrinfo
    monkeypatch.setattr(socket.socket, "connect", connect)
    monkeypatch.setattr(socket.socket, "connect_ex", connect)
    monkeypatch.setattr(socket, "getaddrinfo", resolve)
    yield attempts
    assert not attempts, f"network access attempted: {attempts}"


@pytest.fixture(autouse=True)
def no_leftover_handlers() -> Iterator[None]:
    """Instrumentation handlers are global: a test must detach what it attached."""
    root = get_dispatcher()
    events, spans = list(root.event_handlers), list(root.span_handlers)
    yield
    leftovers = [h for h in root.event_handlers if h not in events]
    root.event_handlers, root.span_handlers = events, spans
    assert not leftovers, f"test left handlers attached: {leftovers}"


class HashEmbedding(BaseEmbedding):
    """Bag of words hashed into ``dim`` buckets, L2-normalized: offline and deterministic.

    Texts sharing words are close; texts sharing none are orthogonal, which is what
    makes a co-used node that shares no words invisible to vector search.
    """

    dim: int = 1024

    @classmethod
    def class_name(cls) -> str:
        return "HashEmbedding"

    def vector(self, text: str) -> list[float]:
        values = [0.0] * self.dim
        for word in re.findall(r"[a-z0-9]+", text.lower()):
            values[int(hashlib.sha256(word.encode()).hexdigest(), 16) % self.dim] += 1.0
        norm = math.sqrt(sum(v * v for v in values)) or 1.0
        return [v / norm for v in values]

    def _get_query_embedding(self, query: str) -> list[float]:
        return self.vector(query)

    async def _aget_query_embedding(self, query: str) -> list[float]:
        return self.vector(query)

    def _get_text_embedding(self, text: str) -> list[float]:
        return self.vector(text)


class CitingLLM(CustomLLM):
    """Answers with a fixed text (e.g. one citing ``[2]``), or cites the prompt's sources
    that contain each of ``cite`` (as a ``CitationQueryEngine`` prompt numbers them)."""

    answer: str = "It is verified with the loaded keys [1][3]."
    cite: list[str] = Field(default_factory=list)

    def respond(self, prompt: str) -> str:
        if not self.cite:
            return self.answer
        sources = re.findall(r"Source (\d+):\n([^\n]*)", prompt)  # one-line chunks
        numbers = [n for text in self.cite for n, source in sources if text in source]
        return "As the sources say " + "".join(f"[{n}]" for n in numbers) + "."

    @classmethod
    def class_name(cls) -> str:
        return "CitingLLM"

    @property
    def metadata(self) -> LLMMetadata:
        return LLMMetadata()

    @llm_completion_callback()
    def complete(self, prompt: str, formatted: bool = False, **kwargs: Any) -> CompletionResponse:
        return CompletionResponse(text=self.respond(prompt))

    @llm_completion_callback()
    def stream_complete(self, prompt: str, formatted: bool = False, **kwargs: Any) -> Any:
        text = self.respond(prompt)
        yield CompletionResponse(text=text, delta=text)


@pytest.fixture
def embedding() -> HashEmbedding:
    return HashEmbedding()


@pytest.fixture
def citing_llm() -> type[CitingLLM]:
    return CitingLLM
