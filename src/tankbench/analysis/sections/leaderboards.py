"""Leaderboards per test case (analysis/leaderboard.py): a bar chart, the ranked table people read (the ranking
figure with its CI, the figures beside it, ratios, cost, each run), and a sheet per case with every row and figure.
Badges and colours are decided here, from the Analysis (`colour_of`, `badges`): the exporters only draw them."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from tankbench.analysis.cases import TestSummary
from tankbench.analysis.leaderboard import Leaderboard, Ratio, Row
from tankbench.analysis.present import EXPLAIN, beside, ci_bounds, fmt, fmt_summary, metric_label
from tankbench.analysis.result import Analysis, Context, SectionSpec
from tankbench.analysis.section import (
    HTML,
    MD,
    READ,
    XLSX,
    Bars,
    Block,
    Cell,
    Column,
    Lazy,
    Para,
    Part,
    Section,
    Span,
    Table,
)
from tankbench.analysis.sections.runs import axis_columns, ratio_dict
from tankbench.metrics import METRICS

TOP_ROWS = {HTML: 40, MD: 10}  # rows people read per test case (every row: results.csv, results.xlsx)
TOP_BARS = 20  # bars per chart
MAX_RUN_CHIPS = 12  # per-run values shown per row
MD_BESIDE = ("mibs", "durable_mibs", "copy_mibs", "physical_per_logical", "compressratio", "arc_hit_ratio")
CASE_HEAD = ("rank", "test_number", "test_name", "test_id", "target_kind", "config")
CASE_TAIL = ("baseline", "winner", "n", "ranked_by", "rank_value", "ci95_low", "ci95_high")
CASE_END = ("vs_fastest_baseline", "vs_first_place", "load_per_mibs", "cost")
HTML_ONLY = frozenset({HTML})


def compute(ctx: Context) -> tuple[Leaderboard, ...]:
    return ctx.a.leaderboards


def colour_of(v: float | None, lo: float, hi: float, higher_better: bool) -> str:
    """Red (worst) → yellow → green (best) as an HSL background."""
    if v is None or hi <= lo:
        return "#ffffff" if v is None else "hsl(120,60%,85%)"
    f = (v - lo) / (hi - lo)
    f = f if higher_better else 1.0 - f
    return f"hsl({120 * f:.0f},65%,82%)"


def badges(r: Row) -> tuple[Span, ...]:
    t = r.test
    out = [Span("winner", "badge win")] if r.is_winner else []
    out += [Span("baseline", "badge")] if t.is_baseline else []
    return (*out, Span("zvol", "badge zvol")) if t.traits.volume else tuple(out)


def _run_chips(t: TestSummary, key: str) -> tuple[Span, ...]:
    chips = []
    for r in t.runs[:MAX_RUN_CHIPS]:
        label = "warm-up" if r.warmup else f"run {r.run_no}"
        cls = "chip w" if r.warmup or r.status != "done" else "chip"
        tip = f"{label}, journal runs.id {r.row_id}, status {r.status}" + ("" if r.measured else ", not ranked")
        chips.append(Span(fmt(r.values.get(key)) if r.status == "done" else r.status, cls, tip))
    if len(t.runs) > MAX_RUN_CHIPS:
        chips.append(Span(f" +{len(t.runs) - MAX_RUN_CHIPS} more", "small"))
    return tuple(chips)


def _ratio(r: Ratio | None, why: str) -> Cell:
    return Cell(r.factor, r.text, tip=why + "; " + EXPLAIN["welch"]) if r else Cell(None, "—")


def _columns(lb: Leaderboard, side: tuple[str, ...]) -> tuple[Column, ...]:
    return (
        Column("rank", "#", num=True),
        Column("test"),
        Column("config"),
        Column("mean", f"{metric_label(lb.metric)} mean ± 95 % CI", EXPLAIN[lb.metric], num=True),
        Column("sd", tip=EXPLAIN["sd"], num=True, only=HTML_ONLY),
        *(Column(k, metric_label(k), EXPLAIN[k], num=True, only=READ if k in MD_BESIDE else HTML_ONLY) for k in side),
        Column("vs fastest baseline"),
        Column("vs first place"),
        Column("load1", num=True),
        Column("load per MiB/s", tip=EXPLAIN["load_per_mibs"], num=True, only=HTML_ONLY),
        Column("cost vs first", only=HTML_ONLY),
        Column("runs (warm-ups dashed, not ranked)", only=HTML_ONLY),
    )


def _row(r: Row, key: str, lo: float, hi: float, side: tuple[str, ...]) -> tuple[Any, ...]:
    t = r.test
    s = t.stats.get(key)
    return (
        r.rank,
        Cell(t.name, (Span(f"#{t.number} {t.name}", tip=f"tests.id {t.id}"), *badges(r))),
        t.config,
        Cell(
            r.value,
            fmt_summary(s),
            tip=EXPLAIN[key] + "; ± " + EXPLAIN["ci"],
            colour=colour_of(r.value, lo, hi, bool(METRICS[key].higher_is_better)),
        ),
        Cell(s.sd if s else None, f"{fmt(s.sd)} ({s.cv:.0%})" if s and s.n >= 2 else "—", tip=EXPLAIN["sd"]),
        *(Cell(t.mean(k), fmt(t.mean(k)), tip=EXPLAIN[k]) for k in side),
        _ratio(r.vs_baseline, EXPLAIN["vs_baseline"]),
        _ratio(r.vs_first, EXPLAIN["vs_first"]),
        Cell(t.load1.mean if t.load1 else None, fmt(t.load1.mean) if t.load1 else "not measured", tip=EXPLAIN["load1"]),
        Cell(r.cost.load_per_mibs, fmt(r.cost.load_per_mibs, 2), tip=EXPLAIN["load_per_mibs"]),
        Cell(r.cost.text, r.cost.text, style="small"),
        Cell(None, _run_chips(t, key)),
    )


def row_style(t: TestSummary) -> str:
    return " ".join(c for c in ("zvol" if t.traits.volume else "", "baseline" if t.is_baseline else "") if c)


def bars(lb: Leaderboard) -> Bars | None:
    """The top rows as bars with 95 % CI whiskers; zvol, baseline and other tests told apart by colour."""
    rows = [r for r in lb.rows if r.value is not None][:TOP_BARS]
    if not rows:
        return None
    out = []
    for r in rows:
        t, s = r.test, r.test.stats.get(lb.metric)
        lo, hi = ci_bounds(s)
        kind = "zvol" if t.traits.volume else "baseline" if t.is_baseline else "test"
        tip = f"{t.name}: {fmt_summary(s)} {metric_label(lb.metric)}"
        out.append((f"#{t.number} {t.name[:36]}", r.value or 0.0, lo, hi, kind, tip))
    return Bars(lb.case, tuple(out), f"{metric_label(lb.metric)}; whiskers: 95 % CI")


def data_table(lb: Leaderboard, a: Analysis, sheet: str) -> Table:
    """Every row of the case with every axis and measured figure (XLSX: a sheet per case, colour scales)."""
    axes, present = axis_columns(a), a.dataset.present()
    tips = {"rank_value": EXPLAIN[lb.metric] + f" (ranks because: {lb.reason})", "ci95_low": EXPLAIN["ci"]}
    tips |= {"vs_first_place": EXPLAIN["vs_first"], "vs_fastest_baseline": EXPLAIN["vs_baseline"]}
    tips |= {"load_per_mibs": EXPLAIN["load_per_mibs"]}
    higher = bool(METRICS[lb.metric].higher_is_better)
    cols = (
        *(Column(k) for k in (*CASE_HEAD, *axes, *CASE_TAIL[:4])),
        Column("rank_value", tip=tips["rank_value"], scale=higher if lb.rows else None),
        Column("ci95_low", tip=tips["ci95_low"]),
        Column("ci95_high"),
        *(Column(f"{k}_mean", tip=EXPLAIN[k], scale=_scale(k, lb)) for k in present),
        Column("vs_fastest_baseline", tip=tips["vs_fastest_baseline"]),
        Column("vs_first_place", tip=tips["vs_first_place"]),
        Column("load_per_mibs", tip=tips["load_per_mibs"], scale=False if lb.rows else None),
        Column("cost"),
    )

    def rows() -> list[list[Any]]:  # built when the XLSX asks (every row of every case)
        out = []
        for r in lb.rows:
            t = r.test
            ax = t.axes()
            lo, hi = ci_bounds(t.stats.get(lb.metric))
            out.append(
                [
                    *(r.rank, t.number, t.name, t.id, t.target_kind, t.config),
                    *(ax.get(k, "") for k in axes),
                    *(int(t.is_baseline), int(r.is_winner), len(t.measured), lb.metric, r.value, lo, hi),
                    *(t.mean(k) for k in present),
                    *(r.vs_baseline.text if r.vs_baseline else "", r.vs_first.text if r.vs_first else ""),
                    *(r.cost.load_per_mibs, r.cost.text),
                ]
            )
        return out

    styles = [row_style(r.test) for r in lb.rows]
    return Table(
        cols, Lazy(rows), only=frozenset({XLSX}), sheet=sheet, freeze=True, row_styles=styles, fill_style="zvol",
        fill_columns=len(CASE_HEAD),
    )  # fmt: skip


def _scale(k: str, lb: Leaderboard) -> bool | None:
    return METRICS[k].higher_is_better if lb.rows and k in METRICS else None


def board(lb: Leaderboard, a: Analysis) -> Part:
    """One test case: why it ranks by its figure, the chart, the table people read, the sheet with every row."""
    vals = [r.value for r in lb.rows if r.value is not None]
    lo, hi = (min(vals), max(vals)) if vals else (0.0, 0.0)
    side = beside(lb)
    label = metric_label(lb.metric)
    ranked = Para((Span("Ranked by "), Span(label, "b"), Span(f": {lb.reason}.")), "small ranked", only=READ)
    chart = bars(lb)
    table = Table(
        _columns(lb, side),
        [_row(r, lb.metric, lo, hi, side) for r in lb.rows[: max(TOP_ROWS.values())]],
        limit=TOP_ROWS,
        more="Showing the top {shown} of {total} tests; every row is in results.csv and results.xlsx.",
        row_styles=[row_style(r.test) for r in lb.rows[: max(TOP_ROWS.values())]],
        only=READ,
        total=len(lb.rows),
    )
    blocks: tuple[Block, ...] = (ranked, *((chart,) if chart else ()), table, data_table(lb, a, lb.case))
    return Part(lb.case, blocks, kind="leaderboard", attrs={"data-case": lb.case, "data-metric": lb.metric})


def render(a: Analysis, boards: tuple[Leaderboard, ...]) -> Section:
    legend = Para(
        (
            Span("test", "swatch #3fa66b"),
            Span("baseline", "swatch #5b8def"),
            Span("zvol (rows highlighted)", "swatch #f0a020"),
            Span("cell colour: red = worst … green = best of its test case", "key"),
        ),
        "legend",
        only=HTML_ONLY,
    )
    return Section("leaderboards", "Leaderboards", (legend, *(board(lb, a) for lb in boards)))


def to_json(a: Analysis, boards: tuple[Leaderboard, ...]) -> Mapping[str, Any]:
    return {
        "leaderboards": [
            {
                "case": lb.case,
                "metric": lb.metric,
                "reason": lb.reason,
                "rows": [
                    {
                        "rank": r.rank,
                        "test_id": r.test.id,
                        "test_number": r.test.number,
                        "name": r.test.name,
                        "value": r.value,
                        "winner": r.is_winner,
                        "baseline": r.test.is_baseline,
                        "vs_baseline": ratio_dict(r.vs_baseline),
                        "vs_first": ratio_dict(r.vs_first),
                        "load_per_mibs": r.cost.load_per_mibs,
                        "cpu_per_mibs": r.cost.cpu_per_mibs,
                        "cost": r.cost.text,
                    }
                    for r in lb.rows
                ],
            }
            for lb in boards
        ]
    }


SECTION = SectionSpec("leaderboards", 100, compute, render, to_json)
