"""The benchmark commands: ``synapse-retriever bench quality``, ``macro``, ``perf``, ``memory`` and
``capture``."""

from __future__ import annotations

import argparse
import json
import math
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rich.table import Table

from synapse_retriever.capture.gitlog import git_folders, parse_since
from synapse_retriever.cli._common import (
    CliError,
    at_least,
    check_inputs,
    check_output,
    check_plot,
    console,
    print_json,
    printable,
    progress_display,
    store_label,
)
from synapse_retriever.clock import SECONDS_PER_DAY
from synapse_retriever.config import SynapseConfig
from synapse_retriever.errors import InvalidValueError, SynapseError, shown

if TYPE_CHECKING:
    from synapse_retriever.cli._common import Commands

__all__ = ["register"]


def _config(overrides: Sequence[str], preset: str | None = None) -> SynapseConfig:
    """The preset (``SynapseConfig()`` by default) with ``--set NAME=VALUE`` overrides: a
    name as :meth:`SynapseConfig.replace` takes it (``keep_bonus`` or ``recall.keep_bonus``)."""
    default = SynapseConfig() if preset is None else SynapseConfig.preset(preset)
    values: dict[str, object] = {}
    for item in overrides:
        name, sep, text = item.partition("=")
        name = name.strip()
        expects = f"--set expects NAME=VALUE with a SynapseConfig field, got {shown(item)}"
        if not sep:
            raise CliError(expects)
        try:
            current = default.value(name)
        except InvalidValueError as error:
            raise CliError(f"{expects}: {error}") from None
        try:
            if isinstance(current, bool):
                if text.lower() not in ("true", "false", "1", "0"):
                    raise ValueError(text)
                values[name] = text.lower() in ("true", "1")
            elif isinstance(current, int):
                values[name] = int(text)
            elif isinstance(current, float):
                values[name] = float(text)
            else:
                raise CliError(f"--set cannot set {name!r} (not a number)")
        except ValueError:
            raise CliError(
                f"--set {name}: expected {type(current).__name__}, got {shown(text)}"
            ) from None
    return default.replace(**values)


def cmd_bench_quality(args: argparse.Namespace) -> int:
    """Recall at the same k on a git history: vector top-k vs the method and baselines."""
    from synapse_retriever.bench.quality import (
        QualitySettings,
        markdown_tables,
        run_quality,
        run_several,
        summary,
        table_rows,
    )
    from synapse_retriever.persistence.postgres import is_postgres_url
    from synapse_retriever.persistence.sqlite import file_path

    histories = [folder for repo in args.git or () for folder in git_folders(repo)]
    check_output(args.json, args.queries, args.store, *(args.plot or []), *histories)
    if args.plot is not None:
        return _plot_quality_reports(args.plot)
    if args.queries is not None:
        report = _bench_queries(args)
    else:
        settings = QualitySettings(
            split=args.split,
            ks=tuple(args.k),
            retriever=args.retriever,
            variants=tuple(args.variant),
            rows=tuple(args.rows) if args.rows else QualitySettings().rows,
            namespace=args.namespace or "shared",
            config=_config(args.set or [], args.preset),
        )
        since = parse_since(args.since) if args.since is not None else None
        if len(args.git) > 1 and args.store is not None:
            raise CliError("--store takes one repository")
        if args.name is not None and len(args.name) != len(args.git):
            raise CliError(
                f"--name takes one label per --git repository: {len(args.name)} for {len(args.git)}"
            )
        if args.store is not None:
            if is_postgres_url(args.store):
                raise CliError("--store with --git is a new SQLite file for the learned graph")
            file_path(args.store)  # another scheme's URL: refused without its password
            if Path(args.store).exists():
                raise CliError(
                    f"--store {args.store!r} exists: give a new file for the learned graph"
                )
            check_output(args.store)
        with progress_display(not args.quiet) as progress:
            if len(args.git) > 1:
                report = run_several(
                    args.git,
                    settings,
                    rev=args.rev,
                    since=since,
                    progress=progress,
                    names=args.name,
                )
            else:
                report = run_quality(
                    args.git[0],
                    settings,
                    rev=args.rev,
                    since=since,
                    progress=progress,
                    store_path=args.store,
                    name=args.name[0] if args.name else None,
                )
    if args.json == "-":
        print_json(report)
        return 0
    if args.json is not None:
        Path(args.json).write_text(json.dumps(report, indent=1) + "\n")
    if args.markdown:
        sys.stdout.write(markdown_tables(report) + "\n")
    else:
        out = console()
        commits = report["commits"]
        if args.queries is not None:
            out.print(
                f"{printable(report['name'])}: {commits['queries']} queries from "
                f"{printable(args.queries)}; "
                "numbers are percent"
            )
        else:
            out.print(
                f"{printable(report['name'])} @ {report['head'][:12]}: {commits['teach']} teaching "
                f"commits up to {commits['split_at']}, {commits['queries']} test queries "
                f"({commits['test_without_query']} test commits only added files), "
                f"baseline {report['settings']['retriever']}; numbers are percent"
            )
        for variant in report["variants"]:
            header, cells = table_rows(report, variant)
            table = Table(*header, title=printable(variant), title_justify="left")
            for line in cells:
                table.add_row(*line)
            out.print(table)
        for sentence in summary(report):
            out.print(sentence)
    if args.json is not None:
        console(stderr=True).print(f"report written to {printable(args.json)}")
    return 0


