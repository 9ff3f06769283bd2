"""Formatting shared by exporters: numbers, units, and the explanations shown next to them."""

from __future__ import annotations

from typing import Any

from tankbench.analysis.analyse import Analysis
from tankbench.analysis.guest import GuestRow
from tankbench.analysis.leaderboard import Leaderboard
from tankbench.analysis.stats import Summary
from tankbench.metrics import METRICS

NOT_MEASURED = "not measured"

EXPLAIN = {
    **{k: m.formula for k, m in METRICS.items()},
    "mean": "arithmetic mean of the measured runs (status done, warm-up runs excluded)",
    "sd": "sample standard deviation (n - 1) of the measured runs",
    "ci": "95 % confidence interval of the mean: mean ± t(0.975, n - 1) · sd / √n (Student t)",
    "welch": "the ratio of the two means with its 95 % interval (log scale, Welch–Satterthwaite df); a difference is "
    "called significant when its p, Holm-corrected over the comparisons of the same test case, is below 0.05",
    "vs_baseline": "mean of this test / mean of the fastest baseline test of the same test case",
    "vs_first": "mean of this test / mean of first place of the same test case",
    "load_per_mibs": "load1 / MiB/s: load paid for each MiB/s (seed 000's cost)",
    "auto": "default ranking: per test case, durable MiB/s when any measured run finished late (or for copy tests), "
    "fio's MiB/s otherwise; both are shown",
    "drain": "seconds until dirty data reached disk after fio exited (sync)",
}


def fmt(v: float | None, digits: int = 3) -> str:
    """A number with `digits` significant digits, thousands separated; None -> "not measured"."""
    if v is None:
        return NOT_MEASURED
    if v == 0:
        return "0"
    a = abs(v)
    if a >= 10**digits:
        return f"{v:,.0f}"
    decimals = max(0, digits - 1 - int(f"{a:e}".split("e")[1]))
    return f"{v:,.{decimals}f}"


def fmt_summary(s: Summary | None) -> str:
    """ "123 ± 4.5 (n=3)" where ± is the CI half-width; single runs show n=1."""
    if s is None:
        return NOT_MEASURED
    if s.n < 2:
        return f"{fmt(s.mean)} (n=1)"
    return f"{fmt(s.mean)} ± {fmt((s.ci_high - s.ci_low) / 2, 2)} (n={s.n})"


def fingerprint_rows(a: Analysis) -> list[tuple[str, str, str]]:
    """(fingerprint id, key, value) for every fingerprint in the journal."""
    rows = []
    for fid, fp in sorted(a.dataset.fingerprints.items()):
        for k, v in sorted(fp.data.items()):
            rows.append((fid, k, str(v)))
    return rows


def metric_label(key: str) -> str:
    """Heading text of a registry metric (or of the `auto` ranking)."""
    return "auto (durable MiB/s for late cases, else fio MiB/s)" if key == "auto" else METRICS[key].label


ZFS_BESIDE = (
    "physical_write_mibs",
    "physical_read_mibs",
    "physical_per_logical",
    "compressratio",
    "arc_hit_ratio",
    "arc_mru_hits",
    "arc_mfu_hits",
)


def beside(lb: Leaderboard) -> tuple[str, ...]:
    """Figures shown next to the ranking one: fio's own and the durable MiB/s (whichever does not rank), cp's
    apparent speed for copies, and the ZFS figures measured in this test case."""
    have = {k for r in lb.rows for k, s in r.test.stats.items() if s is not None}
    out = [k for k in ("mibs", "durable_mibs", "copy_mibs") if k != lb.metric and k in have]
    return tuple(out + [k for k in ZFS_BESIDE if k in have])


def guest_header(metric: str) -> list[str]:
    """Column headings of a guest-vs-host table (analysis/guest.py), shared by the HTML and Markdown reports."""
    return [
        "#",
        "test",
        "side",
        "storage setup",
        f"{metric_label(metric)} (mean ± 95 % CI)",
        "guest / host",
        metric_label("end_fsync_s"),
        "host drain (s)",
        metric_label("zil_commits"),
        metric_label("slog_write_mib"),
        "sync honoured",
        "acknowledged before durable",
        metric_label("mib_per_host_cpu_s"),
    ]


def guest_values(r: GuestRow, metric: str) -> list[Any]:
    """One row of a guest-vs-host table as values (numbers stay numbers: a spreadsheet computes with them)."""
    t = r.test
    return [
        t.number,
        t.name,
        r.side,
        r.setup,
        t.mean(metric),
        r.vs_host.factor if r.vs_host else None,
        t.mean("end_fsync_s"),
        r.drain_s,
        t.mean("zil_commits"),
        t.mean("slog_write_mib"),
        r.honoured.text,
        r.early_ack.text,
        t.mean("mib_per_host_cpu_s") if r.side == "guest" else None,
    ]


def guest_cells(r: GuestRow, metric: str) -> list[str]:
    """One row of a guest-vs-host table as text cells (the order of guest_header)."""
    v = guest_values(r, metric)
    text = [str(x) if isinstance(x, str | int) else fmt(x) for x in v]
    text[4] = fmt_summary(r.test.stats.get(metric))
    text[5] = f"{v[5]:.2f}×" if v[5] is not None else "—"
    text[12] = fmt(v[12]) if r.side == "guest" else "—"
    return text
