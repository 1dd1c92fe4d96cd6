"""A snapshot of a mirror's arrays, kept in the database, so that a large store opens fast.

Loading a store reads every edge and use row through Python and builds the adjacency
again (about 2 to 5 s at a million edges). A snapshot holds the arrays those steps make,
as blobs stamped with the storage version they reflect; opening reads them back, checks
them, and applies what the change logs recorded after that version. What is checked,
so that a snapshot is never trusted when it should not be:

- **foreign**: another snapshot format, another schema version, or a configuration that
  keeps another use history or window (the arrays have another shape);
- **truncated or damaged**: a part missing, of another length than its header says, or
  whose CRC-32 differs; arrays that do not fit together (ids out of range, an adjacency
  that does not add up); a header (which has no checksum of its own) whose edge count or
  namespace ids its parts and stamp do not hold, found before anything is allocated by
  them (a digit gone wrong there once asked for 17 TiB at open);
- **stale**: written at a version the change logs no longer reach back to, or at one
  after the store's own.

Any of these, and the store loads everything from its rows instead (as without a
snapshot), and writes a new snapshot when it closes. A configuration whose decay
differs only recomputes the edges' prune times.

Examples
--------
>>> from synapse_retriever import SynapseConfig
>>> from synapse_retriever.mirror.mirror import Mirror
>>> mirror = Mirror(SynapseConfig())
>>> parts = encode(mirror.graph, mirror.uses, mirror.version, schema=4)
>>> sorted(parts)[:3]
['adjacency.edge', 'adjacency.indptr', 'adjacency.other']
>>> decode(parts, SynapseConfig(), schema=4).version
0
>>> decode(parts, SynapseConfig.actr(use_history=4), schema=4)
Traceback (most recent call last):
...
synapse_retriever.mirror.snapshot.SnapshotError: snapshot of use history 8, window 50: \
this configuration keeps 4, 50
"""

from __future__ import annotations

import json
import math
import zlib
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from synapse_retriever.config import SynapseConfig
from synapse_retriever.errors import shown
from synapse_retriever.learning.usage import UseTable
from synapse_retriever.mirror.graph import MemoryGraph

__all__ = ["FORMAT", "HEADER", "Decoded", "SnapshotError", "decode", "encode"]

FORMAT = 1
"""The layout of the parts; a snapshot of another is rebuilt."""

HEADER = "header"
"""The part that describes the others (JSON)."""


class SnapshotError(ValueError):
    """A snapshot that cannot be trusted: foreign, truncated, damaged or stale."""


@dataclass
class Decoded:
    """A snapshot read back: the mirror's graph and uses at storage version ``version``."""

    version: int
    max_node: int
    max_namespace: int
    graph: MemoryGraph
    uses: UseTable


def _decay(config: SynapseConfig, namespaces: list[str]) -> list[Any]:
    """What the edges' prune times depend on, besides the edges."""
    ltp = sorted(ns for ns in namespaces if config.learning.is_ltp_namespace(ns))
    return [
        config.learning.prune_threshold,
        config.learning.ltp_min_count,
        config.learning.ltp_floor,
        ltp,
    ]


def encode(
    graph: MemoryGraph, uses: UseTable, version: int, *, schema: int
) -> dict[str, bytes | memoryview]:
    """The parts of a snapshot of a mirror's ``graph`` and ``uses`` at storage version
    ``version`` (arrays as buffers, not copies), stamped with that version and the storage's
    ``schema`` version: what :func:`decode` reads back as a :class:`Decoded`."""
    values, arrays = graph.arrays()
    arrays = {**arrays, **{f"uses.{k}": v for k, v in uses.arrays().items()}}
    buffers = {name: _buffer(a) for name, a in arrays.items()}
    header = {
        "format": FORMAT,
        "schema": schema,
        "version": version,
        "max_node": graph.max_node,
        "max_namespace": graph.max_namespace,
        "graph": values,
        "uses": {"history": uses.history, "window": uses.window},
        "decay": _decay(graph.config, list(graph.ns_names.values())),
        "arrays": {
            name: {
                "dtype": a.dtype.str,
                "shape": list(a.shape),
                "crc32": zlib.crc32(buffers[name]),
            }
            for name, a in arrays.items()
        },
    }
    return {HEADER: json.dumps(header).encode(), **buffers}


