"""The fit of one workload's measured runs to its factors: log(throughput) by least squares on the dummy-coded
main effects plus the two-factor interactions the data support, each factor's effect with its 95 % interval,
the ranking and how sure it is, and every test's predicted value with its interval (issue 29).

Pure numpy (the least squares and covariance) and analysis.stats (Student t). The response is the log of each
run's ranking value: effects are ratios ("zvol 0.31x of dataset"), as seed 000 states them.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import TypeVar

import numpy as np

from tankbench.analysis.stats import t_cdf, t_quantile
from tankbench.schedule.factors import Coding, Column, Factor, Matrix, Point, coding, is_parent, level_of

#: family-wise level of the interaction search (Bonferroni over the pairs tried)
ALPHA = 0.05
#: log-scale means closer than this are equal (a ratio within 1e-9 of 1: floating-point rounding, not an effect)
TIE = 1e-9

T = TypeVar("T")


def first_best(scores: Iterable[tuple[T, float]], lowest: bool = False) -> T:
    """The first item whose score is the highest (`lowest`: the lowest) within TIE: items whose scores differ by
    floating-point rounding alone are tied, and the first in the given order wins (a stable pick on any machine)."""
    items = list(scores)
    sign = -1.0 if lowest else 1.0
    top = max(sign * v for _, v in items)
    return next(item for item, v in items if sign * v >= top - TIE)


@dataclass(frozen=True)
class LevelMean:
    level: str
    log_mean: float


@dataclass(frozen=True)
class Effect:
    """A factor's main effect: best over worst level as a ratio, its 95 % interval and two-sided p."""

    factor: str
    storage: bool
    levels: tuple[LevelMean, ...]
    best: str
    worst: str
    ratio: float
    low: float
    high: float
    p: float
    estimated: bool = True

    @property
    def significant(self) -> bool:
        return self.estimated and self.p < ALPHA


@dataclass(frozen=True)
class Interaction:
    """A two-factor interaction the data support (kept by the forward search), as the largest column's ratio."""

    a: str
    b: str
    column: str
    ratio: float
    low: float
    high: float
    p: float


@dataclass(frozen=True)
class Prediction:
    """A test's value from the fit (geometric mean of the model) with its 95 % interval."""

    test_id: str
    value: float
    low: float
    high: float


@dataclass
class Fit:
    """One workload's model: columns, coefficients, their covariance, the residual noise and degrees of freedom."""

    coding: Coding
    columns: list[Column]
    beta: Matrix
    cov: Matrix
    sigma: float
    df: int
    n_runs: int
    interactions: list[Interaction]
    #: +1 when higher values are better (throughput), -1 when lower are (latency): the fit is of sign x log(value),
    #: so "best" is always the largest level mean and an effect is always "times better"
    sign: float = 1.0

    def row(self, p: Point) -> Matrix:
        return np.asarray(self.coding.matrix([p], self.columns)[0], dtype=np.float64)

    def t(self) -> float:
        return t_quantile(0.975, self.df) if self.df > 0 else math.inf

    def score(self, p: Point) -> float:
        """The model's mean of sign x log(value): larger is better, whatever the metric's direction."""
        return float(self.row(p) @ self.beta)

    def predict(self, p: Point) -> Prediction:
        """The test's value in the metric's own unit (its geometric mean by the model) and 95 % interval."""
        x = self.row(p)
        y = float(x @ self.beta)
        se = math.sqrt(max(float(x @ self.cov @ x), 0.0))
        half = self.t() * se
        lo, hi = sorted((math.exp(self.sign * (y - half)), math.exp(self.sign * (y + half))))
        return Prediction(p.id, math.exp(self.sign * y), lo, hi)


@dataclass(frozen=True)
class Runs:
    """A workload's measured runs, grouped by test: every run of a test has the same model row, so the least
    squares over the runs is the weighted least squares over the tests (weights: runs per test) plus the
    within-test sum of squares — the same coefficients, residuals and degrees of freedom, from a matrix with a
    row per test instead of per run (a journal of 100,000 runs made the report's fit take seconds)."""

    points: list[Point]  # the measured tests
    n: Matrix  # runs of each
    mean: Matrix  # mean of sign x log(value) over each test's runs
    within: float  # sum over the tests of the squared deviations of their runs from their mean
    total: int  # runs


