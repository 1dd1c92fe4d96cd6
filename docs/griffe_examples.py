"""Griffe extension for the API reference: a Google-style ``Example:`` section is read as examples.

The adapters follow langchain-core's convention of a singular ``Example:`` heading; griffe's Google
parser knows only ``Examples:`` as the examples section (it renders ``Example:`` as an admonition of
Markdown, where ``>>>`` lines are not code). This renames the heading before parsing; the source
docstrings are not changed.
"""

from __future__ import annotations

import re
from typing import Any

import griffe

_HEADING = re.compile(r"^(\s*)Example:\s*$", re.M)


class SingularExampleHeading(griffe.Extension):
    """Rewrite ``Example:`` headings to ``Examples:`` in every loaded docstring."""

    def on_instance(self, *, obj: griffe.Object, **kwargs: Any) -> None:
        if obj.docstring is not None:
            obj.docstring.value = _HEADING.sub(r"\1Examples:", obj.docstring.value)
