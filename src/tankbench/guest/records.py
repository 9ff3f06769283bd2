"""What a test guest reports, pure: one request's run (GuestRun) and its `guest.*` metrics, a disk's settings as
qemu reports them (BlockSettings), the guest's /proc and device lists parsed, the pause handling a request asks
for (OnPause). guest/testguest.py gets them from the controller."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from tankbench.guest import qemu
from tankbench.guestconf.pauses import IoErrors, Pause, parse_io_errors, parse_pauses


def parse_diskstats(text: str) -> dict[str, tuple[int, ...]]:
    """/proc/diskstats -> {device: (reads, reads merged, sectors read, ms reading, writes, ...)} (pure)."""
    out: dict[str, tuple[int, ...]] = {}
    for line in text.splitlines():
        p = line.split()
        if len(p) >= 14:
            out[p[2]] = tuple(int(x) for x in p[3:])
    return out


def parse_stat(text: str) -> dict[str, tuple[int, ...]]:
    """/proc/stat -> {"cpu": (user, nice, system, idle, iowait, irq, softirq, steal, ...), "ctxt": (n,), …}."""
    out: dict[str, tuple[int, ...]] = {}
    for line in text.splitlines():
        p = line.split()
        if p and (p[0] == "cpu" or p[0] in ("ctxt", "processes", "procs_running", "procs_blocked")):
            out[p[0]] = tuple(int(x) for x in p[1:])
    return out


def parse_devices(text: str) -> dict[str, str]:
    """The guest's device list ("vdb tbd0 1073741824" lines) -> {serial: "/dev/vdb"} (pure)."""
    out: dict[str, str] = {}
    for line in text.splitlines():
        p = line.split()
        if len(p) == 3 and p[1]:
            out[p[1]] = f"/dev/{p[0]}"
    return out


def cache_mode(cache: dict[str, Any]) -> str:
    """query-block's {"writeback", "direct", "no-flush"} -> the -drive cache= name it amounts to (pure)."""
    key = (bool(cache.get("direct")), bool(cache.get("no-flush")), bool(cache.get("writeback")))
    for name, value in qemu.CACHE_FLAGS.items():
        if value == key:
            return name
    return f"direct={key[0]},no-flush={key[1]},writeback={key[2]}"


@dataclass(frozen=True)
class GuestRun:
    """One request the guest ran (fio or a shell script): status, outputs, timing and /proc snapshots."""

    rc: int
    stdout: str
    stderr: str
    fio: dict[str, Any] | None  # fio's JSON output (fio requests only; None if it produced none)
    guest_wall_s: float  # measured in the guest (its uptime before and after)
    host_wall_s: float  # the whole request as the controller on the host saw it
    qemu_cpu_s: float  # qemu's user+system CPU seconds on the host, cumulative, at the end of the request
    diskstats_before: dict[str, tuple[int, ...]] = field(default_factory=dict)
    diskstats_after: dict[str, tuple[int, ...]] = field(default_factory=dict)
    stat_before: dict[str, tuple[int, ...]] = field(default_factory=dict)
    stat_after: dict[str, tuple[int, ...]] = field(default_factory=dict)
    fio_error: str = ""  # why fio's output could not be parsed, if it could not
    io_log_last: dict[str, str] = field(default_factory=dict)  # {per-job I/O log (tbio_*.log): its last line}
    guest_start_s: float = 0.0  # the guest's uptime when the request started (its clock, for cross-checks)
    #: with on_pause: each stop of the VM on an I/O error and how it ended, and qemu's BLOCK_IO_ERROR counts
    pauses: tuple[Pause, ...] = ()
    io_errors: tuple[IoErrors, ...] = ()
    watch_error: str = ""  # why the controller's pause watch failed, if it did

    @classmethod
    def from_result(cls, ev: dict[str, Any]) -> GuestRun:
        """Build from the controller's result event."""
        files: dict[str, str] = ev.get("files", {})
        fio, err = None, ""
        if "fio.json" in files:
            text = files["fio.json"]
            try:
                fio = json.loads(text[text.index("{") :]) if "{" in text else None  # fio may print notes first
            except ValueError as e:
                err = f"{e}: {text[:300]!r}"

        def up(k: str) -> float:
            try:
                return float(files.get(k, "0").split()[0])
            except (ValueError, IndexError):
                return 0.0

        return cls(
            rc=int(ev["rc"]),
            stdout=files.get("stdout", ""),
            stderr=files.get("stderr", ""),
            fio=fio,
            guest_wall_s=round(up("after.uptime") - up("before.uptime"), 3),
            host_wall_s=float(ev.get("host_wall_s", 0.0)),
            qemu_cpu_s=float(ev.get("qemu_cpu_s", 0.0)),
            diskstats_before=parse_diskstats(files.get("before.diskstats", "")),
            diskstats_after=parse_diskstats(files.get("after.diskstats", "")),
            stat_before=parse_stat(files.get("before.stat", "")),
            stat_after=parse_stat(files.get("after.stat", "")),
            fio_error=err,
            guest_start_s=up("before.uptime"),
            io_log_last={
                name: text.strip().splitlines()[-1]
                for name, text in files.items()
                if name.startswith("tbio_") and text.strip()
            },
            pauses=parse_pauses(ev.get("pauses", ())),
            io_errors=parse_io_errors(ev.get("io_errors", ())),
            watch_error=str(ev.get("watch_error", "")),
        )


