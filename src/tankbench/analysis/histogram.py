"""fio's completion-latency histogram of one run (json+ `bins`: the count of I/Os per latency bin, in ns), merged
over jobs and grouped into powers of two for the report's bar charts (issue 32)."""

from __future__ import annotations

from tankbench.fio.parse import FioOutputError, job_entries, load_fio_json


def histogram(fio_json: str) -> dict[str, list[tuple[float, int]]]:
    """{direction: [(bucket's upper edge in ms, I/Os), …]} with one bucket per power of two of the latency, from
    the json+ bins of every job; {} when fio wrote no bins (plain json, an older run)."""
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
                edge = 1 << max(0, ns - 1).bit_length()  # the power of two at or above the bin's value
                merged[edge] = merged.get(edge, 0) + n
        if merged:
            out[d] = [(edge / 1e6, merged[edge]) for edge in sorted(merged)]
    return out


def percent_by_bucket(h: list[tuple[float, int]]) -> list[tuple[str, float]]:
    """(label "≤ 0.26 ms", % of the I/Os) per bucket, for a bar chart."""
    total = sum(n for _, n in h) or 1
    return [(f"≤ {_ms(edge)}", round(100.0 * n / total, 2)) for edge, n in h]


def _ms(x: float) -> str:
    return f"{x:.3g} ms" if x >= 0.001 else f"{x * 1000:.3g} µs"
