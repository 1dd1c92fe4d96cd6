"""The ``synapse-retriever`` command: inspect a store, sweep it, move edges in and out, warm it from
git, and benchmark the method.

Every store command takes the store's path first. A missing store (for commands that
only read it), a file that is not a synapse database, a bad export file or a bad git
repository each give one line on stderr, ``synapse-retriever: error: ...``, and exit code 2.

Examples
--------
>>> histogram([0.05, 0.15, 0.15, 1.0], [0.0, 0.1, 0.2, 1.0])  # 1.0 falls in the last bin
[1, 2, 1]
"""

from __future__ import annotations

import argparse
import sqlite3
import sys
from collections.abc import Callable, Sequence
from typing import Any

from synapse_retriever import __version__
from synapse_retriever.cli._common import EXIT_USAGE, CliError, at_least
from synapse_retriever.cli.bench_commands import (
    add_perf_options,
    cmd_bench_assembly,
    cmd_bench_capture,
    cmd_bench_macro,
    cmd_bench_memory,
    cmd_bench_perf,
    cmd_bench_quality,
    cmd_bench_retrieve,
    cmd_bench_writers,
)
from synapse_retriever.cli.store_commands import (
    HALF_LIFE_BINS,
    WEIGHT_BINS,
    cmd_bootstrap,
    cmd_decay,
    cmd_edges,
    cmd_export,
    cmd_import,
    cmd_mcp,
    cmd_rename,
    cmd_repair,
    cmd_stats,
    cmd_watch,
    histogram,
)
from synapse_retriever.errors import SynapseError

__all__ = ["HALF_LIFE_BINS", "WEIGHT_BINS", "build_parser", "histogram", "main"]

PROG = "synapse-retriever"
"""The command's name: the console script the package installs (``[project.scripts]``)."""


