"""fio's steady-state block as run checks."""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from typing import Any


def window_figures(samples: Sequence[object]) -> dict[str, float]:
    """Both of fio's steady-state measures of one window of per-second samples, whichever rule ended the run
    (steadystate.c, as percent of the window's mean): `spread_pct`, the largest deviation from the mean (`iops:`,
    `bw:`), and `slope_pct`, the least-squares slope per second (`iops_slope:`, `bw_slope:`); across the window
    the slope moved the rate by `slope_pct` x (samples - 1). {} for fewer than 2 samples or a mean of 0 (a stall)."""
    ys = [float(y) for y in samples if isinstance(y, int | float) and not isinstance(y, bool) and math.isfinite(y)]
    n = len(ys)
    if n < 2 or n != len(samples):
        return {}
    mean = math.fsum(ys) / n
    if mean <= 0:
        return {}
    xbar = (n - 1) / 2
    slope = math.fsum((i - xbar) * (y - mean) for i, y in enumerate(ys)) / math.fsum((i - xbar) ** 2 for i in range(n))
    return {
        "spread_pct": round(100.0 * max(abs(y - mean) for y in ys) / mean, 3),
        "slope_pct": round(100.0 * slope / mean, 4),
    }


def steady_state_checks(doc: Mapping[str, Any]) -> dict[str, Any]:
    """fio's `steadystate` block of each job -> checks; {} when the job did not ask for steady state.

    `steadystate.attained` is true only if every job attained it (fio ends a job early once it has)."""
    jobs = [j for j in doc.get("jobs", []) if isinstance(j, dict) and isinstance(j.get("steadystate"), dict)]
    if not jobs:
        return {}
    blocks = [j["steadystate"] for j in jobs]
    first = blocks[0]
    data = first.get("data")
    kind = "bw" if str(first.get("ss", "")).startswith("bw") else "iops"
    window = data.get(kind) if isinstance(data, dict) else None
    window = window if isinstance(window, list) else []
    figures = {f"steadystate.window_{k}": v for k, v in window_figures(window).items()}
    return {
        **figures,
        "steadystate.criterion": str(first.get("ss", "")),
        "steadystate.duration_s": first.get("duration"),
        "steadystate.attained": all(bool(b.get("attained")) for b in blocks),
        "steadystate.measured": str(first.get("criterion", "")),
        "steadystate.max_deviation": first.get("max_deviation"),
        "steadystate.slope": first.get("slope"),
    }


def steady_state_from_text(fio_json: str) -> dict[str, Any]:
    """steady_state_checks of fio's JSON text; {} when there is none or it does not parse (the run's verdict
    reports unreadable output already)."""
    start = fio_json.find("{")
    if start < 0:
        return {}
    try:
        doc = json.loads(fio_json[start:])
    except ValueError:
        return {}
    return steady_state_checks(doc) if isinstance(doc, dict) else {}
