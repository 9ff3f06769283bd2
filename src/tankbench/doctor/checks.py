"""doctor's findings: each check reads the host's facts and says what it saw, where the advice comes from, the
fix, and the campaign (a preset and its overrides, ready to paste) that measures the effect on this host."""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from typing import Any

from tankbench.campaign.overrides import human
from tankbench.doctor.collect import split_sections
from tankbench.doctor.parse import (
    BlockDev,
    VmConfig,
    parse_blkid_export,
    parse_cpu_flags,
    parse_libvirt_domain,
    parse_links,
    parse_lsblk,
    parse_meminfo,
    parse_proxmox_conf,
    parse_pve_storage,
    parse_swaps,
)
from tankbench.units import fmt_size
from tankbench.zfs.parse import parse_arcstats, parse_module_params, parse_zfs_get, parse_zpool_status, zfs_get_sources


@dataclass(frozen=True)
class Finding:
    """One thing worth changing (or measuring) on this host."""

    check: str
    subject: str
    severity: str  # "warn": costs speed or safety as configured; "info": worth measuring, may be deliberate
    title: str
    evidence: str
    source: str
    fix: str
    campaign: tuple[str, ...] = ()

    def to_json(self) -> dict[str, Any]:
        d = asdict(self)
        d["campaign"] = list(self.campaign)
        return d


@dataclass
class HostView:
    """Everything doctor read, parsed (built from the collect script's output by `view`)."""

    pools: dict[str, dict[str, Any]] = field(default_factory=dict)
    vdev_ashift: dict[str, dict[str, int]] = field(default_factory=dict)
    props: dict[str, dict[str, str]] = field(default_factory=dict)
    sources: dict[str, dict[str, str]] = field(default_factory=dict)
    blocks: dict[str, BlockDev] = field(default_factory=dict)
    links: dict[str, str] = field(default_factory=dict)
    zvols: dict[str, str] = field(default_factory=dict)
    blkid: dict[str, dict[str, str]] = field(default_factory=dict)
    params: dict[str, str] = field(default_factory=dict)
    arc: dict[str, int] = field(default_factory=dict)
    mem: dict[str, int] = field(default_factory=dict)
    cpu_flags: frozenset[str] = frozenset()
    swaps: list[str] = field(default_factory=list)
    vms: list[VmConfig] = field(default_factory=list)
    pve_storage: dict[str, str] = field(default_factory=dict)
    host_option: str = ""
    zfs_version: str = ""

    def run(self, preset: str, *overrides: str) -> str:
        """A ready-to-paste `tankbench run` for this host."""
        host = f" --host {self.host_option}" if self.host_option else ""
        return " ".join([f"tankbench run {preset} --scale quick{host}", *overrides])

    def device(self, path: str) -> BlockDev | None:
        """The lsblk entry of a device path (by-id links resolved)."""
        real = self.links.get(path, path)
        return self.blocks.get(real.rsplit("/", 1)[-1])

    def disk_of(self, path: str) -> BlockDev | None:
        """The whole disk a path (or partition) is on."""
        dev = self.device(path)
        while dev is not None and dev.parent and dev.parent in self.blocks:
            dev = self.blocks[dev.parent]
        return dev


def split_status(text: str) -> list[str]:
    """`zpool status` of several pools -> one text per pool."""
    parts = re.split(r"(?m)^(?=\s*pool: )", text)
    return [p for p in parts if "pool:" in p]


