"""How the numbers are obtained: every figure's formula (tankbench.metrics) and the statistics, last in every
output (results.json: the registry itself)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from tankbench.analysis.present import EXPLAIN
from tankbench.analysis.result import Analysis, Context, SectionSpec
from tankbench.analysis.section import Items, Section, Span
from tankbench.metrics import REGISTRY


def render(a: Analysis, _: None) -> Section:
    items = tuple((Span(k, "b"), Span(f": {v}")) for k, v in EXPLAIN.items())
    return Section("method", "How the numbers are obtained", (Items(items),))


def to_json(a: Analysis, _: None) -> Mapping[str, Any]:
    return {
        "explain": EXPLAIN,
        "metrics": [
            {
                "key": m.key,
                "name": m.name,
                "unit": m.unit,
                "higher_is_better": m.higher_is_better,
                "formula": m.formula,
                "source": m.source,
                "runs": list(m.kinds),
            }
            for m in REGISTRY
        ],
    }


def nothing(_: Context) -> None:
    return None


SECTION = SectionSpec("method", 1000, nothing, render, to_json, outputs=frozenset({"html", "md"}))