def decode(
    parts: dict[str, bytes],
    config: SynapseConfig,
    *,
    schema: int,
    stamp: tuple[int, int, int] | None = None,
) -> Decoded:
    """The graph and uses ``parts`` hold, checked (see the module docstring); raises
    :class:`SnapshotError` for a snapshot that cannot be trusted, and one whose header does
    not name ``stamp`` (the version, largest node id and largest namespace id stored beside
    it), before anything sized by the header is made."""
    try:
        header = json.loads(parts[HEADER])
        if header["format"] != FORMAT or header["schema"] != schema:
            raise SnapshotError(
                f"snapshot format {header['format']}, schema {header['schema']}: "
                f"this library writes format {FORMAT}, schema {schema}"
            )
        named = (header["version"], header["max_node"], header["max_namespace"])
        if stamp is not None and named != stamp:
            raise SnapshotError(f"snapshot: its header names {shown(named)}, stored {shown(stamp)}")
        kept = header["uses"]
        learning = config.learning
        if (kept["history"], kept["window"]) != (learning.use_history, learning.recent_events):
            raise SnapshotError(
                f"snapshot of use history {kept['history']}, window {kept['window']}: this "
                f"configuration keeps {learning.use_history}, {learning.recent_events}"
            )
        spaces = [int(ns) for ns, _ in header["graph"]["namespaces"]]
        if any(not 0 < ns <= int(header["max_namespace"]) for ns in spaces):
            raise SnapshotError(  # the header alone has no checksum: no array sized by it
                f"snapshot: namespace ids {shown(spaces)} do not fit its header's largest, "
                f"{shown(header['max_namespace'])}"
            )
        arrays = {name: _array(name, spec, parts) for name, spec in header["arrays"].items()}
        graph = MemoryGraph.from_arrays(
            config, header["graph"], {k: v for k, v in arrays.items() if not k.startswith("uses.")}
        )
        uses = UseTable.from_arrays(
            {k[5:]: v for k, v in arrays.items() if k.startswith("uses.")},
            history=config.learning.use_history,
            window=config.learning.recent_events,
        )
        if (graph.max_node, graph.max_namespace) != (header["max_node"], header["max_namespace"]):
            raise SnapshotError("snapshot: its names do not match its header")
        if header["decay"] != _decay(config, list(graph.ns_names.values())):
            graph.refresh_prune_times()  # another decay: the arrays hold, their prune times not
        return Decoded(
            int(header["version"]),
            int(header["max_node"]),
            int(header["max_namespace"]),
            graph,
            uses,
        )
    except SnapshotError:
        raise
    except (KeyError, TypeError, ValueError, UnicodeDecodeError, IndexError) as exc:
        raise SnapshotError(f"snapshot cannot be read: {type(exc).__name__}: {exc}") from None


def _buffer(array: npt.NDArray[Any]) -> memoryview:
    """The bytes of ``array``, C order, without a copy where it is contiguous already."""
    return np.ascontiguousarray(array).reshape(-1).view(np.uint8).data


def _array(name: str, spec: dict[str, Any], parts: dict[str, bytes]) -> npt.NDArray[Any]:
    """Part ``name`` as the array its header entry describes, after checking its length
    and checksum (a view of the part's bytes)."""
    data = parts[name]
    dtype = np.dtype(spec["dtype"])
    shape = tuple(int(n) for n in spec["shape"])
    if len(data) != math.prod(shape) * dtype.itemsize:
        raise SnapshotError(f"snapshot part {name!r} is truncated: {len(data)} bytes")
    if zlib.crc32(data) != spec["crc32"]:
        raise SnapshotError(f"snapshot part {name!r} is damaged: its CRC-32 differs")
    return np.frombuffer(data, dtype).reshape(shape)
