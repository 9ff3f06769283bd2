"""fio's completion-latency histogram of one run (json+ `bins`: the count of I/Os per latency bin, in ns), merged
over jobs and grouped into powers of two for the report's bar charts (issue 32)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from tankbench.analysis.cases import TestSummary
from tankbench.analysis.figures import Figure, Series
from tankbench.fio.parse import FioOutputError, job_entries, load_fio_json
from tankbench.journal.db import Journal


def histogram(fio_json: str) -> dict[str, list[tuple[float, int]]]:
    """{direction: [(bucket's upper edge in ms, I/Os), …]} with one bucket per power of four of the latency (a
    dozen bars from µs to s), from the json+ bins of every job; {} when fio wrote no bins (plain json, an older
    run)."""
    try:
        jobs = job_entries(load_fio_json(fio_json))
    except FioOutputError:
        return {}
    out: dict[str, list[tuple[float, int]]] = {}
    for d in ("read", "write", "trim"):
        merged: dict[int, int] = {}
        for j in jobs:
            bins = ((j.get(d) or {}).get("clat_ns") or {}).get("bins") or {}
            for k, c in bins.items():
                try:
                    ns, n = int(k), int(c)
                except (TypeError, ValueError):
                    continue
                edge = 1 << (max(0, ns - 1).bit_length() + 1) // 2 * 2  # the power of four at or above it
                merged[edge] = merged.get(edge, 0) + n
        if merged:
            out[d] = [(edge / 1e6, merged[edge]) for edge in sorted(merged)]
    return out


def percent_by_bucket(h: list[tuple[float, int]]) -> list[tuple[str, float]]:
    """(label "≤ 0.26 ms", % of the I/Os) per bucket, for a bar chart."""
    total = sum(n for _, n in h) or 1
    return [(f"≤{_ms(edge)}", round(100.0 * n / total, 2)) for edge, n in h]


def _ms(x: float) -> str:
    """A bucket's edge, short enough for a bar's label: 262µs, 4.2ms, 1.1s."""
    if x >= 1000:
        return f"{x / 1000:.1f}s"
    if x >= 1:
        return f"{x:.0f}ms" if x >= 10 else f"{x:.1f}ms"
    return f"{x * 1000:.0f}µs" if x >= 0.01 else f"{x * 1000:.1f}µs"


def load_histograms(journal: Journal, tests: Sequence[TestSummary]) -> dict[str, dict[str, list[tuple[float, int]]]]:
    """{test id: histogram()} of the last measured run of each test that has json+ bins."""
    out = {}
    for t in tests:
        run = journal.last_measured_run(t.id)  # with its fio JSON
        h = histogram(run.fio_json) if run is not None and run.fio_json else {}
        if h:
            out[t.id] = h
    return out


def histogram_figure(t: TestSummary, h: Mapping[str, list[tuple[float, int]]]) -> Figure:
    """Bars per latency bucket (powers of two), one series per direction, % of that direction's I/Os."""
    edges = sorted({e for buckets in h.values() for e, _ in buckets})
    labels = tuple(f"≤{_ms(e)}" for e in edges)
    series = []
    for d, buckets in sorted(h.items()):
        total = sum(n for _, n in buckets) or 1
        share = {e: 100.0 * n / total for e, n in buckets}
        series.append(Series(d, tuple((label, share.get(e)) for label, e in zip(labels, edges, strict=True))))
    return Figure(
        f"histogram-{t.id}",
        f"#{t.number} {t.name}: completion latency",
        "bars",
        "auto",
        "latency (fio clat, json+ bins in powers of four)",
        labels,
        tuple(series),
        y_label="% of the I/Os",
        test_ids=(t.id,),
    )
