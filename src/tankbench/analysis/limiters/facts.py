"""What one run recorded, as the limiter rules read it: the test's workload and target, fio's figures, the
samplers' figures (host CPU, CPU per thread group, each disk), ZFS's (ARC, pool vdevs, write throttle, ZIL) and
the fingerprint's device capabilities. Pure: built from a journal row (analysis) or from a run being recorded."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

from tankbench.targets import KindTraits
from tankbench.units import parse_size

#: a resource at or above this share of what it can do is "at its limit" (netcount.BUSY's figure)
BUSY = 0.85
MIB = 1 << 20


def _num(v: Any) -> float | None:
    return float(v) if isinstance(v, int | float) and not isinstance(v, bool) else None


def capabilities(fingerprint: Mapping[str, Any]) -> dict[str, Mapping[str, Any]]:
    """{disk (its /dev/disk/by-id path or /dev/name): capability} from a fingerprint's device_capability (a list
    of entries naming their `disk`: `bundle --anonymise` rewrites values, never keys)."""
    caps = fingerprint.get("device_capability")
    out: dict[str, Mapping[str, Any]] = {}
    for c in caps if isinstance(caps, list) else ():
        if isinstance(c, Mapping) and "error" not in c:
            out[str(c.get("disk", ""))] = c
            if c.get("name"):
                out.setdefault(f"/dev/{c['name']}", c)
    return out


def _size(text: Any) -> int:
    try:
        return parse_size(str(text))
    except (ValueError, TypeError):
        return 0


@dataclass(frozen=True)
class Device:
    """One disk's figures during a run (the agent's `dev.devices` check) and what it can do (its capability)."""

    name: str
    id: str  # its stable path (/dev/disk/by-id/…), else its kernel name
    label: str
    role: str  # "data", "log", "cache" or "" (unknown)
    read_iops: float
    write_iops: float
    read_bw: float
    write_bw: float
    busy_pct: float | None  # share of the run the disk had I/O in flight (diskstats io_ticks)
    queue: float | None  # mean I/Os in flight while busy
    await_ms: float | None  # mean time a request took, queued and served (diskstats)
    capability: Mapping[str, Any] = field(default_factory=dict)

    @property
    def ops(self) -> float:
        return self.read_iops + self.write_iops

    @property
    def bw(self) -> float:
        return self.read_bw + self.write_bw

    @property
    def io_size(self) -> float:
        return self.bw / self.ops if self.ops else 0.0

    def can_do_ops(self) -> float | None:
        """Requests per second the disk can do at this run's request size and queue depth (its capability:
        random 4k IOPS at QD1 or deep, sequential bandwidth), None without a capability."""
        cap = self.capability
        qd1, deep, seq = (_num(cap.get(k)) for k in ("read_iops_qd1", "read_iops_deep", "read_mibs_seq"))
        iops = qd1 if (self.queue or 1.0) < 1.5 and qd1 else deep or qd1
        if not iops:
            return None
        if seq and self.io_size > 4096:
            return min(iops, seq * MIB / self.io_size)
        return iops

    def utilisation(self) -> float | None:
        """The share of its capability the disk did (ops against what it can do at this size), else None."""
        can = self.can_do_ops()
        return self.ops / can if can else None


@dataclass(frozen=True)
class RunFacts:
    """Everything a limiter rule may read about one run."""

    params: Mapping[str, Any]
    props: Mapping[str, Any]
    traits: KindTraits
    metrics: Mapping[str, Any]
    checks: Mapping[str, Any]
    fingerprint: Mapping[str, Any] = field(default_factory=dict)
    #: seconds from fio's exit until the written data was durable (the run's drain), None when not measured
    drain_s: float | None = None

    def m(self, key: str) -> float | None:
        """A metric (or a numeric check) by key, None when the run did not record it."""
        v = self.metrics.get(key)
        return _num(v) if v is not None else _num(self.checks.get(key))

    def m0(self, key: str) -> float:
        return self.m(key) or 0.0

    # -- the workload -------------------------------------------------------------------------
    @cached_property
    def read_bytes(self) -> float:
        return self.m0("read.io_bytes")

    @cached_property
    def write_bytes(self) -> float:
        return self.m0("write.io_bytes") + self.m0("trim.io_bytes")

    @cached_property
    def direction(self) -> str:
        """ "read", "write" or "mixed": what fio did (bytes moved), else what the test asked for (rw)."""
        r, w = self.read_bytes, self.write_bytes
        if r or w:
            return "mixed" if r and w and min(r, w) > 0.05 * max(r, w) else ("read" if r >= w else "write")
        if self.params.get("workload", "fio") != "fio":  # a copy (cp, rsync, dd) or the fill experiment writes
            return "write"
        rw = str(self.params.get("rw", ""))
        if rw in ("rw", "randrw", "readwrite"):
            return "mixed"
        return "write" if ("write" in rw or "trim" in rw) else "read"

    @cached_property
    def durable_late_s(self) -> float | None:
        """For a run that wrote: seconds past fio's runtime until its data was durable (a late exit plus the drain
        after it) when that is at least 2 s and a fifth of the runtime (seed 000's finding), else None. Never for
        sync writes: each was durable (in the ZIL) when fio had its answer, and what ZFS writes to the data disks
        after fio ended is its txg, not the run's durability (seed 001 with a log device: 2.8 s of drain after
        529 sync IOPS on the log, the data disks busy with the txg, named as the run's limit)."""
        excess = self.m("timing.excess_s")
        if excess is None or self.direction == "read" or self.sync_writes:
            return None
        past = max(0.0, excess) + (self.drain_s or 0.0)
        return past if past >= max(2.0, 0.2 * (self.m("fio.runtime_s") or 0.0)) else None

    def zil_log_bytes(self, klass: str) -> float:
        """Bytes of ZIL log blocks written to one allocation class ("normal": the pool's data disks, "slog": the log
        device) during the run: the blocks' size as written, else their itx bytes, else 0."""
        return self.m(f"zil.itx_metaslab_{klass}_write") or self.m0(f"zil.itx_metaslab_{klass}_bytes")

    @property
    def seconds(self) -> float:
        return self.m("fio.runtime_s") or self.m("sys.sampled_s") or 0.0

    @property
    def bs(self) -> int:
        return _size(self.params.get("bs", ""))

    @property
    def block(self) -> int:
        """The ZFS block fio's I/O lands in (volblocksize of a zvol, else recordsize), 0 when unknown."""
        b = self.m("zfs.block_bytes")
        if b:
            return int(b)
        return _size(self.props.get("volblocksize") or self.props.get("recordsize") or "")

    @property
    def sync_writes(self) -> bool:
        """Each write waited to be durable: sync_mode sync/fsync/fdatasync, or ZIL commits during the run for at least
        a tenth of fio's writes (sync=always). A few commits — a zvol's last close flushing a buffered run — are not:
        fio's own writes went to memory and never waited for a disk."""
        if str(self.params.get("sync_mode", "async")) != "async":
            return True
        writes = self.m0("write.iops") * self.seconds
        commits = self.m0("zil.commit_count")
        return commits > 0 and (writes <= 0 or commits >= 0.1 * writes)

    @property
    def direct(self) -> bool:
        return str(self.params.get("io", "direct")) == "direct"

    @property
    def emulated(self) -> bool:
        fp = self.fingerprint
        return fp.get("accelerator") == "tcg" or fp.get("guest_accelerator") == "tcg"

    @property
    def zfs(self) -> bool:
        return bool(self.traits.zfs)

    @property
    def fio_ops(self) -> float:
        return self.m0("read.iops") + self.m0("write.iops") + self.m0("trim.iops")

    @property
    def fio_latency_ms(self) -> float | None:
        """fio's mean latency per I/O (ms), weighted by each direction's I/Os; None when fio printed none."""
        parts = [(self.m0(f"{d}.lat_mean_ns"), self.m0(f"{d}.iops")) for d in ("read", "write", "trim")]
        parts = [(lat, n) for lat, n in parts if lat and n]
        total = sum(n for _, n in parts)
        return sum(lat * n for lat, n in parts) / total / 1e6 if total else None

    @property
    def in_flight(self) -> float:
        """How many I/Os fio kept in flight (iodepth x numjobs; 1 for a synchronous engine)."""
        engine = str(self.params.get("ioengine", "libaio"))
        depth = (
            1.0
            if engine in ("sync", "psync", "vsync", "pvsync", "pvsync2")
            else float(self.params.get("iodepth", 1) or 1)
        )
        return depth * float(self.params.get("numjobs", 1) or 1)

    # -- the disks -----------------------------------------------------------------------------
    @cached_property
    def devices(self) -> tuple[Device, ...]:
        """Each sampled disk with its figures and capability (empty when the run has no per-disk figures)."""
        raw = self.checks.get("dev.devices")
        caps = capabilities(self.fingerprint)
        out = []
        for name, d in sorted(raw.items()) if isinstance(raw, Mapping) else ():
            if not isinstance(d, Mapping):
                continue
            disk_id = str(d.get("id") or name)
            cap = caps.get(disk_id) or caps.get(f"/dev/{name}") or {}
            out.append(
                Device(
                    name=name,
                    id=disk_id,
                    label=str(d.get("label") or name),
                    role=str(d.get("role", "")),
                    read_iops=float(d.get("read_iops") or 0.0),
                    write_iops=float(d.get("write_iops") or 0.0),
                    read_bw=float(d.get("read_bw_bytes") or 0.0),
                    write_bw=float(d.get("write_bw_bytes") or 0.0),
                    busy_pct=_num(d.get("busy_pct")),
                    queue=_num(d.get("queue")),
                    await_ms=_num(d.get("await_ms")),
                    capability=cap if isinstance(cap, Mapping) else {},
                )
            )
        return tuple(out)

    def role_devices(self, role: str) -> tuple[Device, ...]:
        """Disks of one role; for "data", disks whose role is unknown count too (a raw or file target's disk)."""
        return tuple(d for d in self.devices if d.role == role or (role == "data" and d.role == ""))

    @property
    def has_capability(self) -> bool:
        return any(d.capability for d in self.devices)

    def vdev(self, d: Device) -> Mapping[str, Any]:
        """The pool's figures for a disk's vdev (zpool iostat -l -q: waits in ms, queue lengths), {} if none."""
        vdevs = self.checks.get("zfs.vdevs")
        keys = {d.id if d.id.startswith("/") else f"/dev/{d.name}", f"/dev/{d.name}"}
        for v in vdevs if isinstance(vdevs, list) else ():
            if isinstance(v, Mapping) and v.get("disk") in keys:
                return v
        return {}

    # -- CPU -------------------------------------------------------------------------------------
    @property
    def cpu_count(self) -> int:
        n = self.fingerprint.get("cpu_count") or self.fingerprint.get("lab_cpus") or 1
        return max(1, int(n)) if isinstance(n, int | float) else 1

    @property
    def cpu_groups(self) -> Mapping[str, float]:
        """CPU % of one CPU per thread group (fio, z_wr_iss, txg_sync, …) during the run, {} if not sampled."""
        g = self.checks.get("cpu.groups")
        return {str(k): float(v) for k, v in g.items() if _num(v) is not None} if isinstance(g, Mapping) else {}

    # -- what was not recorded -------------------------------------------------------------------
    def missing(self) -> tuple[str, ...]:
        """The evidence this run lacks, by name (what a "not determined" says was missing)."""
        out = []
        if not self.devices:
            out.append("per-disk figures (diskstats)")
        elif not self.has_capability:
            out.append("what the disks can do (no capability probe)")
        if "sys.cpu_user_pct" not in self.metrics:
            out.append("host CPU")
        if not self.cpu_groups:
            out.append("CPU per thread group")
        if self.zfs:
            if "arc.demand_data_hits" not in self.metrics:
                out.append("ARC data hits (arcstats)")
            if self.direction != "read" and "dmu_tx.dirty_delay" not in self.metrics:
                out.append("write throttle counters (dmu_tx)")
            if not isinstance(self.checks.get("zfs.vdevs"), list):
                out.append("per-vdev latency and queues (zpool iostat -l -q)")
        if self.emulated and self.m("cpu.emulator_pct") is None:
            out.append("the emulator's CPU (qemu on the machine running the lab)")
        return tuple(out)

    def zfs_unavailable(self) -> tuple[str, ...]:
        """For a target not on ZFS: the ZFS evidence that does not exist for it (the report says so)."""
        if self.zfs:
            return ()
        return (
            "ARC hits (arcstats)",
            "write throttle (dmu_tx)",
            "txg syncs",
            "per-vdev latency and queues (zpool iostat -l -q)",
            "ZIL commits",
        )
