"""``synapse-retriever bench quality``: does the graph find more of what a change needs, at a k?

Protocol (on any local git repository, bare or not):

1. Commits. Every non-merge commit that touches 1 to 32 files (after rename
   detection; deletions do not count) is an *event*, in committer-date order
   (:mod:`synapse_retriever.capture.gitlog`). The first 80% teach, the last 20% test.
2. Queries. A test commit's query is its message; its relevant set is the files it
   touched that existed in its first parent's tree; the documents are the files of
   that tree (text files by path and content, others by path). A commit none of whose
   files existed before (it only adds files) asks no query, but is still observed.
3. Baseline. A vector top-k over the documents: TF-IDF cosine by default (a
   deterministic sparse embedding), BM25, or a dense model shipped in a wheel
   (all-MiniLM-L6-v2, when its optional packages are installed); collection statistics
   are fitted once on the tree of the last teaching commit
   (:mod:`synapse_retriever.bench.retrievers`).
4. Rows. Every row fills the same k slots from the same vector hits
   (:mod:`synapse_retriever.bench.methods`): the method through ``recall`` with the
   run's configuration, the method as published, the configuration's query-blind twin
   and its variant without the association term, a co-change baseline, a recency
   baseline, a query-blind ACT-R prior, and two oracles. The baselines and the oracles
   take at most 2 slots; the method takes up to its ``max_inject`` (2 by default).
5. Variants. *frozen*: rows learn from the teaching commits only (the graph still
   decays to each query's time). *online*: each test commit is also learned right
   after its query is scored. The variant bounds what every row may know.
6. Metrics at k = 5 and 10: recall@k, nDCG@k, hit@k, per-query recall deltas against
   the vector baseline with a paired bootstrap 95% interval, how many queries got
   better or worse (by recall@k, then nDCG@k on ties), and the share of the oracle's
   recall gain each row reaches. Precision: the share of a row's injections that were
   relevant, the share of the hits it displaced that were, and the share of queries
   given an injection their relevant set did not need
   (:class:`~synapse_retriever.bench.metrics.Injections`).
7. Several histories (:func:`run_several`): one store learns two or more repositories
   at once, their eligible commits merged in time order in one namespace (as an agent
   working on all of them would), ids prefixed with each repository's name; the merged
   history is split at 80% in time. Each test commit asks with hits from its own
   repository's tree (its retriever fitted on that repository's last teaching tree),
   and may be given any file of every repository (its own parent tree, the others'
   trees at the split): an injected file of another repository is off topic, and is
   counted as such.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from typing import Any

from synapse_retriever.bench.methods import (
    ROWS,
    MissCounts,
    Query,
    RowSettings,
    Synapse,
    build_rows,
)
from synapse_retriever.bench.metrics import (
    Injections,
    hit_at_k,
    injections,
    mean,
    ndcg_at_k,
    oracle_share,
    paired_bootstrap_ci,
    recall_at_k,
)
from synapse_retriever.bench.retrievers import RETRIEVERS, Document, Retriever
from synapse_retriever.capture.gitlog import (
    MAX_FILES,
    BlobReader,
    Commit,
    TreeEntry,
    check_repository,
    read_commits,
    tree_files,
)
from synapse_retriever.config import SynapseConfig, validate_namespace
from synapse_retriever.errors import InvalidValueError

__all__ = [
    "VARIANTS",
    "HeldOut",
    "Prepared",
    "QualitySettings",
    "evaluate",
    "markdown_tables",
    "prepare",
    "prepare_several",
    "run_quality",
    "run_several",
    "score_table",
]

VARIANTS = ("frozen", "online")

Progress = Callable[[str, int, int], None]
"""``progress(phase, done, total)``."""

MAX_TEXT_BYTES = 1_000_000
"""Files larger than this are indexed by their path only."""


@dataclass(frozen=True)
class QualitySettings:
    """Everything that defines a quality run (recorded in its JSON)."""

    split: float = 0.8
    ks: tuple[int, ...] = (5, 10)
    retriever: str = "tfidf"
    variants: tuple[str, ...] = VARIANTS
    rows: tuple[str, ...] = tuple(ROWS)
    namespace: str = "shared"
    max_files: int = MAX_FILES
    resamples: int = 2000
    config: SynapseConfig = field(default_factory=SynapseConfig)

    def __post_init__(self) -> None:
        if not 0.0 < self.split < 1.0:
            raise InvalidValueError(f"split must be between 0 and 1, got {self.split}")
        if not self.ks or any(k < 2 for k in self.ks):
            raise InvalidValueError(f"every k must be at least 2, got {list(self.ks)}")
        if self.retriever not in RETRIEVERS:
            raise InvalidValueError(
                f"unknown retriever {self.retriever!r}; known: {', '.join(RETRIEVERS)}"
            )
        bad = [v for v in self.variants if v not in VARIANTS]
        if bad or not self.variants:
            raise InvalidValueError(f"variants must be among {list(VARIANTS)}, got {bad or []}")
        unknown = [r for r in self.rows if r not in ROWS]
        if unknown:
            raise InvalidValueError(f"unknown rows {unknown}; known: {', '.join(ROWS)}")
        validate_namespace(self.namespace)


@dataclass(frozen=True)
class HeldOut:
    """A held-out (test) commit, with its query and vector hits (None: it asks no query)."""

    commit: Commit
    query: Query | None
    hits: tuple[tuple[str, float], ...] = ()


@dataclass(frozen=True)
class Prepared:
    """The split history and the vector hits of every query, shared by all variants."""

    repository: str
    head: str
    commits_read: int
    teach: tuple[Commit, ...]
    test: tuple[HeldOut, ...]
    documents_at_split: int
    projects: tuple[str, ...] = ()
    """The repositories' names when one store learns several (ids ``name/path``)."""


