"""Which factors matter, per workload, from a journal (issue 29): the design steps it ran (screening, refine) or,
without them, every test it measured; each workload's fit, its factors ranked by effect with their intervals, the
interactions the data support, what the design could not separate, how sure the ranking is, which tests were not
run and why, and the tests the fit predicts best that were not measured (marked as predicted, with intervals).

What the report's factor section renders (every exporter) and what `tankbench refine` chooses from.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from tankbench.analysis.factorfit import Effect, Fit, Interaction, effects, fit, ranking_certainty
from tankbench.journal.db import Journal, TestRow
from tankbench.model import Run
from tankbench.schedule.design import point_from_dict
from tankbench.schedule.factors import (
    WORKLOAD_AXES,
    Factor,
    Point,
    factors_of,
    group_workloads,
    level_of,
    point,
    target_factor,
    workload_name,
)
from tankbench.schedule.rules import observation

MIB = 1 << 20


@dataclass(frozen=True)
class Skipped:
    """A test of the matrix that was not measured, and why."""

    name: str
    reason: str


@dataclass(frozen=True)
class Predicted:
    """An unmeasured test the fit puts near the top: predicted MiB/s and its 95 % interval (never a winner)."""

    name: str
    mib_s: float
    low: float
    high: float


@dataclass(frozen=True)
class WorkloadFactors:
    """One workload's factor analysis."""

    name: str
    candidates: int
    measured: int
    runs: int
    df: int
    noise: float  # residual sd of log(throughput): ~ the run-to-run coefficient of variation
    effects: tuple[Effect, ...]
    certain: tuple[bool, ...]  # ranked[i] is larger than ranked[i+1] at 95 %
    interactions: tuple[Interaction, ...]
    aliases: tuple[str, ...]
    skipped: tuple[Skipped, ...]
    predicted: tuple[Predicted, ...]
    best_measured: str
    best_measured_mib_s: float
    steps: tuple[str, ...]
    note: str = ""
    refine: str = ""  # what the refine step measured in full and what it fixed

    def certainty(self) -> str:
        """How sure the ranking is, in a sentence."""
        if not self.effects:
            return "no ranking: the fit has no degrees of freedom"
        sure = [f"{a.factor} > {b.factor}" for a, b, c in zip(self.effects, self.effects[1:], self.certain) if c]
        sig = [e.factor for e in self.effects if e.significant]
        head = f"{len(sig)} of {len(self.effects)} factors have an effect at 95 % ({', '.join(sig) or 'none'})"
        order = (
            f"; separated at 95 %: {', '.join(sure)}"
            if sure
            else "; no neighbours in the ranking are separated at 95 %"
        )
        return head + order


@dataclass(frozen=True)
class FactorReport:
    """Every workload's factor analysis, the steps the journal ran and the response it fitted."""

    steps: tuple[str, ...]
    workloads: tuple[WorkloadFactors, ...]
    metric: str = "log of the ranking throughput (MiB/s; copy tests: durable) of every measured run"


def measured_values(runs: Iterable[Run]) -> dict[str, list[float]]:
    """Test id -> the ranking values of its measured runs that are done."""
    out: dict[str, list[float]] = {}
    for r in runs:
        o = observation(r)
        if not r.warmup and o.value is not None and o.value > 0:
            out.setdefault(r.test_id, []).append(o.value)
    return out


def workload_candidates(
    steps: Sequence[Mapping[str, Any]], tests: Sequence[TestRow]
) -> list[tuple[str, list[Point], Mapping[str, Any]]]:
    """(name, candidate tests, the screening's record of it) per workload: from the first screening step, else
    every test the journal knows, grouped by the test case's axes."""
    screen = next((s for s in steps if s["step"] == "screening"), None)
    if screen is not None:
        return [(w["name"], [point_from_dict(c) for c in w["candidates"]], w) for w in screen["data"]["workloads"]]
    pts = [point(t) for t in tests]
    return [(workload_name(k, ps), ps, {}) for k, ps in group_workloads(pts, WORKLOAD_AXES).items()]


def factor_report(journal: Journal) -> FactorReport | None:
    """The factor analysis of a journal; None when no workload has two factors to rank."""
    steps = journal.design_steps()
    values = measured_values(journal.runs(with_samples=False))
    out = []
    for name, points, record in workload_candidates(steps, journal.tests()):
        w = analyse_workload(name, points, values, record, steps)
        if w is not None:
            out.append(w)
    if not out:
        return None
    return FactorReport(tuple(dict.fromkeys(s["step"] for s in steps)) or ("exhaustive",), tuple(out))


def workload_fit(
    points: Sequence[Point], values: Mapping[str, Sequence[float]], record: Mapping[str, Any]
) -> tuple[Fit | None, list[Factor], str]:
    """The fit of one workload's measured tests, its factors and the target factor's name."""
    tfac = target_factor(points)
    matrix = [p for p in points if not p.forced]
    if record.get("factors"):
        factors = [Factor(f["name"], tuple(f["levels"]), bool(f["storage"])) for f in record["factors"]]
    else:
        factors = factors_of(matrix, WORKLOAD_AXES, tfac)
    if len(factors) < 2:
        return None, factors, tfac
    return fit(matrix, values, factors, tfac), factors, tfac


