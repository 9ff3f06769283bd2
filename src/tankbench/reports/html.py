"""index.html: one self-contained file (inline CSS and SVG, no script, no CDN) that works offline."""

from __future__ import annotations

import heapq
import html
from collections.abc import Mapping, Sequence
from typing import Any

from tankbench.analysis.analyse import Analysis
from tankbench.analysis.cases import TestSummary
from tankbench.analysis.checks import emulation_banner
from tankbench.analysis.detail import MAX_SERIES_TESTS, PCTS
from tankbench.analysis.figures import Figure, Series, tidy
from tankbench.analysis.fill import yes_no
from tankbench.analysis.leaderboard import Leaderboard, Row
from tankbench.metrics import METRICS
from tankbench.reports.charts import figure_html
from tankbench.reports.common import (
    EXPLAIN,
    beside,
    fingerprint_rows,
    fmt,
    fmt_summary,
    guest_cells,
    guest_header,
    metric_label,
)

TOP_ROWS = 40  # leaderboard rows shown per test case (all rows are in results.csv / results.xlsx)
TOP_BARS = 20  # bars per leaderboard chart
MAX_RUN_CHIPS = 12  # per-run values shown per leaderboard row
SERIES = (
    ("load1", "load average (1 min)"),
    ("dev_iops", "device IOPS"),
    ("dev_avg_io_bytes", "avg I/O size, bytes"),
    ("arc_hits_per_s", "ARC hits/s"),
    ("arc_misses_per_s", "ARC misses/s"),
    ("cpu_iowait_pct", "CPU iowait %"),
    ("dirty_bytes", "dirty bytes"),
)

CSS = """
body{font:14px/1.45 system-ui,sans-serif;margin:0 auto;max-width:1280px;padding:0 16px 40px;color:#1b1f24}
h1{font-size:24px;margin:18px 0 4px}h2{border-bottom:2px solid #d0d7de;padding-bottom:3px;margin-top:30px}
h3{margin:18px 0 6px}table{border-collapse:collapse;margin:6px 0 10px;font-size:13px}
th,td{border:1px solid #d0d7de;padding:3px 6px;vertical-align:top;text-align:left}th{background:#f3f5f7}
td.num{text-align:right;white-space:nowrap}.ex{text-decoration:underline dotted #888;cursor:help}
.banner{background:#ffe3b3;border:2px solid #d98b00;padding:10px 14px;font-weight:600;margin:12px 0}
tr.zvol td:first-child,tr.zvol td:nth-child(2){background:#fff1c9}tr.zvol td:nth-child(2)::after{content:" zvol";
font-size:11px;color:#9a6700}tr.baseline td:nth-child(2){font-style:italic}.badge{font-size:11px;padding:0 4px;
border-radius:3px;background:#ddf4ff;color:#0550ae;margin-left:4px}.win{background:#fff8c5;color:#7d4e00}
.sev-error{color:#b3261e;font-weight:700}.sev-warning{color:#9a6700;font-weight:700}.sev-info{color:#57606a}
.chip{display:inline-block;font-size:11px;border:1px solid #d0d7de;border-radius:3px;padding:0 3px;margin:1px}
.chip.w{color:#888;border-style:dashed}.small{font-size:12px;color:#57606a}.charts{display:flex;flex-wrap:wrap;gap:8px}
.wide{overflow-x:auto;max-width:100%}.figs{display:flex;flex-wrap:wrap;gap:14px}.fig{max-width:600px}.fig h4{margin:8px 0 2px;font-size:13px}
.note{background:#fff8c5;border-left:4px solid #d4a72c;padding:4px 8px;font-size:12px}
.legend span{display:inline-block;margin-right:12px}.legend i{display:inline-block;width:12px;height:10px;margin-right:4px}
svg text{font:11px system-ui,sans-serif}
"""


def e(x: Any) -> str:
    return html.escape(str(x), quote=True)


def ex(text: str, why: str) -> str:
    """Text with a tooltip saying how it was obtained."""
    return f'<span class="ex" title="{e(why)}">{e(text)}</span>'


