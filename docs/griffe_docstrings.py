"""Griffe extension for the API reference: docstrings written for Sphinx and Google readers render
well in mkdocstrings. The source docstrings are not changed, only what griffe parses.

- Sphinx roles (``:class:`~pkg.mod.Name```, ``:meth:`record_usage```, ``:func:``, ``:data:``...)
  become inline code showing the name as Sphinx would (``~`` keeps the last part only); as plain
  Markdown they would show their role markup.
- A Google-style ``Example:`` heading (langchain-core's convention, used by the adapters) becomes
  ``Examples:``, the only heading griffe's Google parser reads as examples; ``Example:`` would be
  an admonition of Markdown, where ``>>>`` lines are not code.
"""

from __future__ import annotations

import re
from typing import Any

import griffe

_ROLE = re.compile(r":(?:py:)?(?:class|meth|func|attr|data|mod|obj|exc):`(~?)([^`]+)`")
_HEADING = re.compile(r"^(\s*)Example:\s*$", re.M)


def _code(found: re.Match[str]) -> str:
    short, target = found.group(1), found.group(2)
    if "<" in target and target.endswith(">"):  # :meth:`title <target>`
        return f"`{target.split('<', 1)[0].strip()}`"
    return f"`{target.rsplit('.', 1)[-1] if short else target}`"


class ReadableDocstrings(griffe.Extension):
    """Rewrite Sphinx roles and ``Example:`` headings in every loaded docstring."""

    def on_instance(self, *, obj: griffe.Object, **kwargs: Any) -> None:
        if obj.docstring is not None:
            text = _ROLE.sub(_code, obj.docstring.value)
            obj.docstring.value = _HEADING.sub(r"\1Examples:", text)
