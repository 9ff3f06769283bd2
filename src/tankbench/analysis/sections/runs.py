"""Every run, one row each (warm-ups and failures included), traceable by runs.id and tests.id, with every axis
of its test and every registry figure measured in the journal: results.csv, the XLSX's raw sheet, and
results.json's tests (with their statistics)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from tankbench.analysis.cases import WORKLOAD, TestSummary
from tankbench.analysis.leaderboard import Ratio
from tankbench.analysis.present import EXPLAIN, ci_bounds
from tankbench.analysis.result import Analysis, Context, SectionSpec
from tankbench.analysis.section import CSV, XLSX, Column, Lazy, Section, Table
from tankbench.analysis.stats import Summary
from tankbench.bulk import gc_paused
from tankbench.metrics import METRICS

HEAD = ("run_row_id", "test_id", "test_number", "test_name", "target", "target_kind", "test_case", "baseline")
RUN = ("run_no", "warmup", "attempt", "status", "wall_s", "expected_s", "excess_s", "drain_s", "late")


def axis_columns(a: Analysis) -> tuple[str, ...]:
    """Every axis of the journal's tests: workload axes first (rw, bs, …), then the others sorted."""
    keys: dict[str, None] = {}
    for t in a.dataset.tests:
        keys.update(dict.fromkeys(t.axes()))
    keys.pop("target", None)
    keys.pop("kind", None)
    return tuple(k for k in WORKLOAD if k in keys) + tuple(sorted(k for k in keys if k not in WORKLOAD))


def figures(a: Analysis) -> tuple[str, ...]:
    """The registry figures measured in the journal, less those a run's own columns already hold (excess_s)."""
    return tuple(k for k in a.dataset.present() if k not in RUN)


def header(a: Analysis) -> tuple[str, ...]:
    """Column names: who, axes, run, registry figures, note."""
    return (*HEAD, *axis_columns(a), *RUN, *figures(a), "note")


def rows(a: Analysis) -> list[list[Any]]:
    """One list per run, in test order then run order (plain values: 100,000s of runs)."""
    axes = axis_columns(a)
    present = figures(a)
    out: list[list[Any]] = []
    with gc_paused():  # a list per run
        for t in a.dataset.tests:
            ax = t.axes()
            head = [t.id, t.number, t.name, t.target, t.target_kind, t.case, int(t.is_baseline)]
            head += [ax.get(k, "") for k in axes]
            for r in t.runs:
                v = r.values
                out.append(
                    [
                        r.row_id,
                        *head,
                        *(r.run_no, int(r.warmup), r.attempt, r.status, r.wall_s, r.expected_s, r.excess_s),
                        *(r.drain_s, int(r.late)),
                        *map(v.get, present),
                        r.note,
                    ]
                )
    return out


def render(a: Analysis, _: None) -> Section:
    tips = {k: EXPLAIN[k] for k in figures(a)}
    tips |= {
        "excess_s": EXPLAIN["excess_s"],
        "late": "1 when wall − ramp − runtime + drain exceeded the timing threshold",
    }
    cols = tuple(Column(k, tip=tips.get(k, "")) for k in header(a))
    table = Table(cols, Lazy(lambda: rows(a)), only=frozenset({CSV, XLSX}), sheet="raw", freeze=True)
    return Section("runs", "Runs", (table,))


def summary_dict(s: Summary | None) -> dict[str, Any] | None:
    if s is None:
        return None
    return {"n": s.n, "mean": s.mean, "sd": s.sd, "ci95": list(ci_bounds(s)), "values": list(s.values)}


def ratio_dict(r: Ratio | None) -> dict[str, Any] | None:
    if r is None:
        return None
    return {
        "factor": r.factor,
        "percent": r.percent,
        "significant": r.test.significant(),
        "p": r.test.p if r.test.possible else None,
        "text": r.text,
    }


def test_dict(t: TestSummary) -> dict[str, Any]:
    """A test with its axes, statistics of every registry figure, and its runs."""
    return {
        "id": t.id,
        "number": t.number,
        "name": t.name,
        "target": t.target,
        "target_kind": t.target_kind,
        "case": t.case,
        "config": t.config,
        "baseline": t.is_baseline,
        "params": dict(t.params),
        "props": dict(t.props),
        "axes": t.axes(),
        "storage_config": t.storage_config,
        "runtime": t.runtime,
        "ramp": t.ramp,
        "skip_note": t.skip_note,
        "stats": {k: summary_dict(t.stats.get(k)) for k in METRICS},
        "runs": [
            {
                "row_id": r.row_id,
                "run_no": r.run_no,
                "warmup": r.warmup,
                "attempt": r.attempt,
                "status": r.status,
                "wall_s": r.wall_s,
                "expected_s": r.expected_s,
                "excess_s": r.excess_s,
                "drain_s": r.drain_s,
                "late": r.late,
                "note": r.note,
                **r.values,
            }
            for r in t.runs
        ],
    }


def to_json(a: Analysis, _: None) -> Mapping[str, Any]:
    return {"tests": [test_dict(t) for t in a.dataset.tests]}


def nothing(_: Context) -> None:
    return None


SECTION = SectionSpec("runs", 900, nothing, render, to_json, sheet_order=0)