def scale_colour(v: float | None, lo: float, hi: float, higher_better: bool) -> str:
    """Red (worst) → yellow → green (best) as an HSL background."""
    if v is None or hi <= lo:
        return "#ffffff" if v is None else "hsl(120,60%,85%)"
    f = (v - lo) / (hi - lo)
    f = f if higher_better else 1.0 - f
    return f"hsl({120 * f:.0f},65%,82%)"


def _run_chips(t: TestSummary, key: str) -> str:
    chips = []
    for r in t.runs[:MAX_RUN_CHIPS]:
        v = r.values.get(key)
        label = "warm-up" if r.warmup else f"run {r.run_no}"
        cls = "chip w" if r.warmup or r.status != "done" else "chip"
        shown = fmt(v) if r.status == "done" else r.status
        chips.append(
            f'<span class="{cls}" title="{e(label)}, journal runs.id {r.row_id}, status {e(r.status)}'
            f'{", not ranked" if not r.measured else ""}">{e(shown)}</span>'
        )
    more = f'<span class="small"> +{len(t.runs) - MAX_RUN_CHIPS} more</span>' if len(t.runs) > MAX_RUN_CHIPS else ""
    return "".join(chips) + more


def _row_html(r: Row, key: str, lo: float, hi: float, side: tuple[str, ...]) -> str:
    t = r.test
    cls = " ".join(c for c in ("zvol" if t.traits.volume else "", "baseline" if t.is_baseline else "") if c)
    s = t.stats.get(key)
    badges = ('<span class="badge win">winner</span>' if r.is_winner else "") + (
        '<span class="badge">baseline</span>' if t.is_baseline else ""
    )
    colour = scale_colour(r.value, lo, hi, bool(METRICS[key].higher_is_better)) if hi > lo else "#ffffff"
    sd = f"{fmt(s.sd)} ({s.cv:.0%})" if s and s.n >= 2 else "—"
    extra = "".join(f'<td class="num">{ex(fmt(t.mean(k)), EXPLAIN[k])}</td>' for k in side)
    return (
        f'<tr class="{cls}"><td class="num">{r.rank}</td><td title="tests.id {e(t.id)}">#{t.number} '
        f"{e(t.name)}{badges}</td><td>{e(t.config)}</td>"
        f'<td class="num" style="background:{colour}">{ex(fmt_summary(s), EXPLAIN[key] + "; ± " + EXPLAIN["ci"])}'
        f'</td><td class="num">{ex(sd, EXPLAIN["sd"])}</td>{extra}'
        f"<td>{ex(r.vs_baseline.text, EXPLAIN['vs_baseline'] + '; ' + EXPLAIN['welch']) if r.vs_baseline else '—'}</td>"
        f"<td>{ex(r.vs_first.text, EXPLAIN['vs_first'] + '; ' + EXPLAIN['welch']) if r.vs_first else '—'}</td>"
        f'<td class="num">{ex(fmt(t.load1.mean) if t.load1 else "not measured", EXPLAIN["load1"])}</td>'
        f'<td class="num">{ex(fmt(r.cost.load_per_mibs, 2), EXPLAIN["load_per_mibs"])}</td>'
        f'<td class="small">{e(r.cost.text)}</td><td>{_run_chips(t, key)}</td></tr>'
    )


