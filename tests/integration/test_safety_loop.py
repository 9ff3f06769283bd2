"""Safety with real loop devices: tankbench refuses mounted, held or signed devices, and needs confirmation."""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.conftest import sh, tankbench

CAMPAIGN = """
[campaign]
name = "safety"
runtime = "1s"
host = "local"

[[target]]
name = "disk"
kind = "raw"
path = "{path}"
{confirm}
size = "8M"

[matrix]
rw = ["write"]
bs = ["4k"]
"""


@pytest.fixture
def by_id(loopdev: str) -> Iterator[str]:
    """A stable-id name for the loop device (loop devices get none from udev; this is a real symlink)."""
    os.makedirs("/dev/disk/by-id", exist_ok=True)
    link = f"/dev/disk/by-id/tankbench-test-{os.path.basename(loopdev)}-{os.getpid()}"
    os.symlink(loopdev, link)
    try:
        yield link
    finally:
        os.unlink(link)


def run_on(tmp_path: Path, path: str, confirm: str | None) -> subprocess.CompletedProcess[str]:
    c = tmp_path / "c.toml"
    c.write_text(CAMPAIGN.format(path=path, confirm=f'confirm = "{confirm}"' if confirm else ""))
    return tankbench("run", str(c), "--journal", str(tmp_path / "j.sqlite"), cwd=tmp_path, timeout=180)


def first_bytes(dev: str) -> bytes:
    with open(dev, "rb") as f:
        return f.read(4096)


def test_blank_device_needs_confirmation(tmp_path: Path, loopdev: str):
    res = run_on(tmp_path, loopdev, None)
    assert res.returncode == 2 and "writing to a raw device needs confirmation" in res.stderr
    assert f'confirm = "{loopdev}"' in res.stderr
    assert not (tmp_path / "j.sqlite").exists()
    assert first_bytes(loopdev) == bytes(4096), "nothing was written"
    ok = run_on(tmp_path, loopdev, loopdev)
    assert ok.returncode == 0, ok.stderr
    assert first_bytes(loopdev) != bytes(4096), "the confirmed device was benchmarked (fio wrote to it)"
    conn = sqlite3.connect(tmp_path / "j.sqlite")
    checks = json.loads(conn.execute("SELECT checks FROM runs").fetchone()[0])
    conn.close()
    assert checks["layout.laid_out_now"] is True and checks["layout.verified"] is True
    assert checks["layout.sample_compress_ratio"] > 0.95, "the region was filled with incompressible data"


def test_ext4_device_refused_unless_named_by_id_and_confirmed(tmp_path: Path, loopdev: str, by_id: str):
    sh("mkfs.ext4", "-q", loopdev)
    before = first_bytes(loopdev)
    res = run_on(tmp_path, loopdev, loopdev)
    assert res.returncode == 2 and "carries data (TYPE=ext4)" in res.stderr and "/dev/disk/by-id/" in res.stderr
    res = run_on(tmp_path, by_id, None)
    assert res.returncode == 2 and "is not confirmed" in res.stderr
    res = run_on(tmp_path, by_id, by_id + "-other")
    assert res.returncode == 2 and "is not confirmed" in res.stderr
    assert first_bytes(loopdev) == before
    assert 'TYPE="ext4"' in subprocess.run(["blkid", loopdev], capture_output=True, text=True).stdout
    ok = run_on(tmp_path, by_id, by_id)
    assert ok.returncode == 0, ok.stderr


def test_mounted_device_always_refused(tmp_path: Path, loopdev: str, by_id: str):
    sh("mkfs.ext4", "-q", loopdev)
    mnt = tmp_path / "mnt"
    mnt.mkdir()
    sh("mount", loopdev, str(mnt))
    (mnt / "precious.txt").write_text("keep me")
    res = run_on(tmp_path, by_id, by_id)
    assert res.returncode == 2 and "in use (mounted at" in res.stderr and str(mnt) in res.stderr
    assert (mnt / "precious.txt").read_text() == "keep me"


def test_partition_table_refused(tmp_path: Path, loopdev: str):
    subprocess.run(["sfdisk", "-q", loopdev], input="label: gpt\n,32M\n", text=True, check=True, capture_output=True)
    res = run_on(tmp_path, loopdev, loopdev)
    assert res.returncode == 2 and "PTTYPE=gpt" in res.stderr


def test_regular_file_under_dev_is_not_a_block_device(tmp_path: Path):
    res = run_on(tmp_path, "/dev/null", "/dev/null")
    assert res.returncode == 2 and "not a block device" in res.stderr


