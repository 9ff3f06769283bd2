"""The test guest's qemu command line and disk settings (pure: no processes, no files).

A disk is a block node (`-blockdev`, or QMP `blockdev-add` when hot-plugged) plus a device on a bus. Its
qemu settings are the issue's axes: bus, cache mode, aio, iothread, and for qcow2 the L2 cache size.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import PurePosixPath

from tankbench.errors import UserError
from tankbench.guestconf.pauses import WERROR_VALUES

BUSES = ("virtio-blk", "virtio-scsi")
CACHE_MODES = ("none", "writeback", "writethrough", "directsync", "unsafe")
AIO_MODES = ("threads", "native", "io_uring")
FORMATS = ("raw", "qcow2")
MACHINES = ("microvm", "q35", "pc")
#: the virtio-serial port the guest-side runner listens on
CONTROL_PORT = "tankbench.0"
#: spare PCIe root ports on q35 for hot-plugged virtio-blk disks
HOTPLUG_PORTS = 4
ID_RE = re.compile(r"^[a-z][a-z0-9]{0,19}\Z")

#: cache mode -> (cache.direct, cache.no-flush, the device's write cache), as qemu's -drive cache= defines it
CACHE_FLAGS = {
    "none": (True, False, True),
    "writeback": (False, False, True),
    "writethrough": (False, False, False),
    "directsync": (True, False, False),
    "unsafe": (False, True, True),
}


@dataclass(frozen=True)
class GuestDisk:
    """One disk of the test guest: its backing on the host and the qemu settings it is attached with."""

    id: str  # node name and serial: the guest finds the disk by it (e.g. "tbd0")
    path: str  # the backing on the host: a zvol (/dev/zvol/...) or an image file
    format: str = "raw"  # raw | qcow2
    bus: str = "virtio-blk"  # virtio-blk | virtio-scsi
    cache: str = "none"
    aio: str = "threads"
    iothread: bool = False
    l2_cache_size: int | None = None  # qcow2 only: bytes of L2 table cache
    discard: bool = True
    werror: str | None = None  # qemu's write-error policy (enospc|stop|report|ignore); None: qemu's default
    read_only: bool = False  # the guest cannot write it (a copy test's source disk)

    def __post_init__(self) -> None:
        check_disk(self)

    @property
    def is_block_device(self) -> bool:
        """True for a zvol or other device node (qemu's host_device driver), False for an image file."""
        return self.path.startswith("/dev/")


def _bad(key: str, value: object, allowed: tuple[str, ...] | str) -> UserError:
    hint = f"use one of {', '.join(allowed)}" if isinstance(allowed, tuple) else allowed
    return UserError(f"guest disk: {key} = {value!r} is not supported", hint)


def check_disk(disk: GuestDisk) -> None:
    """UserError naming the setting for anything qemu would refuse or tankbench cannot express."""
    if not ID_RE.match(disk.id):
        raise _bad("id", disk.id, "1-20 lowercase letters/digits, starting with a letter, e.g. 'tbd0'")
    if not PurePosixPath(disk.path).is_absolute():
        raise _bad("path", disk.path, "an absolute path of a zvol or an image file on the host")
    for key, value, allowed in (
        ("format", disk.format, FORMATS),
        ("bus", disk.bus, BUSES),
        ("cache", disk.cache, CACHE_MODES),
        ("aio", disk.aio, AIO_MODES),
        *((("werror", disk.werror, WERROR_VALUES),) if disk.werror is not None else ()),
    ):
        if value not in allowed:
            raise _bad(key, value, allowed)
    if disk.aio == "native" and not CACHE_FLAGS[disk.cache][0]:
        raise UserError(
            f"guest disk {disk.id}: aio = 'native' needs O_DIRECT, but cache = {disk.cache!r} "
            "goes through the host page cache",
            "use cache = 'none' or 'directsync' with aio = 'native'",
        )
    if disk.l2_cache_size is not None and disk.format != "qcow2":
        raise UserError(
            f"guest disk {disk.id}: l2_cache_size = {disk.l2_cache_size} applies to qcow2 only",
            f"remove it, or use format = 'qcow2' (this disk is {disk.format})",
        )


def blockdev(disk: GuestDisk) -> dict[str, object]:
    """The block node of a disk (the same dict serves -blockdev and QMP blockdev-add)."""
    direct, no_flush, _ = CACHE_FLAGS[disk.cache]
    cache = {"direct": direct, "no-flush": no_flush}
    proto: dict[str, object] = {
        "driver": "host_device" if disk.is_block_device else "file",
        "node-name": f"{disk.id}-file",
        "filename": disk.path,
        "aio": disk.aio,
        "cache": cache,
    }
    node: dict[str, object] = {"driver": disk.format, "node-name": disk.id, "file": proto, "cache": cache}
    if disk.discard:
        proto["discard"] = node["discard"] = "unmap"
    if disk.l2_cache_size is not None:
        node["l2-cache-size"] = disk.l2_cache_size
    if disk.read_only:
        proto["read-only"] = node["read-only"] = True
    return node


def device(disk: GuestDisk, machine: str, bus: str | None = None) -> dict[str, object]:
    """The guest device of a disk (the same dict serves -device and QMP device_add)."""
    wce = "on" if CACHE_FLAGS[disk.cache][2] else "off"
    if disk.bus == "virtio-blk":
        dev: dict[str, object] = {
            "driver": "virtio-blk-device" if machine == "microvm" else "virtio-blk-pci",
            "id": f"dev-{disk.id}",
            "drive": disk.id,
            "serial": disk.id,
            "write-cache": wce,
        }
        if disk.iothread:
            dev["iothread"] = f"io-{disk.id}"
    else:
        dev = {
            "driver": "scsi-hd",
            "id": f"dev-{disk.id}",
            "drive": disk.id,
            "serial": disk.id,
            "write-cache": wce,
            "bus": f"scsi-{disk.id}.0",
        }
    if disk.werror is not None:
        dev["werror"] = disk.werror
    if bus is not None:
        dev["bus"] = bus
    return dev


def scsi_controller(disk: GuestDisk, machine: str) -> dict[str, object]:
    """One virtio-scsi controller per SCSI disk, so that each disk can have its own iothread."""
    ctl: dict[str, object] = {
        "driver": "virtio-scsi-device" if machine == "microvm" else "virtio-scsi-pci",
        "id": f"scsi-{disk.id}",
    }
    if disk.iothread:
        ctl["iothread"] = f"io-{disk.id}"
    return ctl


def check_iothreads(disks: tuple[GuestDisk, ...] | list[GuestDisk], machine: str, accel: str) -> None:
    """UserError for an iothread qemu would refuse: virtio-mmio (microvm) needs ioeventfd, i.e. KVM."""
    if machine == "microvm" and accel != "kvm":
        for disk in disks:
            if disk.iothread:
                raise UserError(
                    f"guest disk {disk.id}: iothread = true on machine 'microvm' needs KVM "
                    f"(qemu: 'ioeventfd is required for iothread'), and this guest runs under {accel}",
                    "use machine = 'q35' for iothreads under TCG, or iothread = false",
                )


def _opt(d: dict[str, object]) -> str:
    """A device dict as qemu's key=value option string (driver first)."""
    rest = ",".join(f"{k}={'on' if v is True else 'off' if v is False else v}" for k, v in d.items() if k != "driver")
    return f"{d['driver']},{rest}"


#: skip what a guest with no network, no keys and no module signing needs least; together about a third of
#: the kernel's boot under TCG (jitterentropy, crypto self-tests, BPF struct_ops, the certificate list)
FAST_BOOT = (
    "cryptomgr.notests=1 initcall_blacklist=jent_mod_init,bpf_tcp_ca_kfunc_init,crypto_kdf108_init,"
    "bpf_dummy_struct_ops_init,netns_bpf_init,load_system_certificate_list,sed_opal_init"
)


def kernel_cmdline(extra: str = "", tsc_khz: int | None = None) -> str:
    """The guest kernel's command line: serial console, quiet, a panic powers the guest off.

    tsc_khz: under TCG, microvm has no HPET or PM timer and calibrating the TSC against the PIT fails (the
    boot hangs), so the TSC rate is given: qemu's emulated TSC ticks at the host's rate.
    """
    args = f"console=ttyS0 quiet loglevel=4 panic=-1 oops=panic rdinit=/init {FAST_BOOT}"
    if tsc_khz:
        # lpj: skip the delay-loop calibration (HZ=250). tsc=reliable: with no HPET or PM timer the clocksource
        # watchdog compares the TSC with jiffies, whose ticks arrive late under nested emulation; it then
        # switched the guest to jiffies and the guest clock lost ~30 % against the host's
        args += f" tsc_early_khz={tsc_khz} lpj={tsc_khz * 4} tsc=reliable"
    return args + (f" {extra}" if extra else "")


def machine_args(machine: str) -> list[str]:
    """-machine for microvm (no PCI, no firmware option ROMs), q35 or pc."""
    if machine not in MACHINES:
        raise _bad("machine", machine, MACHINES)
    if machine == "microvm":
        # ACPI stays on: the Debian kernel finds virtio-mmio devices only through ACPI
        # (CONFIG_VIRTIO_MMIO_CMDLINE_DEVICES is off).
        return ["-machine", "microvm,x-option-roms=off,rtc=on,isa-serial=on,acpi=on"]
    return ["-machine", machine]


def guest_argv(
    *,
    name: str,
    kernel: str,
    initrd: str,
    run_dir: str,
    disks: tuple[GuestDisk, ...] | list[GuestDisk],
    accel: str = "tcg",
    machine: str = "microvm",
    memory_mb: int = 512,
    cpus: int = 1,
    qemu: str = "qemu-system-x86_64",
    append: str = "",
    hotplug: bool = True,
    tsc_khz: int | None = None,
    cpu_model: str | None = None,
) -> list[str]:
    """The full qemu argv of a test guest (pure). No network; control over virtio-serial; QMP on a socket.
    `cpu_model` is qemu's -cpu (default: host under KVM, max under TCG)."""
    check_iothreads(disks, machine, accel)
    cpu = ["-accel", "kvm", "-cpu", "host"] if accel == "kvm" else ["-accel", "tcg,thread=single", "-cpu", "max"]
    if cpu_model:
        cpu[-1] = cpu_model
    pci = machine != "microvm"
    argv = [
        qemu,
        "-name",
        f"tankbench-guest-{name}",
        *machine_args(machine),
        *cpu,
        "-m",
        str(memory_mb),
        "-smp",
        str(cpus),
        *("-nodefaults", "-no-user-config", "-display", "none", "-vga", "none", "-nic", "none", "-no-reboot"),
        *("-monitor", "none"),
        "-serial",
        f"file:{run_dir}/console.log",
        "-qmp",
        f"unix:{run_dir}/qmp.sock,server=on,wait=off",
        "-kernel",
        kernel,
        "-initrd",
        initrd,
        "-append",
        kernel_cmdline(append, tsc_khz if accel == "tcg" else None),
        "-chardev",
        f"socket,id=ctl,path={run_dir}/ctl.sock,server=on,wait=off",
        "-device",
        "virtio-serial-pci,id=vser" if pci else "virtio-serial-device,id=vser",
        "-device",
        f"virtserialport,bus=vser.0,chardev=ctl,name={CONTROL_PORT}",
    ]
    return argv + hotplug_args(machine, hotplug) + disk_args(disks, machine)


def hotplug_args(machine: str, hotplug: bool) -> list[str]:
    """A spare SCSI controller for hot-plugged virtio-scsi disks (a controller itself cannot be hot-plugged on
    microvm); on q35 also empty PCIe root ports for hot-plugged virtio-blk disks."""
    if not hotplug:
        return []
    argv = ["-device", "virtio-scsi-pci,id=scsihp" if machine != "microvm" else "virtio-scsi-device,id=scsihp"]
    if machine == "q35":
        for i in range(HOTPLUG_PORTS):
            argv += ["-device", f"pcie-root-port,id=hp{i},chassis={i + 1},slot={i + 1}"]
    return argv


def disk_args(disks: tuple[GuestDisk, ...] | list[GuestDisk], machine: str) -> list[str]:
    """The disks a guest boots with: their iothreads, block nodes and devices."""
    argv: list[str] = []
    for disk in disks:
        if disk.iothread:
            argv += ["-object", f"iothread,id=io-{disk.id}"]
        argv += ["-blockdev", json.dumps(blockdev(disk), separators=(",", ":"))]
        if disk.bus == "virtio-scsi":
            argv += ["-device", _opt(scsi_controller(disk, machine))]
        argv += ["-device", _opt(device(disk, machine))]
    return argv
