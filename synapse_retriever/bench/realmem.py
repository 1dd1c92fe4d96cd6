"""RealMem: does conversation memory keep the evidence that real questions need?

`RealMem <https://github.com/AvatarMemory/RealMemBench>`_ (Apache-2.0) holds long real-world
style conversations of ten personas (about 200 sessions each). Some user turns are
queries (``is_query``); the assistant turn after each lists in ``memory_used`` what
answering needed: the ``session_uuid`` of an earlier session and the content taken from
it. The data is read at run time from a folder or file the user gives; none of it is
in the project.

For each query the memory holds every turn before it (fed in order, at its session's
date plus a minute per turn, never going back in time), and the context is assembled
for the query at each token budget. Every row is scored the same way:

- **gold-session recall**: the share of the query's gold sessions with a turn in the
  context at CHUNKS or better whose text holds at least half of the session's key words
  (:func:`key_words` of its ``memory_used`` content; :func:`score_context`);
- **key-word share**: the share of all of the query's key words present anywhere in the
  context (any level);
- **tokens**: what the context uses, by the one token counter of every row.

Rows: conversation memory (each preset, each embedder), last-N whole turns, BM25
top-k whole turns (SQLite FTS5, the memory's own tokenizer), dense top-k whole turns and
their reciprocal-rank fusion (:func:`plain_rankings`), each at the same budget with the
same counter; the fusion is the baseline of the intervals.

Examples
--------
>>> sorted(key_words("【Plans】 The budget is strictly under $20/month."))
['20', 'budget', 'month', 'strictly']
"""

from __future__ import annotations

import json
import os
import re
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np

from synapse_retriever.bench.memory import Turn
from synapse_retriever.bench.plain import (
    FUSED_DEPTH,
    as_scores,
    last_n,
    plain_rankings,
    vector_top_k,
)
from synapse_retriever.bench.plots import save_figure
from synapse_retriever.conversation.config import ContextConfig
from synapse_retriever.conversation.embed import Embedder, HashingEmbedder, normalized
from synapse_retriever.conversation.lexical import LexicalIndex
from synapse_retriever.conversation.memory import ConversationMemory
from synapse_retriever.errors import InvalidValueError, SynapseError
from synapse_retriever.tokens import approximate_tokens

__all__ = [
    "BUDGETS",
    "STOP_WORDS",
    "Persona",
    "Query",
    "RealMemFormatError",
    "Turn",
    "bootstrap_ci",
    "context_words",
    "key_words",
    "load_realmem",
    "markdown_tables",
    "merge_reports",
    "run_realmem",
    "score_context",
    "score_query",
]

BUDGETS = (1000, 2000, 4000, 8000)

STOP_WORDS = frozenset(
    re.findall(
        r"\S+",
        """
    a about after again all also am an and any are as at be been before being both but by
    can could did do does doing done for from had has have having he her here him his how i
    if in into is it its itself just me more most my no nor not now of off on once only or
    other our out over own same she should so some such than that the their them then there
    these they this those through to too under until up very was we were what when where
    which while who whom why will with would you your yours s t ll re ve d m
    """,
    )
)
"""Words that carry no content: English function words (and contraction pieces)."""

_WORD = re.compile(r"\w+")
_LABEL = re.compile(r"^\s*【[^】]*】\s*")


class RealMemFormatError(SynapseError, ValueError):
    """A file or folder that does not hold RealMem dialogues."""


def context_words(text: str) -> set[str]:
    """The lower-cased words of ``text`` (runs of letters, digits and ``_``).

    Examples
    --------
    >>> sorted(context_words("Voice notes are a MUST, under $20/month."))
    ['20', 'a', 'are', 'month', 'must', 'notes', 'under', 'voice']
    """
    return set(_WORD.findall(text.lower()))


def key_words(content: str) -> frozenset[str]:
    """The key words of a ``memory_used`` content: its content words, lower-cased.

    The leading ``【category】`` label RealMem puts on each memory is removed (it names
    a kind of memory, not what was said); the rest is split into words as
    :func:`context_words` does, and :data:`STOP_WORDS` are dropped.

    Examples
    --------
    >>> sorted(key_words("【Project Planning】 The chosen approach is 'Option 1'."))
    ['1', 'approach', 'chosen', 'option']
    """
    return frozenset(context_words(_LABEL.sub("", content)) - STOP_WORDS)


