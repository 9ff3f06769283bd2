"""A claim's verdict from its tests' measured values (pure): holds, does not hold or undecided, with the ratio and its
interval over the matched pairs. The analysis (reports, `check`) and the scheduler's stopping rule (schedule/decide.py)
both judge with it, so a campaign stops on the verdict the report then shows.

How (docs/claims.md; Kalibera and Jones, "Rigorous benchmarking in reasonable time", ISMM 2013, treat ratios of
benchmark means and their intervals the same way):
- one pair (a test of the first level against one of the second): the ratio of the two means, its interval on the
  log scale (delta method: each test's log mean has variance cv²/n; Welch–Satterthwaite degrees of freedom) — the
  leaderboard's interval. Not Fieller's: a throughput's mean is positive, yet Fieller's interval (normal scale) is
  unbounded whenever the second mean is not significantly above zero — with 3 runs, at a run-to-run cv of about
  40 % — and a 247× ratio stayed "undecided [0–∞]" against "> 1x" (seed 004 in CI);
- several pairs: the geometric mean of the pairs' ratios, its interval on the log scale (the same delta method); the
  pairs are fixed — the claim is about these tests on this machine;
- a test with one run borrows the run-to-run noise pooled over the claim's tests that have two or more;
- a claim without a compared axis (a [[goal]]) puts each covered test's Student-t interval of the mean against the
  constant: it holds when some test meets it with its whole interval, and does not when none can.
The verdict is where the whole interval lies; pairs that decide the other way on their own are named.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

from tankbench.analysis.stats import Noise, log_ratio, noise, pooled_cv, t_quantile
from tankbench.campaign.claims import Claim, Expect
from tankbench.metrics import METRICS

HOLDS, FAILS, UNDECIDED = "holds", "does not hold", "undecided"
VERDICTS = (HOLDS, FAILS, UNDECIDED)
LEVEL = 0.95


@dataclass(frozen=True)
class TestValues:
    """A covered test as the judge sees it: its id, its number (for people) and its measured values of the metric."""

    id: str
    number: int
    values: tuple[float, ...]


@dataclass(frozen=True)
class Pair:
    """One matched pair (test ids and numbers) with the ratio of its means and that ratio's own interval."""

    first: str
    second: str
    first_no: int
    second_no: int
    ratio: float | None
    low: float | None
    high: float | None


@dataclass(frozen=True)
class Verdict:
    """A claim's verdict — a plain value, serialisable (as_dict / from_dict), so a bundle carries it elsewhere."""

    name: str
    source: str  # "claim" or "goal": the table it was written in
    claim: str  # the claim in one line
    metric: str
    expect: str
    verdict: str  # holds | does not hold | undecided
    ratio: float | None = None  # first/second level (relative), the best test's value/constant (absolute)
    low: float | None = None
    high: float | None = None
    level: float = LEVEL
    method: str = ""
    tests: tuple[str, ...] = ()  # the ids of the tests it was judged on
    runs: int = 0  # measured runs behind it
    pairs: tuple[Pair, ...] = ()
    weakened_by: tuple[str, ...] = ()  # warnings of its own tests, error-level first
    notes: tuple[str, ...] = ()  # pairs that disagree, tests that meet a goal, tests not measured
    needs: str = ""  # undecided: what more it would take

    @property
    def decided(self) -> bool:
        return self.verdict != UNDECIDED

    def interval_text(self) -> str:
        """ "12.1× [8.0–18.3]", or "not measured"."""
        if self.ratio is None:
            return "not measured"
        iv = (
            f" [{fmt_ratio(self.low)}–{fmt_ratio(self.high)}]" if self.low is not None and self.high is not None else ""
        )
        return f"{fmt_ratio(self.ratio)}×{iv}"

    def sentence(self) -> str:
        """What `check` prints per claim: "holds on this machine: 12.1× [8.0–18.3]"."""
        if self.verdict == UNDECIDED:
            return f"undecided: {self.interval_text()}" + (f"; needs {self.needs}" if self.needs else "")
        return f"{self.verdict} on this machine: {self.interval_text()}"

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)

    @staticmethod
    def from_dict(d: Mapping[str, Any]) -> Verdict:
        fields = dict(d)
        fields["pairs"] = tuple(Pair(**p) for p in fields.get("pairs", ()))
        for k in ("tests", "weakened_by", "notes"):
            fields[k] = tuple(fields.get(k, ()))
        if fields.get("verdict") not in VERDICTS:
            raise ValueError(f"not a verdict: {fields.get('verdict')!r}")
        return Verdict(**fields)


