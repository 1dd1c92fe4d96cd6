"""llama_index.postprocessor.synapse.embeddings: LlamaIndex models as the memory's embedder.

The models are real LlamaIndex ``BaseEmbedding``s: a subclass over the core's hashing
embedder that counts its calls, and llama-index-core's own ``MockEmbedding``.
"""

from __future__ import annotations

from importlib.metadata import entry_points
from pathlib import Path

import numpy as np
import pytest
from llama_index.core.base.embeddings.base import BaseEmbedding
from llama_index.core.bridge.pydantic import PrivateAttr
from llama_index.core.embeddings import MockEmbedding
from llama_index.core.llms import ChatMessage
from llama_index.core.memory import Memory
from llama_index.postprocessor.synapse import (
    LlamaIndexEmbedder,
    SynapseMemoryBlock,
    synapse_trim_chat_messages,
)

from synapse_retriever.conversation import (
    ContextConfig,
    ConversationMemory,
    HashingEmbedder,
    as_embedder,
)
from synapse_retriever.errors import InvalidTypeError, InvalidValueError


class HashingEmbedding(BaseEmbedding):
    """The core's HashingEmbedder behind LlamaIndex's interface; counts its calls."""

    model_name: str = "hashing-1024"
    dim: int = 1024
    _batches: list[int] = PrivateAttr(default_factory=list)  # texts per batch
    _async_batches: list[int] = PrivateAttr(default_factory=list)
    _query_calls: int = PrivateAttr(default=0)

    @classmethod
    def class_name(cls) -> str:
        return "HashingEmbedding"

    def vector(self, text: str) -> list[float]:
        return [float(x) for x in HashingEmbedder(self.dim).embed([text])[0]]

    def _get_text_embedding(self, text: str) -> list[float]:
        return self.vector(text)

    def _get_query_embedding(self, query: str) -> list[float]:
        self._query_calls += 1
        return self.vector(query)

    async def _aget_query_embedding(self, query: str) -> list[float]:
        self._query_calls += 1
        return self.vector(query)

    def _get_text_embeddings(self, texts: list[str]) -> list[list[float]]:
        self._batches.append(len(texts))
        return super()._get_text_embeddings(texts)

    async def _aget_text_embeddings(self, texts: list[str]) -> list[list[float]]:
        self._async_batches.append(len(texts))
        return await super()._aget_text_embeddings(texts)


TURNS = [
    ("user", "We moved the production deploy to Fridays. Lovely weather today."),
    ("assistant", "Noted: production deploys happen on Fridays from now on."),
    ("user", "My sister visits next week; we will go to the science museum."),
    ("assistant", "Enjoy the museum! The planetarium show is worth it."),
    ("user", "The staging database lives on host db-stg-7. Backups run nightly."),
    ("assistant", "Got it, db-stg-7 for staging, nightly backups."),
    ("user", "Coffee machine broke again. Tea it is."),
    ("assistant", "Tea is a fine choice."),
    ("user", "Remind me: the quarterly report is due on the 30th."),
    ("assistant", "The quarterly report is due on the 30th."),
    ("user", "Thanks, that is all for now."),
    ("assistant", "You are welcome."),
]
QUERY = "When is the production deploy, and which host runs staging?"
TEXTS = ["deploy on Fridays", "staging host", "museum visit", "coffee broke", "report due"]


def assembled(
    embedder: object, budget: int, config: ContextConfig | None = None
) -> list[tuple[str, str]]:
    with ConversationMemory(
        ":memory:", embedder=embedder, config=config, background=False
    ) as memory:
        for at, (role, text) in enumerate(TURNS):
            memory.add_turn(text, role=role, at=at * 60)
        turns = memory.assemble(QUERY, budget, at=len(TURNS) * 60)
    return [(turn.level.value, turn.text) for turn in turns]


@pytest.mark.parametrize("config", [ContextConfig(), ContextConfig.gradient()])
@pytest.mark.parametrize("budget", [40, 70, 110, 1000])
def test_a_memory_with_a_llamaindex_model_assembles_what_the_hashing_embedder_does(
    budget: int, config: ContextConfig
) -> None:
    assert assembled(HashingEmbedding(), budget, config) == assembled(
        HashingEmbedder(), budget, config
    )