def _runs(measured: Sequence[Point], values: Mapping[str, Sequence[float]], sign: float) -> Runs:
    logs = [sign * np.log(np.array([max(v, 1e-9) for v in values[p.id]], dtype=np.float64)) for p in measured]
    n = np.array([len(y) for y in logs], dtype=np.float64)
    mean = np.array([float(y.mean()) for y in logs], dtype=np.float64)
    within = float(sum(float(((y - m) ** 2).sum()) for y, m in zip(logs, mean)))
    return Runs(list(measured), n, mean, within, int(n.sum()))


def _ols(x: Matrix, r: Runs) -> tuple[Matrix, Matrix, float, int]:
    """Coefficients, their covariance, the residual sd and degrees of freedom (sd 0, df 0 when saturated) of the
    runs' least squares, computed on the tests' rows `x` weighted by their runs (Runs)."""
    w = np.sqrt(r.n)
    xw = x * w[:, None]
    beta, *_ = np.linalg.lstsq(xw, r.mean * w, rcond=None)
    df = r.total - int(np.linalg.matrix_rank(xw))
    resid = r.mean - x @ beta
    sse = float(r.n @ (resid * resid)) + r.within
    sigma = math.sqrt(sse / df) if df > 0 else 0.0
    cov = np.asarray(np.linalg.pinv(xw.T @ xw) * sigma**2, dtype=np.float64)
    return np.asarray(beta, dtype=np.float64), cov, sigma, int(df)


def _t_p(est: float, se: float, df: int) -> float:
    if se <= 0 or df <= 0:
        return 1.0 if se > 0 or df <= 0 else 0.0
    return 2.0 * (1.0 - t_cdf(abs(est) / se, df))


def fit(
    points: Sequence[Point],
    values: Mapping[str, Sequence[float]],
    factors: list[Factor],
    tfac: str,
    higher: bool = True,
) -> Fit | None:
    """Fit the measured runs (values: test id -> ranking values of its measured runs; `higher`: whether higher is
    better); None when nothing was measured or the main effects leave no degree of freedom to judge them by."""
    sign = 1.0 if higher else -1.0
    measured = [p for p in points if values.get(p.id)]
    if not measured or not factors:
        return None
    runs = _runs(measured, values, sign)
    cod = coding(measured, factors, tfac)
    cols = list(cod.main)
    beta, cov, sigma, df = _ols(cod.matrix(measured, cols), runs)
    if df < 1:
        return None
    chosen = _interactions(cod, runs, cols, df)
    for _, group in chosen:
        cols = cols + group
    beta, cov, sigma, df = _ols(cod.matrix(measured, cols), runs)
    result = Fit(cod, cols, beta, cov, sigma, df, runs.total, [], sign)
    result.interactions = [_interaction(result, col) for col, _ in chosen]
    return result


def _interactions(cod: Coding, runs: Runs, main: list[Column], df0: int) -> list[tuple[Column, list[Column]]]:
    """Forward search: add the pair of factors whose interaction column is most significant (Bonferroni over the
    pairs), while it stays estimable and leaves at least 2 residual degrees of freedom."""
    cols = list(main)
    chosen: list[tuple[Column, list[Column]]] = []
    pairs = cod.pairs()
    while True:
        best: tuple[float, Column, list[Column]] | None = None
        base = cod.matrix(runs.points, cols)
        r0 = int(np.linalg.matrix_rank(base))
        for a, b in pairs:
            group = [c for c in cod.pair_columns(a, b) if c not in cols]
            x = cod.matrix(runs.points, cols + group)
            gain = int(np.linalg.matrix_rank(x)) - r0
            if not group or gain == 0 or runs.total - r0 - gain < 2:
                continue
            beta, cov, _, df = _ols(x, runs)
            for i, col in enumerate(group, start=len(cols) + 1):
                p = _t_p(float(beta[i]), math.sqrt(max(float(cov[i, i]), 0.0)), df) * len(pairs) * len(group)
                if p < ALPHA and (best is None or p < best[0]):
                    best = (p, col, group)
        if best is None or df0 < 3:
            return chosen
        chosen.append((best[1], best[2]))
        cols += best[2]


