"""The ARC: a read run whose data came from memory measured the ARC, not the pool. One rule for the limiter and
the `arc-hits` warning: demand and prefetch *data* hits against misses (metadata hits say nothing about the
data fio read; O_DIRECT reads that bypass the ARC count in neither), checked against the bytes the disks read (a
run whose reads reached the disks did not measure the cache)."""

from __future__ import annotations

from tankbench.analysis.limiters.base import Finding, Rule, count, size
from tankbench.analysis.limiters.facts import RunFacts
from tankbench.units import pct

#: data hit ratio at or above which a read run is said to have measured the ARC (the old arc-hits threshold)
HIT_RATIO = 0.9
#: ... provided the disks read less than this share of what fio read
DISK_SHARE = 0.1


def data_hits(f: RunFacts) -> tuple[float, float] | None:
    """(hits, misses) of demand + prefetch data during the run; None when arcstats were not captured."""
    if f.m("arc.demand_data_hits") is None:
        return None
    hits = f.m0("arc.demand_data_hits") + f.m0("arc.prefetch_data_hits")
    misses = f.m0("arc.demand_data_misses") + f.m0("arc.prefetch_data_misses")
    return hits, misses


def disk_read_bytes(f: RunFacts) -> float | None:
    """Bytes the target's disks read during the run: diskstats of its disks, else the pool's read rate."""
    if f.m("dev.read_bytes") is not None:
        return f.m0("dev.read_bytes")
    if f.m("zpool.read_bw_bytes") is not None and f.seconds:
        return f.m0("zpool.read_bw_bytes") * f.seconds
    return None


def find(f: RunFacts) -> Finding | None:
    """Holds for a read (or mixed) run on ZFS whose data reads hit the ARC >= 90 % and whose disks read < 10 % of
    what fio read."""
    if not f.zfs or f.direction == "write" or f.read_bytes <= 0:
        return None
    hm = data_hits(f)
    if hm is None or hm[0] + hm[1] <= 0:
        return None  # no data went through the ARC: direct reads that bypass it, or holes
    hits, misses = hm
    ratio = hits / (hits + misses)
    disk = disk_read_bytes(f)
    share = disk / f.read_bytes if disk is not None else None
    if ratio < HIT_RATIO or (share is not None and share >= DISK_SHARE):
        return None
    reached = (
        f"the disks read {size(disk)} while fio read {size(f.read_bytes)} ({pct(share)})"
        if disk is not None and share is not None
        else "the disks' reads were not measured"
    )
    return Finding(
        "arc",
        ratio,
        f"the ARC served {pct(ratio)} of data reads ({count(hits)} demand/prefetch data hits, {count(misses)} "
        f"misses); {reached}: the run measured memory, not the pool",
        figures={
            "arc_data_hit_ratio": round(ratio, 4),
            "arc_data_hits": hits,
            "arc_data_misses": misses,
            **({"disk_read_share": round(share, 4)} if share is not None else {}),
        },
    )


RULE = Rule("arc", 1, find, "arcstats demand/prefetch data hits and misses; bytes the disks read vs fio's")
