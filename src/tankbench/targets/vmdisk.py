"""`kind = "vm-disk"`: the disk of a test guest tankbench boots on the ZFS host (seeds 001 and 003).

The disk is backed by a zvol or by a qcow2/raw image on a dataset that this campaign created and tagged; fio
runs inside the guest, while the host's agent samples the pool's disks and captures the ZFS side in the same
time window. One guest boot serves the whole campaign: each backing configuration is hot-plugged (QMP) when
its first test comes and unplugged when the next configuration replaces it. This is its declaration (axes,
names, the backing's path, export lines); drivers/vmdisk.py boots the guest and runs the tests in it.
"""

from __future__ import annotations

import json
import shlex
from collections.abc import Mapping
from typing import Any

import tankbench.targets.zfsplan as zfs
from tankbench.guestconf import copy as guest_copy
from tankbench.guestconf import layers as guest_layers
from tankbench.guestconf import machine as guest_machine
from tankbench.guestconf.layers import backing_test
from tankbench.guestconf.pauses import WERROR_VALUES
from tankbench.keys import Keys
from tankbench.model import FILL, Target, Test, short_hash
from tankbench.targets.base import KindTraits
from tankbench.targets.zfsbase import ZfsKind, zfs_axes
from tankbench.units import fmt_size, parse_size

BACKINGS = ("zvol", "qcow2", "raw")
#: a test guest's processor (guest_cpu, guest_cpus: a change boots a new guest), its disk: the backing on the
#: host, then qemu's settings for it, then what the guest puts between fio and the disk (guest_luks, guest_fs)
VM_AXES: tuple[str, ...] = (
    *guest_machine.AXES,
    "backing",
    "qcow2_cluster",
    "preallocation",
    "l2_cache",
    "bus",
    "disk_cache",
    "aio",
    "iothread",
    "werror",
    *guest_layers.AXES,
)
VM_CHOICES = {
    "guest_fs": guest_layers.FILESYSTEMS,
    "backing": BACKINGS,
    "preallocation": ("off", "metadata", "falloc", "full"),
    "bus": ("virtio-blk", "virtio-scsi"),
    "disk_cache": ("none", "writeback", "writethrough", "directsync", "unsafe"),
    "aio": ("threads", "native", "io_uring"),
    "werror": WERROR_VALUES,
}
#: the guest disk's qemu settings (axes) and their defaults
DISK_AXES = {"bus": "virtio-blk", "disk_cache": "none", "aio": "threads", "iothread": False}
#: axes that mean something only for some backings: dropped elsewhere, so tests are not duplicated
ONLY_FOR = {
    "qcow2_cluster": ("qcow2",),
    "l2_cache": ("qcow2",),
    "preallocation": ("qcow2", "raw"),
    "recordsize": ("qcow2", "raw"),
    "volblocksize": ("zvol",),
}


#: the fill experiment's ballast under the campaign's root dataset (one fill runs at a time)
BALLAST = "fill-ballast"


