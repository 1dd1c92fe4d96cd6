"""The library's exceptions: one small hierarchy rooted at :class:`SynapseError`.

Each error also inherits the built-in a caller would expect (``ValueError`` or
``TypeError``), so ``except ValueError`` keeps working.

Examples
--------
>>> from synapse_retriever.errors import InvalidValueError
>>> issubclass(InvalidValueError, ValueError)
True
"""

from __future__ import annotations

import re
import reprlib
from numbers import Real

__all__ = [
    "AccessDeniedError",
    "ClosedError",
    "CorruptDatabaseError",
    "InvalidTypeError",
    "InvalidValueError",
    "MissingExtraError",
    "NotASynapseDatabaseError",
    "ReadOnlyStoreError",
    "StorageUnavailableError",
    "SynapseError",
    "WriteConflictError",
    "masked",
    "refused_number",
    "shown",
]


class SynapseError(Exception):
    """Base class of every error this library raises on purpose.

    Examples
    --------
    >>> from synapse_retriever import SynapseStore
    >>> try:
    ...     SynapseStore(":memory:").reinforce("auth/jwt.py")  # a bare str, not a list of ids
    ... except SynapseError as error:
    ...     print(type(error).__name__)
    InvalidTypeError
    """


class InvalidValueError(SynapseError, ValueError):
    """A value of the right type but outside what the method accepts (NaN, empty, past...).

    Examples
    --------
    >>> from synapse_retriever import validate_node_id
    >>> try:
    ...     validate_node_id("")
    ... except ValueError as error:  # an InvalidValueError is a ValueError too
    ...     print(error)
    node id must be a non-empty string, got ''
    """


class InvalidTypeError(SynapseError, TypeError):
    """A value of the wrong type (a bare string where a list of ids was expected...).

    Examples
    --------
    >>> from synapse_retriever import coactivation_set
    >>> try:
    ...     coactivation_set("auth/jwt.py")
    ... except TypeError as error:  # an InvalidTypeError is a TypeError too
    ...     print(error)
    nodes must be a list of ids, got a bare str 'auth/jwt.py'
    """


class NotASynapseDatabaseError(SynapseError, ValueError):
    """A file that is not a synapse database; it is left untouched.

    Examples
    --------
    >>> import os, tempfile
    >>> from synapse_retriever import SynapseStore
    >>> path = os.path.join(tempfile.mkdtemp(), "notes.txt")
    >>> with open(path, "w") as file:
    ...     _ = file.write("not a database")
    >>> try:
    ...     SynapseStore(path)
    ... except NotASynapseDatabaseError:
    ...     print(open(path).read())  # left untouched
    not a database
    """


class CorruptDatabaseError(NotASynapseDatabaseError):
    """A synapse database whose file is damaged (SQLite reports it malformed), or whose
    PostgreSQL schema misses a table or column of a store's or a memory's (dropped by hand,
    before it opened or while it was open).

    Raised when the damage is found: at open (loading reads every table), by a later
    read or write (whose transaction is then rolled back, so nothing is written), or by
    :meth:`~synapse_retriever.persistence.sqlite.SQLiteStorage.check`, which
    ``synapse-retriever import`` runs before writing.
    Restore a backup, or copy what is readable out with ``sqlite3 FILE .recover``.

    Examples
    --------
    >>> import os, tempfile
    >>> from synapse_retriever import SynapseStore
    >>> path = os.path.join(tempfile.mkdtemp(), "synapses.db")
    >>> with SynapseStore(path) as store:
    ...     _ = store.reinforce([f"file{i}.py" for i in range(20)], at=0)
    >>> with open(path, "r+b") as file:  # a disk or a copy gone wrong: a page overwritten
    ...     _ = file.seek(4096)  # past its first pages: the roots of some of its tables
    ...     _ = file.write(bytes(range(256)) * 16)
    >>> try:
    ...     SynapseStore(path)
    ... except CorruptDatabaseError as error:
    ...     print(type(error).__name__, "nothing was written" in str(error))
    CorruptDatabaseError True
    """


