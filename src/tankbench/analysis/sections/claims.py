"""The campaign's claims, on top of every output (analysis/claims.py; docs/claims.md): per claim its verdict (holds /
does not hold / undecided), the ratio and its 95 % interval, the tests and runs it rests on, the warnings of its own
tests that weaken it and, when undecided, what more it needs. results.json: `claims`, each a Verdict.as_dict()."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from tankbench.analysis.claims import UNDECIDED, Verdict, verdicts
from tankbench.analysis.result import Analysis, Context, SectionSpec
from tankbench.analysis.section import Cell, Column, Items, Para, Section, Span, Table, Text

#: the verdict's style (HTML class; Markdown shows it bold)
STYLE = {"holds": "b", "does not hold": "b", UNDECIDED: "i"}


def compute(ctx: Context) -> tuple[Verdict, ...]:
    return verdicts(ctx.ds, ctx.a.warnings)


def _item(v: Verdict) -> Text:
    spans = [Span(v.name, "b"), Span(": "), Span(v.sentence(), STYLE.get(v.verdict, ""))]
    spans.append(Span(f" — {v.claim}; {len(v.tests)} test(s), {v.runs} run(s)", "small", v.method))
    for w in v.weakened_by:
        spans.append(Span(f"; weakened by {w}", "small"))
    for n in v.notes:
        spans.append(Span(f"; {n}", "small"))
    return tuple(spans)


def _table(found: tuple[Verdict, ...]) -> Table:
    cols = (
        Column("claim"),
        Column("verdict"),
        Column("ratio", num=True, tip="first level / second (a constant claim: the best test / the constant)"),
        Column("ci95_low", num=True),
        Column("ci95_high", num=True),
        Column("expect"),
        Column("metric"),
        Column("tests", num=True),
        Column("runs", num=True),
        Column("weakened_by"),
        Column("needs"),
        Column("method"),
    )
    rows = [
        (
            v.name,
            v.verdict,
            Cell(v.ratio),
            Cell(v.low),
            Cell(v.high),
            v.expect,
            v.metric,
            len(v.tests),
            v.runs,
            "; ".join(v.weakened_by),
            v.needs,
            v.method,
        )
        for v in found
    ]
    return Table(cols, rows, only=frozenset({"xlsx"}), sheet="claims")


def render(a: Analysis, found: tuple[Verdict, ...]) -> Section | None:
    if not found:
        return None
    lead = Para(
        "Each claim's verdict on these runs, from where its whole 95 % interval lies against what it expects "
        "(docs/claims.md); `tankbench check` runs only the tests that decide them.",
        "small",
    )
    return Section("claims", "Claims", (lead, Items(tuple(_item(v) for v in found)), _table(found)))


def to_json(a: Analysis, found: tuple[Verdict, ...]) -> Mapping[str, Any]:
    return {"claims": [v.as_dict() for v in found]}


SECTION = SectionSpec("claims", 2, compute, render, to_json)