def _documents(tree: dict[str, TreeEntry], blobs: BlobReader) -> list[Document]:
    """The files of ``tree`` as documents; binary and very large files have no text."""

    def loader(entry: TreeEntry) -> Callable[[], str]:
        def load() -> str:
            if entry.size > MAX_TEXT_BYTES:
                return ""
            data = blobs.read(entry.blob)
            return "" if b"\0" in data[:8000] else data.decode("utf-8", "replace")

        return load

    return [Document(path, entry.blob, loader(entry)) for path, entry in sorted(tree.items())]


def prepare(
    repo: str | os.PathLike[str],
    settings: QualitySettings,
    *,
    rev: str = "HEAD",
    since: float | None = None,
    progress: Progress | None = None,
) -> Prepared:
    """Read and split the history, fit the retriever, and compute every query's vector hits.

    Raises
    ------
    GitError
        ``repo`` is not a git repository, or ``rev`` is unknown.
    InvalidValueError
        Too few commits to split, or no test commit that can be a query.
    """
    head = check_repository(repo, rev)
    commits = read_commits(repo, rev=rev, since=since)
    events = [c for c in commits if 1 <= len(c.files) <= settings.max_files]
    cut = int(len(events) * settings.split)
    teach, test = events[:cut], events[cut:]
    if not teach or not test:
        raise InvalidValueError(
            f"{os.fspath(repo)!r} has {len(events)} usable commits (non-merge, 1 to "
            f"{settings.max_files} files): too few to split into teaching and test commits"
        )
    retriever: Retriever = RETRIEVERS[settings.retriever]()
    k_max = max(settings.ks)
    items: list[HeldOut] = []
    with BlobReader(repo) as blobs:
        at_split = _documents(tree_files(repo, teach[-1].sha), blobs)
        retriever.fit(at_split)
        for done, commit in enumerate(test, start=1):
            query: Query | None = None
            hits: tuple[tuple[str, float], ...] = ()
            if commit.parents:
                tree = tree_files(repo, commit.parents[0])
                relevant = frozenset(f for f in commit.files if f in tree)
                if relevant:
                    documents = _documents(tree, blobs)
                    query = Query(commit.message, commit.commit_time, relevant, frozenset(tree))
                    hits = tuple(retriever.search(commit.message, documents, k_max))
            items.append(HeldOut(commit, query, hits))
            if progress is not None:
                progress("vector search", done, len(test))
    if not any(item.query is not None for item in items):
        raise InvalidValueError(
            f"none of the {len(test)} test commits of {os.fspath(repo)!r} changed a file that "
            "existed before it: nothing to query"
        )
    return Prepared(
        repository=os.fspath(repo),
        head=head,
        commits_read=len(commits),
        teach=tuple(teach),
        test=tuple(items),
        documents_at_split=len(at_split),
    )