def build_parser() -> argparse.ArgumentParser:
    """The ``synapse-retriever`` argument parser."""
    parser = argparse.ArgumentParser(
        prog=PROG,
        description="Inspect, maintain, warm-start and benchmark a synapse-retriever store.",
    )
    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    def store_command(name: str, handler: Callable[[argparse.Namespace], int], help_: str) -> Any:
        sub = commands.add_parser(name, help=help_, description=help_)
        sub.add_argument(
            "store",
            metavar="STORE",
            help="the synapse store: an SQLite file, or a postgresql:// URL",
        )
        sub.set_defaults(handler=handler)
        return sub

    at_help = "time to read the graph at: ISO 8601 or POSIX seconds (default: now)"
    ns_help = "only this namespace (default: all)"

    stats = store_command("stats", cmd_stats, "Nodes, edges per namespace, histograms.")
    stats.add_argument("--at", help=at_help)
    stats.add_argument("--namespace", help=ns_help)
    stats.add_argument("--json", action="store_true", help="print JSON")

    edges = store_command("edges", cmd_edges, "A node's live neighbours, strongest first.")
    edges.add_argument("node", metavar="NODE", help="node id, e.g. a file path")
    edges.add_argument("--at", help=at_help)
    edges.add_argument("--namespace", help=ns_help)
    edges.add_argument("--limit", type=at_least(0), default=50, help="rows to show, 0 for all (50)")
    edges.add_argument("--json", action="store_true", help="print JSON")

    rename = store_command(
        "rename",
        cmd_rename,
        "Move a node to a new id with everything it learned, as a renamed file moves "
        "(synapse-retriever watch does it as files move); refused if the new id has a past.",
    )
    rename.add_argument("old", metavar="OLD", help="the node's id, e.g. a file's old path")
    rename.add_argument("new", metavar="NEW", help="its new id")

    decay = store_command("decay", cmd_decay, "Delete the edges that decayed below the threshold.")
    decay.add_argument("--at", help=at_help)
    decay.add_argument(
        "--dry-run", action="store_true", help="print what would be pruned, delete nothing"
    )
    decay.add_argument(
        "--force",
        action="store_true",
        help="sweep at an --at later than now (it deletes edges that are live today)",
    )
    decay.add_argument("--json", action="store_true", help="print JSON")

    repair = store_command(
        "repair",
        cmd_repair,
        "Remove what was written more than a day ahead of the clock (a millisecond time "
        "read as seconds): such edges never decay and push every later write after them.",
    )
    repair.add_argument(
        "--dry-run", action="store_true", help="print what would be removed, change nothing"
    )
    repair.add_argument("--json", action="store_true", help="print JSON")

    export = store_command("export", cmd_export, "Write the live edges as JSON or GraphML.")
    export.add_argument(
        "output",
        metavar="FILE",
        help="file to write (.json, .graphml or .xml), written through a symbolic link; "
        "never a store, another SQLite file, a FIFO or a device; - writes to stdout "
        "(with --format)",
    )
    export.add_argument(
        "--format", choices=["json", "graphml"], help="default: from the suffix of FILE"
    )
    export.add_argument("--at", help="time the decayed weights are given at (default: now)")
    export.add_argument(
        "--namespace",
        action="append",
        help="export only this namespace (repeatable; default: every namespace)",
    )

    imp = store_command(
        "import",
        cmd_import,
        "Merge an export: new edges are added, an incoming edge replaces a stored one only "
        "if it was reinforced later; a newer stored edge is never overwritten.",
    )
    imp.add_argument("input", metavar="FILE", help="a JSON or GraphML export")
    imp.add_argument(
        "--format",
        choices=["json", "graphml"],
        help="default: from the suffix of FILE (.json, .graphml or .xml)",
    )
    imp.add_argument("--json", action="store_true", help="print JSON")

    boot = store_command(
        "bootstrap",
        cmd_bootstrap,
        "Warm start from git: each non-merge commit touching 2 to 32 files is one "
        "co-activation of its files at the commit's (committer) time. Resumable.",
    )
    boot.add_argument("--git", required=True, metavar="PATH", help="git repository (bare or not)")
    boot.add_argument("--since", metavar="DATE", help="only commits since this ISO 8601 date")
    boot.add_argument("--namespace", default="shared", help="namespace to learn in (shared)")
    boot.add_argument("--rev", default="HEAD", help="history to replay (HEAD)")
    boot.add_argument("--json", action="store_true", help="print JSON")
    boot.add_argument("--quiet", action="store_true", help="no progress bar")

    watch_help = (
        "Learn from a working tree as it is edited: files saved within one activity window "
        "(until QUIET_S seconds pass without a save) are one co-activation event, in the "
        "checked-out branch's namespace. Ctrl-C closes the open window first."
    )
    watching = commands.add_parser("watch", help=watch_help, description=watch_help)
    watching.set_defaults(handler=cmd_watch)
    watching.add_argument("path", metavar="PATH", help="the working tree to watch")
    watching.add_argument(
        "store", metavar="STORE", help="the synapse store: an SQLite file, or a postgresql:// URL"
    )
    watching.add_argument(
        "--quiet-s", type=float, default=300.0, help="seconds without a save that close a window"
    )
    watching.add_argument(
        "--namespace", help="namespace to learn in (default: branch:<checked-out branch>)"
    )
    watching.add_argument("--quiet", action="store_true", help="no status line (for services)")

    store_command(
        "mcp",
        cmd_mcp,
        "Serve the store to an agent over the Model Context Protocol (stdio): the tools "
        "recall, related, record_usage, neighbours and stats. Needs the mcp extra.",
    )

    bench = commands.add_parser("bench", help="Benchmarks.", description="Benchmarks.")
    benches = bench.add_subparsers(dest="bench", required=True, metavar="BENCHMARK")
    quality = benches.add_parser(
        "quality",
        help="Recall at the same k on a git history (time split, commit messages as queries).",
        description=(
            "Split the history in time; for each test commit, query with its message and "
            "score the files it touched: vector top-k vs the same top-k through recall, a "
            "co-change and a recency baseline, a query-blind ACT-R prior and two oracles."
        ),
    )
    quality.set_defaults(handler=cmd_bench_quality)
    source = quality.add_mutually_exclusive_group(required=True)
    source.add_argument(
        "--git",
        nargs="+",
        metavar="PATH",
        help="git repository; two or more: one store learns them all, and injections of "
        "another repository's files are counted as off topic",
    )
    source.add_argument(
        "--queries",
        metavar="FILE",
        help="JSON Lines of your own queries ({hits, relevant, optional query, at, used}), "
        "scored over the store given with --store",
    )
    source.add_argument(
        "--plot",
        nargs="+",
        metavar=("SVG", "REPORT"),
        help="plot saved --json reports instead of running: the image (SVG, PNG or PDF by "
        "its suffix), then one report, or one per repository for the macro gain; the "
        "synapse row's recall gain over each baseline with its 95%% interval",
    )
    quality.add_argument("--rev", default="HEAD", help="history to read (HEAD)")
    quality.add_argument("--since", metavar="DATE", help="only commits since this ISO 8601 date")
    quality.add_argument("--split", type=float, default=0.8, help="teaching share (0.8)")
    quality.add_argument(
        "--k", type=at_least(1), nargs="+", default=[5, 10], help="cut-offs (5 10)"
    )
    quality.add_argument(
        "--retriever",
        default="tfidf",
        choices=["tfidf", "bm25", "minilm"],
        help="vector baseline (tfidf); minilm needs the optional dense packages",
    )
    quality.add_argument(
        "--variant",
        nargs="+",
        default=["frozen", "online"],
        choices=["frozen", "online"],
        help="frozen: learn from teaching commits only; online: also after each query",
    )
    quality.add_argument("--rows", nargs="+", metavar="ROW", help="rows to score (all)")
    quality.add_argument(
        "--namespace",
        help="namespace the graph learns in (shared); with --queries, the active one (personal)",
    )
    quality.add_argument(
        "--preset",
        choices=["actr", "published", "recency"],
        help="configuration of the synapse row (default: SynapseConfig(), the ACT-R rule "
        "gated by association); synapse-published is always published",
    )
    quality.add_argument(
        "--set",
        action="append",
        metavar="NAME=VALUE",
        help="override a SynapseConfig constant, e.g. --set keep_bonus=2.0",
    )
    quality.add_argument(
        "--store",
        metavar="STORE",
        help="with --git (one repository): keep the frozen graph in this new file; with "
        "--queries: the store to score over (an SQLite file is copied first: the queries' "
        "used ids are learned into the copy)",
    )
    quality.add_argument(
        "--name",
        nargs="+",
        help="label in the tables: one per --git repository (default: each folder's name, "
        "'.git' dropped)",
    )
    quality.add_argument("--json", metavar="FILE", help="write the full report ('-': stdout)")
    quality.add_argument("--markdown", action="store_true", help="print Markdown tables")
    quality.add_argument("--quiet", action="store_true", help="no progress bars")

    macro = benches.add_parser(
        "macro",
        help="Macro-average several quality reports (one per repository), with paired CIs.",
        description=(
            "Recall@k of every row per repository and macro-averaged, then one row's "
            "paired gain over each other row with a stratified paired bootstrap 95% "
            "interval and the share of queries that got worse."
        ),
    )
    macro.set_defaults(handler=cmd_bench_macro)
    macro.add_argument("reports", nargs="+", metavar="REPORT", help="bench quality --json files")
    macro.add_argument("--row", default="synapse", help="the row compared with the others")
    macro.add_argument(
        "--resamples", type=at_least(1), default=2000, help="bootstrap resamples (2000)"
    )

    perf = benches.add_parser(
        "perf",
        help="Cost per query and per write on synthetic Zipf graphs of several sizes.",
        description=(
            "Grow co-activation graphs from 10-node Zipf events; measure reinforcement "
            "throughput, recall overhead (p50, p99), a decay sweep, open-and-load, bytes per "
            "edge, and a naive spread with one SQL query per frontier node."
        ),
    )
    perf.set_defaults(handler=cmd_bench_perf)
    perf.add_argument(
        "--sizes", type=at_least(1), nargs="+", default=[10_000, 100_000, 1_000_000], help="edges"
    )
    perf.add_argument("--queries", type=at_least(1), default=300, help="recalls per size (300)")
    perf.add_argument(
        "--events", type=at_least(1), default=200, help="10-node events per size (200)"
    )
    perf.add_argument(
        "--naive-budget", type=float, default=10.0, help="seconds for the naive spread (10)"
    )
    perf.add_argument("--dir", help="folder for the temporary databases (system temp)")
    perf.add_argument("--json", metavar="FILE", help="write the results ('-': stdout)")
    perf.add_argument(
        "--plot",
        metavar="SVG",
        help="plot latency against graph size (SVG, PNG or PDF by its suffix)",
    )
    perf.add_argument("--quiet", action="store_true", help="no progress messages")
    add_perf_options(perf)

    assembly = benches.add_parser(
        "assembly",
        help="Conversation memory: how fast a context is assembled, and a turn added.",
        description=(
            "Add generated conversations of each size to a conversation memory with "
            "background consolidation, timing add_turn; then time assemble for their "
            "questions at each budget (p50, p90, max), with the hashing embedder."
        ),
    )
    assembly.set_defaults(handler=cmd_bench_assembly)
    assembly.add_argument(
        "--turns", type=at_least(1), nargs="+", default=[1000, 10_000], help="(1000 10000)"
    )
    assembly.add_argument(
        "--budgets", type=at_least(1), nargs="+", default=[1000, 4000], help="tokens (1000 4000)"
    )
    assembly.add_argument(
        "--queries", type=at_least(1), default=50, help="assembles per size and budget (50)"
    )
    assembly.add_argument("--json", metavar="FILE", help="write the report ('-': stdout)")
    assembly.add_argument("--quiet", action="store_true", help="no progress messages")

    retrieve = benches.add_parser(
        "retrieve",
        help="Conversation memory: how fast hybrid retrieval is, and a turn with its graph.",
        description=(
            "Store generated conversations of each size in a real SQLite file, time opening "
            "the memory, then add more turns (background consolidation), timing add_turn "
            "at that size; then time retrieve(k=10, mode='auto') for their questions (p50, "
            "p95) and the vector index's and the lexical index's top 100; the graph's size "
            "and the file's bytes per turn. Embedders: hashing (1024 dims) and dense-384 "
            "(hashing projected to MiniLM's 384 dense dims; not MiniLM)."
        ),
    )
    retrieve.set_defaults(handler=cmd_bench_retrieve)
    retrieve.add_argument(
        "--embedders",
        nargs="+",
        choices=["hashing", "dense-384"],
        default=["hashing", "dense-384"],
        help="(hashing dense-384)",
    )
    retrieve.add_argument(
        "--turns", type=at_least(1), nargs="+", default=[10_000, 100_000], help="(10000 100000)"
    )
    retrieve.add_argument(
        "--adds", type=at_least(1), default=1000, help="turns added and timed per size (1000)"
    )
    retrieve.add_argument(
        "--queries", type=at_least(1), default=100, help="retrievals per size (100)"
    )
    retrieve.add_argument(
        "--postgres",
        metavar="URL",
        help="run on PostgreSQL: each size in a new schema of this database (dropped after), "
        "as one user beside --users others",
    )
    retrieve.add_argument(
        "--users", type=at_least(0), default=100, help="with --postgres: other users (100)"
    )
    retrieve.add_argument(
        "--user-turns",
        type=at_least(1),
        default=1000,
        help="with --postgres: turns in each other user's memory (1000)",
    )
    retrieve.add_argument("--json", metavar="FILE", help="write the report ('-': stdout)")
    retrieve.add_argument(
        "--plot",
        metavar="SVG",
        help="draw retrieve and add_turn against size (SVG, PNG or PDF by its suffix)",
    )
    retrieve.add_argument("--quiet", action="store_true", help="no progress messages")

    writers = benches.add_parser(
        "writers",
        help="Conversation memory: processes adding turns to users' memories at once.",
        description=(
            "Start writer processes that each open a memory per user on one database (a "
            "new SQLite file, or with --postgres a new schema, dropped after) and add turns "
            "over the users at once, with background consolidation; then count, for every "
            "user, the turns lost or stored twice, times out of id order, and other users' "
            "turns in its memory or its retrieve results (all expected 0)."
        ),
    )
    writers.set_defaults(handler=cmd_bench_writers)
    writers.add_argument("--postgres", metavar="URL", help="run on PostgreSQL (default: SQLite)")
    writers.add_argument("--processes", type=at_least(1), default=8, help="writers (8)")
    writers.add_argument(
        "--turns", type=at_least(1), default=500, help="turns each writer adds (500)"
    )
    writers.add_argument("--users", type=at_least(1), default=4, help="users (4)")
    writers.add_argument("--json", metavar="FILE", help="write the report ('-': stdout)")

    capture = benches.add_parser(
        "capture",
        help="What synapse-retriever watch costs on a git tree, and an MCP recall round trip.",
        description=(
            "Commit a git tree of small files, watch it (synapse-retriever watch, into an SQLite "
            "store): the start-up, the CPU while idle, the saves per second absorbed from "
            "bursts of saves and how many were lost; then serve a Zipf graph with "
            "synapse-retriever mcp in a subprocess and time recall round trips of 10 hits "
            "(p50, p90) through the official SDK's client, against SynapseStore.recall in process."
        ),
    )
    capture.set_defaults(handler=cmd_bench_capture)
    capture.add_argument(
        "--files", type=at_least(2), default=10_000, help="files in the tree (10000)"
    )
    capture.add_argument(
        "--idle-s", type=float, default=10.0, help="seconds of idle watching measured (10)"
    )
    capture.add_argument(
        "--calls", type=at_least(1), default=300, help="MCP recalls timed, after 20 (300)"
    )
    capture.add_argument("--json", metavar="FILE", help="write the report ('-': stdout)")
    capture.add_argument("--quiet", action="store_true", help="no progress messages")

    memory = benches.add_parser(
        "memory",
        help="Conversation memory: planted facts still in the context much later.",
        description=(
            "Generate long conversations (sessions of small talk, distractor turns on each "
            "fact's topic) with planted facts asked about much later; score the fraction of "
            "facts whose answer is still in the context assembled for the question, for each "
            "preset, against last-N (trim_messages) and vector top-k turns at the same budget. "
            "With --realmem, replay RealMem's real conversations instead and score, for each "
            "query, whether its evidence sessions are in the context; with --locomo, LoCoMo's, "
            "whether its evidence turns are (see docs/benchmarks/conversation-memory.md)."
        ),
    )
    memory.set_defaults(handler=cmd_bench_memory)
    memory.add_argument(
        "--turns", type=at_least(10), default=1000, help="turns per conversation (1000)"
    )
    memory.add_argument(
        "--facts", type=at_least(1), default=16, help="planted facts, at most 16 (16)"
    )
    memory.add_argument("--sessions", type=int, default=8, help="sessions (8)")
    memory.add_argument(
        "--distractors", type=int, default=20, help="turns on each fact's topic (20)"
    )
    memory.add_argument(
        "--seeds", type=int, nargs="+", default=[1, 2, 3], help="one conversation each (1 2 3)"
    )
    memory.add_argument(
        "--budgets",
        type=int,
        nargs="+",
        help="tokens (1000 2000 4000; with --realmem 1000 2000 4000 8000)",
    )
    memory.add_argument(
        "--realmem",
        metavar="PATH",
        help=(
            "score on RealMem instead: a folder of its dataset/*.json files, or one file "
            "(github.com/AvatarMemory/RealMemBench)"
        ),
    )
    memory.add_argument(
        "--plot",
        nargs="+",
        metavar=("SVG", "REPORT"),
        help=(
            "plot saved --json reports instead of running: the image (SVG, PNG or PDF by its "
            "suffix), then one report per panel (recall against k or budget, one line per row)"
        ),
    )
    memory.add_argument(
        "--locomo",
        metavar="PATH",
        help=(
            "score on LoCoMo instead: its locomo10.json, or a folder of one JSON file per "
            "conversation (github.com/snap-research/locomo, CC BY-NC 4.0); every option "
            "of --realmem applies (a conversation is a persona)"
        ),
    )
    memory.add_argument(
        "--personas",
        nargs="+",
        metavar="N|NAME",
        help="with --realmem: the first N personas, or these names (all)",
    )
    memory.add_argument(
        "--max-queries",
        type=at_least(1),
        metavar="N",
        help="with --realmem: the first N queries of each persona (all)",
    )
    memory.add_argument(
        "--retrieve",
        action="store_true",
        help=(
            "with --realmem: score ConversationMemory.retrieve (vector and graph recall "
            "by mode) at --ks instead of assembled contexts; MiniLM is its embedder where "
            "installed (else hashing, and always with --no-minilm)"
        ),
    )
    memory.add_argument(
        "--ks",
        type=int,
        nargs="+",
        help="with --retrieve: how many turns each row retrieves (5 10 20)",
    )
    memory.add_argument(
        "--no-minilm",
        action="store_true",
        help="with --realmem: leave out the MiniLM rows even where MiniLM is installed",
    )
    memory.add_argument(
        "--presets",
        nargs="+",
        choices=["default", "published", "gradient"],  # conversation.config.PRESETS (tested)
        help="ContextConfig presets to score (all three)",
    )
    memory.add_argument(
        "--rows",
        nargs="+",
        metavar="ROW",
        help=(
            "with --realmem or --locomo, budgeted: only these rows and the baseline, e.g. "
            "'default (MiniLM)' 'BM25 top-k' (all; each memory row replays every turn)"
        ),
    )
    memory.add_argument("--json", metavar="FILE", help="write the report ('-': stdout)")
    memory.add_argument("--markdown", action="store_true", help="print a Markdown table")
    memory.add_argument("--quiet", action="store_true", help="no progress messages")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run ``synapse-retriever`` with ``argv`` (default: the command line); the exit code."""
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        handler: Callable[[argparse.Namespace], int] = args.handler
        return handler(args)
    except (CliError, SynapseError, OSError, sqlite3.Error) as exc:
        message = str(exc) if not isinstance(exc, sqlite3.Error) else f"database error: {exc}"
        sys.stderr.write(f"{PROG}: error: {' '.join(message.split())}\n")
        return EXIT_USAGE
    except KeyboardInterrupt:
        sys.stderr.write(f"{PROG}: interrupted\n")
        return 130
