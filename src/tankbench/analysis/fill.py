"""The "pool full" table: what each fill run's guest saw when the pool filled (seed 003), per backing.

A fill run is an experiment, not a measurement: it never enters a leaderboard (Dataset.cases leaves fill
tests out); the report shows this table instead, one row per run.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from tankbench.analysis.cases import Dataset, TestSummary


@dataclass(frozen=True)
class FillRow:
    """One fill run: the backing and qemu policy, what the guest saw, and whether its data survived."""

    test_id: str
    test_number: int
    test_name: str
    run_no: int
    status: str
    backing: str  # zvol | qcow2 | raw (with the cluster size for qcow2)
    werror: str  # qemu's effective write-error policy
    guest_saw: str  # io-error | paused | none
    pauses: int
    resumed: bool | None
    intact: bool | None
    before_stop_mib: float | None
    verified_mib: float | None
    host_error: str  # what qemu got from the host, e.g. "No space left on device"
    detail: str  # fio's error, or the verify error
    note: str

    def as_dict(self) -> dict[str, Any]:
        """JSON-ready."""
        return dict(self.__dict__)

    @property
    def saw_text(self) -> str:
        """What the guest saw, in words: "paused 1x, resumed", "I/O error: EIO (5)", "nothing"."""
        if self.guest_saw == "paused":
            return f"paused {self.pauses}x, " + ("resumed" if self.resumed else "NOT resumed")
        if self.guest_saw == "io-error":
            return f"I/O error: {self.detail.split(':')[0]}" if self.detail else "I/O error"
        return "nothing" if self.status == "done" else "—"


def _backing(t: TestSummary) -> str:
    p = t.params
    b = str(p.get("backing", "zvol"))
    return f"{b} {p['qcow2_cluster']}" if b == "qcow2" and "qcow2_cluster" in p else b


def _host_error(errors: Any) -> str:
    if not isinstance(errors, list) or not errors:
        return ""
    first = errors[0] if isinstance(errors[0], Mapping) else {}
    return f"{first.get('reason', '')} ({first.get('action', '')}, {sum(int(e.get('count', 0)) for e in errors)}x)"


def fill_rows(ds: Dataset) -> tuple[FillRow, ...]:
    """One row per finished fill run (not warm-ups), in test and run order."""
    out: list[FillRow] = []
    for t in ds.tests:
        if not t.is_fill:
            continue
        for r in t.runs:
            if r.warmup or r.status == "running":
                continue
            x, v = r.extra, r.values
            saw = str(x.get("fill.guest_saw", ""))
            out.append(
                FillRow(
                    test_id=t.id,
                    test_number=t.number,
                    test_name=t.name,
                    run_no=r.run_no,
                    status=r.status,
                    backing=_backing(t),
                    werror=str(x.get("fill.werror", "")),
                    guest_saw=saw,
                    pauses=int(v.get("fill_pauses") or 0),
                    resumed=x.get("fill.resumed"),
                    intact=x.get("fill.intact"),
                    before_stop_mib=v.get("fill_before_stop_mib"),
                    verified_mib=v.get("fill_verified_mib"),
                    host_error=_host_error(x.get("fill.host_errors")),
                    detail=str(x.get("fill.fio_error") or x.get("fill.verify_error") or ""),
                    note=r.note,
                )
            )
    return tuple(out)


def yes_no(v: bool | None) -> str:
    """True/False/None as a table cell."""
    return "—" if v is None else ("yes" if v else "NO")
