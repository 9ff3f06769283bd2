"""The pool-full experiment (`workload = "fill"`, seed 003), its pure parts: fio jobs, ballast arithmetic,
what the guest saw, the run's metrics, checks and verdict. drivers/vmfill.py runs it.

Seed 003: with a zvol the guest saw I/O errors when the pool filled; with a qcow2 on a dataset libvirt paused
the guest, space was freed, the guest resumed and never noticed. tankbench reproduces it small: a tagged
ballast dataset's refreservation takes all but `room` bytes of the pool, the guest writes a thin disk larger
than the room with fio (verification headers in every block), and the controller resumes the VM whenever
qemu pauses it on ENOSPC after releasing the ballast. A second fio pass reads back exactly the bytes the
first one wrote and checks them.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from tankbench.guestconf.pauses import IoErrors, Pause, effective_werror, pause_record

#: fio block size of the fill: large blocks, so the guest reaches a full pool quickly
FILL_BS = 1 << 20
#: the fill writes this many times the room (and the disk must be at least that large): enough to run into
#: the full pool whatever ZFS's accounting lets through, and little to write after a resume on a big disk
WRITE_PER_ROOM = 2
#: what the guest saw when the pool filled
SAW = ("io-error", "paused", "none")
#: the checks of a fill run the report reads (analysis/cases.py extracts only named keys from the journal)
FILL_CHECK_KEYS = (
    "fill.guest_saw",
    "fill.resumed",
    "fill.intact",
    "fill.werror",
    "fill.fio_error",
    "fill.verify_error",
    "fill.host_errors",
    "fill.cleaned",
)
_ERRNO_NAMES = {5: "EIO", 28: "ENOSPC", 84: "EILSEQ", 122: "EDQUOT"}


def ballast_bytes(available: int, room: int, align: int = FILL_BS) -> int:
    """The ballast's refreservation: all of `available` but `room`, rounded down to `align` (so the room is
    at least `room`); 0 when the pool has no more than the room free."""
    if available <= room:
        return 0
    return (available - room) // align * align


def fill_size(disk: int, room: int) -> int:
    """Bytes the fill writes: WRITE_PER_ROOM x the room, at most the whole disk."""
    return min(disk, WRITE_PER_ROOM * room)


def fill_job(filename: str, size: int, name: str = "fill") -> str:
    """fio job that writes the disk from its start until it is full or an error stops it.

    One 1 MiB write at a time (psync, iodepth 1): the bytes fio reports written are exactly the first ones
    of the disk, so a later pass can check exactly those. verify=crc32c without do_verify writes a checksum
    header in each block of random (incompressible) data; end_fsync makes the guest flush at the end."""
    return "\n".join(
        [
            "; tankbench fill: write until the pool is full (seed 003); checksummed blocks for a later verify",
            "[global]",
            f"filename={filename}",
            "ioengine=psync",
            "direct=1",
            "rw=write",
            f"bs={FILL_BS}",
            "iodepth=1",
            f"size={size}",
            "verify=crc32c",
            "do_verify=0",
            "verify_state_save=0",
            "end_fsync=1",
            "",
            f"[{name}]",
            "",
        ]
    )


def verify_job(filename: str, nbytes: int, name: str = "fill") -> str:
    """fio job that reads back the first `nbytes` the fill wrote and checks each block's header and checksum
    (the same job with verify_only: fio regenerates what it wrote and compares)."""
    return fill_job(filename, nbytes, name).replace("do_verify=0", "do_verify=1\nverify_only=1\nverify_fatal=1")


def verifiable_bytes(written: int) -> int:
    """The bytes a verify pass can check: whole blocks only."""
    return written // FILL_BS * FILL_BS


@dataclass(frozen=True)
class FioPass:
    """One fio pass in the guest: exit status, fio's error (errno) and bytes, and its first error line."""

    rc: int
    errno: int
    write_bytes: int
    read_bytes: int
    message: str  # fio's first error line ("fio: io_u error on file /dev/vda: Input/output error: write …")

    @property
    def ok(self) -> bool:
        return self.rc == 0 and self.errno == 0


def fio_pass(rc: int, fio: Mapping[str, Any] | None, stderr: str) -> FioPass:
    """A FioPass from fio's JSON (None when fio wrote none) and its stderr."""
    job = (fio or {}).get("jobs", [{}])[0] if (fio or {}).get("jobs") else {}
    lines = [ln for ln in stderr.splitlines() if re.match(r"^(fio: |verify: )", ln)]
    return FioPass(
        rc=rc,
        errno=int(job.get("error", 0) or 0),
        write_bytes=int(job.get("write", {}).get("io_bytes", 0) or 0),
        read_bytes=int(job.get("read", {}).get("io_bytes", 0) or 0),
        message=lines[0] if lines else ("" if rc == 0 else stderr.strip()[-300:]),
    )


