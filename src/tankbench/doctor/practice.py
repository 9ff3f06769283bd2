"""doctor's checks of what the OpenZFS docs and experienced users flag beyond the seeds (docs/preflight.md lists the
sources): dedup without the RAM for its table, VM images on a dataset with large records, a zfs_arc_max that ZFS
ignored, checksums turned off, a pool too full. Each returns Findings (tankbench.doctor.view)."""

from __future__ import annotations

from tankbench.doctor.view import Finding, HostView, datasets, pool_of
from tankbench.units import fmt_size, human

#: bytes of RAM per dedup-table entry (one per unique block), the OpenZFS/FreeBSD rule of thumb (~320 B in core)
DDT_ENTRY = 320
#: below this much RAM the dedup table of any working pool competes with the ARC for what is left
DEDUP_LOW_RAM = 8 << 30
#: the ARC's smallest zfs_arc_max (module parameter documentation): a lower setting is ignored
ARC_MAX_FLOOR = 64 << 20


def _pair(v: HostView, preset: str, name: str, sets: tuple[str, str], *common: str) -> tuple[str, ...]:
    """Two runs of one preset that differ in one setting, and the compare of their journals."""
    a, b = (f"{name}-{i}" for i in ("now", "fixed"))
    return (
        v.run(preset, *common, sets[0], f"--set campaign.name={a}"),
        v.run(preset, *common, sets[1], f"--set campaign.name={b}"),
        f"tankbench compare tankbench-results/{a}/journal.sqlite tankbench-results/{b}/journal.sqlite",
    )


