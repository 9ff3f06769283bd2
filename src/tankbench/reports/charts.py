"""Hand-made inline SVG for the figures (lines, grouped bars, heatmap tables), a leaderboard's bars and a run's
time series: no script, no library, ~1-5 KB each. docs/report.md says why (measured against matplotlib and plotly)."""

from __future__ import annotations

import html
from collections.abc import Mapping, Sequence

from tankbench.analysis.figures import Figure, Series
from tankbench.analysis.present import fmt
from tankbench.analysis.section import Bars
from tankbench.metrics import METRICS

PALETTE = ("#0969da", "#d1242f", "#1a7f37", "#bf8700", "#8250df", "#cf222e", "#116329", "#953800")


def e(x: object) -> str:
    return html.escape(str(x), quote=True)


def _num(v: float) -> str:
    a = abs(v)
    return f"{v:,.0f}" if a >= 100 else f"{v:.3g}"


def _unit(f: Figure) -> str:
    return f.y_label or ("" if f.metric == "auto" else METRICS[f.metric].label)


def _legend(series: Sequence[Series]) -> str:
    return "".join(
        f'<span><i style="background:{PALETTE[i % len(PALETTE)]}"></i>{e(s.label)}</span>' for i, s in enumerate(series)
    )


def lines_svg(f: Figure, w: int = 560, h: int = 240) -> str:
    """Categorical x (evenly spaced), linear y from 0; one polyline with dots per series; tooltips per point."""
    vals = [v for s in f.series for _, v in s.points if v is not None]
    if not vals:
        return ""
    top = max(vals) or 1.0
    left, right, y0, y1 = 64, 36, 16, h - 34
    n = len(f.x_values)
    step = (w - left - right) / max(n - 1, 1)

    def xy(i: int, v: float) -> tuple[float, float]:
        return left + i * step, y1 - (y1 - y0) * v / top

    parts = [
        f'<svg class="figure" data-figure="{e(f.id)}" role="img" aria-label="{e(f.title)}" width="{w}" '
        f'height="{h}" xmlns="http://www.w3.org/2000/svg"><rect x="{left}" y="{y0}" width="{w - left - right}" '
        f'height="{y1 - y0}" fill="#f6f8fa"/>'
    ]
    for frac in (0.0, 0.5, 1.0):
        y = y1 - (y1 - y0) * frac
        parts.append(
            f'<line x1="{left}" x2="{w - right}" y1="{y:.1f}" y2="{y:.1f}" stroke="#d0d7de"/>'
            f'<text x="{left - 4}" y="{y + 4:.1f}" text-anchor="end">{_num(top * frac)}</text>'
        )
    for i, xv in enumerate(f.x_values):
        parts.append(f'<text x="{left + i * step:.1f}" y="{y1 + 14}" text-anchor="middle">{e(xv)}</text>')
    parts.append(f'<text x="{left}" y="{h - 4}">{e(f.x)} → ; y: {e(_unit(f))}</text>')
    for si, s in enumerate(f.series):
        c = PALETTE[si % len(PALETTE)]
        pts = [(i, v) for i, (_, v) in enumerate(s.points) if v is not None]
        coords = " ".join(f"{x:.1f},{y:.1f}" for x, y in (xy(i, v) for i, v in pts))
        parts.append(f'<polyline fill="none" stroke="{c}" stroke-width="1.8" points="{coords}"/>')
        for i, v in pts:
            x, y = xy(i, v)
            parts.append(
                f'<circle cx="{x:.1f}" cy="{y:.1f}" r="3" fill="{c}"><title>{e(s.label)}: '
                f"{e(f.x_values[i])} → {_num(v)} {e(_unit(f))}</title></circle>"
            )
    return "".join(parts) + "</svg>"


def bars_svg(f: Figure, w: int = 560) -> str:
    """Grouped vertical bars: one group per x value, one bar per series (side by side comparison)."""
    vals = [v for s in f.series for _, v in s.points if v is not None]
    if not vals:
        return ""
    top, h = max(vals) or 1.0, 240
    left, y0, y1 = 64, 16, 206
    n, k = len(f.x_values), len(f.series)
    gw = (w - left - 12) / n
    bw = max(3.0, (gw - 10) / k)
    parts = [
        f'<svg class="figure" data-figure="{e(f.id)}" role="img" aria-label="{e(f.title)}" width="{w}" '
        f'height="{h}" xmlns="http://www.w3.org/2000/svg"><rect x="{left}" y="{y0}" width="{w - left - 12}" '
        f'height="{y1 - y0}" fill="#f6f8fa"/>'
        f'<text x="{left - 4}" y="{y0 + 4}" text-anchor="end">{_num(top)}</text>'
        f'<text x="{left - 4}" y="{y1}" text-anchor="end">0</text>'
    ]
    for i, xv in enumerate(f.x_values):
        parts.append(f'<text x="{left + gw * (i + 0.5):.1f}" y="{y1 + 14}" text-anchor="middle">{e(xv)}</text>')
        for si, s in enumerate(f.series):
            v = s.points[i][1]
            if v is None:
                continue
            bh = (y1 - y0) * v / top
            x = left + gw * i + 5 + si * bw
            parts.append(
                f'<rect x="{x:.1f}" y="{y1 - bh:.1f}" width="{bw - 1:.1f}" height="{bh:.1f}" '
                f'fill="{PALETTE[si % len(PALETTE)]}"><title>{e(s.label)}: {e(xv)} → {_num(v)} '
                f"{e(_unit(f))}</title></rect>"
            )
    parts.append(f'<text x="{left}" y="{h - 4}">{e(f.x)}; y: {e(_unit(f))}</text></svg>')
    return "".join(parts)


