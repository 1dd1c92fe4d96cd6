"""synapse-retriever bench capture runs end to end on a small tree (no timed assertion): the watch
takes every save in, and the MCP server answers what the store answers in process."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from synapse_retriever.bench.capture import make_tree
from synapse_retriever.capture.watch import ignored
from synapse_retriever.cli import main


def test_the_tree_is_committed_and_its_build_folder_ignored(tmp_path: Path) -> None:
    paths = make_tree(tmp_path, files=230)
    # 100 files a folder: pkg00/mod00, pkg00/mod01, and 30 in pkg00/mod02
    assert len(paths) == 230 and paths[-1] == "pkg00/mod02/file029.py"
    tracked = subprocess.run(
        ["git", "-C", str(tmp_path), "ls-files"], capture_output=True, text=True, check=True
    ).stdout.split()
    assert sorted(tracked) == sorted([*paths, ".gitignore"])
    assert ignored(tmp_path, ["build/out0.js", paths[0]]) == {"build/out0.js"}


def test_the_cli_reports_watch_and_mcp_costs(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "capture.json"
    argv = ["bench", "capture", "--files", "200", "--idle-s", "0.5", "--calls", "20"]
    assert main([*argv, "--quiet", "--json", str(out)]) == 0
    report = json.loads(out.read_text())
    assert set(report) == {"machine", "watch", "mcp"}
    watched = report["watch"]
    assert (watched["files"], watched["folders"]) == (200, 2)
    assert watched["startup_s"] > 0 and watched["idle_s"] >= 0.5
    assert 0 <= watched["idle_cpu_percent"] < 100
    # bursts cut to the tree: 100 and 200 saves, every one taken in
    assert [row["saves"] for row in watched["bursts"]] == [100, 200]
    for row in watched["bursts"]:
        assert row["lost"] == row["overflows"] == 0
        assert row["absorbed_in_s"] >= row["saved_in_s"] > 0
        assert row["saves_per_s"] > 0
    assert watched["saves_per_s"] == watched["bursts"][-1]["saves_per_s"]
    served = report["mcp"]
    assert served["calls"] == 20 and served["hits"] == 10 and served["edges"] > 1000
    assert served["same_hits"] is True  # the server answers what the store does in process
    assert served["in_process_p50_ms"] > 0 and 0 < served["p50_ms"] <= served["p90_ms"]
    assert served["ratio"] == pytest.approx(served["p50_ms"] / served["in_process_p50_ms"], 0.1)
    printed = capsys.readouterr().out  # the tables follow the file
    assert "a git tree of 200 files" in printed and "MCP recall of 10 hits" in printed


@pytest.mark.parametrize("idle", ["0", "inf", "nan", "1e10"])
def test_a_bad_idle_time_fails_in_one_line(capsys: pytest.CaptureFixture[str], idle: str) -> None:
    # inf ended in a traceback after the set-up, and 1e10 slept for ever
    assert main(["bench", "capture", "--idle-s", idle]) == 2
    assert capsys.readouterr().err == (
        "synapse-retriever: error: --idle-s must be > 0 and at most 86400 seconds, "
        f"got {float(idle)}\n"
    )
