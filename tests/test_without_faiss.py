"""faiss-cpu is the conversation extra's, not the core's: the store, the command line's store
commands and the MCP server import and run without it, and the conversation memory, imported
without it, says which extra to install. Each check runs in a fresh interpreter in which
``import faiss`` fails (``sys.modules["faiss"] = None``), as on an install without the extra."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path


def run(script: str, cwd: Path, *, hidden: str = "faiss") -> subprocess.CompletedProcess[str]:
    """Run ``script`` in a fresh interpreter in which ``import hidden`` fails, as on an install
    without its extra (``tests/cli/test_mcp_command.py`` hides ``mcp``)."""
    hide = f'import sys\nsys.modules["{hidden}"] = None  # import {hidden} raises ImportError\n'
    return subprocess.run(
        [sys.executable, "-c", hide + textwrap.dedent(script)],
        capture_output=True,
        text=True,
        cwd=cwd,
        timeout=120,
        check=False,
    )


def test_the_store_its_commands_and_the_mcp_server_run_without_faiss(tmp_path: Path) -> None:
    result = run(
        """
        import synapse_retriever
        from synapse_retriever import SynapseStore
        from synapse_retriever.cli import main
        import synapse_retriever.cli.mcp_server
        with SynapseStore("synapses.db") as store:
            store.reinforce(["auth.py", "keys.py"], at=1_600_000_000.0)
            hits = store.recall([("auth.py", 0.9)], at=1_600_000_000.0)
            assert hits[0].id == "auth.py"
        assert main(["stats", "synapses.db", "--json"]) == 0
        assert "synapse_retriever.conversation" not in sys.modules
        """,
        tmp_path,
    )
    assert result.returncode == 0, result.stderr


def test_the_conversation_memory_without_faiss_names_the_extra(tmp_path: Path) -> None:
    result = run(
        """
        try:
            import synapse_retriever.conversation
        except ImportError as exc:
            print(exc)
        else:
            raise SystemExit("imported without faiss")
        """,
        tmp_path,
    )
    assert result.returncode == 0, result.stderr
    assert "pip install 'synapse-retriever[conversation]'" in result.stdout
