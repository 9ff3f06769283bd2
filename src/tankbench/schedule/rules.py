"""The stopping rule, the race and the decisions they journal: pure functions of measured values."""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from tankbench.analysis.stats import summarise, t_quantile
from tankbench.metrics import Times, run_values
from tankbench.model import Run

#: statuses that finish a planned run (a crashed run is retried once, like before)
FINISHED = ("done", "failed", "timeout")
#: the value a race and the stopping rule look at, in order of preference (same bs within a test case, so
#: bandwidth ranks exactly like IOPS); copy tests rank by durable bandwidth
VALUE_KEYS = ("total.bw_bytes", "copy.durable_bw_bytes")


@dataclass(frozen=True)
class Observation:
    """One journalled run as the scheduler sees it: its ranking value, and (for claims, repeats.decide) the run's
    raw metrics and clock, from which any registry figure is computed."""

    run_no: int
    warmup: bool
    status: str
    value: float | None = None
    raw: Mapping[str, float] = field(default_factory=dict)
    wall_s: float | None = None
    expected_s: float = 0.0
    drain_s: float | None = None

    def figure(self, key: str, ramp_s: float) -> float | None:
        """A registry metric of this run (tankbench.metrics), None when it does not apply or was not measured."""
        if self.status != "done" or not self.raw:
            return None
        return run_values(self.raw, Times(self.wall_s, self.expected_s, ramp_s, self.drain_s), (key,)).get(key)


def observation(run: Run) -> Observation:
    """The scheduler's view of a journalled Run (its ranking value when it is done)."""
    value = None
    if run.status == "done":
        value = next((float(run.metrics[k]) for k in VALUE_KEYS if k in run.metrics), None)
    raw = run.metrics if run.status == "done" else {}
    return Observation(run.run_no, run.warmup, run.status, value, raw, run.wall_s, run.expected_s, run.drain_s)


@dataclass(frozen=True)
class StopCheck:
    """Whether a test needs more repeats, with the numbers that decided it."""

    stop: bool
    reason: str  # "ci", "max", "fixed" when stopping; "" when more repeats are needed
    n: int
    mean: float | None = None
    half_width: float | None = None
    target: float | None = None


def ci_half_width(values: Sequence[float]) -> float | None:
    """Half width of the 95 % confidence interval of the mean (Student t); None with fewer than 2 values."""
    if len(values) < 2:
        return None
    s = summarise(values)
    assert s is not None
    return t_quantile(0.975, len(values) - 1) * s.sd / math.sqrt(len(values))


def stop_rule(values: Sequence[float], runs: int, rmin: int, rmax: int, ci: float | None) -> StopCheck:
    """Stop at `rmax` runs, or after at least `rmin` once the 95 % CI half width is within `ci` x |mean|.

    `runs` counts finished measured runs (a failed run uses up budget but gives no value)."""
    s = summarise(values)
    mean = s.mean if s else None
    half = ci_half_width(values)
    target = ci * abs(mean) if ci is not None and mean is not None else None
    if runs >= rmax:
        return StopCheck(True, "max" if ci is not None else "fixed", runs, mean, half, target)
    if ci is None or runs < rmin or half is None or target is None:
        return StopCheck(False, "", runs, mean, half, target)
    return StopCheck(half <= target, "ci" if half <= target else "", runs, mean, half, target)


@dataclass(frozen=True)
class Bounds:
    """Mean and 95 % confidence bounds of one test's measured values."""

    test_id: str
    n: int
    mean: float
    low: float
    high: float


def bounds(test_id: str, values: Sequence[float]) -> Bounds | None:
    """Confidence bounds of the mean; None with fewer than 2 values (no interval yet)."""
    half = ci_half_width(values)
    if half is None:
        return None
    mean = math.fsum(values) / len(values)
    return Bounds(test_id, len(values), mean, mean - half, mean + half)


@dataclass(frozen=True)
class RaceDrop:
    """A test a race drops: its upper bound is below the leader's lower bound by more than the margin."""

    test_id: str
    leader_id: str
    evidence: Mapping[str, float]


