"""The limiter's evidence from real output (issue 32): each disk's figures and each thread group's CPU from fake
/proc trees (the agent's readers), fio's per-second logs, the pool's vdev waits and queues (`zpool iostat -Hpv -l
-q` from the lab) and the write throttle's dmu_tx counters."""

from __future__ import annotations

from pathlib import Path

import pytest

from tankbench import agent
from tankbench.hosts.lab import emulator_figures, qemu_threads
from tankbench.zfs import evidence
from tankbench.zfs.parse import parse_zpool_status
from tests.conftest import FIXTURES

ZFS = FIXTURES / "zfs"


def diskstats(reads: int, writes: int, busy_ms: int, queue_ms: int) -> str:
    # major minor name reads merged sectors ms writes merged sectors ms inflight io_ticks time_in_queue
    return f" 253 16 vdb {reads} 0 {reads * 8} {reads * 25} {writes} 0 {writes * 16} {writes * 30} 0 {busy_ms} {queue_ms}\n"


def test_device_figures_from_two_diskstats_snapshots(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "proc").mkdir()
    (tmp_path / "dev/disk/by-id").mkdir(parents=True)
    (tmp_path / "dev/vdb").touch()
    (tmp_path / "dev/disk/by-id/virtio-tbdata0").symlink_to(tmp_path / "dev/vdb")
    (tmp_path / "dev/disk/by-id/virtio-tbdata0-part1").symlink_to(tmp_path / "dev/vdb")
    (tmp_path / "proc/diskstats").write_text(diskstats(100, 10, 1000, 1500))
    a = agent.disk_ticks(["vdb"], str(tmp_path))
    (tmp_path / "proc/diskstats").write_text(diskstats(500, 30, 10_900, 16_500))
    b = agent.disk_ticks(["vdb"], str(tmp_path))
    monkeypatch.setattr(agent, "BY_ID", str(tmp_path / "dev/disk/by-id"))
    ids = agent.disk_ids(["vdb"])
    assert ids == {"vdb": f"{tmp_path}/dev/disk/by-id/virtio-tbdata0"}
    d = agent.device_figures(a, b, 10.0, ids)["vdb"]
    assert d["label"] == "tbdata0" and d["id"] == ids["vdb"]
    # a real disk's by-id name holds its serial: its label is its kernel name
    assert agent.disk_label("sda", "/dev/disk/by-id/ata-ACME_1TB_S3Z9NB0K123456") == "sda"
    assert (d["read_iops"], d["write_iops"]) == (40.0, 2.0)
    assert (d["read_bw_bytes"], d["write_bw_bytes"]) == (400 * 8 * 512 / 10, 20 * 16 * 512 / 10)
    assert d["busy_pct"] == 99.0 and d["queue"] == round(15_000 / 9_900, 2)
    assert d["await_ms"] == round((400 * 25 + 20 * 30) / 420, 2)


