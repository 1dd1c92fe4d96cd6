"""Conversation-memory benchmark: are planted facts still in the context much later?

A long generated conversation (several sessions of small talk, with distractor turns
that share a fact's topic but not its answer) has facts planted in ordinary user turns
("Morning! Our staging database now lives on host db-stg-7. Anyway, any lunch ideas?").
Each fact is asked about much later. At each question, the context assembled for that
question at a token budget either still contains the fact's key content (the string
``db-stg-7``, case-insensitive) or not; the score is the fraction of facts kept.

Compared at the same budget (same token counter):

- ``synapse`` (each preset given): :meth:`ConversationMemory.assemble` for the question;
- ``last-N``: the newest whole turns that fit, like LangChain's
  ``trim_messages(strategy="last")``;
- ``vector top-k``: whole turns by similarity to the question (the same embedder), most
  similar first, each that still fits;
- ``BM25 top-k``: whole turns by BM25 (SQLite FTS5, the memory's own tokenizer), best
  first, each that still fits;
- ``fusion top-k``: whole turns in the reciprocal-rank fusion of the two (k = 60, each
  list cut at its best 100, as LangChain's ``EnsembleRetriever`` fuses), each that fits
  (:mod:`~synapse_retriever.bench.plain`).

This is a script, not a timed test; the suite runs it on a tiny input.

Examples
--------
>>> conversation = generate_conversation(turns=60, facts=3, sessions=2, seed=1)
>>> len(conversation.turns), len(conversation.questions)
(60, 3)
>>> all(q.fact_turn < q.asked_after for q in conversation.questions)
True
"""

from __future__ import annotations

import random
import statistics
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from synapse_retriever.bench.plain import (
    FUSED_DEPTH,
    as_scores,
    last_n,
    plain_rankings,
    vector_top_k,
)
from synapse_retriever.conversation.config import ContextConfig
from synapse_retriever.conversation.embed import HashingEmbedder, embedded
from synapse_retriever.conversation.lexical import LexicalIndex
from synapse_retriever.conversation.memory import ConversationMemory
from synapse_retriever.errors import InvalidValueError
from synapse_retriever.tokens import approximate_tokens

__all__ = [
    "BASELINES",
    "Conversation",
    "Question",
    "Turn",
    "generate_conversation",
    "markdown_table",
    "pool_reports",
    "run_memory_bench",
]

BASELINES = ("last-N", "vector top-k", "BM25 top-k", "fusion top-k")

