"""LangChain embeddings as the conversation memory's embedder.

`LangChainEmbedder` gives any ``langchain_core.embeddings.Embeddings`` (OpenAI, Hugging
Face, Ollama...) the core's :class:`~synapse_retriever.conversation.Embedder` shape: a stable
``name``, a ``dim`` and ``embed(texts)``. `from_framework` is registered under the
``synapse_retriever.embedders`` entry point, so ``ConversationMemory(embedder=embeddings)``
and every other ``embedder=`` take a LangChain model directly (see
:func:`synapse_retriever.conversation.as_embedder`).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import numpy.typing as npt
from langchain_core.embeddings import Embeddings

from synapse_retriever.conversation.embed import model_rows, text_list
from synapse_retriever.errors import InvalidTypeError, InvalidValueError, shown

__all__ = ["LangChainEmbedder", "default_name", "from_framework"]

MODEL_ATTRIBUTES = ("model", "model_name", "model_id", "deployment", "repo_id")
"""Where LangChain's embeddings keep the model's name, in the order they are read."""

PROBE = "dimension probe"
"""The text embedded once to learn the vector length when no embedding has given it yet."""


class LangChainEmbedder:
    """A LangChain ``Embeddings`` as a conversation-memory embedder.

    ``embed`` calls ``embed_documents`` in batches of ``batch_size`` texts (questions too:
    the memory compares turns with turns and with the question in one space);
    ``aembed`` calls ``aembed_documents`` the same way.

    ``dim`` is read from the first embedding made; read before any, it embeds one probe
    text (one ``embed_documents`` call) and keeps the length.

    ``name`` says which vectors are comparable: stored turns whose name differs are
    embedded again when a memory opens. By default it is
    ``langchain:<module>.<class>:<model>``, the model being the first non-empty of the
    attributes ``model``, ``model_name``, ``model_id``, ``deployment``, ``repo_id`` (left
    out when there is none). Two instances of one model share it; pass ``name=`` when
    another setting changes the vectors (a memory also re-embeds vectors of another size).

    Args:
        embeddings: Any LangChain embeddings model.
        batch_size: Texts per ``embed_documents`` call (at least 1).
        name: The vector space's identifier; default: derived from the model, as above.

    Raises:
        InvalidTypeError: ``embeddings`` is not a LangChain ``Embeddings``.
        InvalidValueError: ``batch_size`` is not a positive integer, or ``name`` is empty.

    Example:
        LangChain's deterministic fake stands in for your model (``OpenAIEmbeddings()``,
        ``HuggingFaceEmbeddings(...)``):

        >>> from langchain_core.embeddings import DeterministicFakeEmbedding
        >>> embedder = LangChainEmbedder(DeterministicFakeEmbedding(size=32), batch_size=16)
        >>> embedder.name
        'langchain:langchain_core.embeddings.fake.DeterministicFakeEmbedding'
        >>> embedder.embed(["We moved the deploy to Fridays.", "Lunch?"]).shape
        (2, 32)
        >>> embedder.dim
        32

        A memory takes the LangChain model itself (this package adapts it):

        >>> from synapse_retriever.conversation import ConversationMemory
        >>> with ConversationMemory(":memory:", embedder=DeterministicFakeEmbedding(size=32)) as m:
        ...     type(m.embedder).__name__
        'LangChainEmbedder'
    """

    def __init__(
        self, embeddings: Embeddings, *, batch_size: int = 64, name: str | None = None
    ) -> None:
        if not isinstance(embeddings, Embeddings):
            raise InvalidTypeError(
                f"embeddings must be a LangChain Embeddings, got {type(embeddings).__name__} "
                f"{shown(embeddings)}"
            )
        if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size < 1:
            raise InvalidValueError(f"batch_size must be an integer >= 1, got {shown(batch_size)}")
        if name is not None and (not isinstance(name, str) or not name.strip()):
            raise InvalidValueError(f"name must be a non-empty str, got {shown(name)}")
        self.embeddings = embeddings
        self.batch_size = batch_size
        self._name = name or default_name(embeddings)
        self._dim: int | None = None

    def __repr__(self) -> str:
        return f"LangChainEmbedder({self._name!r}, batch_size={self.batch_size})"

    @property
    def name(self) -> str:
        """The vector space's identifier (``langchain:<module>.<class>:<model>`` by default)."""
        return self._name

    @property
    def dim(self) -> int:
        """The vector length: from the first embedding, or from one probe text."""
        if self._dim is None:  # _rows keeps it
            return int(self._rows([PROBE], self.embeddings.embed_documents([PROBE])).shape[1])
        return self._dim

    def embed(self, texts: Sequence[str]) -> npt.NDArray[np.float32]:
        """One float32 row per text, ``batch_size`` texts per ``embed_documents`` call."""
        texts = text_list(texts)
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        batches = [
            self._rows(batch, self.embeddings.embed_documents(batch))
            for batch in self._batches(texts)
        ]
        return np.concatenate(batches)

    async def aembed(self, texts: Sequence[str]) -> npt.NDArray[np.float32]:
        """The async :meth:`embed`, with ``aembed_documents`` (one batch after another)."""
        texts = text_list(texts)
        if not texts:
            if self._dim is None:
                self._rows([PROBE], await self.embeddings.aembed_documents([PROBE]))
            return np.zeros((0, self.dim), dtype=np.float32)
        batches = [
            self._rows(batch, await self.embeddings.aembed_documents(batch))
            for batch in self._batches(texts)
        ]
        return np.concatenate(batches)

    def _batches(self, texts: list[str]) -> list[list[str]]:
        return [texts[i : i + self.batch_size] for i in range(0, len(texts), self.batch_size)]

    def _rows(self, batch: list[str], vectors: list[list[float]]) -> npt.NDArray[np.float32]:
        """The model's answer for ``batch`` as a (len(batch), dim) matrix; learns ``dim``."""
        rows = model_rows(vectors, len(batch), type(self.embeddings).__name__)
        if self._dim is None:
            self._dim = int(rows.shape[1])
        return rows


def default_name(embeddings: Embeddings) -> str:
    """``langchain:<module>.<class>:<model>`` (``:<model>`` left out when none is found).

    Example:
        >>> from langchain_core.embeddings import DeterministicFakeEmbedding
        >>> default_name(DeterministicFakeEmbedding(size=8))
        'langchain:langchain_core.embeddings.fake.DeterministicFakeEmbedding'
    """
    cls = type(embeddings)
    name = f"langchain:{cls.__module__}.{cls.__qualname__}"
    for attribute in MODEL_ATTRIBUTES:
        model = getattr(embeddings, attribute, None)
        if isinstance(model, str) and model.strip():
            return f"{name}:{model}"
    return name


def from_framework(obj: object) -> LangChainEmbedder | None:
    """The adapter for a LangChain ``Embeddings``; None for anything else.

    Registered as the ``langchain`` entry point of the ``synapse_retriever.embedders``
    group, which :func:`synapse_retriever.conversation.as_embedder` asks.

    Example:
        >>> from langchain_core.embeddings import DeterministicFakeEmbedding
        >>> from_framework(DeterministicFakeEmbedding(size=8))
        LangChainEmbedder('langchain:langchain_core.embeddings.fake.DeterministicFakeEmbedding', \
batch_size=64)
        >>> from_framework("text-embedding-3-small") is None
        True
    """
    return LangChainEmbedder(obj) if isinstance(obj, Embeddings) else None
