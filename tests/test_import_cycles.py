"""No import cycle inside ``synapse_retriever``: its modules import each other as a DAG.

Every module of the package is found on disk (any folder layout) and parsed with ``ast``;
nothing is imported. An edge ``a -> b`` means that loading ``a`` runs ``b``:

- Only imports that run while the module loads count: those at module level, including
  inside ``if``/``try``/``with`` blocks and class bodies.
- Imports under ``if TYPE_CHECKING:`` are left out: they never run, so they cannot make a
  runtime cycle (their ``else:`` branch does run, and counts).
- Imports inside a function (the CLI's lazy imports, a migration step) are left out too:
  they run when the function is called, after every module has finished loading, so they
  cannot meet a half-initialised module. Where one points back up the layers it is a
  layering question for the architecture page, not a cycle that breaks an import. Among the
  CLI's own modules they count as well (``lazy=True``): two command modules that import
  each other, even in a function, are one module split in two.
- ``import a.b.c`` and ``from a.b.c import x`` run ``a``, ``a.b`` and ``a.b.c``; ``x`` is
  a module too when ``a/b/c/x.py`` (or ``x/__init__.py``) exists. A module's own parent
  packages are left out: Python has started them before the module itself, and importing
  a submodule through a half-initialised parent is fine. Reading a *name* from a parent
  (``from synapse_retriever import SynapseStore`` inside the package) is not: it counts.
"""

from __future__ import annotations

import ast
import importlib.util
import itertools
from collections.abc import Iterator, Mapping, Set
from dataclasses import dataclass
from pathlib import Path

import networkx as nx

PACKAGE = "synapse_retriever"


@dataclass(frozen=True)
class Import:
    """One edge of the graph, with where it comes from (for the failure message)."""

    source: str
    target: str
    path: Path
    line: int


def discover(root: Path, package: str) -> dict[str, Path]:
    """Every module under the package folder ``root``: dotted name -> file."""
    modules = {}
    for path in sorted(root.rglob("*.py")):
        parts = path.relative_to(root).with_suffix("").parts
        if parts[-1] == "__init__":
            parts = parts[:-1]
        modules[".".join((package, *parts))] = path
    return modules


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def _load_time_imports(
    body: list[ast.stmt], *, lazy: bool = False
) -> Iterator[ast.Import | ast.ImportFrom]:
    """The import statements that run when a module with this body loads; with ``lazy``, also
    those that run when its functions are called."""
    for node in body:
        if isinstance(node, ast.Import | ast.ImportFrom):
            yield node
        elif isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            if lazy:  # runs when called, not when the module loads
                yield from _load_time_imports(node.body, lazy=lazy)
        elif isinstance(node, ast.If) and _is_type_checking(node.test):
            yield from _load_time_imports(node.orelse, lazy=lazy)
        else:  # if/else, try/except/else/finally, with, for, while, match, class bodies
            for field in ("body", "orelse", "finalbody", "handlers", "cases"):
                for child in getattr(node, field, []):
                    blocks = isinstance(child, ast.excepthandler | ast.match_case)
                    yield from _load_time_imports(child.body if blocks else [child], lazy=lazy)


def _chain(module: str) -> list[str]:
    """``a.b.c`` -> ``[a, a.b, a.b.c]``: what importing ``a.b.c`` runs, in order."""
    parts = module.split(".")
    return [".".join(parts[: i + 1]) for i in range(len(parts))]


def _absolute(node: ast.ImportFrom, module: str, is_package: bool) -> str:
    if not node.level:
        return node.module or ""
    base = module.split(".") if is_package else module.split(".")[:-1]
    base = base[: len(base) - (node.level - 1)]
    return ".".join([*base, node.module] if node.module else base)