FILE_CAMPAIGN = """
[campaign]
name = "safety-file"
runtime = "1s"
host = "local"

[[target]]
name = "scratch"
kind = "file"
path = "{path}"
size = "8M"

[matrix]
rw = ["write"]
bs = ["4k"]
"""


def test_file_target_never_writes_through_a_symlinked_test_file(tmp_path: Path, loopdev: str):
    """A directory whose `tankbench-<target>.fiodata` is a symlink to a disk (left by someone, or planted in a
    shared directory): the layout and fio would write through it. Refused before anything is written."""
    sh("mkfs.ext4", "-q", loopdev)
    before = first_bytes(loopdev)
    d = tmp_path / "dir"
    d.mkdir()
    (d / "tankbench-scratch.fiodata").symlink_to(loopdev)
    c = tmp_path / "c.toml"
    c.write_text(FILE_CAMPAIGN.format(path=d))
    res = tankbench("run", str(c), "--journal", str(tmp_path / "j.sqlite"), cwd=tmp_path, timeout=180)
    assert res.returncode == 2 and "Traceback" not in res.stderr, res.stderr
    assert f"path = '{d}': tankbench-scratch.fiodata there is a symlink or not a regular file" in res.stderr
    assert "Hint: tankbench would write through it" in res.stderr
    assert first_bytes(loopdev) == before and 'TYPE="ext4"' in sh("blkid", loopdev)
    assert not (tmp_path / "j.sqlite").exists()


@pytest.fixture
def small_fs(tmp_path: Path) -> Iterator[Path]:
    """A real 16 MiB tmpfs (unmounted afterwards): a filesystem a test file can fill."""
    mnt = tmp_path / "small"
    mnt.mkdir()
    sh("mount", "-t", "tmpfs", "-o", "size=16m", "tankbench-test", str(mnt))
    try:
        yield mnt
    finally:
        subprocess.run(["umount", str(mnt)], check=True)


def test_file_target_larger_than_its_filesystem_is_refused_before_writing(tmp_path: Path, small_fs: Path):
    """size = "1P" (or any size beyond the free space) used to lay out until the filesystem was full."""
    c = tmp_path / "c.toml"
    c.write_text(FILE_CAMPAIGN.format(path=small_fs).replace('size = "8M"', 'size = "32M"'))
    res = tankbench("run", str(c), "--journal", str(tmp_path / "j.sqlite"), cwd=tmp_path, timeout=180)
    assert res.returncode == 2 and "Traceback" not in res.stderr, res.stderr
    assert f"path = '{small_fs}': size 32M does not fit: " in res.stderr and "free there on local" in res.stderr
    assert "Hint: lower the target's size" in res.stderr
    assert os.listdir(small_fs) == [] and not (tmp_path / "j.sqlite").exists()


def test_agent_never_fills_a_filesystem(small_fs: Path):
    """The agent's own guard (a filesystem that filled up after the probe): no byte written, a clear error."""
    from tankbench import agent

    path = small_fs / "tankbench-scratch.fiodata"
    with pytest.raises(ValueError, match="bytes to lay out, but only .* are free there"):
        agent.op_prepare_file({"op": "prepare_file", "paths": [str(path)], "size": 32 << 20, "layout": "random"})
    assert not path.exists()
    agent.op_prepare_file({"op": "prepare_file", "paths": [str(path)], "size": 4 << 20, "layout": "random"})
    assert path.stat().st_size == 4 << 20


@pytest.mark.parametrize("numjobs", [1, 2])
def test_a_colon_in_the_directory_is_not_two_files_to_fio(tmp_path: Path, numjobs: int):
    """fio splits filename= and directory= at ':'; unescaped, `…/co:lon` made fio open `…/co` (someone's file)."""
    (tmp_path / "co").write_text("precious")
    d = tmp_path / "co:lon"
    c = tmp_path / "c.toml"
    c.write_text(FILE_CAMPAIGN.format(path=d).replace('bs = ["4k"]', f'bs = ["4k"]\nnumjobs = [{numjobs}]'))
    res = tankbench("run", str(c), "--journal", str(tmp_path / "j.sqlite"), cwd=tmp_path, timeout=180)
    assert res.returncode == 0, res.stderr
    assert (tmp_path / "co").read_text() == "precious"
    with sqlite3.connect(tmp_path / "j.sqlite") as db:
        (status,) = db.execute("SELECT status FROM runs").fetchone()
    assert status == "done" and sorted(p.name for p in d.iterdir())


