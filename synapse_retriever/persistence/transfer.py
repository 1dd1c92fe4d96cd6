"""Export and import of edges: JSON and GraphML, and a merge that never loses newer state.

Both formats carry the same attributes per edge, named as in
:meth:`SynapseStore.graph <synapse_retriever.store.SynapseStore.graph>`:

================== ===========================================================
``namespace``      the edge's namespace
``stored_weight``  w0, the weight at its last reinforcement (what import reads)
``weight``         the decayed weight at export time (for viewers; ignored on import)
``count``          activation count
``half_life_days`` the learned half-life
``created_at``     POSIX seconds of the first reinforcement
``last_reinforced_at`` POSIX seconds of the last reinforcement
================== ===========================================================

Merge rule (:func:`merge_edges`), per edge key ``(namespace, a, b)``:

* absent from the store: inserted as it is;
* present, and the incoming edge was reinforced **strictly later**
  (``last_reinforced_at``): the incoming state replaces the stored one, keeping the
  earlier ``created_at`` of the two;
* otherwise the stored edge is at least as new and is kept untouched, and the edge is
  counted in ``kept``: a newer edge is never overwritten.

So importing the same file twice changes nothing the second time, and importing an old
backup over a store that kept learning leaves every edge it relearned alone. Counts
are not added up: two stores that saw the same events would double-count them.

Node uses (what the default ACT-R rule reads) are not exported: a node that has no use
row in an edge's namespace gets one approximated from the merged edges, as a file of
schema version 1 gets at migration (:func:`~synapse_retriever.learning.usage.uses_from_edges`).

Examples
--------
>>> from synapse_retriever import SynapseStore
>>> from synapse_retriever.persistence.sqlite import SQLiteStorage
>>> with SynapseStore(":memory:") as store:
...     _ = store.reinforce(["a", "b"], namespace="shared", at=0)
...     edges = export_edges(store, at=0)
>>> [(e.a, e.b, e.weight) for e in edges]
[('a', 'b', 0.3)]
>>> storage = SQLiteStorage(":memory:")
>>> merge_edges(storage, edges), merge_edges(storage, edges)
(MergeReport(inserted=1, replaced=0, kept=0), MergeReport(inserted=0, replaced=0, kept=1))
"""

from __future__ import annotations

import contextlib
import errno
import io
import json
import os
import re
import stat
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import IO, Any, Literal

from synapse_retriever.capture.coactivation import validate_node_id
from synapse_retriever.clock import (
    MAX_CLOCK_SKEW_S,
    Clock,
    finite_real,
    not_ahead,
    not_before_year_one,
    to_seconds,
)
from synapse_retriever.config import (
    HALF_LIFE_DAYS,
    Operations,
    namespace_list,
    validate_namespace,
)
from synapse_retriever.errors import InvalidValueError, shown
from synapse_retriever.learning.decay import MAX_COUNT
from synapse_retriever.learning.usage import uses_from_edges
from synapse_retriever.mirror.graph import Edge
from synapse_retriever.persistence.protocols import (
    ReplacedTablesError,
    Storage,
    WriteTransaction,
    retrying,
)
from synapse_retriever.persistence.rows import EdgeKey, EdgeRow, UseKey, edge_rows, rows_array
from synapse_retriever.persistence.sqlite import (
    APPLICATION_ID,
    SIDE_FILES,
    in_memory,
    same_file,
    uri_file,
)
from synapse_retriever.store import SynapseStore

__all__ = [
    "FORMAT_NAME",
    "FORMAT_VERSION",
    "SUFFIXES",
    "Format",
    "MergeReport",
    "OutputCutError",
    "check_export_path",
    "database_kind",
    "export_edges",
    "guess_format",
    "merge_edges",
    "not_regular",
    "read_edges",
    "same_file",
    "validate_edges",
    "write_edges",
    "write_whole",
]

FORMAT_NAME = "synapse-retriever/edges"
FORMAT_VERSION = 1

Format = Literal["json", "graphml"]


SUFFIXES: dict[str, Format] = {".json": "json", ".graphml": "graphml", ".xml": "graphml"}
"""The suffixes :func:`guess_format` knows, compared case-insensitively."""


@dataclass(frozen=True)
class MergeReport:
    """What :func:`merge_edges` did: edges inserted, replaced by newer ones, and kept."""

    inserted: int
    replaced: int
    kept: int


