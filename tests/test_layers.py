"""The package's layers, as docs/architecture.md draws them: a module imports only from its own
layer or the layers below, at load time (type-only and function-level imports aside, as the page
says). The import graph is the one tests/test_import_cycles.py builds."""

from __future__ import annotations

import ast
from pathlib import Path

from test_import_cycles import PACKAGE, discover, import_graph

ROOT = Path(__file__).resolve().parents[1] / PACKAGE

LAYERS = {
    "_types": 1,
    "_arrays": 1,
    "_numbers": 1,
    "_text": 1,
    "errors": 1,
    "clock": 1,
    "config": 1,
    "tokens": 1,
    "persistence": 2,  # the package re-exports only the rows and the protocols
    "persistence.rows": 2,
    "persistence.protocols": 2,
    "persistence.conversation.protocol": 2,
    "learning": 3,
    "capture.coactivation": 3,
    "persistence.sqlite": 4,
    "persistence.postgres": 4,
    "persistence.layered": 4,
    "persistence.conversation": 4,  # the package chooses a backend: open_conversation_storage
    "persistence.conversation.sqlite": 4,
    "persistence.conversation.postgres": 4,
    "mirror": 5,
    "recall": 6,
    "store": 7,
    "capture": 3,  # the package imports nothing; its modules are listed
    "capture.bootstrap": 8,
    "capture.gitlog": 8,
    "capture.runs": 8,
    "capture.watch": 8,
    "persistence.transfer": 8,
    "conversation": 8,
    "cli": 8,
    "bench": 8,
    "": 8,  # the package itself: re-exports the public names
}


def layer(module: str) -> int:
    """The layer of a module of the package: its longest dotted prefix in LAYERS."""
    parts = module.removeprefix(PACKAGE).lstrip(".").split(".")
    for end in range(len(parts), -1, -1):
        if ".".join(parts[:end]) in LAYERS:
            return LAYERS[".".join(parts[:end])]
    raise AssertionError(f"{module!r} has no layer: add it to LAYERS and to the page")


def test_every_module_has_a_layer() -> None:
    for module in discover(ROOT, PACKAGE):
        assert 1 <= layer(module) <= 8


def test_no_module_imports_from_a_layer_above_its_own() -> None:
    upward = [
        f"{edge.source} (layer {layer(edge.source)}) imports {edge.target} "
        f"(layer {layer(edge.target)}) at {edge.path.name}:{edge.line}"
        for edge in import_graph(discover(ROOT, PACKAGE))
        if layer(edge.target) > layer(edge.source)
    ]
    assert upward == []


def test_an_upward_import_is_caught(tmp_path: Path) -> None:
    """The check itself: a foundation module importing the store is refused."""
    package = tmp_path / PACKAGE
    (package / "learning").mkdir(parents=True)
    (package / "__init__.py").write_text("")
    (package / "store.py").write_text("")
    (package / "learning" / "__init__.py").write_text("")
    (package / "learning" / "decay.py").write_text(f"from {PACKAGE}.store import X\n")
    edges = import_graph(discover(package, PACKAGE))
    assert [(e.source, e.target) for e in edges if layer(e.target) > layer(e.source)] == [
        (f"{PACKAGE}.learning.decay", f"{PACKAGE}.store")
    ]


def test_the_adapters_import_only_public_names() -> None:
    """The adapters are other distributions, which accept any later 0.x release of the core
    (see the next test): a name or module with a leading underscore may change in any of
    them. Read from each file's
    syntax tree, so a name in a parenthesised import, one a line, is seen too."""
    adapters = ROOT.parent / "integrations"
    private = [
        f"{path.relative_to(adapters)}:{line}: {name}"
        for path in sorted(adapters.rglob("*.py"))
        if "tests" not in path.parts
        for line, name in _private_imports(path.read_text())
    ]
    assert private == []


def _private_imports(source: str) -> list[tuple[int, str]]:
    """The core's private modules and names ``source`` imports, with their lines."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.ImportFrom) and (node.module or "").split(".")[0] == PACKAGE:
            names = [f"{node.module}.{alias.name}" for alias in node.names]
        elif isinstance(node, ast.Import):
            names = [a.name for a in node.names if a.name.split(".")[0] == PACKAGE]
        else:
            continue
        found += [(node.lineno, n) for n in names if any(p.startswith("_") for p in n.split("."))]
    return found


def test_a_private_name_is_caught_in_any_form_of_import() -> None:
    source = """
from synapse_retriever.conversation import (
    blank,
    _check_turn,
)
from synapse_retriever._text import blank
import synapse_retriever._numbers as numbers
from synapse_retriever.conversation import blank, trim_history
import os._private
"""
    assert _private_imports(source) == [
        (2, f"{PACKAGE}.conversation._check_turn"),
        (6, f"{PACKAGE}._text.blank"),
        (7, f"{PACKAGE}._numbers"),
    ]


def test_the_adapters_require_the_core_version_they_are_released_with() -> None:
    """An adapter imports the names of the core it is released with: a lower bound below
    that version would let pip pair it with an older core that lacks some (a new public name,
    ``synapse_retriever.conversation.blank``, say), and the import would fail."""
    import tomllib

    from packaging.requirements import Requirement
    from packaging.version import Version

    core = Version(
        tomllib.loads((ROOT.parent / "pyproject.toml").read_text())["project"]["version"]
    )
    for project in sorted((ROOT.parent / "integrations").glob("*/pyproject.toml")):
        wanted = [
            Requirement(text)
            for text in tomllib.loads(project.read_text())["project"]["dependencies"]
            if Requirement(text).name == "synapse-retriever"
        ]
        assert len(wanted) == 1, project
        lows = [Version(s.version) for s in wanted[0].specifier if s.operator == ">="]
        assert lows == [core], f"{project}: {wanted[0]} (the core is {core})"
        assert core in wanted[0].specifier, f"{project}: {wanted[0]} excludes the core {core}"
