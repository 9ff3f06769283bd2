"""Within-case comparisons (analysis/leaderboard.py axis_comparisons): tests that differ in one setting, the best
of each value compared, with Welch's test."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from tankbench.analysis.leaderboard import AxisComparison
from tankbench.analysis.result import Analysis, Context, SectionSpec
from tankbench.analysis.section import Block, Items, Para, Section

SHOWN = 200  # comparisons listed (all of them are in results.json)


def compute(ctx: Context) -> tuple[AxisComparison, ...]:
    return ctx.a.comparisons


def render(a: Analysis, comps: tuple[AxisComparison, ...]) -> Section:
    blocks: tuple[Block, ...] = (Items(tuple(c.text for c in comps[:SHOWN])),)
    if len(comps) > SHOWN:
        blocks += (Para(f"Showing {SHOWN} of {len(comps)} comparisons; all are in results.json.", "small"),)
    return Section("comparisons", "Within-case comparisons", blocks)


def to_json(a: Analysis, comps: tuple[AxisComparison, ...]) -> Mapping[str, Any]:
    return {
        "comparisons": [
            {
                "case": c.case,
                "axis": c.axis,
                "metric": c.metric,
                "text": c.text,
                "entries": [{"value": v, "test_id": t.id, "mean": t.mean(c.metric)} for v, t in c.entries],
            }
            for c in comps
        ]
    }


SECTION = SectionSpec("comparisons", 130, compute, render, to_json, outputs=frozenset({"html"}))
