"""Type aliases used across the package, defined once.

Examples
--------
>>> import numpy as np
>>> ids: IntArray = np.array([3, 1], dtype=np.int64)
>>> ids.dtype
dtype('int64')
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

__all__ = ["FloatArray", "IntArray"]

IntArray = npt.NDArray[np.int64]
"""Node, edge or namespace ids."""
FloatArray = npt.NDArray[np.float64]
"""Weights, energies, times."""
