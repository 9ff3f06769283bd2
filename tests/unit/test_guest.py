"""The test guest's pure parts: disk settings -> qemu options, initramfs assembly, the guest's answers."""

from __future__ import annotations

import gzip
import json
import lzma
import subprocess
from pathlib import Path

import pytest

from tankbench.errors import UserError
from tankbench.guest import initramfs, qemu
from tankbench.guest.records import GuestRun, cache_mode, parse_devices, parse_diskstats, parse_stat
from tankbench.guest.testguest import TestGuest, cpu_khz
from tankbench.hosts.local import LocalHost
from tests.conftest import tiny_initramfs

DEP = """kernel/fs/ext4/ext4.ko.xz: kernel/lib/crc16.ko.xz kernel/fs/mbcache.ko.xz kernel/fs/jbd2/jbd2.ko.xz
kernel/lib/crc16.ko.xz:
kernel/fs/mbcache.ko.xz:
kernel/fs/jbd2/jbd2.ko.xz:
kernel/drivers/md/dm-crypt.ko.xz: kernel/drivers/md/dm-mod.ko.xz
kernel/drivers/md/dm-mod.ko.xz:
kernel/drivers/block/virtio_blk.ko.xz:
"""


def test_module_closure_puts_dependencies_first_and_accepts_dashes() -> None:
    deps = initramfs.parse_modules_dep(DEP)
    order = initramfs.module_closure(deps, ["dm_crypt", "ext4", "virtio_blk", "ext4"])
    assert order == [
        "kernel/drivers/md/dm-mod.ko.xz",
        "kernel/drivers/md/dm-crypt.ko.xz",
        "kernel/lib/crc16.ko.xz",
        "kernel/fs/mbcache.ko.xz",
        "kernel/fs/jbd2/jbd2.ko.xz",
        "kernel/fs/ext4/ext4.ko.xz",
        "kernel/drivers/block/virtio_blk.ko.xz",
    ]
    with pytest.raises(KeyError, match="nosuch"):
        initramfs.module_closure(deps, ["nosuch"])


def test_modules_dep_names_the_decompressed_files() -> None:
    deps = initramfs.parse_modules_dep(DEP)
    text = initramfs.modules_dep_text(deps, ["kernel/drivers/md/dm-mod.ko.xz", "kernel/drivers/md/dm-crypt.ko.xz"])
    assert text == "kernel/drivers/md/dm-mod.ko:\nkernel/drivers/md/dm-crypt.ko: kernel/drivers/md/dm-mod.ko\n"


def test_initramfs_is_a_newc_cpio_that_cpio_lists_and_extracts(tmp_path: Path) -> None:
    mods = tmp_path / "modules"
    for rel in (
        "kernel/drivers/md/dm-mod.ko.xz",
        "kernel/drivers/md/dm-crypt.ko.xz",
        "kernel/drivers/block/virtio_blk.ko.xz",
    ):
        (mods / rel).parent.mkdir(parents=True, exist_ok=True)
        (mods / rel).write_bytes(lzma.compress(b"ELF " + rel.encode()))
    (mods / "modules.dep").write_text(DEP)
    (tmp_path / "busybox").write_bytes(b"#!busybox")
    (tmp_path / "fio").write_bytes(b"#!fio")
    out = tmp_path / "initrd.img"
    info = initramfs.build_initramfs(
        out,
        busybox=tmp_path / "busybox",
        fio=tmp_path / "fio",
        init=b"#!/bin/sh\n",
        modules_dir=mods,
        kernel_abi="6.1-test",
        modules=["dm-crypt", "virtio_blk"],
        compress=True,
    )
    assert info["modules"] == ["dm_mod", "dm_crypt", "virtio_blk"]
    listing = subprocess.run(
        ["cpio", "-itv"], input=gzip.decompress(out.read_bytes()), capture_output=True, check=True
    ).stdout.decode()
    assert "lib/modules/6.1-test/kernel/drivers/md/dm-crypt.ko" in listing
    assert "bin/sh -> busybox" in listing and "sbin/modprobe -> ../bin/busybox" in listing
    assert "dev/console" in listing
    dest = tmp_path / "x"
    dest.mkdir()
    subprocess.run(["cpio", "-id", "--quiet"], input=gzip.decompress(out.read_bytes()), cwd=dest, check=True)
    assert (
        dest / "lib/modules/6.1-test/kernel/drivers/md/dm-crypt.ko"
    ).read_bytes() == b"ELF kernel/drivers/md/dm-crypt.ko.xz"  # decompressed
    assert (dest / "init").read_bytes() == b"#!/bin/sh\n" and (dest / "init").stat().st_mode & 0o111
    assert (dest / "lib/modules/6.1-test/modules.dep").read_text().startswith("kernel/drivers/md/dm-mod.ko:")


