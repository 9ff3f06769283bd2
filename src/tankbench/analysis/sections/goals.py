"""The campaign's [[goal]]s (analysis/advice.py evaluate_goal): which tests of a goal's case meet it, by mean,
and whether their 95 % CI does too."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from tankbench.analysis.advice import GoalResult, evaluate_goal
from tankbench.analysis.present import fmt
from tankbench.analysis.result import Analysis, Context, SectionSpec
from tankbench.analysis.section import Items, Section, Span


def compute(ctx: Context) -> tuple[GoalResult, ...]:
    return tuple(evaluate_goal(ctx.ds, g) for g in ctx.ds.settings.goals)


def _item(g: GoalResult) -> tuple[Span, ...]:
    head = (Span(g.goal.name, "b"), Span(f" ({g.goal.text}): "))
    if g.not_measured:
        return (*head, Span("not measured"))
    met = ", ".join(f"#{t.number} {t.name} ({fmt(v)}{'' if c else ', CI crosses the goal'})" for t, v, c in g.passing)
    return (*head, Span("met by " + (met or "no configuration")))


def render(a: Analysis, goals: tuple[GoalResult, ...]) -> Section | None:
    return Section("goals", "Goals", (Items(tuple(_item(g) for g in goals)),)) if goals else None


def to_json(a: Analysis, goals: tuple[GoalResult, ...]) -> Mapping[str, Any]:
    return {
        "goals": [
            {
                "name": g.goal.name,
                "goal": g.goal.text,
                "not_measured": g.not_measured,
                "passing": [{"test_id": t.id, "name": t.name, "mean": v, "ci_passes": c} for t, v, c in g.passing],
                "failing": [{"test_id": t.id, "name": t.name, "mean": v} for t, v in g.failing],
            }
            for g in goals
        ]
    }


SECTION = SectionSpec("goals", 40, compute, render, to_json)
