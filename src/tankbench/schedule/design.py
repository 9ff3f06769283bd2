"""Designs: which of a campaign's tests a step runs (issue 29, docs/schedule.md "Designs").

- `exhaustive`: every test of the matrix (the default);
- `screening`: per workload, a D-optimal fraction of its tests over its factors (schedule/doptimal.py), chosen
  from the campaign's own valid tests, so [[exclude]] rules hold; [[include]] points always run;
- `refine`: the tests `tankbench refine` chose after a screening (the top factors in full, the rest at their best
  level); the choice is journalled with the step, so the campaign text does not carry it.

A screening step runs each chosen test `repeats.min` times and no more: the adaptive rules decide places in a
leaderboard, and a screening's tests are not one (the fit's residuals are its noise). The refine step runs with the
campaign's own repeats.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from tankbench.campaign.schema import Design, Schedule, Spec
from tankbench.errors import UserError
from tankbench.model import Test
from tankbench.schedule import doptimal
from tankbench.schedule.factors import (
    Coding,
    Column,
    Factor,
    Point,
    coding,
    factors_of,
    group_workloads,
    is_parent,
    level_of,
    point,
    target_factor,
    workload_name,
)


@dataclass(frozen=True)
class Alias:
    """An interaction of two factors the chosen tests cannot estimate beside the main effects."""

    a: str
    b: str
    in_matrix: bool  # False: the matrix itself has no tests that separate it (excluded or nested combinations)
    confused_with: tuple[str, ...]  # main-effect columns it is confused with in the chosen tests

    def describe(self) -> str:
        if not self.in_matrix:
            return (
                f"{self.a} × {self.b}: not separable even in the full matrix (its combinations are excluded or nested)"
            )
        with_ = f" (confused with {', '.join(self.confused_with)})" if self.confused_with else ""
        return f"{self.a} × {self.b}: aliased in the chosen tests{with_}"


@dataclass(frozen=True)
class WorkloadDesign:
    """One workload's screening: its candidate tests, the factors, the chosen tests and what they cannot tell."""

    name: str
    key: tuple[tuple[str, str], ...]
    factors: tuple[Factor, ...]
    candidates: tuple[Point, ...]
    chosen: tuple[str, ...]  # test ids
    parameters: int  # main-effect model size (intercept included)
    d_efficiency: float
    aliases: tuple[Alias, ...]
    dropped: tuple[str, ...]  # main-effect columns the matrix itself cannot separate
    note: str = ""

    def as_dict(self) -> dict[str, Any]:
        """What the journal keeps of this workload's design (the report reads it back)."""
        return {
            "name": self.name,
            "key": [list(kv) for kv in self.key],
            "factors": [{"name": f.name, "levels": list(f.levels), "storage": f.storage} for f in self.factors],
            "candidates": [point_dict(p) for p in self.candidates],
            "chosen": list(self.chosen),
            "parameters": self.parameters,
            "d_efficiency": round(self.d_efficiency, 4),
            "aliases": [
                {"a": a.a, "b": a.b, "in_matrix": a.in_matrix, "confused_with": list(a.confused_with)}
                for a in self.aliases
            ],
            "dropped": list(self.dropped),
            "note": self.note,
        }


def point_dict(p: Point) -> dict[str, Any]:
    """A candidate test as the journal keeps it (enough to fit and name it without the campaign file)."""
    return {
        "id": p.id,
        "number": p.number,
        "name": p.name,
        "target": p.target,
        "kind": p.kind,
        "params": dict(p.params),
        "forced": p.forced,
    }


def point_from_dict(d: dict[str, Any]) -> Point:
    return Point(d["id"], int(d["number"]), d["name"], d["target"], d["kind"], dict(d["params"]), bool(d["forced"]))


def step_schedule(design: Design, schedule: Schedule) -> Schedule:
    """The schedule a step runs with: a screening runs each chosen test repeats.min times, nothing adaptive."""
    if design.step != "screening":
        return schedule
    n = schedule.repeats_min
    return replace(schedule, repeats_min=n, repeats_max=n, ci=None, settle=None, racing=False)


def design_size(parameters: int, candidates: int, runs: int) -> int:
    """Tests per workload: `runs` when the campaign sets it, else the parameters plus a quarter of them (at least
    3 more: residual degrees of freedom for the intervals and room for interactions)."""
    n = runs if runs else parameters + max(3, math.ceil(parameters / 4))
    return min(candidates, max(n, parameters))


