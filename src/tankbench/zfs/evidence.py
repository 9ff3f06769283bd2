"""What ZFS says about a run's limiter (issue 32), pure functions over captured text: each leaf vdev's latency
and queues (`zpool iostat -Hpv -l -q`), the write throttle's counters (the `dmu_tx` kstat), and which role each
sampled disk plays in the pool (data, log, cache)."""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from tankbench.zfs.iostat import _GROUP_RE, IOSTAT_SECTIONS
from tankbench.zfs.parse import parse_arcstats

DMU_TX = "/proc/spl/kstat/zfs/dmu_tx"
#: `dmu_tx` counters kept as run deltas (metrics dmu_tx.<name>): transactions assigned, and each way ZFS held a
#: writer back (dirty_delay: past zfs_delay_min_dirty_percent; dirty_throttle: the ARC's dirty data over its
#: share; dirty_over_max: at zfs_dirty_data_max; wrlog_delay: the ZIL's log data over its limit; delay: ...)
DMU_TX_COUNTERS = (
    "assigned",
    "delay",
    "error",
    "suspended",
    "group",
    "memory_reserve",
    "memory_reclaim",
    "dirty_throttle",
    "dirty_delay",
    "dirty_over_max",
    "dirty_frees_delay",
    "wrlog_delay",
    "quota",
)
#: the ways a writer is held back, summed as "writer delays"
HELD = ("dirty_delay", "dirty_throttle", "dirty_over_max", "wrlog_delay", "dirty_frees_delay")

#: `zpool iostat -l` wait columns after the six of -p (ns with -p; rebuild_wait from OpenZFS 2.0 on)
LATENCY = (
    "total_wait_r",
    "total_wait_w",
    "disk_wait_r",
    "disk_wait_w",
    "syncq_wait_r",
    "syncq_wait_w",
    "asyncq_wait_r",
    "asyncq_wait_w",
    "scrub_wait",
    "trim_wait",
    "rebuild_wait",
)
#: `zpool iostat -q` queue columns after them: pending and active per class (rebuildq from 2.0 on)
QUEUES = tuple(
    f"{q}_{a}"
    for q in (
        "syncq_read",
        "syncq_write",
        "asyncq_read",
        "asyncq_write",
        "scrubq_read",
        "trimq_write",
        "rebuildq_write",
    )
    for a in ("pend", "activ")
)
KEPT_QUEUES = QUEUES[:8]


def dmu_tx_delta(before: str, after: str) -> dict[str, float]:
    """dmu_tx.<counter> deltas over the run (a counter missing from either text, or gone backwards: left out)."""
    a, b = parse_arcstats(before), parse_arcstats(after)
    out: dict[str, float] = {}
    for name in DMU_TX_COUNTERS:
        key = f"dmu_tx_{name}"
        if key in a and key in b and b[key] >= a[key]:
            out[f"dmu_tx.{name}"] = float(b[key] - a[key])
    return out


def writer_delays(m: Mapping[str, Any]) -> float:
    """Every time ZFS held a writer back during the run (the HELD counters summed)."""
    return float(sum(float(m.get(f"dmu_tx.{k}", 0.0) or 0.0) for k in HELD))


_KERNEL_PART = re.compile(r"^(/dev/(?:(?:sd|vd|xvd|hd)[a-z]+|(?:nvme\d+n\d+|mmcblk\d+|loop\d+)(?=p\d)))p?\d+$")


def disk_key(path: str) -> str:
    """The whole disk a vdev path names, as the agent names disks (dev.devices `id`): /dev/disk/by-id/X-part1 ->
    /dev/disk/by-id/X, /dev/sda1 -> /dev/sda, /dev/nvme0n1p1 -> /dev/nvme0n1; anything else as it is."""
    stem, sep, part = path.rpartition("-part")
    if sep and part.isdigit() and "/dev/disk/" in stem:
        return stem
    m = _KERNEL_PART.match(path)
    return m.group(1) if m else path


def device_key(name: str, device: Mapping[str, Any]) -> str:
    """A sampled disk's key for matching it with the pool's vdevs: its by-id path, else /dev/<kernel name>."""
    disk_id = str(device.get("id") or name)
    return disk_id if disk_id.startswith("/") else f"/dev/{name}"


def _value(text: str) -> float | None:
    try:
        return float(text)
    except ValueError:
        return None