def export_edges(
    store: SynapseStore, at: Clock = None, namespaces: str | Iterable[str] | None = None
) -> list[Edge]:
    """The stored state of every edge still live at ``at``, sorted by (namespace, a, b);
    only those of ``namespaces`` (one, or several), given.

    Edges that decayed below the prune threshold are left out: a sweep would delete them.
    The edges are one state of the store, read at once (other processes' writes committed
    meanwhile are not in it).
    """
    graph = store.graph(at=at, namespaces=namespace_list(namespaces))  # a MultiGraph, keyed
    edges: list[Edge] = []
    for u, v, namespace, data in graph.edges(keys=True, data=True):
        a, b = sorted((u, v))
        edges.append(
            Edge(
                a=a,
                b=b,
                namespace=namespace,
                weight=data["stored_weight"],
                activation_count=data["count"],
                half_life_days=data["half_life_days"],
                created_at=data["created_at"],
                last_reinforced_at=data["last_reinforced_at"],
            )
        )
    return sorted(edges, key=lambda e: (e.namespace, e.a, e.b))


def merge_edges(
    storage: Storage,
    edges: Iterable[Edge],
    *,
    max_clock_skew_s: float = MAX_CLOCK_SKEW_S,
    retries: int = Operations.write_retries,
) -> MergeReport:
    """Merge ``edges`` into ``storage`` in one transaction; newer state always wins.

    See the module docstring for the rule. ``storage`` is any
    :class:`~synapse_retriever.persistence.Storage` (for a file:
    ``SQLiteStorage(path)``); a :class:`~synapse_retriever.store.SynapseStore` open on
    the same file picks the changes up like any other process's writes.

    A conflict with another writer (on PostgreSQL) runs the merge again, at most
    ``retries`` times (:func:`~synapse_retriever.persistence.protocols.retrying`).

    Raises
    ------
    InvalidValueError
        An edge that is not a valid stored state, or dated more than
        ``max_clock_skew_s`` ahead of the clock (a millisecond time, say); nothing is
        written.
    """
    checked = validate_edges(edges, max_clock_skew_s=max_clock_skew_s)
    incoming = {(e.namespace, e.a, e.b): e for e in checked}

    def attempt() -> tuple[int, int, int]:
        try:
            with storage.write() as tx:
                return _merge(tx, incoming)
        except ReplacedTablesError:  # read the new tables (whole), then write again, by name
            storage.poll(0, 0, 0)
            raise

    return MergeReport(*retrying(attempt, retries, "merge_edges"))


def validate_edges(
    edges: Iterable[Edge], *, max_clock_skew_s: float = MAX_CLOCK_SKEW_S
) -> list[Edge]:
    """The edges as :func:`merge_edges` would merge them, checked before any store is touched.

    Each edge is checked as a stored state (ids, namespace, weight in (0, 1], count from 1
    to ``MAX_COUNT``, half-life > 0, finite times, created no later than last reinforced,
    last reinforced no more than ``max_clock_skew_s`` ahead of the clock), its ids are put
    in order (``a < b``), and duplicates of one ``(namespace, a, b)`` are folded into the
    newest state with the earliest ``created_at``.

    Raises
    ------
    InvalidValueError
        An edge that is not a valid stored state, named by its position and ids.

    Examples
    --------
    >>> older = Edge("b", "a", "shared", 0.4, 1, 30.0, 0.0, 10.0)
    >>> newer = Edge("a", "b", "shared", 0.7, 3, 30.0, 5.0, 20.0)
    >>> [(e.a, e.b, e.weight, e.created_at) for e in validate_edges([older, newer])]
    [('a', 'b', 0.7, 0.0)]
    >>> validate_edges([Edge("a", "b", "shared", 7.0, 1, 30.0, 0.0, 0.0)])
    Traceback (most recent call last):
    ...
    synapse_retriever.errors.InvalidValueError: edge 0 ('a'-'b'): stored_weight must be in \
(0, 1], got 7.0
    """
    incoming: dict[tuple[str, str, str], Edge] = {}
    for position, edge in enumerate(edges):
        checked = _checked(edge, position, max_clock_skew_s)
        key = (checked.namespace, checked.a, checked.b)
        if key in incoming:
            checked = _newer(incoming[key], checked)
        incoming[key] = checked
    return list(incoming.values())


def _replacement(old: Edge | None, edge: Edge) -> Edge | None:
    """The state to write for ``edge`` given the stored ``old`` one, or None to keep ``old``."""
    if old is None:
        return edge
    if edge.last_reinforced_at > old.last_reinforced_at:
        return replace(edge, created_at=min(edge.created_at, old.created_at))
    return None