def view(text: str, host_option: str = "") -> HostView:
    """Parse the collect script's output (pure)."""
    s = split_sections(text)
    v = HostView(host_option=host_option)
    version = s.get("zfs-version", "").strip()
    v.zfs_version = version if re.match(r"^\d+\.\d+", version) else ""
    for part in split_status(s.get("zpool-status", "")):
        st = parse_zpool_status(part)
        if st.get("pool"):
            v.pools[str(st["pool"])] = st
    for name, body in s.items():
        if name.startswith("zpool-vdevs "):
            rows = parse_zfs_get(body)
            v.vdev_ashift[name.split(" ", 1)[1]] = {
                k: int(p["ashift"]) for k, p in rows.items() if p.get("ashift", "").isdigit()
            }
        elif name.startswith("libvirt "):
            try:
                v.vms.append(parse_libvirt_domain(body))
            except Exception:  # noqa: BLE001 - an unreadable domain is skipped, not fatal: doctor only advises
                continue
        elif name.startswith("proxmox "):
            vmid = name.rsplit("/", 1)[-1].removesuffix(".conf")
            v.vms.append(parse_proxmox_conf(body, f"VM {vmid}"))
    v.props = parse_zfs_get(s.get("zfs-get", ""))
    v.sources = zfs_get_sources(s.get("zfs-get", ""))
    v.blocks = parse_lsblk(s.get("lsblk", ""))
    v.links = parse_links(s.get("by-id", ""))
    v.zvols = parse_links(s.get("zvols", ""))
    v.blkid = parse_blkid_export(s.get("blkid-zvols", ""))
    v.params = parse_module_params(s.get("params", ""))
    v.arc = parse_arcstats(s.get("arcstats", ""))
    v.mem = parse_meminfo(s.get("meminfo", ""))
    v.cpu_flags = parse_cpu_flags(s.get("cpu-flags", ""))
    v.swaps = parse_swaps(s.get("swaps", ""))
    v.pve_storage = parse_pve_storage(s.get("pve-storage", ""))
    return v


def _own(v: HostView, ds: str, prop: str) -> bool:
    """The value is the dataset's own (set here or the default), not inherited: report it once, where it is set."""
    src = v.sources.get(ds, {}).get(prop, "")
    return not src.startswith("inherited")


def _pool_of(ds: str) -> str:
    return ds.split("/", 1)[0]


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
                        f"--set pool.parent={_pool_of(ds)}",
                        "--set include=[]",
                        f'--set \'matrix.volblocksize=["{fmt_size(vbs)}", "{fmt_size(max(block, 4096))}"]\'',
                    ),
                ),
            )
        )
    return out


def _datasets(v: HostView, prop: str, bad: Callable[[str, dict[str, str]], bool]) -> list[tuple[str, dict[str, str]]]:
    return [(ds, p) for ds, p in sorted(v.props.items()) if bad(p.get(prop, ""), p) and _own(v, ds, prop)]