def _prefixed(commit: Commit, name: str) -> Commit:
    """``commit`` with its paths as ``name/path``."""
    return replace(
        commit,
        files=tuple(f"{name}/{f}" for f in commit.files),
        deleted=tuple(f"{name}/{f}" for f in commit.deleted),
        renamed=tuple((f"{name}/{a}", f"{name}/{b}") for a, b in commit.renamed),
    )


def prepare_several(
    repos: Sequence[tuple[str | os.PathLike[str], str]],
    settings: QualitySettings,
    *,
    rev: str = "HEAD",
    since: float | None = None,
    progress: Progress | None = None,
) -> Prepared:
    """One history of several repositories ``(path, name)``: see the module's step 7.

    Raises
    ------
    GitError
        A path is not a git repository, or ``rev`` is unknown in it.
    InvalidValueError
        Fewer than two repositories, names that repeat or hold a ``/``, a repository
        with no teaching commit, or no test commit that can be a query.
    """
    names = [name for _, name in repos]
    if len(repos) < 2 or len(set(names)) != len(names) or any("/" in n or not n for n in names):
        raise InvalidValueError(
            f"several histories need two or more distinct names without '/', got {names}"
        )
    heads, read, merged = [], 0, []
    for position, (repo, _) in enumerate(repos):
        heads.append(check_repository(repo, rev))
        commits = read_commits(repo, rev=rev, since=since)
        read += len(commits)
        merged += [
            (c.commit_time, position, c) for c in commits if 1 <= len(c.files) <= settings.max_files
        ]
    merged.sort(key=lambda item: (item[0], item[1]))
    cut = int(len(merged) * settings.split)
    teach, test = merged[:cut], merged[cut:]
    retrievers: list[Retriever] = []
    documents_at_split = 0
    others: dict[int, list[Document]] = {}
    k_max = max(settings.ks)
    items: list[HeldOut] = []
    blob_readers = [BlobReader(repo) for repo, _ in repos]
    try:
        for position, ((repo, name), blobs) in enumerate(zip(repos, blob_readers, strict=True)):
            last = [c for _, p, c in teach if p == position]
            if not last:
                raise InvalidValueError(
                    f"{name!r} has no commit in the first {settings.split:.0%} of the merged "
                    "history: nothing to teach from it"
                )
            at_split = _documents(tree_files(repo, last[-1].sha), blobs)
            retriever: Retriever = RETRIEVERS[settings.retriever]()
            retriever.fit(at_split)
            retrievers.append(retriever)
            documents_at_split += len(at_split)
            others[position] = [replace(d, path=f"{name}/{d.path}") for d in at_split]
        for done, (_, position, commit) in enumerate(test, start=1):
            repo, name = repos[position]
            query: Query | None = None
            hits: tuple[tuple[str, float], ...] = ()
            if commit.parents:
                tree = tree_files(repo, commit.parents[0])
                relevant = frozenset(f"{name}/{f}" for f in commit.files if f in tree)
                if relevant:
                    own = _documents(tree, blob_readers[position])
                    found = retrievers[position].search(commit.message, own, k_max)
                    hits = tuple((f"{name}/{node}", score) for node, score in found)
                    pool = {f"{name}/{path}" for path in tree}
                    for other, docs in others.items():
                        if other != position:
                            pool.update(d.path for d in docs)
                    query = Query(
                        commit.message, commit.commit_time, relevant, frozenset(pool), name
                    )
            items.append(HeldOut(_prefixed(commit, name), query, hits))
            if progress is not None:
                progress("vector search", done, len(test))
    finally:
        for blobs in blob_readers:
            blobs.close()
    if not any(item.query is not None for item in items):
        raise InvalidValueError(
            f"none of the {len(test)} test commits of {names} changed a file that existed "
            "before it: nothing to query"
        )
    return Prepared(
        repository=", ".join(os.fspath(repo) for repo, _ in repos),
        head="+".join(head[:12] for head in heads),
        commits_read=read,
        teach=tuple(_prefixed(c, repos[p][1]) for _, p, c in teach),
        test=tuple(items),
        documents_at_split=documents_at_split,
        projects=tuple(names),
    )


def _better(a: tuple[float, float], b: tuple[float, float]) -> int:
    """+1 if ``a`` beats ``b`` (recall first, then nDCG), -1 if it loses, 0 on a tie."""
    for x, y in zip(a, b, strict=True):
        if x > y + 1e-12:
            return 1
        if x < y - 1e-12:
            return -1
    return 0


