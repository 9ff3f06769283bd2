"""summary.md: the conclusions in a form that pastes into a forum post or an OpenZFS issue."""

from __future__ import annotations

from tankbench.analysis.analyse import Analysis
from tankbench.analysis.checks import emulation_banner
from tankbench.analysis.figures import Figure
from tankbench.analysis.fill import yes_no
from tankbench.analysis.guest import GuestTable
from tankbench.analysis.leaderboard import Leaderboard
from tankbench.reports.common import EXPLAIN, beside, fmt, fmt_summary, guest_cells, guest_header, metric_label

TOP = 10
MD_BESIDE = ("mibs", "durable_mibs", "copy_mibs", "physical_per_logical", "compressratio", "arc_hit_ratio")


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def leaderboard_md(lb: Leaderboard, top: int = TOP) -> list[str]:
    """One leaderboard as a Markdown table (top N rows; the rest counted): the ranking figure, then fio's own
    or the durable figure beside it, and the ZFS figures measured in the case."""
    label = metric_label(lb.metric)
    side = tuple(k for k in beside(lb) if k in MD_BESIDE)  # a forum post: fewer columns; XLSX/CSV have them all
    cols = [
        f"{label} (mean ± 95 % CI)",
        *(metric_label(k) for k in side),
        "vs fastest baseline",
        "vs first place",
        "load1",
    ]
    lines = [
        f"### {lb.case}",
        "",
        f"Ranked by **{label}**: {lb.reason}.",
        "",
        "| # | test | config | " + " | ".join(cols) + " |",
        "|---" * (3 + len(cols)) + "|",
    ]
    for r in lb.rows[:top]:
        t = r.test
        mark = (
            (" 🏆" if r.is_winner else "")
            + (" (baseline)" if t.is_baseline else "")
            + (" (zvol)" if t.traits.volume else "")
        )
        cells = [
            fmt_summary(t.stats.get(lb.metric)),
            *(fmt(t.mean(k)) for k in side),
            _cell(r.vs_baseline.text) if r.vs_baseline else "—",
            _cell(r.vs_first.text) if r.vs_first else "—",
            fmt(t.load1.mean) if t.load1 else "not measured",
        ]
        lines.append(
            f"| {r.rank} | #{t.number} {_cell(t.name)}{mark} | {_cell(t.config)} | " + " | ".join(cells) + " |"
        )
    if len(lb.rows) > top:
        lines.append(f"| … | {len(lb.rows) - top} more tests in results.csv |" + " |" * (1 + len(cols)))
    return lines + [""]


def figure_md(f: Figure) -> list[str]:
    """A figure as a table: one row per series, one column per x value (the HTML draws it)."""
    unit = "" if f.metric == "auto" else f" ({metric_label(f.metric)})"
    lines = [f"### Figure: {f.title}{unit}", ""]
    if f.common:
        lines += [f"All rows: {f.common}.", ""]
    if f.note:
        lines += [f"> {f.note}", ""]
    lines += [f"| {f.x} → | " + " | ".join(_cell(x) for x in f.x_values) + " |", "|---" * (1 + len(f.x_values)) + "|"]
    lines += [
        f"| {_cell(s.label)} | " + " | ".join(fmt(v) if v is not None else "—" for _, v in s.points) + " |"
        for s in f.series
    ]
    return lines + [""]


def guests_md(g: GuestTable) -> list[str]:
    """A guest-vs-host table: each guest configuration beside the host's tests of the same workload."""
    head = guest_header(g.metric)
    lines = [f"### Guest vs host: {g.case}" + (f" ({g.workload})" if g.workload else ""), ""]
    lines += ["| " + " | ".join(head) + " |", "|---" * len(head) + "|"]
    lines += ["| " + " | ".join(_cell(c) for c in guest_cells(r, g.metric)) + " |" for r in g.rows]
    notes = sorted({n for r in g.rows for n in r.notes})
    return lines + [""] + [f"> {_cell(n)}" for n in notes] + ([""] if notes else [])


