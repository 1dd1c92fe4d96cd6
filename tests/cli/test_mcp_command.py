"""``synapse-retriever mcp STORE`` as a command (``cli/mcp_command.py``): it is on the parser
without the ``mcp`` extra, and run without it, it names the extra in one line. The server it
starts is tested in ``test_mcp.py``."""

from __future__ import annotations

from pathlib import Path

from test_without_faiss import run


def test_the_parser_and_its_help_need_no_mcp_extra(tmp_path: Path) -> None:
    result = run(
        """
        from synapse_retriever.cli import build_parser, main
        handler = build_parser().parse_args(["mcp", "s.db"]).handler
        assert handler.__module__ == "synapse_retriever.cli.mcp_command"
        try:
            main(["mcp", "--help"])
        except SystemExit as exit:
            assert exit.code == 0
        assert not any(name.startswith("synapse_retriever.cli.mcp_server") for name in sys.modules)
        """,
        tmp_path,
        hidden="mcp",
    )
    assert result.returncode == 0, result.stderr
    assert "Serve the store to an agent over the Model Context Protocol" in result.stdout


def test_without_the_extra_the_command_names_it_in_one_line(tmp_path: Path) -> None:
    code = "from synapse_retriever.cli import main\nsys.exit(main(['mcp', 's.db']))"
    result = run(code, tmp_path, hidden="mcp")
    assert result.returncode == 2
    assert result.stderr == (
        "synapse-retriever: error: synapse-retriever mcp needs the mcp extra: "
        "pip install 'synapse-retriever[mcp]'\n"
    )
    assert not (tmp_path / "s.db").exists()  # refused before the store is opened