def _interaction(f: Fit, col: Column) -> Interaction:
    i = f.columns.index(col) + 1
    est = float(f.beta[i])
    se = math.sqrt(max(float(f.cov[i, i]), 0.0))
    half = f.t() * se
    return Interaction(
        col.factor,
        col.other,
        col.label(),
        math.exp(est),
        math.exp(est - half),
        math.exp(est + half),
        _t_p(est, se, f.df),
    )


def with_level(p: Point, factor: str, level: str, tfac: str) -> Point:
    """The same test with one factor at another level (its params keep their types where the level is text)."""
    if factor == tfac:
        return replace(p, kind=level) if factor == "kind" else replace(p, target=level)
    return replace(p, params={**p.params, factor: level})


def effects(f: Fit, points: Sequence[Point]) -> list[Effect]:
    """Every factor's main effect over the workload's tests (all candidates, measured or not), ranked by size."""
    out = [_effect(f, points, factor) for factor in f.coding.factors]
    return sorted(out, key=lambda e: (not e.estimated, -abs(math.log(e.ratio)) if e.estimated else 0.0))


def level_rows(f: Fit, points: Sequence[Point], factor: Factor) -> dict[str, Matrix]:
    """Each level's mean model row: for a factor others depend on (the target), over each level's own tests; for
    any other, over the tests it applies to with its level changed (so constraints on other factors do not leak
    into its effect)."""
    tfac = f.coding.tfac
    parent = is_parent(points, factor, f.coding.factors, tfac)
    pop = [p for p in points if level_of(p, factor.name, tfac) is not None]
    rows: dict[str, Matrix] = {}
    for level in factor.levels:
        if parent:
            mine = [p for p in pop if level_of(p, factor.name, tfac) == level]
        else:
            mine = [with_level(p, factor.name, level, tfac) for p in pop]
        if mine:
            rows[level] = f.coding.matrix(mine, f.columns).mean(axis=0)
    return rows


def _effect(f: Fit, points: Sequence[Point], factor: Factor) -> Effect:
    rows = level_rows(f, points, factor)
    estimated = any(c.factor == factor.name and not c.other for c in f.columns)
    means = {lv: float(r @ f.beta) for lv, r in rows.items()}
    # levels whose means differ by rounding alone (an effect of exactly nothing) are tied: the first in matrix order
    best = first_best(means.items())
    worst = first_best(means.items(), lowest=True)
    contrast = rows[best] - rows[worst]
    est = means[best] - means[worst]
    se = math.sqrt(max(float(contrast @ f.cov @ contrast), 0.0))
    half = f.t() * se
    return Effect(
        factor=factor.name,
        storage=factor.storage,
        levels=tuple(LevelMean(lv, means[lv]) for lv in rows),
        best=best,
        worst=worst,
        ratio=math.exp(est),
        low=math.exp(max(est - half, 0.0)),
        high=math.exp(est + half),
        p=_t_p(est, se, f.df) if estimated else 1.0,
        estimated=estimated,
    )


def ranking_certainty(f: Fit, ranked: Sequence[Effect], points: Sequence[Point]) -> list[bool]:
    """For each pair of neighbours in the ranking: whether the first's effect is larger at 95 % (the difference
    of the two log effects, with its interval from the fit's covariance)."""
    out = []
    for a, b in zip(ranked, ranked[1:]):
        diff = _contrast(f, points, a) - _contrast(f, points, b)
        est = float(diff @ f.beta)
        se = math.sqrt(max(float(diff @ f.cov @ diff), 0.0))
        out.append(a.estimated and est - f.t() * se > 0)
    return out


def _contrast(f: Fit, points: Sequence[Point], e: Effect) -> Matrix:
    factor = next(x for x in f.coding.factors if x.name == e.factor)
    rows = level_rows(f, points, factor)
    return rows[e.best] - rows[e.worst]
