"""The store commands: stats, edges, rename, decay, repair, export, import, bootstrap.

Examples
--------
>>> histogram([0.05, 0.15, 0.15, 1.0], [0.0, 0.1, 0.2, 1.0])  # 1.0 falls in the last bin
[1, 2, 1]
"""

from __future__ import annotations

import argparse
import contextlib
import errno
import os
import secrets
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rich.table import Table

from synapse_retriever.capture.gitlog import parse_since
from synapse_retriever.cli._common import (
    CliError,
    add_store_command,
    at_least,
    check_output,
    console,
    iso,
    open_store,
    parse_time,
    positive_number,
    print_json,
    printable,
    progress_display,
    refuse_memory,
    store_label,
)
from synapse_retriever.cli.reports import neighbour_report, stats_report
from synapse_retriever.config import SynapseConfig
from synapse_retriever.errors import SynapseError
from synapse_retriever.mirror.stats import HALF_LIFE_BINS, WEIGHT_BINS, histogram
from synapse_retriever.persistence.postgres import is_postgres_url

if TYPE_CHECKING:
    from synapse_retriever.cli._common import Commands
    from synapse_retriever.mirror.graph import Edge
    from synapse_retriever.persistence.transfer import Format, MergeReport

__all__ = ["HALF_LIFE_BINS", "WEIGHT_BINS", "histogram", "register"]
# the histograms' bins live with the report, in the core (SynapseStore.stats)