def check_atime(v: HostView) -> list[Finding]:
    hits = _datasets(v, "atime", lambda val, p: val == "on" and p.get("relatime") == "off")
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
    hits = _datasets(v, "compression", lambda val, p: val == "off")
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
                    "recordsize-mix", f"--set pool.parent={_pool_of(ds)}", '--set \'matrix.compression=["off", "lz4"]\''
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
                    f"--set pool.parent={_pool_of(ds)}",
                    '--set \'matrix.sync=["standard", "disabled"]\'',
                ),
            ),
        )
        for ds, p in _datasets(v, "sync", lambda val, p: val == "disabled")
    ]
    for ds, _p in _datasets(v, "logbias", lambda val, p: val == "throughput"):
        if not v.pools.get(_pool_of(ds), {}).get("logs"):
            continue
        out.append(
            Finding(
                check="logbias-throughput",
                subject=f"dataset {ds}",
                severity="info",
                title="logbias=throughput on a pool with a SLOG: sync writes bypass the log device",
                evidence=f"logbias=throughput ({v.sources[ds].get('logbias', '?')}); pool {_pool_of(ds)} has logs "
                + ", ".join(v.pools[_pool_of(ds)]["logs"]),
                source="seed 000 (slog x sync x logbias rows)",
                fix=f"zfs set logbias=latency {ds}   (unless measured to be better for this workload)",
                campaign=(
                    v.run(
                        "tuning-matrix",
                        f"--set pool.parent={_pool_of(ds)}",
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


PLP_MODELS = re.compile(
    r"optane|p4800|p5800|900p|905p|\bdc\b|pm9a3|pm1733|pm983|sm883|micron 7|micron 9|d7-|s4[56]10", re.I
)
CONSUMER_MODELS = re.compile(
    r"evo|970 pro|980 pro|990 pro|crucial|mx500|bx500|wd blue|wd_blue|sn[57]\d0|qvo|kingston a|sandisk", re.I
)


def check_slog(v: HostView) -> list[Finding]:
    out = []
    for pool, st in sorted(v.pools.items()):
        for dev in st.get("logs", []):
            disk = v.disk_of(dev)
            model = disk.model if disk else ""
            if model and PLP_MODELS.search(model):
                continue
            if disk is not None and disk.rota:
                why = f"{dev} is a rotational disk ({model or 'no model'}): no faster than the pool for sync writes"
            elif model and CONSUMER_MODELS.search(model):
                why = f"{dev} is a {model}: a consumer SSD without power-loss protection"
            else:
                why = f"{dev} ({model or 'no model reported'}): power-loss protection cannot be told from here"
            out.append(
                Finding(
                    check="slog-plp",
                    subject=f"pool {pool} log",
                    severity="warn" if "consumer" in why or "rotational" in why else "info",
                    title="a SLOG without known power-loss protection",
                    evidence=why,
                    source="seed 001 (an Optane as SLOG); OpenZFS docs, Hardware: a SLOG must survive power loss "
                    "and acknowledge flushes fast, which needs power-loss protection",
                    fix="use a log device with power-loss protection (datacenter NVMe, Optane), or none",
                    campaign=(
                        v.run(
                            "tuning-matrix", f"--set pool.parent={pool}", '--set \'matrix.sync=["standard", "always"]\''
                        ),
                    ),
                )
            )
    return out


def check_swap(v: HostView) -> list[Finding]:
    zds = {real: link for link, real in v.zvols.items()}
    return [
        Finding(
            check="swap-on-zvol",
            subject=f"swap {dev}",
            severity="warn",
            title="swap on a zvol",
            evidence=f"/proc/swaps lists {dev}" + (f" = {zds[dev]}" if dev in zds else ""),
            source="OpenZFS issue #7734 and FAQ: swapping to a zvol can deadlock under memory pressure "
            "(ZFS needs memory to write what the kernel swaps out to free memory)",
            fix=f"swapoff {dev}; put swap on a partition or an mdraid device outside ZFS",
            campaign=(),
        )
        for dev in v.swaps
        if dev.startswith("/dev/zd") or dev.startswith("/dev/zvol/")
    ]


def _zvol_has_luks(v: HostView, source: str) -> bool:
    """Whether a VM disk's source (a zvol path or Proxmox volume) holds LUKS (on it or a partition)."""
    if ":" in source:  # Proxmox: storage:vm-100-disk-0
        store, _, vol = source.partition(":")
        source = f"/dev/zvol/{v.pve_storage.get(store, store)}/{vol}"
    dev = v.zvols.get(source, source)
    return any(
        (n == dev or re.fullmatch(re.escape(dev) + r"p\d+", n)) and i.get("TYPE") == "crypto_LUKS"
        for n, i in v.blkid.items()
    )


def check_vms(v: HostView) -> list[Finding]:
    out = []
    for vm in v.vms:
        pool = next(iter(sorted(v.pools)), "<POOL>")
        luks = [d.name for d in vm.disks if _zvol_has_luks(v, d.source)]
        if luks and vm.cpu_has_aes is not True:
            out.append(
                Finding(
                    check="guest-cpu-aes",
                    subject=f"{vm.kind} {vm.name}",
                    severity="warn" if vm.cpu_has_aes is False else "info",
                    title="LUKS in a guest whose CPU model has no AES-NI",
                    evidence=f"CPU model {vm.cpu}; LUKS on disk(s) {', '.join(luks)}",
                    source="seed 001 (its biggest factor: cryptsetup benchmark in the guest, aes-xts 266 MiB/s "
                    "with the default CPU model vs over 1 GiB/s with AES-NI passed through)",
                    fix="give the guest a CPU model with AES-NI: host-passthrough (libvirt) / cpu: host or "
                    "x86-64-v2-AES (Proxmox)",
                    campaign=(
                        v.run(
                            "zvol-vs-qcow2",
                            f"--set pool.parent={pool}",
                            "--set include=[]",
                            "--set 'matrix.guest_luks=[false, true]'",
                        ),
                    ),
                )
            )
        for d in vm.disks:
            out += _vm_disk(v, vm, d.name, d.bus, d.cache, d.aio, d.iothread, pool)
    return out


def _vm_disk(
    v: HostView, vm: VmConfig, name: str, bus: str, cache: str | None, aio: str | None, iothread: bool, pool: str
) -> list[Finding]:
    subject = f"{vm.kind} {vm.name} disk {name}"
    src = "seed 001 (the VM half: virtio, cache=none, iothread) and seed 003 (guest disks on zvols and images)"
    base = ("zvol-vs-qcow2", f"--set pool.parent={pool}", "--set include=[]")
    out = []
    if bus in ("ide", "sata", "usb"):
        out.append(
            Finding(
                "vm-disk-bus",
                subject,
                "warn",
                f"an emulated {bus} disk",
                f"bus={bus}",
                src,
                "attach it as virtio-blk or virtio-scsi (the guest needs virtio drivers)",
                (v.run(*base, '--set \'matrix.bus=["virtio-blk", "virtio-scsi"]\''),),
            )
        )
    if cache in ("writeback", "unsafe"):
        out.append(
            Finding(
                "vm-disk-cache",
                subject,
                "warn" if cache == "unsafe" else "info",
                f"cache={cache}: the host page cache sits beside the ARC"
                + (" and flushes are dropped" if cache == "unsafe" else ""),
                f"cache={cache}",
                src,
                "cache=none (the ARC caches already)",
                (v.run(*base, f'--set \'matrix.disk_cache=["none", "{cache}"]\''),),
            )
        )
    if not iothread:
        out.append(
            Finding(
                "vm-disk-iothread",
                subject,
                "info",
                "no iothread: disk I/O shares the main loop",
                "iothread not set",
                src,
                "iothread=1 (Proxmox: with scsihw virtio-scsi-single) / <driver iothread='1'> (libvirt)",
                (v.run(*base, "--set 'matrix.bus=[\"virtio-blk\"]'", "--set 'matrix.iothread=[false, true]'"),),
            )
        )
    elif vm.kind == "proxmox" and bus == "scsi" and vm.controller != "virtio-scsi-single":
        out.append(
            Finding(
                "vm-disk-iothread",
                subject,
                "info",
                "iothread=1 has no effect with this SCSI controller",
                f"iothread=1, scsihw={vm.controller}",
                src,
                "scsihw: virtio-scsi-single",
                (v.run(*base, "--set 'matrix.bus=[\"virtio-blk\"]'", "--set 'matrix.iothread=[false, true]'"),),
            )
        )
    if aio == "threads":
        out.append(
            Finding(
                "vm-disk-aio",
                subject,
                "info",
                "aio=threads: a thread pool instead of native/io_uring",
                "aio=threads",
                src,
                "aio=native (with cache=none) or io_uring",
                (v.run(*base, '--set \'matrix.aio=["threads", "native", "io_uring"]\''),),
            )
        )
    return out


def check_host_aes(v: HostView) -> list[Finding]:
    enc = [ds for ds, p in sorted(v.props.items()) if p.get("encryption", "off") not in ("off", "-", "")]
    if not enc or not v.cpu_flags or "aes" in v.cpu_flags:
        return []
    return [
        Finding(
            "host-aes",
            "CPU",
            "warn",
            "encrypted datasets on a CPU without AES-NI",
            f"no 'aes' in /proc/cpuinfo flags; encryption on {', '.join(enc[:3])}",
            "seed 001 (AES-NI decides encryption throughput)",
            "enable AES-NI (firmware, or the VM's CPU model if this host is a guest)",
            (
                v.run(
                    "tuning-matrix",
                    f"--set pool.parent={_pool_of(enc[0])}",
                    '--set \'matrix.encryption=["off", "aes-256-gcm"]\'',
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
    check_slog,
    check_swap,
    check_vms,
    check_host_aes,
)


def diagnose(v: HostView, pool: str = "") -> list[Finding]:
    """Every finding on the host (only those about `pool` and host-wide ones when a pool is named)."""
    out = [f for check in CHECKS for f in check(v)]
    if pool:
        out = [f for f in out if not re.search(r"\b(pool|dataset|zvol) ", f.subject) or _subject_pool(f) == pool]
    return out


def _subject_pool(f: Finding) -> str:
    return f.subject.split(" ", 1)[1].split(" ")[0].split("/")[0]