def _argv(disks: list[qemu.GuestDisk], machine: str = "microvm", accel: str = "tcg") -> list[str]:
    return qemu.guest_argv(
        name="g1",
        kernel="/boot/vmlinuz",
        initrd="/i.img",
        run_dir="/r",
        disks=disks,
        accel=accel,
        machine=machine,
        tsc_khz=2445404,
    )


def test_argv_has_no_network_no_defaults_and_a_control_port() -> None:
    argv = _argv([])
    s = " ".join(argv)
    assert "-nic none" in s and "-nodefaults" in argv and "-no-reboot" in argv
    assert "tankbench-guest-g1" in argv
    assert "-machine microvm," in s and "acpi=on" in s
    assert "virtserialport,bus=vser.0,chardev=ctl,name=tankbench.0" in argv
    assert "tsc_early_khz=2445404" in s  # microvm under TCG cannot calibrate its TSC
    assert "tsc_early_khz" not in " ".join(_argv([], accel="kvm"))
    assert "-accel kvm -cpu host" in " ".join(_argv([], accel="kvm"))
    assert "virtio-serial-pci,id=vser" in _argv([], machine="q35")
    assert "pcie-root-port,id=hp0,chassis=1,slot=1" in _argv([], machine="q35")


@pytest.mark.parametrize(
    ("cache", "direct", "no_flush", "wce"),
    [
        ("none", True, False, "on"),
        ("writeback", False, False, "on"),
        ("writethrough", False, False, "off"),
        ("directsync", True, False, "off"),
        ("unsafe", False, True, "on"),
    ],
)
def test_cache_modes_map_to_blockdev_cache_and_device_write_cache(
    cache: str, direct: bool, no_flush: bool, wce: str
) -> None:
    disk = qemu.GuestDisk("tbd0", "/dev/zvol/tank/v", cache=cache)
    node = qemu.blockdev(disk)
    assert node["cache"] == {"direct": direct, "no-flush": no_flush}
    assert node["file"]["driver"] == "host_device"  # type: ignore[index]
    assert qemu.device(disk, "microvm")["write-cache"] == wce
    # and query-block's answer maps back to the same name
    assert cache_mode({"direct": direct, "no-flush": no_flush, "writeback": wce == "on"}) == cache


