"""Recommendations derived from the leaderboards, workload-mix advice and goals (nothing canned)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from tankbench.analysis.cases import Dataset, TestSummary
from tankbench.analysis.leaderboard import AxisComparison, Leaderboard, ratio
from tankbench.analysis.settings import GOAL_METRICS, Goal
from tankbench.errors import UserError
from tankbench.metrics import METRICS

COST_RATIO = 2.0
COST_CLOSE = 0.10


@dataclass(frozen=True)
class Recommendation:
    """A conclusion, the sentence to paste, and the tests (tests.id) it rests on."""

    kind: str
    text: str
    basis: tuple[str, ...]


def _who(t: TestSummary) -> str:
    return f"#{t.number} {t.name} ({t.config})"


def case_recommendation(lb: Leaderboard) -> Recommendation | None:
    """Name the winner of a test case only when it is significantly ahead of the runner-up (Holm-corrected within the
    board), and never a test with an error-level warning of its own: then say what was left out and why."""
    measured = [r for r in lb.rows if r.value is not None]
    rows = [r for r in measured if not r.condemned]
    if not measured:
        return None
    label = METRICS[lb.metric].label
    left = [r.test for r in measured if r.condemned]
    aside = (
        f" Not considered: {', '.join(f'#{n}' for n in sorted(t.number for t in left))} (an error-level warning of "
        "their own)."
        if left
        else ""
    )
    if not rows:
        return Recommendation(
            "case", f"{lb.case}: no recommendation — every measured test has an error-level warning.{aside}", ()
        )
    win = rows[0].test
    if len(rows) == 1:
        return Recommendation(
            "case", f"{lb.case}: only {_who(win)} can be compared; nothing to compare.{aside}", (win.id,)
        )
    second = rows[1].test
    adjusted = rows[1].vs_first.p_adjusted if rows[1].vs_first else None
    r = ratio(win, second, lb.metric, f"the runner-up #{second.number}", adjusted)
    if r is None:  # one of them measured 0 (a run that moved no data): there is no ratio to state
        return Recommendation(
            "case",
            f"{lb.case}: {_who(win)} leads by {label}; {_who(second)} measured 0, so no ratio is given.{aside}",
            (win.id, second.id),
        )
    base = rows[0].vs_baseline
    tail = f" Against the fastest baseline: {base.text}." if base else ""
    if lb.separated and r.significant:
        text = f"{lb.case}: use {_who(win)} — by {label}, {r.text}.{tail}{aside}"
    else:
        text = (
            f"{lb.case}: no clear winner by {label} — {_who(win)} against {_who(second)}: {r.text}; "
            f"choose on cost or add repeats.{tail}{aside}"
        )
    return Recommendation("case", text, (win.id, second.id))


def cost_recommendation(lb: Leaderboard) -> Recommendation | None:
    """Seed 000: the winner may cost many times the load for a few percent of throughput."""
    tp_key = lb.throughput
    rows = [r for r in lb.rows if r.value is not None and not r.condemned and r.test.load1 and r.test.mean(tp_key)]
    if len(rows) < 2:
        return None
    win = rows[0].test
    assert win.load1 is not None
    for r in rows[1:]:
        t = r.test
        assert t.load1 is not None
        tp_win, tp = win.mean(tp_key) or 0.0, t.mean(tp_key) or 0.0
        if t.load1.mean > 0 and win.load1.mean / t.load1.mean >= COST_RATIO and tp >= (1 - COST_CLOSE) * tp_win:
            lr = win.load1.mean / t.load1.mean
            return Recommendation(
                "cost",
                f"{lb.case}: {_who(t)} costs {lr:.1f}× less load1 than the winner "
                f"{_who(win)} for {(1 - tp / tp_win) * 100:.1f} % less throughput; "
                "prefer it on a shared host.",
                (win.id, t.id),
            )
    return None


def axis_recommendations(comps: Sequence[AxisComparison]) -> list[Recommendation]:
    """Summarise each axis over test cases: which value won, and in how many cases significantly."""
    by_axis: dict[str, list[AxisComparison]] = {}
    for c in comps:
        by_axis.setdefault(c.axis, []).append(c)
    out = []
    for axis, cs in by_axis.items():
        wins: dict[str, list[tuple[str, bool]]] = {}
        ids: list[str] = []
        for c in cs:
            sig = all(r is not None and r.significant for r in c.ratios)
            wins.setdefault(c.entries[0][0], []).append((c.case, sig))
            ids += [t.id for _, t in c.entries]
        parts = [
            f"{v} was best in {len(won)} of {len(cs)} comparisons, significantly in "
            f"{sum(s for _, s in won)} (test cases: {', '.join(dict.fromkeys(c for c, _ in won))})"
            for v, won in sorted(wins.items(), key=lambda kv: -len(kv[1]))
        ]
        out.append(Recommendation("axis", f"{axis}: " + "; ".join(parts) + ".", tuple(dict.fromkeys(ids))))
    return out


def recommendations(
    ds: Dataset, boards: Sequence[Leaderboard], comps: Sequence[AxisComparison], timing_issues: bool
) -> tuple[Recommendation, ...]:
    """Everything the data supports, per case first, then cost, axes and method."""
    out: list[Recommendation] = []
    for lb in boards:
        for rec in (case_recommendation(lb), cost_recommendation(lb)):
            if rec:
                out.append(rec)
    out += axis_recommendations(comps)
    late_by_fio = [lb.case for lb in boards if lb.metric == "mibs" and lb.reason == "chosen with --rank-by"]
    if timing_issues and late_by_fio:
        out.append(
            Recommendation(
                "method",
                "Some runs finished late (timing issue) but fio's MiB/s ranks: rerun "
                "the report without --rank-by (auto ranks those cases by durable MiB/s) or with "
                "`--rank-by durable_mibs`.",
                (),
            )
        )
    return tuple(out)


# -- workload mix ------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class MixEntry:
    """One configuration's expected performance for the declared mix."""

    config: str
    expected: float | None
    parts: tuple[tuple[str, float, float | None, str], ...]  # case, weight, value, test id
    missing: tuple[str, ...]


