"""Honesty checks for ZFS targets: pure functions returning `checks` fields (keys prefixed "zfs.").

Each one explains, in its note, why a number may not measure what the test name says. See
docs/zfs-metrics.md for every key.
"""

from __future__ import annotations

from typing import Any

ZFS_KINDS = ("dataset", "zvol")

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


def direct_io_check(version: tuple[int, int, int] | None, target_kind: str, io: str,
                    direct_prop: str | None, dio_enabled: str | None = None) -> dict[str, Any]:
    """Whether O_DIRECT really bypasses ZFS caching for this target.

    For io == "direct": {"zfs.direct_ignored": bool, "zfs.direct_note": str}. Datasets on OpenZFS < 2.3
    (or an unknown version) accept O_DIRECT but serve it through the ARC; >= 2.3 honours it unless the
    `direct` property is "disabled" or the module parameter zfs_dio_enabled (`dio_enabled`, as read from
    /sys) is "0". A zvol's O_DIRECT skips the Linux page cache only: the zvol still goes through the ARC,
    so it counts as ignored. For buffered I/O on a >= 2.3 dataset with direct=always, returns
    {"zfs.direct_forced": True, "zfs.direct_note": ...}: the "buffered" test measures direct I/O.
    Otherwise (buffered I/O, or a target that is not ZFS) returns {}.
    """
    if target_kind not in ZFS_KINDS:
        return {}
    modern = version is not None and version >= (2, 3, 0)
    honoured = modern and direct_prop != "disabled" and (dio_enabled or "1").strip() != "0"
    if io != "direct":
        if target_kind == "dataset" and honoured and direct_prop == "always":
            return {"zfs.direct_forced": True,
                    "zfs.direct_note": "direct=always: buffered I/O is served as direct I/O (bypasses the ARC)"}
        return {}
    if target_kind == "zvol":
        note = ("zvol: O_DIRECT bypasses the Linux page cache only; the zvol still goes through the ARC "
                "(primarycache), so reads may be served from memory")
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
        note = (f"OpenZFS >= 2.3 with direct={direct_prop or 'standard'}: O_DIRECT bypasses the ARC "
                "(requests must be page-aligned; blocks already cached may still be read from the ARC)")
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
        notes.append(f"bs {bs} B is not a whole number of {block} B blocks: writes to existing data "
                     "read-modify-write the block (read amplification unless it is in the ARC)")
    if bs % sector != 0:
        notes.append(f"bs {bs} B is smaller than or not a multiple of the {sector} B sector")
    out.update({"zfs.block_bytes": block, "zfs.misaligned": misaligned, "zfs.partial_record_writes": partial,
                "zfs.alignment_note": "; ".join(notes)})
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
        out["zfs.working_set_note"] = (f"the {file_bytes} B working set fits in the ARC (c_max {arc_c_max} B): "
                                       "reads may measure the cache; use a file larger than the ARC")
    else:
        out["zfs.working_set_note"] = ""
    return out


def txg_check(runtime_s: float, txg_timeout_s: float) -> dict[str, Any]:
    """Runtime vs the txg interval: a run shorter than ~3 txgs mostly measures how writes land in
    dirty data before the first syncs (zfs.runtime_near_txg)."""
    ratio = runtime_s / txg_timeout_s if txg_timeout_s > 0 else 0.0
    near = txg_timeout_s > 0 and runtime_s < 3 * txg_timeout_s
    note = (f"runtime {runtime_s:g} s is under 3 x zfs_txg_timeout ({txg_timeout_s:g} s): results depend on "
            "txg timing; run for at least 3 txg intervals" if near else "")
    return {"zfs.txg_timeout": txg_timeout_s, "zfs.runtime_vs_txg": ratio, "zfs.runtime_near_txg": near,
            "zfs.txg_note": note}


def tunables(params: dict[str, str]) -> dict[str, str]:
    """The fingerprint-relevant module parameters (FINGERPRINT_TUNABLES) present in `params`
    (name -> value text as read from /sys/module/zfs/parameters/*), values stripped. Names absent on
    this OpenZFS version are simply left out; zfs_arc_max "0" means the built-in default."""
    return {name: str(params[name]).strip() for name in FINGERPRINT_TUNABLES if name in params}
