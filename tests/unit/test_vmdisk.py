"""vm-disk targets at plan time: backing-specific axes, names, exported scripts, the sync-honouring check."""

from __future__ import annotations

import dataclasses
from pathlib import Path

from tankbench import model
from tankbench.campaign import expand, load_spec
from tankbench.drivers.vmdisk import settings_mismatches
from tankbench.fio.jobs import job_text
from tankbench.guest.records import BlockSettings
from tankbench.guestconf.layers import backing_test
from tankbench.targets import kinds
from tankbench.targets import zfsplan as zfs
from tankbench.targets.vmdisk import (
    VmDiskKind,
    config_key,
    disk_id,
    disk_settings,
    image_create_argv,
)
from tests.conftest import ROOT

PRESET = ROOT / "src" / "tankbench" / "presets" / "zvol-vs-qcow2.toml"


def _tests(scale: str = "") -> list[model.Test]:
    return expand(load_spec(str(PRESET), scale))


def test_registry_has_vm_disk() -> None:
    assert kinds()["vm-disk"] is VmDiskKind


def test_qcow2_only_axes_do_not_multiply_other_backings() -> None:
    guest = [t for t in _tests() if t.target.kind == "vm-disk" and not t.is_fill]
    by_backing: dict[str, list[model.Test]] = {}
    for t in guest:
        by_backing.setdefault(str(t.params["backing"]), []).append(t)
    # 2 ioengines each; qcow2 also x 2 cluster sizes
    assert {k: len(v) for k, v in by_backing.items()} == {"zvol": 2, "qcow2": 4, "raw": 2}
    assert all("qcow2_cluster" not in t.params and "recordsize" not in t.params for t in by_backing["zvol"])
    assert all("volblocksize" not in t.params for t in by_backing["raw"] + by_backing["qcow2"])
    assert {t.name for t in by_backing["qcow2"]} >= {
        "zfs-vm-qcow2-8k-randwrite-4k-sync",
        "zfs-vm-qcow2-64k-randwrite-4k-libaio",
    }


def test_backing_paths_and_image_creation() -> None:
    t = next(t for t in _tests() if t.params.get("qcow2_cluster") == "8k")
    path = VmDiskKind.backing_path(t)
    assert path.startswith("/tankbench/tb-") and path.endswith(".qcow2")
    assert image_create_argv(t) == [
        "qemu-img",
        "create",
        "-q",
        "-f",
        "qcow2",
        "-o",
        "cluster_size=8192",
        path,
        str(backing_test(t).target.size),
    ]
    # the disk holds ext4 (the seed's guest filesystem) beside fio's 4G (16 jobs x 256M): 64 MiB + 1/16 more
    assert backing_test(t).target.size == (4 << 30) + (64 << 20) + (4 << 30) // 16
    z = next(t for t in _tests() if t.params.get("backing") == "zvol")
    assert VmDiskKind.backing_path(z).startswith("/dev/zvol/tbvm/tb-")


def test_a_guest_disk_without_a_backing_axis_is_the_zvol_its_name_says() -> None:
    """The kind's default backing is a zvol (the test's name says -zvol-): it is provisioned as one, not as a raw
    image on a dataset (which it was while only an explicit backing = "zvol" counted)."""
    z = next(t for t in _tests() if t.params.get("backing") == "zvol")
    bare = dataclasses.replace(z, params={k: v for k, v in z.params.items() if k != "backing"})
    assert zfs.is_volume(bare) and VmDiskKind.backing_path(bare).startswith("/dev/zvol/")
    raw = next(t for t in _tests() if t.params.get("backing") == "raw")
    assert not zfs.is_volume(raw) and VmDiskKind.backing_path(raw).endswith(".img")


def test_exported_script_does_not_run_the_guest_job_on_the_host(tmp_path: Path) -> None:
    from tests.conftest import tankbench

    res = tankbench("plan", str(PRESET), "--scale", "quick", "--export", str(tmp_path / "x"))
    assert res.returncode == 0, res.stderr
    number = next(t.number for t in _tests("quick") if t.name == "zfs-vm-qcow2-64k-randwrite-4k-sync")
    script = (tmp_path / "x" / f"{number:04d}-job.sh").read_text()
    assert "INSIDE a test guest" in script and "exec fio" not in script
    assert "qemu-img create -q -f qcow2 -o cluster_size=65536" in script


def test_disk_defaults_and_the_qemu_cache_the_sync_check_reads() -> None:
    t = _tests("quick")[0]
    assert disk_settings(_tests()[0])["bus"] == "virtio-blk"  # the default; the quick form hot-plugs on microvm
    assert disk_settings(t) == {
        "bus": "virtio-scsi",
        "cache": "none",
        "aio": "threads",
        "iothread": False,
        "l2_cache": None,
    }
    assert VmDiskKind.qemu_cache(t) == "none"
    unsafe = model.Test(
        number=1,
        name="u",
        target=t.target,
        params=dict(t.params, disk_cache="unsafe"),
        fio_options=t.fio_options,
        runtime=1,
        ramp=0,
    )
    assert VmDiskKind.qemu_cache(unsafe) == "unsafe"