def _bench_queries(args: argparse.Namespace) -> dict[str, Any]:
    """``bench quality --queries FILE --store STORE``: the report of
    :func:`~synapse_retriever.bench.queries.run_queries`. The store is never written: an
    SQLite file is copied to a temporary one first (the used ids are learned there); a
    PostgreSQL store is read only, so its queries may not carry used ids."""
    import sqlite3
    import tempfile

    from synapse_retriever.bench.queries import read_queries, run_queries
    from synapse_retriever.persistence.postgres import is_postgres_url
    from synapse_retriever.persistence.sqlite import file_path, uri_file
    from synapse_retriever.store import SynapseStore

    if args.store is None:
        raise CliError("--queries needs --store: the store to score the queries over")
    if args.name is not None and len(args.name) > 1:
        raise CliError(f"--queries takes one --name, got {len(args.name)}")
    git_only = {
        "--rev": args.rev != "HEAD",
        "--since": args.since is not None,
        "--rows": bool(args.rows),
        "--variant": args.variant != ["frozen", "online"],
        "--retriever": args.retriever != "tfidf",
        "--split": args.split != 0.8,
    }
    if any(git_only.values()):
        given = [option for option, set_ in git_only.items() if set_]
        raise CliError(f"{', '.join(given)} apply to --git, not to --queries")
    queries = read_queries(args.queries)
    config = _config(args.set or [], args.preset)
    namespace = args.namespace or "personal"
    learns = any(query.used for query in queries)
    label = args.name[0] if args.name else store_label(args.store)
    if is_postgres_url(args.store):
        if learns:
            raise CliError(
                "the queries carry used ids, which would be written to the PostgreSQL store: "
                "leave them out, or score over an SQLite copy"
            )
        with SynapseStore(args.store, config=config, read_only=True) as store:
            return run_queries(store, queries, ks=args.k, namespace=namespace, name=label)
    file_path(args.store)  # another scheme's URL: refused without its password
    local = uri_file(args.store)  # a file: URI names a file as SQLite reads it
    if not Path(local).exists():
        raise CliError(f"--store {args.store!r}: no such file")
    if not Path(local).is_file():
        raise CliError(f"--store {args.store!r} is not a store file")
    with tempfile.TemporaryDirectory() as folder:
        copy = str(Path(folder) / "copy.db")
        source, target = sqlite3.connect(local), sqlite3.connect(copy)
        try:
            source.backup(target)
        except sqlite3.DatabaseError as exc:
            raise CliError(f"--store {args.store!r} is not a store file: {exc}") from None
        finally:
            source.close()
            target.close()
        try:
            opened = SynapseStore(copy, config=config)
        except SynapseError as exc:  # named by the file given, not the copy it is read from
            raise CliError(str(exc).replace(repr(copy), repr(args.store))) from None
        with opened as store:
            report = run_queries(store, queries, ks=args.k, namespace=namespace, name=label)
    report["store"] = store_label(args.store)
    return report


def _read_report(path: str, what: str) -> Any:
    """The JSON document of the saved report at ``path``; a file that cannot be read, is not
    UTF-8 JSON, is nested past the stack or holds an int too long to read is a
    :class:`CliError` saying it is not ``what``."""
    try:
        return json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, ValueError, RecursionError) as exc:  # UnicodeDecodeError: a ValueError
        reason = "nested too deep" if isinstance(exc, RecursionError) else exc
        raise CliError(f"{path!r} is not {what}: {reason}") from None


