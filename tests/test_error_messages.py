"""An error names the bad value in a line, however large the value: its ``repr`` cut to 80
characters (:func:`synapse_retriever.errors.shown`), an int past Python's 4,300 digits by its
size. A megabyte passed where an id or a list was expected used to be printed whole, and a
huge int made the message itself fail ("Exceeds the limit ... for integer string
conversion") in place of the error that names the field."""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from typing import Any

import psycopg
import pytest
from langchain_core.retrievers import BaseRetriever
from langchain_core.runnables import RunnableLambda
from langchain_synapse_retriever import SynapseCallbackHandler, SynapseRetriever
from langchain_synapse_retriever import SynapseMemoryRetriever as LangChainMemoryRetriever
from llama_index.postprocessor.synapse import (
    SynapseMemoryBlock,
    SynapsePostprocessor,
    SynapseUsageHandler,
)
from llama_index.postprocessor.synapse import SynapseMemoryRetriever as LlamaIndexMemoryRetriever
from pydantic import ValidationError

from synapse_retriever import Learning, SynapseConfig, SynapseStore, coactivation_set
from synapse_retriever.config import Operations
from synapse_retriever.conversation import ContextConfig, ConversationMemory, HashingEmbedder
from synapse_retriever.errors import (
    InvalidTypeError,
    InvalidValueError,
    NotASynapseDatabaseError,
    StorageUnavailableError,
    SynapseError,
)

BIG = "x" * 1_000_000
HUGE = -(10**5000)  # repr() refuses it


class _Nothing(BaseRetriever):
    def _get_relevant_documents(self, query: str, **kwargs: Any) -> list[Any]:
        return []


@pytest.fixture
def store() -> Iterator[SynapseStore]:
    with SynapseStore(":memory:") as opened:
        opened.reinforce(["a", "b"], at=0.0)
        yield opened


CALLS: dict[str, tuple[type[SynapseError], Callable[[SynapseStore], object]]] = {
    "a namespace": (InvalidValueError, lambda s: s.reinforce(["a", "b"], namespace=BIG)),
    "a hit that is no pair": (InvalidTypeError, lambda s: s.recall([BIG])),
    "hits that are no list": (InvalidTypeError, lambda s: s.recall(HUGE)),
    "an unsorted hit's id": (InvalidValueError, lambda s: s.recall([("y", 0.5), (BIG, 0.9)])),
    "a hit's score": (InvalidTypeError, lambda s: s.recall([("x", [0] * 100_000)])),
    "a bare str of nodes": (InvalidTypeError, lambda s: s.reinforce(BIG)),
    "a bare str of seeds": (InvalidTypeError, lambda s: s.spread(BIG)),
    "an int config field": (
        InvalidValueError,
        lambda s: SynapseConfig(learning=Learning(max_coactivation=HUGE)),
    ),
    "the sessions of a retrieval": (
        InvalidTypeError,
        lambda s: ConversationMemory(embedder=HashingEmbedder()).retrieve("q", sessions=BIG),
    ),
    "the weights of a retrieval": (
        InvalidValueError,
        lambda s: ConversationMemory(embedder=HashingEmbedder()).retrieve(
            "q", weights=[1.0] * 100_000
        ),
    ),
    "a LangChain retriever's k": (
        InvalidTypeError,
        lambda s: SynapseRetriever(base_retriever=_Nothing(), store=s).invoke("q", k=BIG),
    ),
    "a LlamaIndex node": (
        InvalidTypeError,
        lambda s: SynapsePostprocessor(store=s).record_usage([["x"] * 100_000]),
    ),
}


@pytest.mark.parametrize("what", list(CALLS))
def test_a_huge_bad_value_is_named_in_a_line(store: SynapseStore, what: str) -> None:
    error, call = CALLS[what]
    with pytest.raises(error) as refused:
        call(store)
    message = str(refused.value)
    assert len(message) < 500, message[:500]  # a line of advice, and the value in 200
    assert any(s in message for s in ("'xxxxxxxxxx", "1.0, 1.0", "'x', 'x'", "0, 0", "16610 bits"))


def _memory() -> ConversationMemory:
    return ConversationMemory(embedder=HashingEmbedder())