def fill_md(a: Analysis) -> list[str]:
    """The "Pool full" table (seed 003): per fill run, what the guest saw and whether its data survived."""
    if not a.fill:
        return []
    out = [
        "## Pool full",
        "",
        "The guest wrote until the pool was full (workload = fill): what it saw, and whether what it had "
        "written reads back intact.",
        "",
        "| test | backing | werror | guest saw | host error | written before stop | intact | run |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for f in a.fill:
        before = "—" if f.before_stop_mib is None else f"{f.before_stop_mib:.0f} MiB"
        out.append(
            f"| #{f.test_number} {_cell(f.test_name)} | {f.backing} | {f.werror} | {_cell(f.saw_text)} | "
            f"{_cell(f.host_error or '—')} | {before} | {yes_no(f.intact)} | {f.status} |"
        )
    return out + [""]


def crashes_md(a: Analysis) -> list[str]:
    """Tests that crashed the host or its test guest (issue 18), most crashes first; nothing when none did."""
    if not a.crashes:
        return []
    guest = any(c.guest_crashes for c in a.crashes)
    out = [
        "## Tests that crashed the host" + (" or its test guest" if guest else ""),
        "",
        "| test | configuration | crashed runs | finished runs | noted |",
        "|---|---|---|---|---|",
    ]
    out += [
        f"| #{c.test_number} {_cell(c.test_name)} | {_cell(c.config)} | {c.crashes} of {c.attempts}"
        f"{f' ({c.guest_crashes} the test guest)' if c.guest_crashes else ''} | "
        f"{'skipped' if c.skipped else c.finished} | {_cell('; '.join(c.notes) or '—')} |"
        for c in a.crashes
    ]
    return [*out, ""]


def clients_md(a: Analysis) -> list[str]:
    """Tests whose load came from client hosts (issue 20): each client's mean beside all clients'; per run in
    clients.md."""
    if not a.clients:
        return []
    out = [
        "## Load from client hosts",
        "",
        "fio client/server: every client ran the test's job at once. MiB/s are means over the test's measured runs "
        "(per run: clients.md); even = slowest client / fastest (1.00: an even share); limit: what a network "
        "share's runs were bound by (network, disks, cpu).",
        "",
        "| test | runs | each client (MiB/s) | all clients (MiB/s) | even | limit |",
        "|---|---|---|---|---|---|",
    ]
    out += [
        f"| #{c.test_number} {_cell(c.test_name)} ({c.direction}) | {c.runs} | "
        f"{_cell(', '.join(f'{n} {fmt(m)}' for n, m in c.clients))} | {fmt(c.total_mibs)} | "
        f"{'—' if c.even is None else f'{c.even:.2f}'} | {_cell(f'{c.limit}: {c.why}' if c.limit else '—')} |"
        for c in a.clients
    ]
    return [*out, ""]


def summary_markdown(a: Analysis) -> str:
    """The whole summary.md text."""
    ds = a.dataset
    out = [f"# tankbench report: {', '.join(n for n in ds.campaign_names if n) or ds.path}", ""]
    if a.emulated:
        out += [
            f"> **Emulated machine ({' / '.join(a.virtualisation)}):** {emulation_banner(fp.data for fp in ds.fingerprints.values())}",
            "",
        ]
    n_meas = sum(len(t.measured) for t in ds.tests)
    out += [
        f"{len(ds.tests)} tests, {ds.n_runs} runs ({n_meas} measured; warm-ups excluded from rankings). "
        f"Ranked by **{metric_label(a.rank_by)}**: {EXPLAIN[a.rank_by]}."
        + (f" Selection: {'; '.join(a.selection)}." if a.selection else ""),
        "",
    ]
    out += ["## Recommendations", ""] + [f"- {r.text}" for r in a.recommendations] + [""]
    if a.goals:
        out += ["## Goals", ""]
        for g in a.goals:
            met = ", ".join(f"#{t.number} {t.name} ({fmt(v)})" for t, v, _ in g.passing) or "none"
            out.append(f"- **{g.goal.name}** ({g.goal.text}): {'not measured' if g.not_measured else 'met by ' + met}")
        out.append("")
    if a.mix:
        out += [
            "## Workload mix",
            "",
            f"Weights: {', '.join(f'{c} {w:.0%}' for c, w in a.mix.weights)}. {a.mix.formula}.",
            "",
            "| config | expected | missing |",
            "|---|---|---|",
        ]
        out += [
            f"| {_cell(e.config)} | {fmt(e.expected)} | {', '.join(e.missing) or '—'} |" for e in a.mix.entries[:TOP]
        ]
        out.append("")
    out += fill_md(a)
    out += crashes_md(a)
    out += clients_md(a)
    out += ["## Warnings", ""] + [
        f"- **{w.severity}: {w.code}** — {w.message.rstrip('.')}. Fix: {w.fix}." for w in a.warnings
    ]
    out += ["", "## Leaderboards", ""]
    for lb in a.leaderboards:
        out += leaderboard_md(lb)
    for table in a.guests:
        out += guests_md(table)
    for f in a.figures:
        out += figure_md(f)
    out += ["## How the numbers are obtained", ""] + [f"- **{k}**: {v}" for k, v in EXPLAIN.items()] + [""]
    return "\n".join(out)


def write_markdown(a: Analysis, path: str) -> None:
    with open(path, "w", encoding="utf-8") as f:
        f.write(summary_markdown(a))