def test_the_comparison_covers_every_detail_level() -> None:
    hashing, gradient = HashingEmbedder(), ContextConfig.gradient()
    levels = {level for budget in (40, 70, 110) for level, _ in assembled(hashing, budget)}
    levels |= {level for b in (40, 70, 110) for level, _ in assembled(hashing, b, gradient)}
    assert levels == {"full", "chunks", "summary"}  # dropped turns are not returned


def test_embed_batches_by_the_models_embed_batch_size() -> None:
    model = HashingEmbedding(embed_batch_size=2)
    embedder = LlamaIndexEmbedder(model)
    vectors = embedder.embed(TEXTS)
    assert model._batches == [2, 2, 1]  # 5 texts, 2 per batch: 3 calls
    assert vectors.dtype == np.float32 and vectors.shape == (5, 1024)
    assert np.array_equal(vectors, HashingEmbedder().embed(TEXTS))
    assert embedder.dim == 1024 and model._batches == [2, 2, 1]  # no probe
    assert model._query_calls == 0  # texts, questions included, are embedded as texts


@pytest.mark.asyncio
async def test_aembed_equals_embed() -> None:
    model = HashingEmbedding(embed_batch_size=2)
    embedder = LlamaIndexEmbedder(model)
    together = await embedder.aembed(TEXTS)
    assert sorted(model._async_batches) == [1, 2, 2]  # LlamaIndex gathers the batches
    assert np.array_equal(together, embedder.embed(TEXTS))
    empty = await LlamaIndexEmbedder(model).aembed([])
    assert empty.shape == (0, 1024) and len(model._async_batches) == 4  # the probe


def test_the_name_is_stable_for_a_model_and_differs_for_another() -> None:
    first, second = LlamaIndexEmbedder(HashingEmbedding()), LlamaIndexEmbedder(HashingEmbedding())
    other = LlamaIndexEmbedder(HashingEmbedding(model_name="hashing-256", dim=256))
    assert first.name == second.name == "llama-index:HashingEmbedding:hashing-1024"
    assert other.name == "llama-index:HashingEmbedding:hashing-256"
    assert LlamaIndexEmbedder(HashingEmbedding(), name="my-space").name == "my-space"


def test_a_class_without_its_own_class_name_is_named_by_its_path() -> None:
    class Plain(BaseEmbedding):
        def _get_text_embedding(self, text: str) -> list[float]:
            return [1.0, 0.0]

        def _get_query_embedding(self, query: str) -> list[float]:
            return [1.0, 0.0]

        async def _aget_query_embedding(self, query: str) -> list[float]:
            return [1.0, 0.0]

    name = LlamaIndexEmbedder(Plain(model_name="plain-v1")).name
    assert name == f"llama-index:{__name__}.{Plain.__qualname__}:plain-v1"


def test_an_empty_list_embeds_to_shape_0_dim_with_one_probe_kept() -> None:
    model = HashingEmbedding(dim=64)
    embedder = LlamaIndexEmbedder(model)
    assert embedder.embed([]).shape == (0, 64)
    assert embedder.embed([]).shape == (0, 64)
    assert embedder.dim == 64
    assert model._batches == [1]  # one probe text, once


def test_as_embedder_finds_the_adapter_through_the_entry_point() -> None:
    registered = {e.name: e.value for e in entry_points(group="synapse_retriever.embedders")}
    assert registered["llama_index"] == (
        "llama_index.postprocessor.synapse.embeddings:from_framework"
    )
    model = HashingEmbedding()
    adapted = as_embedder(model)
    assert isinstance(adapted, LlamaIndexEmbedder) and adapted.embed_model is model
    assert as_embedder(adapted) is adapted  # already an embedder: unchanged


def test_as_embedder_refuses_what_no_adapter_takes() -> None:
    with pytest.raises(InvalidTypeError, match=r"got object; .* llama-index-postprocessor-synapse"):
        as_embedder(object())


