"""What the report shows of single runs beside the aggregates: the time series and fio's latency percentiles of
the last measured run of a few chosen tests, read from the journal into the Analysis (exporters read only that)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any

from tankbench.analysis.cases import TestSummary
from tankbench.analysis.result import Analysis, Context
from tankbench.fio.parse import FioOutputError, job_entries, load_fio_json
from tankbench.journal.db import Journal

MAX_SERIES_TESTS = 16  # tests whose last measured run gets time-series charts
#: the completion-latency percentiles the report plots (fio's own keys)
PCTS = ("1.000000", "10.000000", "50.000000", "90.000000", "99.000000", "99.900000", "99.990000")


def select_series_tests(a: Analysis, limit: int = MAX_SERIES_TESTS) -> list[TestSummary]:
    """Winners first, then zvol and baseline rows of the top of each board, up to `limit` tests."""
    picked: dict[str, TestSummary] = {}
    for lb in a.leaderboards:
        if lb.winner:
            picked.setdefault(lb.winner.test.id, lb.winner.test)
    for lb in a.leaderboards:
        for r in lb.rows[:5]:
            if r.test.traits.volume or r.test.is_baseline:
                picked.setdefault(r.test.id, r.test)
    return [t for t in picked.values() if t.measured][:limit]


def load_series(journal: Journal, tests: Sequence[TestSummary]) -> dict[str, tuple[int, Mapping[str, Any]]]:
    """The samples of the last measured run of each test: {test id: (runs.id, samples)}."""
    out: dict[str, tuple[int, Mapping[str, Any]]] = {}
    for t in tests:
        run = journal.last_measured_run(t.id)
        if run is not None and run.samples.get("t"):
            out[t.id] = (run.row_id, run.samples)
    return out


def load_percentiles(journal: Journal, tests: Sequence[TestSummary]) -> dict[str, dict[str, list[float]]]:
    """fio's completion-latency percentiles (ms at PCTS) of the last measured run of each test, per direction,
    from the fio JSON kept in the journal (the worst job where there are several)."""
    out: dict[str, dict[str, list[float]]] = {}
    for t in tests:
        run = journal.last_measured_run(t.id)
        if run is None or not run.fio_json:
            continue
        try:
            jobs = job_entries(load_fio_json(run.fio_json))
        except FioOutputError:
            continue
        for d in ("read", "write"):
            tables = [((j.get(d) or {}).get("clat_ns") or {}).get("percentile") or {} for j in jobs]
            if all(all(p in tb for p in PCTS) for tb in tables) and tables and (jobs[0].get(d) or {}).get("total_ios"):
                out.setdefault(t.id, {})[d] = [max(float(tb[p]) for tb in tables) / 1e6 for p in PCTS]
    return out


def with_run_detail(a: Analysis, journal: Journal) -> Analysis:
    """The analysis with the data of its sections that read single runs from the journal (the time series and
    latency percentiles of its chosen tests, the runs whose load came from client hosts, …) computed again."""
    ctx = Context(a, journal, a.options, specs={s.name: s for s in a.sections}, done=dict(a.parts))
    for s in a.sections:
        if s.journal:
            ctx.done.pop(s.name)
    return replace(a, parts={s.name: ctx.part(s) for s in a.sections})
