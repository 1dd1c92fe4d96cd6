"""Storage: row types, the backend protocols, SQLite, and export and import of edges.

The math never touches a database: a store reads and writes through a
:class:`~synapse_retriever.persistence.protocols.Storage`, and a new backend is a new
module here (:mod:`~synapse_retriever.persistence.sqlite` is the embedded one). This
package re-exports only the plain data and the protocols, so that the math can read rows
without loading a backend.
"""

from synapse_retriever.persistence.protocols import Storage, WriteTransaction
from synapse_retriever.persistence.rows import (
    Changes,
    EdgeKey,
    EdgeRow,
    EventRecord,
    ForgetCounts,
    RecentEvent,
    UseColumns,
    UseKey,
    UseRow,
)

__all__ = [
    "Changes",
    "EdgeKey",
    "EdgeRow",
    "EventRecord",
    "ForgetCounts",
    "RecentEvent",
    "Storage",
    "UseColumns",
    "UseKey",
    "UseRow",
    "WriteTransaction",
]