LAYERED = """
[campaign]
name = "guest-layers"
runtime = "3s"
copy_size = "32M"
[pool]
name = "tbgfs"
vdevs = ["/dev/disk/by-id/virtio-tbdata0"]
confirm = ["/dev/disk/by-id/virtio-tbdata0"]
[[target]]
name = "guest"
kind = "vm-disk"
size = "64M"
[matrix]
backing = ["zvol", "qcow2"]
bus = ["virtio-scsi"]
guest_luks = [false, true]
guest_fs = ["none", "ext4", "xfs"]
workload = ["fio", "cp", "rsync", "dd"]
rw = ["randwrite"]
bs = ["4k"]
"""


def _layered(tmp_path: Path, text: str = LAYERED) -> list[model.Test]:
    path = tmp_path / "c.toml"
    path.write_text(text)
    return expand(load_spec(str(path)))


def test_layer_axes_name_tests_and_cp_rsync_need_a_filesystem(tmp_path: Path) -> None:
    tests = _layered(tmp_path)
    # 2 backings x 2 luks x 3 fs x (fio + dd) + 2 x 2 x 2 filesystems x (cp + rsync): none gets no cp/rsync
    assert len(tests) == 24 + 16
    names = {t.name for t in tests}
    assert "zfs-vm-zvol-randwrite-4k-nofs-noluks" in names and "zfs-vm-qcow2-randwrite-4k-xfs-luks" in names
    assert "zfs-vm-zvol-copy-cp-32M-ext4-luks" in names and "zfs-vm-qcow2-copy-dd-32M-nofs-noluks" in names
    assert not any(t.params.get("guest_fs") == "none" and t.params.get("workload") in ("cp", "rsync") for t in tests)


def test_layered_tests_open_the_guest_file_or_the_dm_device(tmp_path: Path) -> None:
    by_name = {t.name: t for t in _layered(tmp_path)}
    xfs = by_name["zfs-vm-qcow2-randwrite-4k-xfs-luks"]
    did = disk_id(xfs)
    assert VmDiskKind.fio_filename(xfs) == f"/mnt/{did}/tankbench.fiodata"
    assert f"filename=/mnt/{did}/tankbench.fiodata" in job_text(xfs)
    luks = by_name["zfs-vm-zvol-randwrite-4k-nofs-luks"]
    assert VmDiskKind.fio_filename(luks) == f"/dev/mapper/{disk_id(luks)}"
    plain = by_name["zfs-vm-zvol-randwrite-4k-nofs-noluks"]
    assert VmDiskKind.fio_filename(plain) == f"/dev/disk/by-id/virtio-{disk_id(plain)}"
    # fio works on the target's size; the disk is bigger by the layers' overhead
    assert "size=64M" in job_text(xfs) and backing_test(xfs).target.size == 316 << 20
    assert image_create_argv(xfs)[-1] == str(316 << 20)
    # whether a caller passes the test or its backing test, it is the same image (allocation was once
    # measured on a path that existed nowhere)
    assert VmDiskKind.backing_path(backing_test(xfs)) == VmDiskKind.backing_path(xfs)
    assert image_create_argv(backing_test(xfs)) == image_create_argv(xfs)


def test_each_layer_stack_is_its_own_configuration(tmp_path: Path) -> None:
    tests = [t for t in _layered(tmp_path) if t.params["backing"] == "zvol" and not t.is_copy]
    keys = {config_key(t) for t in tests}
    assert len(keys) == 6  # 2 luks x 3 fs
    # a plain disk keeps its zvol (and its name); the layered ones are bigger by their overhead
    plain = next(t for t in tests if t.params["guest_fs"] == "none" and not t.params["guest_luks"])
    assert backing_test(plain) is plain
    assert VmDiskKind.backing_path(plain).startswith("/dev/zvol/tbgfs/")
    sizes = {t.params["guest_fs"] + str(t.params["guest_luks"]): backing_test(t).target.size >> 20 for t in tests}
    assert sizes == {
        "noneFalse": 64,
        "noneTrue": 80,
        "ext4False": 512,
        "ext4True": 528,
        "xfsFalse": 300,
        "xfsTrue": 316,
    }
    assert len({VmDiskKind.backing_path(t) for t in tests}) == 6


