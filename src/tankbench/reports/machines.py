"""compare.html and compare.md: machines side by side (analysis/machines.py): claims per machine first, then the
fingerprints with their differences marked, then every shared test with its ratio to the first machine and what
versions differ next to it, one chart per test case, and the tests not every machine ran."""

from __future__ import annotations

import html
import os
from collections.abc import Sequence

from tankbench import __version__, build_commit
from tankbench.analysis.machines import Cell, MachineComparison, MachineRow, fmt_ratio
from tankbench.reports.charts import PALETTE, bars_svg
from tankbench.reports.common import fmt, metric_label

CSS = """
body{font:14px/1.45 system-ui,sans-serif;margin:0 auto;max-width:1280px;padding:0 16px 40px;color:#1b1f24}
h1{font-size:24px;margin:18px 0 4px}h2{border-bottom:2px solid #d0d7de;padding-bottom:3px;margin-top:30px}
table{border-collapse:collapse;margin:6px 0 10px;font-size:13px}th,td{border:1px solid #d0d7de;padding:3px 6px;
vertical-align:top;text-align:left}th{background:#f3f5f7}td.num{text-align:right;white-space:nowrap}
tr.diff td{background:#fff1c9}tr.diff td:first-child::after{content:" ≠";color:#9a6700;font-weight:700}
.holds{color:#1a7f37;font-weight:700}.fails{color:#b3261e;font-weight:700}.undecided{color:#57606a;font-weight:700}
.ver{font-size:11px;color:#9a6700}.small{font-size:12px;color:#57606a}.figs{display:flex;flex-wrap:wrap;gap:14px}
.fig{max-width:600px}.fig h4{margin:8px 0 2px;font-size:13px}.note{background:#fff8c5;border-left:4px solid #d4a72c;
padding:4px 8px;font-size:12px}.legend span{display:inline-block;margin-right:12px}.legend i{display:inline-block;
width:12px;height:10px;margin-right:4px}svg text{font:11px system-ui,sans-serif}
"""


def e(x: object) -> str:
    return html.escape(str(x), quote=True)


def _verdict_word(v: object) -> str:
    return str(getattr(v, "status", "") or getattr(v, "verdict", "") or "")


def verdict_text(v: object) -> str:
    """One machine's verdict on a claim, the way the claim section words it ("holds: 5.1× [4.2–6.3]")."""
    if v is None:
        return "not stated"
    summary = getattr(v, "summary", None)
    return str(summary() if callable(summary) else summary or _verdict_word(v))


def _cls(v: object) -> str:
    word = _verdict_word(v).lower()
    return "holds" if word.startswith("holds") else "fails" if "not" in word else "undecided"


def _ratio_cell(c: Cell | None) -> str:
    if c is None:
        return "—"
    text = fmt_ratio(c) if c.ratio is not None or c.why else "reference"
    if c.significant is False:
        text += " (not significant)"
    return text


def _sentence(mc: MachineComparison) -> str:
    labels = ", ".join(f"{m.label} ({m.source})" for m in mc.machines)
    return (
        f"{len(mc.machines)} machines: {labels}. {len(mc.shared)} tests ran on every machine, {len(mc.partial)} "
        f"on some only. Ratios are each machine's mean over the first machine's ({mc.machines[0].label}), with the "
        "95 % interval of the ratio of means (log scale, Welch–Satterthwaite; Kalibera and Jones 2013); a ratio "
        "whose interval holds 1 is not significant."
    )


# -- Markdown ----------------------------------------------------------------------------------------------------
def render_markdown(mc: MachineComparison) -> str:
    ms = mc.machines
    out = [f"# tankbench compare: {' vs '.join(m.label for m in ms)}", "", _sentence(mc), ""]
    if mc.version_notes:
        out += ["**Versions differ** (said next to every ratio): " + "; ".join(mc.version_notes), ""]
    if mc.claims or mc.unmatched_claims:
        out += ["## Claims", ""]
        for c in mc.claims:
            per = "; ".join(f"{m.label}: {verdict_text(v)}" for m, v in zip(ms, c.verdicts))
            out.append(f"- **{c.name}** ({c.text}): {per}")
        out += [f"- not matched: {u}" for u in mc.unmatched_claims] + [""]
    out += ["## Machines", "", "| key | " + " | ".join(m.label for m in ms) + " |", "|---|" + "---|" * len(ms)]
    for f in mc.fingerprint:
        key = f"**{f.key}** ≠" if f.differs else f.key
        out.append(f"| {key} | " + " | ".join(_md(v) for v in f.values) + " |")
    out += ["", "## Tests on every machine", ""]
    out += _md_rows(mc, mc.shared)
    if mc.partial:
        out += ["", "## Tests not on every machine", ""] + _md_rows(mc, mc.partial)
    return "\n".join(out) + "\n" + _footer()


def _md(v: str) -> str:
    return (v or "—").replace("|", "\\|").replace("\n", " ")


