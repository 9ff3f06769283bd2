"""The agent's automatic cooldown against fake /proc trees: what it waits for and what it says ended the wait."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

from tankbench import agent

TXGS_HEADER = "txg      birth            state ndirty       nread        nwritten     reads    writes   otime\n"


class FakeHost:
    """A /proc tree under tmp_path whose files a scenario rewrites as the fake clock advances."""

    def __init__(self, root: Path, scenario: Callable[[FakeHost, float], None]) -> None:
        self.root = root
        self.now = 1000.0
        self.scenario = scenario
        self.disk_ops = 0
        (root / "proc/spl/kstat/zfs/tank").mkdir(parents=True)
        scenario(self, 0.0)

    def write(self, dirty_kb: int = 0, writeback_kb: int = 0, load1: float = 0.1, txg: str = "O 0") -> None:
        r = self.root
        (r / "proc/meminfo").write_text(f"MemTotal: 4000000 kB\nDirty: {dirty_kb} kB\nWriteback: {writeback_kb} kB\n")
        (r / "proc/loadavg").write_text(f"{load1} 0.5 0.5 1/100 999\n")
        state, ndirty = txg.split()
        (r / "proc/spl/kstat/zfs/tank/txgs").write_text(
            TXGS_HEADER + "11 215685008183 C 5406720 0 9411584 0 198 2055287937\n"
            f"12 217740296120 {state} {ndirty} 0 0 0 0 0\n"
        )
        (r / "proc/diskstats").write_text(
            f" 254 0 vda {self.disk_ops} 0 100 0 {self.disk_ops} 0 100 0 0 0 0\n 254 16 vdb 7 0 8 0 9 0 10 0 0 0 0\n"
        )

    def clock(self) -> float:
        return self.now

    def sleep(self, s: float) -> None:
        self.now += s
        self.scenario(self, self.now - 1000.0)

    def wait(self, **req: object) -> dict:  # type: ignore[type-arg]
        base = {
            "mode": "auto",
            "fixed_s": 0,
            "max_s": 300,
            "load1": 1.0,
            "dirty_bytes": 4 << 20,
            "devices": ["vda"],
            "pool": "tank",
            "idle_iops": 5,
            "idle_s": 3,
            "poll_s": 1,
        }
        base.update(req)
        return agent.cooldown_wait(base, root=str(self.root), clock=self.clock, sleep=self.sleep)


def test_quiet_host_ends_at_once(tmp_path: Path) -> None:
    res = FakeHost(tmp_path, lambda h, t: h.write()).wait()
    assert res["ended_by"] in ("disks", "quiet") and res["waited_s"] <= 3.0 and res["unmet"] == []


def test_dirty_data_drains_last(tmp_path: Path) -> None:
    def scenario(h: FakeHost, t: float) -> None:
        h.write(dirty_kb=max(0, 200_000 - int(t) * 10_000), writeback_kb=1000 if t < 20 else 0)

    res = FakeHost(tmp_path, scenario).wait()
    # 4 MiB threshold = 4096 kB: Dirty 200000 - 10000 t + 1000 writeback <= 4096 from t = 20
    assert res["ended_by"] == "dirty" and 19.0 <= res["waited_s"] <= 21.0 and res["dirty_bytes"] <= 4 << 20


def test_txg_still_syncing_holds_the_wait(tmp_path: Path) -> None:
    def scenario(h: FakeHost, t: float) -> None:
        h.write(txg="S 0" if t < 8 else ("O 4096" if t < 12 else "O 0"))

    res = FakeHost(tmp_path, scenario).wait()
    assert res["ended_by"] == "txg" and 12.0 <= res["waited_s"] <= 13.0 and res["txg_pending"] == 0


def test_busy_disks_must_be_idle_for_idle_s(tmp_path: Path) -> None:
    def scenario(h: FakeHost, t: float) -> None:
        if t < 30:
            h.disk_ops += 500  # 1000 ops/s while writeback trickles to the disks
        h.write()

    res = FakeHost(tmp_path, scenario).wait()
    assert res["ended_by"] == "disks" and 31.5 <= res["waited_s"] <= 33.0 and res["dev_iops"] <= 5


def test_load1_decays_last_and_max_bounds_the_wait(tmp_path: Path) -> None:
    def scenario(h: FakeHost, t: float) -> None:
        h.write(load1=round(8.0 * 0.5 ** (t / 42.0), 2))  # load1 decays like the kernel's 1-minute average

    res = FakeHost(tmp_path, scenario).wait()
    assert res["ended_by"] == "load1" and 125 <= res["waited_s"] <= 127
    res = FakeHost(tmp_path / "b", scenario).wait(max_s=60)
    assert res["ended_by"] == "max" and res["unmet"] == ["load1"] and 60 <= res["waited_s"] <= 61


def test_fixed_wait_is_kept_and_named(tmp_path: Path) -> None:
    res = FakeHost(tmp_path, lambda h, t: h.write()).wait(fixed_s=10)
    assert res["ended_by"] == "fixed" and res["waited_s"] == 10.0


def test_fixed_mode_ignores_pool_and_disks(tmp_path: Path) -> None:
    res = FakeHost(tmp_path, lambda h, t: h.write(txg="S 999")).wait(mode="fixed", fixed_s=2, load1=None)
    assert res["ended_by"] == "fixed" and "txg_pending" not in res


def test_missing_pool_kstat_is_not_waited_for(tmp_path: Path) -> None:
    def scenario(h: FakeHost, t: float) -> None:
        h.write(load1=2.0 if t < 5 else 0.1)
        os.unlink(h.root / "proc/spl/kstat/zfs/tank/txgs")  # a host without this pool's kstat

    res = FakeHost(tmp_path, scenario).wait()
    assert "txg_pending" not in res and res["unmet"] == [] and res["ended_by"] == "load1"


def test_txg_pending_reads_real_kstat(tmp_path: Path) -> None:
    fixtures = Path(__file__).parent.parent / "fixtures" / "zfs"
    kstat = tmp_path / "proc/spl/kstat/zfs/tbparse1"
    kstat.mkdir(parents=True)
    (kstat / "txgs").write_text((fixtures / "tbparse1-txgs.txt").read_text())
    assert agent.txg_pending("tbparse1", str(tmp_path)) == 0, (
        "real lab kstat: only committed txgs and an empty open one"
    )
    assert agent.txg_pending("nosuchpool", str(tmp_path)) is None


# -- the idle window starts where the disks last moved (marks kept from the run before) ---------------------------
def _mark(h: FakeHost, t: float, ops: int, source: str, boot: str = "boot-1") -> dict:  # type: ignore[type-arg]
    return {"t": t, "boot_id": boot, "disk": [ops, 0, ops, 0], "from": source}


def _booted(h: FakeHost) -> FakeHost:
    (h.root / "proc/sys/kernel/random").mkdir(parents=True, exist_ok=True)
    (h.root / "proc/sys/kernel/random/boot_id").write_text("boot-1\n")
    return h


def test_disks_unmoved_since_fio_exited_end_the_wait_at_once(tmp_path: Path) -> None:
    h = _booted(FakeHost(tmp_path, lambda h, t: h.write()))
    h.disk_ops = 4000  # what the run itself did; nothing since fio exited 0.2 s ago
    h.write()
    marks = {"vda": [_mark(h, h.now - 0.2, 4000, "fio-exit"), _mark(h, h.now - 0.1, 4000, "run-end")]}
    res = h.wait(idle_from=marks)
    assert res["ended_by"] == "quiet" and res["waited_s"] == 0.0 and res["unmet"] == []
    assert res["idle_from"] == "fio-exit" and res["idle_before_s"] == 0.2


def test_after_writeback_the_window_starts_at_the_runs_end(tmp_path: Path) -> None:
    h = _booted(FakeHost(tmp_path, lambda h, t: h.write()))
    h.disk_ops = 4000 + 300  # the drain's writeback moved the disks after fio exited (300 ops > 5/s x 3 s)
    h.write()
    marks = {"vda": [_mark(h, h.now - 1.4, 4000, "fio-exit"), _mark(h, h.now - 1.0, 4300, "run-end")]}
    res = h.wait(idle_from=marks)
    # idle since the run's end 1.0 s ago: 2 s more of idle_for = 3 s, not 3 s from the wait's start
    assert res["ended_by"] == "disks" and res["waited_s"] == 2.0 and res["idle_from"] == "run-end"


def test_marks_of_another_boot_or_a_device_without_one_wait_a_full_window(tmp_path: Path) -> None:
    h = _booted(FakeHost(tmp_path, lambda h, t: h.write()))
    res = h.wait(idle_from={"vda": [_mark(h, h.now - 0.2, 0, "fio-exit", boot="boot-0")]})
    assert res["ended_by"] == "disks" and res["waited_s"] == 3.0 and res["idle_from"] == "wait"
    res = h.wait(idle_from={"vdb": [_mark(h, h.now - 0.2, 7, "fio-exit")]}, devices=["vda", "vdb"])
    assert res["idle_from"] == "wait" and res["waited_s"] == 3.0


def test_disks_that_move_during_the_wait_restart_the_window(tmp_path: Path) -> None:
    def scenario(h: FakeHost, t: float) -> None:
        if 0 < t <= 4:
            h.disk_ops += 500  # someone else's I/O starts after the wait began
        h.write()

    h = _booted(FakeHost(tmp_path, scenario))
    res = h.wait(idle_from={"vda": [_mark(h, h.now - 1.0, 0, "run-end")]})
    assert res["ended_by"] == "disks" and res["waited_s"] >= 6.0 and res["dev_iops"] <= 5


def test_a_runs_counters_become_the_next_cooldowns_marks() -> None:
    from tankbench.campaign.schema import Cooldown
    from tankbench.schedule.cooldown import cooldown_checks, cooldown_request, idle_marks

    result = {
        "counters_exit": {"t": 10.0, "boot_id": "b", "disk": {"vda": [1, 2, 3, 4]}, "vm": {}},
        "counters": {"t": 10.5, "boot_id": "b", "disk": {"vda": [1, 2, 9, 40]}, "vm": {}},
    }
    marks = idle_marks(result)
    assert [m["from"] for m in marks["vda"]] == ["fio-exit", "run-end"] and marks["vda"][1]["disk"] == [1, 2, 9, 40]
    req = cooldown_request(Cooldown(auto=True, max_s=5), ["vda", "vdb"], "tank", 0.5, marks)
    assert req["idle_from"] == {"vda": marks["vda"]}, "only the disks the wait watches, only those with marks"
    assert "idle_from" not in cooldown_request(Cooldown(fixed_s=1), ["vda"], "", 0.5, marks), "fixed: no disks"
    checks = cooldown_checks({"waited_s": 0.0, "ended_by": "quiet", "idle_from": "fio-exit", "idle_before_s": 0.2})
    assert checks["cooldown.idle_from"] == "fio-exit" and checks["cooldown.idle_before_s"] == 0.2
