"""Leaderboards per test case, ratios phrased like seed 000, cost, and within-case axis comparisons."""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from tankbench.analysis.cases import Dataset, TestSummary
from tankbench.analysis.settings import Settings
from tankbench.analysis.stats import TestResult, holm, ratio_test
from tankbench.metrics import METRICS
from tankbench.model import FIO_JOB_AXES

#: a difference is called significant below this family-wise error rate (Holm within each leaderboard)
ALPHA = 0.05


@dataclass(frozen=True)
class Ratio:
    """How row A compares with row B on one metric: factor (oriented so that > 1 is better), its 95 % interval
    (log scale, delta method), Welch's test, the p-value adjusted within the leaderboard (Holm) and a sentence."""

    factor: float
    percent: float
    better: bool
    test: TestResult
    text: str
    low: float | None = None
    high: float | None = None
    p_adjusted: float | None = None  # Holm over the leaderboard's family of comparisons; None: not adjusted

    @property
    def significant(self) -> bool:
        """Significant at ALPHA, after Holm's correction when the comparison belongs to a leaderboard."""
        if not self.test.possible:
            return False
        return (self.test.p if self.p_adjusted is None else self.p_adjusted) < ALPHA

    @property
    def interval(self) -> str:
        """ "1.04× [0.97–1.11]" (the factor with its 95 % interval), or the bare factor without one."""
        iv = (
            f" [{_fmt(self.low)}–{_fmt(self.high) if math.isfinite(self.high) else '∞'}]"
            if self.low is not None and self.high is not None
            else ""
        )
        return f"{_fmt(self.factor)}×{iv}"


def _fmt(x: float) -> str:
    return f"{x:.2f}" if abs(x) < 10 else f"{x:.1f}" if abs(x) < 100 else f"{x:.0f}"


def _sentence(r: Ratio, higher: bool, other: str, label: str) -> str:
    """Seed 000's phrasing with the interval instead of a p-value, and "faster" only when the difference is
    significant after Holm's correction."""
    what = "the " + label if higher else "the latency advantage"
    if not r.test.possible:
        return f"{r.interval} {what} of {other}; no interval: {r.test.reason}"
    if not r.significant:
        held = (
            " (the 95 % interval excludes 1, but not after Holm's correction for this test case's comparisons)"
            if r.p_adjusted is not None and r.test.p < ALPHA
            else ""
        )
        return f"not clearly different from {other}: {r.interval}{held}"
    word = "faster" if higher else "lower latency"
    if r.factor >= 1:
        return f"{r.interval} {word} than {other} ({(r.factor - 1) * 100:.1f} % {'increase' if higher else 'less'})"
    inv = Ratio(1 / r.factor, 0.0, False, r.test, "", 1 / r.high if r.high else None, 1 / r.low if r.low else None)
    return f"{other} is {inv.interval} {word} ({(1 / r.factor - 1) * 100:.1f} % {'increase' if higher else 'less'})"


def ratio(a: TestSummary, b: TestSummary, key: str, other: str, p_adjusted: float | None = None) -> Ratio | None:
    """Compare a with b ("other" names b in the sentence); None when either was not measured. The factor, its 95 %
    interval and the test's p come from one statistic (the log ratio of the means), so they agree."""
    ma, mb = a.mean(key), b.mean(key)
    if ma is None or mb is None or ma <= 0 or mb <= 0:
        return None
    higher = bool(METRICS[key].higher_is_better)
    top, bottom = (a.values(key), b.values(key)) if higher else (b.values(key), a.values(key))
    factor, low, high, test = ratio_test(top, bottom, 1 - ALPHA)
    lo, hi = (low, high) if test.possible else (None, None)
    r = Ratio(factor, (factor - 1.0) * 100.0, factor > 1, test, "", lo, hi, p_adjusted)
    return dataclasses.replace(r, text=_sentence(r, higher, other, METRICS[key].label))


def family_p(top: TestSummary, others: Sequence[TestSummary], key: str) -> dict[str, float]:
    """Holm-adjusted p-values of `top` against each of `others` (one family)."""
    higher = bool(METRICS[key].higher_is_better)
    tested = []
    for t in others:
        if (t.mean(key) or 0.0) > 0 and (top.mean(key) or 0.0) > 0:  # a ratio of positive means only
            pair = (t.values(key), top.values(key)) if higher else (top.values(key), t.values(key))
            res = ratio_test(*pair)[3]
            if res.possible:
                tested.append((t.id, res.p))
    return {tid: q for (tid, _), q in zip(tested, holm([p for _, p in tested]))}


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
    """One leaderboard row; `test` is traceable to journal tests.id and its runs' rows. `is_winner`: the badge —
    the first row without an error-level warning of its own, and only when it is significantly ahead (Holm)."""

    rank: int
    test: TestSummary
    value: float | None
    is_winner: bool
    vs_baseline: Ratio | None
    vs_first: Ratio | None
    cost: Cost
    condemned: bool = False  # an error-level warning of its own: never named as best, badge or colour


