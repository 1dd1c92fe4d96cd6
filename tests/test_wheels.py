"""The three distributions build, and their wheels work without the source tree.

``python -m build`` makes each distribution's sdist, then its wheel from that sdist (once per
test session). The wheels are installed by pip, from that folder and no index, into a fresh
virtual environment whose only other packages are the dependencies the wheels declare, and
theirs, taken from the environment running the tests: nothing is downloaded, and a dependency
a wheel forgot to declare is missing there, as it would be for a user. The READMEs' examples
then run in that environment and print what they say. About 30 s in all; ``-m "not wheels"``
leaves these tests out.
"""

from __future__ import annotations

import email
import importlib.metadata
import json
import os
import subprocess
import sys
import tomllib
import venv
import zipfile
from pathlib import Path
from typing import Any

import pytest
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name
from readme_examples import READMES, ROOT, blocks, out_lines

pytestmark = pytest.mark.wheels

# folder: (distribution, the import package's folder inside the wheel)
DISTRIBUTIONS = {
    ROOT: ("synapse-retriever", "synapse_retriever"),
    ROOT / "integrations" / "langchain": (
        "langchain-synapse-retriever",
        "langchain_synapse_retriever",
    ),
    ROOT / "integrations" / "llama-index": (
        "llama-index-postprocessor-synapse",
        "llama_index/postprocessor/synapse",
    ),
}
NAMES = [name for name, _ in DISTRIBUTIONS.values()]


def built(dist: Path, name: str, suffix: str) -> Path:
    """The one file of ``name`` in ``dist`` that ends with ``suffix`` (.whl or .tar.gz)."""
    (found,) = dist.glob(f"{name.replace('-', '_')}-*{suffix}")
    return found


@pytest.fixture(scope="session")
def dist(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The sdists and wheels of the three distributions, as ``python -m build`` makes them."""
    out = tmp_path_factory.mktemp("dist")
    for folder in DISTRIBUTIONS:
        # --no-isolation: hatchling from the dev requirements, so the build needs no network
        command = [sys.executable, "-m", "build", "--no-isolation", "--outdir", str(out)]
        result = subprocess.run(
            [*command, str(folder)], capture_output=True, text=True, check=False
        )
        assert result.returncode == 0, result.stdout[-4000:] + result.stderr[-4000:]
    return out


def declared(wheel: Path) -> list[Requirement]:
    """The requirements in a wheel's METADATA (extras' included: the closure sorts them out)."""
    with zipfile.ZipFile(wheel) as archive:
        (metadata,) = [n for n in archive.namelist() if n.endswith(".dist-info/METADATA")]
        message = email.message_from_bytes(archive.read(metadata))
    return [Requirement(line) for line in message.get_all("Requires-Dist") or []]


def closure(requirements: list[Requirement]) -> dict[str, importlib.metadata.Distribution]:
    """Every installed distribution that ``requirements`` need, without extras, transitively.

    Each is the one installed here; a requirement its installed version does not satisfy is
    left to pip in the fresh environment, which then refuses the install.
    """
    found: dict[str, importlib.metadata.Distribution] = {}
    todo = [(requirement, "") for requirement in requirements]
    while todo:
        requirement, extra = todo.pop()
        if requirement.marker is not None and not requirement.marker.evaluate({"extra": extra}):
            continue
        name = canonicalize_name(requirement.name)
        if name in NAMES:  # ours come from the wheels
            continue
        distribution = importlib.metadata.distribution(name)
        extras = ["", *sorted(requirement.extras)]
        key = f"{name}[{','.join(extras)}]"
        if key in found:
            continue
        found[key] = distribution
        for line in distribution.requires or []:
            todo.extend((Requirement(line), wanted) for wanted in extras)
    return {key.split("[")[0]: d for key, d in found.items()}


def with_our_extras(requirements: list[Requirement]) -> list[Requirement]:
    """``requirements`` and those of our extras they ask for: an integration needs
    ``synapse-retriever[conversation]``, so the fresh environment needs that extra's faiss-cpu."""
    wanted = {e for r in requirements if canonicalize_name(r.name) in NAMES for e in r.extras}
    extras = [
        Requirement(str(r).split(";")[0])
        for r in requirements
        if r.marker is not None and any(r.marker.evaluate({"extra": e}) for e in wanted)
    ]
    return requirements + extras


def overlay(distributions: dict[str, importlib.metadata.Distribution], folder: Path) -> None:
    """A folder that mirrors exactly the files of ``distributions``, as symbolic links."""
    for distribution in distributions.values():
        for file in distribution.files or []:
            if file.parts[0] == ".." or file.suffix == ".pth":  # scripts; path hooks
                continue
            link = folder / file
            link.parent.mkdir(parents=True, exist_ok=True)
            if not link.exists():
                link.symlink_to(Path(distribution.locate_file(file)).resolve())


