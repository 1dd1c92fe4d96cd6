"""The ``synapse`` command: inspect a store, sweep it, move edges in and out, warm it from
git, and benchmark the method.

Every store command takes the store's path first. A missing store (for commands that
only read it), a file that is not a synapse database, a bad export file or a bad git
repository each give one line on stderr, ``synapse: error: ...``, and exit code 2.

Examples
--------
>>> histogram([0.05, 0.15, 0.15, 1.0], [0.0, 0.1, 0.2, 1.0])  # 1.0 falls in the last bin
[1, 2, 1]
"""

from __future__ import annotations

import argparse
import json
import math
import sqlite3
import statistics
import sys
from collections import defaultdict
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import fields, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rich.console import Console
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    TaskID,
    TextColumn,
    TimeElapsedColumn,
    TimeRemainingColumn,
)
from rich.table import Table

from synapse_retriever import __version__
from synapse_retriever.clock import to_seconds
from synapse_retriever.config import SynapseConfig
from synapse_retriever.errors import SynapseError
from synapse_retriever.gitlog import parse_since
from synapse_retriever.store import SynapseStore

if TYPE_CHECKING:
    from synapse_retriever.memory.graph import Edge
    from synapse_retriever.persistence.transfer import Format, MergeReport

__all__ = ["HALF_LIFE_BINS", "WEIGHT_BINS", "histogram", "main"]

WEIGHT_BINS = [i / 10 for i in range(11)]
"""Edges of the weight histogram: ten bins of 0.1 (1.0 falls in the last)."""

HALF_LIFE_BINS = [0.0, 7.0, 14.0, 30.0, 60.0, 90.0, 120.0, math.inf]
"""Edges of the half-life histogram, in days (30 and 60 are the personal and shared defaults)."""

EXIT_USAGE = 2


class CliError(Exception):
    """A problem the user can fix; printed as one line, exit code 2."""


def histogram(values: Sequence[float], edges: Sequence[float]) -> list[int]:
    """Counts of ``values`` in the bins ``[edges[i], edges[i+1])``; the last bin is closed.

    Values outside ``[edges[0], edges[-1]]`` are not counted.

    Examples
    --------
    Half-lives of 3, 30, 30 and 200 days in the bins <7, 7–30, ≥30:

    >>> histogram([3.0, 30.0, 30.0, 200.0], [0.0, 7.0, 30.0, math.inf])
    [1, 0, 3]
    """
    counts = [0] * (len(edges) - 1)
    last = len(counts) - 1
    for value in values:
        for i in range(len(counts)):
            low, high = edges[i], edges[i + 1]
            if low <= value < high or (i == last and value == high):
                counts[i] += 1
                break
    return counts


def _bin_label(low: float, high: float, *, digits: int) -> str:
    if math.isinf(high):
        return f"≥ {low:.{digits}f}"
    return f"{low:.{digits}f} – {high:.{digits}f}"


# -- plumbing ---------------------------------------------------------------------------


def _console(stderr: bool = False) -> Console:
    console = Console(stderr=stderr, highlight=False)
    if not console.is_terminal:
        console.width = 200  # no terminal: do not wrap tables at 80 columns
    return console


def _time(text: str | None) -> float:
    """``--at``: ISO 8601 (a date or naive time is UTC), POSIX seconds, or None for now."""
    if text is None or text == "now":
        return to_seconds(None)
    try:
        seconds = to_seconds(float(text))
    except ValueError:
        seconds = parse_since(text)
    try:
        datetime.fromtimestamp(seconds, UTC)
    except (OverflowError, ValueError, OSError):
        raise CliError(f"--at {text!r} is out of range (years 1 to 9999)") from None
    return seconds


def _iso(seconds: float) -> str:
    """ISO 8601 in UTC; a time no calendar date can show (a store written in milliseconds
    before such times were refused) as its seconds."""
    try:
        moment = datetime.fromtimestamp(seconds, UTC)
    except (OverflowError, ValueError, OSError):
        return f"{seconds:.0f} s (beyond year 9999: synapse repair removes it)"
    return moment.isoformat(timespec="seconds").replace("+00:00", "Z")


