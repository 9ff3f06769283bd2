"""Which factors matter (issue 29; analysis/factors.py): per workload, the factors ranked by effect with their 95 %
intervals (a table and a bar chart), the interactions the data support, how sure the ranking is, what the design
could not separate, which tests were not run and why, and the unmeasured tests the fit puts near the winner
(predicted, with their intervals; never ranked)."""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from tankbench.analysis.factors import FactorReport, WorkloadFactors, factor_report
from tankbench.analysis.result import Analysis, Context, SectionSpec
from tankbench.analysis.section import HTML, MD, XLSX, Bars, Cell, Column, Items, Para, Part, Section, Table

COLUMNS = (
    Column("workload"),
    Column("rank", num=True),
    Column("factor"),
    Column("storage", tip="a configuration axis (target, ZFS property, SLOG, module parameter, layout, size)"),
    Column("best level"),
    Column("worst level"),
    Column("effect", num=True, tip="best over worst level of the fit's mean log throughput, as a ratio", scale=True),
    Column("ci_low", "95 % low", num=True, tip="interval of the ratio from the fit's covariance (Student t)"),
    Column("ci_high", "95 % high", num=True),
    Column("p", num=True, tip="two-sided p of the best-worst contrast"),
    Column("separated", tip="larger than the next factor's effect at 95 %"),
    Column(
        "chart",
        tip="the effect as a bar: one block per 1/20 of the largest log effect",
        only=frozenset({MD, XLSX}),
    ),
)
BAR_WIDTH = 20
#: where the list of tests not run goes (the CSV has one row per run; results.json lists them too)
SKIPPED_IN = frozenset({HTML, MD, XLSX})


def compute(ctx: Context) -> FactorReport | None:
    return factor_report(ctx.journal) if ctx.journal is not None else None


def _rows(w: WorkloadFactors) -> list[tuple[Any, ...]]:
    top = max((math.log(e.ratio) for e in w.effects), default=0.0) or 1.0
    rows = []
    for i, e in enumerate(w.effects):
        sep = ("yes" if w.certain[i] else "no") if i < len(w.certain) else "—"
        bar = "█" * max(1, round(BAR_WIDTH * math.log(e.ratio) / top)) if e.ratio > 1 else "·"
        rows.append(
            (
                w.name,
                i + 1,
                e.factor,
                "yes" if e.storage else "no",
                e.best,
                e.worst,
                Cell(round(e.ratio, 3), f"{e.ratio:.2f}x"),
                Cell(round(e.low, 3), f"{e.low:.2f}"),
                Cell(round(e.high, 3), f"{e.high:.2f}"),
                Cell(round(e.p, 4), f"{e.p:.3f}"),
                sep,
                bar,
            )
        )
    return rows


def _bars(w: WorkloadFactors) -> Bars:
    """The ranking as horizontal bars with their 95 % whiskers (HTML)."""
    bars = tuple(
        (
            e.factor,
            e.ratio,
            e.low,
            e.high,
            "test" if e.significant else "baseline",
            f"{e.best} over {e.worst}, p {e.p:.3f}",
        )
        for e in w.effects
    )
    caption = "best over worst level (x); whiskers: 95 % interval; green: an effect at 95 %, blue: not shown to be one"
    return Bars(f"{w.name}: factors by effect", bars, caption)


def _notes(w: WorkloadFactors) -> list[Any]:
    """Interactions kept, what the design could not separate, predicted cells, and the tests not run."""
    out: list[Any] = []
    if w.interactions:
        kept = tuple(f"{i.column}: {i.ratio:.2f}x (95 % {i.low:.2f}–{i.high:.2f}, p {i.p:.3f})" for i in w.interactions)
        out += [Para("Interactions the data support:", style="small"), Items(kept)]
    if w.aliases:
        out += [Para("Interactions the design could not separate:", style="small"), Items(tuple(w.aliases))]
    if w.predicted:
        winner = f"the measured winner is {w.best_measured}, {w.best_measured_mib_s:.1f} MiB/s"
        preds = tuple(f"{p.name}: predicted {p.mib_s:.1f} MiB/s (95 % {p.low:.1f}–{p.high:.1f})" for p in w.predicted)
        out += [Para(f"Predicted, not measured, within reach of the winner ({winner}):", style="small"), Items(preds)]
    if w.skipped:
        rows = [(s.name, s.reason) for s in w.skipped]
        cols = (Column("test"), Column("why not run"))
        out.append(Table(cols, rows, only=SKIPPED_IN, limit={HTML: 20, MD: 10}, more="{rest} more tests not run"))
    return out


def _part(w: WorkloadFactors) -> Part:
    head = (
        f"{w.measured} of {w.candidates} tests measured ({w.runs} runs; steps: {', '.join(w.steps)}); "
        f"noise (residual sd of log throughput) {w.noise:.2f} with {w.df} degrees of freedom. {w.certainty()}."
    )
    blocks: list[Any] = [Para(head), Table(COLUMNS, _rows(w), wide=False)]
    if w.refine:
        blocks.append(Para(w.refine[0].upper() + w.refine[1:], style="small"))
    if w.note:
        blocks.append(Para(w.note, style="note"))
    blocks.append(_bars(w))
    return Part(w.name, tuple(blocks + _notes(w)), kind="factors")


def render(a: Analysis, rep: FactorReport | None) -> Section | None:
    if rep is None:
        return None
    intro = Para(
        f"Which factors matter, per workload: {rep.metric}, fitted to the factors (steps: {', '.join(rep.steps)}). "
        "An effect is the best level over the worst; a winner is always a measured test."
    )
    return Section("factors", "Which factors matter", (intro, *(_part(w) for w in rep.workloads)), sheet="Factors")


def to_json(a: Analysis, rep: FactorReport | None) -> Mapping[str, Any]:
    if rep is None:
        return {}
    return {"factors": {"steps": list(rep.steps), "workloads": [_json(w) for w in rep.workloads]}}


def _json(w: WorkloadFactors) -> dict[str, Any]:
    return {
        "name": w.name,
        "candidates": w.candidates,
        "measured": w.measured,
        "runs": w.runs,
        "df": w.df,
        "effects": [
            {
                "factor": e.factor,
                "best": e.best,
                "worst": e.worst,
                "ratio": e.ratio,
                "low": e.low,
                "high": e.high,
                "p": e.p,
                "storage": e.storage,
            }
            for e in w.effects
        ],
        "separated": list(w.certain),
        "aliases": list(w.aliases),
        "skipped": [{"name": s.name, "reason": s.reason} for s in w.skipped],
        "predicted": [
            {"name": p.name, "mib_s": p.mib_s, "low": p.low, "high": p.high, "measured": False} for p in w.predicted
        ],
        "winner": {"name": w.best_measured, "mib_s": w.best_measured_mib_s, "measured": True},
    }


SECTION = SectionSpec("factors", 45, compute, render, to_json, outputs=frozenset({HTML, MD, XLSX}), journal=True)
