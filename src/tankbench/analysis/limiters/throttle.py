"""ZFS's write throttle: once dirty data passes zfs_delay_min_dirty_percent of zfs_dirty_data_max, ZFS delays
each writer (dmu_tx dirty_delay), holds it while the ARC's dirty data is over its share (dirty_throttle) and stops
it at the maximum (dirty_over_max) until the txg sync has written data out; the writers — fio, or the kernel's
writeback in front of a zvol — then run at the pool's sync speed, not their own."""

from __future__ import annotations

from tankbench.analysis.limiters.base import Finding, Rule, count, size
from tankbench.analysis.limiters.facts import RunFacts
from tankbench.zfs.evidence import HELD

#: transactions held back, as a share of those assigned, at or above which the throttle bounded the run
HELD_SHARE = 0.001
#: ... and at least this many of them
HELD_MIN = 10


def delays(f: RunFacts) -> dict[str, float] | None:
    """{counter: times} of the ways ZFS held writers back during the run; None without dmu_tx kstats."""
    if f.m("dmu_tx.assigned") is None and f.m("dmu_tx.dirty_delay") is None:
        return None
    return {k: f.m0(f"dmu_tx.{k}") for k in HELD if f.m0(f"dmu_tx.{k}")}


def find(f: RunFacts) -> Finding | None:
    """Holds for writes on ZFS when at least 10 transactions, and 0.1 % of those assigned, were held back, or
    dirty data reached zfs_dirty_data_max."""
    if not f.zfs or f.direction == "read":
        return None
    held = delays(f)
    if held is None:
        return None
    total, over = sum(held.values()), held.get("dirty_over_max", 0.0)
    assigned = f.m0("dmu_tx.assigned") or f.m0("write.total_ios")
    share = total / assigned if assigned else (1.0 if total else 0.0)
    if not over and (total < HELD_MIN or share < HELD_SHARE):
        return None
    ways = ", ".join(f"{k} {count(v)}" for k, v in held.items())
    text = f"ZFS held writers back {count(total)} times ({ways}; dmu_tx)"
    if assigned:
        text += f" of {count(assigned)} transactions"
    txgs, sync_max = f.m("zfs.txgs_synced"), f.m("zfs.txg_sync_time_max_s")
    if txgs:
        text += f"; {count(txgs)} txgs synced, the longest in {sync_max or 0:.1f} s"
    dirty = f.m("zfs.txg_ndirty_max_bytes")
    if dirty:
        text += f", up to {size(dirty)} dirty in one txg"
    return Finding(
        "write-throttle",
        1.0,
        text,
        figures={"writer_delays": total, "dirty_over_max": over, "held_share": round(share, 5)},
    )


RULE = Rule("write-throttle", 2, find, "dmu_tx kstats (dirty_delay, dirty_throttle, dirty_over_max), txg syncs")