@dataclass(frozen=True)
class Query:
    """A query turn: the memory holds ``turns[:index]`` when it is asked.

    ``gold`` maps each session ``memory_used`` names to the key words of its content
    there (all of that session's memories together). A set that labels evidence turns
    instead (LoCoMo, :mod:`~synapse_retriever.bench.locomo`) gives their keys in
    ``evidence`` (:attr:`Persona.keys`), and ``gold`` is empty.
    """

    index: int
    text: str
    query_id: str
    category: str
    gold: Mapping[str, frozenset[str]]
    evidence: frozenset[str] = frozenset()


@dataclass(frozen=True)
class Persona:
    """One RealMem file (or LoCoMo conversation): a persona's turns and queries; ``keys``
    names each turn where queries name evidence turns (empty otherwise)."""

    name: str
    turns: tuple[Turn, ...]
    queries: tuple[Query, ...]
    keys: tuple[str, ...] = ()


def _date(text: object, where: str) -> float:
    try:
        day = datetime.strptime(str(text)[:10], "%Y-%m-%d")
    except ValueError:
        raise RealMemFormatError(
            f"{where}: current_time {text!r} does not start with a date"
        ) from None
    return day.replace(tzinfo=UTC).timestamp()


def _persona(data: object, name: str, where: str) -> Persona:
    if not isinstance(data, dict) or not isinstance(data.get("dialogues"), list):
        raise RealMemFormatError(f"{where} is not a RealMem dialogues file (no 'dialogues' list)")
    turns: list[Turn] = []
    queries: list[Query] = []
    clock = float("-inf")
    for number, session in enumerate(data["dialogues"]):
        try:
            uuid = str(session["session_uuid"])
            start = _date(session["current_time"], where)
            dialogue = list(session["dialogue_turns"])
        except (KeyError, TypeError):
            raise RealMemFormatError(
                f"{where}: session {number} lacks session_uuid, current_time or dialogue_turns"
            ) from None
        for position, turn in enumerate(dialogue):
            if not isinstance(turn, dict) or not isinstance(turn.get("content"), str):
                raise RealMemFormatError(f"{where}: session {uuid} turn {position} has no content")
            text = turn["content"]
            if turn.get("is_query"):
                after = dialogue[position + 1] if position + 1 < len(dialogue) else {}
                gold: dict[str, frozenset[str]] = {}
                for memory in (after.get("memory_used") or []) if isinstance(after, dict) else []:
                    if isinstance(memory, dict) and memory.get("session_uuid"):
                        words = key_words(str(memory.get("content", "")))
                        key = str(memory["session_uuid"])
                        gold[key] = gold.get(key, frozenset()) | words
                if gold and text.strip():
                    queries.append(
                        Query(
                            len(turns),
                            text,
                            str(turn.get("query_id") or f"q{len(queries) + 1}"),
                            str(turn.get("category_name") or "unknown"),
                            gold,
                        )
                    )
            if not text.strip():
                continue  # a blank turn cannot be stored
            clock = max(start + 60.0 * position, clock + 1.0)  # never back in time
            role = "user" if str(turn.get("speaker", "")).lower() == "user" else "assistant"
            turns.append(Turn(text, role, uuid, clock))
    if not queries:
        raise RealMemFormatError(f"{where} has no query with memory_used")
    return Persona(name, tuple(turns), tuple(queries))


def load_realmem(path: str | os.PathLike[str]) -> list[Persona]:
    """The personas of a RealMem dataset folder (its ``*.json`` files) or of one file.

    In a folder, JSON files that are not dialogues (RealMem's persona descriptions) are
    skipped; a folder without any, or a file that is not one, raises
    :class:`RealMemFormatError`; a missing path raises ``FileNotFoundError``. A persona
    is named after its file, without ``_dialogues_256k.json``.
    """
    root = Path(path)
    if not root.exists():
        raise FileNotFoundError(f"--realmem {os.fspath(path)!r} does not exist")
    files = sorted(root.glob("*.json")) if root.is_dir() else [root]
    personas = []
    for file in files:
        try:
            data = json.loads(file.read_text(encoding="utf-8"))
        except (ValueError, UnicodeDecodeError) as exc:
            if root.is_dir():
                continue
            raise RealMemFormatError(f"{os.fspath(file)!r} is not JSON: {exc}") from None
        if root.is_dir() and not (isinstance(data, dict) and "dialogues" in data):
            continue
        name = re.sub(r"_dialogues.*$", "", file.stem)
        personas.append(_persona(data, name, repr(os.fspath(file))))
    if not personas:
        raise RealMemFormatError(f"{os.fspath(path)!r} holds no RealMem dialogues file")
    return personas


