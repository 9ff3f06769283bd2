"""Tests that crashed the host or its test guest (issue 18; analysis/crashes.py): a finding about the
configuration, not a measurement."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from tankbench.analysis.crashes import CrashRow, crash_rows
from tankbench.analysis.result import Analysis, Context, SectionSpec
from tankbench.analysis.section import READ, Column, Para, Section, Table


def compute(ctx: Context) -> tuple[CrashRow, ...]:
    return crash_rows(ctx.ds)


def render(a: Analysis, rows: tuple[CrashRow, ...]) -> Section | None:
    if not rows:
        return None
    guest = any(c.guest_crashes for c in rows)
    cols = (
        Column("test"),
        Column("configuration"),
        Column("crashed runs", num=True),
        Column("finished runs"),
        Column("noted"),
    )
    body = [
        (
            f"#{c.test_number} {c.test_name}",
            c.config,
            f"{c.crashes} of {c.attempts}" + (f" ({c.guest_crashes} the test guest)" if c.guest_crashes else ""),
            "skipped" if c.skipped else c.finished,
            "; ".join(c.notes) or "—",
        )
        for c in rows
    ]
    intro = (
        "Runs during which the host went down (a kernel crash, a hang, a reboot)"
        + (", or the test guest died while its host stayed up" if guest else "")
        + ": a finding about the configuration, not a measurement."
    )
    title = "Tests that crashed the host" + (" or its test guest" if guest else "")
    return Section("crashes", title, (Para(intro), Table(cols, body, only=READ, wide=False)))


def to_json(a: Analysis, rows: tuple[CrashRow, ...]) -> Mapping[str, Any]:
    return {"crashed_host": [c.as_dict() for c in rows]}


SECTION = SectionSpec("crashes", 70, compute, render, to_json)
