"""results.csv: one row per run (warm-ups and failures included), traceable by runs.id and tests.id; every axis
of the test (params and target properties: recordsize, compression, sync, logbias, slog, layout, cache, …) and
every registry figure measured in the journal (tankbench.metrics) is a column."""

from __future__ import annotations

import csv
from typing import Any

from tankbench.analysis.analyse import Analysis
from tankbench.analysis.cases import WORKLOAD
from tankbench.bulk import gc_paused

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


def header(a: Analysis) -> tuple[str, ...]:
    """Column names: who, axes, run, registry figures, note."""
    return (*HEAD, *axis_columns(a), *RUN, *a.dataset.present(), "note")


def rows(a: Analysis) -> list[list[Any]]:
    """The CSV body, in test order then run order."""
    axes = axis_columns(a)
    present = a.dataset.present()
    out: list[list[Any]] = []
    for t in a.dataset.tests:
        ax = t.axes()
        head = [
            t.id,
            t.number,
            t.name,
            t.target,
            t.target_kind,
            t.case,
            int(t.is_baseline),
            *(ax.get(k, "") for k in axes),
        ]
        for r in t.runs:
            v = r.values
            out.append(
                [
                    r.row_id,
                    *head,
                    r.run_no,
                    int(r.warmup),
                    r.attempt,
                    r.status,
                    r.wall_s,
                    r.expected_s,
                    r.excess_s,
                    r.drain_s,
                    int(r.late),
                    *map(v.get, present),
                    r.note,
                ]
            )
    return out


def write_csv(a: Analysis, path: str) -> None:
    with open(path, "w", encoding="utf-8", newline="") as f:
        w = csv.writer(f)
        w.writerow(header(a))
        with gc_paused():  # a list per run
            body = rows(a)
        w.writerows(body)
