"""Leaderboards per test case, ratios phrased like seed 000, cost, and within-case axis comparisons."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from tankbench.analysis.cases import Dataset, TestSummary
from tankbench.analysis.settings import Settings
from tankbench.analysis.stats import TestResult, welch
from tankbench.metrics import METRICS
from tankbench.model import FIO_JOB_AXES


@dataclass(frozen=True)
class Ratio:
    """How row A compares with row B on one metric: factor, percent change, significance, a sentence."""

    factor: float
    percent: float
    better: bool
    test: TestResult
    text: str


def _fmt(x: float) -> str:
    return f"{x:.2f}" if abs(x) < 10 else f"{x:.1f}" if abs(x) < 100 else f"{x:.0f}"


def _sentence(shown: float, up: bool, higher: bool, other: str, label: str, test: TestResult) -> str:
    """Seed 000's phrasing, with "faster" only after a significant Welch test."""
    pct = (shown - 1.0) * 100.0
    if higher:
        claim = (
            f"{_fmt(shown)}× faster than {other} ({pct:.1f} % increase)"
            if up
            else f"{other} is {_fmt(shown)}× faster ({pct:.1f} % increase)"
        )
        plain = (
            f"{_fmt(shown if up else 1 / shown)}× the {label} of {other} ({'+' if up else '−'}"
            f"{abs(pct if up else (1 - 1 / shown) * 100):.1f} %)"
        )
    else:
        less = (1 - 1 / shown) * 100.0
        claim = (
            f"{_fmt(shown)}× lower latency than {other} ({less:.1f} % less)"
            if up
            else f"{other} has {_fmt(shown)}× lower latency ({less:.1f} % less)"
        )
        plain = f"{_fmt(1 / shown if up else shown)}× the {label} of {other}"
    if not test.possible:
        return f"{plain}; no significance test: {test.reason}"
    if test.significant():
        return f"{claim}; Welch p = {test.p:.3g}"
    return f"not significantly different from {other}: {plain}, Welch p = {test.p:.3g}"


def ratio(a: TestSummary, b: TestSummary, key: str, other: str) -> Ratio | None:
    """Compare a with b ("other" names b in the sentence); None when either was not measured."""
    ma, mb = a.mean(key), b.mean(key)
    if ma is None or mb is None or ma <= 0 or mb <= 0:
        return None
    higher = bool(METRICS[key].higher_is_better)
    factor = ma / mb if higher else mb / ma
    test = welch(a.values(key), b.values(key))
    shown = factor if factor >= 1 else 1.0 / factor
    text = _sentence(shown, factor >= 1, higher, other, METRICS[key].label, test)
    return Ratio(factor, (factor - 1.0) * 100.0, factor > 1, test, text)


@dataclass(frozen=True)
class Cost:
    """Load and CPU per MiB/s of a row, and the sentence comparing it with first place."""

    load_per_mibs: float | None
    cpu_per_mibs: float | None
    text: str


def cost(row: TestSummary, first: TestSummary | None, tp: str = "mibs") -> Cost:
    """Seed 000's cost: load1 (max during run) and CPU % (user+sys) per MiB/s (of the figure `tp`: the
    board's throughput figure), and vs first place."""
    mibs = row.mean(tp)
    load = row.load1.mean if row.load1 else None
    cpu = row.cpu_pct.mean if row.cpu_pct else None
    lpm = load / mibs if load is not None and mibs else None
    cpm = cpu / mibs if cpu is not None and mibs else None
    text = "" if load is not None else "load not measured"
    if first is not None and first is not row and first.load1 and load and first.load1.mean > 0:
        fm = first.mean(tp)
        if fm and mibs:
            lr = load / first.load1.mean
            dt = (mibs / fm - 1.0) * 100.0
            text = (
                f"{_fmt(lr)}× {'more' if lr >= 1 else 'less'} load1 than first place "
                f"for {abs(dt):.1f} % {'less' if dt < 0 else 'more'} throughput"
            )
    return Cost(lpm, cpm, text)


@dataclass(frozen=True)
class Row:
    """One leaderboard row; `test` is traceable to journal tests.id and its runs' rows."""

    rank: int
    test: TestSummary
    value: float | None
    is_winner: bool
    vs_baseline: Ratio | None
    vs_first: Ratio | None
    cost: Cost


@dataclass(frozen=True)
class Leaderboard:
    """The tests of one test case ranked by one metric; unmeasured tests last with value None."""

    case: str
    metric: str
    rows: tuple[Row, ...]
    best_baseline: TestSummary | None
    reason: str = ""  # why this figure ranks (auto: durable when runs finished late)

    @property
    def throughput(self) -> str:
        """The MiB/s figure of this board: the ranking one when it is a MiB/s figure, else fio's."""
        return self.metric if METRICS[self.metric].unit == "MiB/s" else "mibs"

    @property
    def winner(self) -> Row | None:
        return self.rows[0] if self.rows and self.rows[0].value is not None else None


