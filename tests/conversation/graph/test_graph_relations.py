"""Typed relations from a (scripted) model: parsing, skipping what is malformed, the graph."""

from __future__ import annotations

import json
import logging
from collections.abc import Sequence

import pytest

from synapse_retriever.conversation import ContextConfig, ConversationMemory, blank
from synapse_retriever.conversation.graph.relations import (
    PromptRelationExtractor,
    Relation,
    endpoint_node,
    parse_relations,
)


def answer(relations: list[dict[str, object]], decisions: list[dict[str, object]] = []) -> str:  # noqa: B006
    return json.dumps({"relations": relations, "decisions": decisions})


def test_valid_relations_and_decisions_are_read() -> None:
    text = answer(
        [
            {"source": 3, "type": "caused_by", "target": "1"},
            {"source": "[4]", "type": "SOLVED_BY", "target": "vies_client.py"},
            {"source": "Payment Gateway", "type": "RELATES_TO", "target": "validate_vat()"},
        ],
        [{"turn": 5, "decision": "Use the VIES lookup."}],
    )
    assert parse_relations(f"Sure!\n```json\n{text}\n```", [1, 2, 3, 4, 5]) == [
        Relation(3, "CAUSED_BY", 1),
        Relation(4, "SOLVED_BY", "file:vies_client.py"),
        Relation("name:payment gateway", "RELATES_TO", "code:validate_vat"),
        Relation(5, "MENTIONS", "decision:use the vies lookup"),
    ]


@pytest.mark.parametrize(
    "bad",
    [
        {"source": 9, "type": "CAUSED_BY", "target": 1},  # an id not shown
        {"source": 1, "type": "LOVES", "target": 2},  # not a link type
        {"source": 1, "type": "MENTIONS", "target": 2},  # the extractor's own, not a model's
        {"source": 1, "type": "CAUSED_BY", "target": 1},  # a loop
        {"source": True, "type": "CAUSED_BY", "target": 1},
        {"source": None, "type": "CAUSED_BY", "target": 1},
        {"source": "x" * 500, "type": "RELATES_TO", "target": 1},
        "turn 2 caused turn 1",
    ],
)
def test_a_malformed_relation_is_logged_and_skipped(
    bad: object, caplog: pytest.LogCaptureFixture
) -> None:
    good = {"source": 2, "type": "CAUSED_BY", "target": 1}
    with caplog.at_level(logging.WARNING):
        found = parse_relations(json.dumps({"relations": [bad, good]}), [1, 2])
    assert found == [Relation(2, "CAUSED_BY", 1)]
    assert "skipped" in caplog.text


@pytest.mark.parametrize(
    "text", ["", "no JSON here", "[1, 2, 3]", '{"relations": ', "{'relations': []}", "null"]
)
def test_an_answer_without_a_json_object_gives_nothing(text: str) -> None:
    assert parse_relations(text, [1, 2]) == []


def test_the_prompt_shows_each_turn_with_its_id_cut_to_max_chars() -> None:
    prompts: list[str] = []

    def complete(prompt: str) -> str:
        prompts.append(prompt)
        return answer([])

    extractor = PromptRelationExtractor(complete, max_chars=10)
    assert extractor.relations([(7, "user", "The build\nis  broken again today")]) == []
    assert "[7] user: The build " in prompts[0]
    assert "again" not in prompts[0]
    assert extractor.relations([]) == [] and len(prompts) == 1  # nothing to read: no call


def test_endpoint_node_reuses_the_deterministic_extractor() -> None:
    assert endpoint_node("payment_gateway.py") == "file:payment_gateway.py"
    assert endpoint_node("the retry policies") == "topic:the retry policy"
    assert endpoint_node("   ") == ""


class ScriptedModel:
    """Answers each consolidation with the next scripted answer (or raises)."""

    def __init__(self, answers: Sequence[str | Exception]) -> None:
        self.answers = list(answers)
        self.prompts: list[str] = []

    def __call__(self, prompt: str) -> str:
        self.prompts.append(prompt)
        item = self.answers.pop(0) if self.answers else answer([])
        if isinstance(item, Exception):
            raise item
        return item


TURNS = [
    "Nightly exports time out after 30 s.",  # 1
    "The pool size was lowered to 2 last week.",  # 2
    "Lunch?",  # 3
    "Raising the pool back to 10 fixed the exports.",  # 4
]


def fill(memory: ConversationMemory) -> None:
    for i, text in enumerate(TURNS):
        memory.add_turn(text, at=60.0 * i, session="ops" if i != 2 else "chat")


def test_relations_become_typed_edges_that_retrieve_follows(conversation_where: str) -> None:
    model = ScriptedModel(
        [
            answer(
                [
                    {"source": 1, "type": "CAUSED_BY", "target": 2},
                    {"source": 1, "type": "SOLVED_BY", "target": 4},
                ],
                [{"turn": 4, "decision": "pool size 10"}],
            )
        ]
    )
    path = conversation_where
    memory = ConversationMemory(path, relations=PromptRelationExtractor(model), background=False)
    fill(memory)
    memory.consolidate()
    graph = memory.graph(at=240)
    assert graph.has_edge("turn:1", "turn:2", key="CAUSED_BY")
    assert graph.has_edge("turn:1", "turn:4", key="SOLVED_BY")
    assert graph.nodes["decision:pool size 10"]["kind"] == "decision"
    assert "[4] user: Raising the pool" in model.prompts[0]
    memory.consolidate()  # nothing new to read: the model is not asked again
    assert len(model.prompts) == 1
    memory.close()
    with ConversationMemory(path) as reopened:  # persisted
        assert reopened.graph(at=240).has_edge("turn:1", "turn:4", key="SOLVED_BY")
        results = reopened.retrieve(
            "Why did the nightly exports time out?", k=3, mode="analytical", at=240
        )
    by_id = {r.turn_id: r for r in results}
    assert 4 in by_id and ("turn:1", "SOLVED_BY", "turn:4") in by_id[4].path


