"""Pure parsers for what doctor reads on a host (each tested against a real or documented output)."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any
from xml.etree import ElementTree


@dataclass(frozen=True)
class BlockDev:
    """One block device as lsblk sees it."""

    kname: str
    path: str
    type: str
    phy_sec: int
    log_sec: int
    rota: bool
    model: str
    fstype: str
    parent: str


def parse_lsblk(text: str) -> dict[str, BlockDev]:
    """kname -> BlockDev from `lsblk -J -b -o NAME,KNAME,PATH,TYPE,PHY-SEC,LOG-SEC,ROTA,MODEL,FSTYPE,PKNAME`."""
    out: dict[str, BlockDev] = {}

    def walk(devs: list[dict[str, Any]]) -> None:
        for d in devs:
            rota = d.get("rota")
            out[str(d["kname"])] = BlockDev(
                kname=str(d["kname"]),
                path=str(d.get("path") or f"/dev/{d['kname']}"),
                type=str(d.get("type") or ""),
                phy_sec=int(d.get("phy-sec") or 0),
                log_sec=int(d.get("log-sec") or 0),
                rota=rota in (True, "1", 1),
                model=str(d.get("model") or "").strip(),
                fstype=str(d.get("fstype") or ""),
                parent=str(d.get("pkname") or ""),
            )
            walk(d.get("children", []))

    try:
        walk(json.loads(text).get("blockdevices", []))
    except (ValueError, AttributeError, KeyError, TypeError):
        return {}
    return out


def parse_links(text: str) -> dict[str, str]:
    """link -> resolved device from lines `LINK TARGET` (by-id and /dev/zvol listings)."""
    out = {}
    for line in text.splitlines():
        parts = line.split()
        if len(parts) == 2:
            out[parts[0]] = parts[1]
    return out


def parse_blkid_export(text: str) -> dict[str, dict[str, str]]:
    """DEVNAME -> {TYPE, BLOCK_SIZE, …} from `blkid -p -o export DEV` blocks separated by blank lines."""
    out: dict[str, dict[str, str]] = {}
    cur: dict[str, str] = {}
    for line in text.splitlines() + [""]:
        if not line.strip():
            if "DEVNAME" in cur:
                out[cur["DEVNAME"]] = cur
            cur = {}
            continue
        key, sep, value = line.partition("=")
        if sep:
            cur[key.strip()] = value.strip()
    return out


def parse_meminfo(text: str) -> dict[str, int]:
    """Field -> bytes (kB fields) or count from /proc/meminfo."""
    out = {}
    for line in text.splitlines():
        m = re.match(r"^(\w+(?:\(\w+\))?):\s+(\d+)(\s+kB)?", line)
        if m:
            out[m.group(1)] = int(m.group(2)) * (1024 if m.group(3) else 1)
    return out


def parse_cpu_flags(text: str) -> frozenset[str]:
    """The flags of the first CPU (`grep -m1 ^flags /proc/cpuinfo`)."""
    for line in text.splitlines():
        if line.startswith("flags"):
            return frozenset(line.partition(":")[2].split())
    return frozenset()


def parse_swaps(text: str) -> list[str]:
    """Swap devices/files in use, from /proc/swaps."""
    return [line.split()[0] for line in text.splitlines()[1:] if line.strip()]


# -- virtual machines ----------------------------------------------------------------------------------


@dataclass(frozen=True)
class VmDisk:
    """A VM's disk as its configuration declares it; None where the configuration leaves the default."""

    name: str
    bus: str
    cache: str | None
    aio: str | None
    iothread: bool
    source: str


@dataclass(frozen=True)
class VmConfig:
    """A KVM guest's CPU model and disks (from libvirt domain XML or a Proxmox VM config)."""

    kind: str
    name: str
    cpu: str
    cpu_has_aes: bool | None
    disks: tuple[VmDisk, ...]
    controller: str = ""


#: QEMU CPU models without AES-NI (older than Westmere, and the generic ones QEMU and Proxmox used by default)
NO_AES_MODELS = frozenset(
    "qemu64 qemu32 kvm64 kvm32 x86-64-v2 486 pentium pentium2 pentium3 coreduo core2duo n270 athlon phenom "
    "conroe penryn nehalem nehalem-ibrs opteron_g1 opteron_g2 opteron_g3".split()
)