def import_graph(modules: Mapping[str, Path], *, lazy: bool = False) -> list[Import]:
    """The load-time import edges between ``modules`` (see the module docstring); with
    ``lazy``, the imports inside functions too."""
    edges = []
    for module, path in modules.items():
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
        started_before = set(_chain(module)[:-1])  # parents: already in sys.modules
        for node in _load_time_imports(tree.body, lazy=lazy):
            targets: list[str] = []
            if isinstance(node, ast.Import):
                for alias in node.names:
                    targets += [m for m in _chain(alias.name) if m not in started_before]
            else:
                source = _absolute(node, module, path.name == "__init__.py")
                targets += [m for m in _chain(source) if m not in started_before]
                for alias in node.names:
                    submodule = f"{source}.{alias.name}"
                    if submodule in modules:
                        targets.append(submodule)
                    elif source in started_before:  # a name read from a half-loaded parent
                        targets.append(source)
            edges += [
                Import(module, target, path, node.lineno)
                for target in dict.fromkeys(targets)
                if target in modules and target != module
            ]
    return edges


def find_cycles(graph: Mapping[str, Set[str]]) -> list[list[str]]:
    """One shortest cycle per strongly connected component, as ``[a, b, ..., a]``.

    Every cycle lies inside one strongly connected component, so this is empty exactly
    when the graph has no cycle; and each tangle is reported once, however many cycles
    run through it. A node that imports itself is a cycle of one.
    """
    digraph = nx.DiGraph([(a, b) for a, targets in graph.items() for b in targets])
    digraph.add_nodes_from(graph)
    cycles = []
    for component in nx.strongly_connected_components(digraph):
        start = min(component)
        if len(component) == 1 and not digraph.has_edge(start, start):
            continue
        inner = digraph.subgraph(component)
        back = min(
            (nx.shortest_path(inner, successor, start) for successor in inner.successors(start)),
            key=lambda path: (len(path), path),
        )
        cycles.append([start, *back])
    return sorted(cycles)


def _package_root() -> Path:
    spec = importlib.util.find_spec(PACKAGE)  # finds the folder without running it
    assert spec is not None and spec.submodule_search_locations
    return Path(next(iter(spec.submodule_search_locations)))


def _report(cycles: list[list[str]], edges: list[Import], root: Path) -> str:
    """Each cycle, then the file and line of each of its imports."""
    where = {(e.source, e.target): e for e in edges}
    lines = []
    for cycle in cycles:
        lines.append(" -> ".join(cycle))
        for a, b in itertools.pairwise(cycle):
            edge = where[(a, b)]
            lines.append(f"    {edge.path.relative_to(root.parent)}:{edge.line} ({a} -> {b})")
    return "\n".join(lines)


def _assert_no_cycle(modules: Mapping[str, Path], edges: list[Import], root: Path) -> None:
    graph: dict[str, set[str]] = {module: set() for module in modules}
    for edge in edges:
        graph[edge.source].add(edge.target)
    cycles = find_cycles(graph)
    assert not cycles, "import cycles (module -> module, with the import's line):\n" + _report(
        cycles, edges, root
    )


def test_synapse_retriever_has_no_import_cycle() -> None:
    root = _package_root()
    modules = discover(root, PACKAGE)
    edges = import_graph(modules)
    assert len(modules) > 10 and len(edges) > 10  # the walk found the package
    _assert_no_cycle(modules, edges, root)


def test_the_cli_modules_make_no_cycle_even_through_imports_in_functions() -> None:
    """Each command module registers its own commands and imports what it shares from
    ``_common`` and ``reports``: no two CLI modules import each other, not even lazily (as
    ``store_commands`` and ``mcp_server`` once did)."""
    root = _package_root()
    cli = f"{PACKAGE}.cli"
    modules = {
        name: path
        for name, path in discover(root, PACKAGE).items()
        if name == cli or name.startswith(f"{cli}.")
    }
    edges = import_graph(modules, lazy=True)
    assert len(modules) > 5 and (f"{cli}.mcp_command", f"{cli}.mcp_server") in {
        (e.source, e.target) for e in edges
    }  # the walk found the CLI, and the import inside cmd_mcp
    _assert_no_cycle(modules, edges, root)


