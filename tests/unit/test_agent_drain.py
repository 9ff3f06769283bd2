"""The agent's drain: how it makes a run's writes durable before it measures how long that took."""

from __future__ import annotations

import os
import shlex
import sys
from pathlib import Path

import pytest

from tankbench import agent


def test_a_target_with_its_own_sync_command_is_drained_by_it_alone(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # ZFS names `zpool sync POOL`: sync(2) before it would commit every dataset's ZIL, writing the dirty data a second
    # way (seed 000's dataset: 70 MiB of log blocks for 66 MiB written). The real sync(2), spied on, never runs.
    calls: list[str] = []
    real = os.sync
    monkeypatch.setattr(os, "sync", lambda: (calls.append("sync"), real())[1])
    mark = tmp_path / "synced"
    own = [sys.executable, "-c", f"open({str(mark)!r}, 'w').close()"]
    seconds, _, _, incomplete, method = agent.drain(30.0, own)
    assert mark.exists() and calls == [] and 0 <= seconds < 30 and incomplete == ""
    assert method == shlex.join(own) and agent.drain(30.0, own).checks()["drain.method"] == method  # the run says so
    # without one (a file on ext4, a raw device): sync(2), recorded as such (the ZIL sentence of the limiter reads it)
    assert agent.drain(30.0, None).checks()["drain.method"] == "sync(2)"
    assert calls == ["sync"]
    agent.drain(30.0, ["sync"])
    assert calls == ["sync", "sync"]
    assert agent.Drained(0.0, 0, 0).checks()["drain.method"] == "none"  # a hung run: no drain


def test_the_drain_does_not_wait_for_other_writers_dirty_memory(monkeypatch: pytest.MonkeyPatch) -> None:
    # CI's failure (stop 45): a 1 s read run on a file target waited 36-62 s after sync(2) had returned, polling
    # the host's dirty memory down to 1 MiB while a lab's qemu beside it kept writing. sync(2) is the drain: what
    # is dirty after it was written after fio ended. Here the host never stops writing (1 GiB dirty throughout).
    reads: list[int] = []

    def busy(root: str = "") -> dict[str, int]:
        reads.append(1)
        return {"Dirty": 1 << 30, "Writeback": 0}

    monkeypatch.setattr(agent, "meminfo", busy)
    for cmd in (None, [sys.executable, "-c", "pass"]):
        reads.clear()
        seconds, start, end, _, _ = agent.drain(30.0, cmd)
        assert seconds < 10.0 and start == end == 1 << 30 and len(reads) == 2


def test_job_paths_are_the_files_fio_names() -> None:
    job = (
        "[global]\nfilename=/tank/a:/tank/b\n[one]\nfilename = /dev/zvol/tank/v\n"
        "[two]\nfilename=/mnt/x\\:y:/tank/a\n; filename=/commented/out\nfilename_format=$jobname\n"
    )
    assert agent.job_paths(job) == ["/tank/a", "/tank/b", "/dev/zvol/tank/v", "/mnt/x:y"]


def test_write_back_writes_a_files_pages_and_says_what_it_could_not(tmp_path: Path, loopdev: str) -> None:
    f = tmp_path / "data"
    with open(f, "wb") as out:
        out.write(os.urandom(4 << 20))  # dirty pages, never fsynced
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    failed = agent.write_back([str(f), loopdev, str(tmp_path / "gone"), str(fifo)])
    # a regular file and a block device: done; a missing file: nothing to do; a pipe has no pages (ESPIPE)
    assert failed == [f"{fifo}: Illegal seek"]
    assert f.stat().st_size == 4 << 20


def test_a_job_that_ran_elsewhere_has_no_files_here_to_write_back(monkeypatch: pytest.MonkeyPatch) -> None:
    # observe: fio ran in a test guest; its filename= paths are the guest's, not this host's
    seen: list[list[str]] = []
    monkeypatch.setattr(agent, "write_back", lambda paths: (seen.append(list(paths)), [])[1])
    job = "[w]\nfilename=/dev/vdb\nrw=write\n"
    cmd = [sys.executable, "-c", "pass"]
    agent._drain_of(
        {"op": "fio_run", "job_text": job, "deadline_s": 1.0, "workdir": "/nonexistent", "observe": True}, cmd
    )
    agent._drain_of({"op": "fio_run", "job_text": job, "deadline_s": 1.0, "workdir": "/nonexistent"}, cmd)
    assert seen == [[], ["/dev/vdb"]]


def test_a_drain_that_could_not_finish_says_why(tmp_path: Path) -> None:
    # A sync command that fails (a pool gone or suspended) or runs past its limit, and a file the drain could not
    # write back: the run's durable figures then understate, and the run's checks say so (drain-incomplete)
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    failing = [sys.executable, "-c", "import sys; sys.exit('cannot open pool: no such pool')"]
    d = agent.drain(30.0, failing, [str(fifo)])
    assert d.incomplete.startswith(f"{fifo}: Illegal seek; ")
    assert d.incomplete.endswith("exited 1: cannot open pool: no such pool")
    slow = [sys.executable, "-c", "import time; time.sleep(30)"]
    d = agent.drain(0.5, slow)
    assert d.incomplete.endswith("did not end in 0.5 s") and 0.5 <= d.seconds < 10
    assert agent.drain(30.0, [str(tmp_path / "no-such-command")]).incomplete.endswith("No such file or directory")
    assert agent.drain(30.0, [sys.executable, "-c", "pass"], [str(tmp_path / "gone")]).incomplete == ""
