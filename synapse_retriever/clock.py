"""Time as the method sees it: POSIX seconds, taken from an explicit ``at``.

Every formula takes its time from ``at``; only :func:`to_seconds` with ``None``
reads the wall clock, so tests and replays are exact.

Examples
--------
>>> from datetime import datetime, timezone
>>> to_seconds(datetime(1970, 1, 2, tzinfo=timezone.utc))
86400.0
>>> days_between(0.0, 43200.0)
0.5
"""

from __future__ import annotations

import math
import time
from datetime import UTC, datetime
from numbers import Real

from synapse_retriever.errors import InvalidTypeError, InvalidValueError, shown

__all__ = [
    "MAX_CLOCK_SKEW_S",
    "SECONDS_PER_DAY",
    "Clock",
    "days_between",
    "finite_real",
    "iso",
    "not_ahead",
    "not_before_year_one",
    "to_seconds",
]

SECONDS_PER_DAY = 86_400.0
MAX_CLOCK_SKEW_S = 86_400.0
"""How far ahead of the clock a written time may be, by default (one day)."""
EARLIEST = -62_135_596_800.0
"""0001-01-01T00:00:00Z in POSIX seconds: no time is earlier (no calendar date shows one)."""
PLAUSIBLE = 1e8
"""POSIX seconds of 1973: a time ahead of the clock that reads as a later time in
milliseconds (or smaller units) is named as such in the error."""

Clock = datetime | float | int | None
"""What every ``at=`` parameter accepts: an aware datetime, POSIX seconds, or None (now)."""


def to_seconds(at: Clock) -> float:
    """Convert ``at`` to POSIX seconds; ``None`` means now.

    Raises
    ------
    InvalidValueError
        A naive datetime (its zone is unknown) or a non-finite number.
    InvalidTypeError
        Anything else than a datetime, a number or None.
    """
    if at is None:
        return time.time()
    if isinstance(at, datetime):
        if at.tzinfo is None or at.tzinfo.utcoffset(at) is None:
            raise InvalidValueError(
                f"at must be a timezone-aware datetime, got naive {at.isoformat()!r}"
            )
        return not_before_year_one(at.timestamp())  # 0001-01-01 at +01:00 is earlier
    seconds = finite_real(at, "at", "a datetime, POSIX seconds or None", unit=" of seconds")
    # + 0.0: -0.0 is 0.0, as SQLite reads it back (it stores a whole REAL as an integer)
    return not_before_year_one(seconds) + 0.0


def not_before_year_one(seconds: float, what: str = "at") -> float:
    """``seconds`` itself if it is no earlier than 0001-01-01 UTC (:data:`EARLIEST`).

    An earlier time has no calendar date to show, and an edge stored at it would never
    decay below the LTP floor nor be removed by ``repair``.

    Raises
    ------
    InvalidValueError
        ``seconds`` is earlier; the message names ``what`` and the value.

    Examples
    --------
    >>> not_before_year_one(0.0)
    0.0
    >>> not_before_year_one(-1e300, "created_at")
    Traceback (most recent call last):
    ...
    synapse_retriever.errors.InvalidValueError: created_at=-1e+300 is before the year 1 \
(-62135596800.0): times are POSIX seconds
    """
    if seconds < EARLIEST:
        raise InvalidValueError(
            f"{what}={seconds} is before the year 1 ({EARLIEST}): times are POSIX seconds"
        )
    return seconds


def finite_real(value: object, what: str, expected: str, *, unit: str = "") -> float:
    """``value`` as a finite float: any real number (NumPy's scalars, a Fraction), not a bool.

    Raises
    ------
    InvalidTypeError
        ``value`` is not a real number (``what`` must be ``expected``).
    InvalidValueError
        ``value`` is NaN, infinite, or past a float's range.

    Examples
    --------
    >>> from fractions import Fraction
    >>> finite_real(Fraction(1, 4), "strength", "a number")
    0.25
    >>> finite_real(10**400, "strength", "a number")
    Traceback (most recent call last):
    ...
    synapse_retriever.errors.InvalidValueError: strength must be a finite number, got int past \
a float's range
    """
    if isinstance(value, bool) or not isinstance(value, Real):
        raise InvalidTypeError(
            f"{what} must be {expected}, got {type(value).__name__} {shown(value)}"
        )
    try:
        number = float(value)
    except OverflowError:  # an int or a Fraction past a float's range
        raise InvalidValueError(
            f"{what} must be a finite number{unit}, got {type(value).__name__} past a float's range"
        ) from None
    if not math.isfinite(number):  # printed only here: a Fraction's terms may pass 4,300 digits
        raise InvalidValueError(f"{what} must be a finite number{unit}, got {shown(value)}")
    return number


def days_between(earlier: float, later: float) -> float:
    """Days from ``earlier`` to ``later`` in POSIX seconds, never negative."""
    return max(0.0, later - earlier) / SECONDS_PER_DAY


def not_ahead(
    seconds: float, *, skew_s: float, what: str = "at", now: float | None = None
) -> float:
    """``seconds`` itself if it is at most ``skew_s`` ahead of the clock (or of ``now``).

    A time far ahead is a unit mistake more often than a plan: milliseconds
    (``time.time() * 1000``) read as seconds lie some 50,000 years ahead. Stored, it would
    never decay and every later write would be placed after it.

    Raises
    ------
    InvalidValueError
        ``seconds`` is more than ``skew_s`` ahead; the message names it and, when it
        reads as milliseconds or microseconds, the time it then means.

    Examples
    --------
    >>> not_ahead(100.0, skew_s=86400, now=0.0)
    100.0
    >>> not_ahead(1.7e12, skew_s=86400, now=1.7e9)
    Traceback (most recent call last):
    ...
    synapse_retriever.errors.InvalidValueError: at=1700000000000.0 is more than 86400 s \
ahead of the clock (1700000000.0): times are POSIX seconds; in milliseconds it would \
be 1700000000.0
    """
    clock = time.time() if now is None else now
    if seconds <= clock + skew_s:
        return seconds
    hint = "times are POSIX seconds"
    for unit, factor in (("milliseconds", 1e3), ("microseconds", 1e6), ("nanoseconds", 1e9)):
        if PLAUSIBLE <= seconds / factor <= clock + skew_s:
            hint += f"; in {unit} it would be {seconds / factor}"
            break
    raise InvalidValueError(
        f"{what}={seconds} is more than {skew_s:g} s ahead of the clock ({clock}): {hint}"
    )


def iso(seconds: float) -> str:
    """ISO 8601 in UTC; a time no calendar date can show (a store written in milliseconds
    before such times were refused) as its seconds.

    Examples
    --------
    >>> iso(0)
    '1970-01-01T00:00:00Z'
    >>> iso(1e18)
    '1000000000000000000 s (beyond year 9999: synapse-retriever repair removes it)'
    """
    try:
        moment = datetime.fromtimestamp(seconds, UTC)
    except (OverflowError, ValueError, OSError):
        return f"{seconds:.0f} s (beyond year 9999: synapse-retriever repair removes it)"
    return moment.isoformat(timespec="seconds").replace("+00:00", "Z")