def bar_chart(lb: Leaderboard) -> str:
    """Horizontal bars of the top rows with 95 % CI whiskers; zvol orange, baseline blue, others green."""
    rows = [r for r in lb.rows if r.value is not None][:TOP_BARS]
    if not rows:
        return ""
    tops = [max(r.value or 0.0, getattr(r.test.stats.get(lb.metric), "ci_high", 0.0)) for r in rows]
    top = max(tops) or 1.0
    w, lab, bh = 760, 260, 18
    h = bh * len(rows) + 24
    parts = [
        f'<svg class="chart" role="img" aria-label="{e(lb.case)} bar chart" width="{w}" height="{h}" '
        f'xmlns="http://www.w3.org/2000/svg">'
    ]
    for i, r in enumerate(rows):
        t, y = r.test, 4 + i * bh
        s = t.stats.get(lb.metric)
        colour = "#f0a020" if t.traits.volume else "#5b8def" if t.is_baseline else "#3fa66b"
        bw = (w - lab - 90) * (r.value or 0) / top
        parts.append(
            f'<text x="{lab - 4}" y="{y + 12}" text-anchor="end">{e(f"#{t.number} {t.name[:36]}")}'
            f'</text><rect x="{lab}" y="{y + 2}" width="{bw:.1f}" height="{bh - 5}" fill="{colour}">'
            f"<title>{e(t.name)}: {e(fmt_summary(s))} {e(metric_label(lb.metric))}</title></rect>"
        )
        if s and s.n >= 2:
            x1, x2 = (lab + (w - lab - 90) * v / top for v in (max(s.ci_low, 0), s.ci_high))
            parts.append(f'<line x1="{x1:.1f}" x2="{x2:.1f}" y1="{y + 8}" y2="{y + 8}" stroke="#222"/>')
        parts.append(f'<text x="{lab + bw + 4:.1f}" y="{y + 12}">{e(fmt(r.value))}</text>')
    parts.append(
        f'<text x="{lab}" y="{h - 4}" class="small">{e(metric_label(lb.metric))}; whiskers: 95 % CI</text></svg>'
    )
    return "".join(parts)


def leaderboard_html(lb: Leaderboard) -> str:
    """Chart and table of one test case: the ranking figure (and why it ranks), the figures beside it."""
    vals = [r.value for r in lb.rows if r.value is not None]
    # best-to-worst colours only when the leader is significantly ahead (analysis: Leaderboard.shade)
    lo, hi = (min(vals), max(vals)) if vals and lb.shade else (0.0, 0.0)
    label = metric_label(lb.metric)
    side = beside(lb)
    head = (
        "<tr><th>#</th><th>test</th><th>config</th><th>"
        + ex(label + " mean ± CI", EXPLAIN[lb.metric])
        + "</th><th>sd</th>"
        + "".join(f"<th>{ex(metric_label(k), EXPLAIN[k])}</th>" for k in side)
        + "<th>vs fastest baseline</th><th>vs first place</th><th>load1</th>"
        "<th>load per MiB/s</th><th>cost vs first</th><th>runs (warm-ups dashed, not ranked)</th></tr>"
    )
    body = "".join(_row_html(r, lb.metric, lo, hi, side) for r in lb.rows[:TOP_ROWS])
    more = (
        (
            f'<p class="small">Showing the top {TOP_ROWS} of {len(lb.rows)} tests; every row is in results.csv '
            "and results.xlsx.</p>"
        )
        if len(lb.rows) > TOP_ROWS
        else ""
    )
    return (
        f'<section class="leaderboard" data-case="{e(lb.case)}" data-metric="{e(lb.metric)}"><h3>{e(lb.case)}'
        f'</h3><p class="small ranked">Ranked by <b>{e(label)}</b>: {e(lb.reason)}.</p>{bar_chart(lb)}'
        f'<div class="wide"><table>{head}{body}</table></div>{more}</section>'
    )


def line_chart(name: str, title: str, t: Sequence[float], ys: Sequence[float]) -> str:
    """One small time-series chart (polyline) with min/max labels."""
    pts = [(float(a), float(b)) for a, b in zip(t, ys) if b is not None]
    if len(pts) < 2:
        return ""
    w, h, pad = 300, 120, 30
    x0, x1 = pts[0][0], pts[-1][0] if pts[-1][0] > pts[0][0] else pts[0][0] + 1
    y0, y1 = min(0.0, min(p[1] for p in pts)), max(p[1] for p in pts) or 1.0
    coords = " ".join(
        f"{pad + (w - pad - 6) * (x - x0) / (x1 - x0):.1f},{h - 18 - (h - 30) * (y - y0) / (y1 - y0):.1f}"
        for x, y in pts
    )
    return (
        f'<svg class="series" data-series="{e(name)}" width="{w}" height="{h}" xmlns="http://www.w3.org/2000/svg">'
        f'<rect x="{pad}" y="12" width="{w - pad - 6}" height="{h - 30}" fill="#f6f8fa"/>'
        f'<polyline fill="none" stroke="#0969da" stroke-width="1.5" points="{coords}"/>'
        f'<text x="{pad}" y="10">{e(title)} (max {e(fmt(y1))})</text>'
        f'<text x="{pad}" y="{h - 4}">{fmt(x0)} s</text><text x="{w - 6}" y="{h - 4}" text-anchor="end">'
        f"{fmt(x1)} s</text></svg>"
    )


