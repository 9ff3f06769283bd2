"""The agent's `holders` and `end_pids` (issue 34 item 2): who holds a directory (a dataset's mountpoint) or a block
device, tankbench's own fio told apart from anything else by its job's path, and ended with every process under it."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from tankbench import agent


def result(capsys: pytest.CaptureFixture[str]) -> dict[str, Any]:
    events = [json.loads(line) for line in capsys.readouterr().out.splitlines() if line.startswith("{")]
    return events[-1]


def wait_for(predicate: Any, timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.02)


def test_holders_names_every_process_in_a_directory_and_marks_only_our_fio(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    mnt = tmp_path / "mnt"
    mnt.mkdir()
    work = tmp_path / "work" / "cid0123" / "t1"  # <work root>/<campaign id>/<test id>/job.fio
    work.mkdir(parents=True)
    job = work / "job.fio"
    job.write_text(f"[hold]\nfilename={mnt}/f\nsize=64k\nrw=read\ntime_based=1\nruntime=60\nrate=4k\n")
    fio = subprocess.Popen(["fio", str(job)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    shell = subprocess.Popen(["sleep", "60"], cwd=mnt)  # someone's shell in the directory: not ours
    try:
        wait_for(lambda: (mnt / "f").exists())
        time.sleep(0.5)  # fio opened its file
        agent.op_holders({"dirs": [str(mnt)], "marker": "/cid0123/"})
        held = result(capsys)["holders"]
        by_pid = {h["pid"]: h for h in held}
        assert by_pid[shell.pid]["ours"] is False and by_pid[shell.pid]["uses"] == [f"cwd: {mnt}"]
        jobs = [h for h in held if h["pid"] != shell.pid]  # fio's job process holds the file (fio itself does not)
        assert jobs and all(h["ours"] and h["comm"] == "fio" for h in jobs), held
        agent.op_end_pids({"pids": [(fio.pid, "/cid0123/"), (shell.pid, "/cid0123/")]})
        assert result(capsys)["ended"] == [fio.pid]  # only our fio, never the shell
        fio.wait(timeout=10)
        wait_for(lambda: all(not h["ours"] for h in _held(mnt, capsys)))
        assert shell.poll() is None
    finally:
        for p in (fio, shell):
            p.kill()
            p.wait()


def _held(mnt: Path, capsys: pytest.CaptureFixture[str]) -> list[dict[str, Any]]:
    agent.op_holders({"dirs": [str(mnt)], "marker": "/cid0123/"})
    return list(result(capsys)["holders"])


def test_holders_of_a_block_device(tmp_path: Path, capsys: pytest.CaptureFixture[str], loopdev: str) -> None:
    code = f"import time; f = open({loopdev!r}, 'rb'); time.sleep(60)"
    holder = subprocess.Popen([sys.executable, "-c", code])
    try:
        wait_for(lambda: any(h["pid"] == holder.pid for h in _device_holders(loopdev, capsys)))
        mine = next(h for h in _device_holders(loopdev, capsys) if h["pid"] == holder.pid)
        assert mine["ours"] is False and mine["uses"][0].endswith(f": {loopdev}")
    finally:
        holder.kill()
        holder.wait()


def _device_holders(dev: str, capsys: pytest.CaptureFixture[str]) -> list[dict[str, Any]]:
    agent.op_holders({"devices": [dev], "marker": "/x/"})
    return list(result(capsys)["holders"])
