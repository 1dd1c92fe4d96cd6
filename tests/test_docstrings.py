"""Every public class and function has a docstring with an example; every public method and
property of a public class has a docstring, and those of the core's two entry points
(`SynapseStore`, `SynapseConfig`) have examples too. The API reference is generated from them.
"""

from __future__ import annotations

import importlib
import inspect

import pytest

PACKAGES = [
    "synapse_retriever",
    "synapse_retriever.conversation",
    "langchain_synapse_retriever",
    "llama_index.postprocessor.synapse",
]
ENTRY_POINTS = {"SynapseStore", "SynapseConfig"}


def _public(package: str) -> list[tuple[str, object]]:
    module = pytest.importorskip(package)
    found = []
    for name in module.__all__:
        obj = getattr(module, name)
        if inspect.isclass(obj) or inspect.isfunction(obj):
            found.append((f"{package}.{name}", obj))
    return found


def _methods(cls: type) -> list[tuple[str, object]]:
    """Public methods and properties defined in the class body itself."""
    found = []
    for name, value in vars(cls).items():
        if name.startswith("_"):
            continue
        function = value.fget if isinstance(value, property) else getattr(value, "__func__", value)
        if inspect.isfunction(function):
            found.append((name, function))
    return found


def _has_example(doc: str | None) -> bool:
    return bool(doc) and ">>>" in doc  # type: ignore[operator]


@pytest.mark.parametrize("package", PACKAGES)
def test_every_public_class_and_function_has_an_example(package: str) -> None:
    importlib.import_module(package.split(".")[0])
    missing = [name for name, obj in _public(package) if not _has_example(obj.__doc__)]
    assert not missing, f"no docstring example (>>>): {missing}"


@pytest.mark.parametrize("package", PACKAGES)
def test_every_public_method_has_a_docstring(package: str) -> None:
    missing = [
        f"{name}.{method}"
        for name, obj in _public(package)
        if inspect.isclass(obj)
        for method, function in _methods(obj)
        if not (function.__doc__ or "").strip()  # type: ignore[attr-defined]
    ]
    assert not missing, f"no docstring: {missing}"


def test_the_core_entry_points_have_an_example_on_every_method() -> None:
    missing = [
        f"{name}.{method}"
        for name, obj in _public("synapse_retriever")
        if name.rsplit(".", 1)[1] in ENTRY_POINTS
        for method, function in _methods(obj)  # type: ignore[arg-type]
        if not _has_example(function.__doc__)  # type: ignore[attr-defined]
    ]
    assert not missing, f"no docstring example (>>>): {missing}"
