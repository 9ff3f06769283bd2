"""The agent's /proc and /sys readers, its Sampler and the `noise` op against fake trees (agent.PROC/SYS)."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest

from tankbench import agent
from tests.conftest import FIXTURES

MEMINFO = """MemTotal:       24669000 kB
MemFree:         4359684 kB
Dirty:              2048 kB
Writeback:           512 kB
SwapTotal:       1000000 kB
SwapFree:         900000 kB
HugePages_Total:       0
"""
STAT = """cpu  1000 10 500 8000 300 20 30 5 0 0
cpu0 500 5 250 4000 150 10 15 2 0 0
intr 123456 1 2 3
ctxt 50000
btime 1795300000
processes 7000
procs_running 3
procs_blocked 1
"""
DISKSTATS = """   8       0 sda 100 0 2000 50 200 0 4000 80 0 100 130 0 0 0 0 0 0
   8       1 sda1 90 0 1800 45 190 0 3800 70 0 90 115 0 0 0 0 0 0
 253       0 dm-0 7 0 56 1 9 0 72 2 0 3 3 0 0 0 0 0 0
"""


def fake_proc(
    root: Path,
    *,
    disk: str = DISKSTATS,
    stat: str = STAT,
    vm: str = "pswpin 10\npswpout 20\n",
    load: str = "0.52 0.40 0.30 2/345 6789\n",
) -> Path:
    proc = root / "proc"
    (proc / "spl/kstat/zfs").mkdir(parents=True, exist_ok=True)
    (proc / "self").mkdir(exist_ok=True)
    (proc / "meminfo").write_text(MEMINFO)
    (proc / "loadavg").write_text(load)
    (proc / "stat").write_text(stat)
    (proc / "diskstats").write_text(disk)
    (proc / "vmstat").write_text("nr_free_pages 1089921\n" + vm)
    (proc / "spl/kstat/zfs/arcstats").write_text((FIXTURES / "zfs" / "tank-arcstats.txt").read_text())
    (proc / "cpuinfo").write_text("processor\t: 0\nmodel name\t: Fake CPU @ 2.0GHz\n")
    (proc / "self/mountinfo").write_text("22 27 0:21 / /proc rw,relatime - proc proc rw\n")
    (proc / "swaps").write_text("Filename\t\t\t\tType\t\tSize\t\tUsed\t\tPriority\n")
    (proc / "sys/kernel/random").mkdir(parents=True, exist_ok=True)
    (proc / "sys/kernel/random/boot_id").write_text("4f0c1b8e-2d5a-4c3e-9a57-0d3c2b1e6f70\n")
    return proc


@pytest.fixture
def tree(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    fake_proc(tmp_path)
    (tmp_path / "sys").mkdir()
    monkeypatch.setattr(agent, "PROC", str(tmp_path / "proc"))
    monkeypatch.setattr(agent, "SYS", str(tmp_path / "sys"))
    return tmp_path


def result_of(capsys: pytest.CaptureFixture[str]) -> dict[str, Any]:
    """The `result` event the op printed."""
    events = [json.loads(line) for line in capsys.readouterr().out.splitlines() if line.startswith("{")]
    assert events and events[-1]["event"] == "result", events
    return events[-1]


def test_readers_parse_the_kernel_formats(tree: Path) -> None:
    m = agent.meminfo()
    assert m["MemTotal"] == 24669000 * 1024 and m["Dirty"] == 2048 * 1024 and m["HugePages_Total"] == 0
    assert agent.loadavg() == (0.52, 0.40, 0.30)
    s = agent.procstat()
    assert s["cpu"] == [1000, 10, 500, 8000, 300, 20, 30, 5] and s["ctxt"] == 50000
    assert s["processes"] == 7000 and s["procs_running"] == 3 and s["procs_blocked"] == 1
    assert agent.diskstats(["sda", "dm-0", "nvme0n1"]) == {"sda": (100, 2000, 200, 4000), "dm-0": (7, 56, 9, 72)}
    assert agent.vmstat()["pswpout"] == 20
    arc = agent.arcstats()
    assert arc["hits"] == 34858 and "name" not in arc and all(isinstance(v, int) for v in arc.values())


def test_readers_of_a_missing_tree_give_empty_values(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """No ZFS, no /proc/vmstat (containers): the readers return nothing rather than fail a run."""
    monkeypatch.setattr(agent, "PROC", str(tmp_path / "nothing"))
    assert agent.meminfo() == {} and agent.arcstats() == {} and agent.vmstat() == {}
    assert agent.loadavg() == (0.0, 0.0, 0.0) and agent.diskstats(["sda"]) == {}


def test_sampler_series_and_summary_from_two_snapshots(tree: Path) -> None:
    sampler = agent.Sampler(["sda"], interval=3600)  # the loop never ticks: only the first and last snapshots
    with sampler:
        (tree / "proc/stat").write_text(
            STAT.replace("cpu  1000 10 500 8000 300", "cpu  1100 10 600 8700 400")
            .replace("ctxt 50000", "ctxt 52000")
            .replace("processes 7000", "processes 7010")
        )
        (tree / "proc/diskstats").write_text(
            DISKSTATS.replace("sda 100 0 2000 50 200 0 4000", "sda 150 0 2800 50 300 0 6048")
        )
        first = sampler.first
        assert first is not None
        sampler._record(first, sampler.snapshot())
    s = sampler.series
    assert s["dev_read_iops"] and s["dev_read_iops"][0] > 0 and s["procs_blocked"] == [1]
    m = sampler.summary()
    assert m["dev.read_bytes"] == 800 * 512 and m["dev.write_bytes"] == 2048 * 512
    assert m["sys.cpu_user_pct"] == pytest.approx(100 * 100 / 1000, abs=0.01)  # 100 of 1000 jiffies
    assert m["sys.cpu_sys_pct"] == pytest.approx(10.0) and m["sys.cpu_iowait_pct"] == pytest.approx(10.0)
    assert m["sys.load1_start"] == 0.52 and m["sys.samples"] == 1 and m["sys.dirty_max_bytes"] == 2048 * 1024


def _dev_link(sys: Path, path: Path, target: Path) -> None:
    st = os.stat(path)
    (sys / "dev/block").mkdir(parents=True, exist_ok=True)
    (sys / "dev/block" / f"{os.major(st.st_dev)}:{os.minor(st.st_dev)}").symlink_to(target)


def test_physical_devices_follow_partitions_and_slaves(tree: Path) -> None:
    """A file on dm-0 (LVM/LUKS) over sda2 and sdb: the whole disks are sda and sdb."""
    devices = tree / "sys/devices"
    sda, sdb, dm = devices / "pci0/block/sda", devices / "pci1/block/sdb", devices / "virtual/block/dm-0"
    for d in (sda / "sda2", sdb, dm / "slaves"):
        d.mkdir(parents=True)
    (sda / "sda2/partition").write_text("2\n")
    (dm / "slaves/sda2").symlink_to(sda / "sda2")
    (dm / "slaves/sdb").symlink_to(sdb)
    data = tree / "data"
    data.mkdir()
    _dev_link(tree / "sys", data, dm)
    assert agent.physical_devices(str(data)) == ["sda", "sdb"]
    assert agent.physical_devices(str(tree / "missing")) == []


def test_physical_devices_of_a_filesystem_without_a_block_device(tree: Path) -> None:
    """tmpfs, ZFS, overlay: no /sys/dev/block entry, so no disks to sample (not a guess)."""
    assert agent.physical_devices(str(tree)) == []


def test_block_info_reads_holders_partitions_mounts_and_swap(tree: Path, loopdev: str) -> None:
    name = os.path.basename(loopdev)
    st = os.stat(loopdev)
    sysdir = tree / "sys/devices/virtual/block" / name
    (sysdir / "holders/dm-3").mkdir(parents=True)
    (sysdir / f"{name}p1").mkdir()
    (sysdir / f"{name}p1/partition").write_text("1\n")
    (sysdir / f"{name}p1/dev").write_text("259:5\n")
    (sysdir / "size").write_text("131072\n")
    (tree / "sys/dev/block").mkdir(parents=True)
    (tree / "sys/dev/block" / f"{os.major(st.st_rdev)}:{os.minor(st.st_rdev)}").symlink_to(sysdir)
    (tree / "proc/self/mountinfo").write_text(
        "22 27 0:21 / /proc rw - proc proc rw\n90 27 259:5 / /mnt/data rw,relatime - ext4 /dev/x rw\n"
    )
    (tree / "proc/swaps").write_text(f"Filename Type Size Used Priority\n{loopdev} partition 65532 0 -2\n")
    info = agent.block_info(loopdev)
    assert info["is_block"] and info["name"] == name and info["size_bytes"] == 131072 * 512
    assert info["holders"] == ["dm-3"] and info["partitions"] == [f"{name}p1"]
    assert info["mounts"] == ["/mnt/data", "[swap]"] and info["signatures"] == []


def test_probe_reports_zfs_module_and_models(tree: Path, capsys: pytest.CaptureFixture[str]) -> None:
    params = tree / "sys/module/zfs/parameters"
    params.mkdir(parents=True)
    (tree / "sys/module/zfs/version").write_text("2.3.2-2~bpo12+2\n")
    (params / "zfs_txg_timeout").write_text("5\n")
    (params / "zfs_arc_max").write_text("0\n")
    agent.op_probe({"paths": [str(tree)], "block_devices": []})
    res = result_of(capsys)
    fp = res["fingerprint"]
    assert fp["zfs_version"] == "2.3.2-2~bpo12+2" and fp["cpu_model"] == "Fake CPU @ 2.0GHz"
    assert res["zfs_params"] == {"zfs_arc_max": "0", "zfs_txg_timeout": "5"} and res["zfs"] is True
    assert res["load1"] == 0.52 and res["dirty_bytes"] == (2048 + 512) * 1024
    assert res["swap_used_bytes"] == 100000 * 1024 and res["paths"][str(tree)]["is_dir"]
    assert res["boot_id"] == "4f0c1b8e-2d5a-4c3e-9a57-0d3c2b1e6f70"


def test_noise_measures_disk_and_swap_traffic_over_its_window(
    tree: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    def other_io_meanwhile(seconds: float) -> None:  # someone else writes to sda and the host swaps
        fake_proc(
            tree,
            disk=DISKSTATS.replace("sda 100 0 2000 50 200 0 4000", "sda 100 0 2000 50 260 0 6048"),
            vm="pswpin 14\npswpout 20\n",
            load="3.10 1.00 0.50 5/345 6800\n",
        )

    monkeypatch.setattr(agent.time, "sleep", other_io_meanwhile)
    agent.op_noise({"pool": None, "devices": ["sda"], "window_s": 1.0})
    res = result_of(capsys)
    assert res["zpool_status"] is None and res["devices_seen"] == ["sda"]
    assert res["disk"]["write_iops"] > 0 and res["disk"]["read_iops"] == 0
    assert res["swap_in_pages"] == 4 and res["swap_out_pages"] == 0 and res["load1"] == 3.10
    assert res["cpu_count"] >= 1 and res["dirty_bytes"] == (2048 + 512) * 1024


def test_noise_reports_a_zpool_status_that_failed(
    tree: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(agent.time, "sleep", lambda s: None)
    monkeypatch.setenv("PATH", str(tree))  # no zpool here
    agent.op_noise({"pool": "tank", "devices": [], "window_s": 0})
    status = result_of(capsys)["zpool_status"]
    assert status["rc"] != 0 and status["stdout"] == ""


def test_end_pids_ends_only_fio_with_our_job(
    tree: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    for pid, ppid, cmd in (
        (4001, 1, "fio\0--output-format=json\0/w/c1/t1/job.fio\0"),
        (4005, 4001, "fio\0--output-format=json\0/w/c1/t1/job.fio\0"),  # its job process (own session)
        (4002, 1, "vim\0/w/c1/t1/job.fio\0"),
        (4003, 1, "fio\0/other/job.fio\0"),
    ):
        (tree / f"proc/{pid}").mkdir()
        (tree / f"proc/{pid}/cmdline").write_text(cmd)
        (tree / f"proc/{pid}/stat").write_text(f"{pid} (fio) S {ppid} {pid} {pid} 0 -1\n")
    killed: list[int] = []
    monkeypatch.setattr(agent.os, "kill", lambda pid, sig: killed.append(pid))
    monkeypatch.setattr(agent, "_live", lambda pid: False)  # they end at SIGTERM
    marker = "/w/c1/t1/job.fio"
    agent.op_end_pids({"pids": [[4001, marker], [4002, marker], [4003, marker], [4004, marker]]})
    assert sorted(set(killed)) == [4001, 4005] and result_of(capsys)["ended"] == [4001]
