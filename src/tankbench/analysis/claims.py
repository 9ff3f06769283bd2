"""Each claim's verdict on a journal's dataset: the judge (campaign/judge.py) on the covered tests' measured runs,
plus the warnings that weaken it (those of its own tests, error-level first; campaign-wide ones such as `emulated`
are said once, at the top of every output). Pure: a Dataset and its warnings in, Verdict values out."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from tankbench.analysis.cases import Dataset, TestSummary
from tankbench.analysis.checks import Warning
from tankbench.campaign.claims import Claim, as_text, covered, pairs
from tankbench.campaign.judge import (
    FAILS,
    HOLDS,
    LEVEL,
    UNDECIDED,
    Pair,
    TestValues,
    Verdict,
    fmt_ratio,
    judge_constant,
    judge_pairs,
    verdict_of,
)

__all__ = ["FAILS", "HOLDS", "UNDECIDED", "Pair", "Verdict", "fmt_ratio", "judge", "verdicts", "weakening"]


def _values(t: TestSummary, key: str) -> TestValues:
    return TestValues(t.id, t.number, tuple(t.values(key)))


def _rows(ds: Dataset) -> tuple[list[TestSummary], list[tuple[Mapping[str, Any], str]]]:
    tests = [t for t in ds.tests if not t.is_fill]
    return tests, [(as_text(t.axes()), t.case) for t in tests]


def judge(claim: Claim, ds: Dataset, warnings: Sequence[Warning] = (), level: float = LEVEL) -> Verdict:
    """The verdict of one claim on a dataset, at the given confidence level."""
    tests, rows = _rows(ds)
    mine = [tests[i] for i in covered(claim, rows)]
    vals = {t.id: _values(t, claim.metric) for t in mine}
    if claim.relative:
        matched = [(vals[tests[a].id], vals[tests[b].id]) for a, b in pairs(claim, rows)]
        j = judge_pairs(claim.expect, matched, level)
    else:
        j = judge_constant(claim.expect, claim.metric, list(vals.values()), level)
    return verdict_of(claim, j, list(vals.values()), weakening(mine, warnings), level)


def weakening(tests: Sequence[TestSummary], warnings: Sequence[Warning]) -> tuple[str, ...]:
    """The warnings on the claim's own tests, error-level first, each naming the tests it concerns."""
    ids = {t.id: t.number for t in tests}
    rank = {"error": 0, "warning": 1, "info": 2}
    out: list[tuple[int, str]] = []
    for w in warnings:
        hit = sorted(ids[i] for i in w.test_ids if i in ids)
        if hit:  # a campaign-wide warning (emulated, fingerprints) names no test: said once, at the top
            out.append((rank.get(w.severity, 3), f"{w.severity}: {w.code} on {', '.join(f'#{n}' for n in hit)}"))
    return tuple(text for _, text in sorted(out))


def verdicts(ds: Dataset, warnings: Sequence[Warning] = (), level: float = LEVEL) -> tuple[Verdict, ...]:
    """Every claim of the dataset's campaign (its [[claim]]s, then its [[goal]]s), judged."""
    return tuple(judge(c, ds, warnings, level) for c in ds.settings.claims)