def guest_metrics(run: GuestRun, device: str) -> dict[str, float]:
    """`guest.*` metrics of one request from the guest's /proc snapshots before and after it (pure): CPU shares
    (user, system incl. irq/softirq, iowait, steal), context switches, and the I/O the guest's kernel sent to
    its disk `device` ("/dev/sda"): operations, bytes and the average request size it issued to qemu."""
    out: dict[str, float] = {}
    a, b = run.stat_before.get("cpu"), run.stat_after.get("cpu")
    if a and b and len(a) >= 8 and len(b) >= 8:
        d = [y - x for x, y in zip(a, b)]
        total = sum(d[:8]) or 1
        out["guest.cpu_user_pct"] = round(100.0 * (d[0] + d[1]) / total, 2)
        out["guest.cpu_sys_pct"] = round(100.0 * (d[2] + d[5] + d[6]) / total, 2)
        out["guest.cpu_iowait_pct"] = round(100.0 * d[4] / total, 2)
        out["guest.cpu_steal_pct"] = round(100.0 * d[7] / total, 2)
    if "ctxt" in run.stat_before and "ctxt" in run.stat_after:
        out["guest.ctxt"] = float(run.stat_after["ctxt"][0] - run.stat_before["ctxt"][0])
    name = device.removeprefix("/dev/")
    da, db = run.diskstats_before.get(name), run.diskstats_after.get(name)
    if da and db:
        reads, read_sectors = db[0] - da[0], db[2] - da[2]
        writes, write_sectors = db[4] - da[4], db[6] - da[6]
        out["guest.disk_reads"] = float(reads)
        out["guest.disk_writes"] = float(writes)
        out["guest.disk_read_bytes"] = float(read_sectors * 512)
        out["guest.disk_write_bytes"] = float(write_sectors * 512)
        if reads + writes:
            out["guest.disk_avg_io_bytes"] = round((read_sectors + write_sectors) * 512 / (reads + writes), 1)
        if len(db) >= 17 and len(da) >= 17:  # kernels >= 5.5: flush requests completed (field 16 after the name)
            out["guest.disk_flushes"] = float(db[15] - da[15])
    return out


@dataclass(frozen=True)
class OnPause:
    """What the controller does when qemu stops the VM on an I/O error during a request: run `argv` on the host
    (e.g. free space; nothing when empty), then resume the VM; after `max_pauses` pauses it leaves the VM
    stopped (the request then times out, and the caller must free space and `cont` itself)."""

    argv: tuple[str, ...] = ()
    max_pauses: int = 3
    timeout: float = 300.0  # seconds the host command may take

    def request(self) -> dict[str, Any]:
        """The request field the controller reads."""
        return {"argv": list(self.argv), "max_pauses": self.max_pauses, "timeout": self.timeout}


@dataclass(frozen=True)
class BlockSettings:
    """A disk's settings as qemu reports them (QMP query-block + qom-get), not as tankbench asked."""

    node: str
    device: str  # qdev id, e.g. "dev-tbd0"
    driver: str  # raw | qcow2
    file: str
    cache_mode: str  # none | writeback | writethrough | directsync | unsafe
    cache: dict[str, bool]
    cluster_size: int | None
    write_cache: str  # the device's write-cache property ("on"/"off"/"auto")
    iothread: str | None
    werror: str = ""  # the device's werror property ("auto": the block backend's default, enospc)
    model: str = ""  # the device's QOM type: virtio-blk-pci (q35), virtio-blk-device (microvm), scsi-hd
