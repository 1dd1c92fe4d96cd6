"""Storage: row types, the backend protocols, SQLite, and export and import of edges.

The math never touches a database: a store reads and writes through a
:class:`~synapse_retriever.persistence.protocols.Storage`, and a new backend is a new
module here.
"""

from synapse_retriever.persistence.protocols import Storage, WriteTransaction
from synapse_retriever.persistence.rows import Changes, EdgeRow, UseColumns, UseRow
from synapse_retriever.persistence.sqlite import SQLiteStorage

__all__ = [
    "Changes",
    "EdgeRow",
    "SQLiteStorage",
    "Storage",
    "UseColumns",
    "UseRow",
    "WriteTransaction",
]