def _quality_reports(paths: Sequence[str]) -> list[dict[str, Any]]:
    """Saved ``bench quality --json`` reports, one per repository, checked for their rows."""
    check_inputs(*paths)
    reports: list[dict[str, Any]] = []
    for path in paths:
        report = _read_report(path, "a bench quality report")
        if not (
            isinstance(report, dict)
            and isinstance(report.get("name"), str)
            and isinstance(report.get("variants"), dict)
            and report["variants"]
        ):
            raise CliError(f"{path!r} is not a bench quality report (no 'name' and 'variants')")
        if not isinstance(report.get("settings", {}), dict):
            raise CliError(
                f"{path!r} is not a bench quality report: its 'settings' are "
                f"{shown(report['settings'])}, not an object"
            )
        if any(report["name"] == other["name"] for other in reports):
            raise CliError(f"two reports are named {report['name']!r}: one per repository")
        reports.append(report)
    return reports


def _quality_rows(reports: Sequence[dict[str, Any]], path: str) -> set[str]:
    try:
        return {
            row for data in reports[0]["variants"].values() for block in data["by_k"].values()
            for row in block["rows"]
        }  # fmt: skip
    except (KeyError, TypeError, AttributeError):
        raise CliError(f"{path!r} is not a bench quality report (no rows)") from None


def _one_baseline(reports: Sequence[dict[str, Any]], verb: str) -> None:
    """Refuse reports of different vector baselines: their gains are not of one thing, and
    a macro over them (or its plot) would mix them silently."""
    retrievers = {report.get("settings", {}).get("retriever") for report in reports}
    if len(retrievers) > 1:
        raise CliError(f"the reports mix vector baselines ({sorted(map(str, retrievers))}): "
                       f"{verb} one baseline's reports at a time")  # fmt: skip


def _plot_quality_reports(paths: Sequence[str]) -> int:
    """``bench quality --plot SVG REPORT...``: the synapse row's gain over each baseline."""
    from synapse_retriever.bench.macro import plot_gains

    if len(paths) < 2:
        raise CliError("--plot takes the image's path, then one or more --json reports")
    check_plot(paths[0], *paths[1:])
    reports = _quality_reports(paths[1:])
    if "synapse" not in _quality_rows(reports, paths[1]):
        raise CliError(f"{paths[1]!r} has no synapse row to plot")
    _one_baseline(reports, "plot")
    try:
        plot_gains(reports, paths[0])
    except (KeyError, TypeError, ValueError) as exc:
        raise CliError(
            f"the reports do not share the variants, k and rows of the first: {exc}"
        ) from None
    console().print(f"wrote {printable(paths[0])}")
    return 0


def cmd_bench_macro(args: argparse.Namespace) -> int:
    """Macro-averaged tables over several ``bench quality --json`` reports."""
    from synapse_retriever.bench.macro import macro_markdown, recall_markdown

    reports = _quality_reports(args.reports)
    _one_baseline(reports, "average")
    rows = _quality_rows(reports, args.reports[0])
    if args.row not in rows:
        raise CliError(f"--row {args.row!r} is not a row of {args.reports[0]!r}: {sorted(rows)}")
    try:
        tables = (
            recall_markdown(reports),
            macro_markdown(reports, row=args.row, resamples=args.resamples),
        )
    except (KeyError, TypeError) as exc:  # a report without a variant, k or row of the first
        raise CliError(
            f"the reports do not share the variants, k and rows of the first: {exc}"
        ) from None
    sys.stdout.write("\n".join(tables) + "\n")
    return 0


def add_perf_options(perf: argparse.ArgumentParser) -> None:
    """The ``bench perf`` options of batched writes and PostgreSQL (``build_parser`` adds them
    to the ``perf`` parser; :func:`cmd_bench_perf` takes their defaults where absent)."""
    from synapse_retriever.bench.perf import BATCH_EVENTS, POSTGRES_MAX_EDGES

    perf.add_argument(
        "--batches",
        type=at_least(1),
        default=5,
        help=f"batches of {BATCH_EVENTS:,} events for the batched throughput (5)",
    )
    perf.add_argument(
        "--postgres",
        metavar="URL",
        help="also measure on this PostgreSQL server (a role that may create databases: "
        "a throwaway database is created there and dropped afterwards)",
    )
    perf.add_argument(
        "--postgres-max-edges",
        type=at_least(1),
        default=POSTGRES_MAX_EDGES,
        help=f"the largest size grown on PostgreSQL ({POSTGRES_MAX_EDGES:,})",
    )