def _merge(
    tx: WriteTransaction, incoming: dict[tuple[str, str, str], Edge]
) -> tuple[int, int, int]:
    """Inserted, replaced and kept counts of merging ``incoming`` inside ``tx``."""
    inserted = replaced = kept = 0
    # namespaces first, then nodes, each sorted: the order every writer creates names in
    spaces = {ns: tx.namespace_id(ns) for ns in sorted({ns for ns, _, _ in incoming})}
    names = sorted({n for _, a, b in incoming for n in (a, b)})
    ids = dict(zip(names, tx.node_ids(names), strict=True))
    inserts: list[EdgeRow] = []
    updates: list[EdgeRow] = []
    keys = [EdgeKey(spaces[ns], ids[a], ids[b]) for ns, a, b in incoming]
    stored = {(r.namespace, r.a, r.b): r for r in edge_rows(tx.lock_edges(keys))}
    for ((ns, a, b), edge), key in zip(incoming.items(), keys, strict=True):
        row = stored.get(key)
        blank = row is None or row.activation_count == 0  # a backend's lock on a new pair
        old = None
        if row is not None and not blank:
            old = Edge(
                a=a,
                b=b,
                namespace=ns,
                weight=row.weight,
                activation_count=row.activation_count,
                half_life_days=row.half_life_days,
                created_at=row.created_at,
                last_reinforced_at=row.last_reinforced_at,
            )
        new = _replacement(old, edge)
        if new is None:
            kept += 1
            continue
        inserted += blank
        replaced += not blank
        written = EdgeRow(
            id=0 if row is None else row.id,
            namespace=key.namespace,
            a=key.a,
            b=key.b,
            weight=new.weight,
            activation_count=new.activation_count,
            half_life_days=new.half_life_days,
            created_at=new.created_at,
            last_reinforced_at=new.last_reinforced_at,
        )
        (inserts if row is None else updates).append(written)
    tx.insert(rows_array(inserts))
    tx.update(rows_array(updates))
    _approximate_missing_uses(tx, [*inserts, *updates])
    return inserted, replaced, kept


_TRIM_NOTHING = 2**60
"""``keep`` for an import's recent events: the log of events is left whole (2 × this is past
any count of rows), and the store's next write trims it to its own ``recent_events``."""


def _approximate_missing_uses(tx: WriteTransaction, rows: Sequence[EdgeRow]) -> None:
    """Use rows, approximated from ``rows``, for their nodes that have none yet."""
    by_namespace: dict[int, list[EdgeRow]] = {}
    for row in rows:
        by_namespace.setdefault(row.namespace, []).append(row)
    for ns, edges in sorted(by_namespace.items()):  # the use rows in (namespace, node) order
        nodes = sorted({n for row in edges for n in (row.a, row.b)})
        held = tx.uses_of([UseKey(ns, n) for n in nodes])  # a blank row (no use) is not a use
        missing = set(nodes) - {row.node for row in held if row.uses > 0}
        if not missing:
            continue
        new = [r for r in edges if r.a in missing or r.b in missing]  # all a new node's edges
        uses, events, latest = uses_from_edges(
            (r.a, r.b, ns, r.activation_count, r.created_at, r.last_reinforced_at) for r in new
        )
        tx.write_uses([use for use in uses if use.node in missing])
        tx.add_events(ns, events.get(ns, 0))  # the new nodes' co-uses: not counted before
        tx.log_recent(latest, keep=_TRIM_NOTHING)  # the next write trims to the store's window


def _newer(x: Edge, y: Edge) -> Edge:
    winner = y if y.last_reinforced_at > x.last_reinforced_at else x
    return replace(winner, created_at=min(x.created_at, y.created_at))


def _checked(edge: Edge, position: int, skew_s: float) -> Edge:
    where = f"edge {position}"
    try:
        a, b = validate_node_id(edge.a), validate_node_id(edge.b)
        namespace = validate_namespace(edge.namespace)
    except (TypeError, ValueError) as exc:
        raise InvalidValueError(f"{where}: {exc}") from None
    if a == b:
        raise InvalidValueError(f"{where}: a self-loop on {a!r}")
    if a > b:
        a, b = b, a
    weight = _number(edge.weight, f"{where} ({a!r}-{b!r}): stored_weight")
    if not 0.0 < weight <= 1.0:
        raise InvalidValueError(
            f"{where} ({a!r}-{b!r}): stored_weight must be in (0, 1], got {weight}"
        )
    count = edge.activation_count
    if isinstance(count, bool) or not isinstance(count, int) or not 1 <= count <= MAX_COUNT:
        raise InvalidValueError(
            f"{where} ({a!r}-{b!r}): count must be an integer in [1, {MAX_COUNT}], "
            f"got {shown(count)}"
        )
    half_life = _number(edge.half_life_days, f"{where} ({a!r}-{b!r}): half_life_days")
    low, high = HALF_LIFE_DAYS
    if not low <= half_life <= high:
        raise InvalidValueError(
            f"{where} ({a!r}-{b!r}): half_life_days must be in [{low:g}, {high:g}], got {half_life}"
        )
    created = not_before_year_one(
        _number(edge.created_at, f"{where} ({a!r}-{b!r}): created_at"),
        f"{where} ({a!r}-{b!r}): created_at",
    )
    last = _number(edge.last_reinforced_at, f"{where} ({a!r}-{b!r}): last_reinforced_at")
    if created > last:
        raise InvalidValueError(
            f"{where} ({a!r}-{b!r}): created_at {created} is after last_reinforced_at {last}"
        )
    not_ahead(last, skew_s=skew_s, what=f"{where} ({a!r}-{b!r}): last_reinforced_at")
    return Edge(
        a=a,
        b=b,
        namespace=namespace,
        weight=weight,
        activation_count=count,
        half_life_days=half_life,
        created_at=created,
        last_reinforced_at=last,
    )