@dataclass(frozen=True)
class Item:
    """A turn in a context: its session, level (``full``, ``chunks``, ``summary``), text,
    and its key where the data set names turns."""

    session: str
    level: str
    text: str
    tokens: int
    key: str = ""


def score_context(items: Sequence[Item], gold: Mapping[str, frozenset[str]]) -> tuple[float, float]:
    """``(gold-session recall, key-word share)`` of a context.

    A gold session counts when one of its turns is in the context at CHUNKS or FULL
    and that turn's text holds at least half of the session's key words (a session
    without key words counts when any of its turns is there at CHUNKS or FULL). The
    key-word share is the share of the union of all gold key words found anywhere in
    the context (1.0 when there are none).

    Examples
    --------
    >>> gold = {"s1": frozenset({"voice", "notes", "must"}), "s2": frozenset({"budget"})}
    >>> items = [Item("s1", "chunks", "Voice notes, please.", 4),
    ...          Item("s2", "summary", "budget", 1)]
    >>> score_context(items, gold)  # s1: 2 of 3 >= 1.5; s2 only a summary; 3 of 4 words
    (0.5, 0.75)
    """
    found = 0
    for session, words in gold.items():
        need = len(words) / 2
        for item in items:
            if item.session != session or item.level == "summary":
                continue
            if len(words & context_words(item.text)) >= need:
                found += 1
                break
    every = frozenset().union(*gold.values())
    seen: set[str] = set()
    for item in items:
        seen |= context_words(item.text)
    share = len(every & seen) / len(every) if every else 1.0
    return found / len(gold), share


def score_query(items: Sequence[Item], query: Query) -> tuple[float, float]:
    """``(recall, key-word share)`` of a context for ``query``: :func:`score_context` for
    RealMem's gold sessions; for labelled evidence turns, the share of them in the
    context at CHUNKS or FULL (key-word share 1.0: there are no key words).

    Examples
    --------
    >>> query = Query(3, "What does Ann do?", "q1", "single-hop", {},
    ...               evidence=frozenset({"D1:1", "D2:4"}))
    >>> score_query([Item("s1", "full", "I paint.", 3, "D1:1"),
    ...              Item("s2", "summary", "paints", 1, "D2:4")], query)
    (0.5, 1.0)
    """
    if not query.evidence:
        return score_context(items, query.gold)
    found = {item.key for item in items if item.level != "summary"} & query.evidence
    return len(found) / len(query.evidence), 1.0


def bootstrap_ci(
    deltas: Sequence[float], *, resamples: int = 2000, seed: int = 0
) -> tuple[float, float]:
    """Percentile bootstrap 95% interval of the mean of paired differences (numpy).

    The rule of :func:`~synapse_retriever.bench.metrics.paired_bootstrap_ci`
    (queries resampled with replacement, a fixed seed), vectorized for many groups.

    Examples
    --------
    >>> bootstrap_ci([0.25, 0.25])
    (0.25, 0.25)
    """
    if not deltas:
        return (0.0, 0.0)
    values = np.asarray(deltas, dtype=np.float64)
    rng = np.random.default_rng(seed)
    means = np.sort(values[rng.integers(0, len(values), (resamples, len(values)))].mean(axis=1))
    low = means[int(np.floor(0.025 * (resamples - 1)))]
    high = means[int(np.ceil(0.975 * (resamples - 1)))]
    return (float(low), float(high))


