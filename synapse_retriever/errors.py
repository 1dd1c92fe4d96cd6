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

__all__ = [
    "InvalidTypeError",
    "InvalidValueError",
    "NotASynapseDatabaseError",
    "SynapseError",
]


class SynapseError(Exception):
    """Base class of every error this library raises on purpose."""


class InvalidValueError(SynapseError, ValueError):
    """A value of the right type but outside what the method accepts (NaN, empty, past...)."""


class InvalidTypeError(SynapseError, TypeError):
    """A value of the wrong type (a bare string where a list of ids was expected...)."""


class NotASynapseDatabaseError(SynapseError, ValueError):
    """A file that is not a synapse database; it is left untouched."""
