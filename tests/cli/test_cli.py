"""The ``synapse-retriever`` command end to end: every command on a generated git repository,
and the one-line errors (exit code 2) for bad paths and bad files."""

from __future__ import annotations

import argparse
import errno
import json
import math
import os
import re
import shutil
import sqlite3
import subprocess
import sys
import threading
import time
import tomllib
from collections.abc import Callable
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit
from xml.etree import ElementTree

import pytest
from git_history import BASE, DAY, commit, git, init, make_project
from store_backends import MALFORMED_URLS

from synapse_retriever import SynapseStore
from synapse_retriever.cli import (
    bench_commands,
    build_parser,
    histogram,
    main,
    mcp_command,
    store_commands,
    watch_command,
)
from synapse_retriever.clock import iso
from synapse_retriever.persistence.transfer import export_edges

JWT, KEYS = "src/auth/jwt.py", "src/auth/keys.py"
NEAR = str(BASE + 30 * DAY)  # a week after the last commit
FAR = "2030-01-01"


@pytest.fixture(scope="module")
def project(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return make_project(tmp_path_factory.mktemp("cli") / "project", cycles=3)


@pytest.fixture
def store(project: Path, tmp_path: Path) -> Path:
    path = tmp_path / "synapses.db"
    assert main(["bootstrap", str(path), "--git", str(project), "--quiet"]) == 0
    return path


def run(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    code = main(list(args))
    out, err = capsys.readouterr()
    return code, out, err


def test_bootstrap_reports_and_resumes(
    project: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = str(tmp_path / "s.db")
    code, out, err = run(capsys, "bootstrap", path, "--git", str(project))
    assert code == 0 and err == ""
    assert "27 non-merge commits read, 9 touch 2 to 32 files" in out
    assert "replayed 9 into 'shared' (9 edge upserts); 0 were already replayed" in out
    code, out, _ = run(capsys, "bootstrap", path, "--git", str(project), "--json")
    assert code == 0
    assert json.loads(out) | {"first": None, "last": None} == {
        "commits": 27,
        "eligible": 9,
        "replayed": 0,
        "already_seen": 9,
        "clamped": 0,
        "ahead_of_clock": 0,
        "renamed": 0,
        "edges_written": 0,
        "first": None,
        "last": None,
        "namespace": "shared",
    }


def test_bootstrap_says_how_many_renamed_files_took_their_edges_along(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    repo = init(tmp_path / "repo")
    commit(repo, "pair", {"jwt.py": "J = 1\n", "keys.py": "K = 1\n"}, at=BASE)
    git(repo, "mv", "jwt.py", "auth.py")
    commit(repo, "move", {"keys.py": "K = 2\n"}, at=BASE + DAY)
    path = str(tmp_path / "s.db")
    code, out, _ = run(capsys, "bootstrap", path, "--git", str(repo))
    assert code == 0 and "1 file renamed in the history took their edges along" in out
    with SynapseStore(path) as s:
        edge = s.edge("auth.py", "keys.py", "shared")
        assert edge is not None and edge.activation_count == 2
    code, out, _ = run(capsys, "bootstrap", path, "--git", str(repo), "--json")
    assert code == 0 and json.loads(out)["renamed"] == 0  # moved by the first run


def test_bootstrap_since_and_namespace(
    project: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = str(tmp_path / "s.db")
    since = "2023-12-06"  # day 21.07 after BASE: the last two cycles (days 22 to 26)
    args = ["bootstrap", path, "--git", str(project), "--since", since, "--namespace", "personal"]
    code, out, _ = run(capsys, *args, "--json")
    assert code == 0 and json.loads(out)["replayed"] == 5
    with SynapseStore(path) as s:
        assert s.edge(JWT, KEYS, "personal") is not None
        assert s.edge(JWT, KEYS, "shared") is None


def test_bootstrap_learns_a_history_once_per_namespace(
    project: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = str(tmp_path / "s.db")
    for namespace, replayed in (("shared", 9), ("personal", 9), ("personal", 0)):
        args = ["bootstrap", path, "--git", str(project), "--namespace", namespace, "--json"]
        code, out, _ = run(capsys, *args)
        assert code == 0 and json.loads(out)["replayed"] == replayed, namespace
    with SynapseStore(path) as s:
        mine, theirs = s.edge(JWT, KEYS, "personal"), s.edge(JWT, KEYS, "shared")
        assert mine is not None and theirs is not None
        assert mine.activation_count == theirs.activation_count == 3


def test_bootstrap_takes_32_files_not_33_and_any_file_name(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    repo = init(tmp_path / "repo")
    commit(repo, "add 33", {f"f{i:02d}.py": "x" for i in range(33)}, at=BASE)
    commit(repo, "touch 32", {f"f{i:02d}.py": "y" for i in range(32)}, at=BASE + DAY)
    # not UTF-8: no node id can name it (watch leaves it out too); it was stored as a
    # "bad\\xffname.txt" that named no file, beside the real ones
    odd = os.fsdecode(b"bad\xffname.txt")
    commit(repo, "odd name", {odd: "z", "f00.py": "w", "f01.py": "w"}, at=BASE + 2 * DAY)
    path = str(tmp_path / "s.db")
    code, out, _ = run(capsys, "bootstrap", path, "--git", str(repo), "--json")
    report = json.loads(out)
    assert code == 0
    # 33 files: no event; 32 files: 32 × 31 / 2 = 496 pairs; then f00.py and f01.py: 1
    assert (report["eligible"], report["replayed"], report["edges_written"]) == (2, 2, 497)
    with SynapseStore(path) as s:
        edge = s.edge("f00.py", "f01.py", "shared")
        assert edge is not None and edge.activation_count == 2
        assert not [n for n in s.graph().nodes if "bad" in n]
        assert s.edge("f00.py", "f31.py", "shared") is not None
        assert s.edge("f00.py", "f32.py", "shared") is None


def test_stats(store: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "stats", str(store), "--at", NEAR, "--json")
    assert code == 0
    stats = json.loads(out)
    assert (stats["nodes"], stats["edges"]) == (6, 3)
    assert list(stats["namespaces"]) == ["shared"]
    assert stats["namespaces"]["shared"]["edges"] == 3
    assert sum(b["edges"] for b in stats["weight_histogram"]) == 3
    assert sum(b["edges"] for b in stats["half_life_histogram_days"]) == 3
    code, out, _ = run(capsys, "stats", str(store), "--at", NEAR)
    assert code == 0
    assert "6 nodes, 3 live edges" in out and "half-life (days)" in out and "shared" in out
    code, out, _ = run(capsys, "stats", str(store), "--at", FAR)
    assert code == 0 and "0 live edges" in out and "no live edges" in out


def test_store_stats_in_python_is_what_stats_json_prints(
    store: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    for extra in ([], ["--namespace", "shared"], ["--namespace", "personal"]):
        code, out, _ = run(capsys, "stats", str(store), "--at", NEAR, "--json", *extra)
        assert code == 0
        with SynapseStore(store) as opened:
            namespace = extra[1] if extra else None
            assert opened.stats(int(NEAR), namespace) == json.loads(out)  # labelled by path


def test_rename_moves_a_node_and_refuses_a_merge(
    store: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    moved = "src/security/jwt.py"
    code, out, _ = run(capsys, "rename", str(store), JWT, moved)
    assert (code, out.split()) == (0, [JWT, "->", f"{moved}:", "1", "edge", "moved,", "with",
                                       "its", "uses"])  # fmt: skip
    code, out, err = run(capsys, "rename", str(store), "src/auht/jwt.py", "x.py")  # a typo
    assert code == 0, err
    assert "no edge moved: 'src/auht/jwt.py' has no stored edge (check its spelling" in out
    code, out, _ = run(capsys, "edges", str(store), moved, "--at", NEAR, "--json")
    assert [n["neighbour"] for n in json.loads(out)["neighbours"]] == [KEYS]
    code, _, err = run(capsys, "rename", str(store), moved, KEYS)
    assert (
        code == 2 and err.startswith("synapse-retriever: error: cannot rename") and "merge" in err
    )
    assert run(capsys, "rename", str(store.parent / "none.db"), "a", "b")[0] == 2


def test_ids_with_brackets_print_as_they_are(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "synapses.db"
    with SynapseStore(path) as opened:
        opened.reinforce(["pages/[id].tsx", "lib/[bold]api.ts"], at=BASE)
    code, out, _ = run(capsys, "edges", str(path), "pages/[id].tsx", "--at", str(BASE))
    assert code == 0 and "pages/[id].tsx" in out and "lib/[bold]api.ts" in out
    code, out, _ = run(capsys, "rename", str(path), "pages/[id].tsx", "pages/[slug].tsx")
    assert out.startswith("pages/[id].tsx -> pages/[slug].tsx: 1 edge moved")


def test_ids_with_control_characters_never_reach_the_terminal_raw(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # a file named "x<ESC>]0;title<BEL>.py" in a git history (valid UTF-8, so a node id):
    # `edges` and `rename` wrote its escape sequences to the terminal as they were
    title, clear, csi = "x\x1b]0;PWNED\x07.py", "y\x1b[2J\x1b[H.py", "z\x9b31m\u202e.py"
    path = tmp_path / "synapses.db"
    with SynapseStore(path) as opened:
        opened.reinforce(["main.py", title, clear, csi], at=BASE)
        opened.reinforce([title, "w.py"], at=BASE)
    printed = []
    for args in (
        ["edges", str(path), "main.py", "--at", str(BASE)],
        ["edges", str(path), clear, "--at", str(BASE)],
        ["edges", str(path), "\x1b[2Jnowhere.py"],
        ["rename", str(path), title, "t\x1b[31m.py"],
        ["rename", str(path), "\x1b[2Jgone.py", "u.py"],
        ["rename", str(path), "w.py", clear],  # refused: one error line
    ):
        code, out, err = run(capsys, *args)
        assert code in (0, 2) and (err == "") == (code == 0), err
        printed.append(out + err)
    text = "".join(printed)
    assert not re.search("[\x00-\x09\x0b-\x1f\x7f-\x9f\u202e]", text), ascii(text)
    assert "x\\x1b]0;PWNED\\x07.py" in printed[0] and "z\\x9b31m\\u202e.py" in printed[0]
    assert printed[1].startswith("y\\x1b[2J\\x1b[H.py at ")
    assert printed[3].startswith("x\\x1b]0;PWNED\\x07.py -> t\\x1b[31m.py: 4 edges moved")
    code, out, _ = run(capsys, "edges", str(path), "main.py", "--at", str(BASE), "--json")
    assert clear in [n["neighbour"] for n in json.loads(out)["neighbours"]]  # JSON: exact


def test_edges(store: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "edges", str(store), JWT, "--at", NEAR, "--json")
    assert code == 0
    data = json.loads(out)
    assert [n["neighbour"] for n in data["neighbours"]] == [KEYS]
    neighbour = data["neighbours"][0]
    assert (neighbour["namespace"], neighbour["count"]) == ("shared", 3)
    assert neighbour["last_reinforced_at"] == "2023-12-08T22:13:20Z"  # day 24
    assert 0.0 < neighbour["weight"] < neighbour["stored_weight"] <= 1.0
    code, out, _ = run(capsys, "edges", str(store), JWT, "--at", NEAR, "--namespace", "shared")
    assert code == 0 and KEYS in out and "1 live edge " in out + " "
    code, out, _ = run(capsys, "edges", str(store), "nowhere.py")
    assert code == 0 and "'nowhere.py' has no live edges" in out


def test_decay(store: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "decay", str(store), "--at", NEAR)
    assert code == 0 and out.startswith("pruned 0 edges, 3 remain")
    code, out, _ = run(capsys, "decay", str(store), "--at", FAR, "--json", "--force")
    assert code == 0
    assert json.loads(out) | {"at": None} == {
        "at": None,
        "pruned": 3,
        "remaining": 0,
        "pruned_by_namespace": {"shared": 3},
        "dry_run": False,
        "event_ids": 0,  # kept for good without --forget-event-ids
    }


def test_decay_forgets_the_event_ids_recorded_before_its_window(
    store: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # bootstrap recorded one id per commit, today: the commits' own times are years ago
    with SynapseStore(store) as opened:
        commits = opened._storage.event_ids_before(math.inf)
    assert commits > 0
    code, out, _ = run(capsys, "decay", str(store), "--forget-event-ids", "30", "--dry-run")
    assert code == 0 and " and forget 0 event ids at " in out  # recorded today: kept
    later = iso(time.time() + 31 * DAY)
    code, out, _ = run(
        capsys, "decay", str(store), "--at", later, "--force", "--forget-event-ids", "30"
    )
    assert code == 0 and f", forgot {commits} event ids (at " in out
    with SynapseStore(store) as opened:
        assert opened._storage.event_ids_before(math.inf) == 0
    for bad in ("nan", "0", "-1", "inf", "30d"):
        with pytest.raises(SystemExit) as stopped:
            main(["decay", str(store), "--forget-event-ids", bad])
        err = capsys.readouterr().err
        assert stopped.value.code == 2 and "--forget-event-ids: " in err and repr(bad) in err


def test_a_sweep_after_now_deletes_nothing_without_force(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "live.db"
    with SynapseStore(path) as live:  # learned today: live today, dead by 2100
        live.reinforce([JWT, KEYS], namespace="shared")
        live.reinforce([JWT, "docs/tokens.md"])
    code, _, err = run(capsys, "decay", str(path), "--at", "2100-01-01")
    assert code == 2 and len(err.splitlines()) == 1
    assert "would delete 2 edges that are live now" in err and "--force" in err
    code, out, _ = run(capsys, "decay", str(path), "--at", "2100-01-01", "--dry-run")
    assert code == 0
    assert out.startswith("would prune 2 of 2 edges (personal 1, shared 1) at 2100-01-01")
    assert "nothing was deleted (dry run)" in out
    code, out, _ = run(capsys, "decay", str(path), "--at", "2100-01-01", "--dry-run", "--json")
    assert json.loads(out)["pruned_by_namespace"] == {"personal": 1, "shared": 1}
    with SynapseStore(path) as after:
        assert after.edge(JWT, KEYS, "shared") is not None  # nothing deleted
        assert after.edge(JWT, "docs/tokens.md") is not None
    code, out, _ = run(capsys, "decay", str(path), "--at", "2100-01-01", "--force")
    assert code == 0 and out.startswith("pruned 2 edges (personal 1, shared 1), 0 remain")


@pytest.mark.parametrize("suffix", [".json", ".graphml"])
def test_export_then_import_round_trips_and_merges(
    store: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], suffix: str
) -> None:
    exported = tmp_path / f"edges{suffix}"
    code, out, _ = run(capsys, "export", str(store), str(exported), "--at", NEAR)
    assert code == 0 and "exported 3 live edges" in out
    copy = tmp_path / "copy.db"
    code, out, _ = run(capsys, "import", str(copy), str(exported))
    assert code == 0 and "3 inserted, 0 replaced by newer ones, 0 kept" in out
    with SynapseStore(store) as original, SynapseStore(copy) as imported:
        assert imported.edge(JWT, KEYS, "shared") == original.edge(JWT, KEYS, "shared")
    code, out, _ = run(capsys, "import", str(copy), str(exported), "--json")
    assert code == 0 and json.loads(out) == {"inserted": 0, "replaced": 0, "kept": 3}


def test_a_namespace_moves_between_backends_without_loss(
    tmp_path: Path, postgres_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    local = tmp_path / "local.db"
    with SynapseStore(local) as s:
        s.reinforce([JWT, KEYS, "README.md"], namespace="shared", at=BASE)
        s.reinforce([JWT, KEYS], strength=2, namespace="shared", at=BASE + DAY)
        s.reinforce([JWT, "notes.md"], namespace="personal", at=BASE)
        shared = export_edges(s, at=BASE + DAY, namespaces=["shared"])
    out_file = tmp_path / "shared.json"
    code, out, _ = run(capsys, "export", str(local), str(out_file), "--namespace", "shared",
                       "--at", NEAR)  # fmt: skip
    assert code == 0 and "exported 3 live edges" in out
    code, out, _ = run(capsys, "import", postgres_url, str(out_file), "--json")
    assert code == 0 and json.loads(out) == {"inserted": 3, "replaced": 0, "kept": 0}
    back = tmp_path / "back.json"
    code, _, _ = run(capsys, "export", postgres_url, str(back), "--at", NEAR)
    assert code == 0
    copy = tmp_path / "copy.db"
    assert run(capsys, "import", str(copy), str(back))[0] == 0
    with SynapseStore(postgres_url) as team, SynapseStore(copy) as again:
        assert export_edges(team, at=BASE + DAY) == shared  # every field, exactly
        assert export_edges(again, at=BASE + DAY) == shared
        assert team.edge(JWT, "notes.md", "personal") is None  # only the namespace moved


def test_a_reading_command_on_an_empty_database_creates_nothing(
    postgres_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    import psycopg

    code, out, err = run(capsys, "stats", postgres_url)
    assert code == 2 and out == ""
    _one_error_line(err, "holds no synapse store", "left untouched")
    assert "create=False" not in err  # the API's words, said to a command line's user
    with psycopg.connect(postgres_url) as conn:
        tables = conn.execute("SELECT count(*) FROM pg_tables WHERE schemaname = current_schema()")
        assert tables.fetchone() == (0,)


def test_no_command_prints_a_postgresql_password(
    postgres_url: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    parts = urlsplit(postgres_url)  # a server that trusts the role ignores the password
    url = urlunsplit(
        parts._replace(netloc=f"{parts.username}:s3cret@{parts.hostname}:{parts.port}")
    )
    with SynapseStore(url) as team:
        team.reinforce(["jwt", "keys"], at=0)
    queries = tmp_path / "q.jsonl"
    line = {"at": 0, "hits": [["jwt", 0.9], ["README.md", 0.4]], "relevant": ["keys"]}
    queries.write_text(json.dumps(line) + "\n")
    for command in (
        ["stats", url],
        ["stats", url, "--json"],
        ["bench", "quality", "--queries", str(queries), "--store", url, "--json", "-"],
    ):
        code, out, err = run(capsys, *command)
        assert code == 0 and "s3cret" not in out + err, (command, err)
        assert f"{parts.hostname}:{parts.port}" in out, command
    # refused, and said without the password: URLs of other schemes, a URL where a file is
    other = url.replace("postgresql://", "postgresql+psycopg://", 1)
    mysql = url.replace("postgresql://", "mysql://", 1)
    exported = tmp_path / "edges.json"
    assert run(capsys, "export", url, str(exported))[0] == 0
    for command in (
        ["stats", other],
        ["stats", mysql],
        ["stats", f"jdbc:{url}"],
        ["import", mysql, str(exported)],
        ["bench", "quality", "--git", str(tmp_path), "--store", url],
        ["bench", "quality", "--git", str(tmp_path), "--store", other],
        ["bench", "quality", "--queries", str(queries), "--store", mysql],
    ):
        code, out, err = run(capsys, *command)
        assert code == 2 and "s3cret" not in out + err, (command, err)


def test_import_never_overwrites_a_newer_edge(
    store: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    exported = tmp_path / "edges.json"
    assert run(capsys, "export", str(store), str(exported), "--at", NEAR)[0] == 0
    with SynapseStore(store) as s:  # the store keeps learning after the export
        s.reinforce([JWT, KEYS], namespace="shared", at=BASE + 29 * DAY)
        newer = s.edge(JWT, KEYS, "shared")
    code, out, _ = run(capsys, "import", str(store), str(exported), "--json")
    assert code == 0 and json.loads(out) == {"inserted": 0, "replaced": 0, "kept": 3}
    with SynapseStore(store) as s:
        assert s.edge(JWT, KEYS, "shared") == newer


def test_bench_quality(project: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    report = tmp_path / "report.json"
    learned = tmp_path / "learned.db"
    code, out, err = run(
        capsys,
        "bench",
        "quality",
        "--git",
        str(project),
        "--json",
        str(report),
        "--store",
        str(learned),
        "--quiet",
    )
    assert code == 0
    data = json.loads(report.read_text())
    config = data["settings"]["config"]  # without --preset: the default, the ACT-R rule
    assert (config["rule"], config["seeds"], config["max_inject"]) == ("actr", 1, 2)
    # 3 cycles: 27 events, 21 teach, the last 6 feature commits test
    assert (data["commits"]["teach"], data["commits"]["queries"]) == (21, 6)
    online = data["variants"]["online"]["by_k"]["10"]["rows"]
    assert online["vector"]["recall"] == 0.5 and online["synapse-published"]["recall"] == 1.0
    assert "synapse-published +50.0" in out and "frozen k=10: synapse" in out
    assert "report written to" in err
    assert "oracle-reachable" in out
    # the frozen graph was kept for inspection
    with SynapseStore(learned) as s:
        edge = s.edge(JWT, KEYS, "shared")
        assert edge is not None and edge.activation_count == 1  # the one teaching auth commit
    code, out, _ = run(
        capsys,
        "bench",
        "quality",
        "--git",
        str(project),
        "--markdown",
        "--quiet",
        "--variant",
        "online",
        "--k",
        "5",
        "--rows",
        "synapse",
        "recency",
        "--preset",
        "published",
        "--set",
        "max_inject=1",
        "--retriever",
        "bm25",
    )
    assert code == 0
    assert "| synapse | 100.0 | +50.0 [+50.0, +50.0] |" in out
    assert "| recency | 50.0 |" in out and "frozen" not in out


def test_bench_quality_json_to_stdout(project: Path, capsys: pytest.CaptureFixture[str]) -> None:
    args = ["bench", "quality", "--git", str(project), "--json", "-", "--quiet"]
    code, out, _ = run(capsys, *args, "--variant", "frozen", "--k", "5", "--rows", "oracle")
    assert code == 0
    assert list(json.loads(out)["variants"]["frozen"]["by_k"]["5"]["rows"]) == ["vector", "oracle"]


def test_bench_quality_over_your_own_queries(
    store: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # the bootstrapped store (namespace shared) knows jwt.py and keys.py change together
    queries = tmp_path / "queries.jsonl"
    lines = [
        {"query": "token expiry", "hits": [[JWT, 0.9], ["README.md", 0.4]],
         "relevant": [JWT, KEYS], "at": int(NEAR)},
        {"hits": [JWT, "README.md"], "relevant": [KEYS, "README.md"],
         "at": int(NEAR) + DAY, "used": ["README.md", KEYS]},
        {"hits": ["README.md", "docs/x.md"], "relevant": [KEYS], "at": int(NEAR) + 2 * DAY},
    ]  # fmt: skip
    queries.write_text("\n".join(json.dumps(line) for line in lines) + "\n\n")
    before = store.read_bytes()
    args = ["bench", "quality", "--queries", str(queries), "--store", str(store), "--k", "2"]
    code, out, _ = run(capsys, *args, "--namespace", "shared", "--json", "-")
    assert code == 0
    report = json.loads(out)
    rows = report["variants"]["online"]["by_k"]["2"]["rows"]  # a line has used ids: online
    # vector: 1/2, 1/2, 0; the store swaps keys.py in for README.md in the first two
    # (recall 1 and 1/2), and after the second query learns README.md with keys.py, keys.py
    # comes in with the third's README.md hit (recall 1)
    assert rows["vector"]["per_query_recall"] == [0.5, 0.5, 0.0]
    assert rows["synapse"]["per_query_recall"] == [1.0, 0.5, 1.0]
    assert (rows["synapse"]["injected"], rows["synapse"]["injected_precision"]) == (3, 1.0)
    # the second query's displaced README.md was relevant: 1 of 3 displaced
    assert rows["synapse"]["displaced_relevant"] == pytest.approx(1 / 3)
    assert report["variants"]["online"]["queries"] == ["token expiry", "", ""]
    assert store.read_bytes() == before  # learned into a copy: the store is untouched
    pipe = tmp_path / "queries.fifo"  # what `--queries <(...)` gives: read as a file is
    os.mkfifo(pipe)
    writer = threading.Thread(target=lambda: pipe.write_text(queries.read_text()), daemon=True)
    writer.start()
    piped = ["--queries", str(pipe), *args[4:], "--namespace", "shared", "--json", "-"]
    code, out, _ = run(capsys, "bench", "quality", *piped)
    if writer.is_alive():  # the command did not read it: free the writer
        pipe.read_text()
    writer.join()
    assert code == 0 and json.loads(out)["variants"]["online"]["by_k"]["2"]["rows"] == rows
    code, out, _ = run(capsys, *args, "--namespace", "shared", "--markdown")
    assert code == 0 and "| synapse | 83.3 |" in out
    code, out, _ = run(capsys, *args, "--namespace", "shared")
    assert code == 0 and "3 queries from" in out


def test_bench_quality_scores_old_queries_over_a_store_that_learned_since(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # the docs' example: the store learned jwt.py with keys.py today, the queries are older
    path = tmp_path / "synapses.db"
    with SynapseStore(path) as learned:
        learned.reinforce(["auth/jwt.py", "config/keys.py"])
    before = path.read_bytes()
    queries = tmp_path / "queries.jsonl"
    line = {"hits": [["auth/jwt.py", 0.82], ["auth/login.py", 0.71], ["docs/faq.md", 0.64]],
            "relevant": ["auth/jwt.py", "config/keys.py"], "at": "2026-11-02T10:00:00Z",
            "used": ["auth/jwt.py", "config/keys.py"]}  # fmt: skip
    queries.write_text(json.dumps(line) + "\n")
    args = ["bench", "quality", "--queries", str(queries), "--store", str(path), "--k", "3"]
    code, out, err = run(capsys, *args, "--json", "-")
    assert code == 0, err
    rows = json.loads(out)["variants"]["online"]["by_k"]["3"]["rows"]
    assert rows["vector"]["per_query_recall"] == [0.5]  # scored, then learned at its time
    assert path.read_bytes() == before
    older = {**line, "at": "2026-10-01T10:00:00Z"}  # the file itself out of order: refused
    queries.write_text(json.dumps(line) + "\n" + json.dumps(older) + "\n")
    code, _, err = run(capsys, *args, "--quiet")
    assert code == 2
    _one_error_line(err, "query 2: at ", "give the queries in time order")


def test_bench_quality_over_your_own_queries_refuses_bad_input(
    store: Path, project: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    queries = tmp_path / "queries.jsonl"
    queries.write_text('{"hits": ["a", "b"], "relevant": ["b"]}\n{"hits": [["a", "high"]]}\n')
    base = ["bench", "quality", "--queries", str(queries)]
    cases = [
        (base, "needs --store"),
        ([*base, "--store", str(store)], "line 2: a hit must be an id or [id, finite score]"),
        ([*base, "--store", str(tmp_path / "none.db")], "line 2"),
        (["bench", "quality", "--queries", str(tmp_path / "none.jsonl"), "--store", str(store)],
         "none.jsonl"),
    ]  # fmt: skip
    queries_ok = tmp_path / "ok.jsonl"
    queries_ok.write_text('{"hits": ["a", "b"], "relevant": ["b"]}\n')
    ok = ["bench", "quality", "--queries", str(queries_ok)]
    cases += [
        ([*ok, "--store", str(store), "--rows", "oracle"], "--rows apply to --git"),
        ([*ok, "--store", str(tmp_path / "none.db")], "none.db': no such file"),
        ([*ok, "--store", str(queries_ok)], "not a store file"),
        (["bench", "quality", "--git", str(project), str(project), "--store", "x.db"],
         "--store takes one repository"),
        (["bench", "quality", "--git", str(project), str(project), "--name", "a"],
         "--name takes one label per --git repository: 1 for 2"),
        ([*ok, "--store", str(store), "--name", "a", "b"], "--queries takes one --name, got 2"),
    ]  # fmt: skip
    # a report never overwrites what the command reads, nor any database
    other = tmp_path / "other.db"
    shutil.copy(store, other)
    cases += [
        ([*ok, "--store", str(store), "--json", str(store)], "which this command reads"),
        ([*ok, "--store", str(store), "--json", str(tmp_path / "." / "ok.jsonl")],
         "which this command reads"),
        ([*ok, "--store", str(store), "--json", str(other)], "it is a synapse store"),
    ]  # fmt: skip
    untouched = {path: path.read_bytes() for path in (store, queries_ok, other)}
    for args, fragment in cases:
        code, _, err = run(capsys, *args, "--quiet")
        assert code == 2, args
        _one_error_line(err, fragment)
    assert {path: path.read_bytes() for path in untouched} == untouched


def test_bench_quality_never_writes_over_the_history_or_its_store_nor_reads_a_device(
    project: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # --json into the repository's .git was written (git then found no repository); a new
    # --store and --json naming one new file wrote the report over the learned store
    head = project / ".git" / "HEAD"
    kept = head.read_bytes()
    new = tmp_path / "new.db"
    link = tmp_path / "link.db"
    link.symlink_to(new)
    quality = ["bench", "quality", "--git", str(project)]
    for args, fragment in [
        ([*quality, "--json", str(head)], f"{str(project / '.git')!r}, or in it, which this"),
        ([*quality, "--store", str(new), "--json", str(tmp_path / "." / "new.db")], "new.db'"),
        ([*quality, "--store", str(new), "--json", str(link)], "which this command reads"),
        (["bench", "quality", "--queries", "/dev/zero", "--store", str(new)],
         "cannot read '/dev/zero': it is a device, not a regular file"),
        (["bench", "macro", "/dev/zero"], "it is a device, not a regular file"),
        (["bench", "quality", "--plot", str(tmp_path / "g.svg"), "/dev/zero"], "a device"),
    ]:  # fmt: skip
        code, _, err = run(capsys, *args, *(["--quiet"] if args[1] == "quality" else []))
        assert code == 2, args
        _one_error_line(err, fragment)
    assert head.read_bytes() == kept and not new.exists()
    report = project / "report.json"  # beside the history, not in it: written
    assert run(capsys, *quality, "--json", str(report), "--quiet", "--k", "10")[0] == 0
    assert json.loads(report.read_text())["name"] == "project"


def test_bench_quality_on_two_histories(
    project: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    other = make_project(tmp_path / "other", cycles=3, start=BASE + DAY // 2)
    args = ["bench", "quality", "--git", str(project), str(other), "--json", "-", "--quiet"]
    code, out, _ = run(capsys, *args, "--rows", "synapse", "--k", "10")
    assert code == 0
    report = json.loads(out)
    assert report["projects"] == ["project", "other"]
    synapse = report["variants"]["online"]["by_k"]["10"]["rows"]["synapse"]
    assert synapse["off_topic"] == 0.0 and synapse["queries_off_topic"] == 0.0
    code, out, _ = run(capsys, *args, "--rows", "recency", "--k", "10")
    recency = json.loads(out)["variants"]["online"]["by_k"]["10"]["rows"]["recency"]
    assert code == 0 and recency["queries_off_topic"] == 1.0  # the other's latest files


def test_bench_quality_names_histories_whose_folders_share_a_name(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # bare clones kept as <owner+name>/repo: both folders are named "repo"
    one = make_project(tmp_path / "attrs" / "repo", cycles=3)
    two = make_project(tmp_path / "typer" / "repo", cycles=3, start=BASE + DAY // 2)
    args = ["bench", "quality", "--git", str(one), str(two), "--json", "-", "--quiet"]
    code, _, err = run(capsys, *args, "--rows", "synapse", "--k", "10")
    assert code == 2 and "distinct names" in err
    code, out, _ = run(capsys, *args, "--rows", "synapse", "--k", "10", "--name", "a", "t")
    assert code == 0
    report = json.loads(out)
    assert report["projects"] == ["a", "t"] and report["name"] == "a + t"


def test_bench_macro_averages_reports(
    project: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    paths = []
    for name, retriever in (("one", "tfidf"), ("two", "tfidf"), ("three", "bm25")):
        path = tmp_path / f"{name}.json"
        args = ["--git", str(project), "--json", str(path), "--quiet", "--name", name]
        code, _, _ = run(capsys, "bench", "quality", *args, "--retriever", retriever,
                         "--variant", "online", "--k", "5")  # fmt: skip
        assert code == 0
        paths.append(str(path))
    # a macro over two vector baselines is no one baseline's gain: refused, as the plot's
    code, _, err = run(capsys, "bench", "macro", *paths, "--resamples", "50")
    assert code == 2
    _one_error_line(err, "the reports mix vector baselines (['bm25', 'tfidf']): average one")
    paths.pop()
    code, out, _ = run(capsys, "bench", "macro", *paths, "--resamples", "50")
    assert code == 0
    # the baseline finds one of the two files of each query (recall 50), and the
    # published rule injects the partner in both: +50 points, an interval of one point
    assert "| 5 | vector | 50.0 | 50.0 | 50.0 |" in out
    assert "| 5 | synapse-published | 100.0 | 100.0 | 100.0 |" in out
    code, out, _ = run(capsys, "bench", "macro", *paths, "--row", "synapse-published",
                       "--resamples", "50")  # fmt: skip
    assert "| 5 | vector | +50.0 | +50.0 | +50.0 [+50.0, +50.0] | 0.0% |" in out
    bad = tmp_path / "bad.json"
    for content in ("[1, 2]", json.dumps({"variants": {}})):  # not a report; no name
        bad.write_text(content)
        code, _, err = run(capsys, "bench", "macro", str(bad))
        assert code == 2
        _one_error_line(err, "not a bench quality report")
    other = json.loads(Path(paths[0]).read_text())
    other["variants"]["online"]["by_k"] = {"10": other["variants"]["online"]["by_k"]["5"]}
    bad.write_text(json.dumps(other | {"name": "other"}))
    code, _, err = run(capsys, "bench", "macro", paths[0], str(bad), "--resamples", "5")
    assert code == 2
    _one_error_line(err, "do not share")
    for args, fragment in [
        ([paths[0], paths[0]], "two reports are named 'one'"),
        ([paths[0], "--row", "bogus"], "--row 'bogus' is not a row of"),
    ]:
        code, _, err = run(capsys, "bench", "macro", *args)
        assert code == 2
        _one_error_line(err, fragment)
    for variants in ({}, {"online": {}}, {"online": {"by_k": {"5": []}}}):
        bad.write_text(json.dumps({"name": "x", "variants": variants}))
        code, _, err = run(capsys, "bench", "macro", str(bad))
        assert code == 2
        _one_error_line(err, "not a bench quality report")
    with pytest.raises(SystemExit) as stopped:
        main(["bench", "macro", paths[0], "--resamples", "0"])
    assert stopped.value.code == 2 and "must be at least 1" in capsys.readouterr().err


def test_bench_quality_plots_the_gain_over_each_baseline_from_saved_reports(
    project: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    report = tmp_path / "project.json"
    args = ["--git", str(project), "--json", str(report), "--quiet", "--k", "5", "10"]
    assert run(capsys, "bench", "quality", *args)[0] == 0
    picture = tmp_path / "gain.svg"
    code, out, _ = run(capsys, "bench", "quality", "--plot", str(picture), str(report))
    assert code == 0 and "wrote" in out
    svg = picture.read_text()
    ElementTree.fromstring(svg)  # well-formed XML
    assert svg.lstrip().startswith("<?xml") and "<svg" in svg
    texts = re.findall(r"<!-- (.*?) -->", svg)  # matplotlib names each text it draws
    for label in ("over vector", "over recency", "over co-change", "over actr-prior",
                  "over synapse-published", "frozen", "online", "k = 5", "k = 10",
                  "bench quality: project (tfidf baseline)"):  # fmt: skip
        assert label in texts, label
    assert "Date" not in svg  # reproducible: the same report draws the same bytes
    first = picture.read_bytes()
    assert run(capsys, "bench", "quality", "--plot", str(picture), str(report))[0] == 0
    assert picture.read_bytes() == first
    png = tmp_path / "gain.png"
    assert run(capsys, "bench", "quality", "--plot", str(png), str(report))[0] == 0
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    bm25 = tmp_path / "bm25.json"
    bm25.write_text(report.read_text().replace('"retriever": "tfidf"', '"retriever": "bm25"')
                    .replace('"name": "project"', '"name": "other"'))  # fmt: skip
    blind = tmp_path / "blind.json"
    data = json.loads(report.read_text())
    for variant in data["variants"].values():
        for block in variant["by_k"].values():
            del block["rows"]["synapse"]
    blind.write_text(json.dumps(data))
    for paths, fragment in [
        ([str(picture)], "takes the image's path, then one or more --json reports"),
        ([str(picture), str(report), str(bm25)], "mix vector baselines"),
        ([str(picture), str(blind)], "has no synapse row"),
        ([str(picture), str(tmp_path / "none.json")], "is not a bench quality report"),
        ([str(tmp_path / "no" / "such" / "folder.svg"), str(report)], "folder.svg"),
        ([str(report), str(report)], "which this command reads"),  # the picture over its report
    ]:
        code, _, err = run(capsys, "bench", "quality", "--plot", *paths)
        assert code == 2, paths
        _one_error_line(err, fragment)


@pytest.mark.parametrize(
    ("name", "content", "command", "fragment"),
    [
        ("deep.json", b"[" * 100_000 + b"]" * 100_000, "macro", "nested too deep"),
        ("deep.json", b"[" * 100_000 + b"]" * 100_000, "quality-plot", "nested too deep"),
        ("deep.json", b"[" * 100_000 + b"]" * 100_000, "memory-plot", "nested too deep"),
        ("deep.jsonl", b"[" * 100_000 + b"]" * 100_000, "queries", "line 1: not JSON (nested"),
        ("shape.json", b'{"rows": ["a"], "budgets": [1], "tables": {"x": 5}}', "memory-plot",
         "are not bench memory --json reports"),
        ("shape.json", b'{"rows": "ab", "budgets": [1], "tables": {"all": {"queries": 1}}}',
         "memory-plot", "are not bench memory --json reports"),
        ("big.jsonl", b'{"hits": [["a.py", 1' + b"0" * 400 + b']], "relevant": ["b.py"]}\n',
         "queries", "line 1: a hit must be an id or [id, finite score]"),
        ("latin1.jsonl", b'{"hits": ["caf\xe9.py"], "relevant": ["b.py"]}\n', "queries",
         "latin1.jsonl' is not UTF-8 text (byte 14: 0xe9)"),
        ("latin1.json", b'{"name": "caf\xe9"}', "macro", "is not a bench quality report"),
        ("settings.json", b'{"name": "x", "variants": {"online": {"by_k": {"5": {"rows": '
         b'{"synapse": {}}}}}}, "settings": [1]}', "quality-plot",
         "its 'settings' are [1], not an object"),
        ("settings.json", b'{"name": "x", "variants": {"online": {"by_k": {"5": {"rows": '
         b'{"synapse": {}}}}}}, "settings": "s"}', "macro",
         "its 'settings' are 's', not an object"),
    ],
    ids=["macro-deep", "plot-deep", "memory-plot-deep", "queries-deep", "memory-no-all",
         "memory-rows-a-string", "queries-int-of-401-digits", "queries-latin1", "macro-latin1",
         "plot-settings-a-list", "macro-settings-a-string"],
)  # fmt: skip
def test_bench_report_and_queries_readers_give_one_line_for_a_hostile_file(
    name: str,
    content: bytes,
    command: str,
    fragment: str,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    # RecursionError, KeyError, TypeError, OverflowError and UnicodeDecodeError tracebacks
    path = tmp_path / name
    path.write_bytes(content)
    SynapseStore(tmp_path / "s.db").close()
    picture = tmp_path / "out.svg"
    args = {
        "macro": ["bench", "macro", str(path)],
        "quality-plot": ["bench", "quality", "--plot", str(picture), str(path)],
        "memory-plot": ["bench", "memory", "--plot", str(picture), str(path)],
        "queries": ["bench", "quality", "--queries", str(path), "--store", str(tmp_path / "s.db"),
                    "--quiet"],
    }[command]  # fmt: skip
    code, out, err = run(capsys, *args)
    assert (code, out) == (2, "")
    _one_error_line(err, fragment)
    assert len(err) < 400 and not picture.exists()


def test_an_output_that_is_a_loop_of_links_is_checked_without_a_traceback(
    tmp_path: Path,
) -> None:
    # a folder the command reads and an output that is a loop: Path.resolve() raised
    # RuntimeError (Python 3.11) from check_output
    from synapse_retriever.cli._common import check_output

    (tmp_path / "conversations").mkdir()
    (tmp_path / "l1").symlink_to(tmp_path / "l2")
    (tmp_path / "l2").symlink_to(tmp_path / "l1")
    check_output(str(tmp_path / "l1"), str(tmp_path / "conversations"))


def _one_error_line(err: str, *fragments: str) -> None:
    assert err.count("\n") == 1 and err.startswith("synapse-retriever: error: "), err
    for fragment in fragments:
        assert fragment in err, err


@pytest.mark.parametrize("command", ["stats", "edges", "decay", "export"])
def test_read_commands_refuse_a_missing_store(
    command: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    missing = str(tmp_path / "missing.db")
    extra = {"edges": ["node"], "export": [str(tmp_path / "out.json")]}.get(command, [])
    code, out, err = run(capsys, command, missing, *extra)
    assert code == 2 and out == ""
    _one_error_line(err, "no synapse database at", "missing.db")
    assert not Path(missing).exists()


@pytest.mark.parametrize(
    "command",
    [["stats"], ["edges", JWT], ["export", "OUT"], ["decay", "--dry-run"], ["repair"],
     ["rename", JWT, "src/security/jwt.py"]],
    ids=lambda command: command[0],
)  # fmt: skip
def test_read_commands_open_a_store_named_by_a_file_uri(
    command: list[str], store: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # bootstrap and import wrote to "file:synapses.db"; these said "no synapse database at
    # 'file:...'" (the URI was looked for as a file of that name)
    args = [str(tmp_path / "out.json") if arg == "OUT" else arg for arg in command[1:]]
    for uri in (f"file:{store}", f"file://{store}?mode=rw", f"file://localhost{store}"):
        code, out, err = run(capsys, command[0], uri, *args)
        assert (code, err) == (0, "") and out, (uri, err)
        if command[0] == "rename":
            args.reverse()  # and back, for the next spelling
    code, _, err = run(capsys, "stats", f"file:{tmp_path / 'none.db'}")
    assert code == 2
    _one_error_line(err, f"no synapse database at 'file:{tmp_path / 'none.db'}'")


def test_bench_queries_name_the_store_given_not_the_copy_they_read(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    foreign = tmp_path / "foreign.db"
    with sqlite3.connect(foreign) as db:
        db.execute("CREATE TABLE notes (text TEXT)")
    db.close()
    queries = tmp_path / "q.jsonl"
    queries.write_text('{"hits": ["a", "b"], "relevant": ["b"]}\n')
    for given in (str(foreign), f"file:{foreign}"):
        code, _, err = run(capsys, "bench", "quality", "--queries", str(queries), "--store", given,
                           "--quiet")  # fmt: skip
        assert code == 2
        _one_error_line(err, repr(given))
        assert "copy.db" not in err


STORE_COMMANDS = ["stats", "edges", "decay", "export", "import", "bootstrap"]


def _store_args(command: str, project: Path, tmp_path: Path) -> list[str]:
    """The arguments after the store path that make ``command`` otherwise valid."""
    exported = tmp_path / "e.json"
    exported.write_text('{"format": "synapse-retriever/edges", "version": 1, "edges": []}')
    return {
        "edges": [JWT],
        "export": [str(tmp_path / "out.json")],
        "import": [str(exported)],
        "bootstrap": ["--git", str(project), "--quiet"],
    }.get(command, [])


@pytest.mark.parametrize("kind", ["text", "sqlite"])
@pytest.mark.parametrize("command", STORE_COMMANDS)
def test_foreign_files_are_refused_and_left_untouched(
    command: str, kind: str, project: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    foreign = tmp_path / "notes.db"
    if kind == "text":
        foreign.write_text("my notes\n")
    else:  # an SQLite file of another application
        with sqlite3.connect(foreign) as db:
            db.execute("CREATE TABLE notes (body TEXT)")
        sqlite3.connect(foreign).close()
    before = foreign.read_bytes()
    code, _, err = run(capsys, command, str(foreign), *_store_args(command, project, tmp_path))
    assert code == 2
    _one_error_line(err, "notes.db", "not a synapse database" if kind == "text" else "another")
    assert foreign.read_bytes() == before
    assert not (tmp_path / "out.json").exists()


@pytest.mark.parametrize(
    ("url", "problem"),
    MALFORMED_URLS,
)
@pytest.mark.parametrize("command", [*STORE_COMMANDS, "repair", "mcp"])
def test_a_malformed_postgresql_url_is_one_line_without_its_password(
    command: str,
    url: str,
    problem: str,
    project: Path,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    code, _, err = run(capsys, command, url, *_store_args(command, project, tmp_path))
    assert code == 2
    _one_error_line(err, "is not a valid PostgreSQL URL", problem)
    assert "secret" not in err


@pytest.mark.parametrize("command", ["stats", "edges", "decay", "export"])
def test_read_commands_refuse_an_empty_file(
    command: str, project: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    empty = tmp_path / "empty.db"
    empty.touch()
    code, _, err = run(capsys, command, str(empty), *_store_args(command, project, tmp_path))
    assert code == 2
    _one_error_line(err, "empty.db", "is empty")
    assert empty.stat().st_size == 0


@pytest.mark.parametrize("command", STORE_COMMANDS)
def test_a_directory_is_not_a_store(
    command: str, project: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    folder = tmp_path / "folder"
    folder.mkdir()
    code, _, err = run(capsys, command, str(folder), *_store_args(command, project, tmp_path))
    assert code == 2
    _one_error_line(err, "folder' is a directory")
    assert list(folder.iterdir()) == []


def test_export_to_a_directory_leaves_nothing(
    store: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    before = sorted(tmp_path.iterdir())
    code, _, err = run(capsys, "export", str(store), str(tmp_path))
    assert code == 2
    _one_error_line(err, "is a directory")
    assert sorted(tmp_path.iterdir()) == before


def test_export_to_dash_streams_to_stdout_and_writes_no_file(
    store: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    before = sorted(tmp_path.iterdir())
    code, out, err = run(capsys, "export", str(store), "-", "--format", "json", "--at", NEAR)
    assert code == 0 and err.startswith("exported ") and err.endswith(" live edges to stdout\n")
    with SynapseStore(store) as s:
        count = len(export_edges(s, at=float(NEAR)))
    assert len(json.loads(out)["edges"]) == count > 0  # stdout holds the export alone
    assert sorted(tmp_path.iterdir()) == before  # no file named "-"
    code, _, err = run(capsys, "export", str(store), "-")
    assert code == 2
    _one_error_line(err, "--format json or graphml")


def _export_in_a_subprocess(store: Path, target: str, *options: str) -> tuple[int, str, str]:
    """``synapse-retriever export`` in a subprocess, its stdout a pipe; 60 s at most."""
    command = [sys.executable, "-m", "synapse_retriever.cli", "export", str(store), target,
               "--at", NEAR, *options]  # fmt: skip
    try:
        done = subprocess.run(command, capture_output=True, text=True, timeout=60, check=False)
    except subprocess.TimeoutExpired:
        pytest.fail(f"synapse-retriever export {target} hung")
    return done.returncode, done.stdout, done.stderr


def test_export_to_dev_stdout_writes_stdout_and_a_fifo_is_refused_unopened(
    store: Path, tmp_path: Path
) -> None:
    if not hasattr(os, "mkfifo") or not Path("/dev/stdout").exists():
        pytest.skip("no FIFOs or no /dev/stdout on this system")
    code, out, err = _export_in_a_subprocess(store, "/dev/stdout", "--format", "json")
    assert code == 0, err
    assert json.loads(out)["format"] == "synapse-retriever/edges"
    os.mkfifo(tmp_path / "pipe.json")
    code, out, err = _export_in_a_subprocess(store, str(tmp_path / "pipe.json"))
    assert code == 2
    _one_error_line(err, "pipe.json': it is a FIFO (a named pipe), not a regular file", "with -")
    assert (tmp_path / "pipe.json").is_fifo()


CLI = [sys.executable, "-m", "synapse_retriever.cli"]


def _closing(descriptor: int) -> Callable[[], None]:
    return lambda: os.close(descriptor)  # in the child, before it runs: Python sees None


@pytest.mark.parametrize(
    ("args", "code"),
    [
        (["stats", "{store}", "--json"], 1),  # a JSON report cut: one line, EXIT_CUT
        (["export", "{store}", "-", "--format", "json"], 1),
        (["stats", "{store}"], 0),  # a table for people, as `| head` cuts it
        (["--help"], 0),  # held for the interpreter's last flush: exit 120 and a traceback
        (["export", "--help"], 0),
    ],
)
def test_a_command_started_with_stdout_closed_says_its_output_is_cut(
    store: Path, args: list[str], code: int
) -> None:
    # an AttributeError on sys.stdout (None), in a traceback, exit 1 whatever the command
    command = [*CLI, *(arg.format(store=store) for arg in args)]
    done = subprocess.run(
        command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, timeout=60,
        preexec_fn=_closing(1), check=False,
    )  # fmt: skip
    assert done.returncode == code, done.stderr
    assert "Traceback" not in done.stderr and len(done.stderr.splitlines()) == code
    assert code == 0 or "stdout was closed before all of the output reached it" in done.stderr


def test_the_mcp_server_started_with_stdout_closed_ends_quietly(store: Path) -> None:
    # an ExceptionGroup of its tasks' BrokenPipeErrors, in a traceback, exit 120
    hello = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2024-11-05", "capabilities": {},
        "clientInfo": {"name": "t", "version": "1"}}}  # fmt: skip
    done = subprocess.run(
        [*CLI, "mcp", str(store)], input=json.dumps(hello) + "\n", stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE, text=True, timeout=60, preexec_fn=_closing(1), check=False,
    )  # fmt: skip
    assert done.returncode == 0 and "Traceback" not in done.stderr, done.stderr


def test_a_command_started_with_stderr_closed_keeps_its_exit_code(tmp_path: Path) -> None:
    # the error could not be written: exit 1 (the traceback's), not 2
    command = [*CLI, "stats", str(tmp_path / "missing.db")]
    done = subprocess.run(
        command, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, timeout=60,
        preexec_fn=_closing(2), check=False,
    )  # fmt: skip
    assert done.returncode == 2 and not (tmp_path / "missing.db").exists()


def _piped(first: list[str], second: list[str]) -> tuple[int, str, int, str, str]:
    """``synapse-retriever FIRST | synapse-retriever SECOND`` through a real pipe, 60 s at
    most: the first one's exit code and stderr, the second one's exit code, stdout, stderr."""
    with subprocess.Popen([*CLI, *first], stdout=subprocess.PIPE, stderr=subprocess.PIPE) as one:
        assert one.stdout is not None
        with subprocess.Popen(
            [*CLI, *second], stdin=one.stdout, stdout=subprocess.PIPE, stderr=subprocess.PIPE
        ) as two:
            one.stdout.close()  # the second command holds the pipe alone
            try:
                out, err = two.communicate(timeout=60)
                _, first_err = one.communicate(timeout=60)
            except subprocess.TimeoutExpired:
                one.kill()
                two.kill()
                pytest.fail(f"{' '.join(first)} | {' '.join(second)} hung")
    return one.returncode, first_err.decode(), two.returncode, out.decode(), err.decode()


@pytest.mark.parametrize("fmt", ["json", "graphml"])
@pytest.mark.parametrize("source", ["-", "/dev/stdin"])
def test_import_reads_an_export_piped_from_export(
    store: Path, tmp_path: Path, fmt: str, source: str
) -> None:
    if source == "/dev/stdin" and not Path("/dev/stdin").exists():
        pytest.skip("no /dev/stdin on this system")
    copy = tmp_path / "copy.db"
    export = ["export", str(store), "-", "--format", fmt, "--at", NEAR]
    code, err, imported, said, why = _piped(export, ["import", str(copy), source, "--format", fmt])
    assert code == 0 and err.startswith("exported 3 live edges to stdout"), err
    assert imported == 0, why
    assert said.startswith(f"3 edges read from {'stdin' if source == '-' else source}: 3 inserted")
    with SynapseStore(store) as original, SynapseStore(copy) as merged:
        assert export_edges(merged, at=float(NEAR)) == export_edges(original, at=float(NEAR))
    assert sorted(p.name for p in tmp_path.iterdir()) == ["copy.db", "synapses.db"]


@pytest.mark.parametrize(
    ("content", "options", "fragment"),
    [
        (b"", ["--format", "json"], "stdin is not a JSON edge export"),
        (b"{", ["--format", "json"], "stdin is not a JSON edge export"),
        (b"\xff\xfe", ["--format", "json"], "stdin is not a JSON edge export (not UTF-8 text)"),
        (b"[]", ["--format", "json"], "stdin is not a synapse edge export"),
        (b"<graphml", ["--format", "graphml"], "stdin is not a GraphML edge export"),
        (
            b'{"format": "synapse-retriever/edges", "version": 1, "edges": [{"a": "x"}]}',
            ["--format", "json"],
            "stdin: edge 0 has no 'b'",
        ),
        (
            b'{"format": "synapse-retriever/edges", "version": 1, "edges": [{"a": "x", "b": "y", '
            b'"namespace": "shared", "stored_weight": 7, "count": 1, "half_life_days": 30, '
            b'"created_at": 0, "last_reinforced_at": 0}]}',
            ["--format", "json"],
            "stored_weight",
        ),
        (b"{}", [], "cannot tell the format of '-'"),
    ],
)
def test_import_refuses_a_bad_stdin_in_one_line_and_creates_nothing(
    tmp_path: Path, content: bytes, options: list[str], fragment: str
) -> None:
    command = [*CLI, "import", str(tmp_path / "new.db"), "-", *options]
    done = subprocess.run(command, input=content, capture_output=True, timeout=60, check=False)
    code, out, err = done.returncode, done.stdout.decode(), done.stderr.decode()
    assert code == 2 and out == ""
    _one_error_line(err, fragment)
    assert list(tmp_path.iterdir()) == []  # no store, no hidden partial one


def test_import_from_a_terminal_stdin_is_refused_rather_than_waiting(tmp_path: Path) -> None:
    if not hasattr(os, "openpty"):
        pytest.skip("no terminals on this system")
    terminal, other = os.openpty()
    try:
        command = [*CLI, "import", str(tmp_path / "new.db"), "-", "--format", "json"]
        done = subprocess.run(command, stdin=other, capture_output=True, timeout=60, check=False)
    finally:
        os.close(terminal)
        os.close(other)
    assert done.returncode == 2
    _one_error_line(done.stderr.decode(), "reads an export from stdin: pipe one in")
    assert list(tmp_path.iterdir()) == []


def test_a_time_out_of_range_changes_nothing(
    store: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    for command in ("stats", "edges", "decay"):
        args = [command, str(store), *([JWT] if command == "edges" else []), "--at", "1e30"]
        code, _, err = run(capsys, *args)
        assert code == 2
        _one_error_line(err, "--at '1e30' is out of range")
    for at, says in [("nan", "at must be a finite number of seconds, got nan"),
                     ("-1e15", "is before the year 1")]:  # fmt: skip
        code, _, err = run(capsys, "stats", str(store), f"--at={at}")
        assert code == 2
        _one_error_line(err, says)
    # a negative time in scientific notation is a number, as -1 and -1.5 are: argparse read
    # it as an option ("expected one argument")
    for at in ("-1e15", "-1E+15", "-.1e16", "-1.e15", "-1_000_000_000_000_000"):
        code, _, err = run(capsys, "stats", str(store), "--at", at)
        assert code == 2
        _one_error_line(err, "is before the year 1")
    code, out, _ = run(capsys, "stats", str(store), "--at", "-1_000", "--json")  # in 1969
    assert code == 0 and json.loads(out)["edges"] == 3
    code, out, _ = run(capsys, "stats", str(store), "--at", NEAR, "--json")
    assert code == 0 and json.loads(out)["edges"] == 3  # the decay at 1e30 pruned nothing


def test_bad_git_paths(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    db = str(tmp_path / "s.db")
    code, _, err = run(capsys, "bootstrap", db, "--git", str(tmp_path / "nope"))
    assert code == 2
    _one_error_line(err, "no such directory")
    code, _, err = run(capsys, "bench", "quality", "--git", str(tmp_path), "--quiet")
    assert code == 2
    _one_error_line(err, "is not a git repository")
    repo = init(tmp_path / "repo")
    commit(repo, "two files", {"src/a.py": "a", "src/b.py": "b"}, at=BASE)
    code, _, err = run(capsys, "bootstrap", db, "--git", str(repo / "src"), "--quiet")
    assert code == 2
    _one_error_line(err, "is the folder 'src/' of a git repository")
    odd = os.fsdecode(b"d\xff")  # a folder name that is not UTF-8
    commit(repo, "odd folder", {f"{odd}/c.py": "c"}, at=BASE + DAY)
    code, _, err = run(capsys, "bootstrap", db, "--git", str(repo / odd), "--quiet")
    assert code == 2
    _one_error_line(err, "is the folder 'd\\\\xff/' of a git repository")


def test_bad_arguments(
    project: Path, store: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    cases = [
        (["bootstrap", str(store), "--git", str(project), "--since", "last week"], "ISO 8601"),
        (["bootstrap", str(store), "--git", str(project), "--namespace", "team"], "namespace"),
        (
            ["bootstrap", str(tmp_path / "n.db"), "--git", str(project), "--namespace", ""],
            "namespace",
        ),
        (["bootstrap", str(tmp_path / "no" / "s.db"), "--git", str(project)], "cannot create"),
        (["stats", str(store), "--namespace", "team"], "namespace"),
        (["edges", str(store), "x", "--at", "soon"], "ISO 8601"),
        (["export", str(store), str(tmp_path / "no" / "e.json")], "no such directory"),
        (["import", str(store), str(tmp_path / "absent.json")], "no export file"),
        (["import", str(store), str(tmp_path)], "it is a directory, not an export file"),
        (["bench", "quality", "--git", str(project), "--set", "colour=blue"], "--set expects"),
        (["bench", "quality", "--git", str(project), "--set", "seeds=many"], "expected int"),
        (["bench", "quality", "--git", str(project), "--set", "seeds=0"], "seeds must be"),
        (["bench", "quality", "--git", str(project), "--split", "2"], "split"),
        (["bench", "quality", "--git", str(project), "--store", str(store)], "exists"),
    ]
    for args, fragment in cases:
        code, _, err = run(
            capsys, *args, *(["--quiet"] if args[0] in ("bootstrap", "bench") else [])
        )
        assert code == 2, args
        _one_error_line(err, fragment)
    assert not (tmp_path / "n.db").exists()  # a bad namespace is refused before the store opens
    with pytest.raises(SystemExit) as stopped:
        main(["edges", str(store), JWT, "--limit", "-1"])
    assert stopped.value.code == 2 and "must be at least 0" in capsys.readouterr().err


def test_bad_import_files(store: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    bad = tmp_path / "bad.json"
    for content, fragment in [
        ("{", "not a JSON edge export"),
        ("[]", "not a synapse edge export"),
        (
            '{"format": "synapse-retriever/edges", "version": 1, "edges": [{"a": "x", "b": "y", '
            '"namespace": "shared", "stored_weight": 7, "count": 1, "half_life_days": 30, '
            '"created_at": 0, "last_reinforced_at": 0}]}',
            "stored_weight must be in (0, 1], got 7.0",
        ),
    ]:
        bad.write_text(content)
        code, _, err = run(capsys, "import", str(store), str(bad))
        assert code == 2
        _one_error_line(err, fragment)
    (tmp_path / "bad.graphml").write_text("<graphml>")
    code, _, err = run(capsys, "import", str(store), str(tmp_path / "bad.graphml"))
    assert code == 2
    _one_error_line(err, "not a GraphML edge export")


def _files(folder: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in folder.iterdir() if p.is_file()}


@pytest.mark.parametrize(
    "output",
    [
        pytest.param(lambda d: d / "synapses.db", id="the-store"),
        pytest.param(lambda d: f"{d}/sub/../synapses.db", id="another-spelling"),
        pytest.param(lambda d: d / "link.json", id="a-symlink-to-it"),
        pytest.param(lambda d: d / "other.json", id="another-store"),
        pytest.param(lambda d: d / "notes.graphml", id="foreign-sqlite"),
    ],
)
def test_export_never_overwrites_a_store_or_any_sqlite_file(
    store: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], output: Any
) -> None:
    (tmp_path / "sub").mkdir()
    (tmp_path / "link.json").symlink_to(store)
    SynapseStore(tmp_path / "other.json").close()
    with sqlite3.connect(tmp_path / "notes.graphml") as db:
        db.execute("CREATE TABLE notes (body TEXT)")
    sqlite3.connect(tmp_path / "notes.graphml").close()
    before = _files(tmp_path)
    for fmt in ([], ["--format", "json"], ["--format", "graphml"]):
        code, out, err = run(capsys, "export", str(store), str(output(tmp_path)), *fmt)
        assert code == 2 and out == ""
        _one_error_line(err, f"cannot write {str(output(tmp_path))!r}: it is ", "left untouched")
        assert _files(tmp_path) == before
    code, out, _ = run(capsys, "stats", str(store), "--at", NEAR, "--json")
    assert code == 0 and json.loads(out)["edges"] == 3


def test_export_and_import_need_a_known_suffix_or_format(
    store: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    new = tmp_path / "new.db"
    for name, problem in [
        ("edges.txt", "its suffix '.txt' is not one of .json, .graphml, .xml"),
        ("edges", "it has no suffix; expected one of .json, .graphml, .xml"),
    ]:
        path = tmp_path / name
        code, out, err = run(capsys, "export", str(store), str(path))
        assert code == 2 and out == ""
        _one_error_line(err, f"cannot tell the format of {str(path)!r}: {problem}", "--format")
        assert not path.exists()
        code, out, _ = run(
            capsys, "export", str(store), str(path), "--format", "graphml", "--at", NEAR
        )
        assert code == 0 and "exported 3 live edges" in out
        code, out, err = run(capsys, "import", str(new), str(path))
        assert code == 2 and out == ""
        _one_error_line(err, problem, "--format")
        assert not new.exists()  # refused before the store was created
        code, out, _ = run(capsys, "import", str(new), str(path), "--format", "graphml")
        assert code == 0 and "3 inserted" in out
        new.unlink()
    code, out, _ = run(capsys, "export", str(store), str(tmp_path / "EDGES.JSON"), "--at", NEAR)
    assert code == 0 and len(json.loads((tmp_path / "EDGES.JSON").read_text())["edges"]) == 3


def test_graphml_export_refuses_an_id_xml_cannot_carry(
    store: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with SynapseStore(store) as s:
        s.reinforce(["auth/jwt\x01.py", KEYS], namespace="shared", at=BASE + 29 * DAY)
    graphml = tmp_path / "edges.graphml"
    code, out, err = run(capsys, "export", str(store), str(graphml), "--at", NEAR)
    assert code == 2 and out == ""
    _one_error_line(err, "node id 'auth/jwt\\x01.py' holds U+0001", "export as JSON")
    assert not graphml.exists() and not list(tmp_path.glob(".*partial"))
    exported = tmp_path / "edges.json"
    assert run(capsys, "export", str(store), str(exported), "--at", NEAR)[0] == 0
    assert run(capsys, "import", str(tmp_path / "copy.db"), str(exported))[0] == 0
    with SynapseStore(tmp_path / "copy.db") as copy, SynapseStore(store) as original:
        odd = ("auth/jwt\x01.py", KEYS, "shared")
        assert copy.edge(*odd) == original.edge(*odd) is not None


def _export_file(path: Path, stored_weights: list[float], *, last: float = 0.0) -> Path:
    """An export of edges x-y0, x-y1, ... with these stored weights."""
    edges = [
        {"a": "x", "b": f"y{i}", "namespace": "shared", "stored_weight": weight, "count": 1}
        | {"half_life_days": 30, "created_at": 0, "last_reinforced_at": last}
        for i, weight in enumerate(stored_weights)
    ]
    path.write_text(json.dumps({"format": "synapse-retriever/edges", "version": 1, "edges": edges}))
    return path


@pytest.mark.parametrize(
    ("weights", "last", "message"),
    [
        pytest.param(
            [0.5, 7.0],
            0.0,
            "edge 1 ('x'-'y1'): stored_weight must be in (0, 1], got 7.0",
            id="a-bad-weight",
        ),
        pytest.param(
            [0.5],
            1.7e12,
            "edge 0 ('x'-'y0'): last_reinforced_at=1700000000000.0 is more than",
            id="milliseconds",
        ),
    ],
)
def test_a_bad_import_creates_no_store_and_changes_none(
    store: Path,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    weights: list[float],
    last: float,
    message: str,
) -> None:
    bad = _export_file(tmp_path / "bad.json", weights, last=last)
    new = tmp_path / "new" / "s.db"
    new.parent.mkdir()
    code, out, err = run(capsys, "import", str(new), str(bad))
    assert code == 2 and out == ""
    _one_error_line(err, message)
    assert list(new.parent.iterdir()) == []  # no store file, no -wal, no -shm
    before = _files(store.parent)
    code, _, err = run(capsys, "import", str(store), str(bad))
    assert code == 2
    _one_error_line(err, message)
    assert _files(store.parent) == before  # the store, byte for byte


def test_an_import_into_memory_is_refused_and_a_uri_leaves_no_stray_file(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    # ":memory:" reported "1 inserted" and left an empty file of that name behind; a URI
    # left one named "file:zz.db" beside the store it wrote
    good = _export_file(tmp_path / "good.json", [0.5])
    work = tmp_path / "work"
    work.mkdir()
    monkeypatch.chdir(work)
    code, out, err = run(capsys, "import", ":memory:", str(good))
    assert code == 2 and out == ""
    _one_error_line(err, "':memory:' is a store in memory: nothing this command does would be")
    for command in (["rename", ":memory:", "a", "b"], ["stats", "file::memory:"],
                    ["import", "file:m1?mode=memory", str(good)],
                    ["stats", "file:/m2?vfs=memdb"]):  # fmt: skip
        code, out, err = run(capsys, *command)
        assert code == 2 and out == ""
        _one_error_line(err, "is a store in memory")
    assert list(work.iterdir()) == []
    code, _, _ = run(capsys, "import", "file:zz.db", str(good))
    assert code == 0
    assert sorted(p.name for p in work.iterdir()) == ["zz.db"]
    with SynapseStore(work / "zz.db") as s:
        assert s.edge("x", "y0", "shared") is not None
    code, _, err = run(capsys, "import", "new.db/", str(good))
    assert code == 2
    _one_error_line(err, "a store's path must name a file, not a folder: got 'new.db/'")
    (work / "sub").mkdir()
    code, _, err = run(capsys, "import", "sub/.", str(good))  # made a file named "sub"
    assert code == 2
    _one_error_line(err, "must name a file, not a folder: got 'sub/.'")
    (work / "sub").rmdir()
    assert sorted(p.name for p in work.iterdir()) == ["zz.db"]


def test_an_errors_notes_are_printed_on_its_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    # the notes an error gathers on its way up (the last window of a watch was written, a move
    # in it was not learned) were dropped: the line said only the store's error
    good = _export_file(tmp_path / "good.json", [0.5, 0.6])

    def locked(*args: object) -> None:
        error = sqlite3.OperationalError("database is locked")
        error.add_note("what was done before it")
        raise error

    monkeypatch.setattr("synapse_retriever.persistence.transfer._approximate_missing_uses", locked)
    code, out, err = run(capsys, "import", str(tmp_path / "s.db"), str(good))
    assert code == 2 and out == ""
    _one_error_line(err, "database is locked (what was done before it)")


def test_an_import_failing_midway_removes_only_the_store_it_created(
    store: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    good = _export_file(tmp_path / "good.json", [0.5, 0.6])

    def full(*args: object) -> None:
        raise sqlite3.OperationalError("database or disk is full")

    monkeypatch.setattr("synapse_retriever.persistence.transfer._approximate_missing_uses", full)
    new = tmp_path / "new" / "s.db"
    new.parent.mkdir()
    code, out, err = run(capsys, "import", str(new), str(good))
    assert code == 2 and out == ""
    _one_error_line(err, "database or disk is full")
    assert list(new.parent.iterdir()) == []  # the store it created, its -wal and -shm
    with SynapseStore(store) as s:
        before = export_edges(s, at=float(NEAR))
    code, _, err = run(capsys, "import", str(store), str(good))
    assert code == 2
    _one_error_line(err, "database or disk is full")
    assert store.exists()
    with SynapseStore(store) as s:  # one transaction: nothing of the import is left
        assert export_edges(s, at=float(NEAR)) == before
        assert s.edge("x", "y0", "shared") is None


KILLED_IMPORT = """
import os, signal, sys
from synapse_retriever.cli import main
from synapse_retriever.persistence import transfer

merge = transfer.merge_edges

def merged_then_killed(*args, **kwargs):
    if sys.argv[1] == "before":
        os.kill(os.getpid(), signal.SIGKILL)
    merge(*args, **kwargs)  # committed: the store holds every edge
    os.kill(os.getpid(), signal.SIGKILL)

transfer.merge_edges = merged_then_killed
main(["import", *sys.argv[2:]])
"""


@pytest.mark.parametrize("when", ["before", "after"])
def test_an_import_killed_into_a_new_path_leaves_no_store_there(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], when: str
) -> None:
    # the store was created at its path first, then filled: a kill -9 in between left an
    # empty store there, which opened clean, as if the import had found nothing to add
    good = _export_file(tmp_path / "good.json", [0.5, 0.6])
    new = tmp_path / "new" / "s.db"
    new.parent.mkdir()
    killed = subprocess.run(
        [sys.executable, "-c", KILLED_IMPORT, when, str(new), str(good)], check=False
    )
    assert killed.returncode == -9
    assert not new.exists()
    assert not any(p.name.startswith("s.db") for p in new.parent.iterdir())
    code, _, err = run(capsys, "import", str(new), str(good))  # sent again: whole
    assert code == 0, err
    with SynapseStore(new) as s:
        assert [s.edge("x", f"y{i}", "shared") is not None for i in range(2)] == [True, True]


def test_an_import_into_a_new_path_taken_meanwhile_merges_into_what_is_there(
    store: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    good = _export_file(tmp_path / "good.json", [0.5])
    new = tmp_path / "new" / "s.db"
    new.parent.mkdir()
    link = os.link

    def another_process_first(source: Path, target: Path) -> None:
        shutil.copyfile(store, target)  # another import, say, placed its store first
        link(source, target)

    monkeypatch.setattr(os, "link", another_process_first)
    code, _, err = run(capsys, "import", str(new), str(good))
    assert code == 0, err
    assert sorted(p.name for p in new.parent.iterdir()) == ["s.db"]  # no partial left
    with SynapseStore(new) as merged, SynapseStore(store) as first:
        assert merged.edge("x", "y0", "shared") is not None  # the import
        before = export_edges(first, at=float(NEAR))
        assert before and export_edges(merged, at=float(NEAR)) == before  # what was there


def test_an_import_into_a_new_path_on_a_full_disk_leaves_nothing_and_names_the_path(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # the store built beside the path was linked once closed, but SQLite's copy of its
    # write-ahead log into it at the close failed without a word on a full disk: the import
    # said "8250 inserted", left a damaged store and deleted the log that held the edges
    good = _export_file(tmp_path / "good.json", [0.5] * 8250)  # committed, then too big
    disk = tmp_path / "disk"
    disk.mkdir()
    mounted = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=2m", "tmpfs", str(disk)], capture_output=True
    )
    if mounted.returncode != 0:
        pytest.skip("a small tmpfs needs root and mount here")
    try:
        code, out, err = run(capsys, "import", str(disk / "s.db"), str(good))
        assert code == 2 and out == ""
        _one_error_line(err, f"{str(disk / 's.db')!r} could not be read or written")
        assert ".partial" not in err
        assert list(disk.iterdir()) == []
    finally:
        subprocess.run(["umount", str(disk)], check=True)


def test_an_import_into_a_new_path_with_the_longest_name_is_placed_under_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    good = _export_file(tmp_path / "good.json", [0.5])
    new = tmp_path / ("n" * 252 + ".db")  # 255 bytes: the file system's most
    code, _, err = run(capsys, "import", str(new), str(good))
    assert code == 0, err  # the store built beside it has a short name of its own
    assert new.is_file() and [p.name for p in tmp_path.iterdir() if "partial" in p.name] == []
    code, _, err = run(capsys, "import", str(tmp_path / ("n" * 256 + ".db")), str(good))
    assert code == 2
    _one_error_line(err, "is a path too long for the file system", f"{str(tmp_path)[:60]}")


def test_an_import_into_a_new_path_without_hard_links_renames(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    good = _export_file(tmp_path / "good.json", [0.5])
    new = tmp_path / "new" / "s.db"
    new.parent.mkdir()

    def no_hard_links(source: Path, target: Path) -> None:
        raise OSError(errno.EPERM, "Operation not permitted")  # vfat, say

    monkeypatch.setattr(os, "link", no_hard_links)
    code, _, err = run(capsys, "import", str(new), str(good))
    assert code == 0, err
    assert sorted(p.name for p in new.parent.iterdir()) == ["s.db"]
    with SynapseStore(new) as s:
        assert s.edge("x", "y0", "shared") is not None


def test_the_module_runs_as_a_program(tmp_path: Path) -> None:
    result = subprocess.run(
        [sys.executable, "-m", "synapse_retriever.cli", "stats", str(tmp_path / "none.db")],
        capture_output=True,
        text=True,
        check=False,
    )
    assert result.returncode == 2 and result.stdout == ""
    assert (
        result.stderr
        == f"synapse-retriever: error: no synapse database at '{tmp_path / 'none.db'}'\n"
    )
    version = subprocess.run(
        [sys.executable, "-m", "synapse_retriever.cli", "--version"],
        capture_output=True,
        text=True,
        check=False,
    )
    assert version.returncode == 0 and version.stdout.startswith("synapse-retriever ")


def test_the_console_script_is_the_name_the_command_gives_itself() -> None:
    """``[project.scripts]`` installs one command, the one ``--help`` and errors name."""
    pyproject = Path(__file__).resolve().parents[2] / "pyproject.toml"
    scripts = tomllib.loads(pyproject.read_text(encoding="utf-8"))["project"]["scripts"]
    assert scripts == {build_parser().prog: "synapse_retriever.cli:main"}
    assert build_parser().prog == "synapse-retriever"  # `synapse` is another project's command


def test_histogram_bins() -> None:
    # bins [0, 0.1) [0.1, 0.2) [0.2, 1.0]; 1.0 closes the last bin; -1 and 2 are outside
    assert histogram([0.0, 0.05, 0.1, 0.5, 1.0, -1.0, 2.0], [0.0, 0.1, 0.2, 1.0]) == [2, 1, 2]


def test_a_device_is_not_a_store(capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = run(capsys, "stats", os.devnull)
    assert (
        code == 2
        and err
        == f"synapse-retriever: error: {os.devnull!r} is not a regular file, "
        "not a synapse database\n"
    )


def _handlers(parser: argparse.ArgumentParser) -> dict[str, str]:
    """Every command and subcommand of ``parser`` (``bench perf``): its handler's module."""
    found = {}
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                handler = sub.get_default("handler")
                if handler is not None:
                    found[name] = handler.__module__
                found |= {f"{name} {inner}": module for inner, module in _handlers(sub).items()}
    return found


def test_each_command_module_registers_its_own_commands() -> None:
    """A command is one module's: its handler and the register() that adds it, side by side;
    build_parser adds the modules' commands in this order, the order --help lists them in."""
    expected = {
        store_commands: "stats edges rename decay repair export import bootstrap",
        watch_command: "watch",
        mcp_command: "mcp",
        bench_commands: "bench",
    }
    every: dict[str, str] = {}
    for module, names in expected.items():
        parser = argparse.ArgumentParser()
        commands = parser.add_subparsers()
        module.register(commands)
        assert list(commands.choices) == names.split()
        found = _handlers(parser)  # with bench's benchmarks: "bench quality", ...
        assert set(found.values()) == {module.__name__}  # every handler is the module's own
        every |= found
    assert list(_handlers(build_parser()).items()) == list(every.items())  # in this order


def _read_then_close(command: list[str], keep: int) -> tuple[int, bytes, str]:
    """Run ``synapse-retriever COMMAND`` with its stdout a pipe whose reader takes ``keep``
    bytes and closes it (``| head -c KEEP``); its exit code, what was read, its stderr."""
    argv = [sys.executable, "-m", "synapse_retriever.cli", *command]
    with subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE) as process:
        assert process.stdout is not None and process.stderr is not None
        kept = process.stdout.read(keep)
        process.stdout.close()
        err = process.stderr.read().decode()
        code = process.wait(timeout=60)
    return code, kept, err


@pytest.fixture(scope="module")
def grown(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A store of 20,000 edges: its export and its hub's listing (1,103 neighbours) outgrow
    a pipe's buffer."""
    from synapse_retriever.bench.perf import grow_graph

    path = tmp_path_factory.mktemp("grown") / "grown.db"
    grow_graph(path, 20_000)
    return path


def test_an_export_whose_reader_stops_early_says_it_is_incomplete(grown: Path) -> None:
    # the stream's write came back short without an error: the export was reported whole
    from synapse_retriever.bench.perf import NOW

    command = ["export", str(grown), "-", "--format", "json", "--at", str(NOW)]
    code, kept, err = _read_then_close(command, 1000)
    assert code == 1 and len(kept) == 1000
    _one_error_line(err, "stdout was closed before all of the output reached it", "incomplete")
    assert "exported" not in err


@pytest.mark.parametrize("json_out", [False, True])
@pytest.mark.parametrize("command", ["edges", "stats"])
def test_output_whose_reader_stops_early(grown: Path, json_out: bool, command: str) -> None:
    # a table for people ends quietly with 0 (`| head`: the reader had what it wanted);
    # JSON, for programs, says it was cut and ends with 1, as an export does
    from synapse_retriever.bench.perf import NOW

    node = ["src/module_0000000.py", "--limit", "0"] if command == "edges" else []
    argv = [command, str(grown), *node, "--at", str(NOW), *["--json"] * json_out]
    code, kept, err = _read_then_close(argv, 10)
    assert len(kept) == 10
    if json_out and command == "edges":  # stats' JSON fits in the pipe's buffer
        assert code == 1
        _one_error_line(err, "stdout was closed before all of the output reached it")
    else:
        assert (code, err) == (0, "")


@pytest.mark.parametrize(
    ("hidden", "command", "extra"),
    [
        ("watchdog", ["watch", ".", "made.db"], "watch"),
        ("psycopg", ["stats", "postgresql://postgres@127.0.0.1:5432/postgres"], "postgres"),
    ],
)
def test_a_missing_extra_is_one_line_naming_it_and_makes_no_file(
    tmp_path: Path, hidden: str, command: list[str], extra: str
) -> None:
    # a traceback ending in ImportError, and watch made its store file first
    from test_without_faiss import run as without

    result = without(
        f"from synapse_retriever.cli import main\nraise SystemExit(main({command!r}))",
        tmp_path,
        hidden=hidden,
    )
    assert result.returncode == 2, result.stderr
    assert result.stderr.splitlines() == [
        f"synapse-retriever: error: {result.stderr.split('error: ', 1)[1].strip()}"
    ]
    assert f"pip install 'synapse-retriever[{extra}]'" in result.stderr
    assert list(tmp_path.iterdir()) == []


def test_bench_quality_names_a_missing_store_and_a_folder_as_such(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    queries = tmp_path / "q.jsonl"
    queries.write_text(json.dumps({"hits": [["a", 0.9]], "relevant": ["a"], "at": 0}) + "\n")
    base = ["bench", "quality", "--queries", str(queries), "--store"]
    code, _, err = run(capsys, *base, str(tmp_path / "missing.db"))
    assert code == 2
    _one_error_line(err, "missing.db': no such file")
    code, _, err = run(capsys, *base, str(tmp_path))
    assert code == 2
    _one_error_line(err, "is not a store file")


def _as_schema_3(path: Path) -> bytes:
    """A store at ``path`` as release 0.1.0 (schema 3) left it; the file's bytes."""
    with SynapseStore(path) as store:
        store.reinforce(["a.py", "b.py"], event_id="e1")
        store.reinforce(["a.py", "c.py"], event_id="e2")
    with sqlite3.connect(path) as db:
        db.executescript("DROP TRIGGER events_seen; ALTER TABLE events DROP COLUMN seen")
        db.execute("PRAGMA user_version = 3")
    with sqlite3.connect(path) as db:
        db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    return path.read_bytes()


@pytest.mark.parametrize(
    "command",
    [
        ["stats"],
        ["edges", "a.py"],
        ["export", "{out}"],
        ["repair", "--dry-run"],
        ["decay", "--dry-run", "--at", "2030-01-01"],
    ],
)
def test_a_command_that_only_reads_leaves_an_earlier_releases_file_as_it_was(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, command: list[str]
) -> None:
    # a new user's probe: `repair --dry-run` (and stats, edges, export, decay --dry-run)
    # upgraded a 0.1.0 store for good, saying nothing was changed: 0.1.0 could not open it
    path = tmp_path / "prod.db"
    before = _as_schema_3(path)
    args = [part.format(out=tmp_path / "out.json") for part in command]
    code, out, err = run(capsys, args[0], str(path), *args[1:])
    assert code == 0, err
    assert path.read_bytes() == before
    with sqlite3.connect(path) as db:
        assert db.execute("PRAGMA user_version").fetchone() == (3,)
    if args[0] == "edges":
        assert "b.py" in out and "c.py" in out  # read from the upgraded copy
    kept = {"prod.db", "prod.db-wal", "prod.db-shm", "out.json"}  # SQLite's, as any reader's
    assert not [p for p in tmp_path.iterdir() if p.name not in kept]
    code, _, err = run(capsys, "repair", str(path))  # a command that writes upgrades it
    assert code == 0, err
    with sqlite3.connect(path) as db:
        assert db.execute("PRAGMA user_version").fetchone()[0] > 3


def test_a_command_that_only_reads_finds_an_earlier_release_in_the_write_ahead_log(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    # a review's finding: while a 0.1.0 process holds its store open, the schema version may
    # be only in the log (the file's own header says 0): stats upgraded the store for good
    path = tmp_path / "prod.db"
    holder = sqlite3.connect(path)  # 0.1.0's process, still running
    try:
        holder.execute("PRAGMA journal_mode = WAL")
        holder.execute("PRAGMA wal_autocheckpoint = 0")
        holder.execute("SELECT 1").fetchall()
        with SynapseStore(path) as store:
            store.reinforce(["a.py", "b.py"], event_id="e1")
        holder.executescript("DROP TRIGGER events_seen; ALTER TABLE events DROP COLUMN seen")
        holder.execute("PRAGMA user_version = 3")
        holder.commit()
        main_file = path.read_bytes()
        assert int.from_bytes(main_file[60:64], "big") != 3  # the version is in the log
        code, out, err = run(capsys, "edges", str(path), "a.py")
        assert code == 0 and "b.py" in out, err
        assert holder.execute("PRAGMA user_version").fetchone() == (3,)
        assert path.read_bytes() == main_file
    finally:
        holder.close()
