"""A conversation memory's persistence: the protocol (:mod:`.protocol`), SQLite, PostgreSQL."""
