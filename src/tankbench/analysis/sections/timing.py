"""Timing (seed 000's KPI): the runs that finished latest after ramp + runtime, expected against wall, fio's
MiB/s against durable MiB/s."""

from __future__ import annotations

import heapq

from tankbench.analysis.cases import RunView, TestSummary
from tankbench.analysis.present import EXPLAIN, fmt
from tankbench.analysis.result import Analysis, Context, SectionSpec
from tankbench.analysis.section import Cell, Column, Para, Section, Table

SHOWN = 40


def compute(ctx: Context) -> tuple[tuple[TestSummary, RunView], ...]:
    """The SHOWN latest runs, latest first."""
    late = heapq.nsmallest(  # sorted(...)[:SHOWN], stable as sorted is, without sorting 100,000s of runs
        SHOWN,
        (
            (t, r)
            for t in ctx.ds.tests
            if not t.is_fill  # size-based experiment: no runtime to be late against
            for r in t.runs
            if r.wall_s is not None and r.status == "done"  # excess_s is None exactly when wall_s is
        ),
        key=lambda tr: -(tr[1].excess_s or 0.0),
    )
    return tuple(late)


def render(a: Analysis, late: tuple[tuple[TestSummary, RunView], ...]) -> Section:
    if not late:
        return Section("timing", "Timing", (Para("No wall-clock times in this journal: not measured."),))
    cols = (
        Column("test"),
        Column("runs.id", num=True),
        Column("expected s", num=True),
        Column("wall s", num=True),
        Column("late by s", num=True),
        Column("drain s", num=True),
        Column("fio MiB/s", num=True),
        Column("durable MiB/s", num=True),
    )
    rows = []
    for t, r in late:
        pct = (r.excess_s or 0) / r.expected_s * 100 if r.expected_s else 0
        excess = Cell(r.excess_s, f"{fmt(r.excess_s)} ({pct:.0f} %)", tip=EXPLAIN["excess_s"])
        durable = Cell(r.values.get("durable_mibs"), fmt(r.values.get("durable_mibs")), tip=EXPLAIN["durable_mibs"])
        mibs, drain = Cell(r.values.get("mibs"), fmt(r.values.get("mibs"))), Cell(r.drain_s, fmt(r.drain_s))
        rows.append((f"#{t.number} {t.name}", r.row_id, r.expected_s, r.wall_s, excess, drain, mibs, durable))
    intro = Para(f"The {len(late)} runs that finished latest after ramp + runtime.", "small")
    return Section("timing", "Timing", (intro, Table(cols, rows, wide=False)))


SECTION = SectionSpec("timing", 140, compute, render, outputs=frozenset({"html"}))
