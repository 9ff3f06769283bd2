"""bench/screening's verdict on the top-3 factors: judged within the exhaustive fit's own resolution (a choice the
reference cannot make is not a disagreement), so its exit status is what the issue's table says."""

from __future__ import annotations

import importlib
from pathlib import Path
from types import ModuleType

import pytest

from tankbench.analysis.factorfit import Effect
from tankbench.analysis.factors import WorkloadFactors

BENCH = Path(__file__).resolve().parents[2] / "bench"


@pytest.fixture
def screening(monkeypatch: pytest.MonkeyPatch) -> ModuleType:
    monkeypatch.syspath_prepend(str(BENCH))  # bench/screening imports its neighbour time_to_answer
    return importlib.import_module("screening")


def workload(effects: list[tuple[str, float]], certain: list[bool]) -> WorkloadFactors:
    """Effects ranked as given: (factor, p)."""
    return WorkloadFactors(
        name="write seq 4k",
        candidates=8,
        measured=8,
        runs=8,
        df=4,
        noise=0.1,
        effects=tuple(Effect(f, True, (), "a", "b", 2.0, 1.5, 2.5, p) for f, p in effects),
        certain=tuple(certain),
        interactions=(),
        aliases=(),
        skipped=(),
        predicted=(),
        best_measured="",
        best_measured_value=0.0,
        steps=(),
    )


def test_top_three_within_the_exhaustive_fits_resolution(screening: ModuleType) -> None:
    # a > b surely; b, c, d not separated from each other; d > e surely: a is sure, b/c/d fill two places
    w = workload([("a", 0.001), ("b", 0.01), ("c", 0.02), ("d", 0.03), ("e", 0.5)], [True, False, False, True])
    sure, maybe = screening.top_within_resolution(w)
    assert (sure, maybe) == ({"a"}, {"b", "c", "d"})
    assert screening.agrees_within_resolution(sure, maybe, ["a", "d", "b"])
    assert not screening.agrees_within_resolution(sure, maybe, ["b", "c", "d"]), "the sure factor is missing"
    assert not screening.agrees_within_resolution(sure, maybe, ["a", "b", "e"]), "e is surely below the top 3"


def test_candidates_without_an_effect_do_not_count_beside_ones_with_one(screening: ModuleType) -> None:
    # nothing separated: every factor may fill the top 3, but three have an effect at 95 %, so only those count
    w = workload([("a", 0.001), ("b", 0.01), ("c", 0.02), ("d", 0.3), ("e", 0.5)], [False] * 4)
    sure, maybe = screening.top_within_resolution(w)
    assert (sure, maybe) == (set(), {"a", "b", "c"})
    assert not screening.agrees_within_resolution(sure, maybe, ["a", "b", "d"])