def cmd_stats(args: argparse.Namespace) -> int:
    """Nodes, live edges per namespace, and weight and half-life histograms."""
    now = parse_time(args.at)
    with (
        console(stderr=True).status("reading the graph", spinner="dots"),
        open_store(args.store, must_exist=True, reads_only=True) as store,
    ):
        report = stats_report(store, now, args.namespace, name=store_label(args.store))
    namespaces = report["namespaces"]
    if args.json:
        print_json(report)
        return 0
    out = console()
    out.print(
        f"{printable(report['store'])} at {report['at']}: {report['nodes']} nodes, "
        f"{report['edges']} live edges"
    )
    if not namespaces:
        out.print("no live edges")
        return 0
    table = Table("namespace", "nodes", "edges", "mean weight", "median half-life (days)")
    for ns, row in namespaces.items():
        table.add_row(
            printable(ns),
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


def _histogram_table(title: str, bins: list[dict[str, Any]]) -> Table:
    table = Table(title, "edges", "", title_justify="left")
    peak = max((b["edges"] for b in bins), default=0) or 1
    for b in bins:
        table.add_row(b["bin"], str(b["edges"]), "█" * round(40 * b["edges"] / peak))
    return table


def cmd_edges(args: argparse.Namespace) -> int:
    """A node's live neighbours, strongest first, with decayed weights and half-lives."""
    now = parse_time(args.at)
    with open_store(args.store, must_exist=True, reads_only=True) as store:
        report = neighbour_report(store, args.node, now, args.namespace, args.limit)
    if args.json:
        print_json(report)
        return 0
    listed, total = report["neighbours"], report["total"]
    out = console()
    if not total:
        out.print(f"{printable(repr(args.node))} has no live edges at {iso(now)}")
        return 0
    table = Table(
        "neighbour",
        "namespace",
        "weight",
        "stored",
        "count",
        "half-life (days)",
        "last reinforced",
        title=f"{printable(args.node)} at {iso(now)}: {total} live edge{'s' if total != 1 else ''}",
        title_justify="left",
    )
    for r in listed:
        table.add_row(
            printable(r["neighbour"]),
            printable(r["namespace"]),
            f"{r['weight']:.3f}",
            f"{r['stored_weight']:.3f}",
            str(r["count"]),
            f"{r['half_life_days']:.1f}",
            r["last_reinforced_at"],
        )
    out.print(table)
    if len(listed) < total:
        out.print(f"... {total - len(listed)} more (--limit 0 shows all)")
    return 0


def cmd_rename(args: argparse.Namespace) -> int:
    """Move a node to a new id with its edges and uses (``SynapseStore.rename``)."""
    with open_store(args.store, must_exist=True) as store:
        moved = store.rename(args.old, args.new)
    old, new = printable(args.old), printable(args.new)
    if not moved:  # a typo in the old path, or a rename already made
        console().print(
            f"{old} -> {new}: no edge moved: {printable(repr(args.old))} has no stored edge "
            "(check its spelling; a rename made before moves nothing again)"
        )
        return 0
    edges = "edge" if moved == 1 else "edges"
    console().print(f"{old} -> {new}: {moved} {edges} moved, with its uses")
    return 0


def cmd_decay(args: argparse.Namespace) -> int:
    """Sweep: delete every edge that has decayed below the prune threshold."""
    now = parse_time(args.at)
    kept = args.forget_event_ids
    config = None if kept is None else SynapseConfig().replace(event_ids_kept_days=kept)
    with (
        console(stderr=True).status("sweeping", spinner="dots"),
        open_store(args.store, must_exist=True, config=config, reads_only=args.dry_run) as store,
    ):
        report = store.decay(at=now, dry_run=args.dry_run, force=args.force)
    if args.json:
        print_json(
            {
                "at": iso(report.at),
                "pruned": report.pruned,
                "remaining": report.remaining,
                "pruned_by_namespace": report.pruned_by_namespace,
                "dry_run": report.dry_run,
                "event_ids": report.event_ids,
            }
        )
        return 0
    detail = ", ".join(f"{printable(ns)} {n}" for ns, n in report.pruned_by_namespace.items())
    ids = (
        "" if kept is None else f"{report.event_ids} event id{'' if report.event_ids == 1 else 's'}"
    )
    if report.dry_run:
        console().print(
            f"would prune {report.pruned} of {report.remaining} edges"
            f"{f' ({detail})' if detail else ''}{f' and forget {ids}' if ids else ''} "
            f"at {iso(report.at)}; nothing was deleted (dry run)"
        )
        return 0
    console().print(
        f"pruned {report.pruned} edge{'' if report.pruned == 1 else 's'}"
        f"{f' ({detail})' if detail else ''}, "
        f"{report.remaining} remain{f', forgot {ids}' if ids else ''} (at {iso(report.at)})"
    )
    return 0


def cmd_repair(args: argparse.Namespace) -> int:
    """Remove what was written ahead of the clock (e.g. millisecond times read as seconds)."""
    with open_store(args.store, must_exist=True, reads_only=args.dry_run) as store:
        report = store.repair(dry_run=args.dry_run)
    if args.json:
        print_json(
            {
                "edges": report.edges,
                "uses": report.uses,
                "events": report.events,
                "dry_run": report.dry_run,
            }
        )
        return 0
    verb = "would remove" if report.dry_run else "removed"
    console().print(
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
    """Write the live edges as JSON or GraphML, to a file or (``-``) to stdout."""
    from synapse_retriever.persistence.transfer import check_export_path, write_edges

    now = parse_time(args.at)
    check_output(args.output, args.store)
    streamed = args.output == "-" or _is_stdout(args.output)  # /dev/stdout: no rename over it
    if not streamed:  # never a store, never SQLite, never a FIFO or a device
        check_export_path(args.output, store_path=args.store)
    fmt = _format(args.output, args.format)
    with (
        console(stderr=True).status("exporting", spinner="dots"),
        open_store(args.store, must_exist=True, reads_only=True) as store,
    ):
        target = sys.stdout.buffer if streamed else args.output
        count = write_edges(store, target, fmt=fmt, at=now, namespaces=args.namespace)
    if streamed:  # stdout holds the export alone
        console(stderr=True).print(f"exported {count} live edges to stdout")
    else:
        console().print(f"exported {count} live edges to {printable(args.output)}")
    return 0


def _is_stdout(path: str) -> bool:
    """Whether ``path`` is, through links, the file this process's stdout writes to."""
    try:
        return os.path.samestat(os.stat(path), os.fstat(sys.stdout.fileno()))
    except (OSError, ValueError):  # missing; or no stdout with a descriptor
        return False


def cmd_import(args: argparse.Namespace) -> int:
    """Merge edges from a JSON or GraphML export, a file or (``-``) stdin; a newer stored
    edge is never overwritten.

    The whole export is read and checked before the store is opened or created; a new
    store gets its name only once it holds the whole merge (:func:`_merge_into`).
    """
    from synapse_retriever.persistence.sqlite import file_path
    from synapse_retriever.persistence.transfer import read_edges, validate_edges

    streamed = args.input == "-"
    if streamed:
        if sys.stdin is None or sys.stdin.isatty():  # a terminal: it would wait for typing
            raise CliError("import - reads an export from stdin: pipe one in (export STORE -)")
    elif Path(args.input).is_dir():
        raise CliError(f"cannot read {args.input!r}: it is a directory, not an export file")
    elif not (Path(args.input).is_file() or Path(args.input).is_fifo()):  # a pipe: /dev/stdin
        raise CliError(f"no export file at {args.input!r}")
    fmt = _format(args.input, args.format)
    if not is_postgres_url(args.store):
        file_path(args.store)  # another scheme's URL: refused without its password
        if not Path(args.store).parent.is_dir():
            raise CliError(f"cannot create {args.store!r}: no such directory")
    with console(stderr=True).status("importing", spinner="dots"):
        edges = read_edges(sys.stdin.buffer if streamed else args.input, fmt=fmt)
        validate_edges(edges)  # a bad file creates nothing and changes nothing
        report = _merge_into(args.store, edges)
    if args.json:
        print_json({"inserted": report.inserted, "replaced": report.replaced, "kept": report.kept})
        return 0
    console().print(
        f"{len(edges)} edges read from {'stdin' if streamed else printable(args.input)}: "
        f"{report.inserted} inserted, "
        f"{report.replaced} replaced by newer ones, {report.kept} kept "
        "(the store's edge was as new or newer)"
    )
    return 0


def _merge_into(path: str, edges: list[Edge]) -> MergeReport:
    """Merge ``edges`` into the store at ``path`` (one transaction). A new store is built
    beside ``path`` and linked to its name once it is whole: a failure, or the process
    killed (``kill -9``), never leaves a store at ``path`` that holds part of the export
    or none of it."""
    from synapse_retriever.persistence.postgres import PostgresStorage
    from synapse_retriever.persistence.sqlite import check_location, file_path
    from synapse_retriever.persistence.transfer import merge_edges

    if is_postgres_url(path):  # a server's database: one transaction, nothing to remove
        shared = PostgresStorage(path, listen=False)
        try:
            return merge_edges(shared, edges)
        finally:
            shared.close()
    path = file_path(path)  # a folder's name, say, is refused before a file is made
    refuse_memory(path)
    check_location(path)  # what a store there would refuse, named by the path asked for
    if path.startswith("file:") or os.path.lexists(path):  # a URI's file is SQLite's to find
        return _merge_into_file(path, edges)
    target = Path(path)
    partial = target.with_name(f".synapse-import-{os.getpid()}-{secrets.token_hex(4)}.partial")
    try:
        report = _merge_into_file(str(partial), edges, whole=True)
        placed = _place(partial, target)
    except SynapseError as exc:  # named by the path asked for, not the file beside it
        raise type(exc)(str(exc).replace(repr(str(partial)), repr(path))) from None
    finally:
        for suffix in ("", "-wal", "-shm", "-journal"):
            with contextlib.suppress(OSError):  # what is left is hidden, and safe to delete
                Path(f"{partial}{suffix}").unlink(missing_ok=True)
    return report if placed else _merge_into_file(path, edges)


def _place(whole: Path, target: Path) -> bool:
    """Give the closed store ``whole`` the name ``target`` unless another process took that
    name meanwhile (its store is then merged into instead); whether it was placed."""
    try:
        os.link(whole, target)  # never replaces what is there
    except FileExistsError:
        return False
    except OSError as exc:
        if exc.errno not in (errno.EPERM, errno.ENOTSUP, errno.EXDEV):
            raise
        if os.path.lexists(target):  # a file system without hard links: a rename, checked first
            return False
        os.rename(whole, target)
    return True


def _merge_into_file(path: str, edges: list[Edge], *, whole: bool = False) -> MergeReport:
    """Merge ``edges`` into the SQLite store at ``path``, created if missing; a damaged
    file is refused before anything is written. ``whole``: its write-ahead log is copied
    into it before it closes, so the file alone holds the store (a full disk raises)."""
    from synapse_retriever.persistence.sqlite import SQLiteStorage
    from synapse_retriever.persistence.transfer import merge_edges

    storage = SQLiteStorage(path)  # refuses foreign files; an empty file becomes a store
    try:
        storage.check()
        report = merge_edges(storage, edges)
        if whole:
            storage.checkpoint()
        return report
    finally:
        storage.close()


def cmd_bootstrap(args: argparse.Namespace) -> int:
    """Warm start: replay a git history as co-activation events (resumable)."""
    from synapse_retriever.capture.bootstrap import replay
    from synapse_retriever.capture.gitlog import read_commits
    from synapse_retriever.config import validate_namespace

    validate_namespace(args.namespace)
    since = parse_since(args.since) if args.since is not None else None
    with console(stderr=True).status("reading git history", spinner="dots"):
        commits = read_commits(args.git, rev=args.rev, since=since)
    with (
        open_store(args.store, must_exist=False) as store,
        progress_display(not args.quiet) as progress,
    ):
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
        "renamed": report.renamed,
        "first": iso(report.first_time) if report.first_time is not None else None,
        "last": iso(report.last_time) if report.last_time is not None else None,
        "namespace": args.namespace,
    }
    if args.json:
        print_json(data)
        return 0
    span = f" ({data['first']} to {data['last']})" if data["first"] else ""
    lines = [
        f"{report.commits} non-merge commits read, {report.eligible} touch 2 to 32 files{span}",
        f"replayed {report.replayed} into {printable(repr(args.namespace))} "
        f"({report.edges_written} edge "
        f"upserts); {report.already_seen} were already replayed",
    ]
    if report.renamed:
        files = "file" if report.renamed == 1 else "files"
        lines.append(f"{report.renamed} {files} renamed in the history took their edges along")
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
    console().print("\n".join(lines))
    return 0


def register(commands: Commands) -> None:
    """Add the store commands: stats, edges, rename, decay, repair, export, import, bootstrap."""
    at_help = "time to read the graph at: ISO 8601 or POSIX seconds (default: now)"
    ns_help = "only this namespace (default: all)"

    stats = add_store_command(
        commands, "stats", cmd_stats, "Nodes, edges per namespace, histograms."
    )
    stats.add_argument("--at", help=at_help)
    stats.add_argument("--namespace", help=ns_help)
    stats.add_argument("--json", action="store_true", help="print JSON")

    edges = add_store_command(
        commands, "edges", cmd_edges, "A node's live neighbours, strongest first."
    )
    edges.add_argument("node", metavar="NODE", help="node id, e.g. a file path")
    edges.add_argument("--at", help=at_help)
    edges.add_argument("--namespace", help=ns_help)
    edges.add_argument("--limit", type=at_least(0), default=50, help="rows to show, 0 for all (50)")
    edges.add_argument("--json", action="store_true", help="print JSON")

    rename = add_store_command(
        commands,
        "rename",
        cmd_rename,
        "Move a node to a new id with everything it learned, as a renamed file moves "
        "(synapse-retriever watch does it as files move); refused if the new id has a past.",
    )
    rename.add_argument("old", metavar="OLD", help="the node's id, e.g. a file's old path")
    rename.add_argument("new", metavar="NEW", help="its new id")

    decay = add_store_command(
        commands, "decay", cmd_decay, "Delete the edges that decayed below the threshold."
    )
    decay.add_argument("--at", help=at_help)
    decay.add_argument(
        "--dry-run", action="store_true", help="print what would be pruned, delete nothing"
    )
    decay.add_argument(
        "--force",
        action="store_true",
        help="sweep at an --at later than now (it deletes edges that are live today)",
    )
    decay.add_argument(
        "--forget-event-ids",
        type=positive_number,
        metavar="DAYS",
        help="also forget the event ids not seen (recorded, or sent again) within DAYS days "
        "before --at (an event sent again after that is learned again); by default they are "
        "kept for good",
    )
    decay.add_argument("--json", action="store_true", help="print JSON")

    repair = add_store_command(
        commands,
        "repair",
        cmd_repair,
        "Remove what was written more than a day ahead of the clock (a millisecond time "
        "read as seconds): such edges never decay and push every later write after them.",
    )
    repair.add_argument(
        "--dry-run", action="store_true", help="print what would be removed, change nothing"
    )
    repair.add_argument("--json", action="store_true", help="print JSON")

    export = add_store_command(
        commands, "export", cmd_export, "Write the live edges as JSON or GraphML."
    )
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

    imp = add_store_command(
        commands,
        "import",
        cmd_import,
        "Merge an export: new edges are added, an incoming edge replaces a stored one only "
        "if it was reinforced later; a newer stored edge is never overwritten.",
    )
    imp.add_argument(
        "input", metavar="FILE", help="a JSON or GraphML export, or - for stdin (with --format)"
    )
    imp.add_argument(
        "--format",
        choices=["json", "graphml"],
        help="default: from the suffix of FILE (.json, .graphml or .xml)",
    )
    imp.add_argument("--json", action="store_true", help="print JSON")

    boot = add_store_command(
        commands,
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
