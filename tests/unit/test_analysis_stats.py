"""Statistics against reference values (scipy.stats, R) computed independently."""

from __future__ import annotations

import math

import pytest

from tankbench.analysis.stats import monotonic_increase, summarise, t_cdf, t_quantile, welch


@pytest.mark.parametrize("df,expected", [(1, 12.7062), (2, 4.3027), (4, 2.7764), (9, 2.2622), (30, 2.0423)])
def test_t_quantile_matches_tables(df: int, expected: float) -> None:
    assert t_quantile(0.975, df) == pytest.approx(expected, abs=1e-4)


def test_t_cdf_symmetry_and_value() -> None:
    assert t_cdf(0.0, 5) == pytest.approx(0.5)
    assert t_cdf(2.0, 10) == pytest.approx(0.963306, abs=1e-6)
    assert t_cdf(-2.0, 10) == pytest.approx(1 - 0.963306, abs=1e-6)


def test_summarise_ci() -> None:
    s = summarise([10.0, 12.0, 11.0])
    assert s is not None and s.n == 3 and s.mean == 11.0 and s.sd == 1.0
    half = 4.302653 / math.sqrt(3)
    assert (s.ci_low, s.ci_high) == pytest.approx((11 - half, 11 + half), abs=1e-5)
    assert summarise([]) is None
    one = summarise([5.0])
    assert one is not None and one.sd == 0 and one.ci_low == one.ci_high == 5.0


def test_welch_reference() -> None:
    # scipy.stats.ttest_ind([1,2,3,4],[3,4,5,6], equal_var=False) -> t=-2.1909, p=0.07099
    r = welch([1, 2, 3, 4], [3, 4, 5, 6])
    assert r.possible and r.t == pytest.approx(-2.19089, abs=1e-4) and r.p == pytest.approx(0.070988, abs=1e-5)
    assert not r.significant()
    # unequal variances: ttest_ind([20.1,20.3,19.9],[25,27,23,26], equal_var=False) -> t=-5.977, df=3.109, p=0.00846
    r2 = welch([20.1, 20.3, 19.9], [25, 27, 23, 26])
    assert r2.df == pytest.approx(3.109, abs=0.001) and r2.p == pytest.approx(0.0085, abs=2e-4) and r2.significant()


def test_welch_needs_repeats() -> None:
    r = welch([1.0], [2.0, 3.0])
    assert not r.possible and "2 repeats" in r.reason and not r.significant()


def test_monotonic_increase_is_cache_warming() -> None:
    assert monotonic_increase([100, 120, 150])
    assert not monotonic_increase([100, 101, 102])  # under 5 %: noise, not warming
    assert not monotonic_increase([100, 150])  # two runs prove nothing
    assert not monotonic_increase([100, 160, 150])
