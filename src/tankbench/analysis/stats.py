"""Statistics over repeats, stdlib only: mean, sd, 95 % CI (Student t), Welch's t-test."""

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


def _betacf(a: float, b: float, x: float) -> float:
    """Continued fraction of the incomplete beta function (Lentz's method)."""
    tiny = 1e-300
    qab, qap, qam = a + b, a + 1.0, a - 1.0
    c, d = 1.0, 1.0 - qab * x / qap
    d = 1.0 / (d if abs(d) > tiny else tiny)
    h = d
    for m in range(1, 300):
        m2 = 2 * m
        for aa in (m * (b - m) * x / ((qam + m2) * (a + m2)), -(a + m) * (qab + m) * x / ((a + m2) * (qap + m2))):
            d = 1.0 + aa * d
            d = 1.0 / (d if abs(d) > tiny else tiny)
            c = 1.0 + aa / c
            c = c if abs(c) > tiny else tiny
            h *= d * c
            if aa == 0:
                break
        if abs(d * c - 1.0) < 1e-14:
            break
    return h


def betainc(a: float, b: float, x: float) -> float:
    """Regularised incomplete beta I_x(a, b)."""
    if x <= 0.0:
        return 0.0
    if x >= 1.0:
        return 1.0
    lbeta = math.lgamma(a + b) - math.lgamma(a) - math.lgamma(b) + a * math.log(x) + b * math.log(1.0 - x)
    if x < (a + 1.0) / (a + b + 2.0):
        return math.exp(lbeta) * _betacf(a, b, x) / a
    return 1.0 - math.exp(lbeta) * _betacf(b, a, 1.0 - x) / b


def t_cdf(t: float, df: float) -> float:
    """P(T <= t) for Student's t with df degrees of freedom."""
    tail = 0.5 * betainc(df / 2.0, 0.5, df / (df + t * t))
    return 1.0 - tail if t >= 0 else tail


def t_pdf(t: float, df: float) -> float:
    """Density of Student's t with df degrees of freedom."""
    lc = math.lgamma((df + 1) / 2) - math.lgamma(df / 2) - 0.5 * math.log(df * math.pi)
    return math.exp(lc - (df + 1) / 2 * math.log1p(t * t / df))


@lru_cache(maxsize=512)
def t_quantile(p: float, df: float) -> float:
    """Inverse of t_cdf (p in (0, 1)): Newton from the normal quantile (a few steps: every test's n differs in large
    journals), bisection when Newton does not settle."""
    x = NormalDist().inv_cdf(p)
    for _ in range(30):
        f = t_cdf(x, df) - p
        if abs(f) < 1e-14:
            return x
        step = f / max(t_pdf(x, df), 1e-300)
        if not math.isfinite(step) or abs(step) > 1e3:
            break
        x -= step
    lo, hi = -1e3, 1e3
    for _ in range(64):  # 2000 / 2^64: below double precision
        mid = (lo + hi) / 2.0
        if t_cdf(mid, df) < p:
            lo = mid
        else:
            hi = mid
    return (lo + hi) / 2.0


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
    """Kendall's tau-b between two score lists of the same items (1: same order, -1: reversed; ties counted)."""
    n = len(a)
    if n != len(b) or n < 2:
        raise ValueError("kendall_tau needs two lists of the same length, at least 2")
    concordant = discordant = ties_a = ties_b = 0
    for i in range(n):
        for j in range(i + 1, n):
            da, db = a[i] - a[j], b[i] - b[j]
            if da == 0 and db == 0:
                continue
            if da == 0:
                ties_a += 1
            elif db == 0:
                ties_b += 1
            elif (da > 0) == (db > 0):
                concordant += 1
            else:
                discordant += 1
    denom = math.sqrt((concordant + discordant + ties_a) * (concordant + discordant + ties_b))
    return (concordant - discordant) / denom if denom else 1.0
