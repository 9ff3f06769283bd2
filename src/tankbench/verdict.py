"""How a run ended, decided from what the agent returned: a pure function (status, timeout, timing issue)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from tankbench.fio.layout import ends_with_fsync, size_based
from tankbench.fio.parse import FioOutputError, end_fsync_seconds, load_fio_json, metrics_from_fio
from tankbench.guestconf.fill import fill_status
from tankbench.metrics import copy_metrics, derive, fio_ran_s
from tankbench.model import Test

TIMING_FLOOR_S = 2.0  # wall-time excess below this is fio start-up noise, never a timing issue


@dataclass(frozen=True)
class Verdict:
    """A run's status, the metrics made from fio's JSON (or the copy command), timing checks and notes."""

    status: str
    wall_s: float
    metrics: Mapping[str, float] = field(default_factory=dict)
    checks: Mapping[str, Any] = field(default_factory=dict)
    notes: tuple[str, ...] = ()


def stuck_note(checks: Mapping[str, Any]) -> str:
    """Where a hung run's processes waited when the watchdog ended them ("" when it did not look): the
    processes in uninterruptible sleep (D: waiting for I/O inside the kernel) or stopped (T)."""
    waits = []
    for p in checks.get("watchdog.stuck") or []:
        if p.get("state") in ("D", "T", "t"):
            where = p.get("wchan") or (p.get("stack") or ["?"])[0]
            what = "stopped" if p["state"] in ("T", "t") else f"in the kernel at {where}"
            waits.append(f"{p.get('comm', '?')} {p.get('pid')} {what}")
    return "; " + ", ".join(waits) if waits else ""


def watchdog_note(test: Test, res: Mapping[str, Any]) -> str:
    """Why the watchdog ended a run: it stopped making progress (hung), or it was still going at the cap."""
    checks = res.get("checks", {})
    wall = float(res.get("wall_s") or 0.0)
    if checks.get("watchdog.ended_by") == "hung":
        return (
            f"hung: no I/O progress for {float(checks['watchdog.hung_after_s']):.0f} s (campaign.hung_after); "
            f"the watchdog ended fio after {wall:.0f} s (expected {test.expected_s:.0f} s)" + stuck_note(checks)
        )
    if checks.get("watchdog.ended_by") == "cap":
        return (
            f"still running at the cap: the watchdog ended fio after {wall:.0f} s, "
            f"{wall - test.expected_s:.0f} s past its expected end (campaign.late_max)"
        )
    return f"the watchdog ended the run after {wall:.0f} s (expected {test.expected_s:.0f} s)"


def decide_run(test: Test, res: Mapping[str, Any], timing_threshold: float, copy_size: int) -> Verdict:
    """Status and numbers of one run from the agent's `fio_run` result.

    `done` unless fio's JSON is missing/unreadable or reports an error, fio exited non-zero (`failed`), or the
    watchdog ended it (`timeout`: hung, or past campaign.late_max). A late run that ended by itself is `done`
    and measured: its lateness is `timing.excess_s`. A timing issue is wall time beyond ramp + runtime by more than
    max(timing_threshold x expected, 2 s); copy tests have no expected duration. Derived figures come from the
    metrics registry (metrics.py), the one definition every output uses.
    """
    metrics: dict[str, float] = dict(res.get("metrics", {}))
    if test.is_fill:  # the pool-full experiment: what the guest saw is its result (guestconf/fill.py)
        status, fill_notes = fill_status(metrics, res.get("checks", {}))
        if res.get("timed_out"):
            status, fill_notes = "timeout", (*fill_notes, watchdog_note(test, res))
        return Verdict(status=status, wall_s=float(res["wall_s"]), metrics=metrics, notes=fill_notes)
    notes: list[str] = []
    status = "done"
    wall = float(res["wall_s"])
    steady = False  # fio's steady state ended every job early
    if test.is_copy:
        metrics.update(copy_metrics(copy_size, wall, float(res.get("drain_s", 0.0))))
    else:
        status, steady = read_fio(test, res, metrics, notes)
    if res.get("exit_status") not in (0, None) and status == "done":
        status = "failed"
    if res.get("exit_status"):
        notes.append(f"fio exited {res['exit_status']}")
    if res.get("timed_out"):
        status = "timeout"
        notes.append(watchdog_note(test, res))
    threshold = max(timing_threshold * test.expected_s, TIMING_FLOOR_S)
    timed = not test.is_copy and test.params.get("mode") != "size"  # size-based runs have no expected duration
    ran = fio_ran_s(test.ramp, test.expected_s, metrics.get("fio.runtime_s")) if steady else test.expected_s
    checks: dict[str, Any] = {
        "timing.threshold_s": round(threshold, 3),
        "timing.issue": wall - ran > threshold and timed,
    }
    if timed and ran < test.expected_s:  # steady state ended fio early: a late exit is late against that end
        checks["timing.fio_ran_s"] = round(ran, 3)
    derived = derive(
        metrics,
        wall_s=wall,
        expected_s=test.expected_s,
        ramp_s=test.ramp,
        drain_s=float(res.get("drain_s") or 0.0),
        is_copy=test.is_copy,
    )
    if not timed:  # a size-based run has no expected duration: no excess to speak of
        derived.pop("timing.excess_s", None)
    metrics.update(derived)
    return Verdict(status=status, wall_s=wall, metrics=metrics, checks=checks, notes=tuple(notes))


def read_fio(test: Test, res: Mapping[str, Any], metrics: dict[str, float], notes: list[str]) -> tuple[str, bool]:
    """fio's JSON of a run into `metrics` (and the time of its final fsync); (status, whether fio's steady state
    ended every job early). `failed` when the JSON is missing or unreadable, or fio reports an error."""
    steady = False
    try:
        doc = load_fio_json(res.get("fio_json", ""))
        metrics.update(metrics_from_fio(doc))
        blocks = [j.get("steadystate") for j in doc.get("jobs", []) if isinstance(j, dict)]
        steady = bool(blocks) and all(isinstance(b, dict) and b.get("attained") for b in blocks)
        if ends_with_fsync(test):  # fio counts its final fsync in the runtime and reports nothing else of it
            numjobs = int(test.params.get("numjobs", 1))
            tail = end_fsync_seconds(doc, numjobs, test.runtime, not size_based(test), res.get("io_log_last"))
            if tail is not None:
                metrics["sync.end_fsync_s"] = tail
    except FioOutputError as e:
        notes.append(str(e))
        return "failed", steady
    if metrics.get("fio.error"):
        notes.append(f"fio reported error {int(metrics['fio.error'])}")
        return "failed", steady
    return "done", steady
