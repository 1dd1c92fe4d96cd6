"""What a store command prints with ``--json`` and the MCP tool of the same name returns: one
function each, so the command line and the server cannot drift apart.

Examples
--------
>>> from synapse_retriever import SynapseStore
>>> with SynapseStore(":memory:") as store:
...     _ = store.reinforce(["auth/jwt.py", "config/keys.py"], at=0)
...     report = neighbour_report(store, "auth/jwt.py", 0.0, None, 10)
>>> # one use, at the time it was made: the first reinforcement's weight, 0.30, undecayed
>>> [(row["neighbour"], row["weight"], row["count"]) for row in report["neighbours"]]
[('config/keys.py', 0.3, 1)]
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from synapse_retriever.clock import iso

if TYPE_CHECKING:
    from synapse_retriever.store import SynapseStore

__all__ = ["neighbour_report", "stats_report"]


def stats_report(
    store: SynapseStore, at: float, namespace: str | None, *, name: str
) -> dict[str, Any]:
    """What ``synapse-retriever stats --json`` prints (and the MCP ``stats`` tool returns):
    :meth:`SynapseStore.stats` labelled ``name``."""
    return store.stats(at, namespace, name=name)


def neighbour_report(
    store: SynapseStore, node: str, at: float, namespace: str | None, limit: int
) -> dict[str, Any]:
    """What ``synapse-retriever edges --json`` prints (and the MCP ``neighbours`` tool returns): the
    node's live edges at ``at``, strongest first, the first ``limit`` of them (0: all)."""
    found = store.neighbours(node, at=at, namespace=namespace)
    rows = [
        {
            "neighbour": other,
            "namespace": edge.namespace,
            "weight": weight,
            "stored_weight": edge.weight,
            "count": edge.activation_count,
            "half_life_days": edge.half_life_days,
            "last_reinforced_at": iso(edge.last_reinforced_at),
        }
        for other, edge, weight in found
    ]
    listed = rows[:limit] if limit else rows
    return {"node": node, "at": iso(at), "neighbours": listed, "total": len(rows)}
