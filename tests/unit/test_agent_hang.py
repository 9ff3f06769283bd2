"""Slow or hung (issue 34 item 1): when the watchdog saw nothing move for hung_after, the agent tells a host whose I/O
hangs (a run's process in D state, the kernel's hung-task lines, a fio SIGKILL did not end) from a run that is merely
stuck (SIGSTOP: state T), and says what it saw; read against a fake /proc (the real thing: tests/lab)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tankbench import agent
from tests.unit.test_agent_readers import fake_proc

# vdb: 3 requests in flight, vdc: none (the 12th field of /proc/diskstats)
DISKSTATS = (
    " 253      16 vdb 100 0 800 10 200 0 1600 20 3 30 30 0 0 0 0\n"
    " 253      32 vdc 100 0 800 10 200 0 1600 20 0 30 30 0 0 0 0\n"
)
HUNG_LINE = "[Thu Nov 26 19:00:00 2026] INFO: task fio:1234 blocked for more than 120 seconds."


@pytest.fixture
def proc(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    p = fake_proc(tmp_path, disk=DISKSTATS)
    monkeypatch.setattr(agent, "PROC", str(p))
    return p


def stuck(state: str) -> list[dict[str, object]]:
    return [{"pid": 1234, "comm": "fio", "state": state, "wchan": "io_schedule", "stack": ["zio_wait"]}]


def test_in_flight_reads_the_diskstats_field(proc: Path) -> None:
    assert agent.in_flight(["vdb", "vdc", "vdd"]) == {"vdb": 3, "vdc": 0}


def test_a_process_in_d_state_with_nothing_moving_is_a_hung_host(proc: Path) -> None:
    out = agent.hang_checks(stuck("D"), [], False, ["vdb", "vdc"])
    assert out["hang.host"] is True and out["hang.in_flight"] == {"vdb": 3}
    assert out["hang.d_state"][0]["wchan"] == "io_schedule"
    assert out["hang.evidence"] == "fio (pid 1234) in D state, waiting in io_schedule; requests in flight on vdb (3)"


def test_the_kernels_hung_task_lines_or_an_unkillable_fio_are_a_hung_host(proc: Path) -> None:
    out = agent.hang_checks(stuck("S"), ["some line", HUNG_LINE], False, ["vdc"])
    assert out["hang.host"] is True and out["hang.kernel_lines"] == [HUNG_LINE]
    assert "kernel: [Thu Nov 26" in out["hang.evidence"] and "no request in flight" in out["hang.evidence"]
    out = agent.hang_checks([], [], True, [])
    assert out["hang.host"] is True and "did not end 30 s after SIGKILL" in out["hang.evidence"]


def test_a_stopped_run_is_only_a_hung_run(proc: Path) -> None:
    """SIGSTOP: state T, no hung-task line, fio ends: the run is ended (timeout) as before, the host is fine."""
    assert agent.hang_checks(stuck("T"), ["unrelated"], False, ["vdb"]) == {"hang.host": False}
