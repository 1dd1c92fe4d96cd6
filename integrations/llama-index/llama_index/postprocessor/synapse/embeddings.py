"""LlamaIndex embedding models as the conversation memory's embedder.

`LlamaIndexEmbedder` gives any ``BaseEmbedding`` (``OpenAIEmbedding``,
``HuggingFaceEmbedding``, ``Settings.embed_model``...) the core's
:class:`~synapse_retriever.conversation.Embedder` shape: a stable ``name``, a ``dim`` and
``embed(texts)``. `from_framework` is registered under the ``synapse_retriever.embedders``
entry point, so ``ConversationMemory(embedder=embed_model)`` and every other ``embedder=``
take a LlamaIndex model directly (see :func:`synapse_retriever.conversation.as_embedder`).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import numpy.typing as npt
from llama_index.core.base.embeddings.base import BaseEmbedding

from synapse_retriever.conversation.embed import model_rows, text_list
from synapse_retriever.errors import InvalidTypeError, InvalidValueError, shown

__all__ = ["LlamaIndexEmbedder", "default_name", "from_framework"]

PROBE = "dimension probe"
"""The text embedded once to learn the vector length when no embedding has given it yet."""


class LlamaIndexEmbedder:
    """A LlamaIndex ``BaseEmbedding`` as a conversation-memory embedder.

    ``embed`` calls ``get_text_embedding_batch``, which batches by the model's own
    ``embed_batch_size`` (questions are embedded as texts too: the memory compares turns
    with turns and with the question in one space); ``aembed`` calls
    ``aget_text_embedding_batch``. LlamaIndex's callbacks and instrumentation see every
    call, as they do the model's other uses.

    ``dim`` is read from the first embedding made; read before any, it embeds one probe
    text and keeps the length.

    ``name`` says which vectors are comparable: stored turns whose name differs are
    embedded again when a memory opens. By default it is
    ``llama-index:<class_name()>:<model_name>`` (the Python class's dotted path when the
    class keeps ``BaseComponent``'s ``class_name()``). Two instances of one model share it;
    pass ``name=`` when another setting changes the vectors (a memory also re-embeds
    vectors of another size).

    Args:
        embed_model: Any LlamaIndex embedding model.
        name: The vector space's identifier; default: derived from the model, as above.

    Raises:
        InvalidTypeError: ``embed_model`` is not a LlamaIndex ``BaseEmbedding``.
        InvalidValueError: ``name`` is empty.

    Example:
        LlamaIndex's ``MockEmbedding`` stands in for your model (``OpenAIEmbedding()``,
        ``HuggingFaceEmbedding(...)``, ``Settings.embed_model``):

        >>> from llama_index.core.embeddings import MockEmbedding
        >>> embedder = LlamaIndexEmbedder(MockEmbedding(embed_dim=32))
        >>> embedder.name
        'llama-index:MockEmbedding:unknown'
        >>> embedder.embed(["We moved the deploy to Fridays.", "Lunch?"]).shape
        (2, 32)
        >>> embedder.dim
        32

        A memory takes the LlamaIndex model itself (this package adapts it):

        >>> from synapse_retriever.conversation import ConversationMemory
        >>> with ConversationMemory(":memory:", embedder=MockEmbedding(embed_dim=32)) as memory:
        ...     type(memory.embedder).__name__
        'LlamaIndexEmbedder'
    """

    def __init__(self, embed_model: BaseEmbedding, *, name: str | None = None) -> None:
        if not isinstance(embed_model, BaseEmbedding):
            raise InvalidTypeError(
                f"embed_model must be a LlamaIndex BaseEmbedding, got {type(embed_model).__name__} "
                f"{shown(embed_model)}"
            )
        if name is not None and (not isinstance(name, str) or not name.strip()):
            raise InvalidValueError(f"name must be a non-empty str, got {shown(name)}")
        self.embed_model = embed_model
        self._name = name or default_name(embed_model)
        self._dim: int | None = None

    def __repr__(self) -> str:
        return f"LlamaIndexEmbedder({self._name!r})"

    @property
    def name(self) -> str:
        """The vector space's identifier (``llama-index:<class_name()>:<model_name>``)."""
        return self._name

    @property
    def dim(self) -> int:
        """The vector length: from the first embedding, or from one probe text."""
        if self._dim is None:  # _rows keeps it
            probe = self.embed_model.get_text_embedding_batch([PROBE])
            return int(self._rows([PROBE], probe).shape[1])
        return self._dim

    def embed(self, texts: Sequence[str]) -> npt.NDArray[np.float32]:
        """One float32 row per text, from ``get_text_embedding_batch``."""
        texts = text_list(texts)
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        return self._rows(texts, self.embed_model.get_text_embedding_batch(texts))

    async def aembed(self, texts: Sequence[str]) -> npt.NDArray[np.float32]:
        """The async :meth:`embed`, from ``aget_text_embedding_batch``."""
        texts = text_list(texts)
        if not texts:
            if self._dim is None:
                self._rows([PROBE], await self.embed_model.aget_text_embedding_batch([PROBE]))
            return np.zeros((0, self.dim), dtype=np.float32)
        return self._rows(texts, await self.embed_model.aget_text_embedding_batch(texts))

    def _rows(self, texts: list[str], vectors: list[list[float]]) -> npt.NDArray[np.float32]:
        """The model's answer for ``texts`` as a (len(texts), dim) matrix; learns ``dim``."""
        rows = model_rows(vectors, len(texts), type(self.embed_model).__name__)
        if self._dim is None:
            self._dim = int(rows.shape[1])
        return rows


def default_name(embed_model: BaseEmbedding) -> str:
    """``llama-index:<class_name()>:<model_name>``.

    A class that does not override ``class_name()`` (which then says ``base_component``)
    is named by its dotted Python path instead.

    Example:
        >>> from llama_index.core.embeddings import MockEmbedding
        >>> default_name(MockEmbedding(embed_dim=8, model_name="mock-v2"))
        'llama-index:MockEmbedding:mock-v2'
    """
    kind = embed_model.class_name()
    if kind == BaseEmbedding.class_name():
        cls = type(embed_model)
        kind = f"{cls.__module__}.{cls.__qualname__}"
    return f"llama-index:{kind}:{embed_model.model_name}"


def from_framework(obj: object) -> LlamaIndexEmbedder | None:
    """The adapter for a LlamaIndex ``BaseEmbedding``; None for anything else.

    Registered as the ``llama_index`` entry point of the ``synapse_retriever.embedders``
    group, which :func:`synapse_retriever.conversation.as_embedder` asks.

    Example:
        >>> from llama_index.core.embeddings import MockEmbedding
        >>> from_framework(MockEmbedding(embed_dim=8))
        LlamaIndexEmbedder('llama-index:MockEmbedding:unknown')
        >>> from_framework("text-embedding-3-small") is None
        True
    """
    return LlamaIndexEmbedder(obj) if isinstance(obj, BaseEmbedding) else None