def race(values: Mapping[str, Sequence[float]], candidates: Iterable[str], margin: float, min_n: int) -> list[RaceDrop]:
    """Inside one test case (higher is better): drop each candidate with at least `min_n` values whose
    upper 95 % bound < leader's lower bound x (1 - margin). The leader is the highest mean with an interval."""
    bs = {tid: b for tid, v in values.items() if (b := bounds(tid, v)) is not None}
    if not bs:
        return []
    leader = max(bs.values(), key=lambda b: (b.mean, b.test_id))
    bar = leader.low * (1.0 - margin)
    out = []
    for tid in candidates:
        b = bs.get(tid)
        if b is None or tid == leader.test_id or b.n < min_n or b.high >= bar:
            continue
        out.append(
            RaceDrop(
                tid,
                leader.test_id,
                {
                    "n": b.n,
                    "mean": b.mean,
                    "ci_high": b.high,
                    "leader_n": leader.n,
                    "leader_mean": leader.mean,
                    "leader_ci_low": leader.low,
                    "margin": margin,
                    "bar": bar,
                },
            )
        )
    return out


@dataclass(frozen=True)
class Decision:
    """An adaptive decision about one test, for the journal and the report: nothing is decided silently.

    kind: "stop" (CI within target), "max" (max repeats reached without it), "drop" (a race dropped it),
    "settled" (its place in its test case is settled: repeats.settle), "reopened" (a settled place in doubt again),
    "skip" (crashed its host more than campaign.crash_retries times)."""

    test_id: str
    kind: str
    after_runs: int
    round_no: int
    reason: str
    evidence: Mapping[str, Any] = field(default_factory=dict)

    def as_checks(self) -> dict[str, Any]:
        """Flat `schedule.*` keys, e.g. for the checks of the test's last run."""
        out: dict[str, Any] = {
            "schedule.decision": self.kind,
            "schedule.after_runs": self.after_runs,
            "schedule.round": self.round_no,
            "schedule.reason": self.reason,
        }
        out.update({f"schedule.{k}": v for k, v in self.evidence.items()})
        return out


def _rel(half: float | None, mean: float | None) -> str:
    """A CI half width as a percentage of the mean ("n/a" without an interval)."""
    if half is None or not mean:
        return "n/a"
    return f"±{half / abs(mean):.1%}"


def stop_decision(test_id: str, check: StopCheck, round_no: int, ci: float | None) -> Decision:
    """The decision a stopping check that said stop makes, with its evidence and a sentence for people."""
    ev: dict[str, Any] = {"n": check.n, "mean": check.mean, "ci_half_width": check.half_width}
    if check.reason == "ci":
        ev["ci_target"] = check.target
        text = (
            f"95 % CI of the mean {_rel(check.half_width, check.mean)} is within the target ±{ci:.1%} "
            f"after {check.n} runs"
        )
        return Decision(test_id, "stop", check.n, round_no, text, ev)
    if check.reason == "max":
        ev["ci_target"] = check.target
        text = (
            f"max repeats ({check.n}) reached with the 95 % CI of the mean at "
            f"{_rel(check.half_width, check.mean)}, target ±{ci:.1%}"
        )
        return Decision(test_id, "max", check.n, round_no, text, ev)
    return Decision(test_id, "max", check.n, round_no, f"all {check.n} planned repeats done", ev)


# ------------------------------------------------------------------ repeat where the order is in doubt
#: the run-to-run coefficient of variation assumed until two tests have two runs each (then it is learned)
PRIOR_CV = 0.03
#: a test whose own run-to-run noise is more than this many times the campaign's is an outlier: it is judged by
#: its own noise, and its contribution to the campaign's pooled noise is capped there (one wild run must not
#: widen every other test's interval and reopen places all over the campaign)
OUTLIER_CV = 5.0


def _cv(vs: Sequence[float]) -> float | None:
    s = summarise(vs)
    return s.sd / abs(s.mean) if s is not None and s.mean and len(vs) >= 2 else None


def pooled_cv(values: Mapping[str, Sequence[float]]) -> tuple[float, int] | None:
    """Run-to-run coefficient of variation pooled over every test with 2+ values, and its degrees of freedom
    (None before there are any): tests of one campaign share a host, so one noise level fits them all. Each
    test's share is capped at OUTLIER_CV x the median test's cv, so one noisy test does not set the level for
    all (it keeps its own, larger noise in `places`)."""
    per = [(len(vs) - 1, cv) for vs in values.values() if (cv := _cv(vs)) is not None]
    if not per:
        return None
    ranked = sorted(cv for _, cv in per)
    mid = len(ranked) // 2
    median = ranked[mid] if len(ranked) % 2 else (ranked[mid - 1] + ranked[mid]) / 2
    cap = OUTLIER_CV * median
    df = sum(d for d, _ in per)
    return math.sqrt(math.fsum(d * min(cv, cap) ** 2 for d, cv in per) / df), df