class VmDiskKind(ZfsKind):
    """fio in the test guest on a disk backed by a zvol (`/dev/zvol/…`) or an image on a dataset."""

    kind = "vm-disk"
    traits = KindTraits(block_device=True, needs_pool=True, zfs=True, runs_in_guest=True)
    short = "vm"
    #: the ZFS axes but direct (fio's O_DIRECT in the guest never reaches the host's dataset); the disk's are inner
    axes = zfs_axes("direct")
    inner_axes = VM_AXES
    size_means = "the guest disk's size"

    # -- campaign file -------------------------------------------------------------------------
    @classmethod
    def axis_value(cls, keys: Keys, key: str, axis: str, value: object) -> Any:
        """The guest disk's settings; the ZFS axes as for any ZFS kind."""
        if axis in VM_CHOICES:
            return keys.choice(key, value, VM_CHOICES[axis])
        if axis == "qcow2_cluster":
            n = keys.size(key, value)
            if n < 512 or n > 2 << 20 or n & (n - 1):
                raise keys.err(
                    key, value, "must be a power of two from 512 to 2M (qcow2's cluster sizes)", 'e.g. "8k", "64k"'
                )
            return fmt_size(n)
        if axis == "l2_cache":
            return fmt_size(keys.size(key, value))
        if axis in ("iothread", "guest_luks"):
            return keys.boolean(key, value)
        if axis in guest_machine.AXES:
            return guest_machine.axis_value(keys, key, axis, value)
        return super().axis_value(keys, key, axis, value)

    @classmethod
    def check_matrix(cls, keys: Keys, matrix: Mapping[str, tuple[Any, ...]]) -> None:
        """A guest disk's backing-specific axes need that backing in the matrix (qcow2_cluster on a zvol is a
        mistake, not a no-op); an iothread needs a virtio-blk disk."""
        backings = matrix.get("backing", ("zvol",))
        for axis, needs in (
            ("qcow2_cluster", ("qcow2",)),
            ("l2_cache", ("qcow2",)),
            ("preallocation", ("qcow2", "raw")),
        ):
            if axis in matrix and not set(needs) & set(backings):
                raise keys.err(
                    f"matrix.{axis}",
                    list(matrix[axis]),
                    f"applies only to backing = {' or '.join(needs)}, and the matrix has backing = {list(backings)}",
                    f'add "{needs[0]}" to matrix.backing, or remove the axis',
                )
        buses = matrix.get("bus", ("virtio-blk",))
        if True in matrix.get("iothread", ()) and "virtio-blk" not in buses:
            raise keys.err(
                "matrix.iothread",
                list(matrix["iothread"]),
                f"applies only to bus = virtio-blk, and the matrix has bus = {list(buses)} (tankbench hot-plugs "
                "virtio-scsi disks on the guest's one SCSI controller, which has no iothread of its own)",
                'add "virtio-blk" to matrix.bus, or remove the axis',
            )

    # -- plan time -----------------------------------------------------------------------------
    @classmethod
    def adjust(cls, params: Mapping[str, Any]) -> dict[str, Any]:
        backing = str(params.get("backing", "zvol"))
        kept = {k: v for k, v in params.items() if k not in ONLY_FOR or backing in ONLY_FOR[k]}
        if kept.get("bus") == "virtio-scsi":  # hot-plugged on the one SCSI controller: no iothread per disk
            kept.pop("iothread", None)
        return kept

    @classmethod
    def fio_filename(cls, test: Test) -> str:
        """The guest's view: the file in the guest filesystem or the dm-crypt device (guest_fs, guest_luks), else
        the disk by its serial (tankbench rewrites it to the guest's device at run time)."""
        path = guest_layers.data_path(guest_layers.Layers.of(test.params), disk_id(test))
        return path or f"/dev/disk/by-id/virtio-{disk_id(test)}"

    @classmethod
    def accepts(cls, params: Mapping[str, Any]) -> bool:
        """cp and rsync need a filesystem in the guest; dd writes the device (or a file) (guest/layers.py)."""
        return guest_layers.accepts(params)

    @classmethod
    def backing_path(cls, test: Test) -> str:
        """The zvol device or image file on the host that is the guest's disk (sized for the guest's layers)."""
        test = backing_test(test)
        if zfs.is_volume(test):
            return zfs.fio_filename(test)
        ext = "qcow2" if test.params.get("backing") == "qcow2" else "img"
        return f"{zfs.dataset_dir(test)}/tankbench-{test.target.name}-{image_tag(test)}.{ext}"

    @classmethod
    def name_stem(cls, target: Target, params: Mapping[str, Any], varying: set[str], several: bool) -> list[str]:
        head = "zfs-slog" if params.get("slog") else "zfs"
        name = f"vm-{target.name}" if several else "vm"
        backing = str(params.get("backing", "zvol"))
        if backing == "qcow2" and "qcow2_cluster" in params:
            backing += f"-{params['qcow2_cluster']}"
        if params.get("workload") == FILL:
            rw, bs = FILL, fmt_size(target.size)
        else:
            rw = f"copy-{params['workload']}" if params.get("workload", "fio") != "fio" else params["rw"]
            bs = params["copy_size"] if params.get("workload", "fio") != "fio" else params["bs"]
        parts = [f"{head}-{name}-{backing}-{rw}-{bs}"]
        for axis in ("preallocation", "l2_cache", *DISK_AXES, "werror", *cls.NAMED_AXES, "recordsize", "volblocksize"):
            if axis in varying and axis in params:
                value = params[axis]
                parts.append(f"{axis}-{value}" if not isinstance(value, bool) else (axis if value else f"no{axis}"))
        return parts + guest_machine.name_parts(params, varying) + guest_layers.name_parts(params, varying)

    @classmethod
    def script_lines(cls, test: Test, campaign_id: str) -> list[str]:
        disk = disk_settings(test)
        if test.is_fill:
            image = "" if zfs.is_volume(test) else image_create_argv_text(test)
            lines = fill_script_lines(test, campaign_id, cls.backing_path(test), image)
            return [*super().script_lines(test, campaign_id), *lines]
        backing = backing_test(test)  # the disk holds the guest's layers besides what fio works on
        device = f"/dev/disk/by-id/virtio-{disk_id(test)}"
        if test.is_copy:
            then = "and run the copy below there."
        elif guest_layers.Layers.of(test.params).any:
            then = "make the layers below in the guest, and run the .fio file there."
        else:
            then = "fill it with random data in the guest, and run the .fio file there."
        return [
            *super().script_lines(backing, campaign_id),
            *([] if zfs.is_volume(test) else [image_create_argv_text(test)]),
            f"# This job runs INSIDE a test guest{processor_text(test)}: attach {cls.backing_path(test)} to it as a "
            f"{disk['bus']} "
            f"disk (cache={disk['cache']}, aio={disk['aio']}, iothread={'on' if disk['iothread'] else 'off'}, "
            f"serial {disk_id(test)}), {then}",
            *guest_layers.script_comment_lines(test, device, disk_id(test)),
            *(guest_copy.script_comment_lines(test, cls.fio_filename(test)) if test.is_copy else []),
        ]

    @classmethod
    def qemu_cache(cls, test: Test) -> str | None:
        return str(disk_settings(test)["cache"])