@pytest.mark.parametrize(
    "failure",
    ["I am sorry, I cannot do that.", RuntimeError("rate limited")],
    ids=["prose", "raises"],
)
def test_a_failing_model_never_stops_a_turn_or_a_consolidation(
    failure: str | Exception, caplog: pytest.LogCaptureFixture
) -> None:
    model = ScriptedModel([failure])
    with caplog.at_level(logging.WARNING):
        memory = ConversationMemory(
            ":memory:", relations=PromptRelationExtractor(model), background=False
        )
        fill(memory)
        memory.consolidate()
        memory.add_turn("Still here.", at=600)
    assert len(memory) == 5
    assert memory.consolidation_error is None
    assert {t for _, _, t in memory.graph(at=600).edges(keys=True)} == {"FOLLOWED_BY", "MENTIONS"}
    assert "relation extractor" in caplog.text
    memory.close()


@pytest.mark.parametrize("bad", ["topic:\ud800x", "topic:a\x00b"], ids=["surrogate", "nul"])
def test_a_relation_no_backend_can_store_is_skipped_and_consolidation_goes_on(
    conversation_where: str, bad: str, caplog: pytest.LogCaptureFixture
) -> None:
    # a lone surrogate raised UnicodeEncodeError at every consolidation, on both backends;
    # a NUL was stored on SQLite and refused by PostgreSQL at every run: none ever stored
    good = {"source": 1, "type": "CAUSED_BY", "target": 2}
    model = ScriptedModel([answer([good, {"source": 1, "type": "RELATES_TO", "target": bad}])])
    with (
        caplog.at_level(logging.WARNING),
        ConversationMemory(
            conversation_where, relations=PromptRelationExtractor(model), background=False
        ) as memory,
    ):
        fill(memory)
        assert memory.consolidate()
        edges = set(memory.graph(at=240).edges(keys=True))
        assert ("turn:1", "turn:2", "CAUSED_BY") in edges
        assert not [e for e in edges if "topic:" in e[1]]
    assert "relation extractor proposed" in caplog.text


def test_an_extractor_without_relations_is_refused() -> None:
    with pytest.raises(TypeError, match="relations must have relations"):
        ConversationMemory(":memory:", relations=object())  # type: ignore[arg-type]


class Custom:
    """A relation extractor that is not PromptRelationExtractor: nothing checks it upstream."""

    def __init__(self, proposals: list[object]) -> None:
        self.proposals = proposals
        self.windows: list[list[int]] = []

    def relations(self, turns: Sequence[tuple[int, str, str]]) -> list[object]:
        self.windows.append([turn_id for turn_id, _, _ in turns])
        return self.proposals if len(self.windows) == 1 else []


def test_a_custom_extractors_bad_relations_are_skipped_not_stored(
    conversation_where: str,
) -> None:
    bad = [
        Relation(999, "CAUSED_BY", 1),  # no such turn
        Relation("turn:abc", "RELATES_TO", 1),  # a turn node by hand
        Relation(1, "LOVES", 2),
        Relation(1, "RELATES_TO", "no kind"),
        Relation("topic:x", "MENTIONS", 1),  # only a turn mentions
        Relation(1, "RELATES_TO", "topic:\u200b"),  # a key that shows nothing
        Relation(1, "RELATES_TO", "\u200b:deploy"),  # a kind that shows nothing
        Relation(True, "CAUSED_BY", 2),  # type: ignore[arg-type]
        "turn 1 caused turn 2",
    ]
    good = Relation(1, "CAUSED_BY", 2)
    path = conversation_where
    memory = ConversationMemory(path, relations=Custom([*bad, good]), background=False)  # type: ignore[arg-type]
    fill(memory)
    memory.consolidate()
    memory.close()
    with ConversationMemory(path) as reopened:
        graph = reopened.graph(at=240)
        reopened.retrieve("why did the exports time out?", at=240)  # no KeyError
    typed = [
        (u, v, t) for u, v, t in graph.edges(keys=True) if t not in ("FOLLOWED_BY", "MENTIONS")
    ]
    assert typed == [("turn:1", "turn:2", "CAUSED_BY")]
    assert "turn:999" not in graph and "turn:abc" not in graph
    assert not any(blank(part) for node in graph for part in str(node).partition(":")[::2])


def test_every_unread_turn_is_read_in_windows_with_context() -> None:
    extractor = Custom([])
    memory = ConversationMemory(
        ":memory:",
        relations=extractor,  # type: ignore[arg-type]
        background=False,
        config=ContextConfig(consolidation_interval=120),
    )
    for i in range(120):
        memory.add_turn(f"turn {i} about the build", at=float(i))
    memory.consolidate()
    seen = {turn_id for window in extractor.windows for turn_id in window}
    assert seen == set(range(1, 121))
    assert [len(w) for w in extractor.windows] == [50, 55, 25]  # 5 turns of context before
    assert extractor.windows[1][:5] == [46, 47, 48, 49, 50]
    for i in range(120, 130):
        memory.add_turn(f"turn {i}", at=float(i))
    memory.consolidate()
    assert extractor.windows[-1] == list(range(116, 131))  # 5 read, then the 10 new
    memory.close()
