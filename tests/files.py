"""Shared test helpers: files that cannot be written (for root too), or looked at."""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest


@contextlib.contextmanager
def read_only(*paths: Path) -> Iterator[None]:
    """Make files and folders unwritable, for root too (the immutable attribute; root
    ignores permission bits), and writable again afterwards."""
    if os.geteuid() != 0:
        modes = [p.stat().st_mode for p in paths]
        for p in paths:
            p.chmod(0o555 if p.is_dir() else 0o444)
        try:
            yield
        finally:
            for p, mode in zip(paths, modes, strict=True):
                p.chmod(mode)
        return
    if shutil.which("chattr") is None:
        pytest.skip("running as root without chattr: nothing can make a file read-only")
    done = subprocess.run(["chattr", "+i", *map(str, paths)], capture_output=True, check=False)
    if done.returncode != 0:
        pytest.skip(f"chattr +i refused here: {done.stderr.decode().strip()}")
    try:
        yield
    finally:
        subprocess.run(["chattr", "-i", *map(str, paths)], check=True)


def failing_stat(monkeypatch: pytest.MonkeyPatch, path: Path, errno_: int) -> None:
    """``os.stat`` of ``path`` fails with ``errno_``, as a network file system's may for a
    moment (no such file system here: the error is injected, the rest is real)."""
    real = os.stat

    def stat(name: Any, *args: Any, **kwargs: Any) -> os.stat_result:
        if os.path.realpath(name) == os.path.realpath(path):
            raise OSError(errno_, os.strerror(errno_), str(name))
        return real(name, *args, **kwargs)

    monkeypatch.setattr(os, "stat", stat)