def processor_text(test: Test) -> str:
    """' (qemu -cpu kvm64 -smp 2)' when the test sets the guest's processor, else ''."""
    if not any(a in test.params for a in guest_machine.AXES):
        return ""
    p = guest_machine.Processor.of(test.params)
    return f" (qemu {'-cpu ' + p.cpu + ' ' if p.cpu else ''}-smp {p.cpus})"


def disk_id(test: Test) -> str:
    """A stable serial for the test's guest disk (letters and digits: qemu ids and serials take them)."""
    return "tb" + short_hash(config_key(test), 10)


def image_tag(test: Test) -> str:
    p = test.params
    return short_hash({k: p.get(k) for k in ("backing", "qcow2_cluster", "preallocation")}, 8)


def disk_settings(test: Test) -> dict[str, Any]:
    """The guest disk's qemu settings for a test: its axes, else the defaults."""
    p = test.params
    l2 = p.get("l2_cache")
    return {
        "bus": str(p.get("bus", DISK_AXES["bus"])),
        "cache": str(p.get("disk_cache", DISK_AXES["disk_cache"])),
        "aio": str(p.get("aio", DISK_AXES["aio"])),
        "iothread": bool(p.get("iothread", DISK_AXES["iothread"])),
        "l2_cache": parse_size(str(l2)) if l2 else None,
        **({"werror": str(p["werror"])} if "werror" in p else {}),  # absent: qemu's default (enospc)
    }


#: the QOM type qemu gives a disk on each bus (virtio-blk: -pci on q35/pc, -device on microvm's virtio-mmio)
BUS_MODELS = {"virtio-blk": ("virtio-blk-pci", "virtio-blk-device"), "virtio-scsi": ("scsi-hd",)}
#: qcow2's cluster size when the campaign does not set one
QCOW2_DEFAULT_CLUSTER = 65536


def config_key(test: Test) -> str:
    """What identifies a hot-plugged disk: the backing (its dataset/zvol and image) and the qemu settings."""
    key = {"ds": zfs.dataset_name(backing_test(test)), "image": image_tag(test), "disk": disk_settings(test)}
    layers = guest_layers.Layers.of(test.params)
    if layers.any:  # the layers are made once per configuration: another filesystem is another configuration
        key["layers"] = {"fs": layers.fs, "luks": layers.luks}
    if any(a in test.params for a in guest_machine.AXES):  # another guest: its disk is plugged in again
        key["processor"] = {a: test.params.get(a) for a in guest_machine.AXES}
    return json.dumps(key, sort_keys=True)


def image_create_argv(test: Test) -> list[str]:
    """`qemu-img create` for an image backing (qcow2 cluster size, preallocation), on the test's dataset, sized
    for what fio works on and the guest's layers (guest/layers.py: disk_bytes)."""
    p = test.params
    opts = []
    if p.get("backing") == "qcow2" and p.get("qcow2_cluster"):
        opts.append(f"cluster_size={parse_size(str(p['qcow2_cluster']))}")
    if p.get("preallocation"):
        opts.append(f"preallocation={p['preallocation']}")
    fmt = "qcow2" if p.get("backing") == "qcow2" else "raw"
    argv = ["qemu-img", "create", "-q", "-f", fmt]
    if opts:
        argv += ["-o", ",".join(opts)]
    return argv + [VmDiskKind.backing_path(test), str(backing_test(test).target.size)]


def image_create_argv_text(test: Test) -> str:
    return shlex.join(image_create_argv(test))


def fill_script_lines(test: Test, campaign_id: str, backing: str, image_create: str) -> list[str]:
    """Shell lines (and comments) that set up a fill test by hand, as `run` does (for `plan --export`); `backing`
    is the guest disk's path on the host, `image_create` the `qemu-img create` line of an image backing."""
    ballast = f"{zfs.pool_root(test)}/{BALLAST}"
    room = parse_size(str(test.params["fill_room"]))
    if zfs.is_volume(test):
        thin = f"zfs set refreservation=none {shlex.quote(zfs.dataset_name(test))}  # a thin (sparse) zvol"
    else:
        thin = image_create
    return [
        thin,
        f"# Ballast: a refreservation of all of `zfs get -Hp available {zfs.pool_root(test)}` but {room} bytes:",
        f"avail=$(zfs get -Hp -o value available {shlex.quote(zfs.pool_root(test))})",
        f"zfs create -o canmount=off -o refreservation=$(( (avail - {room}) / 1048576 * 1048576 )) "
        f"-o {zfs.TAG}={campaign_id} {shlex.quote(ballast)}",
        f"# This job runs INSIDE a test guest: attach {backing} to it, run the .fio file "
        f"there until the pool is full. If qemu pauses the VM (werror), run `zfs set refreservation=none "
        f"{ballast}` and resume it (QMP cont / virsh resume); afterwards verify with the same job plus "
        "verify_only=1, do_verify=1, size=<bytes written>, then `zfs destroy` the ballast.",
    ]
