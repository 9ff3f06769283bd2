"""The test guest inside the lab (nested TCG): zvol and qcow2 (8k, 64k clusters) backings, fio in the guest,
markers found on the lab side, qemu's settings read back over QMP, no guest left behind a killed tankbench."""

from __future__ import annotations

import shlex
import subprocess
import sys
import textwrap
import time
from collections.abc import Iterator

import pytest

from tankbench.guest.qemu import GuestDisk
from tankbench.guest.testguest import TestGuest, boot_marks
from tankbench.hosts.ssh import SshHost
from tests.lab.conftest import LAB

POOL = "tbguest"
JOB = "[j]\nrw=randwrite\nbs=4k\nsize=8M\nruntime=3\ntime_based=1\ndirect=1\nioengine=libaio\niodepth=4\nend_fsync=1\n"


def sh(host: SshHost, script: str, timeout: float = 300) -> str:
    return host.run(["sh", "-c", script], check=True, timeout=timeout).stdout


@pytest.fixture(scope="module")
def backing(lab: SshHost) -> Iterator[dict[str, str]]:
    """A file-backed pool with a zvol and two qcow2 images (cluster 8k and 64k) on a dataset."""
    sh(
        lab,
        f"truncate -s 2G /var/tmp/{POOL}.img && zpool create -f -O atime=off {POOL} /var/tmp/{POOL}.img && "
        f"zfs create -V 256M -o volblocksize=16k {POOL}/vol && zfs create {POOL}/img && "
        f"qemu-img create -q -f qcow2 -o cluster_size=8k /{POOL}/img/c8k.qcow2 256M && "
        f"qemu-img create -q -f qcow2 -o cluster_size=64k /{POOL}/img/c64k.qcow2 256M && "
        f"qemu-img create -q -f qcow2 -o cluster_size=8k /{POOL}/img/h8k.qcow2 64M && "
        f"qemu-img create -q -f qcow2 -o cluster_size=64k /{POOL}/img/h64k.qcow2 64M && "
        f"udevadm settle -t 30 && test -b /dev/zvol/{POOL}/vol",
    )
    yield {
        "zvol": f"/dev/zvol/{POOL}/vol",
        "c8k": f"/{POOL}/img/c8k.qcow2",
        "c64k": f"/{POOL}/img/c64k.qcow2",
        "h8k": f"/{POOL}/img/h8k.qcow2",
        "h64k": f"/{POOL}/img/h64k.qcow2",
    }
    sh(lab, f"zpool destroy {POOL} && rm -f /var/tmp/{POOL}.img")


