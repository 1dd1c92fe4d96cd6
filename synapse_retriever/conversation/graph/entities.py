"""The deterministic entity extractor: what a turn mentions, found without a model.

A turn's MENTIONS edges point at entity nodes; one thing must be one node, however it
is written. The extractor reads, in this order (an earlier kind claims its characters,
so ``src/auth/jwt.py`` is one file, not a file and a dotted identifier):

========  ==========================================  ============================
kind      what                                        key (the node's identity)
========  ==========================================  ============================
file      a path (``src/auth/jwt.py``) or a file      its basename, lower-cased
          name with a known extension (``jwt.py``)    (``jwt.py``)
code      a dotted (``memory.assemble``), snake_case  lower-cased, without ``()``
          or camelCase identifier, or ``name()``
date      ``2024-05-01``, ``May 3``, ``3 May 2024``   ISO when the year is given,
                                                      else ``may 3``
quantity  a number with a unit (``20 ms``, ``$20``,    number and unit, lower-cased,
          ``5GB``, ``30%``, ``3 days``)                one space (``20 ms``)
quoted    a term in quotes or backticks (1-5 words)   lower-cased, plurals cut
name      two or more capitalised words               lower-cased, plurals cut
          (``Project Phoenix``, ``New York``)
========  ==========================================  ============================

Normalisation folds case, cuts a plural (``deploys`` -> ``deploy``, ``policies`` ->
``policy``) and reduces a path to its basename, so that ``src/auth/jwt.py`` and
``jwt.py`` are one node (two files of one name in different folders are one node too:
the price of matching a bare file name to its path).

Examples
--------
>>> [(e.kind, e.key) for e in extract_entities(
...     "The bug in src/auth/jwt.py: verify_token() took 250 ms since 2024-05-01.")]
[('file', 'jwt.py'), ('code', 'verify_token'), ('quantity', '250 ms'), ('date', '2024-05-01')]
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from synapse_retriever.conversation.text import COMBINING_MARKS

__all__ = ["ENTITY_KINDS", "MAX_CHARS", "MAX_KEY_CHARS", "Entity", "extract_entities", "singular"]

ENTITY_KINDS = ("file", "code", "date", "quantity", "quoted", "name")
"""The kinds of entity the deterministic extractor finds, in the order it looks."""

_EXTENSIONS = (
    "py|pyi|ipynb|js|mjs|cjs|ts|tsx|jsx|md|rst|txt|json|jsonl|yaml|yml|toml|ini|cfg|conf|env|"
    "rs|go|java|kt|scala|c|h|cc|cpp|hpp|cs|rb|php|swift|sql|sh|bash|zsh|ps1|html|css|scss|"
    "vue|svelte|lock|csv|tsv|xml|proto|tf|dockerfile|gradle|mk"
)


def _file_regex(marks: str) -> str:
    """A path, or a file name with a known extension, of words with ``marks`` in them."""
    w = rf"\w{marks}"
    return (
        rf"(?<![{w}/.-])(?:\.{{0,2}}/)?(?:[{w}.-]+/)+[{w}.-]*\w{f'[{marks}]*' if marks else ''}"
        rf"|(?<![{w}/.-])[{w}-]+\.(?:{_EXTENSIONS})\b"
    )


_FILE = re.compile(_file_regex(COMBINING_MARKS), re.IGNORECASE)  # "रिपोर्ट.csv" whole
_ASCII_FILE = re.compile(_file_regex(""), re.IGNORECASE)  # the same, faster, without marks
_CODE = re.compile(
    r"(?<![\w.])(?>(?:[A-Za-z_]\w*\.)+[A-Za-z_]\w*)(?:\(\))?(?!\.*\w)"  # dotted, atomic
    r"|\b[A-Za-z_]\w*\(\)"  # a call
    r"|\b[a-z0-9]+(?:_[a-z0-9]+)+\b|\b_\w+\b"  # snake_case
    r"|\b[a-z]+(?:[A-Z][a-z0-9]+)+\b"  # camelCase
    r"|\b(?:[A-Z][a-z0-9]+){2,}\b"  # PascalCase
)
_MONTHS = (
    "january|february|march|april|may|june|july|august|september|october|november|december|"
    "jan|feb|mar|apr|jun|jul|aug|sep|sept|oct|nov|dec"
)
_DATE = re.compile(
    rf"\b\d{{4}}-\d{{2}}-\d{{2}}\b"
    rf"|\b(?:{_MONTHS})\.?\s+\d{{1,2}}(?:st|nd|rd|th)?(?:,?\s+\d{{4}})?\b"
    rf"|\b\d{{1,2}}(?:st|nd|rd|th)?\s+(?:{_MONTHS})\b(?:,?\s+\d{{4}})?",
    re.IGNORECASE,
)
_UNITS = (
    "ms|s|sec|secs|seconds?|minutes?|mins?|hours?|hrs?|h|days?|weeks?|months?|years?|"
    "kb|mb|gb|tb|kib|mib|gib|tib|b|bytes?|kg|g|mg|lbs?|km|m|cm|mm|miles?|mi|"
    "usd|eur|gbp|dollars?|euros?|k|x|px|rpm|qps|rps|hz|khz|mhz|ghz|°c|°f|tokens?"
)
_NUMBER = r"(?<![\d,.])(?:\d{1,3}(?:,\d{3})+|\d+)(?:\.\d+)?"  # 1,200 or 1200 or 1.5
_QUANTITY = re.compile(
    rf"[$€£]\s?{_NUMBER}[kKmM]?\b|{_NUMBER}\s?(?:%|(?:{_UNITS})\b)",
    re.IGNORECASE,
)
_QUOTED = re.compile(r"`([^`\n]{1,60})`|\"([^\"\n]{1,60})\"|“([^”\n]{1,60})”|'([^'\n]{2,60})'")
_UPPER, _LOWER = "A-ZÀ-ÖØ-Þ", "a-zß-öø-ÿ"  # Latin letters, accented ones included
_WORD = rf"[{_UPPER}](?:[{_LOWER}0-9]|['-][{_UPPER}{_LOWER}])[\w'-]{{0,40}}\b"  # not ALL CAPS
_GAP = r"[^\S\n\r\f\v\x1c-\x1e\x85\u2028\u2029]+"  # spaces within a line: a name never spans two
_NAME = re.compile(rf"\b{_WORD}(?:{_GAP}(?:of{_GAP}(?:the{_GAP})?|the{_GAP})?{_WORD})+")
_LEADING_TEXT = (
    "a an the i we you he she it they my our your his her their this that these those "
    "if when where what why how who which so but and or then also hi hey hello thanks "
    "please yes no ok okay sure great well now today yesterday tomorrow let let's "
    "monday tuesday wednesday thursday friday saturday sunday"
)
_LEADING = frozenset(_LEADING_TEXT.split())
_MONTH_NUMBER = {
    name: number
    for number, names in enumerate(
        (
            ("january", "jan"),
            ("february", "feb"),
            ("march", "mar"),
            ("april", "apr"),
            ("may",),
            ("june", "jun"),
            ("july", "jul"),
            ("august", "aug"),
            ("september", "sep", "sept"),
            ("october", "oct"),
            ("november", "nov"),
            ("december", "dec"),
        ),
        start=1,
    )
    for name in names
}
_MAX_QUOTED_WORDS = 5

MAX_CHARS = 20_000
"""Only a text's first this-many characters are read for entities (a pasted log or file
can be megabytes; what a turn is about is named early)."""
MAX_KEY_CHARS = 200
"""The longest key an entity has: a longer match (a pasted blob of identifiers, a run of
capitalised words) names nothing a later turn would name again, and a node must fit in a
PostgreSQL index row (2,704 bytes, two nodes to an edge)."""


@dataclass(frozen=True)
class Entity:
    """One thing a text mentions: its ``kind``, its normalised ``key``, the ``surface`` text.

    ``node`` (``"kind:key"``) is its node in the conversation graph.

    Examples
    --------
    >>> Entity("file", "jwt.py", "src/auth/jwt.py").node
    'file:jwt.py'
    """

    kind: str
    key: str
    surface: str

    @property
    def node(self) -> str:
        """The entity's node id in the graph: ``kind:key``."""
        return f"{self.kind}:{self.key}"


