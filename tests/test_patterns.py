"""Every regular expression the packages apply to text runs in linear time.

A turn, a commit message or a model's answer can hold a 50,000-space run; a pattern that
backtracks over it from every position (``\\s*\\n+\\s*`` did) takes seconds there and
minutes at 200,000 characters. Each pattern in the core and the two integrations is run on
200,000-character runs of every character class, and of pairs of them, each ending in a
digit where a name would make a match (so a match fails late). The runs happen in a child
process that names each pattern as it starts it; a pattern still running after a minute
fails the test: a hang guard, not a speed assertion (a linear pattern takes a few seconds
on all the runs, a quadratic one minutes on a single run).
"""

from __future__ import annotations

import ast
import importlib
import json
import queue
import re
import subprocess
import sys
import threading
from pathlib import Path
from typing import IO, Any

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = (
    (ROOT, "synapse_retriever"),
    (ROOT / "integrations" / "langchain", "langchain_synapse_retriever"),
    (ROOT / "integrations" / "llama-index", "llama_index"),
)
LENGTH = 200_000
PATTERN_TIMEOUT_S = 60.0  # the slowest linear pattern takes a few seconds

# One character of each class a pattern here distinguishes: space, line break, tab,
# no-break space, lower, upper, accented and CJK letters, digit, and the punctuation the
# patterns name.
CLASSES = " \n\t\u00a0aAé字1.,/_-'\"`$%()[]!【】"
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


def test_every_pattern_is_linear_on_long_runs_of_each_character_class() -> None:
    compiled, literal, _ = pattern_sites()
    literal = sorted(set(literal))
    # two children, each half of the patterns: the test waits, so both cores run them
    halves = [{"compiled": compiled[i::2], "literal": literal[i::2]} for i in range(2)]
    children = [
        subprocess.Popen(
            [sys.executable, __file__, json.dumps(half)],
            cwd=ROOT,
            stdout=subprocess.PIPE,
            text=True,
        )
        for half in halves
    ]
    try:
        names = [name for child in children for name in _started(child)]
    finally:
        for child in children:
            child.kill()
            child.wait()
    assert [child.returncode for child in children] == [0, 0]
    assert len(names) == len(compiled) + len(literal)


def _started(child: subprocess.Popen[str]) -> list[str]:
    """The patterns ``child`` named as it started each, until its end; a pattern still
    running :data:`PATTERN_TIMEOUT_S` after the last was read fails the test."""
    started: queue.Queue[str] = queue.Queue()
    assert child.stdout is not None
    threading.Thread(target=_forward, args=(child.stdout, started), daemon=True).start()
    names: list[str] = []
    try:
        while (name := started.get(timeout=PATTERN_TIMEOUT_S)) != "":
            names.append(name)
    except queue.Empty:
        raise AssertionError(f"{names[-1:]} still runs after {PATTERN_TIMEOUT_S} s") from None
    child.wait()
    return names


def _forward(lines: IO[str], into: queue.Queue[str]) -> None:
    for line in lines:
        into.put(line.strip())
    into.put("")


def run_each_pattern(sites: dict[str, list[Any]]) -> None:
    """The child: each pattern over every adversarial text, naming it before it starts."""
    patterns: list[tuple[str, re.Pattern[str]]] = []
    for module, name in sites["compiled"]:
        pattern = getattr(importlib.import_module(module), name)
        patterns.append((f"{module}.{name}", pattern))
    for text in sites["literal"]:
        patterns.append((repr(text), re.compile(text)))
    texts = [unit * (LENGTH // len(unit)) + "1" for unit in UNITS]  # a digit: no name
    for label, pattern in patterns:
        print(label, flush=True)
        for text in texts:
            for _ in pattern.finditer(text):
                pass


if __name__ == "__main__":
    run_each_pattern(json.loads(sys.argv[1]))
