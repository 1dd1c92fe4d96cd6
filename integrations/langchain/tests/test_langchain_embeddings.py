"""langchain_synapse_retriever.embeddings: LangChain embeddings as the memory's embedder.

The embeddings are real LangChain ``Embeddings``: a subclass over the core's hashing
embedder that counts its calls, and langchain-core's own ``DeterministicFakeEmbedding``.
"""

from __future__ import annotations

from importlib.metadata import entry_points
from pathlib import Path

import numpy as np
import pytest
from langchain_core.embeddings import DeterministicFakeEmbedding, Embeddings
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage
from langchain_synapse_retriever import LangChainEmbedder, synapse_trim_messages

from synapse_retriever.conversation import (
    CachedEmbedder,
    ContextConfig,
    ConversationMemory,
    HashingEmbedder,
    as_embedder,
)
from synapse_retriever.errors import InvalidTypeError, InvalidValueError


class HashingEmbeddings(Embeddings):
    """The core's HashingEmbedder behind LangChain's interface; counts each call's texts."""

    def __init__(self, model: str = "hashing-1024", dim: int = 1024) -> None:
        self.model = model
        self.hashing = HashingEmbedder(dim)
        self.document_calls: list[int] = []  # texts per embed_documents call
        self.async_calls: list[int] = []  # texts per aembed_documents call
        self.query_calls = 0

    def vectors(self, texts: list[str]) -> list[list[float]]:
        return [[float(x) for x in row] for row in self.hashing.embed(texts)]

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        self.document_calls.append(len(texts))
        return self.vectors(texts)

    def embed_query(self, text: str) -> list[float]:
        self.query_calls += 1
        return self.vectors([text])[0]

    async def aembed_documents(self, texts: list[str]) -> list[list[float]]:
        self.async_calls.append(len(texts))
        return self.vectors(texts)

    async def aembed_query(self, text: str) -> list[float]:
        self.query_calls += 1
        return self.vectors([text])[0]


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
def test_a_memory_with_langchain_embeddings_assembles_what_the_hashing_embedder_does(
    budget: int, config: ContextConfig
) -> None:
    assert assembled(HashingEmbeddings(), budget, config) == assembled(
        HashingEmbedder(), budget, config
    )


def test_the_comparison_covers_every_detail_level() -> None:
    hashing, gradient = HashingEmbedder(), ContextConfig.gradient()
    levels = {level for budget in (40, 70, 110) for level, _ in assembled(hashing, budget)}
    levels |= {level for b in (40, 70, 110) for level, _ in assembled(hashing, b, gradient)}
    assert levels == {"full", "chunks", "summary"}  # dropped turns are not returned


def test_embed_calls_embed_documents_in_batches() -> None:
    embeddings = HashingEmbeddings()
    embedder = LangChainEmbedder(embeddings, batch_size=2)
    texts = ["deploy on Fridays", "staging host", "museum visit", "coffee broke", "report due"]
    vectors = embedder.embed(texts)
    assert embeddings.document_calls == [2, 2, 1]  # 5 texts, 2 per call: 3 calls
    assert vectors.dtype == np.float32 and vectors.shape == (5, 1024)
    assert np.array_equal(vectors, HashingEmbedder().embed(texts))
    assert embedder.dim == 1024 and embeddings.document_calls == [2, 2, 1]  # no probe


class FlakyEmbeddings(HashingEmbeddings):
    """Fails its third ``embed_documents`` call, as a paid API that times out once."""

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        if len(self.document_calls) == 2:
            self.document_calls.append(-len(texts))
            raise TimeoutError("the embeddings API timed out")
        return super().embed_documents(texts)


def test_a_cached_langchain_embedder_keeps_the_batches_before_one_that_fails() -> None:
    embeddings = FlakyEmbeddings()
    cached = CachedEmbedder(LangChainEmbedder(embeddings, batch_size=2))
    texts = ["deploy on Fridays", "staging host", "museum visit", "coffee broke", "report due"]
    with pytest.raises(TimeoutError):
        cached.embed(texts)
    vectors = cached.embed(texts)  # asked again: the failed batch, not the two paid before
    assert embeddings.document_calls == [2, 2, -1, 1]
    assert np.array_equal(vectors, HashingEmbedder().embed(texts))


@pytest.mark.asyncio
async def test_aembed_equals_embed_and_batches_the_same_way() -> None:
    embeddings = HashingEmbeddings()
    embedder = LangChainEmbedder(embeddings, batch_size=2)
    texts = ["deploy on Fridays", "staging host", "museum visit", "coffee broke", "report due"]
    together = await embedder.aembed(texts)
    assert embeddings.async_calls == [2, 2, 1]
    assert np.array_equal(together, embedder.embed(texts))
    empty = await LangChainEmbedder(embeddings).aembed([])
    assert empty.shape == (0, 1024) and embeddings.async_calls == [2, 2, 1, 1]  # the probe


def test_the_name_is_stable_for_a_model_and_differs_for_another() -> None:
    first, second = LangChainEmbedder(HashingEmbeddings()), LangChainEmbedder(HashingEmbeddings())
    other = LangChainEmbedder(HashingEmbeddings(model="hashing-256", dim=256))
    assert first.name == second.name == f"langchain:{__name__}.HashingEmbeddings:hashing-1024"
    assert other.name != first.name
    assert LangChainEmbedder(HashingEmbeddings(), name="my-space").name == "my-space"
    fake = DeterministicFakeEmbedding(size=8)  # no model attribute: the class alone
    assert LangChainEmbedder(fake).name == (
        "langchain:langchain_core.embeddings.fake.DeterministicFakeEmbedding"
    )