def rank(tests: Sequence[TestSummary], key: str) -> list[TestSummary]:
    """Best first by the mean of key; unmeasured last, then by test number."""
    sign = -1.0 if METRICS[key].higher_is_better else 1.0

    def k(t: TestSummary) -> tuple[int, float, int]:
        m = t.mean(key)
        return (1, 0.0, t.number) if m is None else (0, sign * m, t.number)

    return sorted(tests, key=k)


def leaderboard(case: str, tests: Sequence[TestSummary], key: str, reason: str = "") -> Leaderboard:
    """Rank one test case; ratios vs the fastest baseline and vs first place."""
    ranked = rank(tests, key)
    baselines = [t for t in ranked if t.is_baseline and t.mean(key) is not None]
    best_base = baselines[0] if baselines else None
    first = ranked[0] if ranked and ranked[0].mean(key) is not None else None
    tp = key if METRICS[key].unit == "MiB/s" else "mibs"
    rows = []
    for i, t in enumerate(ranked):
        vb = ratio(t, best_base, key, "the fastest baseline") if best_base and t is not best_base else None
        vf = ratio(t, first, key, "first place") if first and t is not first else None
        rows.append(Row(i + 1, t, t.mean(key), t is first, vb, vf, cost(t, first, tp)))
    return Leaderboard(case, key, tuple(rows), best_base, reason)


def case_metric(tests: Sequence[TestSummary], rank_by: str, settings: Settings) -> tuple[str, str]:
    """The figure that ranks a test case and why. `auto`: durable MiB/s for copy tests and for a case with any
    measured run that finished late (its fio MiB/s is known to overstate), fio's MiB/s otherwise. A figure that
    does not apply to copy tests (fio's) falls back to durable MiB/s for them."""
    copy = bool(tests) and all(t.is_copy for t in tests)
    if rank_by != "auto":
        if copy and "copy" not in METRICS[rank_by].kinds:
            return "durable_mibs", f"copy tests have no {METRICS[rank_by].name}"
        return rank_by, "chosen with --rank-by"
    if copy:
        return "durable_mibs", "copy tests: the data counts once it is on disk (cp's own speed is shown beside)"
    runs = [r for t in tests for r in t.measured]
    late = sum(1 for r in runs if r.late)
    if late:
        return "durable_mibs", (
            f"{late} of {len(runs)} measured runs finished late (wall − ramp − runtime + drain "
            "above the timing threshold): fio's MiB/s overstates them, so the durable figure ranks"
        )
    return "mibs", "no run finished late: fio's own MiB/s ranks (durable MiB/s shown beside)"


def case_metrics(ds: Dataset, rank_by: str) -> dict[str, tuple[str, str]]:
    """{test case: (ranking figure, why)} for every case."""
    return {case: case_metric(tests, rank_by, ds.settings) for case, tests in ds.cases().items()}


def leaderboards(
    ds: Dataset, rank_by: str, metrics: dict[str, tuple[str, str]] | None = None
) -> tuple[Leaderboard, ...]:
    """One leaderboard per test case, cases in order of their first test number."""
    metrics = metrics or case_metrics(ds, rank_by)
    return tuple(leaderboard(case, tests, *metrics[case]) for case, tests in ds.cases().items())


# -- axes: within-case comparisons of tests that differ in one setting --------------------------------------


def _slog(t: TestSummary) -> str:
    v = t.params.get("slog", t.props.get("slog", ""))
    if v in ("", None):
        return "slog" if "slog" in t.name.lower() or "slog" in t.target.lower() else "no slog"
    return "slog" if v not in (False, "none", "no", "off", 0) else "no slog"


def _recordsize(t: TestSummary) -> str:
    for k in ("recordsize", "volblocksize"):
        v = t.params.get(k, t.props.get(k))
        if v not in (None, ""):
            return str(v)
    return ""


WORKLOAD = FIO_JOB_AXES


def _workload_key(t: TestSummary) -> tuple[Any, ...]:
    return tuple(sorted((k, str(v)) for k, v in t.params.items() if k in WORKLOAD))


def _params_without(t: TestSummary, drop: tuple[str, ...]) -> tuple[Any, ...]:
    return tuple(sorted((k, str(v)) for k, v in t.params.items() if k not in drop))


def _params_key(t: TestSummary, drop: str = "") -> tuple[Any, ...]:
    return tuple(sorted((k, str(v)) for k, v in t.params.items() if k != drop))


