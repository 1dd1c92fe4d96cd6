"""Macro-averages over ``synapse-retriever bench quality`` reports, with paired bootstrap CIs.

Each report is one repository. A row's gain over another row is paired per query
(recall@k of the same test commit); the macro gain is the mean of the repositories'
mean gains, and its 95% interval comes from resampling each repository's queries
independently (a stratified paired bootstrap) and averaging.

Examples
--------
>>> a = {"name": "a", "variants": {"online": {"by_k": {"5": {"rows": {
...     "vector": {"per_query_recall": [0.0, 0.5], "worse": 0},
...     "synapse": {"per_query_recall": [1.0, 0.5], "worse": 0}}}}}}}
>>> b = {"name": "b", "variants": {"online": {"by_k": {"5": {"rows": {
...     "vector": {"per_query_recall": [0.5], "worse": 0},
...     "synapse": {"per_query_recall": [0.5], "worse": 0}}}}}}}
>>> gain = paired_gain([a, b], "online", "5", "synapse", "vector")
>>> gain.per_repository, gain.macro  # a: (1.0 + 0.0) / 2 = 0.5; b: 0.0; macro 0.25
({'a': 0.5, 'b': 0.0}, 0.25)
"""

from __future__ import annotations

import os
import random
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from synapse_retriever.bench.metrics import mean
from synapse_retriever.bench.plots import save_figure

__all__ = ["BASELINES", "Gain", "macro_markdown", "paired_gain", "plot_gains", "recall_markdown"]


@dataclass(frozen=True)
class Gain:
    """A row's recall gain over another, per repository and macro-averaged.

    ``ci95`` is the macro gain's interval; ``worse_share`` the mean over repositories
    of the share of queries where the row's recall is lower than the other's.
    """

    per_repository: dict[str, float]
    macro: float
    ci95: tuple[float, float]
    worse_share: float


def paired_gain(
    reports: Sequence[Mapping[str, Any]],
    variant: str,
    k: str,
    row: str,
    against: str,
    *,
    resamples: int = 2000,
    seed: int = 0,
) -> Gain:
    """Gain of ``row`` over ``against`` (recall@k, per query), per repository and macro."""
    deltas: dict[str, list[float]] = {}
    for report in reports:
        rows = report["variants"][variant]["by_k"][k]["rows"]
        mine, theirs = rows[row]["per_query_recall"], rows[against]["per_query_recall"]
        deltas[report["name"]] = [m - t for m, t in zip(mine, theirs, strict=True)]
    per = {name: mean(d) for name, d in deltas.items()}
    rng = random.Random(seed)
    means = []
    for _ in range(resamples):
        total = 0.0
        for d in deltas.values():
            total += sum(rng.choices(d, k=len(d))) / len(d) if d else 0.0
        means.append(total / max(len(deltas), 1))
    means.sort()
    low = means[int(0.025 * (resamples - 1))]
    high = means[-int(0.025 * (resamples - 1)) - 1]
    worse = mean([mean([1.0 if x < -1e-12 else 0.0 for x in d]) for d in deltas.values()])
    return Gain(per, mean(list(per.values())), (low, high), worse)


BASELINES = ("vector", "recency", "co-change", "actr-prior", "synapse-published")
"""The rows ``plot_gains`` measures a row against, where a report has them: vector search
alone, the two query-blind baselines, the query-blind ACT-R prior and the method as
published."""


def macro_markdown(
    reports: Sequence[Mapping[str, Any]],
    *,
    row: str = "synapse",
    against: Sequence[str] = (
        "vector",
        "synapse-published",
        "synapse-blind",
        "synapse-nolift",
        "recency",
        "co-change",
        "actr-prior",
    ),
    resamples: int = 2000,
) -> str:
    """One Markdown table per variant: ``row``'s recall gain (points) over each other row,
    per repository and macro-averaged with its 95% interval and share of worse queries.
    """
    names = [report["name"] for report in reports]
    out: list[str] = []
    first = reports[0]
    for variant, data in first["variants"].items():
        header = ["k", f"{row} vs", *names, "macro [95% CI]", "worse"]
        out.append(f"{variant}:")
        out.append("")
        out.append("| " + " | ".join(header) + " |")
        out.append("|" + "|".join(" --- " for _ in header) + "|")
        for k in data["by_k"]:
            for other in against:
                if other == row or other not in data["by_k"][k]["rows"]:
                    continue
                gain = paired_gain(reports, variant, k, row, other, resamples=resamples)
                cells = [k, other, *(f"{100 * gain.per_repository[n]:+.1f}" for n in names)]
                low, high = gain.ci95
                cells.append(f"{100 * gain.macro:+.1f} [{100 * low:+.1f}, {100 * high:+.1f}]")
                cells.append(f"{100 * gain.worse_share:.1f}%")
                out.append("| " + " | ".join(cells) + " |")
        out.append("")
    return "\n".join(out)