def test_qcow2_scsi_iothread_disk_in_argv() -> None:
    disk = qemu.GuestDisk(
        "tbd1",
        "/tank/img/a.qcow2",
        format="qcow2",
        bus="virtio-scsi",
        cache="writeback",
        aio="io_uring",
        iothread=True,
        l2_cache_size=1 << 20,
    )
    argv = _argv([disk], accel="kvm")
    node = json.loads(argv[argv.index("-blockdev") + 1])
    assert node["driver"] == "qcow2" and node["l2-cache-size"] == 1 << 20
    assert node["file"] == {
        "driver": "file",
        "node-name": "tbd1-file",
        "filename": "/tank/img/a.qcow2",
        "aio": "io_uring",
        "cache": {"direct": False, "no-flush": False},
        "discard": "unmap",
    }
    assert "iothread,id=io-tbd1" in argv
    assert "virtio-scsi-device,id=scsi-tbd1,iothread=io-tbd1" in argv
    assert "scsi-hd,id=dev-tbd1,drive=tbd1,serial=tbd1,write-cache=on,bus=scsi-tbd1.0" in argv
    blk = _argv([qemu.GuestDisk("tbd2", "/x.img", iothread=True)], machine="q35")
    assert "virtio-blk-pci,id=dev-tbd2,drive=tbd2,serial=tbd2,write-cache=on,iothread=io-tbd2" in blk


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"bus": "ide"}, "bus = 'ide' is not supported"),
        ({"cache": "always"}, "cache = 'always' is not supported"),
        ({"aio": "posix"}, "aio = 'posix' is not supported"),
        ({"format": "vmdk"}, "format = 'vmdk' is not supported"),
        ({"aio": "native", "cache": "writeback"}, "aio = 'native' needs O_DIRECT"),
        ({"l2_cache_size": 1 << 20}, "l2_cache_size = 1048576 applies to qcow2 only"),
        ({"id": "Bad-Id"}, "id = 'Bad-Id' is not supported"),
        ({"path": "rel/img"}, "path = 'rel/img' is not supported"),
    ],
)
def test_bad_disk_settings_are_user_errors_naming_the_key(kwargs: dict[str, object], message: str) -> None:
    args: dict[str, object] = {"id": "tbd0", "path": "/x.img", **kwargs}
    with pytest.raises(UserError, match=message.replace("(", r"\(")) as e:
        qemu.GuestDisk(**args)  # type: ignore[arg-type]
    assert e.value.hint


def test_test_guest_refuses_bad_accel_machine_and_duplicate_ids() -> None:
    host = LocalHost()
    with pytest.raises(UserError, match="accel"):
        TestGuest(host, accel="hvf")
    with pytest.raises(UserError, match="machine = 'virt'"):
        TestGuest(host, machine="virt")
    d = qemu.GuestDisk("tbd0", "/x.img")
    with pytest.raises(UserError, match="duplicate id"):
        TestGuest(host, [d, d])


def test_guest_answers_parse() -> None:
    assert parse_devices("vda tbd0 1073741824\nsda tbd1 8589934592\nvdz  0\n") == {
        "tbd0": "/dev/vda",
        "tbd1": "/dev/sda",
    }
    ds = parse_diskstats(" 253       0 vda 10 0 80 5 20 0 160 9 0 14 14 0 0 0 0 0 0\n")
    assert ds["vda"][:5] == (10, 0, 80, 5, 20)
    st = parse_stat("cpu  1 2 3 4 5 6 7 8 0 0\ncpu0 1 2 3 4 5 6 7 8 0 0\nctxt 99\nbtime 5\n")
    assert st == {"cpu": (1, 2, 3, 4, 5, 6, 7, 8, 0, 0), "ctxt": (99,)}
    assert cpu_khz("processor : 0\ncpu MHz\t\t: 2445.404\n") == 2445404
    assert cpu_khz("no such line") is None


def test_guest_run_from_controller_result() -> None:
    ev = {
        "rc": 0,
        "host_wall_s": 4.2,
        "qemu_cpu_s": 7.5,
        "files": {
            "fio.json": 'note: both iodepth >= 1 and synchronous I/O engine are selected\n{"fio version": "fio-3.33"}',
            "stdout": "",
            "stderr": "",
            "before.uptime": "10.00",
            "after.uptime": "13.25",
            "before.diskstats": " 253 0 vda 1 0 8 1 2 0 16 1 0 2 2 0 0 0 0 0 0\n",
            "before.stat": "ctxt 5\n",
        },
    }
    run = GuestRun.from_result(ev)
    assert run.fio == {"fio version": "fio-3.33"} and run.fio_error == ""
    assert run.guest_wall_s == 3.25 and run.host_wall_s == 4.2 and run.qemu_cpu_s == 7.5
    assert run.diskstats_before["vda"][0] == 1 and run.stat_before == {"ctxt": (5,)} and run.guest_start_s == 10.0
    bad = GuestRun.from_result({"rc": 1, "files": {"fio.json": "{broken"}})
    assert bad.fio is None and "broken" in bad.fio_error


