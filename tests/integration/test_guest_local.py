"""The test guest on this machine (not nested): its controller comes through stdin, checked by sha256, and
its files live in the user's 0700 directories; a controller planted where older versions kept it never runs."""

from __future__ import annotations

import hashlib
import os
import stat
import time
from pathlib import Path

from tankbench.guest.testguest import TestGuest, controller_source, upload_artefacts
from tankbench.hosts.local import LocalHost
from tankbench.lab import build


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
        deadline = time.monotonic() + 30
        while os.path.exists(f"/proc/{pid}") and time.monotonic() < deadline:
            time.sleep(0.2)
        assert not os.path.exists(f"/proc/{pid}"), "qemu outlived its controller"
        assert not marker.exists(), "a planted controller file was executed"
    finally:
        planted.unlink(missing_ok=True)
