"""Read-modify-write: a write smaller than the ZFS block it lands in (recordsize, volblocksize) makes ZFS read
the rest of the block before it writes the whole block back (unless the block is in the ARC). The disks then
read during a write-only run; when they are the bottleneck, those reads are what bound it."""

from __future__ import annotations

from tankbench.analysis.limiters.base import Finding, Rule, count, size
from tankbench.analysis.limiters.disks import device_score
from tankbench.analysis.limiters.facts import RunFacts

#: disk reads as a share of the disks' ops during a write run at or above which RMW is said to be at work
READ_SHARE = 0.1
#: how close to their limit the data disks must be (or the writers delayed) for RMW to be what bounded the run
DISKS_BUSY = 0.5


def disk_rates(f: RunFacts) -> tuple[float, float, float]:
    """(read ops/s, write ops/s, read bytes/s) of the data disks during the run: per disk where sampled, else the
    run's disks together, else the pool."""
    data = f.role_devices("data")
    if data:
        return sum(d.read_iops for d in data), sum(d.write_iops for d in data), sum(d.read_bw for d in data)
    if f.m("dev.read_iops") is not None:
        return f.m0("dev.read_iops"), f.m0("dev.write_iops"), f.m0("dev.read_bw_bytes")
    return f.m0("zpool.read_ops_per_s"), f.m0("zpool.write_ops_per_s"), f.m0("zpool.read_bw_bytes")


def partial(f: RunFacts) -> bool:
    """fio's writes are not a whole number of ZFS blocks (bs 4k into 8k volblocks, 192k into 128k records)."""
    flag = f.checks.get("zfs.partial_record_writes")
    if isinstance(flag, bool):
        return flag
    return bool(f.block and f.bs and f.bs % f.block)


def read_factor(f: RunFacts) -> float | None:
    """Bytes the disks read per byte fio wrote (0: they read nothing — the blocks were new or in the ARC), None
    when fio wrote nothing or the disks were not measured."""
    measured = f.role_devices("data") or any(f.m(k) is not None for k in ("dev.read_iops", "zpool.read_ops_per_s"))
    written = f.write_bytes / f.seconds if f.seconds else 0.0
    return disk_rates(f)[2] / written if written and measured else None


def find(f: RunFacts) -> Finding | None:
    """Holds for a write-only run on ZFS with partial-block writes whose data disks read >= 10 % of their ops,
    while the disks were near their limit (>= 50 %) or ZFS delayed the writers."""
    if not f.zfs or f.direction != "write" or not partial(f):
        return None
    r, w, rbw = disk_rates(f)
    if r + w <= 0 or r / (r + w) < READ_SHARE:
        return None
    busy = max((device_score(d) for d in f.role_devices("data")), default=0.0)
    if not busy:
        busy = max(((d.busy_pct or 0.0) / 100.0 for d in f.role_devices("data")), default=0.0)
    delayed = f.m0("dmu_tx.dirty_delay") + f.m0("dmu_tx.dirty_over_max")
    if busy < DISKS_BUSY and not delayed:
        return None
    factor = read_factor(f)
    text = (
        f"{size(f.bs)} writes into {size(f.block)} blocks read-modify-write: the data disks read {count(r)} ops/s "
        f"({size(rbw)}/s) beside {count(w)} writes/s"
    )
    if factor is not None:
        text += f", {factor:.2f} B read per B fio wrote"
    if f.block and f.bs:
        text += f" (each {size(f.bs)} write needs its {size(f.block)} block: up to {f.block / f.bs:.0f}× the bytes)"
    if delayed:
        text += f"; ZFS delayed writers {count(f.m0('dmu_tx.dirty_delay'))} times"
    return Finding(
        "read-modify-write",
        1.0,
        text,
        figures={
            "disk_read_ops_per_s": round(r, 1),
            "disk_write_ops_per_s": round(w, 1),
            **({"read_per_written": round(factor, 3)} if factor is not None else {}),
        },
    )


RULE = Rule("read-modify-write", 2, find, "bs vs recordsize/volblocksize; data disks' reads during writes")