def series_html(a: Analysis, series: Mapping[str, tuple[int, Mapping[str, Any]]]) -> str:
    by_id = a.dataset.by_id()
    parts = [
        f'<p class="small">Per-run 1 Hz samples of the last measured run of up to {MAX_SERIES_TESTS} tests '
        "(leaderboard winners, then zvol and baseline rows near the top); other runs are in the journal.</p>"
    ]
    if not series:
        parts.append("<p>No time series in this journal (imported or sampler-less runs): not measured.</p>")
    for tid, (row, s) in series.items():
        t = by_id[tid]
        charts = "".join(line_chart(k, title, s.get("t", []), s[k]) for k, title in SERIES if s.get(k))
        parts.append(
            f'<h3>#{t.number} {e(t.name)} <span class="small">runs.id {row}, {e(t.case)}</span></h3>'
            f'<div class="charts">{charts or "<p>no samples</p>"}</div>'
        )
    return "".join(parts)


def _list(items: Sequence[str]) -> str:
    return "<ul>" + "".join(f"<li>{i}</li>" for i in items) + "</ul>" if items else "<p>None.</p>"


def head_html(a: Analysis) -> str:
    ds = a.dataset
    banner = (
        (f'<div class="banner" id="emulated">{e(emulation_banner(fp.data for fp in ds.fingerprints.values()))}</div>')
        if a.emulated
        else ""
    )
    n_meas = sum(len(t.measured) for t in ds.tests)
    n_warm = sum(1 for t in ds.tests for r in t.runs if r.warmup)
    title = ", ".join(dict.fromkeys(n for n in ds.campaign_names if n)) or ds.path
    return (
        f"<h1>tankbench report: {e(title)}</h1>{banner}<p>{len(ds.tests)} tests in {len(ds.cases())} test cases, "
        f"{ds.n_runs} runs ({n_meas} measured, {n_warm} warm-ups shown but not ranked). Journal: "
        f"<code>{e(ds.path)}</code>. Ranked by <b>{ex(metric_label(a.rank_by), EXPLAIN[a.rank_by])}</b>."
        + (f" Selection: <code>{e(' '.join(a.selection))}</code>." if a.selection else "")
        + "</p>"
    )


def sections_html(a: Analysis) -> list[str]:
    warns = [
        f'<span class="sev-{w.severity}">{e(w.severity)}</span> <b>{e(w.code)}</b>: {e(w.message.rstrip("."))}. '
        f"<i>Fix:</i> {e(w.fix)}."
        for w in a.warnings
    ]
    recs = [
        e(r.text) + (f' <span class="small">(tests.id {e(", ".join(r.basis[:6]))})</span>' if r.basis else "")
        for r in a.recommendations
    ]
    out = [
        f'<h2 id="warnings">Warnings ({len(a.warnings)})</h2>{_list(warns)}',
        f'<h2 id="recommendations">Recommendations</h2>{_list(recs)}',
    ]
    if a.fill:
        out.append(fill_html(a))
    if a.crashes:
        out.append(crashes_html(a))
    if a.clients:
        out.append(clients_html(a))
    if a.goals:
        out.append(
            '<h2 id="goals">Goals</h2>'
            + _list(
                [
                    f"<b>{e(g.goal.name)}</b> ({e(g.goal.text)}): "
                    + (
                        "not measured"
                        if g.not_measured
                        else "met by "
                        + (
                            ", ".join(
                                f"#{t.number} {e(t.name)} ({fmt(v)}{'' if c else ', CI crosses the goal'})"
                                for t, v, c in g.passing
                            )
                            or "no configuration"
                        )
                    )
                    for g in a.goals
                ]
            )
        )
    if a.mix:
        rows = "".join(
            f"<tr><td>{e(m.config)}</td><td class='num'>{ex(fmt(m.expected), a.mix.formula)}</td>"
            f"<td>{e(', '.join(m.missing) or '—')}</td></tr>"
            for m in a.mix.entries[:TOP_ROWS]
        )
        weights = ", ".join(f"{c} {w:.0%}" for c, w in a.mix.weights)
        out.append(
            f'<h2 id="mix">Workload mix</h2><p>{e(weights)}. {e(a.mix.formula)}.</p><table><tr><th>config'
            f"</th><th>expected {e(metric_label(a.mix.metric))}</th><th>missing cases</th></tr>{rows}</table>"
        )
    return out