def singular(word: str) -> str:
    """A lower-cased word with a regular English plural cut.

    ``ies`` -> ``y``; ``ses``, ``xes``, ``zes``, ``ches``, ``shes`` lose ``es``; another
    final ``s`` goes unless the word ends in ``ss``, ``us`` or ``is`` or has 3 letters
    or fewer.

    Examples
    --------
    >>> [singular(w) for w in ["Deploys", "policies", "boxes", "status", "class", "gas"]]
    ['deploy', 'policy', 'box', 'status', 'class', 'gas']
    """
    word = word.lower()
    if len(word) > 4 and word.endswith("ies"):
        return word[:-3] + "y"
    if len(word) > 4 and word.endswith(("ses", "xes", "zes", "ches", "shes")):
        return word[:-2]
    if len(word) > 3 and word.endswith("s") and not word.endswith(("ss", "us", "is")):
        return word[:-1]
    return word


def _phrase(text: str) -> str:
    words = text.lower().split()
    return " ".join([*words[:-1], singular(words[-1])]) if words else ""


def _date_key(surface: str) -> str:
    text = surface.lower().replace(",", " ").replace(".", " ")
    if re.fullmatch(r"\d{4}-\d{2}-\d{2}", text.strip()):
        return text.strip()
    words = text.split()
    month = next(_MONTH_NUMBER[w] for w in words if w in _MONTH_NUMBER)
    numbers = [int(re.sub(r"\D", "", w)) for w in words if re.sub(r"\D", "", w)]
    day = next((n for n in numbers if 1 <= n <= 31), None)
    if day is None:
        return ""  # "May 40", "0 May": not a date
    years = [n for n in numbers if n > 31]
    if years:
        return f"{years[0]:04d}-{month:02d}-{day:02d}"
    months = list(_MONTH_NUMBER)
    name = next(m for m in months if _MONTH_NUMBER[m] == month)
    return f"{name} {day}"