def clean_environment() -> dict[str, str]:
    """This process's environment without what would put another environment on the path."""
    env = {k: v for k, v in os.environ.items() if k not in {"PYTHONPATH", "VIRTUAL_ENV"}}
    return {**env, "PYTHONNOUSERSITE": "1", "PYTHONSAFEPATH": "1"}


class Fresh:
    """A fresh virtual environment with the three wheels installed."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.python = path / "bin" / "python"
        (self.site,) = path.glob("lib/python*/site-packages")

    def run(
        self, command: list[str], cwd: Path, stdin: str | None = None
    ) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            command,
            input=stdin,
            cwd=cwd,
            env=clean_environment(),
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )


@pytest.fixture(scope="session")
def fresh(dist: Path, tmp_path_factory: pytest.TempPathFactory) -> Fresh:
    path = tmp_path_factory.mktemp("fresh") / "venv"
    venv.EnvBuilder(with_pip=False, symlinks=True).create(path)
    env = Fresh(path)
    wheels = [built(dist, name, ".whl") for name in NAMES]
    dependencies = tmp_path_factory.mktemp("dependencies")
    overlay(closure(with_our_extras([r for w in wheels for r in declared(w)])), dependencies)
    (env.site / "_dependencies.pth").write_text(f"{dependencies}\n", encoding="utf-8")
    install = [sys.executable, "-m", "pip", "--python", str(env.python), "install"]
    result = env.run(
        [*install, "--no-index", "--find-links", str(dist), "--no-cache-dir", *NAMES],
        cwd=path,
    )
    assert result.returncode == 0, result.stdout[-4000:] + result.stderr[-4000:]
    return env


def test_the_three_distributions_ship_one_license() -> None:
    texts = {(folder / "LICENSE").read_text(encoding="utf-8") for folder in DISTRIBUTIONS}
    assert len(texts) == 1 and next(iter(texts)).startswith("MIT License")


def test_the_releasing_page_names_what_each_pyproject_builds() -> None:
    """The page that records the name check lists every distribution, import and command."""
    page = (ROOT / "docs" / "releasing.md").read_text(encoding="utf-8")
    for folder, (name, package) in DISTRIBUTIONS.items():
        project = tomllib.loads((folder / "pyproject.toml").read_text(encoding="utf-8"))
        assert project["project"]["name"] == name
        for script in project["project"].get("scripts", {}):
            assert f"| `{script}` | command |" in page
        assert f"| `{name}` | distribution" in page
        assert f"`{package.replace('/', '.')}`" in page


def test_each_distribution_builds_one_sdist_and_one_wheel(dist: Path) -> None:
    assert sorted(p.name for p in dist.iterdir()) == sorted(
        built(dist, name, suffix).name for name in NAMES for suffix in (".tar.gz", ".whl")
    )


@pytest.mark.parametrize(("name", "package"), DISTRIBUTIONS.values(), ids=NAMES)
def test_each_wheel_holds_its_typed_package_its_license_and_no_tests(
    dist: Path, name: str, package: str
) -> None:
    wheel = built(dist, name, ".whl")
    info = wheel.name.split("-py3")[0] + ".dist-info/"  # e.g. synapse_retriever-0.1.0.dist-info/
    with zipfile.ZipFile(wheel) as archive:
        files = archive.namelist()
    assert f"{package}/py.typed" in files
    assert f"{info}licenses/LICENSE" in files
    assert [f for f in files if not f.startswith((f"{package}/", info))] == []
    assert [f for f in files if "tests" in f.split("/") or "/test_" in f or "conftest" in f] == []
    assert [f for f in files if f.endswith((".db", ".json", ".ipynb", ".pyc"))] == []


@pytest.mark.parametrize(("name", "package"), DISTRIBUTIONS.values(), ids=NAMES)
def test_each_sdist_holds_its_package_readme_and_license(
    dist: Path, name: str, package: str
) -> None:
    import tarfile

    sdist = built(dist, name, ".tar.gz")
    top = sdist.name.removesuffix(".tar.gz")
    with tarfile.open(sdist) as archive:
        files = {member.name.removeprefix(f"{top}/") for member in archive.getmembers()}
    assert {"pyproject.toml", "README.md", "LICENSE", "PKG-INFO", f"{package}/py.typed"} <= files
    assert [f for f in files if f.startswith(("integrations/", "docs/", "notebooks/"))] == []


def test_the_fresh_environment_imports_the_wheels_and_their_entry_points(
    fresh: Fresh, tmp_path: Path
) -> None:
    """The packages come from the installed wheels, not a source tree, and the frameworks'
    embeddings are adapted through the wheels' entry points, as a user's install finds them."""
    script = """