HOLDING_HUGE: dict[str, tuple[type[SynapseError], Callable[[], object]]] = {
    "the weights of a retrieval": (
        InvalidValueError,
        lambda: _memory().retrieve("q", weights=(HUGE, 1.0)),
    ),
    "the sessions of a retrieval": (
        InvalidTypeError,
        lambda: _memory().retrieve("q", sessions=[HUGE]),
    ),
    "a turn's session": (InvalidTypeError, lambda: _memory().add_turn("hi", session=HUGE)),  # type: ignore[arg-type]
    "a turn's role": (InvalidTypeError, lambda: _memory().add_turn("hi", role=HUGE)),  # type: ignore[arg-type]
    "a turn's speaker": (InvalidTypeError, lambda: _memory().add_turn("hi", speaker=HUGE)),  # type: ignore[arg-type]
    "a LangChain handler's tools": (
        InvalidTypeError,
        lambda: SynapseCallbackHandler(SynapseStore(":memory:"), tools=[HUGE]),  # type: ignore[list-item]
    ),
    "a LlamaIndex memory retriever's sessions": (
        InvalidTypeError,
        lambda: LlamaIndexMemoryRetriever(_memory(), sessions=[HUGE]),  # type: ignore[list-item]
    ),
    "a LlamaIndex memory retriever's similarity_top_k": (
        InvalidValueError,
        lambda: LlamaIndexMemoryRetriever(_memory(), similarity_top_k=HUGE),
    ),
    "a hit's id": (InvalidTypeError, lambda: SynapseStore(":memory:").recall([(HUGE, 1.0)])),
    "a config pair": (
        InvalidValueError,
        lambda: SynapseConfig(learning=Learning(half_life_bounds=(HUGE, 1.0, 2.0))),  # type: ignore[arg-type]
    ),
}


HUGE_SETTINGS: dict[str, Callable[[int], object]] = {
    # a float setting: math.isfinite raised OverflowError ("int too large to convert to
    # float"); a choice or a count: the message itself failed (the int has no repr)
    "a memory's busy_timeout_s": lambda v: ConversationMemory(":memory:", busy_timeout_s=v),
    "a store's refresh_interval_s": lambda v: Operations(refresh_interval_s=v),
    "a store's max_clock_skew_s": lambda v: Operations(max_clock_skew_s=v),
    "a learning rate": lambda v: Learning(learning_rate=v),
    "a learned scale": lambda v: Learning(learned_scale=v),
    "a half-life's upper bound": lambda v: Learning(half_life_bounds=(3.0, v)),
    "a count kept per namespace": lambda v: Learning(recent_events=v),
    "a count kept per node": lambda v: Learning(use_history=v),
    "a memory's demotion": lambda v: ContextConfig(demotion=v),  # type: ignore[arg-type]
    "a memory's assembly": lambda v: ContextConfig(assembly=v),  # type: ignore[arg-type]
}


@pytest.mark.parametrize("what", list(HUGE_SETTINGS))
@pytest.mark.parametrize("sign", [1, -1])
def test_a_setting_of_a_huge_int_is_refused_typed_naming_it(what: str, sign: int) -> None:
    with pytest.raises(InvalidValueError) as refused:
        HUGE_SETTINGS[what](sign * HUGE)
    message = str(refused.value)
    assert len(message) < 300 and "16610 bits" in message, message[:300]


@pytest.mark.parametrize("what", list(HOLDING_HUGE))
def test_a_bad_value_holding_a_huge_int_is_named_not_a_failed_message(what: str) -> None:
    # repr() of a tuple or a list holding an int past 4,300 digits raises ValueError ("Exceeds
    # the limit ... for integer string conversion"), which replaced the error naming the field
    error, call = HOLDING_HUGE[what]
    with pytest.raises(error) as refused:
        call()
    message = str(refused.value)
    assert len(message) < 300, message[:300]
    assert re.search(r"<unprintable \w+ object>|16610 bits", message), message


@pytest.mark.parametrize("limit", [1, 0, -5, 2.0])
def test_a_limit_that_keeps_no_pair_is_refused_naming_it(limit: object) -> None:
    # coactivation_set took any limit: 0 or a negative one kept no id, and the event was lost
    with pytest.raises(InvalidValueError, match=f"limit must be an integer >= 2, got {limit}"):
        coactivation_set(["a", "b", "c"], limit=limit)  # type: ignore[arg-type]
    assert coactivation_set(["a", "b", "c"], limit=2) == ["a", "b"]


