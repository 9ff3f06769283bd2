"""results.csv: one row per run (warm-ups and failures included), traceable by runs.id and tests.id."""

from __future__ import annotations

import csv

from tankbench.analysis.analyse import Analysis

PARAMS = ("rw", "bs", "iodepth", "numjobs", "io", "sync_mode", "size", "rwmixread")
HEADER = ("run_row_id", "test_id", "test_number", "test_name", "target", "target_kind", "test_case", "baseline",
          *PARAMS, "run_no", "warmup", "attempt", "status", "wall_s", "expected_s", "excess_s", "drain_s",
          "mibs", "iops", "p99_ms", "corrected_mibs", "load1_max", "cpu_pct", "note")


def rows(a: Analysis) -> list[list[object]]:
    """The CSV body, in test order then run order."""
    out: list[list[object]] = []
    for t in a.dataset.tests:
        head = [t.id, t.number, t.name, t.target, t.target_kind, t.case, int(t.is_baseline),
                *(t.params.get(p, "") for p in PARAMS)]
        for r in t.runs:
            v = r.values
            out.append([r.row_id, *head, r.run_no, int(r.warmup), r.attempt, r.status, r.wall_s, r.expected_s,
                        r.excess_s, r.drain_s, v["mibs"], v["iops"], v["p99"], v["corrected"], r.load1,
                        r.cpu_pct, r.note])
    return out


def write_csv(a: Analysis, path: str) -> None:
    with open(path, "w", encoding="utf-8", newline="") as f:
        w = csv.writer(f)
        w.writerow(HEADER)
        w.writerows(rows(a))
