"""The test guest on this machine (not nested): its controller comes through stdin, checked by sha256, and
its files live in the user's 0700 directories; a controller planted where older versions kept it never runs."""

from __future__ import annotations

import hashlib
import os
import signal
import stat
import subprocess
from pathlib import Path

import pytest

from tankbench.errors import HostError
from tankbench.guest.initramfs import Cpio
from tankbench.guest.testguest import (
    BOOT_ATTEMPTS,
    TestGuest,
    controller_source,
    panic_line,
    panicked,
    process_ended,
    upload_artefacts,
)
from tankbench.hosts.local import LocalHost
from tankbench.lab import build
from tests.conftest import proc_cmdline, wait_until


def test_guest_controller_is_never_read_from_a_planted_file(tmp_path: Path) -> None:
    img = build.cached_image()
    assert img is not None, "the lab image (scripts/test builds it before pytest)"
    marker = tmp_path / "planted-ran"
    digest = hashlib.sha256(controller_source()).hexdigest()[:16]
    planted = Path(f"/var/tmp/tankbench-guestctl-{digest}.py")  # where the controller used to be installed
    planted.write_text(f"open({str(marker)!r}, 'w').write('x')\nraise SystemExit(1)\n")
    try:
        host = LocalHost()
        kernel, initrd = upload_artefacts(
            host, (img.dir / "guest-vmlinux").read_bytes(), (img.dir / "guest-initramfs.img").read_bytes()
        )
        with TestGuest(host, kernel=kernel, initrd=initrd, accel="tcg") as guest:
            run = guest.exec("echo hello-from-guest")
            assert run.rc == 0 and run.stdout.strip() == "hello-from-guest"
            for d in (Path(guest.run_dir).parent, Path(kernel).parent.parent):
                mode = os.stat(d)
                assert stat.S_IMODE(mode.st_mode) == 0o700 and mode.st_uid == os.getuid(), d
            pid = guest.pid
        wait_until(lambda: proc_cmdline(pid) is None, 30, "qemu outlived its controller")
        assert not marker.exists(), "a planted controller file was executed"
    finally:
        planted.unlink(missing_ok=True)


def test_a_guest_kernel_that_panics_at_boot_is_booted_again_then_named() -> None:
    """Issue 23: a test guest whose kernel panics during boot (under nested TCG a rare emulator fault did this in
    CI, once twice in a row) is booted again, up to BOOT_ATTEMPTS boots; when each panics, the error says so with
    every boot's console and the last one's tail.
    The panic here is real and certain: the guest's own initramfs with an /init laid over it that crashes the
    kernel through sysrq (a later cpio archive overrides an earlier one's files)."""
    img = build.cached_image()
    assert img is not None, "the lab image (scripts/test builds it before pytest)"
    crash = Cpio()
    crash.file(
        "init", b"#!/bin/busybox sh\n/bin/busybox mount -t proc proc /proc\necho c > /proc/sysrq-trigger\n", 0o755
    )
    host = LocalHost()
    kernel, initrd = upload_artefacts(
        host, (img.dir / "guest-vmlinux").read_bytes(), (img.dir / "guest-initramfs.img").read_bytes() + crash.finish()
    )
    said: list[str] = []
    guest = TestGuest(host, kernel=kernel, initrd=initrd, accel="tcg", boot_timeout=120, progress=said.append)
    with pytest.raises(HostError) as failed:
        guest.start()
    message = str(failed.value)
    assert f"the guest kernel panicked under emulation in each of {BOOT_ATTEMPTS} boots" in message, message
    assert "(Kernel panic - not syncing: sysrq triggered crash)" in message, message
    assert "Kernel Offset" in message, "the console's last lines follow"
    retries = [s for s in said if "booting again" in s]
    assert len(retries) == BOOT_ATTEMPTS - 1 and all("sysrq triggered crash" in r for r in retries), said
    assert retries[-1].endswith(f"({BOOT_ATTEMPTS} of {BOOT_ATTEMPTS})"), retries
    consoles = {log for log, _ in guest.panicked_boots}
    assert len(consoles) == BOOT_ATTEMPTS, guest.panicked_boots  # each boot kept its own console
    assert all(c in message and Path(c).is_file() for c in consoles), message
    assert proc_cmdline(guest.pid) is None, "the panicked guest's qemu is gone"


def test_panicked_reads_a_kernel_console() -> None:
    assert panicked("[ 176.2] Kernel panic - not syncing: Fatal exception in interrupt\n")
    assert panicked("[ 12.0] Oops: general protection fault, probably for non-canonical address\n")
    assert not panicked("TBGUEST 0 READY\n[ 3.1] traps: sh[51] general protection fault ip:4011 in sh\n")
    assert panic_line("[ 1.0] x\n[ 176.2] Kernel panic - not syncing: Fatal exception\n") == (
        "Kernel panic - not syncing: Fatal exception"
    )


def test_a_killed_qemu_not_yet_reaped_has_ended() -> None:
    """A SIGKILLed process is a zombie until its parent waits for it, and `kill -0` still succeeds on it: the
    test guest's crash check read that as a qemu still running (CI, guest layers: the campaign stopped instead of
    booting a new guest). A real child of this process stands in for the controller's qemu."""
    host = LocalHost()
    child = subprocess.Popen(["sleep", "600"])
    try:
        assert not process_ended(host, child.pid, settle_s=0.5)  # running
        os.kill(child.pid, signal.SIGKILL)
        wait_until(lambda: proc_cmdline(child.pid) is None, 30, "the killed child never became a zombie")
        assert subprocess.run(["kill", "-0", str(child.pid)]).returncode == 0  # what the old check asked
        assert process_ended(host, child.pid)  # a zombie, not reaped yet: ended
    finally:
        child.kill()
        child.wait()
    assert process_ended(host, child.pid)  # reaped: gone