def fmt_ratio(x: float | None) -> str:
    """A ratio with three significant digits ("∞" for an unbounded interval's end)."""
    if x is None or not math.isfinite(x):
        return "∞"
    return f"{x:.3g}" if abs(x) < 1000 else f"{x:.0f}"


def decide(expect: Expect, low: float, high: float) -> str:
    """holds / does not hold / undecided: where the whole interval lies against the expectation."""
    if expect.op == "within":
        lo, hi = expect.bounds()
        if low >= lo and high <= hi:
            return HOLDS
        return FAILS if high < lo or low > hi else UNDECIDED
    v = expect.value
    if expect.op in (">=", ">"):
        ok, bad = (low >= v, high < v) if expect.op == ">=" else (low > v, high <= v)
    else:
        ok, bad = (high <= v, low > v) if expect.op == "<=" else (high < v, low >= v)
    return HOLDS if ok else FAILS if bad else UNDECIDED


@dataclass
class Judged:
    """What judging found, before the analysis adds the tests' warnings."""

    verdict: str = UNDECIDED
    ratio: float | None = None
    low: float | None = None
    high: float | None = None
    method: str = ""
    pairs: list[Pair] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    needs: str = ""


def judge_pairs(expect: Expect, matched: Sequence[tuple[TestValues, TestValues]], level: float = LEVEL) -> Judged:
    """A relative claim over its matched pairs (a test may be in several)."""
    j = Judged()
    tests = {t.id: t for p in matched for t in p}
    pooled = pooled_cv([t.values for t in tests.values()])
    usable: list[tuple[TestValues, TestValues, Noise, Noise]] = []
    for a, b in matched:
        na, nb = noise(a.values, pooled), noise(b.values, pooled)
        ma, mb = _mean(a.values), _mean(b.values)
        if ma is None or mb is None:
            j.notes.append(f"#{a.number} vs #{b.number}: not measured yet")
        elif ma <= 0 or mb <= 0:
            j.notes.append(f"#{a.number} vs #{b.number}: a mean of 0, no ratio")
        elif na is None or nb is None:
            j.pairs.append(Pair(a.id, b.id, a.number, b.number, ma / mb, None, None))
        else:
            usable.append((a, b, na, nb))
            _, lo, hi, _ = log_ratio([(1.0, na), (-1.0, nb)], level)
            j.pairs.append(Pair(a.id, b.id, a.number, b.number, ma / mb, lo, hi))
    if not usable:
        measured = any(p.ratio is not None for p in j.pairs)
        j.needs = "a second run of each test, to measure the run-to-run noise" if measured else "runs of its tests"
        return j
    j.ratio, j.low, j.high, df = log_ratio(_coefficients(usable), level)  # one pair: its ratio of means
    what = "ratio of the two means" if len(usable) == 1 else f"geometric mean of {len(usable)} pairs' ratios"
    j.method = f"{what}, log-scale interval, {level:.0%}, {df:.1f} df"
    if len(usable) < len(matched):
        j.notes.append(f"{len(usable)} of {len(matched)} pairs measured")
    j.verdict = decide(expect, j.low, j.high)
    j.notes += disagreeing(expect, j)
    if j.verdict == UNDECIDED:
        j.needs = needs(expect, j.ratio, j.low, j.high, min(len(t.values) for t in tests.values()))
    return j


def _mean(values: Sequence[float]) -> float | None:
    return math.fsum(values) / len(values) if values else None


def _coefficients(usable: Sequence[tuple[TestValues, TestValues, Noise, Noise]]) -> list[tuple[float, Noise]]:
    """The mean of the pairs' log ratios as Σ c·ln(test mean): a test in several pairs adds its share each time."""
    coef: dict[str, tuple[float, Noise]] = {}
    k = len(usable)
    for a, b, na, nb in usable:
        coef[a.id] = (coef.get(a.id, (0.0, na))[0] + 1 / k, na)
        coef[b.id] = (coef.get(b.id, (0.0, nb))[0] - 1 / k, nb)
    return list(coef.values())


