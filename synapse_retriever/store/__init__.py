"""The store: :class:`SynapseStore` and what it does in its transactions.

- :mod:`~synapse_retriever.store.facade`: :class:`SynapseStore`, the public entry point
  (validate, then one transaction, then the in-memory mirror), and its reports;
- :mod:`~synapse_retriever.store.write`: the write path of ``reinforce``,
  ``reinforce_many`` and ``use``, as named stages (resolve ids, drop replays, step edges,
  record uses, update the mirror);
- :mod:`~synapse_retriever.store.rename`: the rename's algorithm and its lock order.

Examples
--------
>>> from synapse_retriever import CoActivation
>>> from synapse_retriever.store import SynapseStore
>>> with SynapseStore(":memory:") as store:
...     store.reinforce_many([CoActivation(["a", "b"], at=0), CoActivation(["a", "c"], at=0)])
[Reinforced(edges=1, at=0.0, replayed=False), Reinforced(edges=1, at=0.0, replayed=False)]
"""

from synapse_retriever.store.facade import DecayReport, RepairReport, SynapseStore
from synapse_retriever.store.write import Reinforced

__all__ = ["DecayReport", "Reinforced", "RepairReport", "SynapseStore"]
