"""Honesty checks for ZFS targets: pure functions returning `checks` fields (keys prefixed "zfs.").

Each one explains, in its note, why a number may not measure what the test name says. See
docs/zfs-metrics.md for every key.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

#: the ZFS object fio opens on the host (a target kind's `zfs_object` trait): a dataset's file, a zvol
ZFS_OBJECTS = ("filesystem", "volume")

# Module parameters (/sys/module/zfs/parameters/*) that change what a benchmark measures.
FINGERPRINT_TUNABLES = (
    "zfs_arc_max",
    "zfs_arc_min",
    "zfs_txg_timeout",
    "zfs_dirty_data_max",
    "zfs_dirty_data_max_percent",
    "zfs_dirty_data_max_max",
    "zfs_dirty_data_sync_percent",
    "zfs_delay_min_dirty_percent",
    "zfs_vdev_async_write_max_active",
    "zfs_vdev_async_write_min_active",
    "zfs_vdev_sync_write_max_active",
    "zfs_vdev_async_read_max_active",
    "zfs_vdev_sync_read_max_active",
    "zfs_vdev_max_active",
    "zfs_vdev_aggregation_limit",
    "zfs_prefetch_disable",
    "zfs_compressed_arc_enabled",
    "zfs_abd_scatter_enabled",
    "zfs_dio_enabled",
    "zfs_vdev_direct_write_verify",
    "zfs_immediate_write_sz",
    "zil_slog_bulk",
    "zio_taskq_batch_pct",
    "zvol_threads",
    "zvol_request_sync",
    "zvol_use_blk_mq",
    "zvol_blk_mq_queue_depth",
    "zvol_num_taskqs",
)


def direct_io_check(
    version: tuple[int, int, int] | None,
    zfs_object: str,
    io: str,
    direct_prop: str | None,
    dio_enabled: str | None = None,
) -> dict[str, Any]:
    """Whether O_DIRECT really bypasses ZFS caching for this target; `zfs_object` is what fio opens on the host:
    "filesystem" (a dataset's file), "volume" (a zvol) or "" (no ZFS object: {} is returned).

    For io == "direct": {"zfs.direct_ignored": bool, "zfs.direct_note": str}. Datasets on OpenZFS < 2.3
    (or an unknown version) accept O_DIRECT but serve it through the ARC; >= 2.3 honours it unless the
    `direct` property is "disabled" or the module parameter zfs_dio_enabled (`dio_enabled`, as read from
    /sys) is "0". A zvol's O_DIRECT skips the Linux page cache only: the zvol still goes through the ARC,
    so it counts as ignored. For buffered I/O on a >= 2.3 dataset with direct=always, returns
    {"zfs.direct_forced": True, "zfs.direct_note": ...}: the "buffered" test measures direct I/O.
    Otherwise (buffered I/O, or a target that is not ZFS) returns {}.
    """
    if zfs_object not in ZFS_OBJECTS:
        return {}
    modern = version is not None and version >= (2, 3, 0)
    honoured = modern and direct_prop != "disabled" and (dio_enabled or "1").strip() != "0"
    if io != "direct":
        if zfs_object == "filesystem" and honoured and direct_prop == "always":
            return {
                "zfs.direct_forced": True,
                "zfs.direct_note": "direct=always: buffered I/O is served as direct I/O (bypasses the ARC)",
            }
        return {}
    if zfs_object == "volume":
        note = (
            "zvol: O_DIRECT bypasses the Linux page cache only; the zvol still goes through the ARC "
            "(primarycache), so reads may be served from memory"
        )
        return {"zfs.direct_ignored": True, "zfs.direct_note": note}
    if version is None:
        note = "OpenZFS version unknown: assuming O_DIRECT is accepted but served through the ARC"
    elif not modern:
        shown = ".".join(map(str, version))
        note = f"OpenZFS {shown} < 2.3: O_DIRECT is accepted but served through the ARC (no Direct I/O)"
    elif direct_prop == "disabled":
        note = "direct=disabled: O_DIRECT is accepted but served through the ARC"
    elif not honoured:
        note = "zfs_dio_enabled=0: Direct I/O is switched off module-wide; O_DIRECT goes through the ARC"
    else:
        note = (
            f"OpenZFS >= 2.3 with direct={direct_prop or 'standard'}: O_DIRECT bypasses the ARC "
            "(requests must be page-aligned; blocks already cached may still be read from the ARC)"
        )
    return {"zfs.direct_ignored": not honoured, "zfs.direct_note": note}


def alignment_check(ashift: int, recordsize: int | None, volblocksize: int | None, bs: int) -> dict[str, Any]:
    """Block size vs sector size (ashift) and vs the I/O size.

    The block is the volblocksize for a zvol, else the recordsize. zfs.misaligned: the block is smaller
    than 2**ashift or not a multiple of it. zfs.partial_record_writes: bs is not a whole number of
    blocks (bs < block, or e.g. 192k on 128k records), so writes to existing data read-modify-write.
    Without a block (raw or plain file target) only zfs.ashift is returned.
    """
    sector = 1 << ashift
    block = volblocksize or recordsize
    out: dict[str, Any] = {"zfs.ashift": ashift}
    if not block:
        return out
    misaligned = block < sector or block % sector != 0
    partial = bs % block != 0
    notes = []
    if misaligned:
        notes.append(f"block {block} B is not a multiple of the {sector} B sector (ashift {ashift})")
    if partial:
        notes.append(
            f"bs {bs} B is not a whole number of {block} B blocks: writes to existing data "
            "read-modify-write the block (read amplification unless it is in the ARC)"
        )
    if bs % sector != 0:
        notes.append(f"bs {bs} B is smaller than or not a multiple of the {sector} B sector")
    out.update(
        {
            "zfs.block_bytes": block,
            "zfs.misaligned": misaligned,
            "zfs.partial_record_writes": partial,
            "zfs.alignment_note": "; ".join(notes),
        }
    )
    return out


def working_set_check(file_bytes: int, arc_c_max: int) -> dict[str, Any]:
    """Whether the test file fits in the ARC (reads may then measure memory, not disks).

    Pass the effective c_max from arcstats, not the zfs_arc_max parameter (0 there means "default").
    zfs.working_set_fits_arc is left out when arc_c_max is not positive (unknown).
    """
    out: dict[str, Any] = {"zfs.working_set_bytes": file_bytes, "zfs.arc_c_max": arc_c_max}
    if arc_c_max <= 0:
        out["zfs.working_set_note"] = "ARC size unknown: cannot tell whether reads measure the cache"
        return out
    fits = file_bytes <= arc_c_max
    out["zfs.working_set_fits_arc"] = fits
    if fits:
        out["zfs.working_set_note"] = (
            f"the {file_bytes} B working set fits in the ARC (c_max {arc_c_max} B): "
            "reads may measure the cache; use a file larger than the ARC"
        )
    else:
        out["zfs.working_set_note"] = ""
    return out


def txg_check(runtime_s: float, txg_timeout_s: float) -> dict[str, Any]:
    """Runtime vs the txg interval: a run shorter than ~3 txgs mostly measures how writes land in
    dirty data before the first syncs (zfs.runtime_near_txg)."""
    ratio = runtime_s / txg_timeout_s if txg_timeout_s > 0 else 0.0
    near = txg_timeout_s > 0 and runtime_s < 3 * txg_timeout_s
    note = (
        f"runtime {runtime_s:g} s is under 3 x zfs_txg_timeout ({txg_timeout_s:g} s): results depend on "
        "txg timing; run for at least 3 txg intervals"
        if near
        else ""
    )
    return {
        "zfs.txg_timeout": txg_timeout_s,
        "zfs.runtime_vs_txg": ratio,
        "zfs.runtime_near_txg": near,
        "zfs.txg_note": note,
    }


def tunables(params: dict[str, str]) -> dict[str, str]:
    """The fingerprint-relevant module parameters (FINGERPRINT_TUNABLES) present in `params`
    (name -> value text as read from /sys/module/zfs/parameters/*), values stripped. Names absent on
    this OpenZFS version are simply left out; zfs_arc_max "0" means the built-in default."""
    return {name: str(params[name]).strip() for name in FINGERPRINT_TUNABLES if name in params}


#: fewer reads than this say nothing about where reads were served from
DIRECT_MIN_READS = 50


def direct_io_confirm(predicted_ignored: bool | None, metrics: Mapping[str, float]) -> dict[str, Any]:
    """Confirm `zfs.direct_ignored` (decided from version and properties) with what the run measured.

    Reads that go through the ARC are counted there (demand/prefetch data hits + misses); O_DIRECT reads
    that bypass it are not. From the run's ARC deltas and fio's read count: zfs.direct_measured is "arc"
    (>= 50 % of reads counted by the ARC), "bypass" (< 20 %) or "mixed"; zfs.direct_confirmed says whether
    that matches the prediction, and zfs.direct_mismatch_note explains a disagreement. zfs.reads_from_memory:
    the disks read < 10 % of what fio read (dev.read_bytes). Returns {} without a prediction, without ARC
    counters, or with fewer than DIRECT_MIN_READS reads (write tests: ARC counters do not show writes).
    """
    reads = float(metrics.get("read.total_ios", 0.0))
    if predicted_ignored is None or reads < DIRECT_MIN_READS or "arc.demand_data_hits" not in metrics:
        return {}
    arc_reads = sum(
        float(metrics.get(f"arc.{k}", 0.0))
        for k in ("demand_data_hits", "demand_data_misses", "prefetch_data_hits", "prefetch_data_misses")
    )
    share = arc_reads / reads
    measured = "arc" if share >= 0.5 else "bypass" if share < 0.2 else "mixed"
    out: dict[str, Any] = {"zfs.direct_measured": measured, "zfs.direct_arc_read_share": round(share, 4)}
    read_bytes = float(metrics.get("read.io_bytes", 0.0))
    physical = None
    if "dev.read_bytes" in metrics and read_bytes > 0:
        physical = float(metrics["dev.read_bytes"]) / read_bytes
        out["zfs.reads_from_memory"] = physical < 0.1
    confirmed = measured == ("arc" if predicted_ignored else "bypass")
    out["zfs.direct_confirmed"] = confirmed
    if confirmed:
        out["zfs.direct_mismatch_note"] = ""
        return out
    disks = f"; the disks read {physical:.0%} of what fio read" if physical is not None else ""
    if predicted_ignored:
        out["zfs.direct_mismatch_note"] = (
            f"predicted: O_DIRECT served through the ARC; measured: only {share:.0%} of {reads:.0f} reads were "
            f"counted by the ARC{disks}: O_DIRECT looks honoured here (check the OpenZFS version and `direct`)"
        )
    else:
        out["zfs.direct_mismatch_note"] = (
            f"predicted: O_DIRECT bypasses the ARC; measured: {share:.0%} of {reads:.0f} reads were counted by the "
            f"ARC{disks}: reads went through the cache, so the figure may measure memory, not disks"
        )
    return out


def run_validity(params: Mapping[str, Any], checks: Mapping[str, Any]) -> list[str]:
    """Why a run is not a valid measurement of what its test names ([] when it is).

    - zfs.props_match false: the dataset/zvol did not have the properties the test asks for;
    - zfs.slog_present contradicts the test's `slog` axis;
    - zfs.scan_active: a scrub or resilver was running when the run ended;
    - layers.verified false: the test guest's filesystem/LUKS were not what the test asks for;
    - layers.marker_as_expected false: the guest's data reached the host in plaintext through LUKS, or did not
      reach the backing at all without it.
    """
    reasons = []
    if checks.get("zfs.props_match") is False:
        reasons.append(
            f"properties did not take: expected {dict(checks.get('zfs.expected_props') or {})}, "
            f"the dataset had {dict(checks.get('zfs.props') or {})}"
        )
    if "slog" in params and "zfs.slog_present" in checks:
        wanted = str(params["slog"]).strip().lower() in ("true", "1", "on", "yes")
        present = bool(checks["zfs.slog_present"])
        if wanted != present:
            reasons.append(
                f"the test's slog axis is {'on' if wanted else 'off'} but the pool "
                f"{'had' if present else 'had no'} log device during the run"
            )
    if checks.get("zfs.scan_active"):
        reasons.append(f"a {checks['zfs.scan_active']} was running on the pool when the run ended")
    if checks.get("layers.verified") is False:
        reasons.append(f"the guest's layers were not as asked: {'; '.join(checks.get('layers.problems') or [])}")
    if checks.get("layers.marker_as_expected") is False:
        reasons.append(
            "a marker written in the guest was found in plaintext in the backing despite LUKS"
            if checks.get("layers.luks")
            else "a marker written in the guest did not reach the backing"
        )
    return reasons


#: a final fsync longer than this share of the job's I/O time (and than EARLY_ACK_MIN_S) means the writes fio
#: counted were acknowledged long before they were durable (seed 003's zvol run with ioengine=sync, direct=0)
EARLY_ACK_SHARE = 0.05
EARLY_ACK_MIN_S = 1.0


def sync_check(
    *,
    flushes: bool,
    per_write_sync: bool,
    zfs_sync: str | None,
    zil_commits: float | None,
    end_fsync_s: float | None,
    io_s: float,
    host_drain_s: float | None,
    qemu_cache: str | None = None,
    guest_flushes: float | None = None,
) -> dict[str, Any]:
    """Did the job's "durable" writes become durable when it was told so? `sync.*` checks (seed 003).

    `flushes`: the job asked for durability (O_SYNC/fsync/fdatasync writes, end_fsync, fsync_on_close).
    Honoured means the flushes reached stable storage: qemu did not drop them (cache=unsafe), ZFS did not
    ignore them (sync=disabled), and ZFS saw ZIL commits during the run (0 commits while the job flushed: they
    never reached ZFS). A long final fsync (early acknowledgement) means the writes fio counted were buffered —
    in the guest's page cache with direct=0, or the host's with a writeback qemu cache — and became durable
    only at the end: ioengine=sync means synchronous system calls, not durable writes (openzfs/zfs#7297). The
    host's drain afterwards is recorded, not judged: data already in the ZIL is durable while its txg is open.
    """
    out: dict[str, Any] = {
        "sync.job_flushes": flushes,
        "sync.per_write": per_write_sync,
        "sync.host_drain_s": host_drain_s,
    }
    if guest_flushes is not None:  # flush requests the test guest's kernel sent to its disk (its diskstats)
        out["sync.guest_flushes"] = guest_flushes
    if end_fsync_s is not None:
        long_tail = end_fsync_s > max(EARLY_ACK_MIN_S, EARLY_ACK_SHARE * io_s)
        out["sync.early_ack"] = long_tail
        if long_tail:
            out["sync.early_ack_note"] = (
                f"fio's final fsync took {end_fsync_s:.1f} s after {io_s:.0f} s of I/O: the writes it counted were "
                "buffered, not durable, when fio counted them (its MiB/s measures the cache; see durable MiB/s). "
                "For durable writes use direct=1 with sync_mode (O_SYNC/fsync/fdatasync)"
            )
    if not flushes:
        return out
    reasons = []
    if qemu_cache == "unsafe":
        reasons.append("qemu cache=unsafe drops the guest's flushes")
    if zfs_sync == "disabled":
        reasons.append("ZFS sync=disabled acknowledges flushes without writing the ZIL")
    if zil_commits is not None and zil_commits == 0 and not reasons:
        sent = f" (the guest's kernel sent {guest_flushes:.0f} flushes)" if guest_flushes else ""
        reasons.append(
            f"the job flushed{sent}, but ZFS saw no ZIL commit during the run: the flushes never reached ZFS"
        )
    out["sync.honoured"] = not reasons
    if reasons:
        out["sync.note"] = "; ".join(reasons) + ": nothing the job called durable was durable when it was told so"
    return out
