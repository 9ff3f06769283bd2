"""What doctor read on a host, parsed (HostView, from the collect script's output), and the Finding every check
returns: what it saw, where the advice comes from, the fix, and the campaign that measures it on this host."""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from typing import Any

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
    #: `zpool list -Hp`: pool -> size, allocated, free, capacity (%), fragmentation (%; -1 when not reported)
    pool_space: dict[str, dict[str, int]] = field(default_factory=dict)
    #: VM disk images on datasets with large records: (dataset, recordsize, format by its magic or name, path)
    vm_images: list[tuple[str, int, str, str]] = field(default_factory=list)
    host_option: str = ""
    zfs_version: str = ""
    #: VM configs the script found but could not read ("PATH: why"): their checks did not run
    unread: list[str] = field(default_factory=list)

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


def _first_line(text: str) -> str:
    return next((ln.strip() for ln in text.splitlines() if ln.strip()), "")[:200]


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
            except Exception:  # noqa: BLE001 - an unreadable domain is said, not fatal: doctor only advises
                v.unread.append(f"libvirt domain {name.split(' ', 1)[1]}: {_first_line(body) or 'no XML'}")
        elif name.startswith("proxmox "):
            path = name.split(" ", 1)[1]
            if m := re.match(rf"cat: {re.escape(path)}: (.+)", body.strip()):  # e.g. Permission denied (not root)
                v.unread.append(f"{path}: {m.group(1)}")
                continue
            vmid = path.rsplit("/", 1)[-1].removesuffix(".conf")
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
    v.pool_space = parse_zpool_list(s.get("zpool-list", ""))
    v.vm_images = parse_vm_images(s.get("vm-images", ""))
    return v


def parse_zpool_list(text: str) -> dict[str, dict[str, int]]:
    """`zpool list -Hp -o name,size,allocated,free,capacity,fragmentation` -> pool -> numbers ('-' is -1)."""
    out = {}
    for line in text.splitlines():
        cols = line.split("\t")
        if len(cols) != 6 or not cols[1].isdigit():
            continue
        nums = [int(c.rstrip("%")) if c.rstrip("%").isdigit() else -1 for c in cols[1:]]
        out[cols[0]] = dict(zip(("size", "allocated", "free", "capacity", "fragmentation"), nums))
    return out


#: the first bytes of a qcow2 image ("QFI\xfb"), as `od -An -tx1` prints them without spaces
QCOW2_MAGIC = "514649fb"


def parse_vm_images(text: str) -> list[tuple[str, int, str, str]]:
    """The collect script's vm-images lines (dataset, recordsize, first 4 bytes in hex, path) -> what each file is:
    "qcow2" by its magic (whatever its name), else by its name (.raw/.img: raw, .vmdk, .vdi)."""
    out = []
    for line in text.splitlines():
        cols = line.split("\t", 3)
        if len(cols) != 4 or not cols[1].isdigit():
            continue
        ds, rs, magic, path = cols
        ext = path.rsplit(".", 1)[-1].lower() if "." in path else ""
        fmt = "qcow2" if magic == QCOW2_MAGIC else {"raw": "raw", "img": "raw", "vmdk": "vmdk", "vdi": "vdi"}.get(ext)
        if fmt == "qcow2" or (fmt and ext != "qcow2"):
            out.append((ds, int(rs), fmt, path))
    return out


def own(v: HostView, ds: str, prop: str) -> bool:
    """The value is the dataset's own (set here or the default), not inherited: report it once, where it is set."""
    src = v.sources.get(ds, {}).get(prop, "")
    return not src.startswith("inherited")


def pool_of(ds: str) -> str:
    return ds.split("/", 1)[0]


def datasets(v: HostView, prop: str, bad: Callable[[str, dict[str, str]], bool]) -> list[tuple[str, dict[str, str]]]:
    return [(ds, p) for ds, p in sorted(v.props.items()) if bad(p.get(prop, ""), p) and own(v, ds, prop)]