def analyse_workload(
    name: str,
    points: list[Point],
    values: Mapping[str, Sequence[float]],
    record: Mapping[str, Any],
    steps: Sequence[Mapping[str, Any]],
) -> WorkloadFactors | None:
    f, factors, tfac = workload_fit(points, values, record)
    if len(factors) < 2:
        return None
    matrix = [p for p in points if not p.forced]
    measured = [p for p in points if values.get(p.id)]
    ranked = effects(f, matrix) if f is not None else []
    best = max(measured, key=lambda p: _gmean(values[p.id]), default=None)
    return WorkloadFactors(
        name=name,
        candidates=len(points),
        measured=len(measured),
        runs=sum(len(values.get(p.id, ())) for p in points),
        df=f.df if f else 0,
        noise=f.sigma if f else math.nan,
        effects=tuple(ranked),
        certain=tuple(ranking_certainty(f, ranked, matrix)) if f else (),
        interactions=tuple(f.interactions) if f else (),
        aliases=tuple(_aliases(record)),
        skipped=tuple(skipped(points, values, steps, name, tfac)),
        predicted=tuple(_predicted(f, matrix, values, best, values.get(best.id, ()) if best else ())) if f else (),
        best_measured=best.name if best else "",
        best_measured_mib_s=_gmean(values[best.id]) / MIB if best else 0.0,
        steps=tuple(dict.fromkeys(s["step"] for s in steps)) or ("exhaustive",),
        note="" if f else "too few measured tests for a fit with an interval (the main effects need one more)",
        refine=_refine_note(name, steps),
    )


def _refine_note(name: str, steps: Sequence[Mapping[str, Any]]) -> str:
    """What the refine step did for this workload, in a sentence ("" without one)."""
    w = next((w for s in steps if s["step"] == "refine" for w in s["data"]["workloads"] if w["name"] == name), None)
    if w is None:
        return ""
    fixed = ", ".join(f"{k}={v}" for k, v in w["fixed"].items()) or "nothing"
    notes = "".join(f" {n}." for n in w.get("notes", ()))
    return (
        f"refine measured {', '.join(w['top']) or 'nothing'} in full ({len(w['chosen'])} tests), fixed {fixed}.{notes}"
    )


def _gmean(vals: Sequence[float]) -> float:
    return math.exp(sum(math.log(v) for v in vals) / len(vals)) if vals else 0.0


def _aliases(record: Mapping[str, Any]) -> list[str]:
    out = []
    for a in record.get("aliases", []):
        if not a["in_matrix"]:
            out.append(
                f"{a['a']} × {a['b']}: not separable in the matrix itself (nested, or its combinations excluded)"
            )
        else:
            conf = f" (confused with {', '.join(a['confused_with'])})" if a["confused_with"] else ""
            out.append(f"{a['a']} × {a['b']}: aliased in the screening's tests{conf}")
    return out


def skipped(
    points: Sequence[Point],
    values: Mapping[str, Sequence[float]],
    steps: Sequence[Mapping[str, Any]],
    name: str,
    tfac: str,
) -> list[Skipped]:
    """Every candidate without a measured run, with the step that left it out."""
    refine = next(
        (w for s in steps if s["step"] == "refine" for w in s["data"]["workloads"] if w["name"] == name), None
    )
    chosen = {i for s in steps for w in s["data"]["workloads"] if w["name"] == name for i in w["chosen"]}
    out = []
    for p in points:
        if values.get(p.id):
            continue
        if p.id in chosen:
            out.append(Skipped(p.name, "chosen, but no run measured it (failed, crashed or not run yet)"))
        elif refine is not None:
            off = [f"{f}={lv}" for f, lv in refine["fixed"].items() if level_of(p, f, tfac) not in (None, lv)]
            why = f"refine fixed {', '.join(off)}" if off else "refine chose another test of its cell"
            out.append(Skipped(p.name, f"not in the screening design; {why}"))
        elif steps:
            out.append(
                Skipped(p.name, "not in the screening design (its effects are estimated from the tests that are)")
            )
        else:
            out.append(Skipped(p.name, "not measured"))
    return out


def _predicted(
    f: Fit,
    matrix: Sequence[Point],
    values: Mapping[str, Sequence[float]],
    best: Point | None,
    best_vals: Sequence[float],
) -> list[Predicted]:
    """Unmeasured tests whose predicted interval reaches the best measured test's value (at most 5, best first):
    the tests a refine has not settled."""
    bar = _gmean(best_vals) if best is not None else 0.0
    preds = [(p, f.predict(p)) for p in matrix if not values.get(p.id)]
    near = sorted((x for x in preds if x[1].high >= bar), key=lambda x: -x[1].value)[:5]
    return [Predicted(p.name, pr.value / MIB, pr.low / MIB, pr.high / MIB) for p, pr in near]
