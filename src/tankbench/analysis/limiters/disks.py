"""The disks: a data disk or the log device that did about as much as it can (its capability: random 4k IOPS at
QD1 or deep and sequential bandwidth, measured once per device and fingerprint), or, with no capability, one that
had I/O in flight all the time; or disks that carry fio's own I/O (reads, sync writes) in whose service time fio's
I/O spent most of its latency (a latency-bound run: QD1 reads or sync writes on an HDD below its throughput); or,
for writes durable late, a data disk at its limit while busy (ZFS writes dirty data a txg at a time, the disk idle
between txgs). Evidence: which disk, how busy, against what it can do, and the pool's own wait figures for that vdev."""

from __future__ import annotations

import tankbench.analysis.limiters.cpu as cpu
from tankbench.analysis.limiters.base import Finding, Rule, count, size
from tankbench.analysis.limiters.facts import BUSY, Device, RunFacts
from tankbench.units import pct

#: without a capability, a disk busy (I/O in flight) this share of the run is taken as its limit
BUSY_ONLY = 0.95

#: with one I/O in flight fio's I/Os are served one after another, and the part of the path that takes most of each
#: I/O's time bounds the run: the disks, when their service time is at least this share of fio's latency (the rest
#: in the CPU's path: fio, the kernel, ZFS, in the lab the emulator). Deeper, the disks' share must reach BUSY. In
#: the lab an `hdd`-modelled disk read at QD1 by fio was 79 % of each I/O's time, the rest the emulated CPU's.
DOMINANT = 2 / 3


#: a run whose writes were durable late waited for the data disks to write them; ZFS writes its dirty data a txg
#: at a time, so between txgs the disks idle: a data disk busy at least this share of the run and, while busy, at or
#: above BUSY of what it can do bounded the durable figure (seed 000 in the lab, CI: tbdata0 81 % busy at 80 % of its
#: capability, 98 % of it while busy, the data durable 25 s past a 5 s runtime)
BURST_BUSY = 0.5


def busy_utilisation(d: Device) -> float | None:
    """The share of its capability the disk did while it had I/O in flight (its utilisation over its busy share),
    None without a capability or below BURST_BUSY busy."""
    u, busy = d.utilisation(), (d.busy_pct or 0.0) / 100.0
    return u / busy if u is not None and busy >= BURST_BUSY else None


def device_score(d: Device) -> float:
    """How close the disk was to its limit: its utilisation of capability, else (none measured) its busy share
    when that is at least BUSY_ONLY, else 0."""
    u = d.utilisation()
    if u is not None:
        return u
    busy = (d.busy_pct or 0.0) / 100.0
    return busy if busy >= BUSY_ONLY else 0.0


def waited(f: RunFacts, disks: tuple[Device, ...]) -> float | None:
    """The share of fio's latency its I/O spent in these disks: their requests' time (requests per fio I/O x
    the mean time a request took, summed over the disks) against fio's mean latency, per I/O fio had in flight.
    Near 1 (or above, for disks serving one I/O in parallel: a mirror, raidz) when each fio I/O waited for the
    disks' service time: a latency-bound run on disks below their throughput (QD1 reads, sync writes)."""
    lat, ops = f.fio_latency_ms, f.fio_ops
    if not lat or not ops:
        return None
    spent = sum(d.ops * d.await_ms for d in disks if d.await_ms)
    return spent / ops / (lat * f.in_flight) if spent else None


def carries_fio(f: RunFacts, role: str) -> bool:
    """Whether disks of this role carry fio's own I/O, so that fio waits for them: the data disks for reads and for
    sync writes without a log device; the log device for sync writes."""
    if role == "log":
        return f.sync_writes
    return f.direction == "read" or (f.sync_writes and not f.role_devices("log"))


def describe(d: Device, f: RunFacts) -> str:
    """ "tbdata0 at 39 IOPS of the 40 it can do (98 %), 99 % busy, 25 ms disk wait"."""
    can = d.can_do_ops()
    rate = f"{count(d.ops)} IOPS ({size(d.bw)}/s)"
    text = (
        f"{d.label} at {rate} of the {count(can)} it can do at {size(d.io_size)} requests ({pct(d.ops / can, BUSY)})"
        if can
        else (f"{d.label} at {rate}, capability not measured")
    )
    if d.busy_pct is not None:
        text += f", {pct(d.busy_pct / 100.0, BUSY_ONLY)} busy"
    v = f.vdev(d)
    waits = [
        (way, float(x))
        for way in ("read", "write")
        if isinstance(x := v.get(f"disk_wait_{way[0]}_ms"), int | float) and x
    ]
    if waits:
        text += ", disk wait " + ", ".join(f"{way} {x:.1f} ms" for way, x in waits)
    return text


