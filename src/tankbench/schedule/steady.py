"""fio's steady-state block as run checks."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any


def steady_state_checks(doc: Mapping[str, Any]) -> dict[str, Any]:
    """fio's `steadystate` block of each job -> checks; {} when the job did not ask for steady state.

    `steadystate.attained` is true only if every job attained it (fio ends a job early once it has)."""
    jobs = [j for j in doc.get("jobs", []) if isinstance(j, dict) and isinstance(j.get("steadystate"), dict)]
    if not jobs:
        return {}
    blocks = [j["steadystate"] for j in jobs]
    first = blocks[0]
    return {
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