def fill_html(a: Analysis) -> str:
    """The "Pool full" table (seed 003): per fill run, what the guest saw and whether its data survived."""
    rows = "".join(
        f"<tr><td>#{f.test_number} {e(f.test_name)}</td><td>{e(f.backing)}</td><td>{e(f.werror)}</td>"
        f"<td title='{e(f.detail)}'>{e(f.saw_text)}</td><td>{e(f.host_error or '—')}</td>"
        f"<td class='num'>{'—' if f.before_stop_mib is None else f'{f.before_stop_mib:.0f} MiB'}</td>"
        f"<td>{e(yes_no(f.intact))}</td><td>{e(f.status)}</td></tr>"
        for f in a.fill
    )
    return (
        '<h2 id="pool-full">Pool full</h2><p>The guest wrote until the pool was full (<code>workload = "fill"'
        "</code>): what it saw, and whether what it had written reads back intact (fio verify).</p><table><tr>"
        "<th>test</th><th>backing</th><th>werror</th><th>guest saw</th><th>host error (qemu)</th>"
        f"<th>written before the stop</th><th>intact</th><th>run</th></tr>{rows}</table>"
    )


def crashes_html(a: Analysis) -> str:
    """Tests that crashed the host or its test guest (issue 18): configuration, crashes out of attempts, what the
    journal noted."""
    rows = "".join(
        f"<tr><td>#{c.test_number} {e(c.test_name)}</td><td>{e(c.config)}</td>"
        f"<td class='num'>{c.crashes} of {c.attempts}"
        f"{f' ({c.guest_crashes} the test guest)' if c.guest_crashes else ''}</td>"
        f"<td>{'skipped' if c.skipped else c.finished}</td>"
        f"<td>{e('; '.join(c.notes) or '—')}</td></tr>"
        for c in a.crashes
    )
    guest = any(c.guest_crashes for c in a.crashes)
    return (
        f'<h2 id="crashes">Tests that crashed the host{" or its test guest" if guest else ""}</h2><p>Runs during '
        "which the host went down (a kernel crash, a hang, a reboot)"
        + (", or the test guest died while its host stayed up" if guest else "")
        + ": a finding about the configuration, not a measurement.</p><table><tr>"
        "<th>test</th><th>configuration</th><th>crashed runs</th><th>finished runs</th><th>noted</th></tr>"
        f"{rows}</table>"
    )


def clients_html(a: Analysis) -> str:
    """Tests whose load came from client hosts (issue 20): each client's mean MiB/s, all clients', evenness."""
    rows = "".join(
        f"<tr><td>#{c.test_number} {e(c.test_name)} ({e(c.direction)})</td><td class='num'>{c.runs}</td>"
        f"<td>{e(', '.join(f'{n} {fmt(m)}' for n, m in c.clients))}</td><td class='num'>{fmt(c.total_mibs)}</td>"
        f"<td class='num'>{'—' if c.even is None else f'{c.even:.2f}'}</td>"
        f"<td title='{e(c.why)}'>{e(c.limit or '—')}</td></tr>"
        for c in a.clients
    )
    return (
        '<h2 id="clients">Load from client hosts</h2><p>fio client/server: every client ran the test\'s job at '
        "once. MiB/s are means over the test's measured runs (each run: clients.md); even = slowest client / "
        "fastest (1.00: an even share); limit: what a network share's runs were bound by.</p><table><tr><th>test"
        "</th><th>runs</th><th>each client (MiB/s)</th><th>all clients (MiB/s)</th><th>even</th><th>limit</th>"
        f"</tr>{rows}</table>"
    )


