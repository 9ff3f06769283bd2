"""Copy tests inside the test guest (pure parts): the source disk, the timed script, the run's result."""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any

from tankbench.guest import guestcopy, qemu
from tankbench.guest.records import GuestRun
from tankbench.guestconf.copy import guest_copy_argv
from tankbench.guestconf.layers import MIB
from tankbench.metrics import copy_metrics


def test_copy_in_the_guest_is_the_host_argv_with_debian_programs() -> None:
    assert guest_copy_argv("cp", "/mnt/tbx/tankbench.fiodata") == [
        "/usr/bin/cp",
        "--",
        "/mnt/tbsrc/copy-source.bin",
        "/mnt/tbx/tankbench.fiodata",
    ]
    assert guest_copy_argv("rsync", "/mnt/x/f")[:2] == ["/usr/bin/rsync", "--whole-file"]
    assert guest_copy_argv("dd", "/dev/mapper/tbx") == [
        "/usr/bin/dd",
        "if=/mnt/tbsrc/copy-source.bin",
        "of=/dev/mapper/tbx",
        "bs=1M",
        "status=none",
    ]


def test_the_source_is_a_read_only_disk_image_outside_the_pool() -> None:
    disk = guestcopy.source_disk("/root/.cache/tankbench/work/c1/copy-source.ext4")
    node = qemu.blockdev(disk)
    assert node["read-only"] is True and node["file"]["read-only"] is True  # type: ignore[index]
    assert "discard" not in node and disk.format == "raw" and disk.bus == "virtio-scsi"
    assert "read-only" not in qemu.blockdev(qemu.GuestDisk("tbd0", "/x.img"))
    assert guestcopy.source_image_bytes(64 * MIB) == (64 + 64 + 4) * MIB
    argv = guestcopy.source_image_argv("/w/c1", 64 * MIB)
    assert argv[:2] == ["sh", "-c"]
    assert "ln -f -- /w/c1/copy-source.bin /w/c1/copy-source.d/" in argv[2]
    assert "mke2fs -q -F -t ext4 -b 4096 -L tbsrc -d /w/c1/copy-source.d /w/c1/copy-source.ext4 135168k" in argv[2]
    assert "mount -t ext4 -o ro,noload /dev/sdc /mnt/tbsrc" in guestcopy.mount_source_script("/dev/sdc")


def test_source_image_recipe_makes_an_ext4_image_holding_the_source(tmp_path: Path) -> None:
    (tmp_path / "copy-source.bin").write_bytes(b"\x17" * 100_000)
    subprocess.run(guestcopy.source_image_argv(str(tmp_path), 1 * MIB), check=True)
    img = tmp_path / "copy-source.ext4"
    assert img.stat().st_size == guestcopy.source_image_bytes(1 * MIB)
    listing = subprocess.run(["debugfs", "-R", "ls -l /", str(img)], capture_output=True, text=True, check=True)
    assert "copy-source.bin" in listing.stdout and " 100000 " in listing.stdout
    assert not (tmp_path / "copy-source.d").exists()  # the staging directory is removed


def test_copy_script_drops_caches_then_times_command_and_sync_without_forks() -> None:
    s = guestcopy.copy_script(["/usr/bin/cp", "--", "/a", "/b"], 184.7)
    lines = s.splitlines()
    assert lines[0] == "sync; echo 3 > /proc/sys/vm/drop_caches"
    assert lines[2] == "timeout 184 /usr/bin/cp -- /a /b 2>&1; rc=$?"
    assert lines[1] == "read -r t0 _ < /proc/uptime" and lines[3] == "read -r t1 _ < /proc/uptime"
    assert lines[4] == "sync" and lines[5] == "read -r t2 _ < /proc/uptime"
    assert "$(" not in s


def test_parse_copy_times() -> None:
    out = "noise\nTBCOPY rc=0 start=100.50 end=112.75 durable=113.00\n"
    assert guestcopy.parse_copy(out) == guestcopy.CopyTimes(0, 12.25, 0.25)
    assert guestcopy.parse_copy("cp: error\n") is None


def _run(stdout: str, rc: int = 0) -> GuestRun:
    before = {"sda": (0,) * 11, "sdb": (10, 0, 100, 0, 0, 0, 0) + (0,) * 4}
    after = {"sda": (0, 0, 0, 0, 900, 0, 131072, 0, 0, 0, 0), "sdb": (90, 0, 131172, 0, 0, 0, 0) + (0,) * 4}
    return GuestRun(
        rc=rc,
        stdout=stdout,
        stderr="",
        fio=None,
        guest_wall_s=15.0,
        host_wall_s=20.0,
        qemu_cpu_s=300.0,
        diskstats_before=before,
        diskstats_after=after,
    )


def test_copy_result_as_a_host_copy_tests_numbers() -> None:
    agent: dict[str, Any] = {"wall_s": 21.0, "drain_s": 0.5, "checks": {"drain.dirty_end_bytes": 0}, "samples": {}}
    run = _run("TBCOPY rc=0 start=10.0 end=18.0 durable=19.5\n")
    res = guestcopy.copy_result(agent, run, ["/usr/bin/cp", "--", "/a", "/b"], "/dev/sda", "/dev/sdb", 180.0)
    assert res["wall_s"] == 8.0 and res["drain_s"] == 2.0 and res["host_drain_s"] == 0.5
    assert res["exit_status"] == 0 and res["timed_out"] is False and res["fio_json"] == ""
    c = res["checks"]
    assert c["copy.guest_disk_write_bytes"] == 64 * MIB and c["copy.guest_source_read_bytes"] == 131072 * 512
    assert c["copy.guest_command_s"] == 8.0 and c["copy.guest_sync_s"] == 1.5 and c["copy.host_observed_s"] == 21.0
    assert c["drain.dirty_end_bytes"] == 0 and c["copy.command"] == "/usr/bin/cp -- /a /b"
    # the verdict turns wall and drain into the copy metrics exactly as for a host copy test
    m = copy_metrics(64 * MIB, res["wall_s"], res["drain_s"])
    assert m["copy.seconds"] == 8.0 and m["copy.durable_seconds"] == 10.0


def test_copy_result_of_a_copy_that_timed_out_or_never_reported() -> None:
    agent: dict[str, Any] = {"wall_s": 200.0, "drain_s": 0.1}
    late = guestcopy.copy_result(
        agent, _run("TBCOPY rc=143 start=1 end=181 durable=182\n", 143), ["x"], "sda", "sdb", 180
    )
    assert late["timed_out"] is True and late["exit_status"] == 143
    lost = guestcopy.copy_result(agent, _run("", 2), ["x"], "/dev/sda", "/dev/sdb", 180)
    assert lost["exit_status"] == 2 and lost["wall_s"] == 15.0 and lost["checks"]["copy.guest_command_s"] is None