def cmd_bench_perf(args: argparse.Namespace) -> int:
    """Cost per query and per write on synthetic Zipf graphs of several sizes."""
    import tempfile

    from synapse_retriever.bench.perf import POSTGRES_MAX_EDGES, plot_latency, run_perf

    if not 0 <= args.naive_budget < math.inf:  # NaN timed every query, as no budget at all
        raise CliError(
            f"--naive-budget must be a finite number of seconds >= 0, got {args.naive_budget}"
        )
    check_output(args.json)
    check_plot(args.plot, report=args.json)
    options = vars(args)  # the options of add_perf_options, where the parser has them
    err = console(stderr=True)
    with tempfile.TemporaryDirectory(dir=args.dir) as folder, err.status("graphs") as status:
        results = run_perf(
            Path(folder),
            args.sizes,
            queries=args.queries,
            events=args.events,
            batches=options.get("batches", 5),
            naive_budget_s=args.naive_budget,
            postgres=options.get("postgres"),
            postgres_max_edges=options.get("postgres_max_edges", POSTGRES_MAX_EDGES),
            progress=lambda text: status.update(text) if not args.quiet else None,
        )
    if args.json is not None and args.json != "-":  # before the plot: a run is never lost
        Path(args.json).write_text(json.dumps(results, indent=1) + "\n")
    if args.plot is not None:
        plot_latency(results, Path(args.plot))
    if args.json == "-":
        print_json(results)
        return 0
    table = Table(
        "edges", "max degree", "recall p50 µs", "p99 µs", "repeated p50 µs", "published p50 µs",
        "naive p50 µs",
        "naive ×", "upserts/s", "bare SQLite upserts/s", "batched upserts/s (bare SQLite)",
        "sweep s (day)",
        "sweep s (90 days)", "bare SQLite delete s", "open s", "B/edge (arrays)", "B/edge (RSS)",
        title="synapse-retriever bench perf", title_justify="left",
    )  # fmt: skip
    for r in results:
        table.add_row(
            f"{r['edges']:,}", f"{r['max_degree']:,}", f"{r['recall_p50_us']:,.0f}",
            f"{r['recall_p99_us']:,.0f}", f"{r['repeat_recall_p50_us']:,.0f}",
            f"{r['published_recall_p50_us']:,.0f}",
            f"{r['naive_spread_p50_us']:,.0f}",
            f"{r['naive_ratio']:,.0f}", f"{r['reinforce_upserts_per_s']:,.0f}",
            f"{r['sqlite_floor_upserts_per_s']:,.0f}",
            f"{r['batched_upserts_per_s']:,.0f} ({r['sqlite_floor_batched_upserts_per_s']:,.0f})",
            f"{r['daily_sweep_s']:.3f}", f"{r['decay_sweep_s']:.3f}",
            f"{r['sqlite_floor_delete_s']:.3f}", f"{r['open_load_s']:.2f}",
            f"{r['array_bytes_per_edge']:.0f}", f"{r['rss_bytes_per_edge']:.0f}",
        )  # fmt: skip
    console().print(table)
    writes = Table(
        "edges", "upserts/s, one event: file / memory (bare SQLite)",
        f"batches of {results[0]['batch_events']:,} events: file / memory (bare SQLite)"
        if results else "batched", "open s: rows / snapshot",
        "snapshot B/edge: file / RSS on open",
        title="Writes and opening, file and memory", title_justify="left",
    )  # fmt: skip
    for r in results:
        writes.add_row(
            f"{r['edges']:,}",
            f"{r['reinforce_upserts_per_s']:,.0f} / {r['memory_reinforce_upserts_per_s']:,.0f} "
            f"({r['sqlite_floor_upserts_per_s']:,.0f})",
            f"{r['batched_upserts_per_s']:,.0f} / {r['memory_batched_upserts_per_s']:,.0f} "
            f"({r['sqlite_floor_batched_upserts_per_s']:,.0f})",
            f"{r['open_load_s']:.2f} / "
            + ("-" if r["open_snapshot_s"] is None else f"{r['open_snapshot_s']:.2f}"),
            "-"
            if r["snapshot_bytes_per_edge"] is None
            else f"{r['snapshot_bytes_per_edge']:.0f} / {r['rss_snapshot_bytes_per_edge']:.0f}",
        )
    console().print(writes)
    on_postgres = [r for r in results if r["pg_recall_p50_us"] is not None]
    if on_postgres:
        batch = f"{on_postgres[0]['batch_events']:,}"
        pg = Table(
            "edges", "upserts/s SQLite / PostgreSQL",
            f"batched ({batch} events) SQLite / PostgreSQL",
            "recall p50 µs (shared) SQLite / PostgreSQL", "p99 µs SQLite / PostgreSQL",
            "PostgreSQL grow s", "PostgreSQL open s: rows / snapshot",
            "PostgreSQL snapshot: write s, B/edge",
            title="SQLite and PostgreSQL", title_justify="left",
        )  # fmt: skip
        for r in on_postgres:
            pg.add_row(
                f"{r['edges']:,}",
                f"{r['reinforce_upserts_per_s']:,.0f} / {r['pg_reinforce_upserts_per_s']:,.0f}",
                f"{r['batched_upserts_per_s']:,.0f} / {r['pg_batched_upserts_per_s']:,.0f}",
                f"{r['shared_recall_p50_us']:,.0f} / {r['pg_recall_p50_us']:,.0f}",
                f"{r['shared_recall_p99_us']:,.0f} / {r['pg_recall_p99_us']:,.0f}",
                f"{r['pg_grow_s']:.1f}",
                f"{r['pg_open_load_s']:.2f} / "
                + ("-" if r["pg_open_snapshot_s"] is None else f"{r['pg_open_snapshot_s']:.2f}"),
                "-" if r["pg_snapshot_write_s"] is None
                else f"{r['pg_snapshot_write_s']:.2f}, {r['pg_snapshot_bytes_per_edge']:.0f}",
            )  # fmt: skip
        console().print(pg)
    return 0