def _number(value: object, what: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise InvalidValueError(f"{what} must be a number, got {shown(value)}")
    # an int past a float's range refused too; -0.0 is 0.0, as every backend reads it back
    return finite_real(value, what, "a number") + 0.0


# -- files -------------------------------------------------------------------------------


def guess_format(path: str | os.PathLike[str]) -> Format:
    """The format a file's suffix names: ``json`` for ``.json``, ``graphml`` for ``.graphml``
    and ``.xml``, in any case.

    Any other suffix, or none, is refused rather than guessed: give the format instead.

    Raises
    ------
    InvalidValueError
        The suffix is not one of :data:`SUFFIXES`.

    Examples
    --------
    >>> guess_format("edges.graphml"), guess_format("EDGES.JSON")
    ('graphml', 'json')
    >>> guess_format("edges.txt")
    Traceback (most recent call last):
    ...
    synapse_retriever.errors.InvalidValueError: cannot tell the format of 'edges.txt': its \
suffix '.txt' is not one of .json, .graphml, .xml
    """
    suffix = Path(path).suffix
    if suffix.lower() in SUFFIXES:
        return SUFFIXES[suffix.lower()]
    known = ", ".join(SUFFIXES)
    problem = (
        f"its suffix {suffix!r} is not one of {known}"
        if suffix
        else f"it has no suffix; expected one of {known}"
    )
    raise InvalidValueError(f"cannot tell the format of {os.fspath(path)!r}: {problem}")


def _format(path: str | os.PathLike[str], fmt: object) -> Format:
    """``fmt`` if it is a format, the one ``path``'s suffix names if ``fmt`` is None."""
    if fmt is None:
        return guess_format(path)
    if fmt == "json" or fmt == "graphml":
        return fmt
    raise InvalidValueError(f"format must be 'json' or 'graphml', got {shown(fmt)}")


def check_export_path(
    path: str | os.PathLike[str], *, store_path: str | os.PathLike[str] | None = None
) -> None:
    """Refuse an export path that would overwrite a database: the store's own file (by any
    spelling, ``file:`` URI, symlink or hard link, and its ``-wal``, ``-shm`` and
    ``-journal`` files),
    another synapse store, or any SQLite file (its 16-byte header ``SQLite format 3\\0``);
    and one that is not a regular file, through links (a FIFO, a device such as
    ``/dev/stdout``, a socket), which is never opened.

    :func:`write_edges` calls it before writing anything; a missing or ordinary file passes.

    Raises
    ------
    InvalidValueError
        ``path`` is one of the files above; it is left untouched.

    Examples
    --------
    >>> import os, tempfile
    >>> from synapse_retriever import SynapseStore
    >>> folder = tempfile.mkdtemp()
    >>> store = SynapseStore(os.path.join(folder, "synapses.db"))
    >>> check_export_path(os.path.join(folder, "edges.json"), store_path=store.path)
    >>> try:
    ...     check_export_path(os.path.join(folder, ".", "synapses.db"), store_path=store.path)
    ... except ValueError as error:  # an InvalidValueError
    ...     print(str(error).split(": ", 1)[1])
    it is the store being exported; it was left untouched (export to a .json or .graphml file)
    >>> check_export_path(os.devnull)
    Traceback (most recent call last):
    ...
    synapse_retriever.errors.InvalidValueError: cannot write '/dev/null': it is a device, not a \
regular file; it was left untouched (export to a file; \
synapse-retriever export writes to stdout with -)
    >>> store.close()
    """
    kind = not_regular(path)
    if kind is not None:
        raise InvalidValueError(
            f"cannot write {os.fspath(path)!r}: it is {kind}, not a regular file; it was left "
            "untouched (export to a file; synapse-retriever export writes to stdout with -)"
        )
    what = None
    if store_path is not None and not in_memory(os.fspath(store_path)):
        store_file = uri_file(os.fspath(store_path))  # a file: URI's file, as SQLite opens it
        for suffix, name in [("", "the store being exported")] + [
            (s, f"the store's {s} file") for s in SIDE_FILES
        ]:
            if same_file(path, store_file + suffix):
                what = name
                break
    if what is None:
        what = database_kind(path)
    if what is not None:
        raise InvalidValueError(
            f"cannot write {os.fspath(path)!r}: it is {what}; it was left untouched "
            "(export to a .json or .graphml file)"
        )


def database_kind(path: str | os.PathLike[str]) -> str | None:
    """``"a synapse store"`` or ``"an SQLite database"`` if the file at ``path`` is one (its
    header says so), else None (also for a missing or unreadable file): what a command must
    never overwrite with its output.

    Examples
    --------
    >>> import os, tempfile
    >>> from synapse_retriever import SynapseStore
    >>> folder = tempfile.mkdtemp()
    >>> SynapseStore(os.path.join(folder, "synapses.db")).close()
    >>> database_kind(os.path.join(folder, "synapses.db"))
    'a synapse store'
    >>> database_kind(os.path.join(folder, "report.json")) is None
    True
    """
    try:
        if not os.path.isfile(path):  # never opened: a FIFO or a pipe would block the read
            return None
        with open(path, "rb") as handle:
            header = handle.read(72)
    except (OSError, ValueError):  # unreadable, or not a path: nothing to protect
        return None
    if header[:16] != b"SQLite format 3\x00":
        return None
    synapse = int.from_bytes(header[68:72], "big") == APPLICATION_ID
    return "a synapse store" if synapse else "an SQLite database"


def not_regular(path: str | os.PathLike[str]) -> str | None:
    """What ``path`` is, through links, if it exists and is not a regular file or a folder
    (a folder is refused where the export is written); None otherwise."""
    try:
        mode = os.stat(path).st_mode
    except (OSError, ValueError):  # missing (a new file), or a dangling or looping link
        return None
    if stat.S_ISREG(mode) or stat.S_ISDIR(mode):
        return None
    if stat.S_ISFIFO(mode):
        return "a FIFO (a named pipe)"
    if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
        return "a device"
    return "a socket" if stat.S_ISSOCK(mode) else "not a file"


_NOT_XML = re.compile("[^\t\n\r\x20-\ud7ff\ue000-\ufffd\U00010000-\U0010ffff]")
"""A character outside XML 1.0's ``Char``: C0 controls but tab, LF and CR; U+FFFE, U+FFFF."""


def _refuse_what_xml_cannot_carry(edges: Iterable[Edge], path: str | os.PathLike[str]) -> None:
    """Refuse a GraphML export of an id or namespace holding a character XML 1.0 cannot carry.

    Tab, LF and CR are carried (written as character references), and so is everything
    else: every id GraphML accepts reads back exactly.
    """
    for edge in edges:
        for what, text in (("node id", edge.a), ("node id", edge.b), ("namespace", edge.namespace)):
            found = _NOT_XML.search(text)
            if found is not None:
                raise InvalidValueError(
                    f"cannot write {os.fspath(path)!r} as GraphML: {what} {text!r} holds "
                    f"U+{ord(found.group()):04X}, which XML 1.0 cannot carry; export as JSON "
                    "instead (a .json file), which carries any id"
                )


def _attributes(edge: Edge, at: float, store: SynapseStore) -> dict[str, Any]:
    return {
        "namespace": edge.namespace,
        "stored_weight": edge.weight,
        "weight": edge.weight_at(at, store.config),
        "count": edge.activation_count,
        "half_life_days": edge.half_life_days,
        "created_at": edge.created_at,
        "last_reinforced_at": edge.last_reinforced_at,
    }


def write_edges(
    store: SynapseStore,
    path: str | os.PathLike[str] | IO[bytes],
    *,
    fmt: Format | None = None,
    at: Clock = None,
    namespaces: str | Iterable[str] | None = None,
) -> int:
    """Write the live edges of ``store`` to ``path`` as JSON or GraphML; returns their count.

    ``namespaces`` limits the export to that namespace, or those (to move the team's
    ``shared`` graph from one backend to another, say).

    The format is ``fmt``, else the one the suffix of ``path`` names (:func:`guess_format`).
    The file is written next to ``path`` and renamed into place, so a failed export
    leaves no half-written file; a symbolic link is written through (its target is
    replaced, the link stays). A file replaced keeps its permissions and group (its owner is
    then the exporter, and a hard link to it keeps the old file); one this process may not
    write is refused, as writing it in place would be. A path
    that is a database or not a regular file (a FIFO, a device:
    :func:`check_export_path`) is refused, and so is a GraphML export of an id
    or namespace holding a character that XML 1.0 cannot carry (a NUL, another C0 control
    but tab, LF and CR, U+FFFE, U+FFFF): JSON carries any id.

    ``path`` may also be a binary stream (``sys.stdout.buffer``): the whole export is
    written to it, unclosed, once it is ready; ``fmt`` is then required.

    Raises
    ------
    InvalidValueError
        An unknown format or suffix, a path that is a database or not a regular file, or
        an id GraphML cannot carry; nothing is written.
    IsADirectoryError
        ``path`` is a directory.
    PermissionError
        ``path`` is a file this process may not write; nothing is written.

    Examples
    --------
    >>> import os, tempfile
    >>> from synapse_retriever import SynapseStore
    >>> path = os.path.join(tempfile.mkdtemp(), "edges.graphml")
    >>> with SynapseStore(":memory:") as store:
    ...     _ = store.reinforce(["auth/jwt.py", "config/keys.py"], at=0)
    ...     write_edges(store, path, at=0)
    1
    >>> [(e.a, e.b) for e in read_edges(path)]
    [('auth/jwt.py', 'config/keys.py')]
    """
    now = to_seconds(at)
    if not isinstance(path, (str, os.PathLike)):  # a stream: all of it, once it is ready
        if fmt is None:
            raise InvalidValueError("write_edges to a stream needs fmt='json' or 'graphml'")
        edges = export_edges(store, at=now, namespaces=namespaces)
        document = _document(edges, _format("stream", fmt), now, store, name="the stream")
        write_whole(path, document)
        return len(edges)
    fmt = _format(path, fmt)
    if Path(path).is_dir():
        raise IsADirectoryError(f"cannot write {os.fspath(path)!r}: it is a directory")
    check_export_path(path, store_path=store.path)
    target = Path(os.path.realpath(path))  # through links: the link stays, its target changes
    if target.exists() and not os.access(target, os.W_OK):  # renamed over, it would be replaced
        raise PermissionError(
            errno.EACCES,
            f"cannot write {os.fspath(path)!r}: this process may not write it (its permissions "
            "say so), and an export replaces a file only where it could write it in place",
        )
    edges = export_edges(store, at=now, namespaces=namespaces)
    document = _document(edges, fmt, now, store, name=os.fspath(path))
    temporary: Path | None = None
    try:
        temporary, handle = _new_beside(target)
        with open(handle, "wb") as file:
            file.write(document)
        os.replace(temporary, target)
    except OSError as exc:  # named by the file asked for, not the temporary beside it
        if temporary is not None:
            _remove_quietly(temporary)
        # OSError(errno, ...) is the errno's own class: PermissionError for EACCES, ...
        raise OSError(exc.errno, f"cannot write {os.fspath(path)!r}: {exc.strerror}") from None
    except BaseException:
        if temporary is not None:
            _remove_quietly(temporary)
        raise
    return len(edges)


_NEW_FILE = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0)
"""A file made for this process alone: never one already there, nor a link planted there."""


