"""Workload-mix advice (seed 004; analysis/advice.py mix_advice): each configuration's expected performance under
the campaign's [mix] (or `advise --mix`), a weighted sum over test cases."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from tankbench.analysis.advice import MixAdvice, mix_advice
from tankbench.analysis.leaderboard import Leaderboard
from tankbench.analysis.present import fmt, metric_label
from tankbench.analysis.result import Analysis, Context, SectionSpec
from tankbench.analysis.section import READ, Cell, Column, Para, Section, Table


def mix_metric(boards: Sequence[Leaderboard], weights: Sequence[tuple[str, float]], key: str) -> str:
    """The mix adds cases up, so it needs one figure: durable when any case of the mix ranks by it (auto)."""
    if key != "auto":
        return key
    names = {c for c, _ in weights}
    return "durable_mibs" if any(lb.metric == "durable_mibs" for lb in boards if lb.case in names) else "mibs"


def compute(ctx: Context) -> MixAdvice | None:
    override = ctx.options.get("mix")
    weights = override if override is not None else ctx.ds.settings.mix
    if not weights:
        return None
    return mix_advice(ctx.ds, weights, mix_metric(ctx.a.leaderboards, weights, ctx.a.rank_by))


def render(a: Analysis, m: MixAdvice | None) -> Section | None:
    if m is None:
        return None
    cols = (
        Column("config"),
        Column("expected", f"expected {metric_label(m.metric)}", num=True),
        Column("missing cases"),
    )
    rows = [
        (e.config, Cell(e.expected, fmt(e.expected), tip=m.formula), ", ".join(e.missing) or "—") for e in m.entries
    ]
    weights = ", ".join(f"{c} {w:.0%}" for c, w in m.weights)
    table = Table(cols, rows, only=READ, limit={"html": 40, "md": 10}, wide=False)
    return Section("mix", "Workload mix", (Para(f"{weights}. {m.formula}."), table))


def to_json(a: Analysis, m: MixAdvice | None) -> Mapping[str, Any]:
    if m is None:
        return {"mix": None}
    return {
        "mix": {
            "metric": m.metric,
            "weights": dict(m.weights),
            "formula": m.formula,
            "unknown_cases": list(m.unknown_cases),
            "configs": [
                {
                    "config": e.config,
                    "expected": e.expected,
                    "missing": list(e.missing),
                    "parts": [{"case": c, "weight": w, "value": v, "test_id": tid} for c, w, v, tid in e.parts],
                }
                for e in m.entries
            ],
        }
    }


SECTION = SectionSpec("mix", 50, compute, render, to_json)