def recall_markdown(reports: Sequence[Mapping[str, Any]]) -> str:
    """One Markdown table per variant: recall@k (percent) of every row, per repository
    and macro-averaged; rows and k as in the first report."""
    names = [report["name"] for report in reports]
    out: list[str] = []
    for variant, data in reports[0]["variants"].items():
        header = ["k", "row", *names, "macro"]
        out.append(f"{variant}, recall@k:")
        out.append("")
        out.append("| " + " | ".join(header) + " |")
        out.append("|" + "|".join(" --- " for _ in header) + "|")
        for k, block in data["by_k"].items():
            for row in block["rows"]:
                values = [r["variants"][variant]["by_k"][k]["rows"][row]["recall"] for r in reports]
                cells = [k, row, *(f"{100 * v:.1f}" for v in values), f"{100 * mean(values):.1f}"]
                out.append("| " + " | ".join(cells) + " |")
        out.append("")
    return "\n".join(out)


def plot_gains(
    reports: Sequence[Mapping[str, Any]],
    path: str | os.PathLike[str],
    *,
    row: str = "synapse",
    against: Sequence[str] = BASELINES,
    resamples: int = 2000,
) -> None:
    """Draw ``row``'s recall gain over each baseline with its 95% interval: one panel per
    variant, one line of the chart per baseline, one marker per k.

    The gains and intervals are ``paired_gain``'s: with one report, that repository's
    paired bootstrap; with several, the macro gain and its stratified interval. The format
    is the path's suffix (``.svg``, ``.png``, ``.pdf``); PNG if matplotlib knows no such
    format.
    """
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    first = reports[0]
    variants = list(first["variants"])
    ks = list(first["variants"][variants[0]]["by_k"])
    shown = [
        other
        for other in against
        if other != row and other in first["variants"][variants[0]]["by_k"][ks[0]]["rows"]
    ]
    figure, axes = plt.subplots(
        1, len(variants), figsize=(4.4 * len(variants) + 1.2, 0.55 * len(shown) + 1.6),
        squeeze=False, sharex=True, sharey=True,
    )  # fmt: skip
    offsets = [0.32 * (i - (len(ks) - 1) / 2) for i in range(len(ks))]
    markers = "osD^v"
    for panel, variant in zip(axes[0], variants, strict=True):
        for number, k in enumerate(ks):
            gains = [
                paired_gain(reports, variant, k, row, other, resamples=resamples) for other in shown
            ]
            ys = [position + offsets[number] for position in range(len(shown))]
            xs = [100 * gain.macro for gain in gains]
            below = [100 * (gain.macro - gain.ci95[0]) for gain in gains]
            above = [100 * (gain.ci95[1] - gain.macro) for gain in gains]
            panel.errorbar(
                xs, ys, xerr=[below, above], fmt=markers[number % len(markers)],
                capsize=3, label=f"k = {k}",
            )  # fmt: skip
        panel.axvline(0, color="grey", linewidth=0.8)
        panel.set_title(variant)
        panel.set_xlabel(f"{row} recall gain, points (95% CI)")
        panel.grid(True, axis="x", alpha=0.3)
    axes[0][0].set_yticks(range(len(shown)), [f"over {other}" for other in shown])
    axes[0][0].invert_yaxis()
    axes[0][-1].legend(fontsize=8)
    names = ", ".join(report["name"] for report in reports)
    retriever = first.get("settings", {}).get("retriever", "?")
    scope = names if len(reports) == 1 else f"macro over {names}"
    figure.suptitle(f"bench quality: {scope} ({retriever} baseline)", fontsize=10)
    figure.tight_layout()
    save_figure(figure, path)