class _CachedEmbedder:
    """An embedder whose vectors are memoized by text (each turn is embedded once)."""

    def __init__(self, inner: Embedder) -> None:
        self.inner = inner
        self.name = inner.name
        self.dim = inner.dim
        self._memo: dict[str, np.ndarray[Any, np.dtype[np.float32]]] = {}

    def embed(self, texts: Sequence[str]) -> np.ndarray[Any, np.dtype[np.float32]]:
        todo = list(dict.fromkeys(t for t in texts if t not in self._memo))
        if todo:
            for text, vector in zip(
                todo, normalized(self.inner.embed(todo), self.dim), strict=True
            ):
                self._memo[text] = vector
        if not texts:
            return np.zeros((0, self.dim), np.float32)
        return np.stack([self._memo[t] for t in texts])


def feed(
    memories: Iterable[ConversationMemory], lexical: LexicalIndex, turns: Sequence[Turn]
) -> None:
    """Add ``turns`` in order to every memory (each at its own time, in its session, with
    its speaker) and to the plain BM25 row's index."""
    memories = list(memories)
    for turn in turns:
        for memory in memories:
            memory.add_turn(
                turn.text, role=turn.role, at=turn.at, session=turn.session, speaker=turn.speaker
            )
        lexical.add([turn.text])


def query_time(persona: Persona, query: Query) -> float:
    """When ``query`` is asked: its own turn's time (RealMem), or a minute after the last
    turn when it is asked after the conversation (LoCoMo)."""
    if query.index < len(persona.turns):
        return persona.turns[query.index].at
    return persona.turns[-1].at + 60.0


def _key(persona: Persona, row: int) -> str:
    """The data set's name of the turn at ``row`` (its id − 1 in a memory fed in order)."""
    return persona.keys[row] if persona.keys else ""


def _memory_items(
    memory: ConversationMemory, persona: Persona, query: str, budget: int, at: float
) -> list[Item]:
    return [
        Item(t.session, t.level.value, t.text, t.tokens, _key(persona, t.turn_id - 1))
        for t in memory.assemble(query, budget, at=at)
    ]


def _whole(persona: Persona, tokens: Sequence[int], kept: Iterable[int]) -> list[Item]:
    turns = persona.turns
    return [
        Item(turns[i].session, "full", turns[i].text, tokens[i], _key(persona, i)) for i in kept
    ]


def _query_entry(persona: Persona, query: Query, added: int) -> dict[str, Any]:
    """A query's record in a report, its scores to be filled in: who asked what, its gold
    sessions, and the ceiling (the recall of every earlier turn, whole)."""
    every = [
        Item(t.session, "full", t.text, 0, persona.keys[i] if persona.keys else "")
        for i, t in enumerate(persona.turns[:added])
    ]
    return {
        "persona": persona.name,
        "query_id": query.query_id,
        "category": query.category,
        "turns_before": added,
        "gold_sessions": sorted(query.gold or query.evidence),
        "ceiling": score_query(every, query)[0],
        "scores": {},
    }