def _new_beside(target: Path) -> tuple[Path, int]:
    """A new hidden file beside ``target`` (``.NAME.PID.RANDOM.partial``) and a handle open
    to write it, made exclusively (a link planted under its name is never followed), with
    the permissions and group of ``target`` if it is there (an export kept private with
    ``chmod 600`` stays so), else a new file's (``0o666`` less the umask). Where the group
    cannot be kept, the group's permissions are dropped rather than given to another.

    Examples
    --------
    >>> import tempfile
    >>> target = Path(tempfile.mkdtemp()) / "edges.json"
    >>> _ = target.write_text("{}"); target.chmod(0o600)
    >>> temporary, handle = _new_beside(target); os.close(handle)
    >>> oct(stat.S_IMODE(temporary.stat().st_mode)), temporary.name.endswith(".partial")
    ('0o600', True)
    """
    try:
        kept: os.stat_result | None = target.stat()
    except FileNotFoundError:
        kept = None
    for _ in range(100):
        temporary = target.with_name(f".{target.name}.{os.getpid()}.{os.urandom(4).hex()}.partial")
        try:  # private until its permissions are set: nothing can be read from it meanwhile
            handle = os.open(temporary, _NEW_FILE, 0o600 if kept is not None else 0o666)
        except FileExistsError:
            continue
        if kept is None:
            return temporary, handle
        try:
            mode = stat.S_IMODE(kept.st_mode)
            if os.fstat(handle).st_gid != kept.st_gid:
                try:
                    os.fchown(handle, -1, kept.st_gid)
                except OSError:  # not a group of this user's: it reads nothing it did not
                    mode &= ~0o070
            os.fchmod(handle, mode)
        except BaseException:
            os.close(handle)
            _remove_quietly(temporary)
            raise
        return temporary, handle
    raise FileExistsError(errno.EEXIST, f"no new file name beside {os.fspath(target)!r}")