def timing_html(a: Analysis, limit: int = TOP_ROWS) -> str:
    """The latest-finishing runs: expected vs wall, fio's MiB/s vs durable (seed 000's timing KPI)."""
    late = heapq.nsmallest(  # sorted(...)[:limit], stable as sorted is, without sorting 100,000s of runs
        limit,
        (
            (t, r)
            for t in a.dataset.tests
            if not t.is_fill  # size-based experiment: no runtime to be late against
            for r in t.runs
            if r.wall_s is not None and r.status == "done"  # excess_s is None exactly when wall_s is
        ),
        key=lambda tr: -(tr[1].excess_s or 0.0),
    )
    if not late:
        return '<h2 id="timing">Timing</h2><p>No wall-clock times in this journal: not measured.</p>'
    rows = "".join(
        f"<tr><td>#{t.number} {e(t.name)}</td><td class='num'>{r.row_id}</td><td class='num'>{fmt(r.expected_s)}</td>"
        f"<td class='num'>{fmt(r.wall_s)}</td><td class='num'>{ex(fmt(r.excess_s), EXPLAIN['excess_s'])} "
        f"({(r.excess_s or 0) / r.expected_s * 100 if r.expected_s else 0:.0f} %)</td>"
        f"<td class='num'>{fmt(r.drain_s)}</td><td class='num'>{fmt(r.values.get('mibs'))}</td>"
        f"<td class='num'>{ex(fmt(r.values.get('durable_mibs')), EXPLAIN['durable_mibs'])}</td></tr>"
        for t, r in late
    )
    return (
        f'<h2 id="timing">Timing</h2><p class="small">The {len(late)} runs that finished latest after ramp + '
        f"runtime.</p><table><tr><th>test</th><th>runs.id</th><th>expected s</th><th>wall s</th><th>late by s"
        f"</th><th>drain s</th><th>fio MiB/s</th><th>durable MiB/s</th></tr>{rows}</table>"
    )


def fingerprint_html(a: Analysis) -> str:
    rows = "".join(
        f"<tr><td><code>{e(f)}</code></td><td>{e(k)}</td><td>{e(v)}</td></tr>" for f, k, v in fingerprint_rows(a)
    )
    return f'<h2 id="fingerprint">Fingerprint</h2><table><tr><th>id</th><th>key</th><th>value</th></tr>{rows}</table>'


def percentile_figures(a: Analysis, pct: Mapping[str, Mapping[str, list[float]]]) -> list[Figure]:
    """fio-plot's latency percentile plot: per test case, one line per plotted test and direction."""
    by_case: dict[str, list[Series]] = {}
    ids: dict[str, list[str]] = {}
    for t in a.dataset.tests:
        for d, vals in pct.get(t.id, {}).items():
            by_case.setdefault(t.case, []).append(
                Series(f"#{t.number} {t.name} ({d})", tuple(zip((p.rstrip("0").rstrip(".") for p in PCTS), vals)))
            )
            ids.setdefault(t.case, []).append(t.id)
    return [
        tidy(
            Figure(
                f"percentiles-{case}",
                f"{case}: completion latency percentiles, last measured run",
                "lines",
                "p99_ms",
                "percentile",
                tuple(p.rstrip("0").rstrip(".") for p in PCTS),
                tuple(ss[:8]),
                "",
                tuple(ids[case]),
                y_label="clat ms",
            )
        )
        for case, ss in by_case.items()
    ]


def figures_html(a: Analysis, pct: Mapping[str, Mapping[str, list[float]]] | None = None) -> str:
    """The figures the journal's axes allow (analysis.figures) and the latency percentile plots."""
    higher = {lb.case: METRICS[lb.metric].higher_is_better is not False for lb in a.leaderboards}
    figs = list(a.figures) + percentile_figures(a, pct or {})
    if not figs:
        return (
            '<h2 id="figures">Figures</h2><p class="small">No axis with several values that a figure plots '
            "(iodepth, numjobs, layout, cache, recordsize) and no fio latency percentiles in this journal.</p>"
        )
    return (
        f'<h2 id="figures">Figures</h2><p class="small">Drawn from the journal\'s axes; each value is the mean of '
        f"the measured runs of one test (points and cells have tooltips; every number is in results.json).</p>"
        f'<div class="figs">{"".join(figure_html(f, higher) for f in figs)}</div>'
    )


