"""Typed errors for the public math helpers, at no cost to a call that succeeds.

The helpers (:func:`~synapse_retriever.learning.decay.decayed_weight` and the rest) take
floats or NumPy arrays and hand them straight to NumPy, whose error for an argument that
is not a number names neither the argument nor the helper (``ufunc 'multiply' did not
contain a loop with signature matching types``). :func:`numeric` reads the arguments again
only once the helper has failed, and raises
:class:`~synapse_retriever.errors.InvalidTypeError` naming the first one that is no number.
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable, Collection, Iterator, Sequence
from numbers import Real
from typing import ParamSpec, TypeVar

import numpy as np

from synapse_retriever.errors import InvalidTypeError, SynapseError, shown

__all__ = ["is_numeric", "numeric"]

_NAMED = "numeric_argument"
"""The attribute :func:`numeric`'s errors carry: the argument they name."""

_P = ParamSpec("_P")
_R = TypeVar("_R")


def numeric(function: Callable[_P, _R]) -> Callable[_P, _R]:
    """``function``, whose ``TypeError`` or ``ValueError`` becomes an
    :class:`~synapse_retriever.errors.InvalidTypeError` naming the first argument that is no
    number, nor booleans, nor a sequence or array of them (other errors pass unchanged).

    Examples
    --------
    >>> @numeric
    ... def half(x: float) -> float:
    ...     return x / 2
    >>> half("0.5")
    Traceback (most recent call last):
    ...
    synapse_retriever.errors.InvalidTypeError: half: x must be a number or an array of \
numbers, got str '0.5'
    """
    signature = inspect.signature(function)

    @functools.wraps(function)
    def checked(*args: _P.args, **kwargs: _P.kwargs) -> _R:
        try:
            return function(*args, **kwargs)
        except (TypeError, ValueError) as error:
            if isinstance(error, SynapseError) and not hasattr(error, _NAMED):
                raise  # the helper's own, naming what it wants
            refused = _first_not_numeric(function.__name__, signature, args, kwargs)
            if refused is None:
                raise  # a helper it called named its own argument: that error stands
            raise refused from None

    return checked


def _first_not_numeric(
    name: str, signature: inspect.Signature, args: tuple[object, ...], kwargs: dict[str, object]
) -> InvalidTypeError | None:
    """The error naming the first of the arguments that is no number; None if every one is,
    or if the signature refuses the call (Python's own error says why)."""
    try:
        arguments = signature.bind(*args, **kwargs).arguments
    except TypeError:
        return None
    for argument, value in arguments.items():
        if not is_numeric(value):
            refused = InvalidTypeError(
                f"{name}: {argument} must be a number or an array of numbers, "
                f"got {type(value).__name__} {shown(value)}"
            )
            setattr(refused, _NAMED, argument)  # a helper calling this one names its own
            return refused
    return None


def is_numeric(value: object) -> bool:
    """Whether ``value`` reads as numbers: a number, a boolean, or a sequence or array of
    them (an iterator counts, unread: the helper has consumed it).

    Examples
    --------
    >>> [is_numeric(v) for v in (1, 0.5, True, [1, 2.5], np.zeros(3), {1.0, 2.0})]
    [True, True, True, True, True, True]
    >>> [is_numeric(v) for v in ("1", None, [1, "a"], {"a"}, {"a": 1})]
    [False, False, False, False, False]
    """
    if isinstance(value, int | float | Iterator):  # an int past 64 bits too
        return True
    if isinstance(value, str | bytes) or value is None:
        return False
    if isinstance(value, Collection) and not isinstance(value, Sequence | np.ndarray):
        return all(isinstance(item, Real) for item in value)  # a set, a dict's values
    try:
        kind = np.asarray(value).dtype.kind
    except (TypeError, ValueError):  # ragged
        return False
    return kind in "biuf"