WRONG_TYPES: dict[str, tuple[Callable[[SynapseStore], object], str]] = {
    # each was refused naming only the type ("got int"), or as a ValueError
    "an event id": (lambda s: s.reinforce(["a", "c"], event_id=5), "got 5"),  # type: ignore[arg-type]
    "a namespace": (lambda s: s.reinforce(["a", "c"], namespace=1), "got int 1"),  # type: ignore[arg-type]
    "nodes": (lambda s: s.reinforce(5), "got int 5"),  # type: ignore[arg-type]
    "a recall constant": (lambda s: SynapseConfig.actr(keep_bonus="2"), "got '2'"),
    "a count": (lambda s: Learning(recent_events="3"), "got '3'"),  # type: ignore[arg-type]
    "a rate": (lambda s: Learning(learning_rate=True), "got True"),
    "a turn's text": (lambda s: _memory().add_turn(5), "got int 5"),  # type: ignore[arg-type]
    "a query": (lambda s: _memory().assemble(5, 100), "got int 5"),  # type: ignore[arg-type]
    "late": (lambda s: s.reinforce(["a", "c"], late=None), "got None"),  # type: ignore[arg-type]
    "a preset": (lambda s: SynapseConfig.preset(5), "got 5"),  # type: ignore[arg-type]
    "weights": (lambda s: _memory().retrieve("q", weights=True), "got True"),  # type: ignore[arg-type]
    "a weight": (lambda s: _memory().retrieve("q", weights=(None, 1.0)), "got (None, 1.0)"),
    "a dimension": (lambda s: HashingEmbedder(dim="8"), "got '8'"),  # type: ignore[arg-type]
    "a limit": (lambda s: coactivation_set(["a", "b"], limit="3"), "got '3'"),  # type: ignore[arg-type]
    "a LlamaIndex top k": (
        lambda s: LlamaIndexMemoryRetriever(_memory(), similarity_top_k="3"),  # type: ignore[arg-type]
        "got '3'",
    ),
}


@pytest.mark.parametrize("what", list(WRONG_TYPES))
def test_a_value_of_the_wrong_type_is_a_type_error_naming_it(
    store: SynapseStore, what: str
) -> None:
    call, named = WRONG_TYPES[what]
    with pytest.raises(InvalidTypeError) as refused:
        call(store)
    assert isinstance(refused.value, TypeError) and named in str(refused.value), refused.value


@pytest.mark.parametrize(
    "call",
    [
        lambda url: SynapseCallbackHandler(url),  # type: ignore[arg-type]
        lambda url: SynapseStore(":memory:", config=url),  # type: ignore[arg-type]
        lambda url: SynapseStore(":memory:").reinforce(["a", "b"], event_id=[url]),  # type: ignore[arg-type]
    ],
)
def test_a_url_in_a_message_is_shown_without_its_user_and_password(
    call: Callable[[str], object],
) -> None:
    # shown() printed the value whole: a PostgreSQL URL given where a store was expected
    with pytest.raises(SynapseError) as refused:
        call("postgresql://alice:s3cret@db.example/prod")
    message = str(refused.value)
    assert "db.example/prod" in message and "s3cret" not in message and "alice" not in message


ADAPTERS: dict[str, Callable[[str], object]] = {
    "LangChain": lambda url: SynapseRetriever(
        base_retriever=RunnableLambda(lambda q: []), store=url
    ),
    "LlamaIndex": lambda url: SynapsePostprocessor(store=url),
}


@pytest.mark.parametrize("adapter", list(ADAPTERS))
@pytest.mark.parametrize(
    ("url", "error"),
    [
        ("postgresql://alice:s3cret@127.0.0.1:1/none", StorageUnavailableError),  # no server
        ("postgresql://alice:s3cret%ZZ@127.0.0.1/none", InvalidValueError),  # libpq's parse
    ],
)
def test_an_adapter_that_cannot_open_its_store_raises_the_librarys_error_without_a_password(
    adapter: str, url: str, error: type[SynapseError]
) -> None:
    # the LangChain retriever wrapped it in a ValidationError quoting the URL whole, and
    # pydantic's echo of the input showed the password; the LlamaIndex one sometimes
    with pytest.raises(error) as refused:
        ADAPTERS[adapter](url)
    assert "s3cret" not in str(refused.value) and "alice" not in str(refused.value)
    context = refused.value.__context__  # pydantic's error keeps the input in its errors()
    assert context is None or "s3cret" not in repr(getattr(context, "errors", list)())