def test_tools_key_follows_fio_and_busybox_versions_not_the_kernel() -> None:
    from dataclasses import replace

    from tankbench.lab import build

    v = build.Versions(
        suite="bookworm-backports",
        kernel_abi="6.12.95+deb12-amd64",
        kernel_version="k",
        zfs_version="2.3.2",
        mirror="m",
        security_mirror="s",
        fio_version="3.33-3",
        busybox_version="1:1.35.0-4",
    )
    k = build.tools_key(v)
    assert k == build.tools_key(replace(v, kernel_abi="6.12.99+deb12-amd64", zfs_version="2.3.3"))
    assert k != build.tools_key(replace(v, fio_version="3.33-4"))
    assert k != build.tools_key(replace(v, busybox_version="1:1.36"))
    assert build.guest_key(v) != build.guest_key(replace(v, fio_version="3.33-4"))  # the image follows fio too
    # a versions.json written before these fields existed still loads
    old = {
        "suite": "bookworm",
        "kernel_abi": "6.1.0-50-amd64",
        "kernel_version": "k",
        "zfs_version": "2.1.11",
        "mirror": "m",
        "security_mirror": "s",
    }
    assert build.Versions(**old).fio_version == ""
    assert "deb-src m bookworm main\n" in build.sources_list("m", "s", deb_src=True)
    assert "deb-src" not in build.sources_list("m", "s")


def test_iothread_on_microvm_needs_kvm() -> None:
    disk = qemu.GuestDisk("tbd0", "/x.img", iothread=True)
    with pytest.raises(UserError, match="needs KVM") as e:
        _argv([disk])
    assert "q35" in e.value.hint
    assert "iothread,id=io-tbd0" in _argv([disk], accel="kvm")
    assert "iothread,id=io-tbd0" in _argv([disk], machine="q35")


def test_initramfs_is_uncompressed_by_default(tmp_path: Path) -> None:
    out = tiny_initramfs(tmp_path)
    assert out.read_bytes().startswith(b"070701")


def test_extract_vmlinux_finds_the_elf_payload_after_false_magics() -> None:
    import zlib

    elf = b"\x7fELF" + bytes(range(256)) * 40
    gz = zlib.compressobj(wbits=31)
    payload = gz.compress(elf) + gz.flush()
    bz = b"MZ header \x1f\x8b\x08 not really gzip" + payload + b"trailer"
    assert initramfs.extract_vmlinux(bz) == elf
    assert initramfs.extract_vmlinux(b"MZ" + lzma.compress(elf, format=lzma.FORMAT_XZ) + b"\0" * 8) == elf
    seen: list[bytes] = []
    zst = b"MZ\x28\xb5\x2f\xfdPAYLOAD"
    assert initramfs.extract_vmlinux(zst, lambda d: seen.append(d) or elf) == elf  # type: ignore[func-returns-value]
    assert seen == [b"\x28\xb5\x2f\xfdPAYLOAD"]
    assert initramfs.extract_vmlinux(zst) is None  # no zstd tool: the caller boots the bzImage
    assert initramfs.extract_vmlinux(b"no kernel here") is None


def test_kernel_cmdline_skips_slow_initcalls_and_sets_the_tsc_under_tcg() -> None:
    line = qemu.kernel_cmdline("extra=1", tsc_khz=2000000)
    assert "initcall_blacklist=jent_mod_init," in line and "cryptomgr.notests=1" in line
    assert "tsc_early_khz=2000000 lpj=8000000 tsc=reliable" in line and line.endswith(" extra=1")


def test_image_key_follows_the_tools_key() -> None:
    """The image holds the tools' static fio: a new tools recipe must rebuild the image, not only the tools."""
    from dataclasses import replace
    from unittest import mock

    from tankbench.lab import build, recipe

    v = build.Versions("bookworm-backports", "6.12.95+deb12-amd64", "k", "2.3.2", "m", "s", "3.33-3", "1:1.35")
    key = build.image_key(v, "files")
    assert key != build.image_key(replace(v, fio_version="3.33-4"), "files")
    with mock.patch.object(recipe, "TOOLS_RECIPE", recipe.TOOLS_RECIPE + "x"):
        assert build.image_key(v, "files") != key