def _quantity_key(surface: str) -> str:
    text = surface.lower().replace(",", "")
    if text[0] in "$€£":
        currency = {"$": "usd", "€": "eur", "£": "gbp"}[text[0]]
        number = text[1:].strip()
        scale = {"k": 1e3, "m": 1e6}.get(number[-1], 1.0)
        value = float(number.rstrip("km")) * scale
        return f"{value:g} {currency}"
    match = re.match(r"(\d+(?:\.\d+)?)\s?(.*)", text)
    assert match is not None  # the pattern above found a number
    unit = match.group(2)
    return f"{float(match.group(1)):g} {singular(unit) if len(unit) > 2 else unit}".strip()


def extract_entities(text: str) -> list[Entity]:
    """The entities ``text`` mentions, in order of first appearance, each once.

    Parameters
    ----------
    text : str
        A turn's text.

    Returns
    -------
    list of Entity
        One per distinct node (``kind:key``), at its first mention, from the first
        :data:`MAX_CHARS` characters; keys longer than :data:`MAX_KEY_CHARS` are left out,
        and a name never spans a line break.

    Examples
    --------
    A path and its basename are one node; plurals and case fold:

    >>> [e.node for e in extract_entities(
    ...     "Edit src/auth/jwt.py. No wait, jwt.py is fine; the \\"Retry Policies\\" are not.")]
    ['file:jwt.py', 'quoted:retry policy']
    >>> [e.node for e in extract_entities("Sarah Miller flies to New York on March 3, 2025.")]
    ['name:sarah miller', 'name:new york', 'date:2025-03-03']
    >>> [e.node for e in extract_entities("The budget is $20/month, with a 30% buffer.")]
    ['quantity:20 usd', 'quantity:30 %']
    """
    text = text[:MAX_CHARS]
    taken = bytearray(len(text))
    found: list[tuple[int, Entity]] = []
    seen: set[str] = set()

    def claim(start: int, end: int) -> bool:
        if any(taken[start:end]):
            return False
        taken[start:end] = b"\x01" * (end - start)
        return True

    def add(start: int, entity: Entity) -> None:
        if entity.key and len(entity.key) <= MAX_KEY_CHARS and entity.node not in seen:
            seen.add(entity.node)
            found.append((start, entity))

    for match in (_ASCII_FILE if text.isascii() else _FILE).finditer(text):
        surface = match.group(0)
        base = surface.rstrip("/").rsplit("/", 1)[-1]
        if "." not in base and surface.count("/") < 2:
            continue  # "and/or", "km/h": not a path
        if claim(match.start(), match.end()):
            add(match.start(), Entity("file", base.lower(), surface))
    for match in _QUOTED.finditer(text):
        inner = next(g for g in match.groups() if g is not None).strip()
        if not inner or len(inner.split()) > _MAX_QUOTED_WORDS or not re.search(r"\w", inner):
            continue
        around = text[max(0, match.start() - 1) : match.end() + 1]
        if match.group(4) is not None and re.search(r"\w'\w", around):
            continue  # an apostrophe (don't ... it's), not a quote
        if claim(match.start(), match.end()):
            add(match.start(), Entity("quoted", _phrase(inner), inner))
    for match in _CODE.finditer(text):
        surface = match.group(0)
        if surface.count(".") == 1 and re.fullmatch(r"[A-Za-z]\.[A-Za-z]", surface):
            continue  # "e.g" style abbreviations
        if claim(match.start(), match.end()):
            add(match.start(), Entity("code", surface.removesuffix("()").lower(), surface))
    for match in _DATE.finditer(text):
        key = _date_key(match.group(0))
        if key and claim(match.start(), match.end()):
            add(match.start(), Entity("date", key, match.group(0)))
    for match in _QUANTITY.finditer(text):
        if claim(match.start(), match.end()):
            add(match.start(), Entity("quantity", _quantity_key(match.group(0)), match.group(0)))
    for match in _NAME.finditer(text):
        spans = [(m.start(), m.end()) for m in re.finditer(r"\S+", match.group(0))]
        while spans and match.group(0)[slice(*spans[0])].lower() in _LEADING:
            spans = spans[1:]
        while spans and match.group(0)[slice(*spans[-1])].lower() in ("of", "the"):
            spans = spans[:-1]
        if len(spans) < 2:
            continue
        start, end = match.start() + spans[0][0], match.start() + spans[-1][1]
        surface = text[start:end]
        if claim(start, end):
            add(start, Entity("name", _phrase(surface), surface))
    return [entity for _, entity in sorted(found, key=lambda pair: pair[0])]