def guests_html(a: Analysis) -> str:
    """Guest disks beside the host, per workload (seeds 001/003); nothing for campaigns without vm-disk tests."""
    if not a.guests:
        return ""
    why = {
        "guest / host": "mean of this guest test / mean of the best host test (zvol or dataset) of the same workload",
        "host drain (s)": EXPLAIN["drain"] + "; recorded, not judged: what the ZIL holds is already durable",
        "sync honoured": "the job's flushes reached stable storage: qemu did not drop them (cache=unsafe), ZFS did "
        "not ignore them (sync=disabled), and ZFS saw ZIL commits during the run",
        "acknowledged before durable": "runs whose final fsync took over 5 % of the I/O time (at least 1 s): the "
        "writes fio counted were buffered, not durable (seed 003's zvol run)",
    }
    parts = []
    for g in a.guests:
        heads = guest_header(g.metric)
        head = "<tr>" + "".join(f"<th>{ex(h, why.get(h, EXPLAIN.get(g.metric, '')))}</th>" for h in heads) + "</tr>"
        body = "".join(
            f'<tr class="{r.side}">' + "".join(f"<td>{e(c)}</td>" for c in guest_cells(r, g.metric)) + "</tr>"
            for r in g.rows
        )
        notes = sorted({n for r in g.rows for n in r.notes})
        parts.append(
            f'<section class="guests" data-case="{e(g.case)}"><h3>{e(g.case)}'
            + (f" ({e(g.workload)})" if g.workload else "")
            + f'</h3><div class="wide"><table>{head}{body}</table></div>{_list([e(n) for n in notes]) if notes else ""}'
            "</section>"
        )
    return (
        '<h2 id="guests">Guest disks beside the host</h2><p class="small">Each test guest configuration (backing, '
        "qemu settings) next to the same workload on the host; the guest/host ratio is against the best host test. "
        "Sync columns: what fio, qemu and ZFS showed about durability (seed 003).</p>" + "".join(parts)
    )


def render_html(a: Analysis) -> str:
    """The whole page as one string (single runs' series and percentiles: a.series, a.percentiles)."""
    boards = "".join(leaderboard_html(lb) for lb in a.leaderboards)
    comps = _list([e(c.text) for c in a.comparisons[:200]]) + (
        f'<p class="small">Showing 200 of {len(a.comparisons)} comparisons; all are in results.json.</p>'
        if len(a.comparisons) > 200
        else ""
    )
    legend = (
        '<p class="legend"><span><i style="background:#3fa66b"></i>test</span><span><i style="background:'
        '#5b8def"></i>baseline</span><span><i style="background:#f0a020"></i>zvol (rows highlighted)</span>'
        "<span>cell colour: red = worst … green = best of its test case</span></p>"
    )
    explain = _list([f"<b>{e(k)}</b>: {e(v)}" for k, v in EXPLAIN.items()])
    body = "".join(
        [
            head_html(a),
            *sections_html(a),
            f'<h2 id="leaderboards">Leaderboards</h2>{legend}{boards}',
            guests_html(a),
            figures_html(a, a.percentiles),
            f'<h2 id="comparisons">Within-case comparisons</h2>{comps}',
            timing_html(a),
            f'<h2 id="series">Time series</h2>{series_html(a, a.series)}',
            fingerprint_html(a),
            f'<h2 id="method">How the numbers are obtained</h2>{explain}',
        ]
    )
    return (
        f'<!DOCTYPE html><html lang="en"><head><meta charset="utf-8"><title>tankbench report</title>'
        f'<meta name="viewport" content="width=device-width"><style>{CSS}</style></head><body>{body}</body></html>'
    )


def write_html(a: Analysis, path: str) -> None:
    with open(path, "w", encoding="utf-8") as f:
        f.write(render_html(a))