def _open(path: str, *, must_exist: bool) -> SynapseStore:
    if must_exist and not Path(path).exists():
        raise CliError(f"no synapse database at {path!r}")
    if must_exist and Path(path).is_file() and Path(path).stat().st_size == 0:
        raise CliError(f"{path!r} is empty, not a synapse database; it was left untouched")
    if not must_exist and not Path(path).parent.is_dir():
        raise CliError(f"cannot create {path!r}: no directory {str(Path(path).parent)!r}")
    return SynapseStore(path)


def _check_output(path: str | None) -> None:
    """Refuse, before any work, an output file that could not be written (``-``: stdout)."""
    if path is None or path == "-":
        return
    if Path(path).is_dir():
        raise CliError(f"cannot write {path!r}: it is a directory")
    if not Path(path).parent.is_dir():
        raise CliError(f"cannot write {path!r}: no such directory")


def _at_least(low: int) -> Callable[[str], int]:
    """An argparse type: an integer of at least ``low``."""

    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected an integer, got {text!r}") from None
        if value < low:
            raise argparse.ArgumentTypeError(f"must be at least {low}, got {value}")
        return value

    return parse


@contextmanager
def _progress(enabled: bool = True) -> Iterator[Callable[[str, int, int], None]]:
    """A rich progress display on stderr and a ``(phase, done, total)`` callback for it."""
    console = _console(stderr=True)
    progress = Progress(
        TextColumn("{task.description:<16}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        TimeRemainingColumn(),
        console=console,
        transient=True,
        disable=not (enabled and console.is_terminal),  # no bars in logs and pipes
    )
    tasks: dict[str, TaskID] = {}

    def update(phase: str, done: int, total: int) -> None:
        if phase not in tasks:
            tasks[phase] = progress.add_task(phase, total=total)
        progress.update(tasks[phase], completed=done, total=total)

    with progress:
        yield update


def _print_json(data: Any) -> None:
    sys.stdout.write(json.dumps(data, indent=2, ensure_ascii=False) + "\n")


# -- commands ---------------------------------------------------------------------------


def cmd_stats(args: argparse.Namespace) -> int:
    """Nodes, live edges per namespace, and weight and half-life histograms."""
    now = _time(args.at)
    with (
        _console(stderr=True).status("reading the graph", spinner="dots"),
        _open(args.store, must_exist=True) as store,
    ):
        graph = store.graph(at=now, namespaces=args.namespace)
    per_ns: defaultdict[str, list[tuple[str, str, dict[str, Any]]]] = defaultdict(list)
    for a, b, attrs in graph.edges(data=True):
        per_ns[attrs["namespace"]].append((a, b, attrs))
    weights = [attrs["weight"] for _, _, attrs in graph.edges(data=True)]
    half_lives = [attrs["half_life_days"] for _, _, attrs in graph.edges(data=True)]
    namespaces = {
        ns: {
            "nodes": len({n for a, b, _ in edges for n in (a, b)}),
            "edges": len(edges),
            "mean_weight": statistics.fmean(e[2]["weight"] for e in edges),
            "median_half_life_days": statistics.median(e[2]["half_life_days"] for e in edges),
        }
        for ns, edges in sorted(per_ns.items())
    }
    report = {
        "store": args.store,
        "at": _iso(now),
        "nodes": graph.number_of_nodes(),
        "edges": graph.number_of_edges(),
        "namespaces": namespaces,
        "weight_histogram": _bins(weights, WEIGHT_BINS, digits=1),
        "half_life_histogram_days": _bins(half_lives, HALF_LIFE_BINS, digits=0),
    }
    if args.json:
        _print_json(report)
        return 0
    out = _console()
    out.print(
        f"{args.store} at {report['at']}: {report['nodes']} nodes, {report['edges']} live edges"
    )
    if not namespaces:
        out.print("no live edges")
        return 0
    table = Table("namespace", "nodes", "edges", "mean weight", "median half-life (days)")
    for ns, row in namespaces.items():
        table.add_row(
            ns,
            str(row["nodes"]),
            str(row["edges"]),
            f"{row['mean_weight']:.3f}",
            f"{row['median_half_life_days']:.1f}",
        )
    out.print(table)
    for title, bins in (
        ("decayed weight", report["weight_histogram"]),
        ("half-life (days)", report["half_life_histogram_days"]),
    ):
        out.print(_histogram_table(title, bins))
    return 0


def _bins(values: Sequence[float], edges: Sequence[float], *, digits: int) -> list[dict[str, Any]]:
    counts = histogram(values, edges)
    return [
        {"bin": _bin_label(edges[i], edges[i + 1], digits=digits), "edges": count}
        for i, count in enumerate(counts)
    ]


def _histogram_table(title: str, bins: list[dict[str, Any]]) -> Table:
    table = Table(title, "edges", "", title_justify="left")
    peak = max((b["edges"] for b in bins), default=0) or 1
    for b in bins:
        table.add_row(b["bin"], str(b["edges"]), "█" * round(40 * b["edges"] / peak))
    return table


def cmd_edges(args: argparse.Namespace) -> int:
    """A node's live neighbours, strongest first, with decayed weights and half-lives."""
    now = _time(args.at)
    with _open(args.store, must_exist=True) as store:
        found = store.neighbours(args.node, at=now, namespace=args.namespace)
    rows: list[dict[str, Any]] = [
        {
            "neighbour": other,
            "namespace": edge.namespace,
            "weight": weight,
            "stored_weight": edge.weight,
            "count": edge.activation_count,
            "half_life_days": edge.half_life_days,
            "last_reinforced_at": _iso(edge.last_reinforced_at),
        }
        for other, edge, weight in found
    ]
    shown = rows[: args.limit] if args.limit else rows
    if args.json:
        _print_json({"node": args.node, "at": _iso(now), "neighbours": shown, "total": len(rows)})
        return 0
    out = _console()
    if not rows:
        out.print(f"{args.node!r} has no live edges at {_iso(now)}")
        return 0
    table = Table(
        "neighbour",
        "namespace",
        "weight",
        "stored",
        "count",
        "half-life (days)",
        "last reinforced",
        title=f"{args.node} at {_iso(now)}: {len(rows)} live edge{'s' if len(rows) != 1 else ''}",
        title_justify="left",
    )
    for r in shown:
        table.add_row(
            r["neighbour"],
            r["namespace"],
            f"{r['weight']:.3f}",
            f"{r['stored_weight']:.3f}",
            str(r["count"]),
            f"{r['half_life_days']:.1f}",
            r["last_reinforced_at"],
        )
    out.print(table)
    if len(shown) < len(rows):
        out.print(f"... {len(rows) - len(shown)} more (--limit 0 shows all)")
    return 0


def cmd_decay(args: argparse.Namespace) -> int:
    """Sweep: delete every edge that has decayed below the prune threshold."""
    now = _time(args.at)
    with (
        _console(stderr=True).status("sweeping", spinner="dots"),
        _open(args.store, must_exist=True) as store,
    ):
        report = store.decay(at=now, dry_run=args.dry_run, force=args.force)
    if args.json:
        _print_json(
            {
                "at": _iso(report.at),
                "pruned": report.pruned,
                "remaining": report.remaining,
                "pruned_by_namespace": report.pruned_by_namespace,
                "dry_run": report.dry_run,
            }
        )
        return 0
    detail = ", ".join(f"{ns} {n}" for ns, n in report.pruned_by_namespace.items())
    verb = "would prune" if report.dry_run else "pruned"
    _console().print(
        f"{verb} {report.pruned} edges{f' ({detail})' if detail else ''}, "
        f"{report.remaining} remain (at {_iso(report.at)})"
        + ("; nothing was deleted (dry run)" if report.dry_run else "")
    )
    return 0


def cmd_repair(args: argparse.Namespace) -> int:
    """Remove what was written ahead of the clock (e.g. millisecond times read as seconds)."""
    with _open(args.store, must_exist=True) as store:
        report = store.repair(dry_run=args.dry_run)
    if args.json:
        _print_json(
            {
                "edges": report.edges,
                "uses": report.uses,
                "events": report.events,
                "dry_run": report.dry_run,
            }
        )
        return 0
    verb = "would remove" if report.dry_run else "removed"
    _console().print(
        f"{verb} what was written ahead of the clock: {report.edges} edges, "
        f"{report.uses} use times, {report.events} events"
        + ("; nothing was changed (dry run)" if report.dry_run else "")
    )
    return 0


def _format(path: str, given: Format | None) -> Format:
    """``--format``, else the format the suffix of ``path`` names; refused before any work."""
    from synapse_retriever.persistence.transfer import guess_format

    if given is not None:
        return given
    try:
        return guess_format(path)
    except SynapseError as exc:
        raise CliError(f"{exc}; name the format with --format json or graphml") from None


def cmd_export(args: argparse.Namespace) -> int:
    """Write the live edges as JSON or GraphML."""
    from synapse_retriever.persistence.transfer import check_export_path, write_edges

    now = _time(args.at)
    _check_output(args.output)
    check_export_path(args.output, store_path=args.store)  # never a store, never SQLite
    fmt = _format(args.output, args.format)
    with (
        _console(stderr=True).status("exporting", spinner="dots"),
        _open(args.store, must_exist=True) as store,
    ):
        count = write_edges(store, args.output, fmt=fmt, at=now)
    _console().print(f"exported {count} live edges to {args.output}")
    return 0


def cmd_import(args: argparse.Namespace) -> int:
    """Merge edges from a JSON or GraphML export; a newer stored edge is never overwritten.

    The whole export is read and checked before the store is opened or created, and a
    store this command created is removed again if the merge fails.
    """
    from synapse_retriever.persistence.transfer import read_edges, validate_edges

    source = Path(args.input)
    if not source.is_file():
        raise CliError(f"no export file at {args.input!r}")
    fmt = _format(args.input, args.format)
    if not Path(args.store).parent.is_dir():
        raise CliError(f"cannot create {args.store!r}: no such directory")
    with _console(stderr=True).status("importing", spinner="dots"):
        edges = read_edges(source, fmt=fmt)
        validate_edges(edges)  # a bad file creates nothing and changes nothing
        report = _merge_into(args.store, edges)
    if args.json:
        _print_json({"inserted": report.inserted, "replaced": report.replaced, "kept": report.kept})
        return 0
    _console().print(
        f"{len(edges)} edges read from {args.input}: {report.inserted} inserted, "
        f"{report.replaced} replaced by newer ones, {report.kept} kept "
        "(the store's edge was as new or newer)"
    )
    return 0


def _merge_into(path: str, edges: list[Edge]) -> MergeReport:
    """Merge ``edges`` into the store at ``path`` (one transaction); a store that this call
    creates is removed, with its ``-wal``, ``-shm`` and ``-journal`` files, if the merge fails."""
    from synapse_retriever.persistence import SQLiteStorage
    from synapse_retriever.persistence.transfer import merge_edges

    try:
        Path(path).touch(exist_ok=False)  # exclusive: the file is this command's own
        created = True
    except FileExistsError:
        created = False
    try:
        storage = SQLiteStorage(path)  # refuses foreign files; an empty file becomes a store
        try:
            storage.check()  # a damaged file is refused before anything is written
            return merge_edges(storage, edges)
        finally:
            storage.close()
    except BaseException:
        if created:
            for suffix in ("", "-wal", "-shm", "-journal"):
                Path(path + suffix).unlink(missing_ok=True)
        raise


def cmd_bootstrap(args: argparse.Namespace) -> int:
    """Warm start: replay a git history as co-activation events (resumable)."""
    from synapse_retriever.bootstrap import replay
    from synapse_retriever.config import validate_namespace
    from synapse_retriever.gitlog import read_commits

    validate_namespace(args.namespace)
    since = parse_since(args.since) if args.since is not None else None
    with _console(stderr=True).status("reading git history", spinner="dots"):
        commits = read_commits(args.git, rev=args.rev, since=since)
    with _open(args.store, must_exist=False) as store, _progress(not args.quiet) as progress:
        report = replay(
            store,
            commits,
            namespace=args.namespace,
            progress=lambda done, total: progress("replaying commits", done, total),
        )
    data = {
        "commits": report.commits,
        "eligible": report.eligible,
        "replayed": report.replayed,
        "already_seen": report.already_seen,
        "clamped": report.clamped,
        "edges_written": report.edges_written,
        "ahead_of_clock": report.ahead,
        "first": _iso(report.first_time) if report.first_time is not None else None,
        "last": _iso(report.last_time) if report.last_time is not None else None,
        "namespace": args.namespace,
    }
    if args.json:
        _print_json(data)
        return 0
    span = f" ({data['first']} to {data['last']})" if data["first"] else ""
    lines = [
        f"{report.commits} non-merge commits read, {report.eligible} touch 2 to 32 files{span}",
        f"replayed {report.replayed} into {args.namespace!r} ({report.edges_written} edge "
        f"upserts); {report.already_seen} were already replayed",
    ]
    if report.clamped:
        lines.append(
            f"{report.clamped} commits were older than an edge they reinforce and were "
            "replayed at that edge's last reinforcement instead"
        )
    if report.ahead:
        lines.append(
            f"{report.ahead} commits dated more than a day ahead of the clock were skipped "
            "(a committer's clock set wrong: such a time would never decay)"
        )
    _console().print("\n".join(lines))
    return 0


def _config(overrides: Sequence[str], preset: str | None = None) -> SynapseConfig:
    known = {f.name: f for f in fields(SynapseConfig)}
    values: dict[str, Any] = {}
    default = SynapseConfig() if preset is None else SynapseConfig.preset(preset)
    for item in overrides:
        name, sep, text = item.partition("=")
        name = name.strip()
        if not sep or name not in known:
            raise CliError(f"--set expects NAME=VALUE with a SynapseConfig field, got {item!r}")
        current = getattr(default, name)
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
                f"--set {name}: expected {type(current).__name__}, got {text!r}"
            ) from None
    return replace(default, **values)


