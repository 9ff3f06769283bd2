"""Load from client hosts (issue 20; analysis/clients.py): per test whose load came from clients (fio
client/server), each client's mean MiB/s beside all clients', how even they were, and what limited a network
share. Every run: the client_runs section (clients.md)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from tankbench.analysis.clients import ClientRow, client_rows
from tankbench.analysis.present import fmt
from tankbench.analysis.result import Analysis, Context, SectionSpec
from tankbench.analysis.section import READ, Cell, Column, Para, Section, Table
from tankbench.analysis.sections.client_runs import SECTION as CLIENT_RUNS
from tankbench.journal.clientruns import ClientRun


def compute(ctx: Context) -> tuple[ClientRow, ...]:
    runs: tuple[ClientRun, ...] = ctx.part(CLIENT_RUNS)
    return client_rows(runs)


def render(a: Analysis, rows: tuple[ClientRow, ...]) -> Section | None:
    if not rows:
        return None
    cols = (
        Column("test"),
        Column("runs", num=True),
        Column("each client (MiB/s)"),
        Column("all clients (MiB/s)", num=True),
        Column("even", num=True),
        Column("limit"),
    )
    body = [
        (
            f"#{c.test_number} {c.test_name} ({c.direction})",
            c.runs,
            ", ".join(f"{n} {fmt(m)}" for n, m in c.clients),
            c.total_mibs,
            Cell(c.even, "—" if c.even is None else f"{c.even:.2f}"),
            Cell(c.limit, f"{c.limit}: {c.why}" if c.limit else "—"),
        )
        for c in rows
    ]
    intro = (
        "fio client/server: every client ran the test's job at once. MiB/s are means over the test's measured runs "
        "(each run: clients.md); even = slowest client / fastest (1.00: an even share); limit: what a network "
        "share's runs were bound by (network, disks, cpu)."
    )
    return Section("clients", "Load from client hosts", (Para(intro), Table(cols, body, only=READ, wide=False)))


def to_json(a: Analysis, rows: tuple[ClientRow, ...]) -> Mapping[str, Any]:
    return {"clients": [c.as_dict() for c in rows]}


SECTION = SectionSpec("clients", 80, compute, render, to_json, journal=True)