class ReadOnlyStoreError(SynapseError, PermissionError):
    """A write to a store opened read-only (its file or folder cannot be written).

    Reads and recall work on such a store; every write raises this before touching it.

    Examples
    --------
    >>> import os, tempfile
    >>> from synapse_retriever import SynapseStore
    >>> path = os.path.join(tempfile.mkdtemp(), "synapses.db")
    >>> SynapseStore(path).close()
    >>> with SynapseStore(path, read_only=True) as store:
    ...     try:
    ...         store.reinforce(["a", "b"])
    ...     except PermissionError as error:  # a ReadOnlyStoreError is a PermissionError too
    ...         print(type(error).__name__)
    ReadOnlyStoreError
    """


class AccessDeniedError(SynapseError, PermissionError):
    """A database this process may not read: a PostgreSQL role that may not read a table a
    store or a conversation memory reads (the message names the tables and the ``GRANT``
    that lets it), or an SQLite file in a folder it may not enter. Nothing was written.

    A store reads all of its tables when it opens and as it polls; a conversation memory
    reads its ``context_*`` tables and ``meta``. (A role or a process that may read but not
    write opens read-only instead: :class:`ReadOnlyStoreError` for its writes.)

    Examples
    --------
    >>> issubclass(AccessDeniedError, PermissionError)
    True
    """


class ClosedError(SynapseError, ValueError):
    """A call on a store or conversation memory after its ``close()``; a ``ValueError``,
    as Python's own closed files raise.

    Examples
    --------
    >>> from synapse_retriever import SynapseStore
    >>> store = SynapseStore(":memory:")
    >>> store.close()
    >>> try:
    ...     store.weight("a", "b")
    ... except ValueError as error:
    ...     print(type(error).__name__, error)
    ClosedError SynapseStore(':memory:') is closed
    """


class WriteConflictError(SynapseError, RuntimeError):
    """A write that kept conflicting with other writers (a deadlock or a serialization
    failure on PostgreSQL) after ``config.operations.write_retries`` retries, or that waited
    ``config.operations.busy_timeout_s`` for a lock another writer held (on every backend); nothing
    was written.

    Examples
    --------
    >>> issubclass(WriteConflictError, RuntimeError)
    True
    """


class StorageUnavailableError(SynapseError, ConnectionError):
    """A database server that cannot be reached, or a connection lost while a write was
    being committed (whether it was committed is then unknown: an ``event_id`` makes
    a retry exact). A lost connection before the commit is retried on a new one. Also a
    database that cannot take a write, a server's or an SQLite file's (a full disk, an I/O
    error): the write is rolled back.

    Examples
    --------
    >>> issubclass(StorageUnavailableError, ConnectionError)
    True
    """


class MissingExtraError(SynapseError, ImportError):
    """An optional dependency that is not installed; the message names the extra that
    brings it (``pip install 'synapse-retriever[watch]'``...).

    Examples
    --------
    >>> error = MissingExtraError("watching a tree needs the watch extra: pip install ...")
    >>> isinstance(error, ImportError)  # what a caller catching the import error expects
    True
    """


def refused_number(value: object) -> type[InvalidValueError] | type[InvalidTypeError]:
    """What refuses ``value`` where one number was expected: InvalidTypeError (a TypeError)
    for no number at all (a str, None, a bool, a list), InvalidValueError (a ValueError) for
    a number it cannot take (out of range, NaN, too large, a float where a count was asked),
    NumPy's numbers and ``Fraction`` included.

    Examples
    --------
    >>> [refused_number(v).__name__ for v in ("2", True, None, -1.0)]
    ['InvalidTypeError', 'InvalidTypeError', 'InvalidTypeError', 'InvalidValueError']
    """
    number = isinstance(value, Real) and not isinstance(value, bool)
    return InvalidValueError if number else InvalidTypeError


