"""Typed relations from a model: CAUSED_BY, SOLVED_BY, RELATES_TO, and decisions.

The deterministic extractor finds what a turn names; what led to what ("the timeout was
caused by the pool size", "pinning the image solved it") takes reading. A
:class:`RelationExtractor` reads a window of turns and proposes typed relations between
them (or the things they name) and the decisions they record; it runs in the background
consolidation, never inside ``add_turn``. :class:`PromptRelationExtractor` asks any
``prompt -> completion`` callable for JSON (the LangChain and LlamaIndex adapters wrap a
chat model or an LLM in one); an answer that is not that JSON, or a relation that names
an unknown turn or type, is logged and skipped: a model never stops a turn.

Examples
--------
>>> answer = '''{"relations": [{"source": 2, "type": "CAUSED_BY", "target": 1}],
...              "decisions": [{"turn": 3, "decision": "Pin the base image"}]}'''
>>> extractor = PromptRelationExtractor(lambda prompt: answer)
>>> turns = [(1, "user", "The image changed."), (2, "user", "Deploys fail."),
...          (3, "user", "We pin it.")]
>>> for r in extractor.relations(turns):
...     print(r)
Relation(source=2, type='CAUSED_BY', target=1)
Relation(source=3, type='MENTIONS', target='decision:pin the base image')
"""

from __future__ import annotations

import json
import logging
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

from synapse_retriever.conversation.graph.edges import LINK_TYPES
from synapse_retriever.conversation.graph.entities import extract_entities, singular

__all__ = [
    "RELATIONS_PROMPT",
    "PromptRelationExtractor",
    "Relation",
    "RelationExtractor",
    "endpoint_node",
    "parse_relations",
]

log = logging.getLogger(__name__)

RELATIONS_PROMPT = """\
Read these conversation turns (each starts with its [id]):

{turns}

List how they relate, as JSON and nothing else:
{{"relations": [{{"source": <id or thing>, "type": "CAUSED_BY" | "SOLVED_BY" | "RELATES_TO",
"target": <id or thing>}}], "decisions": [{{"turn": <id>, "decision": "<a few words>"}}]}}
"A CAUSED_BY B": A happened because of B. "A SOLVED_BY B": problem A was fixed by B.
"A RELATES_TO B": A and B are about one thing. A thing is a short name (a file, a
function, a product). Decisions are what the conversation agreed or chose. Use only ids
shown above; leave out what is not clearly said; empty lists are fine."""

Turn = tuple[int, str, str]
"""(turn id, role, text), as an extractor reads a turn."""


@dataclass(frozen=True)
class Relation:
    """``source -type-> target``: ints are turn ids, strings graph nodes (``kind:key``)."""

    source: int | str
    type: str
    target: int | str


@runtime_checkable
class RelationExtractor(Protocol):
    """Anything that reads turns and proposes relations: ``relations(turns)``."""

    def relations(self, turns: Sequence[Turn]) -> Sequence[Relation]:
        """The relations among ``turns`` ((id, role, text) triples)."""
        ...


def endpoint_node(name: str) -> str:
    """The graph node of a thing a model named: the one entity the deterministic
    extractor finds in it, else a ``topic`` (lower-cased, last word singular).

    Examples
    --------
    >>> endpoint_node("src/billing/vat.py"), endpoint_node("Retry policies")
    ('file:vat.py', 'topic:retry policy')
    """
    found = extract_entities(name)
    if len(found) == 1:
        return found[0].node
    words = name.lower().split()
    return "topic:" + " ".join([*words[:-1], singular(words[-1])]) if words else ""


def _json_object(answer: str) -> Any:
    """The first JSON object in a model's answer (code fences and prose around it allowed)."""
    start = answer.find("{")
    if start < 0:
        raise ValueError("no JSON object")
    return json.JSONDecoder().raw_decode(answer[start:])[0]