def cmd_bench_quality(args: argparse.Namespace) -> int:
    """Recall at the same k on a git history: vector top-k vs the method and baselines."""
    from synapse_retriever.bench.quality import (
        QualitySettings,
        markdown_tables,
        run_quality,
        summary,
        table_rows,
    )

    settings = QualitySettings(
        split=args.split,
        ks=tuple(args.k),
        retriever=args.retriever,
        variants=tuple(args.variant),
        rows=tuple(args.rows) if args.rows else QualitySettings().rows,
        namespace=args.namespace,
        config=_config(args.set or [], args.preset),
    )
    since = parse_since(args.since) if args.since is not None else None
    if args.store is not None:
        if Path(args.store).exists():
            raise CliError(f"--store {args.store!r} exists: give a new file for the learned graph")
        _check_output(args.store)
    _check_output(args.json)
    with _progress(not args.quiet) as progress:
        report = run_quality(
            args.git,
            settings,
            rev=args.rev,
            since=since,
            progress=progress,
            store_path=args.store,
            name=args.name,
        )
    if args.json == "-":
        _print_json(report)
        return 0
    if args.json is not None:
        Path(args.json).write_text(json.dumps(report, indent=1) + "\n")
    if args.markdown:
        sys.stdout.write(markdown_tables(report) + "\n")
    else:
        out = _console()
        commits = report["commits"]
        out.print(
            f"{report['name']} @ {report['head'][:12]}: {commits['teach']} teaching commits "
            f"up to {commits['split_at']}, {commits['queries']} test queries "
            f"({commits['test_without_query']} test commits only added files), "
            f"baseline {settings.retriever}; numbers are percent"
        )
        for variant in report["variants"]:
            header, cells = table_rows(report, variant)
            table = Table(*header, title=variant, title_justify="left")
            for line in cells:
                table.add_row(*line)
            out.print(table)
        for sentence in summary(report):
            out.print(sentence)
    if args.json is not None:
        _console(stderr=True).print(f"report written to {args.json}")
    return 0


