"""Formatting shared by the report's sections and exporters: numbers, units, and the explanations shown next to
them."""

from __future__ import annotations

from tankbench.analysis.leaderboard import Leaderboard
from tankbench.analysis.stats import Summary
from tankbench.metrics import METRICS

NOT_MEASURED = "not measured"

EXPLAIN = {
    **{k: m.formula for k, m in METRICS.items()},
    "mean": "arithmetic mean of the measured runs (status done, warm-up runs excluded)",
    "sd": "sample standard deviation (n - 1) of the measured runs",
    "ci": "95 % confidence interval of the mean: mean ± t(0.975, n - 1) · sd / √n (Student t)",
    "welch": "Welch's unequal-variance t-test, two-sided; a difference is called significant when p < 0.05",
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


def ci_bounds(s: Summary | None) -> tuple[float, float] | tuple[None, None]:
    """The 95 % CI of a summary, or (None, None) when it has none: one run has no interval (not a zero-wide one)."""
    return (s.ci_low, s.ci_high) if s is not None and s.n >= 2 else (None, None)


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