def select(spec: Spec, tests: list[Test], forced_ids: set[str]) -> list[Test]:
    """The tests this step of the campaign runs (all of them for `exhaustive`), in plan order."""
    if spec.design.step == "exhaustive":
        return tests
    if spec.design.step == "refine":
        return [t for t in tests if t.id in spec.design.ids]
    chosen = {i for w in screening(spec, tests, forced_ids) for i in w.chosen}
    return [t for t in tests if t.id in chosen]


#: the last screening computed (plan and run ask for it twice: once for the tests, once to show or journal it)
_LAST: dict[Any, list[WorkloadDesign]] = {}


def screening(spec: Spec, tests: Sequence[Test], forced_ids: set[str]) -> list[WorkloadDesign]:
    """The screening design of every workload of the campaign; UserError if the matrix has fewer than two
    storage factors."""
    key = (spec.path, spec.text, spec.design, tuple(t.id for t in tests), frozenset(forced_ids))
    if key not in _LAST:
        _LAST.clear()
        _LAST[key] = _screening(spec, tests, forced_ids)
    return list(_LAST[key])


def _screening(spec: Spec, tests: Sequence[Test], forced_ids: set[str]) -> list[WorkloadDesign]:
    points = [point(t, t.id in forced_ids) for t in tests]
    tfac = target_factor(points)
    groups = group_workloads(points, spec.design.workload)
    cache: dict[Any, _Choice] = {}
    designs = [workload_design(key, ps, spec.design, tfac, cache) for key, ps in groups.items()]
    storage = sorted({f.name for w in designs for f in w.factors if f.storage})
    if len(storage) < 2:
        raise UserError(
            f"{spec.path}: campaign.design = {spec.design.step!r}: the matrix has {len(storage)} storage factor(s)"
            f"{' (' + ', '.join(storage) + ')' if storage else ''}; a screening design needs at least two",
            "add storage axes to [matrix] (e.g. recordsize, compression, sync, logbias, slog) or a second "
            'target, or run it exhaustively (design = "exhaustive")',
        )
    return designs


#: candidates x interaction columns above which the exchange leaves the interactions out (seconds, not minutes)
MAX_POTENTIAL_CELLS = 2_000_000


@dataclass(frozen=True)
class _Choice:
    """What a design over one candidate structure found (workloads of the same structure share it)."""

    rows: tuple[int, ...]
    parameters: int
    d_efficiency: float
    aliases: tuple[Alias, ...]
    dropped: tuple[str, ...]


def workload_design(
    key: tuple[tuple[str, str], ...],
    points: list[Point],
    design: Design,
    tfac: str,
    cache: dict[Any, _Choice] | None = None,
) -> WorkloadDesign:
    """One workload's D-optimal fraction of its matrix tests ([[include]] points always run, outside the choice);
    workloads whose tests have the same factor levels in the same order share one computation (`cache`)."""
    name = workload_name(key, points)
    matrix = [p for p in points if not p.forced]
    forced = tuple(p.id for p in points if p.forced)
    factors = factors_of(matrix, design.workload, tfac) if matrix else []
    if len(factors) < 2 or not matrix:
        note = "fewer than two factors vary: every test runs" if matrix else "[[include]] points only"
        every = tuple(p.id for p in points)
        return WorkloadDesign(name, key, tuple(factors), tuple(points), every, 0, 1.0, (), (), note)
    sig = (tuple(factors), tuple(tuple(level_of(p, f.name, tfac) for f in factors) for p in matrix), design.runs)
    cache = {} if cache is None else cache
    if sig not in cache:
        cache[sig] = _choose(matrix, factors, tfac, design.runs)
    c = cache[sig]
    n = len(c.rows)
    note = (
        "" if n < len(matrix) else f"the model has {c.parameters} parameters for {len(matrix)} tests: every test runs"
    )
    return WorkloadDesign(
        name=name,
        key=key,
        factors=tuple(factors),
        candidates=tuple(points),
        chosen=tuple(matrix[i].id for i in c.rows) + forced,
        parameters=c.parameters,
        d_efficiency=c.d_efficiency,
        aliases=c.aliases,
        dropped=c.dropped,
        note=note,
    )


def _choose(matrix: list[Point], factors: list[Factor], tfac: str, runs: int) -> _Choice:
    cod = coding(matrix, factors, tfac)
    x = cod.matrix(matrix, cod.main)
    n = design_size(x.shape[1], len(matrix), runs)
    pair_cols = [(a, b, cod.pair_columns(a, b)) for a, b in cod.pairs()]
    z_raw = (
        np.hstack([cod.matrix(matrix, cols, intercept=False) for _, _, cols in pair_cols])
        if pair_cols
        else np.zeros((len(matrix), 0))
    )
    z = doptimal.standardise_potential(x, z_raw)
    if z.size > MAX_POTENTIAL_CELLS:  # a huge matrix: main effects only (the exchange's cost grows with z's columns²)
        z = z[:, :0]
    rows = doptimal.choose(x, z, n)
    return _Choice(
        rows=tuple(rows),
        parameters=x.shape[1],
        d_efficiency=doptimal.relative_d_efficiency(x[rows], x),
        aliases=tuple(_aliases(cod, matrix, x, rows, pair_cols)),
        dropped=tuple(c.label() for c in cod.dropped),
    )