def test_guest_runs_fio_on_zvol_and_qcow2_and_writes_reach_the_backing(lab: SshHost, backing: dict[str, str]) -> None:
    disks = [
        GuestDisk("tbzvol", backing["zvol"], cache="none", aio="native"),
        GuestDisk("tbq8k", backing["c8k"], format="qcow2", bus="virtio-scsi", cache="writeback"),
        GuestDisk("tbq64k", backing["c64k"], format="qcow2", cache="directsync", aio="io_uring", l2_cache_size=1 << 20),
    ]
    t0 = time.monotonic()
    # q35: the machine tankbench boots when a campaign's disks are virtio-blk (the default bus), which it
    # hot-plugs on PCIe root ports; microvm (virtio-scsi hot-plug) is what test_vmdisk's quick form boots
    with TestGuest(lab, disks, machine="q35", progress=print) as guest:
        ready = time.monotonic() - t0
        marks = boot_marks(guest.console_log())
        print(
            f"nested test guest: ready {ready:.1f} s after start (controller: {guest.boot_s:.1f} s); "
            f"guest uptime at marks {marks}"
        )
        assert guest.accel_used == "tcg"  # the lab is emulated: never nested KVM
        assert set(guest.devices) == {"tbzvol", "tbq8k", "tbq64k"}
        assert guest.devices["tbq8k"].startswith("/dev/sd") and guest.devices["tbzvol"].startswith("/dev/vd")

        settings = guest.block_settings()
        assert {k: (s.driver, s.cache_mode, s.cluster_size) for k, s in settings.items()} == {
            "tbzvol": ("raw", "none", None),
            "tbq8k": ("qcow2", "writeback", 8192),
            "tbq64k": ("qcow2", "directsync", 65536),
        }
        assert settings["tbzvol"].file == backing["zvol"] and settings["tbq64k"].iothread is None
        # the bus as qemu's device model: virtio-blk on q35's PCIe, SCSI disks on virtio-scsi
        assert {k: s.model for k, s in settings.items()} == {
            "tbzvol": "virtio-blk-pci",
            "tbq8k": "scsi-hd",
            "tbq64k": "virtio-blk-pci",
        }
        assert settings["tbq64k"].write_cache == "off" and settings["tbq8k"].write_cache == "on"

        for disk in ("tbzvol", "tbq8k", "tbq64k"):
            t = time.monotonic()
            run = guest.run_fio(JOB, disk=disk)
            assert run.rc == 0, run.stderr
            assert run.fio is not None, run.fio_error
            job = run.fio["jobs"][0]
            assert job["error"] == 0 and job["write"]["io_bytes"] > 0
            dev = guest.devices[disk].removeprefix("/dev/")
            written = run.diskstats_after[dev][6] - run.diskstats_before[dev][6]  # sectors written
            assert written * 512 >= job["write"]["io_bytes"]
            assert 0 < run.guest_wall_s <= run.host_wall_s + 0.5  # the guest's clock is not running fast
            print(
                f"{disk}: {job['write']['iops']:.0f} IOPS, fio runtime {job['job_runtime']} ms, guest wall "
                f"{run.guest_wall_s:.1f} s, host wall {run.host_wall_s:.1f} s, round trip "
                f"{time.monotonic() - t:.1f} s, qemu cpu {run.qemu_cpu_s:.0f} s"
            )
        t = time.monotonic()
        first = guest.exec("cat /sys/devices/system/clocksource/clocksource0/current_clocksource")
        assert first.stdout.strip() == "tsc"
        print(f"per-request overhead (empty exec): {time.monotonic() - t:.2f} s")
        time.sleep(20)
        second = guest.exec("true")
        # the guest's clock (its TSC rate is given on the command line under TCG) keeps time with the host's
        ratio = (second.guest_start_s - first.guest_start_s) / (time.monotonic() - t - second.host_wall_s)
        print(f"guest clock / host clock: {ratio:.3f}")
        assert 0.8 < ratio < 1.25
        for disk in ("tbzvol", "tbq8k", "tbq64k"):
            res = guest.exec(
                f"printf 'TBMARK-{disk}-%s' $(cat /proc/uptime | cut -d. -f1) > /tmp/m; "
                f"dd if=/tmp/m of={guest.device(disk)} bs=4096 seek=1000 conv=fsync; cat /tmp/m"
            )
            assert res.rc == 0, res.stderr
        markers = {
            d: guest.exec(
                f"dd if={guest.device(d)} bs=4096 skip=1000 count=1 2>/dev/null | head -c 40 | tr -d '\\0'"
            ).stdout
            for d in ("tbzvol", "tbq8k", "tbq64k")
        }
        _hot_plug_and_read_settings_back(guest, backing)  # the same boot: each nested boot costs minutes
        pid = guest.pid
    # the guest powered off; its qemu is gone and the markers are in the backings on the lab side
    assert lab.run(["test", "-d", f"/proc/{pid}"], timeout=30).returncode != 0, f"guest qemu {pid} still running"
    assert (
        sh(lab, f"dd if={backing['zvol']} bs=4096 skip=1000 count=1 2>/dev/null | head -c 40 | tr -d '\\0'")
        == markers["tbzvol"]
    )
    assert markers["tbzvol"].startswith("TBMARK-tbzvol-")
    for disk, image in (("tbq8k", backing["c8k"]), ("tbq64k", backing["c64k"])):
        assert markers[disk].startswith(f"TBMARK-{disk}-")
        raw = sh(
            lab,
            f"qemu-img convert -f qcow2 -O raw {image} /var/tmp/{disk}.raw && dd if=/var/tmp/{disk}.raw "
            f"bs=4096 skip=1000 count=1 2>/dev/null | head -c 40 | tr -d '\\0'; rm -f /var/tmp/{disk}.raw",
        )
        assert raw == markers[disk]
        assert sh(lab, f"grep -c -a {shlex.quote(markers[disk])} {image} || true").strip() == "1"