def run_realmem(
    personas: Sequence[Persona],
    budgets: Sequence[int] = BUDGETS,
    *,
    max_queries: int | None = None,
    minilm: Embedder | None = None,
    notes: Sequence[str] = (),
    token_counter: Callable[[str], int] = approximate_tokens,
    progress: Callable[[str], None] | None = None,
    rows: Sequence[str] | None = None,
) -> dict[str, Any]:
    """Replay every persona, score every row at every budget; a JSON-ready report.

    ``minilm`` (an embedder, e.g. :class:`~synapse_retriever.conversation.MiniLmEmbedder`)
    adds the dense top-k row and the default with that embedder; without it the
    intervals are taken against BM25. ``rows`` keeps only those rows (and the
    baseline), in the report's order: each memory row replays every turn, so leaving
    rows out is what makes a long run shorter. Conversation memory runs with
    ``overflow="shrink"``: on real conversations the five turns of working memory alone
    often exceed 1,000 tokens, which the default ``raise`` refuses.

    Raises
    ------
    InvalidValueError
        A name in ``rows`` that is not a row of this run (the message lists them).
    """
    hashing = _CachedEmbedder(HashingEmbedder())
    dense = _CachedEmbedder(minilm) if minilm is not None else None
    memories: dict[str, tuple[ContextConfig, Embedder]] = {
        "default": (ContextConfig(overflow="shrink"), hashing),
        "published": (ContextConfig.published(overflow="shrink"), hashing),
        "gradient": (ContextConfig.gradient(overflow="shrink"), hashing),
    }
    if dense is not None:
        memories["default (MiniLM)"] = (ContextConfig(overflow="shrink"), dense)
    every_row = [*memories, "last-N", "BM25 top-k", "hashing top-k"]
    if dense is not None:
        every_row += ["dense top-k (MiniLM)", "fusion top-k (MiniLM)"]
    baseline = "fusion top-k (MiniLM)" if dense is not None else "BM25 top-k"
    unknown = [row for row in rows or () if row not in every_row]
    if unknown:
        raise InvalidValueError(f"no row {unknown[0]!r} in this run; its rows are {every_row}")
    rows = [r for r in every_row if rows is None or r in rows or r == baseline]
    memories = {name: setting for name, setting in memories.items() if name in rows}
    results: list[dict[str, Any]] = []
    summary_personas: list[dict[str, Any]] = []
    started = time.perf_counter()
    for persona in personas:
        begun = time.perf_counter()
        texts = [t.text for t in persona.turns]
        tokens = [token_counter(t) for t in texts]
        if progress is not None:
            progress(f"{persona.name}: embedding {len(texts)} turns")
        hashed = hashing.embed(texts)
        dense_vectors = dense.embed(texts) if dense is not None else None
        lexical = LexicalIndex()
        queries = persona.queries[:max_queries] if max_queries is not None else persona.queries
        open_memories = {
            name: ConversationMemory(
                ":memory:", token_counter, config, embedder=embedder, background=False
            )
            for name, (config, embedder) in memories.items()
        }
        try:
            added = 0
            for number, query in enumerate(queries):
                if progress is not None:
                    progress(f"{persona.name}: query {number + 1}/{len(queries)}")
                feed(open_memories.values(), lexical, persona.turns[added : query.index])
                added = max(added, query.index)
                at = query_time(persona, query)
                prefix = tokens[:added]
                similarity: dict[str, list[float]] = {
                    "hashing top-k": (hashed[:added] @ hashing.embed([query.text])[0]).tolist()
                }
                similarity["BM25 top-k"] = lexical.scores(query.text)
                if dense is not None and dense_vectors is not None:
                    cosine = dense_vectors[:added] @ dense.embed([query.text])[0]
                    similarity["dense top-k (MiniLM)"] = cosine.tolist()
                    matched = [row for row, _ in lexical.top(query.text, FUSED_DEPTH)]
                    fusion = plain_rankings(matched, cosine, FUSED_DEPTH)["fusion"]
                    similarity["fusion top-k (MiniLM)"] = as_scores(fusion, added)
                entry = _query_entry(persona, query, added)
                for row in rows:
                    entry["scores"][row] = {}
                    for budget in budgets:
                        if row in open_memories:
                            items = _memory_items(
                                open_memories[row], persona, query.text, budget, at
                            )
                        elif row == "last-N":
                            items = _whole(persona, tokens, last_n(prefix, budget))
                        else:
                            kept = vector_top_k(similarity[row], prefix, budget)
                            items = _whole(persona, tokens, kept)
                        recall, share = score_query(items, query)
                        levels = {
                            level: sum(item.level == level for item in items)
                            for level in ("full", "chunks", "summary")
                        }
                        entry["scores"][row][str(budget)] = {
                            "recall": recall,
                            "words": share,
                            "tokens": sum(item.tokens for item in items),
                            "levels": levels,
                        }
                results.append(entry)
        finally:
            for memory in open_memories.values():
                memory.close()
        summary_personas.append(
            {
                "name": persona.name,
                "turns": len(texts),
                "tokens": int(sum(tokens)),
                "queries": len(queries),
                "seconds": round(time.perf_counter() - begun, 1),
            }
        )
    return {
        "budgets": list(budgets),
        "rows": rows,
        "baseline": baseline,
        "notes": list(notes),
        "personas": summary_personas,
        "seconds": round(time.perf_counter() - started, 1),
        "queries": results,
        "tables": _tables(results, rows, baseline, list(budgets)),
    }


