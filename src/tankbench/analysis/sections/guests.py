"""Guest disks beside the host, per workload (seeds 001/003; analysis/guest.py): each test guest configuration
next to the same workload on the host's zvol or dataset, with what fio, qemu and ZFS showed about durability."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from tankbench.analysis.guest import GuestRow, GuestTable, guest_tables
from tankbench.analysis.present import EXPLAIN, fmt, fmt_summary, metric_label
from tankbench.analysis.result import Analysis, Context, SectionSpec
from tankbench.analysis.section import Block, Cell, Column, Items, Para, Part, Section, Table
from tankbench.analysis.sections.runs import ratio_dict

WHY = {
    "guest / host": "mean of this guest test / mean of the best host test (zvol or dataset) of the same workload",
    "host drain (s)": EXPLAIN["drain"] + "; recorded, not judged: what the ZIL holds is already durable",
    "sync honoured": "the job's flushes reached stable storage: qemu did not drop them (cache=unsafe), ZFS did "
    "not ignore them (sync=disabled), and ZFS saw ZIL commits during the run",
    "acknowledged before durable": "runs whose final fsync took over 5 % of the I/O time (at least 1 s): the "
    "writes fio counted were buffered, not durable (seed 003's zvol run)",
}


def compute(ctx: Context) -> tuple[GuestTable, ...]:
    return guest_tables(ctx.ds, ctx.options["per_case"])


def columns(metric: str) -> tuple[Column, ...]:
    """The columns of a guest-vs-host table."""
    heads = (
        "#",
        "test",
        "side",
        "storage setup",
        f"{metric_label(metric)} (mean ± 95 % CI)",
        "guest / host",
        metric_label("end_fsync_s"),
        "host drain (s)",
        metric_label("zil_commits"),
        metric_label("slog_write_mib"),
        "sync honoured",
        "acknowledged before durable",
        metric_label("mib_per_host_cpu_s"),
    )
    return tuple(Column(h, tip=WHY.get(h, EXPLAIN.get(metric, ""))) for h in heads)


def cells(r: GuestRow, metric: str) -> tuple[Any, ...]:
    """One row: numbers stay numbers (a spreadsheet computes with them), with the text people read."""
    t = r.test
    host_cpu = t.mean("mib_per_host_cpu_s") if r.side == "guest" else None
    vs = r.vs_host.factor if r.vs_host else None
    return (
        t.number,
        t.name,
        r.side,
        r.setup,
        Cell(t.mean(metric), fmt_summary(t.stats.get(metric))),
        Cell(vs, f"{vs:.2f}×" if vs is not None else "—"),
        Cell(t.mean("end_fsync_s"), fmt(t.mean("end_fsync_s"))),
        Cell(r.drain_s, fmt(r.drain_s)),
        Cell(t.mean("zil_commits"), fmt(t.mean("zil_commits"))),
        Cell(t.mean("slog_write_mib"), fmt(t.mean("slog_write_mib"))),
        r.honoured.text,
        r.early_ack.text,
        Cell(host_cpu, fmt(host_cpu) if r.side == "guest" else "—"),
    )


def part(g: GuestTable) -> Part:
    table = Table(columns(g.metric), [cells(r, g.metric) for r in g.rows], row_styles=[r.side for r in g.rows])
    notes = sorted({n for r in g.rows for n in r.notes})
    blocks: tuple[Block, ...] = (table, Items(tuple(notes))) if notes else (table,)
    title = g.case + (f" ({g.workload})" if g.workload else "")
    return Part(title, blocks, kind="guests", attrs={"data-case": g.case})


def render(a: Analysis, tables: tuple[GuestTable, ...]) -> Section | None:
    if not tables:
        return None
    intro = Para(
        "Each test guest configuration (backing, qemu settings) next to the same workload on the host; the "
        "guest/host ratio is against the best host test. Sync columns: what fio, qemu and ZFS showed about "
        "durability (seed 003).",
        "small",
    )
    return Section("guests", "Guest disks beside the host", (intro, *(part(g) for g in tables)), sheet="guest vs host")


def to_json(a: Analysis, tables: tuple[GuestTable, ...]) -> Mapping[str, Any]:
    return {
        "guest_tables": [
            {
                "case": g.case,
                "workload": g.workload,
                "metric": g.metric,
                "best_host_test_id": g.best_host.id if g.best_host else None,
                "rows": [
                    {
                        "test_id": r.test.id,
                        "test_number": r.test.number,
                        "name": r.test.name,
                        "side": r.side,
                        "setup": r.setup,
                        "value": r.test.mean(g.metric),
                        "vs_host": ratio_dict(r.vs_host),
                        "end_fsync_s": r.test.mean("end_fsync_s"),
                        "host_drain_s": r.drain_s,
                        "zil_commits": r.test.mean("zil_commits"),
                        "slog_write_mib": r.test.mean("slog_write_mib"),
                        "mib_per_host_cpu_s": r.test.mean("mib_per_host_cpu_s"),
                        "sync_honoured": {"passed": r.honoured.passed, "runs": r.honoured.n},
                        "early_ack": {"runs": r.early_ack.passed, "of": r.early_ack.n},
                        "notes": list(r.notes),
                    }
                    for r in g.rows
                ],
            }
            for g in tables
        ]
    }


SECTION = SectionSpec("guests", 110, compute, render, to_json)