# (fact sentence, question, topic, distractor user sentences, answers); {k} is the answer.
_FACTS: list[tuple[str, str, str, list[str], list[str]]] = [
    (
        "Our staging database now lives on host {k}.",
        "Where is staging hosted these days?",
        "the staging database",
        [
            "The staging database was slow again this morning.",
            "Can you remind me why the staging database needs so much memory?",
            "I restarted the staging database and it looks fine now.",
            "Which logs should I check when the staging database hangs?",
        ],
        ["db-stg-7", "pg-west-12", "stg-db-04", "orca-db-3"],
    ),
    (
        "We moved the production deploy to {k}.",
        "When do we deploy to production now?",
        "the production deploy",
        [
            "The production deploy went smoothly, no alerts.",
            "I am nervous about the production deploy this time.",
            "Who signs off the production deploy checklist?",
            "How do we roll back a production deploy that goes wrong?",
        ],
        ["Thursdays", "Tuesday mornings", "Wednesday lunchtime", "Friday afternoons"],
    ),
    (
        "My sister {k} is coming to visit next month.",
        "What is my sister called?",
        "your sister",
        [
            "My sister loves hiking in the mountains.",
            "I should call my sister this weekend.",
            "My sister sent me a funny picture of her cat.",
            "What could I cook when my sister comes over?",
        ],
        ["Ingrid", "Maren", "Solveig", "Theodora"],
    ),
    (
        "The gym locker code is {k}, I keep forgetting it.",
        "What was the code for my locker?",
        "the gym",
        [
            "The gym was packed today, I could not find a free locker.",
            "I want to go to the gym more often.",
            "The gym changed its opening hours again.",
            "What is a good beginner routine at the gym?",
        ],
        ["4471", "9023", "3318", "7765"],
    ),
    (
        "The office wifi password changed to {k}.",
        "What do I type to get on the office wifi?",
        "the office wifi",
        [
            "The office wifi dropped twice during my call.",
            "Is the office wifi faster on the third floor?",
            "Someone should reboot the office wifi router.",
            "Why is the office wifi so bad for video calls?",
        ],
        ["blue-otter-88", "maple-sky-21", "quiet-fern-5", "amber-fox-40"],
    ),
    (
        "The quarterly report is due on {k}.",
        "What is the deadline for the quarterly report?",
        "the quarterly report",
        [
            "The quarterly report needs more charts.",
            "I hate writing the quarterly report.",
            "Did finance send numbers for the quarterly report yet?",
            "How should I structure the quarterly report summary?",
        ],
        ["March 14", "April 2", "June 27", "September 9"],
    ),
    (
        "My flight to Lisbon leaves at {k}.",
        "When does the Lisbon flight depart?",
        "your Lisbon trip",
        [
            "I still need to pack for the Lisbon trip.",
            "Lisbon should be warm this time of year.",
            "What should I see in Lisbon if I only have a day?",
            "Is the flight to Lisbon long enough to watch a movie?",
        ],
        ["06:40", "13:15", "21:05", "09:55"],
    ),
    (
        "The API rate limit is now {k} requests per minute.",
        "How many requests per minute can we make to the API?",
        "the API rate limit",
        [
            "We keep hitting the API rate limit in the nightly job.",
            "Should the client retry when it hits the rate limit?",
            "The API returned a lot of errors yesterday.",
            "How do other teams handle API rate limit errors?",
        ],
        ["1200", "350", "75", "4800"],
    ),
    (
        "My landlord is called {k}.",
        "Who is my landlord?",
        "your landlord",
        [
            "My landlord still has not fixed the heating.",
            "The landlord wants to raise the rent next year.",
            "I emailed the landlord about the broken window.",
            "What can I do if my landlord ignores repair requests?",
        ],
        ["Mr Okafor", "Mrs Lindqvist", "Mr Abernathy", "Ms Petrosyan"],
    ),
    (
        "The offsite budget was set at {k}.",
        "How much money do we have for the offsite?",
        "the offsite",
        [
            "Planning the offsite is taking forever.",
            "Where should we hold the offsite this year?",
            "The offsite agenda needs a fun afternoon session.",
            "How do I keep the offsite budget under control?",
        ],
        ["4,500 euros", "12,000 dollars", "7,800 pounds", "2,300 euros"],
    ),
    (
        "My new bike is a {k}.",
        "What model is my new bike?",
        "your bike",
        [
            "I rode my bike to work even though it rained.",
            "My bike needs new brakes soon.",
            "Is it worth buying a bike lock that costs that much?",
            "How often should I oil the bike chain?",
        ],
        ["Cannondale Topstone", "Brompton C Line", "Trek Domane", "Surly Cross-Check"],
    ),
    (
        "The build server's IP address is {k}.",
        "Where can I reach the build server on the network?",
        "the build server",
        [
            "The build server ran out of disk space again.",
            "Builds on the build server take almost an hour now.",
            "Can we get a second build server?",
            "Who has admin access to the build server?",
        ],
        ["10.4.2.17", "172.16.9.201", "192.168.40.3", "10.0.77.12"],
    ),
    (
        "My dentist appointment is on {k}.",
        "When do I see the dentist?",
        "the dentist",
        [
            "I am not looking forward to the dentist.",
            "My dentist said I should floss more.",
            "The dentist office called to confirm something.",
            "Is an electric toothbrush worth it, according to dentists?",
        ],
        ["May 3rd", "July 19", "October 11", "February 28"],
    ),
    (
        "Our team's on-call rotation is owned by {k}.",
        "Who is in charge of on-call?",
        "the on-call rotation",
        [
            "On-call last week was rough, three pages at night.",
            "Can we make the on-call rotation fairer?",
            "I swapped my on-call shift with a colleague.",
            "How do I write a good on-call handover note?",
        ],
        ["Priya", "Joaquin", "Wen", "Oluwaseun"],
    ),
    (
        "The database backups are kept for {k}.",
        "What is the retention of our database backups?",
        "the database backups",
        [
            "The database backups took longer than usual.",
            "Do we ever test restoring the database backups?",
            "Backups filled the disk on the old server.",
            "Should the database backups be encrypted?",
        ],
        ["35 days", "90 days", "14 days", "180 days"],
    ),
    (
        "My cat's vet is Dr {k}.",
        "Who is the vet for my cat?",
        "your cat",
        [
            "My cat refused to eat this morning.",
            "The vet visit for my cat was expensive.",
            "My cat knocked a glass off the table again.",
            "Why does my cat sleep all day?",
        ],
        ["Hallström", "Nakagawa", "Ferreira", "Obuya"],
    ),
]