def test_thread_groups_and_their_cpu(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    def stat(pid: int, comm: str, ticks: int) -> None:
        d = tmp_path / "proc" / str(pid)
        d.mkdir(parents=True, exist_ok=True)
        fields = ["S", "2", "0", "0", "0", "-1", "0", "0", "0", "0", "0", str(ticks), str(ticks), "0", "0"]
        (d / "stat").write_text(f"{pid} ({comm}) {' '.join(fields)}\n")

    assert [agent.thread_group(c) for c in ("z_rd_int_0", "zvol_tq-3", "txg_sync", "fio", "kworker/u8:1", "sshd")] == [
        "z_rd_int",
        "zvol_tq",
        "txg_sync",
        "fio",
        "",
        "",
    ]
    for pid, comm in ((10, "z_wr_iss"), (11, "z_wr_iss"), (12, "fio"), (13, "sshd")):
        stat(pid, comm, 100)
    a = agent.thread_cpu(str(tmp_path))
    stat(10, "z_wr_iss", 150)  # user + system: +100 ticks each, +200 for the group
    stat(11, "z_wr_iss", 150)
    stat(12, "fio", 350)  # +500 ticks
    b = agent.thread_cpu(str(tmp_path))
    monkeypatch.setattr(agent.os, "sysconf", lambda name: 100)
    out = agent.cpu_groups(a, b, 10.0)
    assert out["cpu.groups"] == {"z_wr_iss": 20.0, "fio": 50.0}  # % of one CPU over 10 s at 100 ticks/s
    assert out["cpu.group_threads"] == {"z_wr_iss": 2, "fio": 1}


def test_fio_per_second_logs_of_a_real_run() -> None:
    s = agent.fio_seconds(str(FIXTURES / "fio-logs"))  # fio 3.33 in the lab: 4k buffered writes to a zvol, 12 s
    assert s["fio_t"] == [float(t) for t in range(1, 12)]
    assert s["fio_write_iops"][:2] == [712.0, 2148.0] and s["fio_bw_bytes"][0] == 2850 * 1024
    assert s["fio_write_lat_ms"][0] == 4.025 and "fio_read_iops" not in s


def test_fio_seconds_sums_jobs_and_averages_100ms_windows(tmp_path: Path) -> None:
    for job in (1, 2):
        (tmp_path / f"tbio_iops.{job}.log").write_text(
            "".join(f"{t}, {100 * job}, 0, 4096, 0\n" for t in range(100, 2001, 100))
        )
    s = agent.fio_seconds(str(tmp_path))
    assert s["fio_t"] == [0.0, 1.0, 2.0]
    assert s["fio_read_iops"] == [300.0, 300.0, 300.0]


def test_vdev_waits_and_queues_from_the_lab() -> None:
    status = parse_zpool_status((ZFS / "lab-zpool-status-P-slog.txt").read_text())
    v = {x["disk"]: x for x in evidence.vdev_figures((ZFS / "lab-zpool-iostat-HpvP-l-q-y.txt").read_text(), status)}
    b = "/dev/disk/by-id/virtio-"
    assert set(v) == {f"{b}tbdata0", f"{b}tbdata1", f"{b}tblog0"}
    d = v[f"{b}tbdata0"]
    assert d["vdev"] == f"{b}tbdata0-part1" and d["role"] == "data" and d["intervals"] == 42
    assert v[f"{b}tblog0"]["role"] == "log"
    assert 30 < d["disk_wait_w_ms"] < 50 and d["total_wait_w_ms"] > d["disk_wait_w_ms"]
    assert d["asyncq_write_pend"] > 0 and "disk_wait_r_ms" not in d  # no reads: no read wait
    assert evidence.vdev_figures((ZFS / "lab-zpool-iostat-HpvP-y.txt").read_text(), status) == []  # no -l -q


def test_dmu_tx_deltas_and_writer_delays() -> None:
    d = evidence.dmu_tx_delta((ZFS / "lab-dmu_tx-before.txt").read_text(), (ZFS / "lab-dmu_tx-after.txt").read_text())
    assert d["dmu_tx.assigned"] == 24_633 and d["dmu_tx.dirty_throttle"] == 64 and d["dmu_tx.dirty_delay"] == 0
    assert evidence.writer_delays(d) == 64
    assert evidence.dmu_tx_delta("", (ZFS / "lab-dmu_tx-after.txt").read_text()) == {}


def test_disk_roles_in_the_pool() -> None:
    status = parse_zpool_status((ZFS / "lab-zpool-status-P-slog.txt").read_text())
    b = "/dev/disk/by-id/virtio-"
    devices = {"vdb": {"id": f"{b}tbdata0"}, "vde": {"id": f"{b}tblog0"}, "loop0": {"id": "loop0"}}
    roles = {n: d["role"] for n, d in evidence.with_roles(devices, status).items()}
    assert roles == {"vdb": "data", "vde": "log", "loop0": ""}
    assert evidence.disk_key(f"{b}tbdata0-part1") == f"{b}tbdata0"
    assert [evidence.disk_key(p) for p in ("/dev/sda1", "/dev/nvme0n1p2", "/dev/vdb", "/tmp/f.img")] == [
        "/dev/sda",
        "/dev/nvme0n1",
        "/dev/vdb",
        "/tmp/f.img",
    ]


def test_the_emulators_busiest_thread_counts_its_wait_for_a_core(tmp_path: Path) -> None:
    for tid, run, wait in ((100, 1_000, 0), (101, 5_000, 0)):
        (tmp_path / f"7/task/{tid}").mkdir(parents=True)
        (tmp_path / f"7/task/{tid}/schedstat").write_text(f"{run} {wait} 3\n")
    a = qemu_threads(7, str(tmp_path))
    (tmp_path / "7/task/101/schedstat").write_text(f"{5_000 + 600_000_000} {300_000_000} 9\n")
    (tmp_path / "7/task/100/schedstat").write_text(f"{1_000 + 100_000_000} 0 4\n")
    fig = emulator_figures(a, qemu_threads(7, str(tmp_path)), 1.0)
    assert fig == {"cpu.emulator_pct": 70.0, "cpu.emulator_busy_pct": 90.0}
    assert qemu_threads(8, str(tmp_path)) == {} and emulator_figures({}, a, 1.0) == {}