def test_bad_arguments_and_bad_answers_are_refused_by_name() -> None:
    with pytest.raises(InvalidTypeError, match="must be a LlamaIndex BaseEmbedding, got str"):
        LlamaIndexEmbedder("text-embedding-3-small")  # type: ignore[arg-type]
    with pytest.raises(InvalidValueError, match="name must be a non-empty str"):
        LlamaIndexEmbedder(HashingEmbedding(), name="")
    with pytest.raises(InvalidTypeError, match="a bare str"):
        LlamaIndexEmbedder(HashingEmbedding()).embed("deploy")

    class Ragged(HashingEmbedding):
        def _get_text_embeddings(self, texts: list[str]) -> list[list[float]]:
            return [[1.0] * (i + 1) for i in range(len(texts))]

    with pytest.raises(InvalidValueError, match="Ragged returned vectors of different lengths"):
        LlamaIndexEmbedder(Ragged()).embed(["a b", "c d"])


def test_reopening_with_the_same_model_embeds_no_turn_again(tmp_path: Path) -> None:
    path = tmp_path / "chat.db"
    with ConversationMemory(path, embedder=HashingEmbedding(), background=False) as memory:
        for role, text in TURNS:
            memory.add_turn(text, role=role, at=0)
    model = HashingEmbedding()
    with ConversationMemory(path, embedder=model, background=False) as memory:
        assert len(memory) == len(TURNS)
    assert model._batches == []  # its stored vectors give the length: no probe
    other = HashingEmbedding(model_name="hashing-256", dim=256)
    with ConversationMemory(path, embedder=other, background=False):
        pass
    assert sum(other._batches) == 1 + len(TURNS)  # another model: every turn again


def test_trim_chat_messages_takes_a_llamaindex_model() -> None:
    history = [ChatMessage(role="system", content="You are terse.")]
    history += [ChatMessage(role=role, content=text) for role, text in TURNS]
    history.append(ChatMessage(role="user", content=QUERY))
    for budget in (40, 80):
        native = synapse_trim_chat_messages(history, max_tokens=budget, embedder=HashingEmbedder())
        llama = synapse_trim_chat_messages(history, max_tokens=budget, embedder=HashingEmbedding())
        assert [m.content for m in llama] == [m.content for m in native]


def test_a_memory_block_over_a_memory_with_a_llamaindex_model() -> None:
    conversation = ConversationMemory(
        ":memory:", config=ContextConfig(working_memory=0), embedder=MockEmbedding(embed_dim=16)
    )
    assert isinstance(conversation.embedder, LlamaIndexEmbedder)
    block = SynapseMemoryBlock(conversation, budget_tokens=200)
    memory = Memory.from_defaults(
        session_id="me",
        token_limit=300,
        chat_history_token_ratio=0.5,
        token_flush_size=60,
        memory_blocks=[block],
    )
    memory.put(ChatMessage(role="user", content="We moved the production deploy to Fridays."))
    for i in range(30):
        memory.put(ChatMessage(role="user", content=f"Lunch talk {i}: pasta and coffee."))
    assert len(block.memory) > 10
    content = memory.get(input="When is the production deploy?")[0].content
    assert content is not None and "<synapse_memory>" in content
    conversation.close()


def test_a_memory_block_takes_a_llamaindex_model_as_embedder(tmp_path: Path) -> None:
    model = HashingEmbedding()
    block = SynapseMemoryBlock(tmp_path / "chat.db", budget_tokens=200, embedder=model)
    assert isinstance(block.memory.embedder, LlamaIndexEmbedder)
    assert block.memory.embedder.embed_model is model
    assert block.memory.config == ContextConfig(working_memory=0)
    block.memory.add_turn("We moved the production deploy to Fridays.", at=0)
    assert model._batches  # the turn went through the LlamaIndex model
    block.memory.close()


def test_a_memory_block_over_a_memory_refuses_settings_it_would_ignore() -> None:
    with ConversationMemory(":memory:") as conversation:
        with pytest.raises(InvalidValueError, match="embedder go with a path"):
            SynapseMemoryBlock(conversation, embedder=HashingEmbedding())
        with pytest.raises(InvalidValueError, match="config, token_counter go with a path"):
            SynapseMemoryBlock(conversation, config=ContextConfig(), token_counter=len)