def _endpoint(value: object, turn_ids: frozenset[int]) -> int | str | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value if value in turn_ids else None
    if isinstance(value, str):
        text = value.strip()
        if re.fullmatch(r"\[?\d+\]?", text):
            number = int(text.strip("[]"))
            return number if number in turn_ids else None
        node = endpoint_node(text) if text and len(text) <= 200 else ""
        return node or None
    return None


def parse_relations(answer: str, turn_ids: Sequence[int]) -> list[Relation]:
    """The valid relations in a model's JSON ``answer`` about the turns ``turn_ids``.

    A relation whose type is not one of :data:`~.edges.LINK_TYPES`, or whose endpoint is
    an id not shown or neither an id nor a name, is skipped (and logged); so is an answer
    that holds no JSON object. A decision becomes a ``decision:`` node the turn MENTIONS.

    Examples
    --------
    >>> parse_relations('```json {"relations": [{"source": 9, "type": "CAUSED_BY", '
    ...                 '"target": 1}, {"source": 2, "type": "LOVES", "target": 1}]} ```',
    ...                 [1, 2])
    []
    >>> parse_relations("I think turn 2 was caused by turn 1.", [1, 2])
    []
    """
    ids = frozenset(turn_ids)
    try:
        data = _json_object(answer)
    except ValueError as exc:
        log.warning("relation extractor: an answer without JSON (%s), skipped: %.200r", exc, answer)
        return []
    if not isinstance(data, dict):
        log.warning("relation extractor: the JSON is not an object, skipped: %.200r", answer)
        return []
    found: list[Relation] = []
    for item in data.get("relations") or []:
        kind = str(item.get("type", "")).strip().upper() if isinstance(item, dict) else ""
        source = _endpoint(item.get("source"), ids) if isinstance(item, dict) else None
        target = _endpoint(item.get("target"), ids) if isinstance(item, dict) else None
        if kind not in LINK_TYPES or source is None or target is None or source == target:
            log.warning("relation extractor: skipped %.200r", item)
            continue
        found.append(Relation(source, kind, target))
    for item in data.get("decisions") or []:
        turn = _endpoint(item.get("turn"), ids) if isinstance(item, dict) else None
        text = item.get("decision") if isinstance(item, dict) else None
        words = text.lower().split() if isinstance(text, str) and len(text) <= 200 else []
        if not isinstance(turn, int) or not words:
            log.warning("relation extractor: skipped decision %.200r", item)
            continue
        found.append(Relation(turn, "MENTIONS", "decision:" + " ".join(words).rstrip(".")))
    return found


class PromptRelationExtractor:
    """Relations from a language model: any ``prompt -> completion`` callable.

    Parameters
    ----------
    complete : callable
        Sends a prompt, returns the model's text (JSON as :data:`RELATIONS_PROMPT` asks).
    prompt : str
        A template with ``{turns}`` (default: :data:`RELATIONS_PROMPT`).
    max_chars : int
        Each turn is shown cut to this many characters.

    Examples
    --------
    >>> broken = PromptRelationExtractor(lambda prompt: "Sorry, I cannot help with that.")
    >>> broken.relations([(1, "user", "Hello")])
    []
    """

    def __init__(
        self,
        complete: Callable[[str], str],
        *,
        prompt: str = RELATIONS_PROMPT,
        max_chars: int = 1000,
    ) -> None:
        self.complete = complete
        self.prompt = prompt
        self.max_chars = max_chars

    def relations(self, turns: Sequence[Turn]) -> list[Relation]:
        """One completion for the window; what it proposes, checked."""
        if not turns:
            return []
        shown = "\n".join(
            f"[{turn_id}] {role}: {' '.join(text.split())[: self.max_chars]}"
            for turn_id, role, text in turns
        )
        answer = self.complete(self.prompt.format(turns=shown))
        if not isinstance(answer, str):
            log.warning("relation extractor: the model returned %s, skipped", type(answer).__name__)
            return []
        return parse_relations(answer, [turn_id for turn_id, _, _ in turns])
