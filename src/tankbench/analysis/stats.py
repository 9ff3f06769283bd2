"""Statistics over repeats: mean, sd, 95 % CI (Student t), Welch's t-test, ratios of means with their intervals
(on the log scale: the delta method), Holm's correction, Kendall's tau.

The distributions come from scipy (a maintained library: its special functions are Cephes' incomplete beta and
inverse, checked against R and Boost), imported on first use and only `scipy.special` on the report's path: loading
scipy.stats costs about half a second, which a report of 100,000 runs does not need."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache
from statistics import NormalDist


@dataclass(frozen=True)
class Summary:
    """Repeats of one metric: n, mean, sample sd and the 95 % confidence interval of the mean."""

    n: int
    mean: float
    sd: float
    ci_low: float
    ci_high: float
    values: tuple[float, ...]

    @property
    def cv(self) -> float:
        """Coefficient of variation sd/mean (0 when the mean is 0)."""
        return self.sd / abs(self.mean) if self.mean else 0.0


def summarise(values: Sequence[float]) -> Summary | None:
    """Summary of the values, or None when there are none (\"not measured\")."""
    vals = tuple(map(float, values))
    n = len(vals)
    if n == 0:
        return None
    mean = math.fsum(vals) / n
    if n == 1:
        return Summary(1, mean, 0.0, mean, mean, vals)
    sd = math.sqrt(math.fsum([(v - mean) ** 2 for v in vals]) / (n - 1))
    half = t_quantile(0.975, n - 1) * sd / math.sqrt(n)
    return Summary(n, mean, sd, mean - half, mean + half, vals)


def t_cdf(t: float, df: float) -> float:
    """P(T <= t) for Student's t with df degrees of freedom (scipy.special.stdtr)."""
    from scipy.special import stdtr

    return float(stdtr(df, t))


@lru_cache(maxsize=512)
def t_quantile(p: float, df: float) -> float:
    """Inverse of t_cdf (p in (0, 1); df may be inf: the normal quantile), cached: every test's n asks again."""
    if not math.isfinite(df):
        return NormalDist().inv_cdf(p)
    from scipy.special import stdtrit

    return float(stdtrit(df, p))


@dataclass(frozen=True)
class TestResult:
    """Outcome of Welch's t-test of mean(a) vs mean(b): t, df, two-sided p; `possible` False when n < 2."""

    possible: bool
    t: float = 0.0
    df: float = 0.0
    p: float = 1.0
    reason: str = ""

    def significant(self, alpha: float = 0.05) -> bool:
        return self.possible and self.p < alpha


def welch(a: Sequence[float], b: Sequence[float]) -> TestResult:
    """Welch's unequal-variance t-test; needs two repeats on each side."""
    if len(a) < 2 or len(b) < 2:
        return TestResult(False, reason="needs at least 2 repeats on each side")
    sa, sb = summarise(a), summarise(b)
    assert sa is not None and sb is not None
    va, vb = sa.sd**2 / sa.n, sb.sd**2 / sb.n
    if va + vb == 0:
        same = sa.mean == sb.mean
        return TestResult(True, 0.0 if same else math.inf, float(sa.n + sb.n - 2), 1.0 if same else 0.0)
    t = (sa.mean - sb.mean) / math.sqrt(va + vb)
    df = (va + vb) ** 2 / ((va**2 / (sa.n - 1)) + (vb**2 / (sb.n - 1)))
    p = 2.0 * (1.0 - t_cdf(abs(t), df))
    return TestResult(True, t, df, max(0.0, min(1.0, p)))


def monotonic_increase(values: Sequence[float], min_gain: float = 0.05) -> bool:
    """True when >= 3 values rise at every step and the last exceeds the first by min_gain (cache warming)."""
    if len(values) < 3 or values[0] <= 0:
        return False
    rising = all(b > a for a, b in zip(values, values[1:]))
    return rising and values[-1] / values[0] - 1.0 >= min_gain


def kendall_tau(a: Sequence[float], b: Sequence[float]) -> float:
    """Kendall's tau-b between two score lists of the same items (1: same order, -1: reversed; ties counted);
    1.0 when either list is constant (nothing to disagree about)."""
    n = len(a)
    if n != len(b) or n < 2:
        raise ValueError("kendall_tau needs two lists of the same length, at least 2")
    from scipy.stats import kendalltau

    tau = kendalltau(a, b).statistic
    return 1.0 if math.isnan(tau) else float(tau)


# -- ratios of means (claims, leaderboards) ----------------------------------------------------------------------


@dataclass(frozen=True)
class Noise:
    """One test's mean and the variance of its log mean (cv²/n: the delta method), with the df behind it."""

    mean: float
    n: int
    var_log: float
    df: float


def pooled_cv(samples: Sequence[Sequence[float]]) -> tuple[float, float] | None:
    """Run-to-run coefficient of variation pooled (df-weighted) over the samples with 2+ positive-mean values, and
    its degrees of freedom; None when none has two."""
    num, df = 0.0, 0
    for vs in samples:
        s = summarise(vs)
        if s is not None and s.n >= 2 and s.mean > 0:
            num += (s.n - 1) * (s.sd / s.mean) ** 2
            df += s.n - 1
    return (math.sqrt(num / df), float(df)) if df else None


def noise(values: Sequence[float], pooled: tuple[float, float] | None) -> Noise | None:
    """A sample's own noise with 2+ values, the pooled noise with one; None without a positive mean or any noise."""
    s = summarise(values)
    if s is None or s.mean <= 0:
        return None
    if s.n >= 2:
        return Noise(s.mean, s.n, (s.sd / s.mean) ** 2 / s.n, float(s.n - 1))
    return None if pooled is None else Noise(s.mean, 1, pooled[0] ** 2, pooled[1])


def welch_df(parts: Sequence[tuple[float, float]]) -> float:
    """Welch–Satterthwaite degrees of freedom of a sum of variances, each (variance, its df); inf without noise."""
    total = sum(v for v, _ in parts)
    denom = sum(v * v / d for v, d in parts if d > 0 and v > 0)
    return total * total / denom if denom > 0 else math.inf


def log_ratio(terms: Sequence[tuple[float, Noise]], level: float) -> tuple[float, float, float, float]:
    """exp(Σ c·ln mean) — e.g. the geometric mean of several pairs' ratios — and its interval from Σ c²·var of the
    log means (delta method, Welch–Satterthwaite df): (ratio, low, high, df)."""
    d = math.fsum(c * math.log(n.mean) for c, n in terms)
    parts = [(c * c * n.var_log, n.df) for c, n in terms if c]
    df = welch_df(parts)
    half = t_quantile(1 - (1 - level) / 2, df) * math.sqrt(math.fsum(v for v, _ in parts))
    return math.exp(d), math.exp(d - half), math.exp(d + half), df


def holm(pvalues: Sequence[float]) -> list[float]:
    """Holm's step-down adjustment of a family of p-values (controls the family-wise error rate): reject the
    k-th smallest when its adjusted value is below alpha."""
    order = sorted(range(len(pvalues)), key=lambda i: pvalues[i])
    out = [1.0] * len(pvalues)
    running = 0.0
    for rank, i in enumerate(order):
        running = max(running, min(1.0, (len(pvalues) - rank) * pvalues[i]))
        out[i] = running
    return out


def ratio_test(a: Sequence[float], b: Sequence[float], level: float = 0.95) -> tuple[float, float, float, TestResult]:
    """mean(a)/mean(b), its interval at `level` and the two-sided test of "ratio = 1", both on the log scale (the
    delta method, Welch–Satterthwaite df), so the interval excludes 1 exactly when p < 1 - level. Needs 2 values on
    each side for the interval (else low = high = the ratio, and the test is not possible)."""
    na, nb = noise(a, None), noise(b, None)
    sa, sb = summarise(a), summarise(b)
    if sa is None or sb is None or sa.mean <= 0 or sb.mean <= 0:
        raise ValueError("ratio_test needs positive means")
    r = sa.mean / sb.mean
    if na is None or nb is None:
        return r, r, r, TestResult(False, reason="needs at least 2 repeats on each side")
    r, low, high, df = log_ratio([(1.0, na), (-1.0, nb)], level)
    se = math.sqrt(na.var_log + nb.var_log)
    if se == 0:
        return r, low, high, TestResult(True, 0.0 if r == 1 else math.inf, df, 1.0 if r == 1 else 0.0)
    t = math.log(r) / se
    p = 2.0 * (1.0 - t_cdf(abs(t), df if math.isfinite(df) else 1e9))
    return r, low, high, TestResult(True, t, df, max(0.0, min(1.0, p)))