_TOPICAL_USER = [
    "I spent half the afternoon on {t} again.",
    "Can we talk about {t} later today?",
    "Someone asked me about {t} in the standup.",
    "I have a bad feeling about {t} this week.",
    "Remind me to follow up on {t} tomorrow.",
    "Honestly, {t} is the least of my worries right now.",
    "I keep thinking about {t}.",
    "There was a long thread about {t} this morning.",
]

_TOPICAL_ASSISTANT = [
    "When it comes to {t}, a little planning ahead saves a lot of stress.",
    "Many people have the same experience with {t}.",
    "It could help to write down what happened with {t} so you can spot a pattern.",
    "If {t} keeps causing trouble, it is worth asking someone who knows it well.",
    "I would not worry too much about {t} yet.",
    "A checklist for {t} might make the next time smoother.",
    "Keeping notes about {t} in one place makes it easier to remember the details.",
    "Let me know how it goes with {t}.",
]

_SMALL_TALK_USER = [
    "Morning! Did you sleep well?",
    "It is raining again, typical.",
    "I had way too much coffee today.",
    "Any ideas for dinner tonight?",
    "I watched a great documentary about octopuses yesterday.",
    "The weekend went by too fast.",
    "My neighbour is playing the drums again.",
    "I am thinking about learning to bake bread.",
    "Traffic was terrible this morning.",
    "Do you have a good podcast recommendation?",
    "I finally cleaned my desk.",
    "What is a good stretch for a stiff back?",
    "I could really use a holiday.",
    "The new cafe downstairs makes decent croissants.",
    "I keep forgetting to water my plants.",
    "Tell me a fun fact.",
    "I started reading a mystery novel.",
    "Should I try running in the evening instead?",
    "It is so hot in the office today.",
    "I cannot decide what to cook for the weekend.",
]

_SMALL_TALK_ASSISTANT = [
    "That sounds like a good plan.",
    "A short walk outside often helps with that.",
    "Many people find that a fixed routine makes it easier.",
    "You could try something simple first and see how it goes.",
    "Coffee is great, but water in between helps too.",
    "A warm soup is easy and comforting on a rainy day.",
    "Documentaries about the ocean are often surprisingly moving.",
    "Bread baking mostly needs patience and a warm spot for the dough.",
    "Podcasts about history or science are a nice way to learn on the go.",
    "A few gentle stretches in the morning can make a real difference.",
    "Taking short breaks during the day keeps the energy up.",
    "It might be worth planning a few days off soon.",
    "Plants usually forgive a missed watering or two.",
    "Mystery novels are perfect for a lazy evening.",
    "Running in the evening can help you sleep better, as long as it is not too late.",
    "Octopuses can change colour in a fraction of a second.",
    "Fresh croissants are hard to beat.",
    "Keeping a small list on the fridge helps with remembering things.",
    "Hot days call for light meals and plenty of water.",
    "Sometimes the simplest recipes turn out the best.",
    "It is easy to underestimate how much small habits add up over a few weeks.",
    "If you are unsure, try it for a week and then decide whether to keep it.",
    "Good sleep makes almost everything else easier to handle.",
    "A change of scenery can be surprisingly refreshing.",
    "There is no single right answer, it depends on what you enjoy.",
    "Asking friends for their favourites is a good way to discover new things.",
    "Writing things down tends to take the pressure off your memory.",
    "Try not to be too hard on yourself about it.",
    "A bit of fresh air and daylight usually lifts the mood.",
    "Cooking in bigger batches saves time during a busy week.",
]

