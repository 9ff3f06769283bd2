"""Figures keyed on the journal's axes (analysis/figures.py) and fio-plot's latency percentile plot of the tests
whose single runs the report shows (analysis/detail.py): HTML draws them, Markdown and XLSX tabulate them."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from tankbench.analysis.detail import PCTS
from tankbench.analysis.figures import MAX_SERIES, Figure, Series, figures, tidy
from tankbench.analysis.result import Analysis, Context, SectionSpec
from tankbench.analysis.section import Figures, Para, Section
from tankbench.analysis.sections.series import SECTION as SERIES
from tankbench.metrics import METRICS


def compute(ctx: Context) -> tuple[Figure, ...]:
    return figures(ctx.ds, ctx.options["per_case"])


def percentile_figures(a: Analysis, pct: Mapping[str, Mapping[str, list[float]]]) -> list[Figure]:
    """fio-plot's latency percentile plot: per test case, one line per plotted test and direction; past
    MAX_SERIES lines the figure says how many it leaves out (every value is in results.json)."""
    by_case: dict[str, list[Series]] = {}
    ids: dict[str, list[str]] = {}
    x = tuple(p.rstrip("0").rstrip(".") for p in PCTS)
    for t in a.dataset.tests:
        for d, vals in pct.get(t.id, {}).items():
            by_case.setdefault(t.case, []).append(Series(f"#{t.number} {t.name} ({d})", tuple(zip(x, vals))))
            ids.setdefault(t.case, []).append(t.id)
    out = []
    for case, ss in by_case.items():
        left = len(ss) - MAX_SERIES
        note = f"{left} more line(s) not drawn: {', '.join(s.label for s in ss[MAX_SERIES:])}" if left > 0 else ""
        title = f"{case}: completion latency percentiles, last measured run"
        fig = Figure(f"percentiles-{case}", title, "lines", "p99_ms", "percentile", x, tuple(ss[:MAX_SERIES]), note,
                     tuple(ids[case]), y_label="clat ms")  # fmt: skip
        out.append(tidy(fig))
    return out


def render(a: Analysis, figs: tuple[Figure, ...]) -> Section:
    higher = {lb.case: METRICS[lb.metric].higher_is_better is not False for lb in a.leaderboards}
    pct = a.part(SERIES).percentiles
    drawn = (*figs, *percentile_figures(a, pct))
    if not drawn:
        text = (
            "No axis with several values that a figure plots (iodepth, numjobs, layout, cache, recordsize) and no "
            "fio latency percentiles in this journal."
        )
        return Section("figures", "Figures", (Para(text, "small"),))
    intro = Para(
        "Drawn from the journal's axes; each value is the mean of the measured runs of one test (points and cells "
        "have tooltips; every number is in results.json).",
        "small",
    )
    return Section("figures", "Figures", (intro, Figures(drawn, higher)), sheet="figures")


def to_json(a: Analysis, figs: tuple[Figure, ...]) -> Mapping[str, Any]:
    return {
        "figures": [
            {
                "id": f.id,
                "title": f.title,
                "kind": f.kind,
                "metric": f.metric,
                "x": f.x,
                "x_values": list(f.x_values),
                "note": f.note,
                "test_ids": list(f.test_ids),
                "series": [{"label": s.label, "points": [list(p) for p in s.points]} for s in f.series],
            }
            for f in figs
        ]
    }


SECTION = SectionSpec("figures", 120, compute, render, to_json)
