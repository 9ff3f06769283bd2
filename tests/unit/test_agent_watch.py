"""The progress watchdog (agent.Watch, issue 18): a run ends only when nothing moves for hung_after, or at
the cap; read against a fake /proc tree and a fake clock (the real thing: tests/integration/test_watchdog_local.py)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tankbench import agent
from tests.unit.test_agent_readers import fake_proc

IO = "rchar: {r}\nwchar: {w}\nsyscr: 5\nsyscw: 7\nread_bytes: 0\nwrite_bytes: {wb}\ncancelled_write_bytes: 0\n"


def process(proc: Path, pid: int, ppid: int, r: int = 0, w: int = 0, wb: int = 0, state: str = "S") -> None:
    d = proc / str(pid)
    d.mkdir(exist_ok=True)
    (d / "stat").write_text(f"{pid} (fio (x)) {state} {ppid} {pid} {pid} 0 -1 4194560 0 0\n")
    (d / "io").write_text(IO.format(r=r, w=w, wb=wb))


class Clock:
    def __init__(self) -> None:
        self.t = 0.0

    def __call__(self) -> float:
        return self.t


@pytest.fixture
def proc(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    p = fake_proc(tmp_path)
    monkeypatch.setattr(agent, "PROC", str(p))
    process(p, 100, 1)  # fio's main process
    process(p, 101, 100, r=10, w=20)  # a job process it forked (in a session of its own)
    process(p, 102, 101)  # and one under that
    process(p, 200, 1, r=99, w=99)  # someone else's
    return p


def test_the_process_tree_is_read_from_proc_stat(proc: Path) -> None:
    assert agent.tree_pids(100) == [100, 101, 102]
    assert agent.tree_pids(200) == [200]
    assert agent.tree_pids(999) == []


def test_a_run_that_keeps_moving_is_never_hung_only_capped(proc: Path) -> None:
    clock = Clock()
    w = agent.Watch(100, ["sda"], hung_after_s=30, cap_s=3600, clock=clock)
    for step in range(1, 200):  # 200 x 10 s = far later than hung_after, but moving all along
        clock.t = step * 10.0
        process(proc, 101, 100, r=10, w=20 + step)
        assert w.check() == "", step
    clock.t = 3600.0
    process(proc, 101, 100, r=10, w=10**6)
    assert w.check() == "cap"
    assert w.report("cap")["watchdog.longest_stall_s"] == 0.0


def test_no_io_for_hung_after_is_hung(proc: Path) -> None:
    clock = Clock()
    w = agent.Watch(100, ["sda"], hung_after_s=30, cap_s=3600, clock=clock)
    clock.t = 29.0
    assert w.check() == ""
    clock.t = 30.0
    assert w.check() == "hung"
    assert w.report("hung") == {
        "watchdog.ended_by": "hung",
        "watchdog.longest_stall_s": 30.0,
        "watchdog.hung_after_s": 30,
        "watchdog.cap_s": 3600,
    }


def test_the_leaders_reads_of_sys_do_not_count_but_disk_io_and_a_drain_do(proc: Path) -> None:
    clock = Clock()
    w = agent.Watch(100, ["sda"], hung_after_s=30, cap_s=3600, clock=clock)
    clock.t = 20.0
    process(proc, 100, 1, r=5000)  # fio's disk-util thread reading /sys/block/*/stat: not progress
    assert w.check() == ""
    clock.t = 31.0
    assert w.check() == "hung"
    # ops completing on the run's disk (e.g. ZFS syncing what fio wrote) are progress
    w = agent.Watch(100, ["sda"], hung_after_s=30, cap_s=3600, clock=clock)
    clock.t = 55.0
    (proc / "diskstats").write_text("   8       0 sda 100 0 2000 50 201 0 4008 80 0 100 130 0 0 0 0 0 0\n")
    assert w.check() == ""
    # so is dirty memory being written back while the run waits for it (a drain: fio's close in D state), in whole MiB
    process(proc, 101, 100, r=10, w=20, state="D")
    meminfo = (proc / "meminfo").read_text()
    (proc / "meminfo").write_text(meminfo.replace("Dirty:              2048 kB", "Dirty:            512000 kB"))
    clock.t = 80.0
    assert w.check() == ""
    (proc / "meminfo").write_text(meminfo.replace("Dirty:              2048 kB", "Dirty:            256000 kB"))
    clock.t = 105.0
    assert w.check() == ""
    clock.t = 135.0
    assert w.check() == "hung"


def test_a_few_kib_of_the_hosts_own_dirty_data_is_not_progress(proc: Path) -> None:
    clock = Clock()
    meminfo = (proc / "meminfo").read_text()
    (proc / "meminfo").write_text(meminfo.replace("Dirty:              2048 kB", "Dirty:               96 kB"))
    w = agent.Watch(100, [], hung_after_s=30, cap_s=3600, clock=clock)
    (proc / "meminfo").write_text(meminfo.replace("Dirty:              2048 kB", "Dirty:              900 kB"))
    clock.t = 30.0
    assert w.check() == "hung"


def test_another_writers_dirty_memory_is_not_the_runs_progress(proc: Path) -> None:
    # fio stopped (T) or asleep (S), not waiting for writeback: the host's dirty memory moving is someone else's
    # (CI: a lab's qemu beside the run), and the run is hung after hung_after all the same
    meminfo = (proc / "meminfo").read_text()
    clock = Clock()
    w = agent.Watch(100, ["sda"], hung_after_s=30, cap_s=3600, clock=clock)
    for step, (state, t) in enumerate((("T", 10.0), ("S", 20.0), ("T", 29.0)), start=1):
        process(proc, 101, 100, r=10, w=20, state=state)
        (proc / "meminfo").write_text(meminfo.replace("Dirty:              2048 kB", f"Dirty:   {step * 100_000} kB"))
        clock.t = t
        assert w.check() == "", step
    clock.t = 30.0
    assert w.check() == "hung"
    # the same movement while a process of the run waits in the kernel (D) is the run's drain: progress
    process(proc, 102, 101, state="D")
    (proc / "meminfo").write_text(meminfo.replace("Dirty:              2048 kB", "Dirty:   50000 kB"))
    clock.t = 31.0
    assert w.check() == ""