def test_find_cycles_on_a_hand_made_graph() -> None:
    graph = {
        "a": {"b"},
        "b": {"c", "e"},
        "c": {"a", "d"},  # a -> b -> c -> a
        "d": set(),
        "e": {"f"},
        "f": {"e"},  # e <-> f
        "g": {"g"},  # imports itself
        "h": {"a", "d"},  # reaches the cycle, is not on it
    }
    assert find_cycles(graph) == [["a", "b", "c", "a"], ["e", "f", "e"], ["g", "g"]]
    # the shortest way back is reported: a -> b -> a, not a -> b -> c -> a
    assert find_cycles({**graph, "b": {"a", "c"}})[0] == ["a", "b", "a"]
    assert find_cycles({"a": {"b", "c"}, "b": {"c"}, "c": set()}) == []  # a diamond, no cycle


def _write(root: Path, files: Mapping[str, str]) -> None:
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")


def test_the_graph_counts_load_time_imports_only(tmp_path: Path) -> None:
    _write(
        tmp_path / "pkg",
        {
            "__init__.py": "from pkg.store import Store\n",
            "store.py": (
                "from typing import TYPE_CHECKING\n"
                "from . import config\n"  # a submodule, through the half-loaded parent
                "from .recall.rule import plan\n"  # runs recall/__init__ first
                "if TYPE_CHECKING:\n"
                "    from pkg.cli import main\n"  # never runs
                "else:\n"
                "    import pkg.errors\n"  # runs
                "class Store:\n"
                "    from pkg.clock import now\n"  # a class body runs at load time
                "    def lazy(self):\n"
                "        from pkg.cli import main\n"  # runs when called
            ),
            "config.py": "",
            "errors.py": "",
            "clock.py": "",
            "cli.py": "import pkg\nfrom pkg import store\n",
            "recall/__init__.py": "",
            "recall/rule.py": (
                "from ..config import *\n"  # relative, two levels up
                "try:\n"
                "    import pkg.clock\n"
                "except ImportError:\n"
                "    pass\n"
            ),
        },
    )
    edges = import_graph(discover(tmp_path / "pkg", "pkg"))
    assert sorted((e.source, e.target) for e in edges) == [
        ("pkg", "pkg.store"),
        ("pkg.cli", "pkg.store"),
        ("pkg.recall.rule", "pkg.clock"),
        ("pkg.recall.rule", "pkg.config"),
        ("pkg.store", "pkg.clock"),
        ("pkg.store", "pkg.config"),
        ("pkg.store", "pkg.errors"),
        ("pkg.store", "pkg.recall"),
        ("pkg.store", "pkg.recall.rule"),
    ]


def test_lazy_counts_the_imports_inside_functions_too(tmp_path: Path) -> None:
    _write(
        tmp_path / "pkg",
        {
            "__init__.py": "",
            "a.py": (
                "from typing import TYPE_CHECKING\n"
                "if TYPE_CHECKING:\n"
                "    from pkg import c\n"  # never runs, lazy or not
                "def run():\n"
                "    from pkg.b import helper\n"  # runs when called
                "    class Inner:\n"
                "        async def go(self):\n"
                "            import pkg.c\n"  # nested: runs when called too
            ),
            "b.py": "def helper():\n    from pkg import a\n",  # a <-> b, in functions only
            "c.py": "",
        },
    )
    modules = discover(tmp_path / "pkg", "pkg")
    assert import_graph(modules) == []
    lazy = sorted((e.source, e.target) for e in import_graph(modules, lazy=True))
    assert lazy == [("pkg.a", "pkg.b"), ("pkg.a", "pkg.c"), ("pkg.b", "pkg.a")]
    graph: dict[str, set[str]] = {}
    for source, target in lazy:
        graph.setdefault(source, set()).add(target)
    assert find_cycles(graph) == [["pkg.a", "pkg.b", "pkg.a"]]


def test_a_name_read_from_a_parent_package_closes_a_cycle(tmp_path: Path) -> None:
    _write(
        tmp_path / "pkg",
        {
            "__init__.py": "from pkg.store import Store\nfrom pkg.hits import Hit\n",
            "store.py": "from pkg import Hit\nclass Store: ...\n",  # not yet defined
            "hits.py": "class Hit: ...\n",
        },
    )
    edges = import_graph(discover(tmp_path / "pkg", "pkg"))
    graph: dict[str, set[str]] = {}
    for edge in edges:
        graph.setdefault(edge.source, set()).add(edge.target)
    assert find_cycles(graph) == [["pkg", "pkg.store", "pkg"]]