def _aliases(
    cod: Coding, matrix: list[Point], x: Any, rows: list[int], pair_cols: list[tuple[Factor, Factor, list[Column]]]
) -> list[Alias]:
    out = []
    every, chosen = doptimal.Projector(x), doptimal.Projector(x[list(rows)])
    for a, b, cols in pair_cols:
        sep = doptimal.separation(every, chosen, cod.matrix(matrix, cols, intercept=False), rows)
        if sep.in_design:
            continue
        names = tuple(dict.fromkeys(cod.main[i].factor for i, _ in sep.aliases))[:3]
        out.append(Alias(a.name, b.name, sep.in_matrix, names))
    return out


def check_design(spec: Spec, tests: list[Test], forced_ids: set[str]) -> None:
    """Refuse a screening the matrix cannot carry (before anything runs)."""
    if spec.design.step == "screening":
        screening(spec, tests, forced_ids)


@dataclass(frozen=True)
class RefineProjection:
    """What a refine after this screening is likely to run, before the screening has measured anything: per
    workload the refine's size over every choice of top factors (low, median, high), and the tests of the median
    choice that the screening does not run (`tests`: what the refine adds, to price it)."""

    low: int
    likely: int
    high: int
    tests: tuple[Test, ...]


def refine_projection(designs: Sequence[WorkloadDesign], tests: Sequence[Test], top: int) -> RefineProjection:
    """Sizes of the refine step over every set of `top` factors each workload could rank first."""
    low = likely = high = 0
    chosen: list[str] = []
    seen: dict[Any, list[tuple[int, list[int]]]] = {}
    for w in designs:
        matrix = [p for p in w.candidates if not p.forced]
        if len(w.factors) < 2 or not matrix:
            continue
        tfac = target_factor(matrix)
        table = [tuple(level_of(p, f.name, tfac) for f in w.factors) for p in matrix]
        sig = (w.factors, tuple(table))
        if sig not in seen:
            seen[sig] = _options(matrix, list(w.factors), table, top, tfac)
        options = seen[sig]
        low += options[0][0]
        high += options[-1][0]
        mid = options[len(options) // 2]
        likely += mid[0]
        chosen += [matrix[i].id for i in mid[1]]
    screened = {i for w in designs for i in w.chosen}
    picked = set(chosen) - screened
    return RefineProjection(low, likely, high, tuple(t for t in tests if t.id in picked))


def _options(
    matrix: list[Point], factors: list[Factor], table: list[tuple[str | None, ...]], top: int, tfac: str
) -> list[tuple[int, list[int]]]:
    """(cells, a test per cell) for every set of top factors, the rest at their first level, smallest first."""
    first = [f.levels[0] for f in factors]
    parent = [is_parent(matrix, f, factors, tfac) for f in factors]
    out = []
    for subset in itertools.combinations(range(len(factors)), min(top, len(factors))):
        rest = [i for i in range(len(factors)) if i not in subset]
        fixed_parents = [i for i in rest if parent[i]]
        cells: dict[tuple[str | None, ...], list[int]] = {}
        for k, row in enumerate(table):
            if all(row[i] in (None, first[i]) for i in fixed_parents):
                cells.setdefault(tuple(row[i] for i in subset), []).append(k)
        picks = []
        for ks in cells.values():
            exact = [k for k in ks if all(table[k][i] in (None, first[i]) for i in rest)]
            picks.append((exact or ks)[0])
        out.append((len(cells), picks))
    return sorted(out, key=lambda o: o[0])


def step_spec(spec: Spec) -> Spec:
    """The campaign as this step runs it: a screening's tests run repeats.min times each (step_schedule)."""
    schedule = step_schedule(spec.design, spec.schedule)
    return spec if schedule is spec.schedule else replace(spec, schedule=schedule, repeats=schedule.repeats_max)


def refine_spec(spec: Spec, ids: Iterable[str]) -> Spec:
    """The campaign as its refine step runs it: the chosen tests, the campaign's own schedule."""
    return replace(spec, design=replace(spec.design, step="refine", ids=frozenset(ids)))