def _remove_quietly(path: Path) -> None:
    """Remove ``path`` if it is there and can be: on a read-only file system even removing
    a file that is not there fails (EROFS), and that must not hide why the write failed."""
    with contextlib.suppress(OSError):
        path.unlink(missing_ok=True)


class OutputCutError(BrokenPipeError):
    """A stream's reader went away before all of an output reached it (:func:`write_whole`)."""


def write_whole(stream: IO[bytes], data: bytes) -> None:
    """Write all of ``data`` to ``stream``, then flush it.

    A pipe whose reader went away (``| head``) may take part of a write without an error:
    CPython's buffered writer returns the count it wrote. What is left is written again, and a
    stream that takes nothing more raises :class:`OutputCutError` (a ``BrokenPipeError``)
    saying how much reached it, so that a cut export is never reported whole.

    Examples
    --------
    >>> buffer = io.BytesIO()
    >>> write_whole(buffer, b"{}")
    >>> buffer.getvalue()
    b'{}'
    """
    view, done = memoryview(data), 0
    try:
        while done < len(view):
            written = stream.write(view[done:])
            if not written:  # nothing taken (a non-blocking stream that is full): no progress
                raise BrokenPipeError(errno.EPIPE, os.strerror(errno.EPIPE))
            done += written
        stream.flush()
    except BrokenPipeError:
        name = str(getattr(stream, "name", "the stream")).strip("<>")
        where = (
            f"{done:,} of {len(view):,} bytes written"
            if done < len(view)  # else its buffer took them all and its flush failed
            else f"its buffer took the {len(view):,} bytes and could not deliver them"
        )
        raise OutputCutError(
            errno.EPIPE,
            f"{name} was closed before all of the output reached it ({where}): the output is "
            "incomplete",
        ) from None


