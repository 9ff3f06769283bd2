"""The refine step's choice (issue 29): per workload, the top factors of the screening's fit measured in full, every
other factor fixed at its best level; where a combination of the top factors cannot take a fixed level (an
[[exclude]] rule), the test of that combination the fit predicts best. Pure: the fit comes in, ids go out.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from tankbench.analysis.factorfit import Effect, Fit, effects, first_best
from tankbench.schedule.factors import Factor, Point, is_parent, level_of


@dataclass(frozen=True)
class WorkloadRefine:
    """One workload's refine: the factors measured in full, the fixed levels of the rest, the chosen tests and,
    for each chosen test that could not take every fixed level, why."""

    name: str
    top: tuple[str, ...]
    fixed: Mapping[str, str]
    chosen: tuple[str, ...]
    ranked: tuple[str, ...]
    notes: tuple[str, ...] = ()

    def as_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "top": list(self.top),
            "fixed": dict(self.fixed),
            "chosen": list(self.chosen),
            "ranked": list(self.ranked),
            "notes": list(self.notes),
        }


def top_factors(
    ranked: Sequence[Effect], factors: Sequence[Factor], points: Sequence[Point], k: int, tfac: str
) -> list[str]:
    """The k largest effects, skipping a factor that cannot vary once the factors it depends on are fixed at their
    best level (a zvol's volblocksize when the target is fixed at the dataset)."""
    best = {e.factor: e.best for e in ranked}
    order = [e.factor for e in ranked if e.estimated] + [e.factor for e in ranked if not e.estimated]
    top: list[str] = []
    for name in order:
        if len(top) == k:
            break
        trial = top + [name]
        pool = restrict(points, factors, trial, best, tfac)
        if len({level_of(p, name, tfac) for p in pool} - {None}) > 1:
            top = trial
    return top


def restrict(
    points: Sequence[Point], factors: Sequence[Factor], top: Sequence[str], best: Mapping[str, str], tfac: str
) -> list[Point]:
    """The tests left once every factor others depend on (the target) that is not a top factor is at its best."""
    parents = [f.name for f in factors if f.name not in top and is_parent(points, f, factors, tfac)]
    return [p for p in points if all(level_of(p, f, tfac) in (None, best.get(f)) for f in parents)]


def choose(name: str, fit: Fit, points: Sequence[Point], k: int) -> WorkloadRefine:
    """The refine tests of one workload from its screening fit ([[include]] points are not candidates)."""
    tfac = fit.coding.tfac
    factors = fit.coding.factors
    matrix = [p for p in points if not p.forced]
    ranked = effects(fit, matrix)
    best = {e.factor: e.best for e in ranked}
    top = top_factors(ranked, factors, matrix, k, tfac)
    fixed = {f.name: best[f.name] for f in factors if f.name not in top}
    groups: dict[tuple[str | None, ...], list[Point]] = {}
    for p in restrict(matrix, factors, top, best, tfac):
        groups.setdefault(tuple(level_of(p, f, tfac) for f in top), []).append(p)
    chosen: list[str] = []
    notes: list[str] = []
    for cell, group in groups.items():
        exact = [p for p in group if all(level_of(p, f, tfac) in (None, lv) for f, lv in fixed.items())]
        if exact:
            chosen += [p.id for p in exact]
            continue
        pick = first_best((p, fit.score(p)) for p in group)  # ties by rounding: the first in plan order
        chosen.append(pick.id)
        cell_s = ", ".join(f"{f}={lv}" for f, lv in zip(top, cell) if lv is not None)
        notes.append(
            f"{pick.name}: {cell_s} cannot take every fixed level (an [[exclude]] rule); the best predicted test of it"
        )
    return WorkloadRefine(name, tuple(top), fixed, tuple(chosen), tuple(e.factor for e in ranked), tuple(notes))