@dataclass(frozen=True)
class Place:
    """Whether a test's place in its test case is settled, with the numbers that decided it."""

    test_id: str
    settled: bool
    evidence: Mapping[str, Any]


def places(
    values: Mapping[str, Sequence[float]],
    candidates: Iterable[str],
    margin: float,
    cv: tuple[float, int] | None,
    level: float = 0.95,
) -> list[Place]:
    """For each candidate of one test case (higher is better): settled when, against each neighbour in the
    ranking, the 95 % interval of their difference (means' difference ± t x the two half widths combined, a
    half width being t x cv x |mean| / sqrt(n), cv pooled over the campaign, PRIOR_CV before it is known; a
    test noisier than OUTLIER_CV x that: its own) reaches past zero, into the other order, by no more than
    `margin` x the larger mean (for the two leaders: not at all, the winner is separated), or the two are a
    tie (intervals at `level`: repeats.decide passes its sequential test's nominal level): that interval lies
    within ± `margin` x the larger mean, so more runs could not order them by more than the margin (`tied_with`
    names such neighbours). `worst_overlap`: the farthest reach into the other order, as a fraction of the larger
    mean."""
    noise, df = cv if cv is not None else (PRIOR_CV, 0)
    z = t_quantile(1 - (1 - level) / 2, df if df else math.inf)
    stats = {tid: _interval(vs, z, noise) for tid, vs in values.items() if vs}
    ranked = sorted(stats, key=lambda t: (-stats[t][0], t))
    out = []
    for tid in candidates:
        if tid not in stats:
            continue
        i = ranked.index(tid)
        mean, low, high, n, test_cv = stats[tid]
        settled, worst, tied = _against_neighbours(stats, ranked, i, margin)
        ev: dict[str, Any] = {
            "n": n,
            "mean": mean,
            "ci_low": low,
            "ci_high": high,
            "rank": i + 1,
            "cv": test_cv,
            "cv_df": df,
            "worst_overlap": worst,
            "margin": margin,
        }
        if test_cv != noise:
            ev["cv_campaign"] = noise  # an outlier: judged by its own noise
        if tied:
            ev["tied_with"] = tied
        out.append(Place(tid, settled, ev))
    return out


def _interval(vs: Sequence[float], z: float, noise: float) -> tuple[float, float, float, int, float]:
    """(mean, low, high, n, cv) of one test: a half width of z x cv x |mean| / sqrt(n), cv the campaign's unless the
    test is an outlier (noisier than OUTLIER_CV x it: its own)."""
    mean = math.fsum(vs) / len(vs)
    own = _cv(vs)
    test_cv = own if own is not None and own > OUTLIER_CV * noise else noise
    half = z * test_cv * abs(mean) / math.sqrt(len(vs))
    return mean, mean - half, mean + half, len(vs), test_cv


def _against_neighbours(
    stats: Mapping[str, tuple[float, float, float, int, float]], ranked: list[str], i: int, margin: float
) -> tuple[bool, float, list[str]]:
    """(settled, worst overlap, tied neighbours) of the i-th ranked test against the tests above and below it."""
    mean, _, high, _, _ = stats[ranked[i]]
    worst = 0.0
    settled = True
    tied: list[str] = []
    for j in (i - 1, i + 1):
        if not 0 <= j < len(ranked):
            continue
        m2, _, hi2, _, _ = stats[ranked[j]]
        scale = max(abs(mean), abs(m2), 1e-300)
        diff, half = abs(mean - m2), math.hypot(high - mean, hi2 - m2)
        reach = half - diff  # how far the difference's interval reaches into the other order
        allowed = 0.0 if max(i, j) <= 1 else margin * scale
        worst = max(worst, reach / scale)
        if reach <= allowed:
            continue
        if diff + half <= margin * scale:  # a tie: the whole interval of the difference inside the margin
            tied.append(ranked[j])
            continue
        settled = False
    return settled, worst, tied
