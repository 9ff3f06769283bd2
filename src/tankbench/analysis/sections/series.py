"""Single runs beside the aggregates (analysis/detail.py): the 1 Hz samples of the last measured run of a few
chosen tests as small time-series charts, fio's own per-second IOPS and latency with the txg syncs marked, its
latency histogram (json+), and their fio latency percentiles (the figures section plots them)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from tankbench.analysis.detail import MAX_SERIES_TESTS, load_percentiles, load_series, select_series_tests
from tankbench.analysis.histogram import histogram_figure, load_histograms
from tankbench.analysis.result import Analysis, Context, SectionSpec
from tankbench.analysis.section import Block, Figures, Lines, Para, Part, Section, Span

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
    #: {test id: {direction: [(bucket's upper edge in ms, I/Os)]}}: fio's json+ histogram (analysis/histogram.py)
    histograms: Mapping[str, Mapping[str, list[tuple[float, int]]]] = field(default_factory=dict)


#: fio's own per-second series (fio/jobs.py run_job_text's logs), on fio's time axis (seconds after the ramp)
FIO_SERIES = (
    ("fio_read_iops", "fio read IOPS"),
    ("fio_write_iops", "fio write IOPS"),
    ("fio_read_lat_ms", "fio read latency, ms"),
    ("fio_write_lat_ms", "fio write latency, ms"),
)
FIO_NOTE = "fio's own IOPS and latency per second (its logs, averaged over 1 s), seconds after the ramp"
TXG_NOTE = "; shaded: when ZFS synced a transaction group (the txgs kstat), the spans where writes wait for the pool"


def fio_charts(s: Mapping[str, Any]) -> tuple[tuple[str, str, tuple[float, ...], tuple[float | None, ...]], ...]:
    """fio's per-second series of one run as charts on fio's time axis."""
    t = tuple(s.get("fio_t") or ())
    return tuple((k, title, t, tuple(s[k])) for k, title in FIO_SERIES if s.get(k) and len(s[k]) == len(t))


def txg_marks(s: Mapping[str, Any]) -> tuple[tuple[float, float], ...]:
    """(start, length in s) of each txg sync of the run, on fio's time axis."""
    starts, lengths = s.get("txg_sync_start_s") or (), s.get("txg_sync_s") or ()
    return tuple((float(a), float(b)) for a, b in zip(starts, lengths))


def compute(ctx: Context) -> RunDetail:
    if ctx.journal is None:
        return RunDetail()
    picked = select_series_tests(ctx.a)
    histograms = load_histograms(ctx.journal, picked)
    return RunDetail(load_series(ctx.journal, picked), load_percentiles(ctx.journal, picked), histograms)


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
        fio = fio_charts(s)
        charts = tuple((k, title, tuple(s.get("t", [])), tuple(s[k])) for k, title in SERIES if s.get(k))
        title = (Span(f"#{t.number} {t.name} "), Span(f"runs.id {row}, {t.case}", "small"))
        parts: list[Block] = []
        if fio:
            marks = txg_marks(s)
            note = FIO_NOTE + (TXG_NOTE if marks else "") + "."
            parts += [Para(note, "small"), Lines(fio, marks=dict.fromkeys((c[0] for c in fio), marks))]
        if tid in d.histograms:
            parts.append(Figures((histogram_figure(t, d.histograms[tid]),)))
        parts.append(Lines(charts))
        blocks.append(Part(title, tuple(parts)))
    return Section("series", "Time series", tuple(blocks))


SECTION = SectionSpec("series", 150, compute, render, outputs=frozenset({"html"}), journal=True)
