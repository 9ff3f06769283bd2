"""vm-disk targets at plan time: backing-specific axes, names, exported scripts, the sync-honouring check."""

from __future__ import annotations

from pathlib import Path

from tankbench import model
from tankbench.spec import expand, load_spec
from tankbench.targets import kinds
from tankbench.targets.vmdisk import VmDiskKind, disk_settings, image_create_argv
from tests.conftest import ROOT

PRESET = ROOT / "src" / "tankbench" / "presets" / "zvol-vs-qcow2.toml"


def _tests(scale: str = "") -> list[model.Test]:
    return expand(load_spec(str(PRESET), scale))


def test_registry_has_vm_disk() -> None:
    assert kinds()["vm-disk"] is VmDiskKind


def test_qcow2_only_axes_do_not_multiply_other_backings() -> None:
    guest = [t for t in _tests() if t.target.kind == "vm-disk"]
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
        str(20 << 30),
    ]
    z = next(t for t in _tests() if t.params.get("backing") == "zvol")
    assert VmDiskKind.backing_path(z).startswith("/dev/zvol/tbvm/tb-")


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