def _props_key(t: TestSummary, drop: tuple[str, ...]) -> tuple[Any, ...]:
    return tuple(sorted((k, str(v)) for k, v in t.props.items() if k not in drop))


Axis = tuple[str, Callable[[TestSummary], str], Callable[[TestSummary], tuple[Any, ...]]]

AXES: tuple[Axis, ...] = (
    ("direct vs buffered", lambda t: str(t.params.get("io", "")), lambda t: (t.target, _params_key(t, "io"))),
    ("iodepth", lambda t: f"QD{t.params.get('iodepth', '')}", lambda t: (t.target, _params_key(t, "iodepth"))),
    (
        "sync vs fsync vs fdatasync",
        lambda t: str(t.params.get("sync_mode", "")),
        lambda t: (t.target, _params_key(t, "sync_mode")),
    ),
    (
        "zvol vs dataset",
        lambda t: t.target_kind if t.traits.host_zfs else "",
        lambda t: (_workload_key(t),),
    ),
    (
        # seed 001: the same workload inside a test guest (on any backing) and on the host's zvol or dataset
        "guest vs host",
        lambda t: "guest" if t.traits.runs_in_guest else "host" if t.traits.host_zfs else "",
        lambda t: (_workload_key(t),),
    ),
    (
        "SLOG vs none",
        _slog,
        lambda t: (t.target_kind, _params_without(t, ("slog", "logbias")), _props_key(t, ("slog", "logbias"))),
    ),
    (
        "recordsize",
        _recordsize,
        lambda t: (
            t.target_kind,
            _params_without(t, ("recordsize", "volblocksize")),
            _props_key(t, ("recordsize", "volblocksize")),
        ),
    ),
)


@dataclass(frozen=True)
class AxisComparison:
    """Within one test case, tests that differ only in one axis: the best of each value, compared."""

    case: str
    axis: str
    metric: str
    entries: tuple[tuple[str, TestSummary], ...]
    ratios: tuple[Ratio | None, ...]
    text: str


def _compare_group(
    case: str, axis: str, key: str, group: list[TestSummary], value_of: Callable[[TestSummary], str]
) -> AxisComparison | None:
    best: dict[str, TestSummary] = {}
    for t in rank(group, key):
        v = value_of(t)
        if v and t.mean(key) is not None and v not in best:
            best[v] = t
    if len(best) < 2:
        return None
    entries = tuple(best.items())
    top_v, top = entries[0]
    ratios = tuple(ratio(top, t, key, f"{v} (test #{t.number})") for v, t in entries[1:])
    parts = [f"{r.text}" for r in ratios if r]
    text = f"{case}, {axis}: best is {top_v} (test #{top.number} {top.name}): " + "; ".join(parts)
    return AxisComparison(case, axis, key, entries, ratios, text)


SPECIAL_KEYS = (
    "io",
    "iodepth",
    "sync_mode",
    "slog",
    "recordsize",
    "volblocksize",
    "target",
    "kind",
    "rw",
    "bs",
    "workload",
)


def _generic_axes(tests: Sequence[TestSummary], case_keys: tuple[str, ...]) -> list[Axis]:
    """One axis per other setting that varies inside a test case (compression, sync, logbias, layout, cache,
    ioengine, numjobs, tunables, pool layout, …): tests equal in everything else are compared."""
    values: dict[str, set[str]] = {}
    for t in tests:
        for k, v in t.axes().items():
            values.setdefault(k, set()).add(str(v))
    out: list[Axis] = []
    for k in sorted(values):
        if k in SPECIAL_KEYS or k in case_keys or len(values[k]) < 2:
            continue
        out.append((k, _axis_value(k), _axis_rest(k)))
    return out


def _axis_value(k: str) -> Callable[[TestSummary], str]:
    return lambda t: str(t.axes().get(k, ""))


def _axis_rest(k: str) -> Callable[[TestSummary], tuple[Any, ...]]:
    return lambda t: tuple(sorted((a, str(v)) for a, v in t.axes().items() if a != k))


def axis_comparisons(ds: Dataset, metric_of: dict[str, tuple[str, str]]) -> tuple[AxisComparison, ...]:
    """Every axis the journal varies, per test case, by the case's ranking figure."""
    out = []
    for case, tests in ds.cases().items():
        key = metric_of[case][0]
        for axis, value_of, key_of in (*AXES, *_generic_axes(tests, ds.settings.case_keys)):
            groups: dict[tuple[Any, ...], list[TestSummary]] = {}
            for t in tests:
                if value_of(t):
                    groups.setdefault(key_of(t), []).append(t)
            for group in groups.values():
                c = _compare_group(case, axis, key, group, value_of)
                if c:
                    out.append(c)
    return tuple(out)
