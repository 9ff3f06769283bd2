"""Validity warnings (analysis/checks.py), each with its fix: in every output, first after the title."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from tankbench.analysis.checks import Warning
from tankbench.analysis.result import Analysis, Context, SectionSpec
from tankbench.analysis.section import EVERY, XLSX, Column, Items, Section, Span, Table


def compute(ctx: Context) -> tuple[Warning, ...]:
    return ctx.a.warnings


def render(a: Analysis, warns: tuple[Warning, ...]) -> Section:
    items = tuple(
        (
            Span(w.severity, f"sev-{w.severity}"),
            Span(" "),
            Span(w.code, "b"),
            Span(f": {w.message.rstrip('.')}. "),
            Span("Fix:", "i"),
            Span(f" {w.fix}."),
        )
        for w in warns
    )
    cols = tuple(Column(k) for k in ("severity", "code", "message", "fix", "test_ids"))
    rows = [(w.severity, w.code, w.message, w.fix, " ".join(w.test_ids)) for w in warns]
    sheet = Table(cols, rows, only=frozenset({XLSX}), sheet="warnings", freeze=True)
    return Section("warnings", f"Warnings ({len(warns)})", (Items(items), sheet))


def to_json(a: Analysis, warns: tuple[Warning, ...]) -> Mapping[str, Any]:
    return {
        "warnings": [
            {
                "code": w.code,
                "severity": w.severity,
                "message": w.message,
                "fix": w.fix,
                "test_ids": list(w.test_ids),
                "run_rows": list(w.run_rows),
            }
            for w in warns
        ]
    }


SECTION = SectionSpec("warnings", 20, compute, render, to_json, outputs=EVERY, sheet_order=900)
