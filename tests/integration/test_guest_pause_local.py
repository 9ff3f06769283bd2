"""The controller's pause handling with a real qemu on this machine (single-level TCG): the guest's disk is a
sparse raw image on a size-limited tmpfs, so its writes meet a real ENOSPC without ZFS. qemu's write-error
policy decides what the guest sees; on a pause the controller runs the host command that frees space (a
remount with a larger size) and resumes the VM."""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from tankbench.errors import HostError
from tankbench.guest.qemu import GuestDisk
from tankbench.guest.records import OnPause
from tankbench.guest.testguest import TestGuest, upload_artefacts
from tankbench.guestconf.fill import fill_job, fio_pass, verifiable_bytes, verify_job
from tankbench.hosts.local import LocalHost
from tankbench.lab import build

MIB = 1 << 20
SMALL = 40  # MiB of tmpfs under the guest's disk
DISK = 128 << 20  # the guest's disk: larger than the filesystem under it


@dataclass(frozen=True)
class Small:
    """A size-limited tmpfs holding the guest disk's sparse image, and the command that enlarges it."""

    dir: Path
    image: Path

    def grow_argv(self) -> tuple[str, ...]:
        return ("mount", "-o", "remount,size=256m", str(self.dir))


@pytest.fixture
def small(tmp_path: Path) -> Iterator[Small]:
    d = tmp_path / "small"
    d.mkdir()
    subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={SMALL}m", "tmpfs", str(d)], check=True)
    try:
        img = d / "disk.img"
        with open(img, "wb") as f:
            f.truncate(DISK)
        yield Small(d, img)
    finally:
        subprocess.run(["umount", str(d)], check=True)


@pytest.fixture(scope="module")
def artefacts() -> tuple[str, str]:
    img = build.cached_image()
    assert img is not None, "the lab image (scripts/test builds it before pytest)"
    return upload_artefacts(
        LocalHost(), (img.dir / "guest-vmlinux").read_bytes(), (img.dir / "guest-initramfs.img").read_bytes()
    )


def _guest(artefacts: tuple[str, str], disk: GuestDisk) -> TestGuest:
    return TestGuest(LocalHost(), [disk], kernel=artefacts[0], initrd=artefacts[1], accel="tcg", name="pause")


def test_static_fio_runs_in_a_tcg_guest(artefacts: tuple[str, str], small: Small) -> None:
    """fio built with -march=native on an AVX-512 host died with SIGILL in every TCG guest."""
    with _guest(artefacts, GuestDisk("tbp0", str(small.image))) as g:
        run = g.exec("fio --version")
    assert run.rc == 0 and run.stdout.startswith("fio-"), (run.rc, run.stdout, run.stderr)


def test_enospc_pauses_the_vm_and_the_controller_frees_space_and_resumes(
    artefacts: tuple[str, str], small: Small
) -> None:
    """qemu's default werror (enospc) stops the VM on ENOSPC; the guest's fio never notices."""
    with _guest(artefacts, GuestDisk("tbp0", str(small.image), cache="writeback")) as g:
        dev = g.device("tbp0")
        run = g.run_fio(fill_job(dev, 96 * MIB), timeout=300, on_pause=OnPause(small.grow_argv(), max_pauses=2))
        fill = fio_pass(run.rc, run.fio, run.stderr)
        check = g.run_fio(verify_job(dev, verifiable_bytes(fill.write_bytes)), timeout=300)
        werror = g.block_settings()["tbp0"].werror
    assert fill.ok and fill.write_bytes == 96 * MIB, (fill, run.stderr)
    assert len(run.pauses) == 1, run.pauses
    p = run.pauses[0]
    assert p.resumed and p.nospace and p.io_status == {"tbp0": "nospace"}, p
    assert p.command is not None and p.command.rc == 0, p.command
    assert p.paused_s is not None and p.paused_s > 0
    # qemu had written what fit: the tmpfs's size, less what the filesystem keeps, in whole 1 MiB requests
    assert (SMALL - 4) * MIB <= p.wr_bytes["tbp0"] <= SMALL * MIB, p.wr_bytes
    assert [(e.action, e.reason, e.nospace) for e in run.io_errors] == [("stop", "No space left on device", True)]
    assert fio_pass(check.rc, check.fio, check.stderr).read_bytes == 96 * MIB and check.rc == 0, check.stderr
    assert werror == "auto"  # the property; qemu applies the block backend's default, enospc


def test_werror_report_gives_the_guest_an_io_error_and_what_it_wrote_before_is_intact(
    artefacts: tuple[str, str], small: Small
) -> None:
    """werror=report: virtio-blk tells the guest EIO (its protocol has no ENOSPC); qemu never pauses."""
    with _guest(artefacts, GuestDisk("tbp0", str(small.image), cache="writeback", werror="report")) as g:
        dev = g.device("tbp0")
        run = g.run_fio(fill_job(dev, 96 * MIB), timeout=300, on_pause=OnPause(small.grow_argv()))
        fill = fio_pass(run.rc, run.fio, run.stderr)
        check = g.run_fio(verify_job(dev, verifiable_bytes(fill.write_bytes)), timeout=300)
        werror = g.block_settings()["tbp0"].werror
    assert run.pauses == () and werror == "report"
    assert fill.errno == 5 and "Input/output error" in fill.message, fill
    assert 0 < fill.write_bytes <= SMALL * MIB
    assert {(e.action, e.reason) for e in run.io_errors} == {("report", "No space left on device")}
    verified = fio_pass(check.rc, check.fio, check.stderr)
    assert verified.ok and verified.read_bytes == verifiable_bytes(fill.write_bytes), check.stderr


def test_a_vm_left_paused_times_the_request_out_and_the_guest_recovers_after_cont(
    artefacts: tuple[str, str], small: Small
) -> None:
    """A host command that frees nothing: qemu stops the VM again at once; after max_pauses the controller
    leaves it stopped and answers like a timed-out command (never hangs); the caller frees space and resumes."""
    with _guest(artefacts, GuestDisk("tbp0", str(small.image), cache="writeback")) as g:
        dev = g.device("tbp0")
        run = g.run_fio(fill_job(dev, 96 * MIB), timeout=20, on_pause=OnPause(("true",), max_pauses=1))
        status = g.qmp("query-status")["status"]
        subprocess.run(list(small.grow_argv()), check=True)
        g.qmp("cont")
        after = g.exec("echo still-here", timeout=300)  # answered once the guest's fill ended
    assert run.rc == 124 and status == "io-error"
    assert [p.resumed for p in run.pauses] == [True, False], run.pauses
    assert "left paused" in run.pauses[1].note
    assert after.rc == 0 and after.stdout.strip() == "still-here"


def test_an_unwatched_request_that_times_out_is_an_error(artefacts: tuple[str, str], small: Small) -> None:
    """Without on_pause the controller keeps its old contract: a request that does not end is an error."""
    with _guest(artefacts, GuestDisk("tbp0", str(small.image))) as g:
        with pytest.raises(HostError, match="no answer from the guest within 2 s"):
            g.exec("sleep 8", timeout=2)
        assert g.exec("echo next", timeout=120).stdout.strip() == "next"  # stale lines of `sleep` skipped
