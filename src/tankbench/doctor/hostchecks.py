"""doctor's checks of what surrounds the pools: log devices, swap, the VMs' disk configurations and CPU models,
the host's CPU (each returns Findings; tankbench.doctor.view)."""

from __future__ import annotations

import re

from tankbench.doctor.parse import VmConfig
from tankbench.doctor.view import Finding, HostView, pool_of

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
    return out + _vm_disk_io(v, vm, subject, bus, aio, iothread, base)


def _vm_disk_io(
    v: HostView, vm: VmConfig, subject: str, bus: str, aio: str | None, iothread: bool, base: tuple[str, ...]
) -> list[Finding]:
    """A VM disk's I/O path: no iothread (or one Proxmox ignores), aio=threads."""
    src = "seed 001 (the VM half: virtio, cache=none, iothread) and seed 003 (guest disks on zvols and images)"
    out = []
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
                    f"--set pool.parent={pool_of(enc[0])}",
                    '--set \'matrix.encryption=["off", "aes-256-gcm"]\'',
                ),
            ),
        )
    ]
