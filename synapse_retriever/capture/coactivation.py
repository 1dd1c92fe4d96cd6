"""Turning activity into co-activation events: id checks, de-duplication, stable ids.

Examples
--------
>>> coactivation_set(["auth/jwt.py", "config/secrets.py", "auth/jwt.py"])
['auth/jwt.py', 'config/secrets.py']
>>> content_id("def load_keys(): ...")
'sha256:bc98021b1b25ad7c1e15bf34'
"""

from __future__ import annotations

import hashlib
import logging
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime

from synapse_retriever.config import MAX_NAME_BYTES, check_integer, check_size
from synapse_retriever.errors import InvalidTypeError, InvalidValueError, shown

__all__ = [
    "CoActivation",
    "check_unicode",
    "coactivation_set",
    "content_id",
    "is_node_id",
    "namespaced_id",
    "validate_node_id",
]

logger = logging.getLogger("synapse_retriever")


@dataclass(frozen=True)
class CoActivation:
    """One co-activation event, as :meth:`~synapse_retriever.store.SynapseStore.reinforce`
    takes it, for :meth:`~synapse_retriever.store.SynapseStore.reinforce_many`.

    Examples
    --------
    >>> CoActivation(["auth/jwt.py", "config/keys.py"], at=0, event_id="commit:1f2e")
    CoActivation(nodes=['auth/jwt.py', 'config/keys.py'], strength=1.0, namespace='personal', \
at=0, event_id='commit:1f2e')
    """

    nodes: Iterable[str]
    strength: float = 1.0
    namespace: str = "personal"
    at: datetime | float | int | None = None
    event_id: str | None = None


def validate_node_id(node: object) -> str:
    """Return ``node`` if it is a usable node id: a non-empty str of valid Unicode, without
    NUL, at most :data:`~synapse_retriever.config.MAX_NAME_BYTES` bytes of UTF-8.

    Examples
    --------
    >>> validate_node_id("")
    Traceback (most recent call last):
    ...
    synapse_retriever.errors.InvalidValueError: node id must be a non-empty string, got ''
    """
    if not isinstance(node, str):
        raise InvalidTypeError(f"node id must be a str, got {type(node).__name__} {shown(node)}")
    if not node:
        raise InvalidValueError(f"node id must be a non-empty string, got {shown(node)}")
    check_size("node id", node)
    if "\x00" in node:  # PostgreSQL's text cannot hold it: refused on every backend alike
        raise InvalidValueError(f"node id must not hold a NUL character, got {shown(node)}")
    return check_unicode("node id", node)


def is_node_id(name: object) -> bool:
    """Whether ``name`` can be a node id (:func:`validate_node_id` would take it): capture
    leaves out a file whose path cannot (one over 2,048 bytes, or named in bytes that are
    not UTF-8) rather than fail the files saved or committed with it.

    Examples
    --------
    >>> is_node_id("src/app.py"), is_node_id("d/" * 1100 + "x.py"), is_node_id("a\\udce9.py")
    (True, False, False)
    """
    try:
        validate_node_id(name)
    except (InvalidTypeError, InvalidValueError):
        return False
    return True


def check_unicode(name: str, value: str) -> str:
    """``value`` itself if it holds no lone surrogate; storage writes UTF-8, which has none.

    Examples
    --------
    >>> check_unicode("text", "café")
    'café'
    >>> check_unicode("text", b"caf\\xe9".decode("utf-8", "surrogateescape"))  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    synapse_retriever.errors.InvalidValueError: text must be valid Unicode, got 'caf\\udce9'; \
a lone surrogate '\\udce9' at 3 (what os.fsdecode or ...): decode such bytes with errors='replace'
    """
    try:
        value.isascii() or value.encode("utf-8")
    except UnicodeEncodeError as error:
        shown = repr(value) if len(value) <= 60 else f"{value[:57]!r}..."
        raise InvalidValueError(
            f"{name} must be valid Unicode, got {shown}; a lone surrogate "
            f"{value[error.start]!r} at {error.start} (what os.fsdecode or "
            "errors='surrogateescape' leave for bytes that are not UTF-8): decode such "
            "bytes with errors='replace'"
        ) from None
    return value


def coactivation_set(nodes: Iterable[str], *, limit: int | None = None) -> list[str]:
    """Validated, de-duplicated ids of one co-activation event, in first-seen order.

    Parameters
    ----------
    nodes : iterable of str
        The ids used together. A bare string is refused: it would be read as characters.
    limit : int, optional
        Keep only the first ``limit`` distinct ids (at least 2, as ``max_coactivation``) and
        log a warning: the number of pairs grows as k², the known way to flood a graph with
        artificial hubs.

    Raises
    ------
    InvalidTypeError
        ``nodes`` is a str or bytes, or not iterable, or holds a non-str id; ``limit`` is
        not an int.
    InvalidValueError
        An empty or otherwise unusable id; a ``limit`` below 2.

    Examples
    --------
    >>> coactivation_set(["a.py", "b.py", "a.py", "c.py"], limit=2)  # logs a warning
    ['a.py', 'b.py']
    """
    if limit is not None:
        check_integer("limit", limit, 2)
    if isinstance(nodes, (str, bytes)):
        raise InvalidTypeError(
            f"nodes must be a list of ids, got a bare {type(nodes).__name__} {shown(nodes)}"
        )
    try:
        items = list(nodes)
    except TypeError:
        raise InvalidTypeError(
            f"nodes must be an iterable of ids, got {type(nodes).__name__} {shown(nodes)}"
        ) from None
    unique = list(dict.fromkeys(validate_node_id(node) for node in items))
    if limit is not None and len(unique) > limit:
        logger.warning(
            "co-activation event of %d nodes: only the first %d are reinforced "
            "(max_coactivation), to keep k² pairs from flooding the graph",
            len(unique),
            limit,
        )
        unique = unique[:limit]
    return unique


def content_id(text: str) -> str:
    """A stable id for content that carries none: ``sha256:`` and 24 hex digits of its hash.

    The same text always gets the same id, in every process and on every machine.

    Examples
    --------
    >>> content_id("def load_keys(): ...") == content_id("def load_keys(): ...")
    True
    >>> content_id("def load_keys(): ...")
    'sha256:bc98021b1b25ad7c1e15bf34'
    """
    if not isinstance(text, str):
        raise InvalidTypeError(f"content must be a str, got {type(text).__name__} {shown(text)}")
    return "sha256:" + hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()[:24]


def namespaced_id(head: str, namespace: str, tail: str = "") -> str:
    """An event id naming ``namespace`` between ``head`` and ``tail``, so that each namespace
    counts its events once: ``head + namespace + tail``, or, where that would pass
    :data:`~synapse_retriever.config.MAX_NAME_BYTES` bytes (a namespace near the cap), the
    namespace's :func:`content_id` in its place. A namespace never begins ``sha256:``, so
    the two forms never meet.

    Examples
    --------
    >>> namespaced_id("langchain:", "personal", ":7")
    'langchain:personal:7'
    >>> namespaced_id("langchain:", "branch:" + "x" * 2040, ":7")
    'langchain:sha256:16354dd7ffb35d3f66107305:7'
    """
    event = f"{head}{namespace}{tail}"
    if len(event.encode("utf-8", "surrogatepass")) <= MAX_NAME_BYTES:
        return event
    return f"{head}{content_id(namespace)}{tail}"
