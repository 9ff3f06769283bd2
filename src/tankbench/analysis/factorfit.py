"""The fit of one workload's measured runs to its factors: log(throughput) by least squares on the dummy-coded
main effects plus the two-factor interactions the data support, each factor's effect with its 95 % interval,
the ranking and how sure it is, and every test's predicted value with its interval (issue 29).

Pure numpy (the least squares and covariance) and analysis.stats (Student t). The response is the log of each
run's ranking value: effects are ratios ("zvol 0.31x of dataset"), as seed 000 states them.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace

import numpy as np

from tankbench.analysis.stats import t_cdf, t_quantile
from tankbench.schedule.factors import Coding, Column, Factor, Matrix, Point, coding, is_parent, level_of

#: family-wise level of the interaction search (Bonferroni over the pairs tried)
ALPHA = 0.05


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

    def row(self, p: Point) -> Matrix:
        return np.asarray(self.coding.matrix([p], self.columns)[0], dtype=np.float64)

    def t(self) -> float:
        return t_quantile(0.975, self.df) if self.df > 0 else math.inf

    def predict(self, p: Point) -> Prediction:
        x = self.row(p)
        y = float(x @ self.beta)
        se = math.sqrt(max(float(x @ self.cov @ x), 0.0))
        half = self.t() * se
        return Prediction(p.id, math.exp(y), math.exp(y - half), math.exp(y + half))


def _ols(x: Matrix, y: Matrix) -> tuple[Matrix, Matrix, float, int]:
    """Coefficients, their covariance, the residual sd and degrees of freedom (sd 0, df 0 when saturated)."""
    beta, *_ = np.linalg.lstsq(x, y, rcond=None)
    df = x.shape[0] - int(np.linalg.matrix_rank(x))
    resid = y - x @ beta
    sigma = math.sqrt(float(resid @ resid) / df) if df > 0 else 0.0
    cov = np.asarray(np.linalg.pinv(x.T @ x) * sigma**2, dtype=np.float64)
    return np.asarray(beta, dtype=np.float64), cov, sigma, int(df)


def _t_p(est: float, se: float, df: int) -> float:
    if se <= 0 or df <= 0:
        return 1.0 if se > 0 or df <= 0 else 0.0
    return 2.0 * (1.0 - t_cdf(abs(est) / se, df))


def fit(points: Sequence[Point], values: Mapping[str, Sequence[float]], factors: list[Factor], tfac: str) -> Fit | None:
    """Fit the measured runs (values: test id -> ranking values of its measured runs); None when nothing was
    measured or the main effects leave no degree of freedom to judge them by."""
    measured = [p for p in points if values.get(p.id)]
    if not measured or not factors:
        return None
    obs = [p for p in measured for _ in values[p.id]]
    y = np.log(np.array([max(v, 1e-9) for p in measured for v in values[p.id]], dtype=np.float64))
    cod = coding(measured, factors, tfac)
    cols = list(cod.main)
    beta, cov, sigma, df = _ols(cod.matrix(obs, cols), y)
    if df < 1:
        return None
    chosen = _interactions(cod, obs, y, cols, df)
    for _, group in chosen:
        cols = cols + group
    beta, cov, sigma, df = _ols(cod.matrix(obs, cols), y)
    result = Fit(cod, cols, beta, cov, sigma, df, len(obs), [])
    result.interactions = [_interaction(result, col) for col, _ in chosen]
    return result


def _interactions(
    cod: Coding, obs: list[Point], y: Matrix, main: list[Column], df0: int
) -> list[tuple[Column, list[Column]]]:
    """Forward search: add the pair of factors whose interaction column is most significant (Bonferroni over the
    pairs), while it stays estimable and leaves at least 2 residual degrees of freedom."""
    cols = list(main)
    chosen: list[tuple[Column, list[Column]]] = []
    pairs = cod.pairs()
    while True:
        best: tuple[float, Column, list[Column]] | None = None
        base = cod.matrix(obs, cols)
        r0 = int(np.linalg.matrix_rank(base))
        for a, b in pairs:
            group = [c for c in cod.pair_columns(a, b) if c not in cols]
            x = cod.matrix(obs, cols + group)
            gain = int(np.linalg.matrix_rank(x)) - r0
            if not group or gain == 0 or x.shape[0] - r0 - gain < 2:
                continue
            beta, cov, _, df = _ols(x, y)
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
    best = max(means, key=lambda lv: means[lv])
    worst = min(means, key=lambda lv: means[lv])
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
