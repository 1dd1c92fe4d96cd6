"""Every regular expression the packages apply to text runs in linear time.

A turn, a commit message or a model's answer can hold a 50,000-space run; a pattern that
backtracks over it from every position (``\\s*\\n+\\s*`` did) takes seconds there and
minutes at 200,000 characters. Each pattern in the core and the two integrations is run on
200,000-character runs of every character class, and of pairs of them, each ending in a
digit where a name would make a match (so a match fails late). The runs happen in a child
process, this file run beside the tests before this one (tests/head_start.py), which times
each pattern: one that took longer than a minute fails the test, and one that never ends
fails it at the job's timeout: a hang guard, not a speed assertion (a linear pattern takes
a few seconds on all the runs, a quadratic one minutes on a single run).
"""

from __future__ import annotations

import ast
import importlib
import re
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = (
    (ROOT, "synapse_retriever"),
    (ROOT / "integrations" / "langchain", "langchain_synapse_retriever"),
    (ROOT / "integrations" / "llama-index", "llama_index"),
)
LENGTH = 200_000
PATTERN_TIMEOUT_S = 60.0  # the slowest linear pattern takes a few seconds

# One character of each class a pattern here distinguishes: space, line break, tab,
# no-break space, lower, upper, accented and CJK letters, a combining mark, digit, and the
# punctuation the patterns name.
CLASSES = " \n\t\u00a0aAé字\u03011.,/_-'\"`$%()[]!【】"
# Pairs of the classes that patterns join (a dotted name, a path, a number, a sentence end).
PAIRED = " \naA1./"
UNITS = [*CLASSES, *(a + b for a in PAIRED for b in PAIRED if a != b)]


def pattern_sites() -> tuple[list[tuple[str, str]], list[str], list[str]]:
    """Where the packages use ``re``: module-level compiled patterns, inline literal ones,
    and any use this test cannot check (a pattern built at call time)."""
    compiled: list[tuple[str, str]] = []
    literal: list[str] = []
    unchecked: list[str] = []
    for root, package in PACKAGES:
        for path in sorted((root / package).rglob("*.py")):
            tree = ast.parse(path.read_text(encoding="utf-8"))
            module = ".".join(path.relative_to(root).with_suffix("").parts)
            named = {
                id(node.value): node.targets[0].id
                for node in tree.body
                if isinstance(node, ast.Assign)
                and len(node.targets) == 1
                and isinstance(node.targets[0], ast.Name)
            }
            for node in ast.walk(tree):
                if not (
                    isinstance(node, ast.Call)
                    and isinstance(node.func, ast.Attribute)
                    and isinstance(node.func.value, ast.Name)
                    and node.func.value.id == "re"
                    and node.func.attr != "escape"
                ):
                    continue
                first = node.args[0] if node.args else None
                if node.func.attr == "compile" and id(node) in named:
                    compiled.append((module, named[id(node)]))
                elif isinstance(first, ast.Constant) and isinstance(first.value, str):
                    literal.append(first.value)
                else:
                    unchecked.append(f"{path.relative_to(ROOT)}:{node.lineno}")
    return compiled, literal, unchecked


def test_every_pattern_is_one_this_test_runs() -> None:
    compiled, literal, unchecked = pattern_sites()
    assert unchecked == [], "compile these at module level so the linear-time test runs them"
    assert ("synapse_retriever.conversation.text", "_SENTENCE_END") in compiled
    assert r"\S+" in literal


def test_every_pattern_is_linear_on_long_runs_of_each_character_class(
    patterns: tuple[int, str],
) -> None:
    code, output = patterns  # this file run beside the tests before this one (head_start.py)
    compiled, literal, _ = pattern_sites()
    lines = [line.split("\t") for line in output.splitlines() if "\t" in line]
    started = [label for kind, label in lines if kind == "start"]
    seconds = {label: float(took) for kind, label, took in (
        (kind, *rest.rsplit(" ", 1)) for kind, rest in lines if kind == "done"
    )}  # fmt: skip
    assert code == 0, output
    slow = {label: took for label, took in seconds.items() if took > PATTERN_TIMEOUT_S}
    assert not slow, f"patterns that ran longer than {PATTERN_TIMEOUT_S} s: {slow}"
    assert list(seconds) == started and len(started) == len(compiled) + len(set(literal))


def run_each_pattern() -> None:
    """The child (tests/head_start.py runs this file): each pattern over every adversarial
    text, with a line as it starts (``start<TAB>label``) and one with its seconds as it ends
    (``done<TAB>label seconds``)."""
    compiled, literal, _ = pattern_sites()
    patterns: list[tuple[str, re.Pattern[str]]] = []
    for module, name in compiled:
        pattern = getattr(importlib.import_module(module), name)
        patterns.append((f"{module}.{name}", pattern))
    for text in sorted(set(literal)):
        patterns.append((repr(text), re.compile(text)))
    texts = [unit * (LENGTH // len(unit)) + "1" for unit in UNITS]  # a digit: no name
    for label, pattern in patterns:
        print(f"start\t{label}", flush=True)
        began = time.perf_counter()
        for text in texts:
            for _ in pattern.finditer(text):
                pass
        print(f"done\t{label} {time.perf_counter() - began:.3f}", flush=True)


if __name__ == "__main__":
    run_each_pattern()