def cmd_bench_macro(args: argparse.Namespace) -> int:
    """Macro-averaged tables over several ``bench quality --json`` reports."""
    from synapse_retriever.bench.macro import macro_markdown, recall_markdown

    reports: list[dict[str, Any]] = []
    for path in args.reports:
        try:
            report = json.loads(Path(path).read_text())
        except ValueError as exc:
            raise CliError(f"{path!r} is not a bench quality report: {exc}") from None
        if not (
            isinstance(report, dict)
            and isinstance(report.get("name"), str)
            and isinstance(report.get("variants"), dict)
            and report["variants"]
        ):
            raise CliError(f"{path!r} is not a bench quality report (no 'name' and 'variants')")
        if any(report["name"] == other["name"] for other in reports):
            raise CliError(f"two reports are named {report['name']!r}: one per repository")
        reports.append(report)
    try:
        rows = {
            row for data in reports[0]["variants"].values() for block in data["by_k"].values()
            for row in block["rows"]
        }  # fmt: skip
    except (KeyError, TypeError, AttributeError):
        raise CliError(f"{args.reports[0]!r} is not a bench quality report (no rows)") from None
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


def cmd_bench_perf(args: argparse.Namespace) -> int:
    """Cost per query and per write on synthetic Zipf graphs of several sizes."""
    import tempfile

    from synapse_retriever.bench.perf import plot_latency, run_perf

    _check_output(args.json)
    _check_output(args.plot)
    console = _console(stderr=True)
    with tempfile.TemporaryDirectory(dir=args.dir) as folder, console.status("graphs") as status:
        results = run_perf(
            Path(folder),
            args.sizes,
            queries=args.queries,
            events=args.events,
            naive_budget_s=args.naive_budget,
            progress=lambda text: status.update(text) if not args.quiet else None,
        )
    if args.plot is not None:
        plot_latency(results, Path(args.plot))
    if args.json == "-":
        _print_json(results)
        return 0
    if args.json is not None:
        Path(args.json).write_text(json.dumps(results, indent=1) + "\n")
    table = Table(
        "edges", "max degree", "recall p50 µs", "p99 µs", "repeated p50 µs", "published p50 µs",
        "naive p50 µs",
        "naive ×", "upserts/s", "bare SQLite upserts/s", "sweep s (day)", "sweep s (90 days)",
        "bare SQLite delete s", "open s", "B/edge (arrays)", "B/edge (RSS)",
        title="synapse bench perf", title_justify="left",
    )  # fmt: skip
    for r in results:
        table.add_row(
            f"{r['edges']:,}", f"{r['max_degree']:,}", f"{r['recall_p50_us']:,.0f}",
            f"{r['recall_p99_us']:,.0f}", f"{r['repeat_recall_p50_us']:,.0f}",
            f"{r['published_recall_p50_us']:,.0f}",
            f"{r['naive_spread_p50_us']:,.0f}",
            f"{r['naive_ratio']:,.0f}", f"{r['reinforce_upserts_per_s']:,.0f}",
            f"{r['sqlite_floor_upserts_per_s']:,.0f}",
            f"{r['daily_sweep_s']:.3f}", f"{r['decay_sweep_s']:.3f}",
            f"{r['sqlite_floor_delete_s']:.3f}", f"{r['open_load_s']:.2f}",
            f"{r['array_bytes_per_edge']:.0f}", f"{r['rss_bytes_per_edge']:.0f}",
        )  # fmt: skip
    _console().print(table)
    return 0