def cmd_bench_assembly(args: argparse.Namespace) -> int:
    """How fast conversation memory assembles a context, and adds a turn."""
    from synapse_retriever.bench.assembly import markdown_table, run_assembly_speed

    check_output(args.json)
    err = console(stderr=True)
    with err.status("conversations") as status:
        report = run_assembly_speed(
            turns=args.turns,
            budgets=args.budgets,
            queries=args.queries,
            progress=lambda text: status.update(text) if not args.quiet else None,
        )
    return _report(args.json, report, markdown_table)


def _report(
    output: str | None, report: dict[str, Any], table: Callable[[dict[str, Any]], str]
) -> int:
    """A speed report as JSON (``-``: stdout, else a file, then the table) or a table."""
    if output == "-":
        print_json(report)
        return 0
    if output is not None:
        Path(output).write_text(json.dumps(report, indent=1) + "\n")
    print(table(report))
    return 0


def cmd_bench_retrieve(args: argparse.Namespace) -> int:
    """How fast hybrid retrieval is, what a turn with its graph costs and weighs."""
    from synapse_retriever.bench.retrieval_speed import (
        markdown_table,
        plot_speed,
        run_retrieval_speed,
    )

    check_output(args.json)
    check_plot(args.plot, report=args.json)
    err = console(stderr=True)
    with err.status("conversations") as status:
        report = run_retrieval_speed(
            turns=args.turns,
            adds=args.adds,
            queries=args.queries,
            embedders=args.embedders,
            progress=lambda text: status.update(text) if not args.quiet else None,
            postgres=args.postgres,
            users=args.users,
            user_turns=args.user_turns,
        )
    if args.json not in (None, "-"):  # before the plot: a run is never lost to it
        Path(args.json).write_text(json.dumps(report, indent=1) + "\n")
    if args.plot is not None:  # before the table: a reader that cuts it never loses the plot
        plot_speed(report, args.plot)
    return _report("-" if args.json == "-" else None, report, markdown_table)


def cmd_bench_writers(args: argparse.Namespace) -> int:
    """Writer processes adding turns to users' memories at once: nothing lost or mixed."""
    from synapse_retriever.bench.conversation_writers import markdown_table, run_writers
    from synapse_retriever.bench.places import place

    check_output(args.json)
    with place(args.postgres) as where, console(stderr=True).status("writers"):
        report = run_writers(where, processes=args.processes, turns=args.turns, users=args.users)
    report["backend"] = "sqlite" if args.postgres is None else "postgresql"
    return _report(args.json, report, markdown_table)