def _group(
    results: Sequence[Mapping[str, Any]], rows: Sequence[str], baseline: str, budgets: list[int]
) -> dict[str, Any]:
    """Macro means over queries and the paired intervals of recall against the baseline."""
    out: dict[str, Any] = {"queries": len(results)}
    out["ceiling"] = float(np.mean([r["ceiling"] for r in results])) if results else 0.0
    for row in rows:
        out[row] = {}
        for budget in budgets:
            key = str(budget)
            recall = [r["scores"][row][key]["recall"] for r in results]
            base = [r["scores"][baseline][key]["recall"] for r in results]
            deltas = [a - b for a, b in zip(recall, base, strict=True)]
            low, high = bootstrap_ci(deltas)
            out[row][key] = {
                "recall": float(np.mean(recall)) if recall else 0.0,
                "words": float(np.mean([r["scores"][row][key]["words"] for r in results]))
                if results
                else 0.0,
                "tokens": float(np.mean([r["scores"][row][key]["tokens"] for r in results]))
                if results
                else 0.0,
                "delta": float(np.mean(deltas)) if deltas else 0.0,
                "low": low,
                "high": high,
                "levels": {
                    level: float(np.mean([r["scores"][row][key]["levels"][level] for r in results]))
                    if results
                    else 0.0
                    for level in ("full", "chunks", "summary")
                },
            }
    return out


def _tables(
    results: Sequence[Mapping[str, Any]], rows: Sequence[str], baseline: str, budgets: list[int]
) -> dict[str, Any]:
    personas = sorted({r["persona"] for r in results})
    categories = sorted({r["category"] for r in results})
    return {
        "all": _group(results, rows, baseline, budgets),
        "persona": {
            p: _group([r for r in results if r["persona"] == p], rows, baseline, budgets)
            for p in personas
        },
        "category": {
            c: _group([r for r in results if r["category"] == c], rows, baseline, budgets)
            for c in categories
        },
    }


