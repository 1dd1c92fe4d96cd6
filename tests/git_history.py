"""Small git repositories with fixed dates, for the gitlog, bootstrap, CLI and benchmark tests.

Not a test module: imported by ``test_gitlog.py``, ``test_cli.py`` and ``test_bench_quality.py``.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

DAY = 86_400
BASE = 1_700_000_000  # 2023-11-14T22:13:20Z

AUTH_MESSAGE = "verify jwt token expiry"
DB_MESSAGE = "speed up session pooling"
WEB_MESSAGE = "render html templates"

FEATURES = [
    # (message, file the message matches, partner it never mentions)
    (AUTH_MESSAGE, "src/auth/jwt.py", "src/auth/keys.py"),
    (DB_MESSAGE, "src/db/session.py", "src/db/pool_config.py"),
    (WEB_MESSAGE, "src/web/render.py", "src/web/assets.py"),
]

CONTENT = {
    "src/auth/jwt.py": "def verify(token):\n    # jwt token verification, checks expiry\n",
    "src/auth/keys.py": "def load_rsa_material():\n    return read_pem()\n",
    "src/db/session.py": "def open_session():\n    # session pooling\n",
    "src/db/pool_config.py": "MAX_CONNECTIONS = 10\n",
    "src/web/render.py": "def render(template):\n    # html templates\n",
    "src/web/assets.py": "STATIC_DIR = 'static'\n",
}
FILLERS = [f"aaa/filler_{i:02d}.txt" for i in range(12)]
"""Files no query matches; they sort first, so the vector top-k's zero-score tail is fillers."""


def git(repo: Path, *args: str, at: float | None = None, author_at: float | None = None) -> str:
    env = dict(os.environ)
    env.update(
        {
            "GIT_AUTHOR_NAME": "Test",
            "GIT_AUTHOR_EMAIL": "test@example.com",
            "GIT_COMMITTER_NAME": "Test",
            "GIT_COMMITTER_EMAIL": "test@example.com",
            "GIT_CONFIG_GLOBAL": os.devnull,
            "GIT_CONFIG_NOSYSTEM": "1",
        }
    )
    if at is not None:
        env["GIT_COMMITTER_DATE"] = f"@{int(at)} +0000"
        env["GIT_AUTHOR_DATE"] = f"@{int(author_at if author_at is not None else at)} +0000"
    result = subprocess.run(
        ["git", "-C", str(repo), *args], env=env, capture_output=True, text=True, check=True
    )
    return result.stdout.strip()


def init(path: Path) -> Path:
    path.mkdir(parents=True, exist_ok=True)
    git(path, "init", "-q", "-b", "main")
    return path


def commit(
    repo: Path,
    message: str,
    files: dict[str, str | None],
    *,
    at: float,
    author_at: float | None = None,
) -> str:
    """Write (or, for None, delete) ``files``, commit everything at ``at``; the new sha."""
    for name, text in files.items():
        target = repo / name
        if text is None:
            target.unlink()
        else:
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(text)
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", message, at=at, author_at=author_at)
    return git(repo, "rev-parse", "HEAD")


def make_project(path: Path, *, cycles: int = 10, start: int = BASE) -> Path:
    """A repository where each feature's message matches one file and never its partner.

    History, one commit a day: every file is added alone (18 single-file commits), then
    ``cycles`` rounds of the three features, each commit touching its two files. With
    the default 10 cycles there are 48 usable commits: 38 teach (80%), the last 10 test.
    The first commit is at ``start`` (POSIX seconds).

    The commits are written by one ``git fast-import`` (with the same fixed author and
    committer dates as :func:`commit`), which is much faster than one commit at a time.
    """
    repo = init(path)
    history: list[tuple[str, dict[str, str]]] = []
    for name in FILLERS:
        history.append((f"add {name}", {name: f"lorem ipsum filler {name[-6:-4]}\n"}))
    for name, text in CONTENT.items():
        history.append((f"add {name}", {name: text}))
    lines = dict(CONTENT)
    for cycle in range(cycles):
        for message, matched, partner in FEATURES:
            for name in (matched, partner):
                lines[name] += f"# change {cycle}\n"
            history.append((message, {matched: lines[matched], partner: lines[partner]}))
    return _fast_import(
        repo, [(m, files, start + day * DAY) for day, (m, files) in enumerate(history)]
    )


def _data(text: str) -> str:
    return f"data {len(text.encode())}\n{text}"


def make_mixed_project(
    path: Path, *, seed: int, start: int = BASE, modules: int = 8, commits: int = 240
) -> Path:
    """A noisier history for measuring: ``modules`` folders of two features of 3 files
    each, one commit every 6 hours (with jitter) touching 1 to 3 files of one feature
    (popular modules more often, by a Zipf-like weight), one time in ten with a file of
    another module too.

    A message names a distinctive word of its first file and three words every file may
    hold, so the vector search finds that file and noise; the rest of what the commit
    touched is for the graph to recall. Deterministic for a given ``seed``.
    """
    import random

    rng = random.Random(seed)
    repo = init(path)

    def word() -> str:
        return "".join(rng.choice("bcdfghjklmnpqrstvwxz") for _ in range(9))

    names = [[f"m{m}/part{j}.py" for j in range(6)] for m in range(modules)]
    words = {name: word() for row in names for name in row}
    shared = [word() for _ in range(modules)]
    common = [word() for _ in range(40)]  # noise every file and message draws from
    text = {
        name: f"# {shared[m]} {words[name]} {' '.join(rng.sample(common, 6))}\n"
        for m, row in enumerate(names)
        for name in row
    }
    history: list[tuple[str, dict[str, str], int]] = []
    for m, row in enumerate(names):  # every file added first, one commit per module
        history.append((f"add {shared[m]}", {n: text[n] for n in row}, start + m * 3600))
    weights = [1.0 / (m + 1) for m in range(modules)]
    when = start + DAY
    for i in range(commits):
        m = rng.choices(range(modules), weights)[0]
        feature = names[m][:3] if rng.random() < 0.5 else names[m][3:]
        touched = rng.sample(feature, rng.choice([1, 2, 2, 3]))
        if rng.random() < 0.1:
            touched.append(rng.choice(names[rng.randrange(modules)]))
        touched = list(dict.fromkeys(touched))
        for name in touched:
            text[name] += f"# change {i}\n"
        message = f"{words[touched[0]]} {' '.join(rng.sample(common, 3))}"
        history.append((message, {n: text[n] for n in touched}, when))
        when += 6 * 3600 + rng.randrange(-3600, 3600)
    return _fast_import(repo, history)


def _fast_import(repo: Path, history: list[tuple[str, dict[str, str], int]]) -> Path:
    """Commit ``(message, {path: text}, time)`` in order on main with ``git fast-import``."""
    stream = []
    for message, files, at in history:
        stamp = f"{at} +0000"
        stream += [
            "commit refs/heads/main",
            f"author Test <test@example.com> {stamp}",
            f"committer Test <test@example.com> {stamp}",
            _data(message),
        ]
        for name, body in files.items():
            stream += [f"M 100644 inline {name}", _data(body)]
    subprocess.run(
        ["git", "-C", str(repo), "fast-import", "--quiet"],
        input="\n".join(stream) + "\n",
        text=True,
        check=True,
        capture_output=True,
    )
    git(repo, "reset", "-q", "--hard")
    return repo
