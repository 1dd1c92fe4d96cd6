"""LoCoMo: long multi-session conversations whose questions name their evidence turns.

`LoCoMo <https://github.com/snap-research/locomo>`_ (Maharana et al., 2024, CC BY-NC 4.0)
holds ten conversations between two people, 19 to 32 sessions and 369 to 689 turns each,
with about 2,000 questions; each question lists the turns (``dia_id``, e.g. ``D3:1``) that
answer it and a category (1 multi-hop, 2 temporal, 3 open-domain, 4 single-hop,
5 adversarial). It is the second conversation set of the benchmarks (RealMem is the
first): read at run time from the folder or file the user gives, never shipped.

A conversation becomes a :class:`~synapse_retriever.bench.realmem.Persona`: its turns in
order, each at its session's date plus a minute per turn, the first speaker ``user``
and the second ``assistant``, each turn's speaker its ``speaker`` (a question that names
one finds what they said first), the text as said (no name added); every question
is asked after the last turn, and its ``evidence`` holds the keys of its evidence turns.
A turn whose text is blank is left out (it cannot be stored).

Both layouts of the data are read: ``locomo10.json`` (a list of samples, each with a
``conversation`` and a ``qa`` list) and a folder of one file per conversation (the
``locomo10.zip`` of the repository: ``speaker_a``, ``session_<n>``, ``qa`` at the top). The
repository ships its conversations zipped (``data/locomo10.zip``): the archive, or a folder
that holds it and no JSON file (``locomo/data`` as cloned), is read without unzipping it.

Examples
--------
>>> sample = {"speaker_a": "Ann", "speaker_b": "Bo",
...           "session_1_date_time": "1:56 pm on 8 May, 2023",
...           "session_1": [{"speaker": "Ann", "dia_id": "D1:1", "text": "I paint."},
...                         {"speaker": "Bo", "dia_id": "D1:2", "text": "Nice!"}],
...           "qa": [{"question": "What does Ann do?", "evidence": ["D1:1"], "category": 4}]}
>>> persona = locomo_persona(sample, "conv-1", "example")
>>> [(t.role, t.session, t.text) for t in persona.turns]
[('user', 'session_1', 'I paint.'), ('assistant', 'session_1', 'Nice!')]
>>> [(q.index, q.category, sorted(q.evidence)) for q in persona.queries]
[(2, 'single-hop', ['D1:1'])]
"""

from __future__ import annotations

import json
import os
import zipfile
from collections.abc import Mapping
from datetime import UTC, datetime
from pathlib import Path, PurePosixPath
from typing import Any

from synapse_retriever.bench.memory import Turn
from synapse_retriever.bench.realmem import Persona, Query, RealMemFormatError

__all__ = ["CATEGORIES", "load_locomo", "locomo_persona"]

CATEGORIES = {1: "multi-hop", 2: "temporal", 3: "open-domain", 4: "single-hop", 5: "adversarial"}
"""LoCoMo's question categories by number."""


def _date(text: object, where: str) -> float:
    try:
        moment = datetime.strptime(str(text).strip(), "%I:%M %p on %d %B, %Y")
    except ValueError:
        raise RealMemFormatError(f"{where}: session date {text!r} is not like "
                                 "'1:56 pm on 8 May, 2023'") from None  # fmt: skip
    return moment.replace(tzinfo=UTC).timestamp()


