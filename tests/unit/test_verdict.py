"""The run-result decision (status, timeout, timing issue) as a pure function, on real fio JSON."""

from __future__ import annotations

from typing import Any

import pytest

from tankbench.model import Target
from tankbench.model import Test as FioTest
from tankbench.verdict import TIMING_FLOOR_S, decide_run
from tests.conftest import FIXTURES

FIO_JSON = (FIXTURES / "fio-3.33-lab" / "fio-randwrite-nosync-buffered.json").read_text()


def _test(runtime: float = 10.0, ramp: float = 2.0, **params: Any) -> FioTest:
    p = {"rw": "randwrite", "bs": "4k", **params}
    return FioTest(
        number=1,
        name="t",
        target=Target(name="f", kind="file", path="/tmp", size=1 << 20),
        params=p,
        fio_options={},
        runtime=runtime,
        ramp=ramp,
    )


def _decide(res: dict[str, Any], test: FioTest | None = None, threshold: float = 0.1) -> Any:
    return decide_run(test or _test(), res, threshold, 64 << 20)


def test_clean_run_is_done_with_fio_numbers_and_no_timing_issue() -> None:
    v = _decide({"wall_s": 12.5, "exit_status": 0, "fio_json": FIO_JSON})
    assert v.status == "done" and not v.notes
    assert v.metrics["write.iops"] > 0 and v.metrics["total.io_bytes"] > 0
    assert v.checks == {"timing.threshold_s": TIMING_FLOOR_S, "timing.issue": False}
    assert v.metrics["timing.excess_s"] == 0.5
    # the registry's durable MiB/s: bytes over the time until they were durable, ramp excluded (metrics.py)
    assert v.metrics["timing.durable_bw_bytes"] == pytest.approx(v.metrics["total.io_bytes"] / (12.5 - 2.0))
    assert "timing.corrected_bw_bytes" not in v.metrics


def test_wall_time_beyond_threshold_is_a_timing_issue() -> None:
    t = _test(runtime=100.0, ramp=0.0)
    assert _decide({"wall_s": 110.5, "exit_status": 0, "fio_json": FIO_JSON}, t).checks["timing.issue"]
    assert not _decide({"wall_s": 109.9, "exit_status": 0, "fio_json": FIO_JSON}, t).checks["timing.issue"]
    # short tests: fio's start-up noise below the 2 s floor never counts
    assert not _decide({"wall_s": 3.9, "exit_status": 0, "fio_json": FIO_JSON}, _test(2, 0)).checks["timing.issue"]


def test_watchdog_makes_a_timeout_whatever_fio_printed() -> None:
    v = _decide({"wall_s": 80.0, "exit_status": -9, "timed_out": True, "fio_json": ""})
    assert v.status == "timeout"
    assert any("the watchdog ended the run after 80 s (expected 12 s)" in n for n in v.notes)


def test_a_hung_run_is_a_timeout_that_says_it_stopped_making_progress() -> None:
    checks = {"watchdog.ended_by": "hung", "watchdog.hung_after_s": 30.0, "watchdog.longest_stall_s": 30.4}
    v = _decide({"wall_s": 45.0, "exit_status": -15, "timed_out": True, "fio_json": "", "checks": checks})
    assert v.status == "timeout"
    assert any(n.startswith("hung: no I/O progress for 30 s (campaign.hung_after)") for n in v.notes)
    # where its processes waited is in the note: the block layer (a disk that stopped answering) or stopped
    stuck = [
        {"pid": 41, "comm": "fio", "state": "S", "wchan": "do_wait", "stack": []},
        {"pid": 42, "comm": "fio", "state": "D", "wchan": "", "stack": ["io_schedule", "blk_mq_get_tag"]},
        {"pid": 43, "comm": "fio", "state": "T", "wchan": "do_signal_stop", "stack": []},
    ]
    v = _decide(
        {"wall_s": 45.0, "timed_out": True, "fio_json": "", "checks": dict(checks, **{"watchdog.stuck": stuck})}
    )
    assert any(n.endswith("; fio 42 in the kernel at io_schedule, fio 43 stopped") for n in v.notes), v.notes
    capped = dict(checks, **{"watchdog.ended_by": "cap"})
    v = _decide({"wall_s": 7212.0, "exit_status": -15, "timed_out": True, "fio_json": "", "checks": capped})
    assert v.status == "timeout" and any("7200 s past its expected end (campaign.late_max)" in n for n in v.notes)


