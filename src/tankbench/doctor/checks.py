"""doctor's findings: each check reads the host's facts and says what it saw, where the advice comes from, the
fix, and the campaign (a preset and its overrides, ready to paste) that measures the effect on this host.
The pool and dataset checks are here; hostchecks.py has the devices, swap and VMs, practice.py what practitioners
and the OpenZFS docs flag beyond the seeds."""

from __future__ import annotations

import re
from collections.abc import Callable

from tankbench.doctor import hostchecks, practice
from tankbench.doctor.view import Finding, HostView, datasets, own, pool_of, split_status, view
from tankbench.units import fmt_size, human

__all__ = ["CHECKS", "Finding", "HostView", "diagnose", "own", "split_status", "view"]


# -- the checks ----------------------------------------------------------------------------------------


def check_ashift(v: HostView) -> list[Finding]:
    out = []
    for pool, rows in v.vdev_ashift.items():
        leaves = [d for sec in ("data", "logs", "special") for d in v.pools.get(pool, {}).get(sec, [])]
        low = []
        worst = 0
        for vdev, ashift in rows.items():
            if ashift <= 0 or vdev.startswith("root"):
                continue
            path = next((p for p in leaves if p.rsplit("/", 1)[-1].startswith(vdev)), "")
            disk = v.disk_of(path) if path else None
            phys = disk.phy_sec if disk else 0
            if ashift < 12 or (phys and 1 << ashift < phys):
                low.append(f"{vdev} ashift={ashift} ({1 << ashift} B) on a disk reporting {phys or '?'} B sectors")
                worst = max(worst, phys)
        if not low:
            continue
        cur = min(int(x.split("ashift=")[1].split()[0]) for x in low)
        out.append(
            Finding(
                check="ashift",
                subject=f"pool {pool}",
                severity="warn" if worst > 1 << cur else "info",
                title="vdevs with an ashift below 12 (4 KiB)",
                evidence="; ".join(low),
                source="seed 001 (4Kn disks: recordsize/volblocksize aligned with ashift and sector size); OpenZFS "
                "docs, Workload Tuning: ashift (many SSDs report 512 B sectors and write 4 KiB or larger pages; "
                "a vdev's ashift never changes, and a replacement 4Kn disk cannot join it)",
                fix="ashift is fixed when a vdev is created: recreate the pool (or add vdevs) with -o ashift=12",
                campaign=(
                    v.run("recordsize-mix", "--disks <SPARE-ID>,<SPARE-ID>", f"--set pool.ashift={cur}")
                    + f" --set campaign.name=ashift-{cur}",
                    v.run("recordsize-mix", "--disks <SPARE-ID>,<SPARE-ID>", "--set pool.ashift=12")
                    + " --set campaign.name=ashift-12",
                    f"tankbench compare tankbench-results/ashift-{cur}/journal.sqlite "
                    "tankbench-results/ashift-12/journal.sqlite",
                ),
            )
        )
    return out


def _fs_block(v: HostView, zvol: str) -> tuple[int, str] | None:
    """The block size and type of the filesystem inside a zvol (on it or on its first partition that has one)."""
    dev = v.zvols.get(f"/dev/zvol/{zvol}", "")
    if not dev:
        return None
    for name in sorted(v.blkid, key=lambda n: (n != dev, n)):
        if name == dev or re.fullmatch(re.escape(dev) + r"p\d+", name):
            info = v.blkid[name]
            # an EFI system partition (vfat) is not where the guest's I/O goes
            if (
                info.get("BLOCK_SIZE", "").isdigit()
                and info.get("USAGE") == "filesystem"
                and info.get("TYPE") != "vfat"
            ):
                return int(info["BLOCK_SIZE"]), info.get("TYPE", "?")
    return None


def check_volblocksize(v: HostView) -> list[Finding]:
    out = []
    for ds, p in sorted(v.props.items()):
        if p.get("type") != "volume" or not p.get("volblocksize", "").isdigit():
            continue
        vbs = int(p["volblocksize"])
        fs = _fs_block(v, ds)
        if fs is None or fs[0] <= vbs <= 4 * fs[0]:
            continue
        block, fstype = fs
        out.append(
            Finding(
                check="volblocksize",
                subject=f"zvol {ds}",
                severity="warn",
                title="volblocksize does not match the guest filesystem's block",
                evidence=f"volblocksize={fmt_size(vbs)}; the {fstype} inside writes {fmt_size(block)} blocks",
                source="seed 003 (cluster/volblocksize matched to the guest's I/O) and seed 000 (zvol 4k vs 1M): "
                "a guest block smaller than the volblock is a read-modify-write of the whole volblock",
                fix=f"volblocksize is fixed at creation: create a zvol with -o volblocksize={fmt_size(max(block, 4096))}"
                " (or 16k) and copy the disk over (zfs send cannot change it)",
                campaign=(
                    v.run(
                        "zvol-vs-qcow2",
                        f"--set pool.parent={pool_of(ds)}",
                        "--set include=[]",
                        f'--set \'matrix.volblocksize=["{fmt_size(vbs)}", "{fmt_size(max(block, 4096))}"]\'',
                    ),
                ),
            )
        )
    return out


