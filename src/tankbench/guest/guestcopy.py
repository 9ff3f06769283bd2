"""Copy tests (cp, rsync, dd) on vm-disk targets: inside the test guest, from a separate source disk (seed 000).

Seed 000 copied an 8 GiB random file inside a KVM guest from a separate non-ZFS virtio disk onto xfs on a zvol
and onto xfs on a raw image. Here the source is a raw disk image in the campaign's work directory on the host
(outside the pool): an ext4 filesystem (made on the host with `mke2fs -d`) holding the campaign's random-filled
copy source, attached read-only and mounted read-only in the guest. A filesystem, not the bare random bytes:
rsync copies regular files only, and cp/rsync/dd then read the source as seed 000 did, from a file.

Each run drops the guest's page cache first (the source is read from its disk every time, not from the guest's
memory after the first repeat), then times the command and the guest's `sync` with the guest's clock, while the
host's agent observes the same window (samplers, ZFS capture, drain) as for fio.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

from tankbench.errors import HostError
from tankbench.guest.qemu import GuestDisk
from tankbench.guestconf.copy import SOURCE_FILE, SOURCE_ID, SOURCE_MOUNT, guest_copy_argv
from tankbench.guestconf.layers import FS_OVERHEAD_FIXED, FS_OVERHEAD_SHARE, MIB, round_up
from tankbench.hosts.base import Host
from tankbench.model import Test

if TYPE_CHECKING:
    from tankbench.agent import FioRunRequest

#: busybox `timeout` ends a copy that outlives its deadline with SIGTERM: the shell sees 128 + 15
TIMED_OUT_RC = 143

T = TypeVar("T")


def source_image(workdir: str) -> str:
    """The source disk's raw image on the host, beside the runner's copy source."""
    return f"{workdir}/copy-source.ext4"


def source_image_bytes(copy_size: int) -> int:
    """The source image: the file plus ext4's metadata (the same room a guest filesystem gets)."""
    return round_up(copy_size + FS_OVERHEAD_FIXED + copy_size // FS_OVERHEAD_SHARE, MIB)


def source_image_argv(workdir: str, copy_size: int) -> list[str]:
    """Make the source image on the host: ext4 holding a hard link of the random source (mke2fs -d copies the
    data; the image is written in full, not sparse)."""
    q = shlex.quote
    d, img = f"{workdir}/copy-source.d", source_image(workdir)
    return [
        "sh",
        "-c",
        f"rm -rf -- {q(d)} {q(img)} && mkdir -p -- {q(d)} && ln -f -- {q(f'{workdir}/{SOURCE_FILE}')} {q(d)}/ && "
        f"mke2fs -q -F -t ext4 -b 4096 -L {SOURCE_ID} -d {q(d)} {q(img)} {source_image_bytes(copy_size) // 1024}k"
        f" && rm -rf -- {q(d)}",
    ]


def source_disk(path: str) -> GuestDisk:
    """The source as a read-only guest disk. cache=writeback: the host's page cache keeps the source from
    being the bottleneck (seed 000: "neither are a bottleneck"); the guest still reads it through its disk."""
    return GuestDisk(SOURCE_ID, path, bus="virtio-scsi", cache="writeback", read_only=True, discard=False)


def mount_source_script(device: str) -> str:
    """Mount the source read-only (noload: no journal replay on a read-only disk)."""
    return (
        f"modprobe -a crc32c_generic ext4 2>&1; mkdir -p {SOURCE_MOUNT} && "
        f"mount -t ext4 -o ro,noload {device} {SOURCE_MOUNT}\n"
    )


def copy_script(argv: list[str], deadline_s: float) -> str:
    """Drop the guest's caches, then time the command and the guest's sync by the guest's clock (`read` of
    /proc/uptime is a builtin: no fork); prints "TBCOPY rc=… start=… end=… durable=…"."""
    return (
        "sync; echo 3 > /proc/sys/vm/drop_caches\n"
        "read -r t0 _ < /proc/uptime\n"
        f"timeout {int(deadline_s)} {shlex.join(argv)} 2>&1; rc=$?\n"
        "read -r t1 _ < /proc/uptime\n"
        "sync\n"
        "read -r t2 _ < /proc/uptime\n"
        'echo "TBCOPY rc=$rc start=$t0 end=$t1 durable=$t2"\n'
        "exit $rc\n"
    )


@dataclass(frozen=True)
class CopyTimes:
    """A copy in the guest: its exit status, the command's seconds and the sync's, by the guest's clock."""

    rc: int
    command_s: float
    sync_s: float


def parse_copy(stdout: str) -> CopyTimes | None:
    """The TBCOPY line of a copy script's output (None if the script did not get that far) (pure)."""
    m = re.search(r"^TBCOPY rc=(\d+) start=([\d.]+) end=([\d.]+) durable=([\d.]+)$", stdout, re.M)
    if not m:
        return None
    t0, t1, t2 = (float(m.group(i)) for i in (2, 3, 4))
    return CopyTimes(int(m.group(1)), round(t1 - t0, 3), round(t2 - t1, 3))


def written_bytes(before: Mapping[str, tuple[int, ...]], after: Mapping[str, tuple[int, ...]], dev: str) -> int:
    """Bytes the guest wrote to a device between two /proc/diskstats snapshots (sectors written x 512) (pure)."""
    name = dev.removeprefix("/dev/")
    if name not in before or name not in after:
        return 0
    return (after[name][6] - before[name][6]) * 512


def read_bytes(before: Mapping[str, tuple[int, ...]], after: Mapping[str, tuple[int, ...]], dev: str) -> int:
    """Bytes the guest read from a device between two /proc/diskstats snapshots (pure)."""
    name = dev.removeprefix("/dev/")
    if name not in before or name not in after:
        return 0
    return (after[name][2] - before[name][2]) * 512


def copy_result(
    result: Mapping[str, Any], run: Any, argv: list[str], disk: str, source: str, deadline_s: float
) -> dict[str, Any]:
    """The run's result from the observing agent's (host side) and the guest's copy (pure): wall = the
    command's guest seconds; drain = the guest's sync + the host's drain after it (copy.durable_seconds is
    then the time until the copied data was durable on the host, as on a host copy test)."""
    times = parse_copy(run.stdout)
    host_drain = float(result.get("drain_s") or 0.0)
    rc = times.rc if times else run.rc
    res = dict(result)
    res.update(
        fio_json="",
        exit_status=rc,
        stderr_tail=(run.stdout if rc else run.stderr)[-4000:],
        wall_s=times.command_s if times else run.guest_wall_s,
        drain_s=(times.sync_s if times else 0.0) + host_drain,
        host_drain_s=host_drain,
        timed_out=rc == TIMED_OUT_RC or bool(result.get("timed_out")),
    )
    res["checks"] = dict(
        result.get("checks", {}),
        **{
            "copy.where": "guest",
            "copy.command": shlex.join(argv),
            "copy.deadline_s": deadline_s,
            "copy.guest_caches_dropped": True,
            "copy.guest_command_s": times.command_s if times else None,
            "copy.guest_sync_s": times.sync_s if times else None,
            "copy.host_drain_s": host_drain,
            "copy.host_observed_s": result.get("wall_s"),
            "copy.guest_disk_write_bytes": written_bytes(run.diskstats_before, run.diskstats_after, disk),
            "copy.guest_source_read_bytes": read_bytes(run.diskstats_before, run.diskstats_after, source),
        },
    )
    return res


# -- run time ----------------------------------------------------------------------------------------------


def observed(host: Host, request: FioRunRequest, job: Callable[[], T]) -> tuple[dict[str, Any], T]:
    """Run `job` (something in the guest) while the host's agent observes the same window: it samples and
    captures from when it says "observing" until told to stop, then drains. (agent, job) results."""
    observe = request.copy()
    observe.pop("argv", None)
    observe["observe"] = True
    session = host.start_agent(observe)
    events = session.events()
    result: dict[str, Any] | None = None
    try:
        for ev in events:
            if ev.get("event") == "observing":
                break
            if ev.get("event") == "error":
                raise HostError(f"{host.name}: agent fio_run: {ev.get('message')}")
        out = job()
        session.send({"stop": True})
        for ev in events:
            if ev.get("event") == "result":
                result = ev
                break
            if ev.get("event") == "error":
                raise HostError(f"{host.name}: agent fio_run: {ev.get('message')}")
    finally:
        session.close()
    if result is None:
        raise HostError(f"{host.name}: the observing agent ended without a result: {session.stderr_text()[-800:]}")
    return dict(result), out


class Guest(Protocol):
    """What GuestCopies needs of a TestGuest."""

    def exec(self, script: str, timeout: float = ...) -> Any: ...
    def attach(self, disk: GuestDisk, timeout: float = ...) -> str: ...
    def detach(self, disk_id: str, timeout: float = ...) -> None: ...


class GuestCopies:
    """The copy source disk of a campaign run's guest, and the copy runs that read it."""

    def __init__(self, host: Host, guest: Guest, workdir: str, note: Callable[[str], None]) -> None:
        self.host = host
        self.guest = guest
        self.workdir = workdir
        self.note = note
        self.source_device = ""
        self.source_checks: dict[str, Any] = {}

    def ensure_source(self, copy_size: int) -> dict[str, Any]:
        """Make the source image on the host, attach it read-only and mount it in the guest (once)."""
        if self.source_device:
            return dict(self.source_checks)
        img = source_image(self.workdir)
        res = self.host.run(source_image_argv(self.workdir, copy_size), timeout=max(600.0, copy_size / (20 << 20)))
        if res.returncode != 0:
            raise HostError(
                f"{self.host.name}: making the copy source image {img} failed (needs mke2fs from e2fsprogs): "
                f"{res.stderr.strip()[-500:]}"
            )
        self.note(f"guest: copy source {img} attached read-only")
        dev = self.guest.attach(source_disk(img))
        run = self.guest.exec(mount_source_script(dev), timeout=600)
        if run.rc != 0:
            raise HostError(f"guest: mounting the copy source {dev} failed: {(run.stdout + run.stderr)[-800:]}")
        self.source_device = dev
        self.source_checks = {
            "copy.source_image": img,
            "copy.source_image_bytes": source_image_bytes(copy_size),
            "copy.source_guest_device": dev,
            "copy.source_disk": "virtio-scsi, read-only, cache=writeback, ext4 mounted ro",
        }
        return dict(self.source_checks)

    def close(self) -> None:
        """Unmount and unplug the source disk, and delete its image (as big as the copy; made again by the next
        campaign run, from the runner's source which stays)."""
        if not self.source_device:
            return
        self.source_device = ""
        self.guest.exec(f"umount {SOURCE_MOUNT}", timeout=600)
        self.guest.detach(SOURCE_ID)
        self.host.run(["rm", "-f", "--", source_image(self.workdir)], timeout=120)

    def run(
        self,
        test: Test,
        request: FioRunRequest,
        dest: str,
        disk: str,
        copy_size: int,
    ) -> tuple[dict[str, Any], Any]:
        """One copy run in the guest onto `dest` (a file in the guest filesystem, or for dd the device) on guest
        disk `disk`, observed by the host's agent; (the run's result, the guest's answer)."""
        source = self.ensure_source(copy_size)
        argv = guest_copy_argv(str(test.params["workload"]), dest)
        deadline = float(request["deadline_s"])
        result, run = observed(self.host, request, lambda: self.guest.exec(copy_script(argv, deadline), deadline + 120))
        res = copy_result(result, run, argv, disk, self.source_device, deadline)
        res["checks"].update(source)
        return res, run