def test_a_late_run_that_ended_by_itself_is_done_and_its_lateness_measured() -> None:
    # seed 000: runs that finish minutes to hours late are the finding, not a failure
    v = _decide({"wall_s": 12.0 + 3600.0, "exit_status": 0, "fio_json": FIO_JSON, "drain_s": 1.0})
    assert v.status == "done" and v.checks["timing.issue"]
    assert v.metrics["timing.excess_s"] == 3600.0 and "timing.durable_bw_bytes" in v.metrics


def test_nonzero_exit_or_unreadable_json_fails() -> None:
    v = _decide({"wall_s": 12.0, "exit_status": 1, "fio_json": FIO_JSON})
    assert v.status == "failed" and "fio exited 1" in v.notes
    v = _decide({"wall_s": 12.0, "exit_status": 0, "fio_json": "fio: something went wrong"})
    assert v.status == "failed" and v.notes


def test_copy_tests_have_apparent_and_durable_speed_and_no_timing_issue() -> None:
    t = _test(workload="cp", copy_size="64M")
    v = _decide({"wall_s": 4.0, "drain_s": 4.0, "exit_status": 0}, t)
    assert v.status == "done" and not v.checks["timing.issue"] and "timing.excess_s" not in v.metrics
    assert v.metrics["copy.apparent_bw_bytes"] == 16 << 20 and v.metrics["copy.durable_bw_bytes"] == 8 << 20
    assert "total.bw_bytes" not in v.metrics, "a copy's apparent speed is not fio's bandwidth"


def test_a_late_exit_after_steady_state_ended_fio_early_is_a_timing_issue() -> None:
    """fio attained steady state after 5 s of a 100 s runtime; it exiting 40 s later is late, though before 100 s."""
    import json

    doc = json.loads(FIO_JSON[FIO_JSON.index("{") :])
    for job in doc["jobs"]:
        job["steadystate"] = {"ss": "iops:5%", "duration": 3, "attained": 1}
    steady = json.dumps(doc)
    t = _test(runtime=100.0, ramp=2.0)
    late = _decide({"wall_s": 47.0, "exit_status": 0, "fio_json": steady}, t)
    assert late.checks["timing.issue"] and late.checks["timing.fio_ran_s"] == pytest.approx(7.005)
    on_time = _decide({"wall_s": 7.5, "exit_status": 0, "fio_json": steady}, t)
    assert not on_time.checks["timing.issue"]
    # without steady state the same fio JSON is judged against ramp + runtime, as before
    assert not _decide({"wall_s": 47.0, "exit_status": 0, "fio_json": FIO_JSON}, t).checks["timing.issue"]
    # the report's late flag uses the same end (analysis.cases.run_view)
    from tankbench.analysis.cases import run_view
    from tankbench.analysis.settings import parse_settings

    row = {
        "id": 1, "test_id": "t", "run_no": 1, "warmup": 0, "attempt": 1, "status": "done", "started": 0.0,
        "fingerprint_id": "", "expected_s": 102.0, "wall_s": 47.0, "drain_s": 0.0, "note": "",
        "metrics": {"fio.runtime_s": 5.005}, "checks": {"steadystate.attained": True},
    }  # fmt: skip
    assert run_view(row, 2.0, parse_settings("", "x")).late
    assert not run_view(dict(row, checks={}), 2.0, parse_settings("", "x")).late