def check_atime(v: HostView) -> list[Finding]:
    hits = datasets(v, "atime", lambda val, p: val == "on" and p.get("relatime") == "off")
    return [
        Finding(
            check="atime",
            subject=f"dataset {ds}",
            severity="warn",
            title="atime=on without relatime: every read writes an access time",
            evidence=f"atime=on ({v.sources[ds].get('atime', '?')}), relatime=off",
            source="seed 001 (atime off among its dataset tuning steps); OpenZFS docs, Workload Tuning: atime",
            fix=f"zfs set atime=off {ds}   (or relatime=on where something reads access times)",
            campaign=(v.run("recordsize-mix", f"--set pool.parent={ds}", '--set \'matrix.atime=["on", "off"]\''),),
        )
        for ds, _ in hits
    ]


def check_compression(v: HostView) -> list[Finding]:
    hits = datasets(v, "compression", lambda val, p: val == "off")
    return [
        Finding(
            check="compression",
            subject=f"{'zvol' if p.get('type') == 'volume' else 'dataset'} {ds}",
            severity="warn",
            title="compression is off",
            evidence=f"compression=off ({v.sources[ds].get('compression', '?')})",
            source="seed 002 and seed 004 (lz4 costs little on incompressible data and moves less of the rest); "
            "OpenZFS docs, Workload Tuning: compression",
            fix=f"zfs set compression=lz4 {ds}   (applies to data written from then on)",
            campaign=(
                v.run(
                    "recordsize-mix", f"--set pool.parent={pool_of(ds)}", '--set \'matrix.compression=["off", "lz4"]\''
                ),
            ),
        )
        for ds, p in hits
    ]


def check_sync(v: HostView) -> list[Finding]:
    out = [
        Finding(
            check="sync-disabled",
            subject=f"{'zvol' if p.get('type') == 'volume' else 'dataset'} {ds}",
            severity="warn",
            title="sync=disabled: synchronous writes are acknowledged before they are on disk",
            evidence=f"sync=disabled ({v.sources[ds].get('sync', '?')})",
            source="seed 000 (sync=disabled rows are fast because nothing is durable when fsync returns)",
            fix=f"zfs set sync=standard {ds}   (a SLOG with power-loss protection makes sync writes fast instead)",
            campaign=(
                v.run(
                    "tuning-matrix",
                    f"--set pool.parent={pool_of(ds)}",
                    '--set \'matrix.sync=["standard", "disabled"]\'',
                ),
            ),
        )
        for ds, p in datasets(v, "sync", lambda val, p: val == "disabled")
    ]
    for ds, _p in datasets(v, "logbias", lambda val, p: val == "throughput"):
        if not v.pools.get(pool_of(ds), {}).get("logs"):
            continue
        out.append(
            Finding(
                check="logbias-throughput",
                subject=f"dataset {ds}",
                severity="info",
                title="logbias=throughput on a pool with a SLOG: sync writes bypass the log device",
                evidence=f"logbias=throughput ({v.sources[ds].get('logbias', '?')}); pool {pool_of(ds)} has logs "
                + ", ".join(v.pools[pool_of(ds)]["logs"]),
                source="seed 000 (slog x sync x logbias rows)",
                fix=f"zfs set logbias=latency {ds}   (unless measured to be better for this workload)",
                campaign=(
                    v.run(
                        "tuning-matrix",
                        f"--set pool.parent={pool_of(ds)}",
                        '--set \'matrix.logbias=["latency", "throughput"]\'',
                    ),
                ),
            )
        )
    return out


def check_arc(v: HostView) -> list[Finding]:
    c_max, ram = v.arc.get("c_max", 0), v.mem.get("MemTotal", 0)
    if not c_max or not ram:
        return []
    share = c_max / ram
    low, high = share < 1 / 8, share > 0.9 or (bool(v.vms) and share > 0.5)
    if not (low or high):
        return []
    target = (ram // 2 if low else ram // 4) // (1 << 20) * (1 << 20)
    return [
        Finding(
            check="arc-max",
            subject="ARC",
            severity="warn",
            title="the ARC's limit is "
            + ("small for this RAM" if low else "large for a host that runs VMs" if v.vms else "nearly all RAM"),
            evidence=f"ARC c_max {human(c_max)} of {human(ram)} RAM ({share:.0%}); "
            f"zfs_arc_max={v.params.get('zfs_arc_max', '?')}" + (f"; {len(v.vms)} VM(s) configured" if v.vms else ""),
            source="seed 001 (zfs_arc_max = 12G on a 32 GB host that runs VMs); seed 002 (reads served by the ARC)",
            fix=f"echo {target} > /sys/module/zfs/parameters/zfs_arc_max; keep it in /etc/modprobe.d/zfs.conf: "
            f"options zfs zfs_arc_max={target}",
            campaign=(
                v.run(
                    "compression-cache",
                    f"--set pool.parent={next(iter(sorted(v.pools)), '<POOL>')}",
                    f"--set 'matrix.tunables=[{{}}, {{ zfs_arc_max = {target} }}]'",
                ),
            ),
        )
    ]


CHECKS: tuple[Callable[[HostView], list[Finding]], ...] = (
    check_ashift,
    check_volblocksize,
    check_atime,
    check_compression,
    check_sync,
    check_arc,
    hostchecks.check_slog,
    hostchecks.check_swap,
    hostchecks.check_vms,
    hostchecks.check_host_aes,
    *practice.CHECKS,
)


def diagnose(v: HostView, pool: str = "") -> list[Finding]:
    """Every finding on the host (only those about `pool` and host-wide ones when a pool is named)."""
    out = [f for check in CHECKS for f in check(v)]
    if pool:
        out = [f for f in out if not re.search(r"\b(pool|dataset|zvol) ", f.subject) or _subject_pool(f) == pool]
    return out


def _subject_pool(f: Finding) -> str:
    return f.subject.split(" ", 1)[1].split(" ")[0].split("/")[0]