def test_exported_scripts_describe_the_layers_and_the_copy(tmp_path: Path) -> None:
    from tests.conftest import tankbench

    path = tmp_path / "c.toml"
    path.write_text(LAYERED)
    res = tankbench("plan", str(path), "--export", str(tmp_path / "x"))
    assert res.returncode == 0, res.stderr
    tests = {t.name: t for t in _layered(tmp_path)}
    scripts = {p.read_text().splitlines()[1].split()[4]: p.read_text() for p in (tmp_path / "x").glob("*-job.sh")}
    xfs = scripts["zfs-vm-qcow2-randwrite-4k-xfs-luks"]
    t = tests["zfs-vm-qcow2-randwrite-4k-xfs-luks"]
    image = VmDiskKind.backing_path(t)
    assert f"qemu-img create -q -f qcow2 {image} {316 << 20}" in xfs and f"attach {image} to it" in xfs
    assert "make the layers below in the guest" in xfs and "xfs on LUKS2 (aes-xts-plain64)" in xfs
    assert "--pbkdf pbkdf2 --pbkdf-force-iterations 1000" in xfs and "# fio's filename in the guest: /mnt/" in xfs
    cp = scripts["zfs-vm-zvol-copy-cp-32M-ext4-noluks"]
    assert "and run the copy below there." in cp and "random data" not in cp
    assert "#   /usr/bin/cp -- /mnt/tbsrc/copy-source.bin /mnt/" in cp and "drop_caches" in cp
    assert "echo 'run the copy inside the test guest (see above)'" in cp and "\nexec " not in cp
    assert f"zfs create -V {512 << 20} " in cp


def _readback(**kw: object) -> BlockSettings:
    """qemu's answer for a disk as block_settings builds it (values as QMP gives them), overridable."""
    base: dict[str, object] = dict(
        node="tbx",
        device="dev-tbx",
        driver="qcow2",
        file="/tankbench/x.qcow2",
        cache_mode="none",
        cache={"writeback": True, "direct": True, "no-flush": False},
        cluster_size=8192,
        write_cache="on",
        iothread=None,
        werror="auto",
        model="scsi-hd",
    )
    base.update(kw)
    return BlockSettings(**base)  # type: ignore[arg-type]


def test_qemus_readback_is_compared_with_every_setting_it_reports() -> None:
    quick = _tests("quick")
    q8 = next(t for t in quick if t.params.get("qcow2_cluster") == "8k")
    assert settings_mismatches(q8, _readback()) == []
    q64 = next(t for t in quick if t.params.get("qcow2_cluster") == "64k")
    assert settings_mismatches(q64, _readback()) == ["qcow2_cluster 65536: the image has 8192"]
    zvol = next(t for t in quick if t.params.get("backing") == "zvol")
    assert settings_mismatches(zvol, _readback(driver="raw", cluster_size=None)) == []
    assert settings_mismatches(zvol, _readback(driver="qcow2", cluster_size=None)) == ["format raw: qemu opened qcow2"]
    # the full form's default bus: virtio-blk, on q35 (-pci) or microvm (-device); a SCSI disk is wrong
    full = next(t for t in _tests() if t.params.get("qcow2_cluster") == "8k")
    assert settings_mismatches(full, _readback(model="virtio-blk-pci")) == []
    assert settings_mismatches(full, _readback(model="virtio-blk-device")) == []
    assert settings_mismatches(full, _readback()) == ["bus virtio-blk: qemu's device is scsi-hd"]
    wanted = dict(full.params, disk_cache="writeback", iothread=True, werror="report")
    t = model.Test(
        number=1, name="w", target=full.target, params=wanted, fio_options=full.fio_options, runtime=1, ramp=0
    )
    assert settings_mismatches(t, _readback(model="virtio-blk-pci")) == [
        "disk_cache writeback: qemu's cache mode is none",
        "iothread true: qemu's is none",
        "werror report: qemu's is auto",
    ]
    ok = _readback(model="virtio-blk-pci", cache_mode="writeback", iothread="io-tbx", werror="report")
    assert settings_mismatches(t, ok) == []


def test_iothread_is_a_virtio_blk_axis_and_does_not_duplicate_scsi_tests(tmp_path: Path) -> None:
    text = LAYERED.replace('bus = ["virtio-scsi"]', 'bus = ["virtio-blk", "virtio-scsi"]\niothread = [false, true]')
    text = text.replace('guest_luks = [false, true]\nguest_fs = ["none", "ext4", "xfs"]\n', "")
    text = text.replace('workload = ["fio", "cp", "rsync", "dd"]\n', "")
    tests = _layered(tmp_path, text)
    by_bus: dict[str, list[model.Test]] = {}
    for t in tests:
        by_bus.setdefault(str(t.params["bus"]), []).append(t)
    # 2 backings; virtio-blk also x 2 iothread settings, virtio-scsi without the axis (and no duplicates)
    assert {k: len(v) for k, v in by_bus.items()} == {"virtio-blk": 4, "virtio-scsi": 2}
    assert all("iothread" not in t.params for t in by_bus["virtio-scsi"])
    assert {disk_settings(t)["iothread"] for t in by_bus["virtio-blk"]} == {False, True}
    assert len({t.id for t in tests}) == len(tests)