def evaluate(
    prepared: Prepared,
    settings: QualitySettings,
    variant: str,
    *,
    progress: Progress | None = None,
    store_path: str = ":memory:",
) -> dict[str, Any]:
    """Score every row of ``settings.rows`` in one variant; a JSON-ready dict.

    ``store_path`` is where the ``synapse`` row's graph lives (``:memory:`` by default).
    """
    names = list(dict.fromkeys(["vector", *settings.rows]))
    rows = build_rows(names, RowSettings(settings.config, settings.namespace, store_path))
    total = len(prepared.teach) + len(prepared.test)
    step = 0
    for commit in prepared.teach:
        for row in rows:
            row.observe(commit)
        step += 1
        if progress is not None and (step % 50 == 0 or step == len(prepared.teach)):
            progress(variant, step, total)
    scores: dict[int, dict[str, list[tuple[float, float, float]]]] = {
        k: {row.name: [] for row in rows} for k in settings.ks
    }
    misses = {k: MissCounts() for k in settings.ks}
    counts = {k: {row.name: Injections() for row in rows} for k in settings.ks}
    shas: list[str] = []
    for item in prepared.test:
        if item.query is not None:
            shas.append(item.commit.sha)
            for k in settings.ks:
                hits = list(item.hits[:k])
                for row in rows:
                    ranked = row.rerank(item.query, hits)
                    if len(ranked) != len(hits):
                        raise AssertionError(f"row {row.name} changed the count of hits")
                    relevant = item.query.relevant
                    counts[k][row.name] += injections(
                        [node for node, _ in hits],
                        ranked,
                        relevant,
                        item.query.on_topic if item.query.project is not None else None,
                    )
                    scores[k][row.name].append(
                        (
                            recall_at_k(ranked, relevant, k),
                            ndcg_at_k(ranked, relevant, k),
                            hit_at_k(ranked, relevant, k),
                        )
                    )
                    if isinstance(row, Synapse) and row.name == "synapse":
                        for key, value in row.last_misses.as_dict().items():
                            setattr(misses[k], key, getattr(misses[k], key) + value)
        if variant == "online":
            for row in rows:
                row.observe(item.commit)
        step += 1
        if progress is not None:
            progress(variant, step, total)
    for row in rows:
        close = getattr(row, "close", None)
        if callable(close):
            close()
    by_k = {
        str(k): {
            "rows": score_table(
                names, scores[k], counts[k], settings.resamples, bool(prepared.projects)
            ),
            "synapse_misses": misses[k].as_dict(),
        }
        for k in settings.ks
    }
    return {"queries": shas, "by_k": by_k}


Scores = Mapping[str, Sequence[tuple[float, float, float]]]
"""Per row, per query: (recall, nDCG, hit) at one k."""


def score_table(
    names: Sequence[str],
    scores: Scores,
    counts: Mapping[str, Injections],
    resamples: int,
    several: bool = False,
) -> dict[str, Any]:
    """Each row's entry of a quality table at one k, against the ``vector`` row (and the
    ``oracle`` row's gain, if scored): recall, nDCG, hit, the recall change with its paired
    bootstrap interval, queries better and worse, the oracle share, and the precision
    entries (off-topic shares when ``several`` histories share the store)."""
    base = scores["vector"]
    oracle = scores.get("oracle")
    table: dict[str, Any] = {}
    for name in names:
        mine = scores[name]
        deltas = [m[0] - b[0] for m, b in zip(mine, base, strict=True)]
        verdicts = [_better(m[:2], b[:2]) for m, b in zip(mine, base, strict=True)]
        low, high = paired_bootstrap_ci(deltas, resamples=resamples)
        recall = mean([m[0] for m in mine])
        share = (
            oracle_share(recall, mean([b[0] for b in base]), mean([o[0] for o in oracle]))
            if oracle is not None
            else None
        )
        table[name] = {
            "recall": recall,
            "ndcg": mean([m[1] for m in mine]),
            "hit": mean([m[2] for m in mine]),
            "delta_recall": mean(deltas),
            "delta_recall_ci95": [low, high],
            "delta_ndcg": mean([m[1] - b[1] for m, b in zip(mine, base, strict=True)]),
            "improved": verdicts.count(1),
            "worse": verdicts.count(-1),
            "oracle_share": share,
            **_precision(counts[name], several),
            "per_query_recall": [round(m[0], 6) for m in mine],
        }
    return table


