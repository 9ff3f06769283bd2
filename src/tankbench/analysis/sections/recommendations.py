"""Recommendations (analysis/advice.py): what the leaderboards, comparisons and crashes support, each with the
tests it rests on."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from tankbench.analysis.advice import Recommendation, recommendations
from tankbench.analysis.crashes import crash_advice
from tankbench.analysis.result import Analysis, Context, SectionSpec
from tankbench.analysis.section import Items, Section, Span
from tankbench.analysis.sections.crashes import SECTION as CRASHES


def compute(ctx: Context) -> tuple[Recommendation, ...]:
    a = ctx.a
    late = any(w.code == "timing-issue" for w in a.warnings)
    avoid = tuple(Recommendation("crash", text, basis) for text, basis in crash_advice(ctx.part(CRASHES)))
    return avoid + recommendations(a.dataset, a.leaderboards, a.comparisons, late)


def render(a: Analysis, recs: tuple[Recommendation, ...]) -> Section:
    items = tuple(
        (Span(r.text + " "), Span(f"(tests.id {', '.join(r.basis[:6])})", "small")) if r.basis else r.text for r in recs
    )
    return Section("recommendations", "Recommendations", (Items(items),))


def to_json(a: Analysis, recs: tuple[Recommendation, ...]) -> Mapping[str, Any]:
    return {"recommendations": [{"kind": r.kind, "text": r.text, "test_ids": list(r.basis)} for r in recs]}


SECTION = SectionSpec("recommendations", 30, compute, render, to_json)
