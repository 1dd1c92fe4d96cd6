"""The READMEs' Python examples and what each says it prints: one extraction for every test.

``tests/test_readme.py`` runs them against the source tree, ``tests/test_wheels.py`` against
the built wheels installed in a fresh virtual environment.
"""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
READMES = [
    ROOT / "README.md",
    ROOT / "integrations" / "langchain" / "README.md",
    ROOT / "integrations" / "llama-index" / "README.md",
]


def blocks(readme: Path) -> list[str]:
    """The ```` ```python ```` blocks of ``readme``, in order."""
    return re.findall(r"```python\n(.*?)```", readme.read_text(encoding="utf-8"), re.S)


def out_lines(code: str) -> list[str]:
    """What the example says it prints: the text after each ``# out: ``."""
    marker = "# out:"
    return [
        line.split(marker, 1)[1].removeprefix(" ").rstrip()
        for line in code.splitlines()
        if marker in line
    ]
