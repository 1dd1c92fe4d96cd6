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
from datetime import datetime

from synapse_retriever.errors import InvalidTypeError, InvalidValueError

__all__ = ["SECONDS_PER_DAY", "Clock", "days_between", "to_seconds"]

SECONDS_PER_DAY = 86_400.0

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
        return at.timestamp()
    if isinstance(at, bool) or not isinstance(at, (int, float)):
        raise InvalidTypeError(
            f"at must be a datetime, POSIX seconds or None, got {type(at).__name__} {at!r}"
        )
    seconds = float(at)
    if not math.isfinite(seconds):
        raise InvalidValueError(f"at must be a finite number of seconds, got {at!r}")
    return seconds


def days_between(earlier: float, later: float) -> float:
    """Days from ``earlier`` to ``later`` in POSIX seconds, never negative."""
    return max(0.0, later - earlier) / SECONDS_PER_DAY