def _precision(counts: Injections, several: bool) -> dict[str, Any]:
    """The precision entries of a row: counts and shares (off topic only for several
    histories)."""
    shares = counts.shares()
    out: dict[str, Any] = {
        "injected": counts.injected,
        "injected_precision": shares["injected_precision"],
        "displaced": counts.displaced,
        "displaced_relevant": shares["displaced_relevant"],
        "queries_injected": counts.queries_injected,
        "queries_unneeded": shares["queries_unneeded"],
    }
    if several:
        out["off_topic"] = shares["off_topic"]
        out["queries_off_topic"] = shares["queries_off_topic"]
    return out


def run_quality(
    repo: str | os.PathLike[str],
    settings: QualitySettings | None = None,
    *,
    rev: str = "HEAD",
    since: float | None = None,
    progress: Progress | None = None,
    store_path: str | None = None,
    name: str | None = None,
) -> dict[str, Any]:
    """Run the whole benchmark; the JSON-ready report (see :func:`markdown_tables`).

    ``store_path``, if given, keeps the frozen variant's graph (learned from the
    teaching commits) in that file for inspection with ``synapse-retriever stats`` / ``edges``.
    ``name`` labels the repository in tables (default: its directory name).
    """
    settings = settings or QualitySettings()
    prepared = prepare(repo, settings, rev=rev, since=since, progress=progress)
    return _run(prepared, settings, rev, since, progress, store_path, name)


def run_several(
    repos: Sequence[str | os.PathLike[str]],
    settings: QualitySettings | None = None,
    *,
    rev: str = "HEAD",
    since: float | None = None,
    progress: Progress | None = None,
    names: Sequence[str] | None = None,
) -> dict[str, Any]:
    """Run the benchmark on several histories learned in one store (the module's step 7).

    The report is :func:`run_quality`'s, named ``"a + b"``, with ``projects`` (the
    names, default: the directory names) and, per row, the off-topic shares:
    ``off_topic`` (of injections, a file of another repository) and
    ``queries_off_topic`` (of queries given at least one).
    """
    settings = settings or QualitySettings()
    labels = list(names) if names is not None else [_name(os.fspath(r)) for r in repos]
    if len(labels) != len(repos):
        raise InvalidValueError(f"{len(repos)} repositories need as many names, got {labels}")
    prepared = prepare_several(
        list(zip(repos, labels, strict=True)), settings, rev=rev, since=since, progress=progress
    )
    report = _run(prepared, settings, rev, since, progress, None, " + ".join(labels))
    report["projects"] = labels
    return report


def _run(
    prepared: Prepared,
    settings: QualitySettings,
    rev: str,
    since: float | None,
    progress: Progress | None,
    store_path: str | None,
    name: str | None,
) -> dict[str, Any]:
    """Every variant of ``prepared``, and the report around them."""
    variants: dict[str, Any] = {}
    for variant in settings.variants:
        path = store_path if store_path is not None and variant == "frozen" else ":memory:"
        variants[variant] = evaluate(
            prepared, settings, variant, progress=progress, store_path=path
        )
    queries = sum(1 for item in prepared.test if item.query is not None)
    config = {
        name: value
        for name, value in settings.config.flat().items()
        if not isinstance(value, Mapping)
    }
    return {
        "benchmark": "synapse-retriever bench quality",
        "name": name or _name(prepared.repository),
        "repository": prepared.repository,
        "rev": rev,
        "head": prepared.head,
        "settings": {
            "split": settings.split,
            "ks": list(settings.ks),
            "retriever": settings.retriever,
            "namespace": settings.namespace,
            "max_files": settings.max_files,
            "since": since,
            "config": config,
        },
        "commits": {
            "read": prepared.commits_read,
            "teach": len(prepared.teach),
            "test": len(prepared.test),
            "queries": queries,
            "test_without_query": len(prepared.test) - queries,
            "split_at": _iso(prepared.teach[-1].commit_time),
            "last_at": _iso(prepared.test[-1].commit.commit_time),
            "documents_at_split": prepared.documents_at_split,
        },
        "variants": variants,
    }


def _name(repository: str) -> str:
    base = os.path.basename(os.path.abspath(repository))
    return base[:-4] if base.endswith(".git") and len(base) > 4 else base


