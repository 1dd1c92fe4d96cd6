"""The package's layers, as docs/architecture.md draws them: a module imports only from its own
layer or the layers below (runtime imports at module level; type-only and function-level imports
aside, as the page says)."""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1] / "synapse_retriever"

LAYERS = {
    "_types": 1,
    "_arrays": 1,
    "errors": 1,
    "clock": 1,
    "config": 1,
    "tokens": 1,
    "persistence.rows": 2,
    "persistence.protocols": 2,
    "learning": 3,
    "capture.coactivation": 3,
    "persistence.sqlite": 4,
    "persistence": 4,  # the package: rows, protocols and sqlite re-exported
    "memory": 5,
    "recall": 6,
    "store": 7,
    "capture": 8,
    "persistence.transfer": 8,
    "context": 8,
    "cli": 8,
    "bench": 8,
    "": 8,  # the package itself: re-exports the public names
}


def layer(module: str) -> int:
    """The layer of ``synapse_retriever.<module>``: its longest prefix in LAYERS."""
    parts = module.split(".")
    for end in range(len(parts), -1, -1):
        if ".".join(parts[:end]) in LAYERS:
            return LAYERS[".".join(parts[:end])]
    raise AssertionError(f"{module!r} has no layer in LAYERS: add it here and to the page")


def runtime_imports(path: Path) -> set[str]:
    """``synapse_retriever`` modules imported at module level, outside TYPE_CHECKING."""
    found: set[str] = set()
    for node in ast.parse(path.read_text(encoding="utf-8")).body:
        if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("synapse_retriever"):
            found.add(node.module.removeprefix("synapse_retriever").lstrip("."))  # type: ignore[union-attr]
        elif isinstance(node, ast.Import):
            found.update(
                a.name.removeprefix("synapse_retriever").lstrip(".")
                for a in node.names
                if a.name.startswith("synapse_retriever")
            )
    return found


def test_no_module_imports_from_a_layer_above_its_own() -> None:
    upward = []
    for path in sorted(PACKAGE.rglob("*.py")):
        module = ".".join(path.relative_to(PACKAGE).with_suffix("").parts)
        module = module.removesuffix("__init__").rstrip(".")
        for imported in runtime_imports(path):
            if layer(imported) > layer(module):
                upward.append(
                    f"{module} (layer {layer(module)}) imports {imported} ({layer(imported)})"
                )
    assert upward == []


def test_every_module_has_a_layer() -> None:
    for path in PACKAGE.rglob("*.py"):
        module = ".".join(path.relative_to(PACKAGE).with_suffix("").parts)
        layer(module.removesuffix("__init__").rstrip("."))