def cmd_bench_memory(args: argparse.Namespace) -> int:
    """Planted facts still in the assembled context much later, against two baselines."""
    from synapse_retriever.bench.memory import (
        generate_conversation,
        markdown_table,
        pool_reports,
        run_memory_bench,
    )
    from synapse_retriever.conversation.config import PRESETS, ContextConfig

    check_output(args.json, args.realmem, args.locomo, *(args.plot or []))
    if args.budgets is not None and any(budget < 1 for budget in args.budgets):
        raise CliError(f"budgets must be positive, got {args.budgets}")
    if args.plot is not None:
        return _plot_memory_reports(args.plot)
    if args.realmem is not None and args.locomo is not None:
        raise CliError("--realmem and --locomo are two data sets: give one")
    if args.realmem is not None or args.locomo is not None:
        return _bench_realmem(args)
    if args.personas is not None or args.max_queries is not None or args.retrieve or args.rows:
        raise CliError(
            "--personas, --max-queries, --retrieve and --rows go with --realmem or --locomo"
        )
    args.budgets = args.budgets or [1000, 2000, 4000]
    chosen = args.presets or PRESETS  # all three by default
    presets = {name: ContextConfig.preset(name) for name in dict.fromkeys(chosen)}
    err = console(stderr=True)
    reports = []
    with err.status("conversations") as status:
        for seed in args.seeds:
            try:
                conversation = generate_conversation(
                    turns=args.turns,
                    facts=args.facts,
                    sessions=args.sessions,
                    distractors=args.distractors,
                    seed=seed,
                )
            except ValueError as exc:
                raise CliError(str(exc)) from None

            def progress(text: str, seed: int = seed) -> None:
                if not args.quiet:
                    status.update(f"seed {seed}: {text}")

            reports.append(
                run_memory_bench(conversation, args.budgets, presets=presets, progress=progress)
            )
    report = pool_reports(reports)
    if args.json == "-":
        print_json(report)
        return 0
    if args.json is not None:
        Path(args.json).write_text(json.dumps(report, indent=1) + "\n")
    if args.markdown:
        sys.stdout.write(markdown_table(report) + "\n")
        return 0
    names = [m if m in ("last-N", "vector top-k") else f"synapse ({m})" for m in report["methods"]]
    table = Table(
        "budget (tokens)",
        *names,
        title=(
            f"synapse-retriever bench memory: {report['questions']} planted facts in "
            f"{report['conversations']} conversation(s) of {args.turns} turns"
        ),
        title_justify="left",
    )
    for row in report["rows"]:
        table.add_row(str(row["budget"]), *(f"{100 * row[m]:.1f}%" for m in report["methods"]))
    console().print(table)
    return 0


def cmd_bench_capture(args: argparse.Namespace) -> int:
    """What ``synapse-retriever watch`` costs on a git tree, and an MCP ``recall`` round trip."""
    import importlib.util

    from synapse_retriever.bench.capture import run_capture

    if not 0 < args.idle_s <= SECONDS_PER_DAY:  # inf ended in a traceback, 1e10 never ended
        raise CliError(f"--idle-s must be > 0 and at most 86400 seconds, got {args.idle_s}")
    for module, extra in (("watchdog", "watch"), ("mcp", "mcp")):
        if importlib.util.find_spec(module) is None:
            raise CliError(f"bench capture needs the {extra} extra: pip install "
                           f"'synapse-retriever[{extra}]'")  # fmt: skip
    check_output(args.json)
    err = console(stderr=True)
    report = run_capture(  # progress as lines: a spinner's thread would cost CPU while idle
        files=args.files,
        idle_s=args.idle_s,
        calls=args.calls,
        progress=None if args.quiet else lambda text: err.print(text, style="dim"),
    )
    if args.json == "-":
        print_json(report)
        return 0
    if args.json is not None:
        Path(args.json).write_text(json.dumps(report, indent=1) + "\n")
    watched, served = report["watch"], report["mcp"]
    out = console()
    out.print(
        f"synapse-retriever watch on a git tree of {watched['files']:,} files in "
        f"{watched['folders']:,} folders: start-up {watched['startup_s']:.3f} s, CPU while idle "
        f"{watched['idle_cpu_percent']:.3f}% (over {watched['idle_s']:.1f} s)"
    )
    bursts = Table(
        "saves in a burst", "saved in s", "absorbed in s", "saves/s absorbed", "lost",
        "queue overflows (counted / timed)", title="bursts of saves", title_justify="left",
    )  # fmt: skip
    for row in watched["bursts"]:
        bursts.add_row(
            f"{row['saves']:,}", f"{row['saved_in_s']:.3f}", f"{row['absorbed_in_s']:.3f}",
            "overflowed" if row["saves_per_s"] is None else f"{row['saves_per_s']:,}",
            f"{row['lost']:,}",
            f"{row['overflows']} / {row['timed_overflows']}",
        )  # fmt: skip
    out.print(bursts)
    mcp = Table(
        "calls", "round trip p50 ms", "p90 ms", "in process p50 ms", "ratio", "server start s",
        title=f"MCP recall of {served['hits']} hits ({served['edges']:,} edges)",
        title_justify="left",
    )  # fmt: skip
    mcp.add_row(
        f"{served['calls']:,}", f"{served['p50_ms']:.3f}", f"{served['p90_ms']:.3f}",
        f"{served['in_process_p50_ms']:.3f}", f"{served['ratio']:.1f}×",
        f"{served['server_start_s']:.2f}",
    )  # fmt: skip
    out.print(mcp)
    return 0