def _iso(seconds: float) -> str:
    return datetime.fromtimestamp(seconds, UTC).strftime("%Y-%m-%d")


def _points(value: float) -> str:
    return f"{100 * value:.1f}"


def _share(value: float | None) -> str:
    return "—" if value is None else _points(value)


def _signed(value: float) -> str:
    return f"{100 * value:+.1f}"


def table_rows(report: dict[str, Any], variant: str) -> tuple[list[str], list[list[str]]]:
    """Header and cells of one variant's table (numbers in points, i.e. percent)."""
    by_k = report["variants"][variant]["by_k"]
    ks = [str(k) for k in report["settings"]["ks"]]
    header = ["row"]
    for k in ks:
        header += [f"R@{k}", f"ΔR@{k} [95% CI]", f"nDCG@{k}", f"hit@{k}", f"+/−@{k}"]
    last = ks[-1]
    header.append(f"oracle share@{last}")
    several = "off_topic" in by_k[last]["rows"]["vector"]
    header += [f"inj. relevant@{last}", f"displ. relevant@{last}", f"q. unneeded@{last}"]
    if several:
        header += [f"inj. off topic@{last}", f"q. off topic@{last}"]
    cells: list[list[str]] = []
    for name in by_k[ks[0]]["rows"]:
        line = [name]
        for k in ks:
            row = by_k[k]["rows"][name]
            low, high = row["delta_recall_ci95"]
            delta = (
                "—"
                if name == "vector"
                else f"{_signed(row['delta_recall'])} [{_signed(low)}, {_signed(high)}]"
            )
            better = "—" if name == "vector" else f"{row['improved']}/{row['worse']}"
            line += [
                _points(row["recall"]),
                delta,
                _points(row["ndcg"]),
                _points(row["hit"]),
                better,
            ]
        share = by_k[ks[-1]]["rows"][name]["oracle_share"]
        line.append("—" if share is None or name in ("vector", "oracle") else f"{share:.0%}")
        row = by_k[last]["rows"][name]
        keys = ["injected_precision", "displaced_relevant", "queries_unneeded"]
        keys += ["off_topic", "queries_off_topic"] if several else []
        line += [_share(row.get(key)) for key in keys]
        cells.append(line)
    return header, cells


def markdown_tables(report: dict[str, Any]) -> str:
    """The report as Markdown: a heading line and one table per variant."""
    commits = report["commits"]
    settings = report["settings"]
    heading = (
        f"{report['name']} @ {report['head'][:12]}: {commits['teach']} teaching commits up to "
        f"{commits['split_at']}, {commits['queries']} test queries up to {commits['last_at']}; "
        f"baseline {settings['retriever']}"
        if "head" in report
        else f"{report['name']}: {commits['queries']} queries"  # a --queries report
    )
    out = [heading, ""]
    for variant in report["variants"]:
        header, cells = table_rows(report, variant)
        out.append(f"{variant}:")
        out.append("")
        out.append("| " + " | ".join(header) + " |")
        out.append("|" + "|".join(" --- " for _ in header) + "|")
        out.extend("| " + " | ".join(line) + " |" for line in cells)
        misses = report["variants"][variant]["by_k"][str(settings["ks"][-1])]["synapse_misses"]
        if any(misses.values()):
            out.append("")
            out.append(
                f"relevant files missing from the vector top-{settings['ks'][-1]}, "
                "as the graph saw them: "
                + ", ".join(f"{key.replace('_', ' ')} {value}" for key, value in misses.items())
            )
        out.append("")
    return "\n".join(out)


def summary(report: dict[str, Any]) -> Sequence[str]:
    """One line per variant and k: every row's recall change against the vector baseline."""
    lines = []
    for variant, data in report["variants"].items():
        for k, block in data["by_k"].items():
            rows = block["rows"]
            if "synapse" not in rows:
                continue
            parts = [f"{variant} k={k}: synapse {_signed(rows['synapse']['delta_recall'])}"]
            parts += [
                f"{name} {_signed(rows[name]['delta_recall'])}"
                for name in (
                    "synapse-published",
                    "synapse-blind",
                    "synapse-nolift",
                    "co-change",
                    "recency",
                    "actr-prior",
                )
                if name in rows
            ]
            lines.append(", ".join(parts) + " recall points vs vector")
    return lines
