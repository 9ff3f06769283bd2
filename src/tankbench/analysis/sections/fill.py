"""The "Pool full" table (seed 003; analysis/fill.py): per fill run, what the guest saw when the pool filled and
whether what it had written survived. A fill run is an experiment, never ranked."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from tankbench.analysis.fill import FillRow, fill_rows, yes_no
from tankbench.analysis.result import Analysis, Context, SectionSpec
from tankbench.analysis.section import READ, Cell, Column, Para, Section, Span, Table


def compute(ctx: Context) -> tuple[FillRow, ...]:
    return fill_rows(ctx.ds)


def render(a: Analysis, rows: tuple[FillRow, ...]) -> Section | None:
    if not rows:
        return None
    cols = (
        Column("test"),
        Column("backing"),
        Column("werror"),
        Column("guest saw"),
        Column("host error (qemu)"),
        Column("written before the stop", num=True),
        Column("intact"),
        Column("run"),
    )
    body = [
        (
            f"#{f.test_number} {f.test_name}",
            f.backing,
            f.werror,
            Cell(f.guest_saw, f.saw_text, tip=f.detail),
            f.host_error or "—",
            Cell(f.before_stop_mib, "—" if f.before_stop_mib is None else f"{f.before_stop_mib:.0f} MiB"),
            yes_no(f.intact),
            f.status,
        )
        for f in rows
    ]
    intro = (
        Span("The guest wrote until the pool was full ("),
        Span('workload = "fill"', "code"),
        Span("): what it saw, and whether what it had written reads back intact (fio verify)."),
    )
    return Section("pool-full", "Pool full", (Para(intro), Table(cols, body, only=READ, wide=False)))


def to_json(a: Analysis, rows: tuple[FillRow, ...]) -> Mapping[str, Any]:
    return {"pool_full": [f.as_dict() for f in rows]}


SECTION = SectionSpec("fill", 60, compute, render, to_json)
