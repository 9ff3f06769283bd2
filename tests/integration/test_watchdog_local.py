"""The progress watchdog with a real fio on this machine (issue 18 item 4): a stopped fio (SIGSTOP: it does
no more I/O) ends as hung after hung_after, long before the cap; a slow fio that keeps moving runs past
hung_after to its end, untouched."""

from __future__ import annotations

import json
import os
import signal
import threading
from pathlib import Path
from typing import Any

from tankbench import agent


def job(path: Path, runtime: int, rate: str = "") -> str:
    return (
        f"[w]\nfilename={path}\nsize=8M\nrw=write\nbs=4k\ntime_based=1\nruntime={runtime}\n"
        + (f"rate={rate}\n" if rate else "")
        + "ioengine=psync\n"
    )


def run(tmp_path: Path, job_text: str, hung_after: float, cap: float, capsys: Any, stop: bool = False) -> Any:
    workdir = tmp_path / "w"
    stopper: threading.Thread | None = None
    if stop:  # SIGSTOP fio and its job process once that is doing I/O

        def stop_when_running() -> None:
            while True:
                started = [json.loads(x) for x in capsys.readouterr().out.splitlines() if '"started"' in x]
                if started:
                    pgid = started[0]["pid"]
                    break
                threading.Event().wait(0.05)
            while len(pids := agent.tree_pids(pgid)) < 2:
                threading.Event().wait(0.05)
            for pid in pids:
                os.kill(pid, signal.SIGSTOP)

        stopper = threading.Thread(target=stop_when_running, daemon=True)
        stopper.start()
    agent.op_fio_run({"workdir": str(workdir), "job_text": job_text, "deadline_s": cap, "hung_after_s": hung_after})
    if stopper:
        stopper.join()
    events = [json.loads(x) for x in capsys.readouterr().out.splitlines() if x.startswith("{")]
    return events[-1]


def test_a_stopped_fio_is_ended_as_hung_not_at_the_cap(tmp_path: Path, capsys: Any) -> None:
    res = run(tmp_path, job(tmp_path / "f", runtime=600), hung_after=3, cap=240, capsys=capsys, stop=True)
    assert res["timed_out"] is True
    assert res["checks"]["watchdog.ended_by"] == "hung", res["checks"]
    assert res["checks"]["watchdog.longest_stall_s"] >= 3
    assert res["wall_s"] < 240  # ended by the stall, not by the cap
    # the evidence, read before the processes were ended: fio and its job process, both stopped (T)
    stuck = res["checks"]["watchdog.stuck"]
    assert len(stuck) >= 2 and all(p["comm"] == "fio" and p["state"] == "T" for p in stuck), stuck
    assert isinstance(res["checks"]["watchdog.kernel_log"], list)


def test_a_slow_fio_that_keeps_moving_outlives_hung_after(tmp_path: Path, capsys: Any) -> None:
    res = run(tmp_path, job(tmp_path / "f", runtime=6, rate="256k"), hung_after=2, cap=240, capsys=capsys)
    assert res["timed_out"] is False and res["exit_status"] == 0, res["stderr_tail"]
    assert res["checks"]["watchdog.ended_by"] == ""
    assert res["wall_s"] > 2  # longer than hung_after, and fio's JSON is whole
    assert json.loads(res["fio_json"])["jobs"][0]["write"]["io_bytes"] > 0
