"""Saving the benchmarks' figures: the format from the file's suffix, SVG byte for byte.

The benchmark pages commit the SVGs the ``--plot`` options write, so an SVG carries no date
and the same ids each time: the same report draws the same file.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

__all__ = ["save_figure"]


def save_figure(figure: Any, path: str | os.PathLike[str], *, dpi: int = 110) -> None:
    """Write a matplotlib ``figure`` to ``path`` in the format its suffix names (``.svg``,
    ``.png``, ``.pdf``...), PNG for a suffix matplotlib does not know; then close it.

    An SVG is reproducible: no creation date in its metadata, and element ids drawn from a
    fixed salt rather than at random.
    """
    import matplotlib
    import matplotlib.pyplot as plt

    kind = Path(path).suffix[1:].lower()
    kind = kind if kind in figure.canvas.get_supported_filetypes() else "png"
    metadata = {"Date": None} if kind in ("svg", "pdf") else None
    try:
        with matplotlib.rc_context({"svg.hashsalt": "synapse-retriever"}):
            figure.savefig(path, dpi=dpi, format=kind, metadata=metadata)
    finally:
        plt.close(figure)