def _md_rows(mc: MachineComparison, rows: Sequence[MachineRow]) -> list[str]:
    ms = mc.machines
    head = "| # | test | figure | " + " | ".join(f"{m.label}" for m in ms)
    head += " | " + " | ".join(f"{m.label} / {ms[0].label}" for m in ms[1:]) + " |"
    out = [head, "|---|---|---|" + "---|" * (2 * len(ms) - 1)]
    for r in rows:
        means = " | ".join(fmt(c.mean) if c else "not run" for c in r.cells)
        ratios = " | ".join(
            _ratio_cell(c) + (f" ({'; '.join(c.versions)})" if c and c.versions else "") for c in r.cells[1:]
        )
        out.append(f"| {r.number} | {_md(r.name)} | {metric_label(r.metric)} | {means} | {ratios} |")
    return out


def _footer() -> str:
    return f"\n_Written by tankbench {__version__} (commit {build_commit()[:12]})._\n"


# -- HTML --------------------------------------------------------------------------------------------------------
def render_html(mc: MachineComparison) -> str:
    ms = mc.machines
    parts = [
        f"<!doctype html><html><head><meta charset='utf-8'><title>tankbench compare</title><style>{CSS}</style>"
        f"</head><body><h1>tankbench compare: {e(' vs '.join(m.label for m in ms))}</h1><p>{e(_sentence(mc))}</p>"
    ]
    if mc.version_notes:
        parts.append(
            f'<p class="note" id="versions">Versions differ (said next to every ratio): {e("; ".join(mc.version_notes))}</p>'
        )
    if mc.claims or mc.unmatched_claims:
        parts.append(_claims_html(mc))
    parts.append(_fingerprint_html(mc))
    parts.append('<h2 id="shared">Tests on every machine</h2>' + _rows_html(mc, mc.shared))
    parts.append(_figures_html(mc))
    if mc.partial:
        parts.append('<h2 id="partial">Tests not on every machine</h2>' + _rows_html(mc, mc.partial))
    parts.append(f'<p class="small">{e(_footer().strip().strip("_"))}</p></body></html>')
    return "".join(parts)


def _claims_html(mc: MachineComparison) -> str:
    head = "".join(f"<th>{e(m.label)}</th>" for m in mc.machines)
    rows = "".join(
        f"<tr><td><b>{e(c.name)}</b><br><span class='small'>{e(c.text)}</span></td>"
        + "".join(f'<td class="{_cls(v)}">{e(verdict_text(v))}</td>' for v in c.verdicts)
        + "</tr>"
        for c in mc.claims
    )
    more = "".join(f"<li>not matched: {e(u)}</li>" for u in mc.unmatched_claims)
    return f'<h2 id="claims">Claims</h2><table><tr><th>claim</th>{head}</tr>{rows}</table>' + (
        f"<ul>{more}</ul>" if more else ""
    )


def _fingerprint_html(mc: MachineComparison) -> str:
    head = "".join(f"<th>{e(m.label)}</th>" for m in mc.machines)
    rows = "".join(
        f"<tr{' class=diff' if f.differs else ''}><td>{e(f.key)}</td>"
        + "".join(f"<td>{e(v or '—')}</td>" for v in f.values)
        + "</tr>"
        for f in mc.fingerprint
    )
    return (
        f'<h2 id="machines">Machines</h2><p class="small">Rows marked ≠ differ between machines.</p>'
        f"<table><tr><th>key</th>{head}</tr>{rows}</table>"
    )


def _rows_html(mc: MachineComparison, rows: Sequence[MachineRow]) -> str:
    ms = mc.machines
    head = "".join(f"<th>{e(m.label)}</th>" for m in ms) + "".join(
        f"<th>{e(m.label)} / {e(ms[0].label)}</th>" for m in ms[1:]
    )
    body = []
    for r in rows:
        means = "".join(f"<td class='num'>{e(fmt(c.mean)) if c else 'not run'}</td>" for c in r.cells)
        ratios = "".join(
            f"<td class='num'>{e(_ratio_cell(c))}"
            + (f"<br><span class='ver'>{e('; '.join(c.versions))}</span>" if c and c.versions else "")
            + "</td>"
            for c in r.cells[1:]
        )
        body.append(
            f"<tr><td>{r.number}</td><td>{e(r.name)}</td><td>{e(metric_label(r.metric))}</td>{means}{ratios}</tr>"
        )
    return f"<table><tr><th>#</th><th>test</th><th>figure</th>{head}</tr>{''.join(body)}</table>"


def _figures_html(mc: MachineComparison) -> str:
    legend = "".join(
        f'<span><i style="background:{c}"></i>{e(m.label)}</span>'
        for i, m in enumerate(mc.machines)
        for c in [PALETTE[i % len(PALETTE)]]
    )
    figs = "".join(
        f'<div class="fig"><h4>{e(f.title)}</h4>{bars_svg(f)}<p class="small">{e(f.note)}</p></div>' for f in mc.figures
    )
    return f'<h2 id="charts">Each test case, every machine</h2><p class="legend">{legend}</p><div class="figs">{figs}</div>'


def write_comparison(mc: MachineComparison, out_dir: str) -> list[str]:
    """compare.html and compare.md into `out_dir` (created); their paths."""
    os.makedirs(out_dir, exist_ok=True)
    paths = [os.path.join(out_dir, "compare.html"), os.path.join(out_dir, "compare.md")]
    for path, text in zip(paths, (render_html(mc), render_markdown(mc))):
        tmp = f"{path}.tmp-{os.getpid()}"
        with open(tmp, "w", encoding="utf-8") as f:
            f.write(text)
        os.replace(tmp, path)
    return paths