def cmd_bench_memory(args: argparse.Namespace) -> int:
    """Planted facts still in the assembled context much later, against two baselines."""
    from synapse_retriever.bench.memory import (
        generate_conversation,
        markdown_table,
        pool_reports,
        run_memory_bench,
    )
    from synapse_retriever.context.config import ContextConfig

    _check_output(args.json)
    if any(budget < 1 for budget in args.budgets):
        raise CliError(f"budgets must be positive, got {args.budgets}")
    presets = {name: ContextConfig.preset(name) for name in dict.fromkeys(args.presets)}
    console = _console(stderr=True)
    reports = []
    with console.status("conversations") as status:
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
        _print_json(report)
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
            f"synapse bench memory: {report['questions']} planted facts in "
            f"{report['conversations']} conversation(s) of {args.turns} turns"
        ),
        title_justify="left",
    )
    for row in report["rows"]:
        table.add_row(str(row["budget"]), *(f"{100 * row[m]:.1f}%" for m in report["methods"]))
    _console().print(table)
    return 0


# -- parser -----------------------------------------------------------------------------


def build_parser() -> argparse.ArgumentParser:
    """The ``synapse`` argument parser."""
    parser = argparse.ArgumentParser(
        prog="synapse",
        description="Inspect, maintain, warm-start and benchmark a synapse-retriever store.",
    )
    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    def store_command(name: str, handler: Callable[[argparse.Namespace], int], help_: str) -> Any:
        sub = commands.add_parser(name, help=help_, description=help_)
        sub.add_argument("store", metavar="STORE", help="path of the synapse database (SQLite)")
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
    edges.add_argument(
        "--limit", type=_at_least(0), default=50, help="rows to show, 0 for all (50)"
    )
    edges.add_argument("--json", action="store_true", help="print JSON")

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
        help="file to write (.json, .graphml or .xml); never a store or another SQLite file",
    )
    export.add_argument(
        "--format", choices=["json", "graphml"], help="default: from the suffix of FILE"
    )
    export.add_argument("--at", help="time the decayed weights are given at (default: now)")

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
    quality.add_argument("--git", required=True, metavar="PATH", help="git repository")
    quality.add_argument("--rev", default="HEAD", help="history to read (HEAD)")
    quality.add_argument("--since", metavar="DATE", help="only commits since this ISO 8601 date")
    quality.add_argument("--split", type=float, default=0.8, help="teaching share (0.8)")
    quality.add_argument(
        "--k", type=_at_least(1), nargs="+", default=[5, 10], help="cut-offs (5 10)"
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
    quality.add_argument("--namespace", default="shared", help="namespace the graph learns in")
    quality.add_argument(
        "--preset",
        choices=["actr", "published"],
        help="configuration of the synapse row (default: SynapseConfig(), the ACT-R rule); "
        "synapse-published is always published",
    )
    quality.add_argument(
        "--set",
        action="append",
        metavar="NAME=VALUE",
        help="override a SynapseConfig constant, e.g. --set keep_bonus=2.0",
    )
    quality.add_argument("--store", metavar="STORE", help="keep the frozen graph in this new file")
    quality.add_argument("--name", help="repository label in the tables")
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
        "--resamples", type=_at_least(1), default=2000, help="bootstrap resamples (2000)"
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
        "--sizes", type=_at_least(1), nargs="+", default=[10_000, 100_000, 1_000_000], help="edges"
    )
    perf.add_argument("--queries", type=_at_least(1), default=300, help="recalls per size (300)")
    perf.add_argument(
        "--events", type=_at_least(1), default=200, help="10-node events per size (200)"
    )
    perf.add_argument(
        "--naive-budget", type=float, default=10.0, help="seconds for the naive spread (10)"
    )
    perf.add_argument("--dir", help="folder for the temporary databases (system temp)")
    perf.add_argument("--json", metavar="FILE", help="write the results ('-': stdout)")
    perf.add_argument("--plot", metavar="PNG", help="plot latency against graph size")
    perf.add_argument("--quiet", action="store_true", help="no progress messages")

    memory = benches.add_parser(
        "memory",
        help="Conversation memory: planted facts still in the context much later.",
        description=(
            "Generate long conversations (sessions of small talk, distractor turns on each "
            "fact's topic) with planted facts asked about much later; score the fraction of "
            "facts whose answer is still in the context assembled for the question, for each "
            "preset, against last-N (trim_messages) and vector top-k turns at the same budget."
        ),
    )
    memory.set_defaults(handler=cmd_bench_memory)
    memory.add_argument(
        "--turns", type=_at_least(10), default=1000, help="turns per conversation (1000)"
    )
    memory.add_argument(
        "--facts", type=_at_least(1), default=16, help="planted facts, at most 16 (16)"
    )
    memory.add_argument("--sessions", type=int, default=8, help="sessions (8)")
    memory.add_argument(
        "--distractors", type=int, default=20, help="turns on each fact's topic (20)"
    )
    memory.add_argument(
        "--seeds", type=int, nargs="+", default=[1, 2, 3], help="one conversation each (1 2 3)"
    )
    memory.add_argument(
        "--budgets", type=int, nargs="+", default=[1000, 2000, 4000], help="tokens (1000 2000 4000)"
    )
    memory.add_argument(
        "--presets",
        nargs="+",
        default=["default", "published"],
        choices=["default", "published"],
        help="ContextConfig presets to score (default published)",
    )
    memory.add_argument("--json", metavar="FILE", help="write the report ('-': stdout)")
    memory.add_argument("--markdown", action="store_true", help="print a Markdown table")
    memory.add_argument("--quiet", action="store_true", help="no progress messages")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run ``synapse`` with ``argv`` (default: the command line); returns the exit code."""
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        handler: Callable[[argparse.Namespace], int] = args.handler
        return handler(args)
    except (CliError, SynapseError, OSError, sqlite3.Error) as exc:
        message = str(exc) if not isinstance(exc, sqlite3.Error) else f"database error: {exc}"
        sys.stderr.write(f"synapse: error: {' '.join(message.split())}\n")
        return EXIT_USAGE
    except KeyboardInterrupt:
        sys.stderr.write("synapse: interrupted\n")
        return 130


if __name__ == "__main__":
    sys.exit(main())