_OPENERS = ["Morning!", "Quick note.", "Oh, before I forget.", "Hey.", "By the way."]
_CLOSERS = [
    "Anyway, any lunch ideas?",
    "Also, the weather is lovely today.",
    "Anyway, how is your day going?",
    "Also, I need more coffee.",
    "Anyway, back to work.",
]
_ACKS = [
    "Got it, I will keep that in mind.",
    "Noted, thanks for telling me.",
    "Thanks, that is good to know.",
    "Understood.",
]


@dataclass(frozen=True)
class Turn:
    """One turn of a conversation (generated here, or read from RealMem or LoCoMo), in
    order; ``speaker`` is who said it, where the data names them (LoCoMo)."""

    text: str
    role: str
    session: str
    at: float
    speaker: str | None = None


@dataclass(frozen=True)
class Question:
    """A planted fact, asked about after turn ``asked_after`` (exclusive index)."""

    question: str
    answer: str
    fact_turn: int
    asked_after: int


@dataclass
class Conversation:
    """Generated turns, in order, and the questions about their planted facts."""

    turns: list[Turn] = field(default_factory=list)
    questions: list[Question] = field(default_factory=list)


def generate_conversation(
    *,
    turns: int = 600,
    facts: int = 16,
    sessions: int = 6,
    min_gap: int | None = None,
    distractors: int = 20,
    seed: int = 7,
) -> Conversation:
    """A deterministic conversation of ``turns`` turns (user and assistant alternate).

    Facts are planted in the first half of the conversation, each asked at least
    ``min_gap`` turns later (default: a quarter of the conversation). Every other turn
    is an assistant reply of 4 to 9 small-talk sentences; each fact's topic comes back
    in ``distractors`` user turns, before or after the fact, without its answer, and
    the replies to those also discuss the topic. The turns are split into ``sessions``
    of equal length, a day apart.

    Raises
    ------
    InvalidValueError
        ``facts`` is not 1 to the 16 known, or more than the user turns of the first half;
        ``sessions`` is not 1 to ``turns``; ``distractors`` is negative.
    """
    if not 1 <= facts <= len(_FACTS):
        raise InvalidValueError(f"facts must be 1 to {len(_FACTS)}, got {facts}")
    user_slots = list(range(0, turns // 2, 2))
    if facts > len(user_slots):
        raise InvalidValueError(
            f"{turns} turns hold at most {len(user_slots)} facts (one per user turn of the "
            f"first half), got {facts}"
        )
    if not 1 <= sessions <= turns:
        raise InvalidValueError(f"sessions must be 1 to {turns} (the turns), got {sessions}")
    if distractors < 0:
        raise InvalidValueError(f"distractors must be 0 or more, got {distractors}")
    rng = random.Random(seed)
    gap = min_gap if min_gap is not None else turns // 4
    chosen = rng.sample(_FACTS, facts)
    fact_slots = sorted(rng.sample(user_slots, facts))
    plan: dict[int, tuple[int, str]] = {}
    texts: dict[int, str] = {}
    questions: list[Question] = []
    for number, (slot, (fact, question, _, _, answers)) in enumerate(
        zip(fact_slots, chosen, strict=True)
    ):
        answer = rng.choice(answers)
        texts[slot] = " ".join(
            [
                rng.choice(_OPENERS),
                fact.format(k=answer),
                rng.choice(_CLOSERS),
                *rng.sample(_SMALL_TALK_USER, rng.randint(0, 2)),
            ]
        )
        asked = rng.randrange(min(slot + gap, turns - 1), turns) + 1
        questions.append(Question(question, answer, slot, min(asked, turns)))
        plan[slot] = (number, answer)
    free = [i for i in range(turns) if i % 2 == 0 and i not in texts]
    topics: dict[int, str] = {}
    for _, _, topic, user_lines, _ in chosen:
        generic = [line.format(t=topic) for line in _TOPICAL_USER]
        lines = user_lines + rng.sample(generic, len(generic))
        for number in range(distractors):
            if not free:
                break
            slot = free.pop(rng.randrange(len(free)))
            texts[slot] = f"{lines[number % len(lines)]} {rng.choice(_SMALL_TALK_USER)}"
            topics[slot] = topic
    conversation = Conversation(questions=sorted(questions, key=lambda q: q.asked_after))
    per_session = max(1, turns // sessions)
    for i in range(turns):
        session = min(i // per_session, sessions - 1)
        at = session * 86_400.0 + (i - session * per_session) * 60.0
        if i % 2 == 0:
            text = texts.get(i) or " ".join(rng.sample(_SMALL_TALK_USER, rng.randint(1, 2)))
            role = "user"
        else:
            lead = [rng.choice(_ACKS)] if (i - 1) in plan else []
            subject = topics.get(i - 1)
            on_topic = (
                [t.format(t=subject) for t in rng.sample(_TOPICAL_ASSISTANT, 3)] if subject else []
            )
            body = rng.sample(_SMALL_TALK_ASSISTANT, rng.randint(4, 9))
            text, role = " ".join(lead + on_topic + body), "assistant"
        conversation.turns.append(Turn(text, role, f"s{session + 1}", at))
    return conversation


def run_memory_bench(
    conversation: Conversation,
    budgets: Sequence[int] = (1000, 2000, 4000),
    *,
    presets: dict[str, ContextConfig] | None = None,
    token_counter: Callable[[str], int] = approximate_tokens,
    progress: Callable[[str], None] | None = None,
) -> dict[str, Any]:
    """Score every method at every budget; returns a JSON-ready report.

    ``report["rows"]`` holds one row per budget: ``{"budget": ..., "<method>": fraction}``
    for each preset name and each baseline; ``report["misses"]`` lists, per method and
    budget, the questions whose answer was not in the context.
    """
    presets = presets or {"default": ContextConfig(), "published": ContextConfig.published()}
    embedder = HashingEmbedder()
    texts = [turn.text for turn in conversation.turns]
    tokens = [token_counter(text) for text in texts]
    vectors = embedded(embedder, texts)
    methods = [*presets, *BASELINES]
    kept: dict[str, dict[int, int]] = {m: dict.fromkeys(budgets, 0) for m in methods}
    misses: dict[str, dict[int, list[str]]] = {m: {b: [] for b in budgets} for m in methods}
    seconds: dict[str, list[float]] = {name: [] for name in presets}
    memories = {
        name: ConversationMemory(":memory:", token_counter, config, background=False)
        for name, config in presets.items()
    }
    lexical = LexicalIndex()
    try:
        added = 0
        for number, question in enumerate(conversation.questions):
            if progress is not None:
                progress(f"question {number + 1}/{len(conversation.questions)}")
            for turn in conversation.turns[added : question.asked_after]:
                for memory in memories.values():
                    memory.add_turn(turn.text, role=turn.role, at=turn.at, session=turn.session)
                lexical.add([turn.text])
            added = max(added, question.asked_after)
            now = conversation.turns[added - 1].at
            answer = question.answer.lower()
            query = embedded(embedder, [question.question])[0]
            cosine = vectors[:added] @ query
            similarity = [float(s) for s in cosine]
            bm25 = lexical.scores(question.question)
            matched = [row for row, _ in lexical.top(question.question, FUSED_DEPTH)]
            fused = as_scores(plain_rankings(matched, cosine, FUSED_DEPTH)["fusion"], added)
            for budget in budgets:
                contexts: dict[str, str] = {}
                for name, memory in memories.items():
                    start = time.perf_counter()
                    assembled = memory.assemble(question.question, budget, at=now)
                    seconds[name].append(time.perf_counter() - start)
                    assert sum(t.tokens for t in assembled) <= budget
                    contexts[name] = "\n".join(t.text for t in assembled)
                contexts["last-N"] = "\n".join(texts[i] for i in last_n(tokens[:added], budget))
                for method, scores in (
                    ("vector top-k", similarity),
                    ("BM25 top-k", bm25),
                    ("fusion top-k", fused),
                ):
                    contexts[method] = "\n".join(
                        texts[i] for i in vector_top_k(scores, tokens[:added], budget)
                    )
                for method, context in contexts.items():
                    if answer in context.lower():
                        kept[method][budget] += 1
                    else:
                        misses[method][budget].append(question.question)
    finally:
        for memory in memories.values():
            memory.close()
    total = len(conversation.questions)
    rows = [
        {"budget": budget, **{m: kept[m][budget] / total if total else 0.0 for m in methods}}
        for budget in budgets
    ]
    return {
        "turns": len(conversation.turns),
        "tokens": int(np.sum(tokens)),
        "questions": total,
        "methods": methods,
        "rows": rows,
        "misses": {m: {str(b): misses[m][b] for b in budgets} for m in methods},
        "assemble_ms_median": {
            name: 1000 * statistics.median(values) if values else 0.0
            for name, values in seconds.items()
        },
    }


def pool_reports(reports: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """Several conversations' reports as one: fractions over all their questions.

    Examples
    --------
    >>> one = {"turns": 10, "tokens": 100, "questions": 2, "methods": ["a"],
    ...        "rows": [{"budget": 50, "a": 0.5}], "misses": {"a": {"50": ["q1"]}},
    ...        "assemble_ms_median": {"a": 2.0}}
    >>> two = {**one, "questions": 4, "rows": [{"budget": 50, "a": 1.0}],
    ...        "misses": {"a": {"50": []}}, "assemble_ms_median": {"a": 4.0}}
    >>> pool_reports([one, two])["rows"]  # (1 + 4) kept of 6
    [{'budget': 50, 'a': 0.8333333333333334}]
    """
    if not reports:
        raise ValueError("no reports to pool")
    methods = reports[0]["methods"]
    total = sum(r["questions"] for r in reports)
    rows = []
    for position, first in enumerate(reports[0]["rows"]):
        row: dict[str, Any] = {"budget": first["budget"]}
        for method in methods:
            kept = sum(r["rows"][position][method] * r["questions"] for r in reports)
            row[method] = kept / total if total else 0.0
        rows.append(row)
    return {
        "conversations": len(reports),
        "turns": [r["turns"] for r in reports],
        "tokens": [r["tokens"] for r in reports],
        "questions": total,
        "methods": methods,
        "rows": rows,
        "misses": {
            m: {b: [q for r in reports for q in r["misses"][m][b]] for b in reports[0]["misses"][m]}
            for m in methods
        },
        "assemble_ms_median": {
            name: statistics.median(r["assemble_ms_median"][name] for r in reports)
            for name in reports[0]["assemble_ms_median"]
        },
    }


def markdown_table(report: dict[str, Any]) -> str:
    """The report's rows as a Markdown table of percentages (presets named ``synapse (…)``).

    Examples
    --------
    >>> print(markdown_table({"methods": ["default", "last-N"],
    ...                       "rows": [{"budget": 1000, "default": 0.75, "last-N": 0.1}]}))
    | budget (tokens) | synapse (default) | last-N |
    | --- | --- | --- |
    | 1000 | 75.0% | 10.0% |
    """
    methods = report["methods"]
    names = [m if m in BASELINES else f"synapse ({m})" for m in methods]
    lines = [
        "| budget (tokens) | " + " | ".join(names) + " |",
        "| --- | " + " | ".join("---" for _ in names) + " |",
    ]
    for row in report["rows"]:
        cells = " | ".join(f"{100 * row[m]:.1f}%" for m in methods)
        lines.append(f"| {row['budget']} | {cells} |")
    return "\n".join(lines)