@dataclass(frozen=True)
class Leaderboard:
    """The tests of one test case ranked by one metric; unmeasured tests last with value None. "First place" (the
    reference of every vs-first ratio) is the best row without an error-level warning of its own; `separated` says
    whether it is significantly ahead of the next such row (Welch, Holm-corrected within the board): only then is
    there a winner, a badge and a best-to-worst colouring (`shade`)."""

    case: str
    metric: str
    rows: tuple[Row, ...]
    best_baseline: TestSummary | None
    reason: str = ""  # why this figure ranks (auto: durable when runs finished late)
    separated: bool = False
    correction: str = "Holm"

    @property
    def throughput(self) -> str:
        """The MiB/s figure of this board: the ranking one when it is a MiB/s figure, else fio's."""
        return self.metric if METRICS[self.metric].unit == "MiB/s" else "mibs"

    @property
    def leader(self) -> Row | None:
        """The best measured row without an error-level warning of its own (first place), separated or not."""
        return next((r for r in self.rows if r.value is not None and not r.condemned), None)

    @property
    def winner(self) -> Row | None:
        """The leader when it is significantly ahead of the runner-up; None otherwise."""
        return self.leader if self.separated else None

    @property
    def shade(self) -> bool:
        """Whether exporters may colour the board best-to-worst: only when its leader is significantly ahead."""
        return self.separated


def condemned(warnings: Sequence[Any]) -> frozenset[str]:
    """The tests an error-level warning (analysis/checks.py Warning) names: its own, not a campaign-wide one such as
    `emulated`, which names no test. No recommendation, badge or colour may name them."""
    return frozenset(tid for w in warnings if w.severity == "error" for tid in w.test_ids)


def rank(tests: Sequence[TestSummary], key: str) -> list[TestSummary]:
    """Best first by the mean of key; unmeasured last, then by test number."""
    sign = -1.0 if METRICS[key].higher_is_better else 1.0

    def k(t: TestSummary) -> tuple[int, float, int]:
        m = t.mean(key)
        return (1, 0.0, t.number) if m is None else (0, sign * m, t.number)

    return sorted(tests, key=k)


def _holm_family(
    rows: Sequence[TestSummary], ref: TestSummary | None, key: str, skip: frozenset[str]
) -> dict[str, float]:
    """Holm-adjusted p-values of each row against `ref` (one family per board and reference)."""
    if ref is None:
        return {}
    return family_p(ref, [t for t in rows if t is not ref and t.id not in skip and t.mean(key) is not None], key)


def leaderboard(
    case: str, tests: Sequence[TestSummary], key: str, reason: str = "", condemned: frozenset[str] = frozenset()
) -> Leaderboard:
    """Rank one test case; ratios vs the fastest baseline and vs first place (both without error-level warnings of
    their own), each family Holm-corrected."""
    ranked = rank(tests, key)
    ok = [t for t in ranked if t.mean(key) is not None and t.id not in condemned]
    baselines = [t for t in ok if t.is_baseline]
    best_base = baselines[0] if baselines else None
    first = ok[0] if ok else None
    p_first = _holm_family(ranked, first, key, condemned)
    p_base = _holm_family(ranked, best_base, key, condemned)
    tp = key if METRICS[key].unit == "MiB/s" else "mibs"
    rows = []
    for i, t in enumerate(ranked):
        vb = (
            ratio(t, best_base, key, "the fastest baseline", p_base.get(t.id))
            if best_base and t is not best_base
            else None
        )
        vf = ratio(t, first, key, "first place", p_first.get(t.id)) if first and t is not first else None
        rows.append(Row(i + 1, t, t.mean(key), False, vb, vf, cost(t, first, tp), t.id in condemned))
    runner_up = next((r for r in rows if r.test in ok[1:2]), None)
    separated = runner_up is not None and runner_up.vs_first is not None and runner_up.vs_first.significant
    rows = [dataclasses.replace(r, is_winner=separated and r.test is first) for r in rows]
    return Leaderboard(case, key, tuple(rows), best_base, reason, separated)


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
    if tests and all(t.reads_only for t in tests):
        return "mibs", (
            "reads: fio's own MiB/s ranks (a read has no data to make durable; wall time beyond ramp + runtime is "
            "fio's start-up, shown as such)"
        )
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
    ds: Dataset,
    rank_by: str,
    metrics: dict[str, tuple[str, str]] | None = None,
    condemned: frozenset[str] = frozenset(),
) -> tuple[Leaderboard, ...]:
    """One leaderboard per test case, cases in order of their first test number; `condemned`: the ids of tests
    with an error-level warning of their own (never first place, winner or coloured best)."""
    metrics = metrics or case_metrics(ds, rank_by)
    return tuple(leaderboard(case, tests, *metrics[case], condemned) for case, tests in ds.cases().items())


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
    p_adj = family_p(top, [t for _, t in entries[1:]], key)
    ratios = tuple(ratio(top, t, key, f"{v} (test #{t.number})", p_adj.get(t.id)) for v, t in entries[1:])
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


def axis_comparisons(
    ds: Dataset, metric_of: dict[str, tuple[str, str]], condemned: frozenset[str] = frozenset()
) -> tuple[AxisComparison, ...]:
    """Every axis the journal varies, per test case, by the case's ranking figure; tests with an error-level warning
    of their own take no part (a value that wins only on such tests is never called best)."""
    out = []
    for case, all_tests in ds.cases().items():
        tests = [t for t in all_tests if t.id not in condemned]
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
