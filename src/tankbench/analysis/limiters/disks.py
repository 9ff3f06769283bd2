"""The disks: a data disk or the log device that did about as much as it can (its capability: random 4k IOPS at
QD1 or deep and sequential bandwidth, measured once per device and fingerprint), or, with no capability, one that
had I/O in flight all the time. Evidence: which disk, how busy, against what it can do, and the pool's own wait
figures for that vdev (zpool iostat -l)."""

from __future__ import annotations

from tankbench.analysis.limiters.base import Finding, Rule, count, pct, size
from tankbench.analysis.limiters.facts import BUSY, Device, RunFacts

#: without a capability, a disk busy (I/O in flight) this share of the run is taken as its limit
BUSY_ONLY = 0.95


def device_score(d: Device) -> float:
    """How close the disk was to its limit: its utilisation of capability, else (none measured) its busy share
    when that is at least BUSY_ONLY, else 0."""
    u = d.utilisation()
    if u is not None:
        return u
    busy = (d.busy_pct or 0.0) / 100.0
    return busy if busy >= BUSY_ONLY else 0.0


def describe(d: Device, f: RunFacts) -> str:
    """ "tbdata0 at 39 IOPS of the 40 it can do (98 %), 99 % busy, 25 ms disk wait"."""
    can = d.can_do_ops()
    rate = f"{count(d.ops)} IOPS ({size(d.bw)}/s)"
    text = (
        f"{d.label} at {rate} of the {count(can)} it can do at {size(d.io_size)} requests ({pct(d.ops / can)})"
        if can
        else (f"{d.label} at {rate}, capability not measured")
    )
    if d.busy_pct is not None:
        text += f", {d.busy_pct:.0f} % busy"
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


def _finding(kind: str, f: RunFacts, role: str, lead: str) -> Finding | None:
    best = _busiest(f, role)
    if best is None or best[1] < BUSY:
        return None
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
    """Holds when the busiest data disk did >= 85 % of what it can do."""
    return _finding("data-disks", f, "data", "")


def find_log(f: RunFacts) -> Finding | None:
    """Holds for sync writes when the log device did >= 85 % of what it can do."""
    if not f.sync_writes or not f.role_devices("log"):
        return None
    commits = f.m("zil.commit_count")
    lead = f"{count(commits)} ZIL commits; " if commits else ""
    slog = f.m("zil.itx_metaslab_slog_write") or f.m("zil.itx_metaslab_slog_bytes")
    if slog:
        lead += f"{size(slog)} of log blocks to the log device; "
    return _finding("log-device", f, "log", lead)


def busiest_text(f: RunFacts) -> str:
    """The busiest disk's figures, for a "not determined" verdict."""
    best = _busiest(f, "data")
    return f"busiest data disk {describe(best[0], f)}" if best else ""


DATA = Rule("data-disks", 3, find_data, "per-disk IOPS, bandwidth and busy time (diskstats) vs the disk's capability")
LOG = Rule("log-device", 3, find_log, "the log device's IOPS and busy time vs its capability; ZIL commits")