def _plot_memory_reports(paths: Sequence[str]) -> int:
    """``bench memory --plot SVG REPORT...``: one panel per saved report."""
    from synapse_retriever.bench.realmem import plot_reports

    if len(paths) < 2:
        raise CliError("--plot takes the image's path, then one or more --json reports")
    check_plot(paths[0], *paths[1:])
    reports = []
    for path in paths[1:]:
        report = _read_report(path, "a bench memory --json report")
        if not isinstance(report, dict) or not {"rows", "budgets", "tables"} <= report.keys():
            raise CliError(f"{path!r} is not a bench memory --json report")
        reports.append(report)
    try:  # the figure is saved last: a report of another shape fails before
        plot_reports(reports, paths[0])
    except (KeyError, TypeError, ValueError, AttributeError, IndexError, OverflowError) as exc:
        raise CliError(
            f"the reports are not bench memory --json reports of rows, budgets and tables "
            f"(read as {type(exc).__name__}: {exc}); {paths[0]!r} was not written"
        ) from None
    console().print(f"wrote {printable(paths[0])}")
    return 0


def _bench_realmem(args: argparse.Namespace) -> int:
    """``bench memory --realmem PATH`` or ``--locomo PATH``: every row on real
    conversations."""
    import logging

    from synapse_retriever.bench.realmem import (
        BUDGETS,
        RealMemFormatError,
        load_realmem,
        markdown_tables,
        run_realmem,
    )
    from synapse_retriever.bench.realmem_retrieve import KS, run_realmem_retrieval
    from synapse_retriever.conversation.embed import Embedder
    from synapse_retriever.conversation.minilm import MiniLmEmbedder, MiniLmUnavailableError

    if args.ks is not None and not args.retrieve:
        raise CliError("--ks goes with --retrieve")
    if args.ks is not None and any(k < 1 for k in args.ks):
        raise CliError(f"--ks must be positive, got {args.ks}")
    if args.retrieve and args.budgets is not None:
        raise CliError("--budgets does not go with --retrieve (use --ks)")
    if args.retrieve and args.rows:
        raise CliError("--rows goes with the budgeted run, not --retrieve")
    if args.presets is not None:
        raise CliError("--presets goes with generated conversations; with --realmem use --rows")
    from synapse_retriever.bench.locomo import load_locomo

    try:
        personas = load_realmem(args.realmem) if args.realmem else load_locomo(args.locomo)
    except (FileNotFoundError, RealMemFormatError) as exc:
        raise CliError(str(exc)) from None
    if args.personas:
        names = [p.name for p in personas]
        first = args.personas[0]
        if len(args.personas) == 1 and first.isdigit() and first not in names:
            personas = personas[: max(1, int(first))]
        else:  # names, a number among them (LoCoMo's zipped conversations: 26, 30, ...)
            unknown = [name for name in args.personas if name not in names]
            if unknown:
                raise CliError(f"--personas: no persona {shown(unknown[0])}; there are {names}")
            personas = [p for p in personas if p.name in args.personas]
    notes: list[str] = []
    minilm: Embedder | None = None
    if args.no_minilm:
        notes.append(
            "MiniLM was left out (--no-minilm): the hashing embedder retrieves."
            if args.retrieve
            else "the MiniLM rows were left out (--no-minilm)."
        )
    else:
        try:
            minilm = MiniLmEmbedder()
        except MiniLmUnavailableError as exc:
            notes.append(f"the MiniLM rows were left out: {exc}.")
    err = console(stderr=True)
    quiet = logging.getLogger("synapse_retriever.conversation")
    level = quiet.level
    quiet.setLevel(logging.ERROR)  # not one warning per query when working memory shrinks
    try:
        with err.status("RealMem" if args.realmem else "LoCoMo") as status:
            if args.retrieve:
                report = run_realmem_retrieval(
                    personas,
                    sorted(set(args.ks or KS)),
                    embedder=minilm,
                    max_queries=args.max_queries,
                    notes=notes,
                    progress=None if args.quiet else status.update,
                )
            else:
                report = run_realmem(
                    personas,
                    args.budgets or BUDGETS,
                    max_queries=args.max_queries,
                    minilm=minilm,
                    notes=notes,
                    progress=None if args.quiet else status.update,
                    rows=args.rows,
                )
    except InvalidValueError as exc:
        raise CliError(str(exc)) from None
    finally:
        quiet.setLevel(level)
    report["dataset"] = "RealMem" if args.realmem else "LoCoMo"
    if args.json == "-":
        print_json(report)
        return 0
    if args.json is not None:
        Path(args.json).write_text(json.dumps(report, indent=1) + "\n")
    if args.markdown:
        sys.stdout.write(markdown_tables(report) + "\n")
        return 0
    every = report["tables"]["all"]
    budgets = [str(b) for b in report["budgets"]]
    by_k = report.get("unit") == "k"
    table = Table(
        "row",
        *((f"k = {b}" if by_k else f"{int(b):,} tokens") for b in budgets),
        title=(
            f"synapse-retriever bench memory {'--realmem' if args.realmem else '--locomo'}: "
            f"{'gold-session' if args.realmem else 'evidence-turn'} recall, "
            f"{every['queries']} queries "
            f"of {len(report['personas'])} persona(s), points against {report['baseline']} "
            f"(95% interval); ceiling {100 * every['ceiling']:.1f}%"
        ),
        title_justify="left",
    )
    for row in report["rows"]:
        cells = []
        for b in budgets:
            stats = every[row][b]
            cell = f"{100 * stats['recall']:.1f}%"
            if row != report["baseline"]:
                cell += (
                    f" ({100 * stats['delta']:+.1f} "
                    f"[{100 * stats['low']:+.1f}, {100 * stats['high']:+.1f}])"
                )
            cells.append(cell)
        table.add_row(row, *cells)
    out = console()
    out.print(table)
    for note in notes:
        out.print(f"Note: {note}")
    return 0


