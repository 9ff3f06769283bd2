"""Compare two journals (before/after one change, seed 001): per-test deltas with Welch's t-test."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from tankbench import EXPORT_FORMAT, __version__
from tankbench.analysis.cases import Dataset, TestSummary
from tankbench.analysis.leaderboard import case_metric
from tankbench.analysis.stats import TestResult, welch
from tankbench.errors import UserError
from tankbench.metrics import METRICS


@dataclass(frozen=True)
class Delta:
    """One test measured in both journals: A's and B's mean, change, significance and a sentence."""

    test_a: TestSummary
    test_b: TestSummary
    mean_a: float | None
    mean_b: float | None
    change_pct: float | None
    test: TestResult
    verdict: str
    metric: str = "mibs"
    why: str = ""


@dataclass(frozen=True)
class Comparison:
    metric: str
    fingerprint_diff: tuple[tuple[str, Any, Any], ...]
    forced: bool
    deltas: tuple[Delta, ...]
    only_a: tuple[TestSummary, ...]
    only_b: tuple[TestSummary, ...]


def fingerprint_diff(a: Dataset, b: Dataset) -> tuple[tuple[str, Any, Any], ...]:
    """(key, values in A, values in B) for every comparable fingerprint key that differs."""

    def merged(ds: Dataset) -> dict[str, set[str]]:
        out: dict[str, set[str]] = {}
        for fp in ds.fingerprints.values():
            for k, v in fp.comparable_keys().items():
                out.setdefault(k, set()).add(str(v))
        return out

    ma, mb = merged(a), merged(b)
    return tuple(
        (k, ", ".join(sorted(ma.get(k, {"(none)"}))), ", ".join(sorted(mb.get(k, {"(none)"}))))
        for k in sorted(set(ma) | set(mb))
        if ma.get(k) != mb.get(k)
    )


def _verdict(ma: float | None, mb: float | None, key: str, t: TestResult) -> str:
    if ma is None or mb is None:
        return "not measured in both"
    better = (mb > ma) == METRICS[key].higher_is_better
    if not t.possible:
        return f"untested ({t.reason})"
    if not t.significant():
        return f"no significant change (Welch p = {t.p:.3g})"
    return f"B {'better' if better else 'worse'} (Welch p = {t.p:.3g})"


def match_tests(a: Dataset, b: Dataset) -> list[tuple[TestSummary, TestSummary]]:
    """Pairs by test id (same canonical test), then by test name for tests left over."""
    bid, pairs = b.by_id(), []
    left = {t.name: t for t in b.tests if t.id not in a.by_id()}
    for t in a.tests:
        other = bid.get(t.id) or left.get(t.name)
        if other is not None:
            pairs.append((t, other))
    return pairs


def pair_metric(ta: TestSummary, tb: TestSummary, a: Dataset, b: Dataset, key: str) -> tuple[str, str]:
    """The figure a pair is compared by: `key`, or with `auto` durable MiB/s when a run finished late on either
    side (the same rule as the report's leaderboards), fio's MiB/s otherwise."""
    ka, why_a = case_metric([ta], key, a.settings)
    kb, why_b = case_metric([tb], key, b.settings)
    if ka == kb:
        return ka, why_a
    return ("durable_mibs", why_a if ka == "durable_mibs" else why_b)


def compare(a: Dataset, b: Dataset, key: str = "auto", force: bool = False) -> Comparison:
    """Per-test deltas of B against A; UserError when the fingerprints differ and force is False."""
    diff = fingerprint_diff(a, b)
    if diff and not force:
        shown = "; ".join(f"{k}: {va} vs {vb}" for k, va, vb in diff[:4])
        raise UserError(
            f"the journals come from different systems ({shown})",
            "compare runs of one system, or pass --force to compare anyway (the output then lists the differences)",
        )
    deltas = []
    pairs = match_tests(a, b)
    for ta, tb in pairs:
        k, why = pair_metric(ta, tb, a, b, key)
        ma, mb = ta.mean(k), tb.mean(k)
        t = welch(ta.values(k), tb.values(k))
        pct = (mb / ma - 1.0) * 100.0 if ma and mb is not None else None
        deltas.append(Delta(ta, tb, ma, mb, pct, t, _verdict(ma, mb, k, t), k, why))
    matched_b = {tb.id for _, tb in pairs}
    matched_a = {ta.id for ta, _ in pairs}
    return Comparison(
        key,
        diff,
        force,
        tuple(deltas),
        tuple(t for t in a.tests if t.id not in matched_a),
        tuple(t for t in b.tests if t.id not in matched_b),
    )


def comparison_dict(c: Comparison) -> dict[str, Any]:
    """JSON-ready form, with test ids of both journals."""
    return {
        "format_version": EXPORT_FORMAT,
        "tankbench_version": __version__,
        "metric": c.metric,
        "forced": c.forced,
        "fingerprint_diff": [{"key": k, "a": va, "b": vb} for k, va, vb in c.fingerprint_diff],
        "deltas": [
            {
                "test_a": d.test_a.id,
                "test_b": d.test_b.id,
                "number": d.test_a.number,
                "name": d.test_a.name,
                "case": d.test_a.case,
                "metric": d.metric,
                "metric_why": d.why,
                "mean_a": d.mean_a,
                "mean_b": d.mean_b,
                "change_pct": d.change_pct,
                "mibs_a": d.test_a.mean("mibs"),
                "mibs_b": d.test_b.mean("mibs"),
                "n_a": len(d.test_a.measured),
                "n_b": len(d.test_b.measured),
                "p": d.test.p if d.test.possible else None,
                "significant": d.test.significant(),
                "verdict": d.verdict,
            }
            for d in c.deltas
        ],
        "only_a": [t.id for t in c.only_a],
        "only_b": [t.id for t in c.only_b],
    }