MISSING_OR_WRONG: dict[str, Callable[[str], object]] = {
    "LangChain, no base_retriever": lambda url: SynapseRetriever(store=url),
    "LangChain, a misspelt argument": lambda url: SynapseRetriever(
        base_retriever=RunnableLambda(lambda q: []), store=":memory:", k=url
    ),
    "LlamaIndex, a wrong docstore": lambda url: SynapsePostprocessor(store=url, docstore=url),
    # a review's cases: bytes, a set, an input nested deeper than masked() reads
    "LangChain, the URL as bytes": lambda url: SynapseRetriever(
        base_retriever=RunnableLambda(lambda q: []), store=url.encode()
    ),
    "LlamaIndex, a set for a docstore": lambda url: SynapsePostprocessor(
        store=":memory:", docstore=frozenset([url])
    ),
    "LangChain, nested deep": lambda url: SynapseRetriever(
        base_retriever=RunnableLambda(lambda q: []), store=":memory:", k=[[[[[[url]]]]]]
    ),
}


@pytest.mark.parametrize("case", list(MISSING_OR_WRONG))
def test_an_adapters_validation_error_holds_no_password_even_in_its_errors(case: str) -> None:
    # hide_input_in_errors kept the input out of str(), but errors() and json(), which an
    # application may log, held it whole: the store URL's password
    from pydantic import ValidationError

    with pytest.raises(ValidationError) as refused:
        MISSING_OR_WRONG[case]("postgresql://alice:s3cret@127.0.0.1:1/none")
    error = refused.value
    for shown_as in (str(error), repr(error.errors()), error.json()):
        assert "s3cret" not in shown_as and "alice" not in shown_as, shown_as
    assert "127.0.0.1:1/none" in repr(error.errors()) and error.__context__ is None
    assert "127.0.0.1:1/none" in error.json()


@pytest.mark.parametrize("adapter", list(ADAPTERS))
def test_an_adapter_refuses_another_applications_database_as_the_store_does(
    adapter: str, postgres_url: str
) -> None:
    with psycopg.connect(postgres_url, autocommit=True) as conn:
        conn.execute("CREATE TABLE invoices (id int)")
    scheme, _, rest = postgres_url.partition("://")
    user, _, host = rest.partition("@")
    url = f"{scheme}://{user or 'postgres'}:s3cret@{host}"  # trust: the password is not asked
    with pytest.raises(NotASynapseDatabaseError, match="another application") as refused:
        ADAPTERS[adapter](url)
    assert "s3cret" not in str(refused.value)


MISSPELT: dict[str, Callable[[], object]] = {
    "LangChain retriever": lambda: SynapseRetriever(
        base_retriever=RunnableLambda(list), store=":memory:", active_namepsace="shared"
    ),
    "LangChain memory retriever": lambda: LangChainMemoryRetriever(memory=_memory(), kk=3),
    "LlamaIndex postprocessor": lambda: SynapsePostprocessor(store=":memory:", max_injekt=3),
    "LlamaIndex memory block": lambda: SynapseMemoryBlock(":memory:", budget_tokenz=100),
    "LlamaIndex usage handler": lambda: SynapseUsageHandler(
        postprocessor=SynapsePostprocessor(store=":memory:"), namspace="shared"
    ),
}


@pytest.mark.parametrize("adapter", list(MISSPELT))
def test_an_adapter_refuses_an_argument_it_has_no_field_for(adapter: str) -> None:
    # pydantic dropped it without a word: a misspelt namespace wrote to "personal"
    with pytest.raises(ValidationError, match="Extra inputs are not permitted"):
        MISSPELT[adapter]()


def test_a_password_a_message_cuts_before_its_end_is_not_shown() -> None:
    from synapse_retriever.errors import shown

    message = shown("postgresql://alice:" + "s" * 300 + "@db.example/prod")
    assert message.startswith("'postgresql://") and "alice" not in message and "ss" not in message


@pytest.mark.parametrize(
    "value",
    [
        "postgresql://alice:hu/nt s3cret@db.example/prod",  # a '/' and a space in it
        "postgresql+psycopg://alice:pa's3cret@db/prod",  # a quote: the repr's changes
        "host=db password='it\\'s s3cret' dbname=x",  # quoted and escaped
        "host=db password=s3c\\ ret",  # escaped
        "host=db sslpassword=s3cret",
        "postgresql://db/prod?pass%77ord=s3cret",  # the key percent-encoded
    ],
)
def test_no_part_of_a_password_is_shown(value: str) -> None:
    # a review's cases: the patterns stopped at a '/', a space or a quote
    from synapse_retriever.errors import shown

    message = shown(value)
    assert "s3c" not in message and "ret" not in message.replace("prod", ""), message