def _hsl(v: float | None, lo: float, hi: float, higher: bool) -> str:
    if v is None:
        return "#ffffff"
    frac = 0.5 if hi <= lo else (v - lo) / (hi - lo)
    return f"hsl({120 * (frac if higher else 1 - frac):.0f},65%,82%)"


def heatmap_html(f: Figure, higher_of: Mapping[str, bool] | None = None, by_row: bool = False) -> str:
    """A table whose cells are coloured red (worst) … green (best) per column (or per row); `higher_of` gives the
    direction of a test case (a column, or with by_row a row), default higher is better."""
    n = len(f.x_values)
    hb = higher_of or {}
    head = "".join(f"<th>{e(x)}</th>" for x in f.x_values)
    body = []
    cols: list[list[float]] = [[v for v in (s.points[i][1] for s in f.series) if v is not None] for i in range(n)]
    for s in f.series:
        rv = [v for _, v in s.points if v is not None]
        cells = []
        for i, (_, v) in enumerate(s.points):
            pool = rv if by_row else cols[i]
            lo, hi = (min(pool), max(pool)) if pool else (0.0, 0.0)
            higher = hb.get(s.label if by_row else f.x_values[i], True)
            cells.append(
                f'<td class="num" style="background:{_hsl(v, lo, hi, higher)}">{_num(v) if v is not None else "—"}</td>'
            )
        body.append(f"<tr><td>{e(s.label)}</td>{''.join(cells)}</tr>")
    return f'<table class="heatmap" data-figure="{e(f.id)}"><tr><th>{e(f.x)} →</th>{head}</tr>{"".join(body)}</table>'


def figure_html(f: Figure, higher_of: Mapping[str, bool] | None = None) -> str:
    """One figure with its title, chart, legend and note."""
    if f.kind == "heatmap":
        chart = heatmap_html(f, higher_of, by_row=f.by_row)
        legend = ""
    else:
        chart = lines_svg(f) if f.kind == "lines" else bars_svg(f)
        legend = f'<p class="legend small">{_legend(f.series)}</p>'
    note = f'<p class="note"><b>Why this matters:</b> {e(f.note)}</p>' if f.note else ""
    common = f'<p class="small">All {"rows" if f.kind == "heatmap" else "lines"}: {e(f.common)}</p>' if f.common else ""
    return f'<div class="fig"><h4>{e(f.title)}</h4>{chart}{legend}{common}{note}</div>'


BAR_COLOURS = {"zvol": "#f0a020", "baseline": "#5b8def"}  # other tests: green


def hbars_svg(b: Bars) -> str:
    """Horizontal bars with 95 % CI whiskers (a leaderboard's top rows); zvol orange, baseline blue, others green."""
    if not b.bars:
        return ""
    top = max(max(v, hi or 0.0) for _, v, _, hi, _, _ in b.bars) or 1.0
    w, lab, bh = 760, 260, 18
    h = bh * len(b.bars) + 24
    scale = (w - lab - 90) / top
    parts = [
        f'<svg class="chart" role="img" aria-label="{e(b.label)} bar chart" width="{w}" height="{h}" '
        f'xmlns="http://www.w3.org/2000/svg">'
    ]
    for i, (label, v, lo, hi, kind, tip) in enumerate(b.bars):
        y = 4 + i * bh
        bw = scale * v
        parts.append(
            f'<text x="{lab - 4}" y="{y + 12}" text-anchor="end">{e(label)}</text><rect x="{lab}" y="{y + 2}" '
            f'width="{bw:.1f}" height="{bh - 5}" fill="{BAR_COLOURS.get(kind, "#3fa66b")}"><title>{e(tip)}</title></rect>'
        )
        if lo is not None and hi is not None:
            x1, x2 = (lab + scale * x for x in (max(lo, 0), hi))
            parts.append(f'<line x1="{x1:.1f}" x2="{x2:.1f}" y1="{y + 8}" y2="{y + 8}" stroke="#222"/>')
        parts.append(f'<text x="{lab + bw + 4:.1f}" y="{y + 12}">{e(fmt(v))}</text>')
    parts.append(f'<text x="{lab}" y="{h - 4}" class="small">{e(b.caption)}</text></svg>')
    return "".join(parts)


def series_svg(name: str, title: str, t: Sequence[float], ys: Sequence[float | None]) -> str:
    """One small time-series chart (polyline) with its peak; an all-zero series says so (max 0, not 1)."""
    pts = [(float(a), float(b)) for a, b in zip(t, ys) if b is not None]
    if len(pts) < 2:
        return ""
    w, h, pad = 300, 120, 30
    x0, x1 = pts[0][0], pts[-1][0] if pts[-1][0] > pts[0][0] else pts[0][0] + 1
    lo, peak = min(0.0, min(p[1] for p in pts)), max(p[1] for p in pts)
    y1 = peak if peak > lo else lo + 1.0  # the drawing's top; the label says the real peak
    coords = " ".join(
        f"{pad + (w - pad - 6) * (x - x0) / (x1 - x0):.1f},{h - 18 - (h - 30) * (y - lo) / (y1 - lo):.1f}"
        for x, y in pts
    )
    return (
        f'<svg class="series" data-series="{e(name)}" width="{w}" height="{h}" xmlns="http://www.w3.org/2000/svg">'
        f'<rect x="{pad}" y="12" width="{w - pad - 6}" height="{h - 30}" fill="#f6f8fa"/>'
        f'<polyline fill="none" stroke="#0969da" stroke-width="1.5" points="{coords}"/>'
        f'<text x="{pad}" y="10">{e(title)} (max {e(fmt(peak))})</text>'
        f'<text x="{pad}" y="{h - 4}">{fmt(x0)} s</text><text x="{w - 6}" y="{h - 4}" text-anchor="end">'
        f"{fmt(x1)} s</text></svg>"
    )