def register(commands: Commands) -> None:
    """Add ``bench`` and its benchmarks: quality, macro, perf, assembly, retrieve, writers,
    capture, memory."""
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
        "--naive-budget",
        type=float,
        default=10.0,
        help="seconds for the naive spread, after its first query (10)",
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
        "--turns",
        type=at_least(2),  # a user turn and its reply: the least a fact is planted in
        nargs="+",
        default=[1000, 10_000],
        help="(1000 10000)",
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
    memory.add_argument("--sessions", type=at_least(1), default=8, help="sessions, a day apart (8)")
    memory.add_argument(
        "--distractors", type=at_least(0), default=20, help="turns on each fact's topic (20)"
    )
    memory.add_argument(
        "--seeds", type=int, nargs="+", default=[1, 2, 3], help="one conversation each (1 2 3)"
    )
    memory.add_argument(
        "--budgets",
        type=int,
        nargs="+",
        help="tokens (1000 2000 4000; with --realmem or --locomo 1000 2000 4000 8000)",
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
        help="with --realmem or --locomo: the first N personas (conversations), or these "
        "names; a number that is a persona's name is that name (all)",
    )
    memory.add_argument(
        "--max-queries",
        type=at_least(1),
        metavar="N",
        help="with --realmem or --locomo: the first N queries of each persona (all)",
    )
    memory.add_argument(
        "--retrieve",
        action="store_true",
        help=(
            "with --realmem or --locomo: score ConversationMemory.retrieve (vector and graph "
            "recall by mode) at --ks instead of assembled contexts; MiniLM is its embedder where "
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
        help="with --realmem or --locomo: leave out the MiniLM rows even where MiniLM is installed",
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