import importlib.metadata as metadata, json
import synapse_retriever, langchain_synapse_retriever, llama_index.postprocessor.synapse as li
from langchain_core.embeddings import FakeEmbeddings
from llama_index.core.embeddings import MockEmbedding
from synapse_retriever.conversation import as_embedder
names = ["synapse-retriever", "langchain-synapse-retriever", "llama-index-postprocessor-synapse"]
print(json.dumps({
    "files": [m.__file__ for m in (synapse_retriever, langchain_synapse_retriever, li)],
    "editable": [metadata.distribution(n).read_text("direct_url.json") for n in names],
    "versions": [metadata.version(n) for n in names],
    "embedders": [type(as_embedder(e)).__name__
                  for e in (FakeEmbeddings(size=8), MockEmbedding(embed_dim=8))],
}))
"""
    result = fresh.run([str(fresh.python), "-"], cwd=tmp_path, stdin=script)
    assert result.returncode == 0, result.stderr
    found = json.loads(result.stdout)
    site = str(fresh.site.resolve())
    assert all(str(Path(f).resolve()).startswith(site) for f in found["files"]), found
    assert found["editable"] == [None, None, None]  # installed from wheels, not a source tree
    assert found["versions"] == ["0.1.0"] * 3
    assert found["embedders"] == ["LangChainEmbedder", "LlamaIndexEmbedder"]


def test_the_console_script_runs_from_the_wheel(fresh: Fresh, tmp_path: Path) -> None:
    command = fresh.path / "bin" / "synapse-retriever"
    version = fresh.run([str(command), "--version"], cwd=tmp_path)
    assert (version.returncode, version.stdout) == (0, "synapse-retriever 0.1.0\n")
    store = "from synapse_retriever import SynapseStore\nSynapseStore('s.db').reinforce(['a', 'b'])"
    assert fresh.run([str(fresh.python), "-"], cwd=tmp_path, stdin=store).returncode == 0
    stats = fresh.run([str(command), "stats", "s.db", "--json"], cwd=tmp_path)
    assert stats.returncode == 0, stats.stderr
    assert (json.loads(stats.stdout)["nodes"], json.loads(stats.stdout)["edges"]) == (2, 1)


EXAMPLES = [
    pytest.param(readme, number, id=f"{readme.relative_to(ROOT).as_posix()}-block{number}")
    for readme in READMES
    for number, _ in enumerate(blocks(readme))
]

# Runs every README example in the fresh environment, one process for all (each in a new
# folder and namespace, as tests/test_readme.py runs them from the source tree): the lines
# each printed, or its traceback.
RUNNER = """
import contextlib, io, json, os, sys, tempfile, traceback
examples = json.loads(open(sys.argv[1], encoding="utf-8").read())
results = []
for name, code in examples:
    output = io.StringIO()
    with tempfile.TemporaryDirectory() as folder, contextlib.chdir(folder):
        try:
            with contextlib.redirect_stdout(output):
                exec(compile(code, name, "exec"), {"__name__": "__readme__"})
        except BaseException:
            results.append({"error": traceback.format_exc()})
            continue
    results.append({"printed": [line.rstrip() for line in output.getvalue().splitlines()]})
open(sys.argv[2], "w", encoding="utf-8").write(json.dumps(results))
"""


@pytest.fixture(scope="session")
def printed_from_wheels(
    fresh: Fresh, tmp_path_factory: pytest.TempPathFactory
) -> dict[tuple[Path, int], dict[str, Any]]:
    folder = tmp_path_factory.mktemp("examples")
    keys = [(readme, number) for readme in READMES for number, _ in enumerate(blocks(readme))]
    examples = [(f"{readme.name} block {n}", blocks(readme)[n]) for readme, n in keys]
    (folder / "examples.json").write_text(json.dumps(examples), encoding="utf-8")
    command = [str(fresh.python), "-c", RUNNER, "examples.json", "results.json"]
    result = fresh.run(command, cwd=folder)
    assert result.returncode == 0, result.stderr[-4000:]
    results = json.loads((folder / "results.json").read_text(encoding="utf-8"))
    return dict(zip(keys, results, strict=True))


@pytest.mark.parametrize(("readme", "number"), EXAMPLES)
def test_readme_example_prints_what_it_says_from_the_installed_wheels(
    printed_from_wheels: dict[tuple[Path, int], dict[str, Any]], readme: Path, number: int
) -> None:
    result = printed_from_wheels[readme, number]
    assert "error" not in result, result["error"]
    assert result["printed"] == out_lines(blocks(readme)[number])
