"""`campaign.design`: which of the matrix's tests a run measures (issue 29; schedule/design.py does the choosing).

design = "screening"
design = { step = "screening", top = 3, runs = 12, workload = ["rw", "bs"] }
"""

from __future__ import annotations

from typing import Any

from tankbench.campaign.schema import DESIGN_STEPS, Design
from tankbench.campaign.vocab import AXES
from tankbench.keys import Keys

DESIGN_KEYS = ("step", "top", "runs", "workload")

_HINT = (
    'design = "screening" measures a D-optimal fraction of each workload\'s tests and ranks the factors; '
    "`tankbench refine JOURNAL` then measures the top ones in full (docs/schedule.md, Designs)"
)


def parse_design(keys: Keys, value: object) -> Design:
    """The design as a step name or a table; refine is not a campaign's step (it follows a screening)."""
    if isinstance(value, str):
        return Design(step=_step(keys, "campaign.design", value))
    if not isinstance(value, dict):
        raise keys.err("campaign.design", value, 'must be "exhaustive", "screening" or a table', _HINT)
    keys.unknown_keys(value, DESIGN_KEYS, "campaign.design.")
    step = _step(keys, "campaign.design.step", value.get("step", "screening"))
    top = keys.integer("campaign.design.top", value.get("top", 3), 1, 32)
    runs = keys.integer("campaign.design.runs", value.get("runs", 0), 0, 100_000)
    workload = _workload(keys, value.get("workload", list(Design().workload)))
    return Design(step=step, top=top, runs=runs, workload=workload)


def _step(keys: Keys, key: str, value: Any) -> str:
    if value == "refine":
        raise keys.err(
            key,
            value,
            "is not a step a campaign file runs",
            'run the campaign with design = "screening", then `tankbench refine JOURNAL` (it chooses the tests '
            "from the screening's results)",
        )
    if value not in DESIGN_STEPS:
        raise keys.err(key, value, 'must be "exhaustive" or "screening"', _HINT)
    return str(value)


def _workload(keys: Keys, value: object) -> tuple[str, ...]:
    key = "campaign.design.workload"
    if not isinstance(value, list) or not value or not all(isinstance(v, str) for v in value):
        raise keys.err(key, value, "must be a list of axis names", 'e.g. workload = ["rw", "bs"]')
    for v in value:
        if v not in AXES:
            raise keys.err(key, v, "is not a matrix axis", 'e.g. workload = ["rw", "bs", "iodepth"]')
    return tuple(dict.fromkeys(["workload", *value]))