def test_the_name_reads_the_model_attributes_in_order() -> None:
    class Deployed(HashingEmbeddings):
        def __init__(self) -> None:
            super().__init__(model="")  # empty: skipped
            self.model_name = None  # not a str: skipped
            self.deployment = "embed-prod"
            self.repo_id = "org/never-read"

    assert LangChainEmbedder(Deployed()).name.endswith(".Deployed:embed-prod")


def test_an_empty_list_embeds_to_shape_0_dim_with_one_probe_kept() -> None:
    embeddings = HashingEmbeddings(dim=64)
    embedder = LangChainEmbedder(embeddings)
    assert embedder.embed([]).shape == (0, 64)
    assert embedder.embed([]).shape == (0, 64)
    assert embedder.dim == 64
    assert embeddings.document_calls == [1]  # one probe text, once


def test_as_embedder_finds_the_adapter_through_the_entry_point() -> None:
    registered = {e.name: e.value for e in entry_points(group="synapse_retriever.embedders")}
    assert registered["langchain"] == "langchain_synapse_retriever.embeddings:from_framework"
    embeddings = HashingEmbeddings()
    adapted = as_embedder(embeddings)
    assert isinstance(adapted, LangChainEmbedder) and adapted.embeddings is embeddings
    assert as_embedder(adapted) is adapted  # already an embedder: unchanged


def test_as_embedder_refuses_what_no_adapter_takes() -> None:
    with pytest.raises(InvalidTypeError, match=r"got object; LangChain embeddings"):
        as_embedder(object())


def test_bad_arguments_and_bad_answers_are_refused_by_name() -> None:
    with pytest.raises(InvalidTypeError, match="must be a LangChain Embeddings, got str"):
        LangChainEmbedder("text-embedding-3-small")  # type: ignore[arg-type]
    with pytest.raises(InvalidValueError, match="batch_size must be an integer >= 1, got 0"):
        LangChainEmbedder(HashingEmbeddings(), batch_size=0)
    with pytest.raises(InvalidValueError, match="name must be a non-empty str"):
        LangChainEmbedder(HashingEmbeddings(), name=" ")
    with pytest.raises(InvalidTypeError, match="a bare str"):
        LangChainEmbedder(HashingEmbeddings()).embed("deploy")

    class Short(HashingEmbeddings):
        def embed_documents(self, texts: list[str]) -> list[list[float]]:
            return super().embed_documents(texts)[:-1]

    with pytest.raises(InvalidValueError, match="Short returned 1 vectors for 2 texts"):
        LangChainEmbedder(Short()).embed(["a b", "c d"])


def test_reopening_with_the_same_model_embeds_no_turn_again(tmp_path: Path) -> None:
    path = tmp_path / "chat.db"
    with ConversationMemory(path, embedder=HashingEmbeddings(), background=False) as memory:
        for role, text in TURNS:
            memory.add_turn(text, role=role, at=0)
    embeddings = HashingEmbeddings()
    with ConversationMemory(path, embedder=embeddings, background=False) as memory:
        assert len(memory) == len(TURNS)
    assert embeddings.document_calls == []  # its stored vectors give the length: no probe
    other = HashingEmbeddings(model="hashing-256", dim=256)
    with ConversationMemory(path, embedder=other, background=False):
        pass
    assert sum(other.document_calls) == 1 + len(TURNS)  # another model: every turn again


def test_deterministic_fake_embedding_works_end_to_end(tmp_path: Path) -> None:
    path = tmp_path / "chat.db"
    with ConversationMemory(path, embedder=DeterministicFakeEmbedding(size=32)) as memory:
        assert isinstance(memory.embedder, LangChainEmbedder) and memory.embedder.dim == 32
        for role, text in TURNS:
            memory.add_turn(text, role=role, at=0)
        turns = memory.assemble(QUERY, 60, at=60)
    assert turns and sum(turn.tokens for turn in turns) <= 60
    assert turns[-1].text == TURNS[-1][1]  # working memory stays whole
    with ConversationMemory(path, embedder=DeterministicFakeEmbedding(size=32)) as memory:
        assert [t.text for t in memory.assemble(QUERY, 60, at=60)] == [t.text for t in turns]


def chat() -> list[BaseMessage]:
    messages: list[BaseMessage] = [SystemMessage("You are terse.")]
    for role, text in TURNS:
        messages.append(HumanMessage(text) if role == "user" else AIMessage(text))
    return [*messages, HumanMessage(QUERY)]


def test_trim_messages_takes_langchain_embeddings() -> None:
    config = ContextConfig(overflow="shrink")
    for budget in (40, 80):
        native = synapse_trim_messages(chat(), max_tokens=budget, embedder=HashingEmbedder())
        langchain = synapse_trim_messages(chat(), max_tokens=budget, embedder=HashingEmbeddings())
        assert [m.text for m in langchain] == [m.text for m in native]
    fake = synapse_trim_messages(
        chat(), max_tokens=60, config=config, embedder=DeterministicFakeEmbedding(size=16)
    )
    assert fake[0].text == "You are terse." and fake[-1].text == QUERY


def test_the_middleware_wraps_langchain_embeddings_once() -> None:
    from langchain_synapse_retriever import SynapseMemoryMiddleware

    embeddings = HashingEmbeddings()
    middleware = SynapseMemoryMiddleware(max_tokens=100, embedder=embeddings)
    assert isinstance(middleware.embedder, CachedEmbedder)  # its vectors kept across calls
    assert isinstance(middleware.embedder.embedder, LangChainEmbedder)
    assert middleware.embedder.embedder.embeddings is embeddings