def disagreeing(expect: Expect, j: Judged) -> list[str]:
    """Pairs whose own interval decides the other way than the claim as a whole."""
    out = []
    for p in j.pairs:
        if p.low is None or p.high is None or p.ratio is None:
            continue
        own = decide(expect, p.low, p.high)
        if own not in (UNDECIDED, j.verdict):
            iv = f"{fmt_ratio(p.ratio)}× [{fmt_ratio(p.low)}–{fmt_ratio(p.high)}]"
            out.append(f"{own} for #{p.first_no} vs #{p.second_no} alone: {iv}")
    return out


def needs(expect: Expect, ratio: float, low: float, high: float, n: int) -> str:
    """What an undecided claim would need: the runs per test at which its interval (narrowing as 1/√n) would clear
    the expectation, if the ratio stays where it is."""
    edges = list(expect.bounds()) if expect.op == "within" else [expect.value]
    d = min(abs(math.log(ratio) - math.log(e)) for e in edges if e > 0)
    half = max(math.log(high / ratio), math.log(ratio / low))  # log-scale intervals: 0 < low <= ratio <= high < inf
    if d < 1e-9:
        return "a difference away from the expected value: the ratio sits on it, so more runs cannot decide"
    want = max(n + 1, math.ceil(n * (half / d) ** 2))
    return f"about {want} runs of each of its tests (now {n}), if the ratio stays at {fmt_ratio(ratio)}×"


def judge_constant(expect: Expect, metric: str, tests: Sequence[TestValues], level: float = LEVEL) -> Judged:
    """Against a constant: each test's interval of its mean; holds when one meets it wholly, fails when none can."""
    j = Judged()
    pooled = pooled_cv([t.values for t in tests])
    found: list[tuple[str, TestValues, float, float, float]] = []
    for t in tests:
        nz = noise(t.values, pooled)
        if nz is None:
            continue
        half = t_quantile(1 - (1 - level) / 2, nz.df) * math.sqrt(nz.var_log) * nz.mean
        lo, hi = nz.mean - half, nz.mean + half
        if METRICS[metric].group != "timing":  # a throughput, a latency, a count: never below zero
            lo = max(lo, 0.0)
        found.append((decide(expect, lo, hi), t, nz.mean, lo, hi))
    if not found:
        measured = any(t.values for t in tests)
        j.needs = "a second run of each test, to measure the run-to-run noise" if measured else "runs of its tests"
        return j
    higher = METRICS[metric].higher_is_better is not False
    rank = {HOLDS: 0, UNDECIDED: 1, FAILS: 2}
    verdict, best, mean, lo, hi = min(found, key=lambda x: (rank[x[0]], -x[2] if higher else x[2], x[1].number))
    v = expect.value
    if v:
        j.ratio, j.low, j.high = mean / v, lo / v, hi / v
    j.method = f"Student-t interval of each test's mean, {level:.0%}; the best test shown (#{best.number})"
    j.verdict = HOLDS if verdict == HOLDS else FAILS if all(x[0] == FAILS for x in found) else UNDECIDED
    j.notes = [f"met by #{x[1].number} ({x[2]:.4g})" for x in found if x[0] == HOLDS]
    if j.verdict == UNDECIDED:
        crossing = [f"#{x[1].number}" for x in found if x[0] == UNDECIDED]
        j.needs = f"more runs of {', '.join(crossing)}: their intervals cross {v:g} {METRICS[metric].unit}".rstrip()
    return j


def verdict_of(
    claim: Claim, j: Judged, tests: Sequence[TestValues], weakened_by: Sequence[str] = (), level: float = LEVEL
) -> Verdict:
    """The Verdict value of a judged claim."""
    unit = "" if claim.relative else METRICS[claim.metric].unit
    return Verdict(
        claim.name,
        claim.source,
        claim.text,
        claim.metric,
        f"{claim.expect.text} {unit}".strip() if unit and not claim.expect.text.endswith(unit) else claim.expect.text,
        j.verdict,
        j.ratio,
        j.low,
        j.high,
        level,
        j.method,
        tuple(t.id for t in tests),
        sum(len(t.values) for t in tests),
        tuple(j.pairs),
        tuple(weakened_by),
        tuple(j.notes),
        j.needs,
    )