def _busiest(f: RunFacts, role: str) -> tuple[Device, float] | None:
    scored = [(d, device_score(d)) for d in f.role_devices(role)]
    return max(scored, key=lambda p: p[1]) if scored else None


def _latency_finding(kind: str, f: RunFacts, role: str, lead: str) -> Finding | None:
    """The disks of this role were below their throughput, yet fio's I/O spent >= 85 % of its latency in them
    (at one I/O in flight: the dominant share, >= DOMINANT)."""
    disks = f.role_devices(role)
    share = waited(f, disks) if carries_fio(f, role) else None
    if share is None or share < (DOMINANT if f.in_flight <= 1 else BUSY):
        return None
    d = max(disks, key=lambda x: x.ops * (x.await_ms or 0.0))
    per = d.ops / f.fio_ops if f.fio_ops else 0.0
    rest = (
        f", the rest of each I/O outside them, one I/O at a time (CPU: {cpu.summary(f) or 'not measured'})"
        if share < BUSY
        else ""
    )
    text = (
        f"{lead}fio's I/O waited on the disks: {d.label} took {d.await_ms or 0:.1f} ms per request, "
        f"{per:.2f} requests per fio I/O, against fio's {f.fio_latency_ms or 0:.1f} ms per I/O "
        f"({pct(min(share, 1.0))} of its latency in the disks{rest}); {describe(d, f)}"
    )
    return Finding(
        kind, min(share, 1.5), text, d.label, {"latency_share": round(share, 3), "await_ms": d.await_ms or 0.0}
    )


def _burst_finding(f: RunFacts) -> Finding | None:
    """A run whose writes were durable late (f.durable_late_s) on data disks below BUSY over the run but at or above
    it while busy: ZFS wrote the dirty data at the disk's pace, a txg at a time."""
    if f.durable_late_s is None:
        return None
    scored = [(d, u) for d in f.role_devices("data") if (u := busy_utilisation(d)) is not None]
    if not scored:
        return None
    d, u = max(scored, key=lambda p: p[1])
    if u < BUSY:
        return None
    how = (
        "ZFS wrote the dirty data a txg at a time at the disk's pace, idle between txgs"
        if f.zfs
        else "the kernel wrote the dirty data back at the disk's pace, idle between writebacks"
    )
    text = f"{describe(d, f)}: {pct(min(u, 1.0))} of it while busy — {how}"
    return Finding(
        "data-disks",
        min(u, 1.0),
        text,
        d.label,
        {
            "utilisation": round(d.utilisation() or 0.0, 3),
            "busy_utilisation": round(u, 3),
            "ops_per_s": round(d.ops, 1),
        },
    )


def _finding(kind: str, f: RunFacts, role: str, lead: str) -> Finding | None:
    best = _busiest(f, role)
    if best is None or best[1] < BUSY:
        return _latency_finding(kind, f, role, lead)
    d, score = best
    others = [x for x in f.role_devices(role) if x is not d and device_score(x) >= BUSY]
    also = f"; also at the limit: {', '.join(x.label for x in others)}" if others else ""
    return Finding(
        kind,
        score,
        f"{lead}{describe(d, f)}{also}",
        d.label,
        {"utilisation": round(score, 3), "ops_per_s": round(d.ops, 1), "bw_bytes": round(d.bw, 1)},
    )


def find_data(f: RunFacts) -> Finding | None:
    """Holds when the busiest data disk did >= 85 % of what it can do, or fio's I/O waited on the data disks, or
    (writes durable late) a data disk did >= 85 % of it while busy."""
    return _finding("data-disks", f, "data", "") or _burst_finding(f)


def find_log(f: RunFacts) -> Finding | None:
    """Holds for sync writes when the log device did >= 85 % of what it can do."""
    if not f.sync_writes or not f.role_devices("log"):
        return None
    commits = f.m("zil.commit_count")
    lead = f"{count(commits)} ZIL commits; " if commits else ""
    slog = f.zil_log_bytes("slog")
    if slog:
        lead += f"{size(slog)} of log blocks to the log device; "
    return _finding("log-device", f, "log", lead)


def busiest_text(f: RunFacts) -> str:
    """The busiest disk's figures, for a "not determined" verdict."""
    best = _busiest(f, "data")
    return f"busiest data disk {describe(best[0], f)}" if best else ""


DATA = Rule("data-disks", 3, find_data, "per-disk IOPS, bandwidth and busy time (diskstats) vs the disk's capability")
LOG = Rule("log-device", 3, find_log, "the log device's IOPS and busy time vs its capability; ZIL commits")