def merge_reports(reports: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """Several reports of the same rows and budgets (e.g. one run per persona) as one.

    Queries are pooled and every table is computed again over all of them.
    """
    if not reports:
        raise ValueError("no reports to merge")
    first = reports[0]
    for other in reports[1:]:
        if other["rows"] != first["rows"] or other["budgets"] != first["budgets"]:
            raise ValueError("the reports do not share their rows and budgets")
    results = [entry for report in reports for entry in report["queries"]]
    return {
        **{key: first[key] for key in ("budgets", "rows", "baseline")},
        "notes": list(dict.fromkeys(note for r in reports for note in r["notes"])),
        "personas": [p for r in reports for p in r["personas"]],
        "seconds": round(sum(r["seconds"] for r in reports), 1),
        "queries": results,
        "tables": _tables(results, first["rows"], first["baseline"], list(first["budgets"])),
    }


def _pct(value: float) -> str:
    return f"{100 * value:.1f}"


def _cell(stats: Mapping[str, Any], is_baseline: bool) -> str:
    if is_baseline:
        return f"{_pct(stats['recall'])}%"
    return (
        f"{_pct(stats['recall'])}% ({100 * stats['delta']:+.1f} "
        f"[{100 * stats['low']:+.1f}, {100 * stats['high']:+.1f}])"
    )


def plot_reports(reports: Sequence[Mapping[str, Any]], path: str | os.PathLike[str]) -> None:
    """One panel per report (a data set): recall against k or the token budget, one line
    per row, the baseline dashed; in the format the path's suffix names (``.svg``, ``.png``),
    PNG if matplotlib knows no such format."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figure, axes = plt.subplots(
        1, len(reports), figsize=(6.2 * len(reports), 4.6), squeeze=False, sharey=True
    )
    for panel, report in zip(axes[0], reports, strict=True):
        every = report["tables"]["all"]
        budgets = [str(b) for b in report["budgets"]]
        xs = [int(b) for b in budgets]
        for row in report["rows"]:
            ys = [100 * every[row][b]["recall"] for b in budgets]
            style = "--" if row == report["baseline"] else "-"
            width = 2.4 if row in ("auto", "default (MiniLM)") else 1.3
            panel.plot(xs, ys, style, marker="o", markersize=3, linewidth=width, label=row)
        by_k = report.get("unit") == "k"
        panel.set_xlabel("k (turns retrieved)" if by_k else "token budget")
        if not by_k:
            panel.set_xscale("log", base=2)
        panel.set_xticks(xs, [f"{x:,}" for x in xs])
        what = "gold sessions" if report.get("dataset", "RealMem") == "RealMem" else "evidence"
        panel.set_title(f"{report.get('dataset', 'RealMem')}: {every['queries']:,} queries")
        panel.set_ylabel(f"recall of {what} (%)")
        panel.grid(True, alpha=0.3)
        panel.legend(fontsize=7)
    figure.tight_layout()
    save_figure(figure, path)


def markdown_tables(report: Mapping[str, Any]) -> str:
    """The report as Markdown: recall with intervals, key words and tokens, per category
    and per persona.

    Recall cells read ``41.0% (-12.3 [-17.0, -7.5])``: the row's gold-session recall, then
    its mean difference from the baseline in points and the 95% paired bootstrap interval.
    """
    budgets = [str(b) for b in report["budgets"]]
    rows, baseline, tables = report["rows"], report["baseline"], report["tables"]
    by_k = report.get("unit") == "k"  # a retrieval report: k turns, not a token budget
    evidence = report.get("dataset") == "LoCoMo"
    measure = "Evidence-turn recall" if evidence else "Gold-session recall"
    labels = [f"k = {b}" if by_k else f"{int(b):,} tokens" for b in budgets]
    head = "| row | " + " | ".join(labels) + " |"
    rule = "| --- |" + " --- |" * len(budgets)
    every = tables["all"]
    personas = report["personas"]
    out = [
        f"{measure}, {every['queries']} queries of {len(personas)} persona(s) "
        f"({', '.join(p['name'] for p in personas)}); in brackets: points against "
        f"{baseline}, 95% paired bootstrap interval. Ceiling (every earlier turn whole): "
        f"{_pct(every['ceiling'])}%.",
        "",
        head,
        rule,
    ]
    out += [
        f"| {row} | " + " | ".join(_cell(every[row][b], row == baseline) for b in budgets) + " |"
        for row in rows
    ]
    out += ["", "Key-word share / mean tokens used / turns kept (full, chunks, summary):", ""]
    if by_k:
        out[-2] = "Key-word share of the retrieved turns:"
    out += [head, rule]
    for row in rows:
        cells = []
        for b in budgets:
            s = every[row][b]
            levels = s["levels"]
            if by_k:
                cells.append(f"{_pct(s['words'])}%")
                continue
            cells.append(
                f"{_pct(s['words'])}% / {s['tokens']:,.0f} / "
                f"{levels['full']:.1f}, {levels['chunks']:.1f}, {levels['summary']:.1f}"
            )
        out.append(f"| {row} | " + " | ".join(cells) + " |")
    alone = "no graph"
    modes = [row for row in ("auto", "analytical", "creative", "conversational") if row in rows]
    if by_k and alone in rows and modes:  # the graph's own share: each mode against the same
        shares = _group(report["queries"], [*modes, alone], alone, [int(b) for b in budgets])
        out += ["", f"What the graph adds: each mode against `{alone}` (points, 95% interval):", ""]
        out += [head, rule]
        for row in modes:
            cells = [
                f"{100 * c['delta']:+.1f} [{100 * c['low']:+.1f}, {100 * c['high']:+.1f}]"
                for c in (shares[row][b] for b in budgets)
            ]
            out.append(f"| {row} | " + " | ".join(cells) + " |")
    for title, groups in (("category", tables["category"]), ("persona", tables["persona"])):
        out += ["", f"{measure} per {title} (points against {baseline}):", ""]
        out += [f"| {title} (queries) | row | " + " | ".join(f"{int(b):,}" for b in budgets) + " |"]
        out += ["| --- | --- |" + " --- |" * len(budgets)]
        for name, group in groups.items():
            for row in rows:
                line = " | ".join(_cell(group[row][b], row == baseline) for b in budgets)
                out.append(f"| {name} ({group['queries']}) | {row} | {line} |")
    for note in report["notes"]:
        out += ["", f"Note: {note}"]
    return "\n".join(out)