def _document(
    edges: list[Edge], fmt: Format, now: float, store: SynapseStore, *, name: str
) -> bytes:
    """The export of ``edges`` as ``fmt``, encoded (refused before anything is written if
    GraphML cannot carry an id; ``name`` says where it was going)."""
    if fmt == "json":
        document = {
            "format": FORMAT_NAME,
            "version": FORMAT_VERSION,
            "exported_at": now,
            "edges": [{"a": e.a, "b": e.b, **_attributes(e, now, store)} for e in edges],
        }
        return (json.dumps(document, indent=1, ensure_ascii=False) + "\n").encode("utf-8")
    import networkx as nx

    _refuse_what_xml_cannot_carry(edges, name)
    graph = nx.MultiGraph(format=FORMAT_NAME, version=FORMAT_VERSION, exported_at=now)
    for e in edges:
        graph.add_edge(e.a, e.b, key=e.namespace, **_attributes(e, now, store))
    # the ElementTree writer, not lxml's where installed: the one whose round trip of every
    # id the GraphML check lets through is tested
    written = io.BytesIO()
    nx.write_graphml_xml(graph, written)
    return written.getvalue()


def read_edges(
    path: str | os.PathLike[str] | IO[bytes], *, fmt: Format | None = None
) -> list[Edge]:
    """Edges from a file written by :func:`write_edges` (JSON or GraphML).

    The format is ``fmt``, else the one the suffix of ``path`` names (:func:`guess_format`).
    The edges are read, not checked: :func:`validate_edges` checks them.

    ``path`` may also be a binary stream (``sys.stdin.buffer``), read to its end before
    anything is parsed; ``fmt`` is then required, and errors name the stream (``stdin``).

    Raises
    ------
    InvalidValueError
        An unknown format or suffix, a file that is not an export of this library, an
        edge that lacks an attribute, or a GraphML edge whose id (its namespace) repeats one
        between the same two nodes (a GraphML reader keeps one of them, its attributes
        merged with the other's; a JSON file's duplicates are folded by
        :func:`validate_edges`).
    OSError
        The file cannot be read.

    Examples
    --------
    >>> read_edges(io.BytesIO(b"{}"), fmt="json")
    Traceback (most recent call last):
    ...
    synapse_retriever.errors.InvalidValueError: the stream is not a synapse edge export \
(no format 'synapse-retriever/edges')
    """
    if isinstance(path, (str, os.PathLike)):
        fmt = _format(path, fmt)
        name = repr(os.fspath(path))
        data = Path(path).read_bytes()
    else:  # a stream: all of it, then parsed as a file's bytes are
        if fmt is None:
            raise InvalidValueError("read_edges from a stream needs fmt='json' or 'graphml'")
        fmt = _format("stream", fmt)
        name = str(getattr(path, "name", "the stream")).strip("<>")
        data = path.read()
    rows = _json_rows(data, name) if fmt == "json" else _graphml_rows(data, name)
    edges: list[Edge] = []
    for position, row in enumerate(rows):
        try:
            edges.append(
                Edge(
                    a=row["a"],
                    b=row["b"],
                    namespace=row["namespace"],
                    weight=row["stored_weight"],
                    activation_count=row["count"],
                    half_life_days=row["half_life_days"],
                    created_at=row["created_at"],
                    last_reinforced_at=row["last_reinforced_at"],
                )
            )
        except KeyError as missing:
            raise InvalidValueError(f"{name}: edge {position} has no {missing}") from None
        except TypeError:
            raise InvalidValueError(f"{name}: edge {position} is not an object") from None
    return edges