def _hot_plug_and_read_settings_back(guest: TestGuest, backing: dict[str, str]) -> None:
    """Hot-plug two SCSI and then a virtio-blk qcow2 disk beside the boot disks, read qemu's settings back, run
    fio, unplug them."""
    boot_disks = set(guest.devices)
    dev = guest.attach(GuestDisk("tbhot", backing["h64k"], format="qcow2", bus="virtio-scsi", cache="unsafe"))
    assert dev.startswith("/dev/sd")
    s = guest.block_settings()["tbhot"]
    assert (s.driver, s.cache_mode, s.cluster_size, s.write_cache) == ("qcow2", "unsafe", 65536, "on")
    run = guest.run_fio("[j]\nrw=write\nbs=64k\nsize=4M\ndirect=1\n", disk="tbhot")
    assert run.rc == 0 and run.fio is not None and run.fio["jobs"][0]["write"]["io_bytes"] == 4 << 20
    second = guest.attach(GuestDisk("tbhot2", backing["h8k"], format="qcow2", bus="virtio-scsi"))
    assert second.startswith("/dev/sd") and guest.block_settings()["tbhot2"].cluster_size == 8192
    guest.detach("tbhot")
    guest.detach("tbhot2")
    # virtio-blk on a PCIe root port, with its own iothread, twice on the same port (a campaign's configurations)
    for round_ in (1, 2):
        vd = guest.attach(GuestDisk("tbhotblk", backing["h8k"], format="qcow2", cache="writeback", iothread=True))
        assert vd.startswith("/dev/vd"), vd
        s = guest.block_settings()["tbhotblk"]
        assert (s.model, s.cache_mode, s.cluster_size, s.iothread) == (
            "virtio-blk-pci",
            "writeback",
            8192,
            "io-tbhotblk",
        ), (round_, s)
        run = guest.run_fio("[j]\nrw=randwrite\nbs=4k\nsize=2M\ndirect=1\nend_fsync=1\n", disk="tbhotblk")
        assert run.rc == 0 and run.fio is not None and run.fio["jobs"][0]["write"]["io_bytes"] == 2 << 20
        guest.detach("tbhotblk")
    assert set(guest.refresh_devices()) == boot_disks and set(guest.block_settings()) == boot_disks


def test_killed_tankbench_leaves_no_guest_running(lab: SshHost) -> None:
    name = f"kill{int(time.time()) % 100000}"
    child = textwrap.dedent(f"""
        from tankbench.lab import vm
        from tankbench.guest.testguest import TestGuest
        TestGuest(vm.ssh_host(vm.require_up({LAB!r})), [], name={name!r}).start()
        import time; time.sleep(3600)
    """)
    proc = subprocess.Popen([sys.executable, "-c", child])
    find = ["pgrep", "-f", f"[t]ankbench-guest-{name} "]  # [t]: never matches the shell running pgrep
    try:
        deadline = time.monotonic() + 120
        while lab.run(find, timeout=30).returncode != 0:
            assert time.monotonic() < deadline, "the guest's qemu never started"
            assert proc.poll() is None, "the controlling process ended by itself"
            time.sleep(1)
        time.sleep(5)  # the guest is booting
    finally:
        proc.kill()  # SIGKILL: tankbench gets no chance to clean up
        proc.wait()
    deadline = time.monotonic() + 60
    while lab.run(find, timeout=30).returncode == 0:
        assert time.monotonic() < deadline, "the guest's qemu outlived the killed tankbench by 60 s"
        time.sleep(1)