def _columns(n: int) -> tuple[str, ...]:
    """The names of the n columns after the six of -p: -l then -q, with or without the rebuild columns."""
    if n >= len(LATENCY) + len(QUEUES):
        return LATENCY + QUEUES
    if n >= len(LATENCY) - 1 + len(QUEUES) - 2:
        return LATENCY[:-1] + QUEUES[:-2]
    return ()


def roles(status: Mapping[str, Any]) -> dict[str, str]:
    """{disk (disk_key of a leaf vdev): data | log | cache | special | dedup} from parse_zpool_status."""
    out = {disk_key(d): "data" for d in status.get("data", [])}
    for section in IOSTAT_SECTIONS:
        for d in status.get(section, []):
            out[disk_key(d)] = "log" if section == "logs" else section
    return out


def vdev_figures(text: str, status: Mapping[str, Any]) -> list[dict[str, Any]]:
    """Per leaf vdev over the run's `zpool iostat -Hpv -l -q -y POOL 1` intervals: its path (`vdev`), its disk
    (`disk`: disk_key) and role, mean ops and bytes per second each way, waits in ms (each weighted by that
    interval's ops in its direction) and mean queue lengths; [] when the output has no -l -q columns. A list, not
    a dict by path: `bundle --anonymise` rewrites values, never keys."""
    role = roles(status)
    acc: dict[str, dict[str, float]] = {}
    for line in text.splitlines():
        f = line.split("\t")
        cols = _columns(len(f) - 7)
        vdev = f[0].strip()
        if not cols or disk_key(vdev) not in role or _GROUP_RE.match(vdev):
            continue
        a = acc.setdefault(vdev, {"n": 0.0})
        a["n"] += 1
        ops = {"r": _value(f[3]) or 0.0, "w": _value(f[4]) or 0.0}
        for k, t in zip(("read_ops", "write_ops", "read_bw", "write_bw"), f[3:7]):
            a[k] = a.get(k, 0.0) + (_value(t) or 0.0)
        for k, t in zip(cols, f[7:]):
            v = _value(t)
            if v is None:
                continue
            if k in LATENCY:
                w = ops.get(k[-1], 0.0) if k[-2] == "_" else 0.0
                a[k] = a.get(k, 0.0) + v * w
            elif k in KEPT_QUEUES:
                a[k] = a.get(k, 0.0) + v
    return [{"vdev": v, "disk": disk_key(v), **_means(a, role[disk_key(v)])} for v, a in acc.items()]


def _means(a: Mapping[str, float], role: str) -> dict[str, Any]:
    n = a["n"]
    out: dict[str, Any] = {"role": role, "intervals": int(n)}
    for k in ("read_ops", "write_ops", "read_bw", "write_bw", *KEPT_QUEUES):
        out[k] = round(a.get(k, 0.0) / n, 2)
    for k in LATENCY[:8]:
        ops = a.get("read_ops" if k.endswith("_r") else "write_ops", 0.0)
        if k in a and ops:
            out[f"{k}_ms"] = round(a[k] / ops / 1e6, 3)
    return out


def with_roles(devices: Mapping[str, Any], status: Mapping[str, Any]) -> dict[str, Any]:
    """The agent's dev.devices with each disk's role in the pool (a disk not in the pool: "")."""
    role = roles(status)
    return {
        name: {**d, "role": role.get(device_key(name, d), "")} if isinstance(d, Mapping) else d
        for name, d in devices.items()
    }


def txg_syncs(rows: list[dict[str, Any]], before_last_txg: int, t0_ns: int, ramp_s: float) -> dict[str, list[float]]:
    """When each txg of the run synced, for the report's time series: txg_sync_start_s (seconds after fio's ramp
    ended: the txgs kstat's birth is CLOCK_MONOTONIC, as the agent's fio start `t0_ns`; the sync starts after
    the txg's open, quiesce and wait times), txg_sync_s (how long it synced) and txg_dirty_bytes."""
    out: dict[str, list[float]] = {"txg_sync_start_s": [], "txg_sync_s": [], "txg_dirty_bytes": []}
    for r in sorted((r for r in rows if r["state"] == "C" and r["txg"] > before_last_txg), key=lambda r: r["txg"]):
        start = r["birth"] + r["otime"] + r["qtime"] + r["wtime"]
        out["txg_sync_start_s"].append(round((start - t0_ns) / 1e9 - ramp_s, 3))
        out["txg_sync_s"].append(round(r["stime"] / 1e9, 3))
        out["txg_dirty_bytes"].append(float(r["ndirty"]))
    return out if out["txg_sync_start_s"] else {}