def locomo_persona(sample: Mapping[str, Any], name: str, where: str) -> Persona:
    """One LoCoMo conversation (the ``conversation`` object with ``qa`` beside or inside
    it) as a :class:`~synapse_retriever.bench.realmem.Persona`; see the module notes.

    Raises
    ------
    RealMemFormatError
        The object is not a LoCoMo conversation, or no question names a turn it holds.
    """
    conversation = sample.get("conversation", sample)
    questions = sample.get("qa", conversation.get("qa") if isinstance(conversation, dict) else None)
    if not isinstance(conversation, dict) or "session_1" not in conversation:
        raise RealMemFormatError(f"{where} is not a LoCoMo conversation (no 'session_1')")
    if not isinstance(questions, list):
        raise RealMemFormatError(f"{where} has no 'qa' list")
    first = conversation.get("speaker_a")
    turns: list[Turn] = []
    keys: list[str] = []
    clock = float("-inf")
    number = 1
    while f"session_{number}" in conversation:
        session = f"session_{number}"
        start = _date(conversation.get(f"{session}_date_time"), where)
        for position, turn in enumerate(conversation[session] or []):
            if not isinstance(turn, dict) or not isinstance(turn.get("text"), str):
                raise RealMemFormatError(f"{where}: {session} turn {position} has no text")
            if not turn["text"].strip():
                continue
            clock = max(start + 60.0 * position, clock + 1.0)  # never back in time
            speaker = turn.get("speaker")
            role = "user" if speaker == first else "assistant"
            said_by = speaker if isinstance(speaker, str) and speaker.strip() else None
            turns.append(Turn(turn["text"], role, session, clock, said_by))
            keys.append(str(turn.get("dia_id", f"{session}:{position}")))
        number += 1
    known = frozenset(keys)
    queries: list[Query] = []
    for position, question in enumerate(questions):
        if not isinstance(question, dict) or not isinstance(question.get("question"), str):
            raise RealMemFormatError(f"{where}: qa {position} has no question")
        evidence = frozenset(str(e) for e in question.get("evidence") or []) & known
        if not evidence or not question["question"].strip():
            continue  # nothing to find: a question without evidence in the turns
        category = CATEGORIES.get(question.get("category", 0), str(question.get("category")))
        queries.append(
            Query(len(turns), question["question"], f"q{position + 1}", category, {},
                  evidence=evidence)
        )  # fmt: skip
    if not queries:
        raise RealMemFormatError(f"{where} has no question whose evidence it holds")
    return Persona(name, tuple(turns), tuple(queries), keys=tuple(keys))


def _documents(root: Path) -> list[tuple[str, str, bytes]]:
    """``(where, stem, content)`` of each JSON document under ``root``: a file, the ``*.json``
    files below a folder, or, where a folder holds none, the JSON members of the zip
    archives below it (the repository's ``locomo10.zip``); a ``.zip`` file, its members."""
    if root.is_dir():
        files = sorted(root.rglob("*.json"))
        if not files:  # as cloned: data/locomo10.zip and nothing unzipped beside it
            return [doc for archive in sorted(root.rglob("*.zip")) for doc in _members(archive)]
    elif root.suffix.lower() == ".zip":
        return _members(root)
    else:
        files = [root]
    return [(repr(os.fspath(file)), file.stem, file.read_bytes()) for file in files]


def _members(archive: Path) -> list[tuple[str, str, bytes]]:
    try:
        with zipfile.ZipFile(archive) as opened:
            names = sorted(
                info.filename
                for info in opened.infolist()
                if not info.is_dir()
                and info.filename.lower().endswith(".json")
                and not info.filename.startswith("__MACOSX/")  # macOS's resource forks
            )
            return [
                (
                    f"{os.fspath(archive)!r} member {name!r}",
                    PurePosixPath(name).stem,
                    opened.read(name),
                )
                for name in names
            ]
    # NotImplementedError: zipfile's word for a compression method it cannot read
    except (zipfile.BadZipFile, zipfile.LargeZipFile, NotImplementedError) as exc:
        raise RealMemFormatError(
            f"{os.fspath(archive)!r} is not a readable zip archive: {exc}"
        ) from None


def load_locomo(path: str | os.PathLike[str]) -> list[Persona]:
    """The conversations of a LoCoMo file (``locomo10.json``), zip archive
    (``locomo10.zip``) or folder (one JSON file per conversation, searched below it; a
    folder without any: the JSON files inside its zip archives); a missing path raises
    ``FileNotFoundError``, data that is not LoCoMo
    :class:`~synapse_retriever.bench.realmem.RealMemFormatError`.
    """
    root = Path(path)
    if not root.exists():
        raise FileNotFoundError(f"--locomo {os.fspath(path)!r} does not exist")
    personas: list[Persona] = []
    for where, stem, content in _documents(root):
        try:
            data = json.loads(content.decode("utf-8"))
        except (ValueError, UnicodeDecodeError) as exc:
            raise RealMemFormatError(f"{where} is not JSON: {exc}") from None
        samples = data if isinstance(data, list) else [data]
        for number, sample in enumerate(samples):
            if not isinstance(sample, dict):
                raise RealMemFormatError(f"{where} item {number} is not an object")
            name = str(sample.get("sample_id") or (stem if len(samples) == 1 else number))
            personas.append(locomo_persona(sample, name, where))
    if not personas:
        raise RealMemFormatError(
            f"{os.fspath(path)!r} holds no LoCoMo conversation (no JSON file, and no zip "
            "archive of them such as the repository's data/locomo10.zip)"
        )
    return personas
