"""Helpers for tests of what a store keeps in memory: a mirror loaded from a storage's rows,
and a mirror's state by name, to compare a mirror a write updated with a fresh load."""

from __future__ import annotations

from synapse_retriever import SynapseConfig
from synapse_retriever.mirror.graph import Edge
from synapse_retriever.mirror.mirror import Mirror
from synapse_retriever.persistence import Storage, UseRow


def loaded(storage: Storage, config: SynapseConfig | None = None) -> Mirror:
    """A mirror loaded from every row of ``storage``: what a freshly opened store holds."""
    mirror = Mirror(config or SynapseConfig())
    mirror.load(storage)
    return mirror


def state(mirror: Mirror) -> tuple[list[Edge], list[tuple[str, str, UseRow]]]:
    """A mirror's edges and use rows, by name (comparable across mirrors of one storage)."""
    graph = mirror.graph
    edges = sorted(graph.edges(graph.live_ids()), key=lambda e: (e.namespace, e.a, e.b))
    nodes = sorted(graph.index.values())
    uses = sorted(
        (graph.ns_names[ns], graph.names[row.node], row)
        for ns in graph.ns_names
        for row in mirror.uses.rows(ns, nodes)
    )
    return edges, uses