def cpu_has_aes(model: str, flags: str = "") -> bool | None:
    """Whether a guest CPU model offers AES-NI: host passthrough does (if the host has it), the generic models
    do not unless +aes is added; None for a model tankbench does not know."""
    m = model.lower()
    if "+aes" in flags or m.endswith("-aes"):
        return True
    if "-aes" in flags:
        return False
    if m in ("host", "host-passthrough", "host-model", "max"):
        return True
    if m in NO_AES_MODELS:
        return False
    return (
        True
        if re.match(
            r"^(x86-64-v[34]|westmere|sandybridge|ivybridge|haswell|broadwell|skylake|cascadelake|icelake|sapphirerapids|epyc|cooperlake)",
            m,
        )
        else None
    )


def parse_libvirt_domain(xml: str) -> VmConfig:
    """A libvirt domain (`virsh dumpxml NAME`): CPU mode/model and each <disk device='disk'>."""
    root = ElementTree.fromstring(xml.encode())
    name = root.findtext("name") or "?"
    cpu = root.find("cpu")
    aes: bool | None
    if cpu is None or (cpu.get("mode") or "custom") == "custom" and cpu.findtext("model") is None:
        model, aes = "qemu64 (libvirt's default)", False
    elif (cpu.get("mode") or "custom") != "custom":
        model, aes = str(cpu.get("mode")), True
    else:
        model = (cpu.findtext("model") or "").strip()
        feats = {f.get("name"): f.get("policy") for f in cpu.findall("feature")}
        aes = cpu_has_aes(
            model,
            "+aes" if feats.get("aes") in ("require", "force") else "-aes" if feats.get("aes") == "disable" else "",
        )
    disks = []
    for d in root.iter("disk"):
        if d.get("device", "disk") != "disk":
            continue
        drv, tgt, src = d.find("driver"), d.find("target"), d.find("source")
        disks.append(
            VmDisk(
                name=tgt.get("dev", "?") if tgt is not None else "?",
                bus=tgt.get("bus", "") if tgt is not None else "",
                cache=drv.get("cache") if drv is not None else None,
                aio=drv.get("io") if drv is not None else None,
                iothread=drv is not None and drv.get("iothread") is not None,
                source=(src.get("dev") or src.get("file") or src.get("name") or "") if src is not None else "",
            )
        )
    return VmConfig("libvirt", name, model, aes, tuple(disks))


_PVE_DISK = re.compile(r"^(ide|sata|scsi|virtio)(\d+)$")


def parse_proxmox_conf(text: str, name: str) -> VmConfig:
    """A Proxmox VE VM config (/etc/pve/qemu-server/VMID.conf, qm.conf(5)); snapshot sections are skipped."""
    keys: dict[str, str] = {}
    for line in text.splitlines():
        if line.startswith("["):
            break  # [snapshot] sections describe the past
        key, sep, value = line.partition(":")
        if sep and not line.startswith("#"):
            keys[key.strip()] = value.strip()
    cpu_value = keys.get("cpu", "")
    cpu_model, _, rest = cpu_value.partition(",")
    cpu_model = cpu_model.removeprefix("cputype=")
    flags = next((p.partition("=")[2] for p in rest.split(",") if p.startswith("flags=")), "")
    model = cpu_model or "kvm64 (the default before Proxmox VE 8; x86-64-v2-AES since)"
    aes = cpu_has_aes(cpu_model, flags) if cpu_model else None
    disks = []
    for key, value in keys.items():
        m = _PVE_DISK.match(key)
        if not m:
            continue
        parts = value.split(",")
        opts = dict(p.partition("=")[::2] for p in parts[1:])
        if opts.get("media") == "cdrom" or parts[0] == "none":
            continue
        disks.append(
            VmDisk(
                name=key,
                bus={"virtio": "virtio", "scsi": "scsi"}.get(m.group(1), m.group(1)),
                cache=opts.get("cache"),
                aio=opts.get("aio"),
                iothread=opts.get("iothread") in ("1", "on", "true"),
                source=parts[0],
            )
        )
    return VmConfig("proxmox", name, model, aes, tuple(disks), controller=keys.get("scsihw", "lsi (default)"))


def parse_pve_storage(text: str) -> dict[str, str]:
    """Proxmox storage id -> ZFS dataset for `zfspool` storages (/etc/pve/storage.cfg)."""
    out: dict[str, str] = {}
    current = ""
    for line in text.splitlines():
        m = re.match(r"^(\S+):\s*(\S+)", line)
        if m:
            current = m.group(2) if m.group(1) == "zfspool" else ""
        elif current and line.strip().startswith("pool "):
            out[current] = line.split(None, 1)[1].strip()
    return out