def _json_rows(data: bytes, name: str) -> Sequence[Any]:
    """The edge rows of a JSON export's bytes; ``name`` (quoted if a path) says whose."""
    try:
        document = json.loads(data.decode("utf-8"))
    except UnicodeDecodeError:
        raise InvalidValueError(f"{name} is not a JSON edge export (not UTF-8 text)") from None
    except json.JSONDecodeError as exc:
        raise InvalidValueError(f"{name} is not a JSON edge export ({exc})") from None
    except (RecursionError, ValueError) as exc:  # nested past the stack; an int of 5,000 digits
        raise InvalidValueError(f"{name} is not a JSON edge export ({exc})") from None
    if not isinstance(document, dict) or document.get("format") != FORMAT_NAME:
        raise InvalidValueError(f"{name} is not a synapse edge export (no format {FORMAT_NAME!r})")
    _check_version(name, document.get("version"))
    rows = document.get("edges")
    if not isinstance(rows, list):
        raise InvalidValueError(f"{name} has no list of edges")
    return rows


def _check_version(name: str, version: object) -> None:
    """Refuse an export of another format version than this library writes (any format)."""
    if type(version) is not int or version != FORMAT_VERSION:
        raise InvalidValueError(
            f"{name} has export version {version!r}; this library reads version {FORMAT_VERSION}"
        )


def _graphml_rows(data: bytes, name: str) -> list[dict[str, Any]]:
    """The edge rows of a GraphML export's bytes; ``name`` (quoted if a path) says whose."""
    import networkx as nx
    from networkx.readwrite.graphml import GraphMLReader

    # read_graphml's reader, kept for the tree it parsed (the edges it merged are counted
    # there); a root without GraphML's namespace is read as read_graphml reads it
    reader = GraphMLReader(node_type=_node_id, edge_key_type=str, force_multigraph=True)
    try:
        graphs = list(reader(string=data)) or list(
            reader(string=data.replace(b"<graphml>", _GRAPHML_ROOT))
        )
    except (nx.NetworkXError, SyntaxError, ValueError, KeyError) as exc:  # ParseError: SyntaxError
        raise InvalidValueError(f"{name} is not a GraphML edge export ({exc})") from None
    if not graphs:
        raise InvalidValueError(f"{name} is not a GraphML edge export (no graph in it)")
    graph = graphs[0]  # the first, as read_graphml reads it
    if graph.graph.get("format") != FORMAT_NAME:
        raise InvalidValueError(f"{name} is not a synapse edge export (no format {FORMAT_NAME!r})")
    _check_version(name, graph.graph.get("version"))
    _refuse_merged_edges(reader.xml.find(f"{{{_GRAPHML}}}graph"), graph, name)
    rows = []
    for a, b, key, attrs in graph.edges(keys=True, data=True):
        if _MISSING in (a, b):  # networkx reads it as None, which str() made the id "None"
            other = b if a == _MISSING else a
            end = "no end at all" if other == _MISSING else f"only one end, {other!r}"
            raise InvalidValueError(
                f"{name}: edge {key!r} has no source or target attribute ({end}); "
                "nothing was imported"
            )
        rows.append({"a": a, "b": b, **attrs})
    return rows


_GRAPHML = "http://graphml.graphdrawing.org/xmlns"
_GRAPHML_ROOT = f'<graphml xmlns="{_GRAPHML}">'.encode()


def _refuse_merged_edges(element: Any, graph: Any, name: str) -> None:
    """Refuse a GraphML ``<graph>`` ``element`` of which networkx read fewer edges into
    ``graph`` than it holds (nested graphs' too): two ``<edge>`` elements of one id between
    the same two nodes were merged into one, the later one's attributes over the earlier's
    (our exports never write one; a hand edit can)."""
    elements = list(element.iter(f"{{{_GRAPHML}}}edge"))
    if len(elements) == graph.number_of_edges():
        return
    seen: set[tuple[str, ...]] = set()
    for element in elements:
        ends = [element.get("source") or "", element.get("target") or ""]
        key = (*(ends if graph.is_directed() else sorted(ends)), element.get("id") or "")
        if key in seen:
            raise InvalidValueError(
                f"{name}: edge {key[-1]!r} between {ends[0]!r} and {ends[1]!r} appears "
                "twice (an edge's id is its namespace); nothing was imported"
            )
        seen.add(key)
    raise InvalidValueError(
        f"{name}: {len(elements)} edges, of which {graph.number_of_edges()} could be read "
        "(an edge in a nested graph is not read, nor two apart that share a key); nothing "
        "was imported"
    )


_MISSING = "\0missing"
"""A node id GraphML lacked (an ``<edge>`` without ``source``): a NUL, which XML 1.0 cannot
carry, so no id a file holds is ever read as this one."""


def _node_id(value: object) -> str:
    """A node id as networkx's GraphML reader gives it (None where the attribute is missing),
    as a string: :data:`_MISSING` for None.

    Examples
    --------
    >>> _node_id("a.py"), _node_id(None) == _MISSING
    ('a.py', True)
    """
    return _MISSING if value is None else str(value)