@dataclass(frozen=True)
class FillOutcome:
    """What one fill run measured, from the guest's and qemu's side."""

    fill: FioPass
    verify: FioPass | None  # None: nothing to verify (no whole block written) or the pass did not run
    verified_bytes: int  # the bytes the verify pass was asked to check
    pauses: tuple[Pause, ...]
    io_errors: tuple[IoErrors, ...]
    node: str  # the guest disk's qemu node (disk id)
    werror_property: str  # the device's werror as qom-get reads it ("auto" unless the test set one)
    watch_error: str = ""

    @property
    def guest_saw(self) -> str:
        """io-error (fio got an error), paused (qemu stopped the VM; fio saw nothing) or none."""
        if self.fill.errno or self.fill.rc:
            return "io-error"
        return "paused" if self.pauses else "none"

    @property
    def resumed(self) -> bool | None:
        """Every pause ended with the VM running again; None when there was no pause."""
        return all(p.resumed for p in self.pauses) if self.pauses else None

    @property
    def bytes_before_stop(self) -> int:
        """Bytes written before the first pause (qemu's count for the disk) or error (fio's); all of them if
        neither happened."""
        if self.pauses:
            return int(self.pauses[0].wr_bytes.get(self.node, 0))
        return self.fill.write_bytes

    @property
    def intact(self) -> bool | None:
        """Every byte the guest was told was written reads back as written; None when nothing was checked."""
        if self.verify is None:
            return None
        return self.verify.ok and self.verify.read_bytes >= self.verified_bytes

    @property
    def host_errors(self) -> int:
        """I/O errors qemu got from the host for this disk (BLOCK_IO_ERROR events)."""
        return sum(e.count for e in self.io_errors if e.node == self.node)


def errno_name(n: int) -> str:
    """5 -> "EIO (5)"."""
    return f"{_ERRNO_NAMES[n]} ({n})" if n in _ERRNO_NAMES else str(n)


def first_bad_offset(message: str) -> int | None:
    """The offset fio's verify names in "verify: bad magic header 0, … at file /dev/vda offset 50331648"."""
    m = re.search(r" offset (\d+)", message)
    return int(m.group(1)) if m else None


def fill_metrics(o: FillOutcome) -> dict[str, float]:
    """The run's fill.* numbers (each defined in metrics.py's registry)."""
    return {
        "fill.bytes_written": float(o.fill.write_bytes),
        "fill.bytes_before_stop": float(o.bytes_before_stop),
        "fill.verified_bytes": float(o.verify.read_bytes if o.verify else 0),
        "fill.pauses": float(len(o.pauses)),
        "fill.paused_s": float(sum(p.paused_s or 0.0 for p in o.pauses)),
        "fill.host_io_errors": float(o.host_errors),
    }


def fill_checks(o: FillOutcome) -> dict[str, Any]:
    """The run's fill.* checks: what the guest saw, whether it resumed, whether the data is intact, and how."""
    c: dict[str, Any] = {
        "fill.guest_saw": o.guest_saw,
        "fill.resumed": o.resumed,
        "fill.intact": o.intact,
        "fill.werror": effective_werror(o.werror_property),
        "fill.werror_property": o.werror_property,
        "fill.pause_records": [pause_record(p) for p in o.pauses],
        "fill.host_errors": [
            {"action": e.action, "reason": e.reason, "nospace": e.nospace, "count": e.count, "operation": e.operation}
            for e in o.io_errors
            if e.node == o.node
        ],
    }
    if o.guest_saw == "io-error":
        c["fill.fio_errno"] = o.fill.errno
        c["fill.fio_error"] = f"{errno_name(o.fill.errno)}: {o.fill.message}" if o.fill.errno else o.fill.message
    if o.verify is not None and not o.intact:
        c["fill.verify_error"] = o.verify.message or f"fio exited {o.verify.rc}"
        c["fill.verify_bad_offset"] = first_bad_offset(o.verify.message)
    if o.watch_error:
        c["fill.watch_error"] = o.watch_error
    return c


def fill_status(metrics: Mapping[str, float], checks: Mapping[str, Any]) -> tuple[str, tuple[str, ...]]:
    """A fill run's status and notes from its fill.* metrics and checks (the verdict; pure).

    What the guest saw is the finding, not a failure: an I/O error, a pause, even lost data are results.
    The run failed when it measured nothing: the pool never filled, a pause was left unresolved, the
    verify pass did not run, or the controller's watch broke."""
    notes: list[str] = []
    saw = checks.get("fill.guest_saw")
    written = int(metrics.get("fill.bytes_written", 0))
    if checks.get("fill.watch_error"):
        return "failed", (f"the controller's pause watch failed: {checks['fill.watch_error']}",)
    if checks.get("fill.resumed") is False:
        return "failed", ("qemu paused the VM and it was not resumed",)
    if saw == "none" and not metrics.get("fill.host_io_errors"):
        return "failed", (
            f"the guest wrote all {written} bytes and qemu saw no I/O error: the pool never filled "
            "(is the room larger than the disk?)",
        )
    if checks.get("fill.intact") is None and written >= (1 << 20):
        return "failed", ("the verify pass did not run",)
    if saw == "paused":
        notes.append(f"qemu paused the VM {int(metrics.get('fill.pauses', 0))}x; resumed after space was freed")
    elif saw == "io-error":
        notes.append(f"the guest saw {checks.get('fill.fio_error', 'an I/O error')}")
    else:
        notes.append("qemu ignored the host's write errors: the guest saw none")
    if checks.get("fill.intact") is False:
        notes.append(f"data written before is NOT intact: {checks.get('fill.verify_error', '')}")
    return "done", tuple(notes)