def test_disk_of_an_imported_pool_is_refused_even_when_confirmed(tmp_path: Path, loopdev: str, by_id: str):
    """An imported pool's disk has a zfs_member signature, but no mount and no holder: confirming the id used to be
    enough to write over a live pool. This host has no ZFS module, so `zpool` is a fake (FakeZpool, a shell script
    first on PATH) printing `zpool list -v -H -P` for a pool on this loop device; the device itself is real."""
    fake = tmp_path / "fakebin"
    fake.mkdir()
    script = fake / "zpool"
    script.write_text(
        "#!/bin/sh\n# FakeZpool: zpool list -v -H -P of one imported pool whose mirror holds the test's loop device\n"
        'if [ "$3" = "-o" ]; then echo tank; exit 0; fi\n'
        f"printf 'tank\\t60M\\t1M\\t59M\\t-\\t-\\t0%%\\t1%%\\t1.00x\\tONLINE\\t-\\n'\n"
        f"printf '\\tmirror-0\\t60M\\t1M\\t59M\\t-\\t-\\t0%%\\t1%%\\t-\\tONLINE\\n'\n"
        f"printf '\\t{by_id}\\t-\\t-\\t-\\t-\\t-\\t-\\t-\\t-\\tONLINE\\n'\n"
    )
    script.chmod(0o755)
    sh("mkfs.ext4", "-q", loopdev)  # any signature: the confirmation below would accept it without the pool check
    before = first_bytes(loopdev)
    c = tmp_path / "c.toml"
    c.write_text(CAMPAIGN.format(path=by_id, confirm=f'confirm = "{by_id}"'))
    env = {"PATH": f"{fake}:{os.environ['PATH']}"}
    res = tankbench("run", str(c), "--journal", str(tmp_path / "j.sqlite"), cwd=tmp_path, timeout=180, env=env)
    assert res.returncode == 2 and "Traceback" not in res.stderr, res.stderr
    assert "the device is in use by the imported ZFS pool 'tank'" in res.stderr
    assert first_bytes(loopdev) == before and not (tmp_path / "j.sqlite").exists()


def test_an_exported_script_lays_out_a_compressible_file_under_a_colon(tmp_path: Path):
    """`plan --export`'s script for a compressible layout ran `fio --filename="$f"`: fio split `…/co:lon/…` at the
    colon and wrote `…/co` (someone's file). Run with plain fio as a user would; the file lands where it belongs."""
    (tmp_path / "co").write_text("precious")
    d = tmp_path / "co:lon"
    c = tmp_path / "c.toml"
    c.write_text(FILE_CAMPAIGN.format(path=d).replace('bs = ["4k"]', 'bs = ["4k"]\nlayout = ["compressible:50%"]'))
    res = tankbench("plan", str(c), "--export", str(tmp_path / "x"), cwd=tmp_path)
    assert res.returncode == 0, res.stderr
    script = tmp_path / "x" / "0001-job.sh"
    assert "--filename=" + "'" + str(d).replace(":", "\\:") in script.read_text()
    run = subprocess.run(["sh", str(script)], capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stderr
    assert (tmp_path / "co").read_text() == "precious"
    data = d / "tankbench-scratch.fiodata"
    assert data.stat().st_size == 8 << 20 and json.loads(run.stdout[run.stdout.index("{") :])["jobs"]


def test_two_raw_targets_on_one_device_by_two_names_are_refused(tmp_path: Path, loopdev: str, by_id: str):
    """plan compares paths as written: `/dev/loopN` and its by-id link pass it. The run's probe resolves both to
    one kernel device and refuses before anything is written (each run would overwrite the other's layout). The
    device is blank, so the names alone are confirmed (a device with data needs its by-id name)."""
    before = first_bytes(loopdev)
    second = f'[[target]]\nname = "twin"\nkind = "raw"\npath = "{by_id}"\nconfirm = "{by_id}"\nsize = "8M"\n\n[matrix]'
    c = tmp_path / "c.toml"
    c.write_text(CAMPAIGN.format(path=loopdev, confirm=f'confirm = "{loopdev}"').replace("[matrix]", second, 1))
    assert tankbench("plan", str(c), cwd=tmp_path).returncode == 0  # paths as written differ
    res = tankbench("run", str(c), "--journal", str(tmp_path / "j.sqlite"), cwd=tmp_path, timeout=180)
    assert res.returncode == 2 and "Traceback" not in res.stderr, res.stderr
    name = os.path.basename(os.path.realpath(loopdev))
    assert f"is the same device as target 'twin' ({by_id}; both are {name} on local)" in res.stderr, res.stderr
    assert "Hint: give each raw target its own disk" in res.stderr
    assert first_bytes(loopdev) == before and not (tmp_path / "j.sqlite").exists()