@dataclass(frozen=True)
class MixAdvice:
    metric: str
    weights: tuple[tuple[str, float], ...]
    entries: tuple[MixEntry, ...]
    unknown_cases: tuple[str, ...]
    formula: str


def _expected(parts: Sequence[tuple[float, float]], higher: bool) -> float | None:
    if not parts or any(v <= 0 for _, v in parts):
        return None
    if higher:  # time to move w_i of the bytes at T_i each: a weighted harmonic mean
        return 1.0 / sum(w / v for w, v in parts)
    return sum(w * v for w, v in parts)


def check_mix_cases(ds: Dataset, weights: Sequence[tuple[str, float]]) -> None:
    """UserError when a --mix names a test case the journal does not have."""
    unknown = [c for c, _ in weights if c not in ds.cases()]
    if unknown:
        raise UserError(
            f"--mix names test cases not in the journal: {', '.join(map(repr, unknown))}",
            f"test cases in this journal: {', '.join(ds.cases())}",
        )


def mix_advice(
    ds: Dataset, weights: Sequence[tuple[str, float]], key: str = "mibs", condemned: frozenset[str] = frozenset()
) -> MixAdvice:
    """Rank configurations by their expected performance under the weighted mix of test cases (tests with an
    error-level warning of their own count for no configuration)."""
    cases = ds.cases()
    unknown = tuple(c for c, _ in weights if c not in cases)
    configs: dict[str, dict[str, TestSummary]] = {}
    higher = bool(METRICS[key].higher_is_better)
    for case, _ in weights:
        for t in cases.get(case, []):
            v = t.mean(key)
            if (
                v is not None and t.id not in condemned
            ):  # a configuration is the storage setup; its best test of each case counts
                prev = configs.setdefault(t.storage_config, {}).get(case)
                pv = None if prev is None else prev.mean(key)
                if pv is None or (v > pv if higher else v < pv):
                    configs[t.storage_config][case] = t
    entries = []
    for config, found in configs.items():
        parts = tuple(
            (c, w, found[c].mean(key) if c in found else None, found[c].id if c in found else "") for c, w in weights
        )
        missing = tuple(c for c, _ in weights if c not in found)
        exp = None if missing else _expected([(w, v) for _, w, v, _ in parts if v is not None], higher)
        entries.append(MixEntry(config, exp, parts, missing))
    sign = -1.0 if higher else 1.0
    entries.sort(key=lambda e: (e.expected is None, sign * (e.expected or 0.0), len(e.missing), e.config))
    formula = (
        "expected = 1 / Σ(wᵢ / Tᵢ): the weighted harmonic mean, because a share wᵢ of the data moved at "
        "Tᵢ takes wᵢ/Tᵢ of the time"
        if higher
        else "expected = Σ wᵢ·Lᵢ: the weighted mean latency"
    )
    return MixAdvice(key, tuple(weights), tuple(entries), unknown, formula)


# -- goals ---------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class GoalResult:
    goal: Goal
    passing: tuple[tuple[TestSummary, float, bool], ...]  # test, mean, whole 95 % CI on the passing side
    failing: tuple[tuple[TestSummary, float], ...]
    not_measured: bool


def evaluate_goal(ds: Dataset, goal: Goal, condemned: frozenset[str] = frozenset()) -> GoalResult:
    """Which tests of the goal's case meet it (by mean), and whether their CI does too; a test with an error-level
    warning of its own is never named as meeting it. The goal's verdict is its claim's (analysis/claims.py)."""
    key = GOAL_METRICS[goal.metric]
    tests = ds.cases().get(goal.case, [])
    passing, failing = [], []
    for t in tests:
        s = t.stats.get(key)
        if s is None:
            continue
        if goal.met_by(s.mean) and t.id not in condemned:
            passing.append((t, s.mean, s.n >= 2 and goal.met_by(s.ci_low) and goal.met_by(s.ci_high)))
        else:
            failing.append((t, s.mean))
    sign = -1.0 if METRICS[key].higher_is_better else 1.0
    passing.sort(key=lambda p: sign * p[1])
    return GoalResult(goal, tuple(passing), tuple(failing), not (passing or failing))