def shown(value: object, width: int = 80) -> str:
    """``value`` as an error message shows it: its ``repr``, cut to ``width`` characters,
    and an int too long to print (Python refuses past 4,300 digits) by its size; a value
    whose ``repr`` fails (a tuple holding such an int) by its type, as Python's tracebacks
    show such a value. A str, bytes or a container is read only as far as the message shows
    (a 100 MB str costs what a short one does), and a URL's user and password are left out
    (``postgresql://me:secret@host`` is shown ``postgresql://host``), as is a connection
    string's ``password=``.

    Examples
    --------
    >>> shown(-1), shown("x" * 100)[-5:], shown(10**5000), shown((10**5000, 1.0))
    ('-1', 'xxxx…', 'an int of 16610 bits', '<unprintable tuple object>')
    >>> shown("postgresql://alice:s3cret@db.example/prod"), shown("host=db password=s3cret")
    ("'postgresql://db.example/prod'", "'host=db password=***'")
    """
    if isinstance(value, int) and value.bit_length() > 1000:
        return f"an int of {value.bit_length()} bits"
    if isinstance(value, (bytes, bytearray)) and len(value) > width:
        value = value[:width]  # reprlib reads bytes whole
    try:
        text = _BOUNDED.repr(value)
    except Exception:  # an int past 4,300 digits inside it, a repr that raises
        return f"<unprintable {type(value).__name__} object>"
    window = _PASSWORD.sub(r"\1***\2", text[: 2 * width])
    window = _CREDENTIALS.sub(r"\1", window)
    if len(text) > 2 * width:  # a prefix: a URL it cuts before its "@" may hold a password
        window = _CUT_CREDENTIALS.sub(r"\1", window)
    elif len(window) <= width:
        return window
    return window[: width - 1] + "…"


_BOUNDED = reprlib.Repr()
"""A ``repr`` that reads a str, bytes or container only as far as a message shows."""
_BOUNDED.maxstring = _BOUNDED.maxother = _BOUNDED.maxlong = 200
_BOUNDED.maxlist = _BOUNDED.maxtuple = _BOUNDED.maxdict = _BOUNDED.maxset = 12
_BOUNDED.maxfrozenset = _BOUNDED.maxdeque = _BOUNDED.maxarray = 12
_BOUNDED.maxlevel = 3

_SCHEME = r"(?<![A-Za-z0-9+.-])([A-Za-z][A-Za-z0-9+.-]*://)"
"""A URL's scheme, which begins a run of its characters (the lookbehind keeps the patterns
linear on a long run of letters)."""
_CREDENTIALS = re.compile(_SCHEME + r".*@", re.DOTALL)
"""A URL's scheme and what lies before the window's last ``@`` (its user and password, which
may hold a ``/``, a quote or a space a URL should have escaped): the scheme is kept."""
_CUT_CREDENTIALS = re.compile(_SCHEME + r"[^@]*\Z")
"""A URL a message's end cuts before its host's end: its user and password may be there."""
_PASSWORD = re.compile(r"(pass(?:w|%77)ord\s*=\s*).*?(['\"]?)\Z", re.IGNORECASE | re.DOTALL)
"""A libpq connection string's password (``sslpassword`` too, and a URL's ``pass%77ord``
parameter), and all after it (quoted, escaped, the keywords
after it: a message shows less rather than part of it); the repr's closing quote is kept."""


def masked(value: object, depth: int = 4) -> object:
    """``value`` with what :func:`shown` leaves out of a message left out: in a str, bytes or
    bytearray, a URL's user and password and a connection string's password; in a dict, list,
    tuple, set or frozenset, in each item (keys as they are), ``depth`` levels down, deeper
    as :func:`shown` shows it; anything else as it is.

    Examples
    --------
    >>> masked({"store": "postgresql://me:s3cret@db/x", "k": [3, "host=db password=s3cret"]})
    {'store': 'postgresql://db/x', 'k': [3, 'host=db password=***']}
    >>> masked(b"postgresql://me:s3cret@db/x"), masked([[["postgresql://me:s3cret@db"]]], 1)
    (b'postgresql://db/x', ["[['postgresql://db']]"])
    """
    if isinstance(value, str):
        return _CREDENTIALS.sub(r"\1", _PASSWORD.sub(r"\1***\2", value))
    if isinstance(value, (bytes, bytearray)):
        return type(value)(str(masked(bytes(value).decode("latin-1"))).encode("latin-1"))
    if not isinstance(value, (dict, list, tuple, set, frozenset)):
        return value
    if depth <= 0:
        return shown(value, width=200)
    if isinstance(value, dict):
        return {key: masked(item, depth - 1) for key, item in value.items()}
    items = [masked(item, depth - 1) for item in value]
    if isinstance(value, (set, frozenset)):
        return type(value)(item for item in items if _hashable(item))
    return type(value)(items) if type(value) in (list, tuple) else items


def _hashable(value: object) -> bool:
    try:
        hash(value)
    except TypeError:
        return False
    return True
