"""Single runs beside the aggregates (analysis/detail.py): the 1 Hz samples of the last measured run of a few
chosen tests as small time-series charts, and their fio latency percentiles (the figures section plots them)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from tankbench.analysis.detail import MAX_SERIES_TESTS, load_percentiles, load_series, select_series_tests
from tankbench.analysis.result import Analysis, Context, SectionSpec
from tankbench.analysis.section import Block, Lines, Para, Part, Section, Span

SERIES = (
    ("load1", "load average (1 min)"),
    ("dev_iops", "device IOPS"),
    ("dev_avg_io_bytes", "avg I/O size, bytes"),
    ("arc_hits_per_s", "ARC hits/s"),
    ("arc_misses_per_s", "ARC misses/s"),
    ("cpu_iowait_pct", "CPU iowait %"),
    ("dirty_bytes", "dirty bytes"),
)


@dataclass(frozen=True)
class RunDetail:
    """{test id: (runs.id, 1 Hz samples)} and {test id: {direction: latency percentiles in ms}} of the last
    measured run of each chosen test."""

    series: Mapping[str, tuple[int, Mapping[str, Any]]] = field(default_factory=dict)
    percentiles: Mapping[str, Mapping[str, list[float]]] = field(default_factory=dict)


def compute(ctx: Context) -> RunDetail:
    if ctx.journal is None:
        return RunDetail()
    picked = select_series_tests(ctx.a)
    return RunDetail(load_series(ctx.journal, picked), load_percentiles(ctx.journal, picked))


def render(a: Analysis, d: RunDetail) -> Section:
    by_id = a.dataset.by_id()
    blocks: list[Block] = [
        Para(
            f"Per-run 1 Hz samples of the last measured run of up to {MAX_SERIES_TESTS} tests (leaderboard winners, "
            "then zvol and baseline rows near the top); other runs are in the journal.",
            "small",
        )
    ]
    if not d.series:
        blocks.append(Para("No time series in this journal (imported or sampler-less runs): not measured."))
    for tid, (row, s) in d.series.items():
        t = by_id[tid]
        charts = tuple((k, title, tuple(s.get("t", [])), tuple(s[k])) for k, title in SERIES if s.get(k))
        title = (Span(f"#{t.number} {t.name} "), Span(f"runs.id {row}, {t.case}", "small"))
        blocks.append(Part(title, (Lines(charts),)))
    return Section("series", "Time series", tuple(blocks))


SECTION = SectionSpec("series", 150, compute, render, outputs=frozenset({"html"}), journal=True)