def check_dedup(v: HostView) -> list[Finding]:
    ram = v.mem.get("MemTotal", 0)
    out = []
    for ds, p in datasets(v, "dedup", lambda val, p: val not in ("", "off", "-")):
        pool = pool_of(ds)
        size = v.pool_space.get(pool, {}).get("size", 0)
        ddt = size // (128 << 10) * DDT_ENTRY  # a full pool of 128k records
        little = bool(ram) and (ram < DEDUP_LOW_RAM or ddt > ram // 4)
        out.append(
            Finding(
                check="dedup",
                subject=f"{'zvol' if p.get('type') == 'volume' else 'dataset'} {ds}",
                severity="warn" if little or not ram else "info",
                title="dedup is on: every write looks its block up in the dedup table, which must stay in RAM",
                evidence=f"dedup={p['dedup']} ({v.sources.get(ds, {}).get('dedup', '?')}); RAM {human(ram) if ram else '?'}"
                + (
                    f"; pool {pool} is {human(size)}: its table when full ~{human(ddt)} ({DDT_ENTRY} B per 128k block)"
                    if size
                    else ""
                ),
                source="OpenZFS docs, Workload Tuning: deduplication (the table must fit in memory or every write "
                "waits for disk reads); zfsonlinux issue #2083 (a 32 GB host out of memory with dedup on); "
                "practitioners' rule of 5 GB of RAM per TB deduplicated",
                fix=f"zfs set dedup=off {ds}   (new writes only: blocks already deduplicated stay in the table until "
                "rewritten); measure first whether the space saved is worth it (zpool list -o dedupratio)",
                campaign=_pair(
                    v,
                    "tuning-matrix",
                    "dedup",
                    (
                        '--set \'target.fs.props={ compression = "lz4", dedup = "on" }\'',
                        '--set \'target.fs.props={ compression = "lz4", dedup = "off" }\'',
                    ),
                    f"--set pool.parent={pool}",
                ),
            )
        )
    return out


def check_vm_images(v: HostView) -> list[Finding]:
    by_ds: dict[str, list[tuple[int, str, str]]] = {}
    for ds, rs, fmt, path in v.vm_images:
        by_ds.setdefault(ds, []).append((rs, fmt, path))
    out = []
    for ds, images in sorted(by_ds.items()):
        rs = images[0][0]
        shown = ", ".join(f"{path} ({fmt})" for _, fmt, path in images[:3])
        more = f" and {len(images) - 3} more" if len(images) > 3 else ""
        out.append(
            Finding(
                check="vm-image-recordsize",
                subject=f"dataset {ds}",
                severity="warn",
                title=f"VM disk images on a dataset with recordsize={fmt_size(rs)}",
                evidence=f"recordsize={fmt_size(rs)}; image files found: {shown}{more}",
                source="OpenZFS docs, Workload Tuning: virtual machines (an image file's records should match the "
                "guest's I/O: qcow2's 64k clusters -> recordsize=64k); seed 003 (qcow2 cluster and recordsize); a "
                "guest's 4k write into a 1M record reads and rewrites the whole record",
                fix=f"zfs create -o recordsize=64k {pool_of(ds)}/vm-images, then copy the images there (recordsize "
                "applies to blocks as they are written: copy, do not rename within a dataset)",
                campaign=(
                    v.run(
                        "zvol-vs-qcow2",
                        f"--set pool.parent={pool_of(ds)}",
                        "--set include=[]",
                        '--set \'matrix.backing=["qcow2", "raw"]\'',
                        f'--set \'matrix.recordsize=["{fmt_size(rs)}", "64k"]\'',
                    ),
                ),
            )
        )
    return out


def check_arc_ignored(v: HostView) -> list[Finding]:
    setting = v.params.get("zfs_arc_max", "0")
    c_max, ram = v.arc.get("c_max", 0), v.mem.get("MemTotal", 0)
    if not setting.isdigit() or int(setting) == 0 or not c_max or int(setting) == c_max:
        return []
    want = int(setting)
    arc_min = int(v.params.get("zfs_arc_min", "0") or 0) if v.params.get("zfs_arc_min", "").isdigit() else 0
    if ram and want > ram:
        why = f"above the RAM ({human(ram)})"
    elif want < ARC_MAX_FLOOR:
        why = "below the 64 MiB floor"
    elif arc_min and want <= arc_min:
        why = f"not above zfs_arc_min ({human(arc_min)})"
    else:
        why = "not what the ARC took"
    target = (ram // 2 if ram else c_max) // (1 << 20) * (1 << 20)
    pool = next(iter(sorted(v.pools)), "<POOL>")
    return [
        Finding(
            check="arc-max-ignored",
            subject="ARC",
            severity="warn",
            title="zfs_arc_max is set but ZFS ignored it",
            evidence=f"zfs_arc_max={want} ({human(want)}, {why}); the ARC's c_max is {human(c_max)}",
            source="OpenZFS docs, Module Parameters: zfs_arc_max (a value above the RAM or below 64 MiB is ignored "
            "and the default kept); the limit a user believes in then does not hold",
            fix=f"echo {target} > /sys/module/zfs/parameters/zfs_arc_max (half the RAM here, or what the host can "
            f"spare), and the same in /etc/modprobe.d/zfs.conf: options zfs zfs_arc_max={target}; check arcstats c_max",
            campaign=(
                v.run(
                    "compression-cache",
                    f"--set pool.parent={pool}",
                    f"--set 'matrix.tunables=[{{}}, {{ zfs_arc_max = {target} }}]'",
                ),
            ),
        )
    ]


def check_checksum(v: HostView) -> list[Finding]:
    return [
        Finding(
            check="checksum-off",
            subject=f"{'zvol' if p.get('type') == 'volume' else 'dataset'} {ds}",
            severity="warn",
            title="checksum=off: ZFS can neither detect nor repair corrupted blocks",
            evidence=f"checksum=off ({v.sources.get(ds, {}).get('checksum', '?')})",
            source="zfsprops(7), checksum: disabling checksums is not recommended; OpenZFS docs, Workload Tuning "
            "(the checksum's cost is small next to the disks')",
            fix=f"zfs set checksum=on {ds}   (applies to blocks written from then on)",
            campaign=_pair(
                v,
                "tuning-matrix",
                "checksum",
                (
                    '--set \'target.fs.props={ compression = "lz4", checksum = "off" }\'',
                    '--set \'target.fs.props={ compression = "lz4", checksum = "on" }\'',
                ),
                f"--set pool.parent={pool_of(ds)}",
            ),
        )
        for ds, p in datasets(v, "checksum", lambda val, p: val == "off")
    ]


def check_pool_space(v: HostView) -> list[Finding]:
    out = []
    for pool, s in sorted(v.pool_space.items()):
        cap, frag = s.get("capacity", -1), s.get("fragmentation", -1)
        if cap < 80:
            continue
        out.append(
            Finding(
                check="pool-full",
                subject=f"pool {pool}",
                severity="warn" if cap >= 90 else "info",
                title=f"the pool is {cap}% full: allocation slows as free space runs out",
                evidence=f"capacity {cap}% ({human(s.get('free', 0))} free of {human(s.get('size', 0))})"
                + (f", fragmentation {frag}%" if frag >= 0 else ""),
                source="OpenZFS docs, Workload Tuning: free space (keep it above 10%: metaslabs below 4% free switch "
                "to the slower best-fit allocator); practitioners' rule to stay below 80%",
                fix="free space (old snapshots: zfs list -t snapshot -o name,used -s used) or add vdevs; numbers "
                "measured on a full pool are not those of an emptier one",
                campaign=(v.run("recordsize-mix", f"--set pool.parent={pool}"),),
            )
        )
    return out


CHECKS = (check_dedup, check_vm_images, check_arc_ignored, check_checksum, check_pool_space)
