"""The agent over ssh in the lab (root, real OpenZFS): nothing planted runs, private dirs and key files have
the right owner and mode and really unlock an encrypted dataset, and preflight sees a real scrub and real
disk I/O."""

from __future__ import annotations

import shlex
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from tankbench import preflight as pf
from tankbench import secrets
from tankbench.hosts.base import agent_digest, work_root
from tankbench.hosts.lab import LabHost
from tankbench.lab import vm
from tests.conftest import tankbench
from tests.lab.shell import sh

from .conftest import LAB

pytestmark = pytest.mark.lab
POOL = "trustpool"


@pytest.fixture(scope="module")
def pool(lab: LabHost) -> Iterator[str]:
    """A one-disk pool, compression off (so written data is real I/O), destroyed and wiped afterwards."""
    disk = vm.lab_data_disks(LAB)[0]
    sh(lab, f"zpool create -f -o ashift=12 -O compression=off {POOL} {shlex.quote(disk)}")
    yield POOL
    sh(lab, f"zpool destroy {POOL} && wipefs -a -q {shlex.quote(disk)}")


def test_nothing_planted_runs_in_the_lab(lab: LabHost) -> None:
    """The old agent path and a json.py beside it (what `python3 /var/tmp/<agent>.py` would import)."""
    plant = b"open('/root/planted-ran', 'w').write('planted')\n"
    old = f"/var/tmp/tankbench-agent-{agent_digest()}.py"
    lab.write_file(old, plant)
    lab.write_file("/var/tmp/json.py", plant)
    try:
        res = lab.call_agent({"op": "probe", "paths": ["/"]}, timeout=300)
        assert res["fingerprint"]["zfs_version"].startswith("2.")
    finally:
        sh(lab, f"rm -f {old} /var/tmp/json.py")
    assert lab.run(["test", "-e", "/root/planted-ran"]).returncode != 0


def test_work_root_and_keys_are_root_only_and_the_key_unlocks_a_dataset(lab: LabHost, pool: str) -> None:
    work = work_root(lab)
    assert work == "/root/.cache/tankbench/work"
    assert sh(lab, f"stat -c '%u %a' {work}").split() == ["0", "700"]
    key = secrets.ensure_key(lab, f"{pool}/bench")
    try:
        assert key == f"/root/.cache/tankbench/keys/{pool}_bench.key"
        assert sh(lab, f"stat -c '%u %a %s' {key}").split() == ["0", "600", "32"]
        assert sh(lab, "stat -c '%u %a' /root/.cache/tankbench/keys").split() == ["0", "700"]
        sh(lab, f"zfs create -o encryption=on -o keyformat=raw -o keylocation=file://{key} {pool}/enc")
        sh(lab, f"zfs unmount {pool}/enc && zfs unload-key {pool}/enc && zfs load-key {pool}/enc")
        assert sh(lab, f"zfs get -H -o value keystatus {pool}/enc").strip() == "available"
        sh(lab, f"zfs destroy {pool}/enc")
    finally:
        assert secrets.remove_key(lab, f"{pool}/bench") is True
    assert lab.run(["test", "-e", key]).returncode != 0


def _disks(lab: LabHost) -> list[str]:
    disk = vm.lab_data_disks(LAB)[0]
    probe = lab.call_agent({"op": "probe", "paths": [disk]}, timeout=300)
    names: list[str] = probe["paths"][disk]["devices"]
    assert names and names[0].startswith("vd")
    return names


def test_preflight_refuses_during_a_real_scrub(lab: LabHost, pool: str) -> None:
    disks = _disks(lab)
    sh(lab, f"head -c 32M /dev/urandom > /{pool}/data && zpool sync {pool}", timeout=600)
    # OpenZFS's own test knob: the scrub stays "in progress" without progressing, so it cannot finish
    # between `zpool scrub` and our look (it did in TCG with 96 MiB and a throttled scan)
    hold = "/sys/module/zfs/parameters/zfs_scan_suspend_progress"
    sh(lab, f"echo 1 > {hold} && zpool scrub {pool}")
    try:
        v = pf.before_run(lab, pool, disks, pf.PreflightPolicy(scrub="refuse", load="off", swap="off", disk_io="off"))
        assert v.action == "refuse" and v.facts.scan == "scrub" and v.facts.pool_state == "ONLINE"
        message, hint = v.refusal()
        assert f"a scrub is running on pool {pool}" in message and f"zpool scrub -p {pool}" in hint
    finally:
        lab.run(["zpool", "scrub", "-s", pool], timeout=120)
        sh(lab, f"echo 0 > {hold}")
    v = pf.before_run(lab, pool, disks, pf.PreflightPolicy(load="off", swap="off", disk_io="off"))
    assert v.action == "run" and v.facts.scan is None and v.waited_s < 30


def test_preflight_sees_other_io_on_the_pools_disk(lab: LabHost, pool: str) -> None:
    disks = _disks(lab)
    # fio bounds itself (25 s): nothing to kill afterwards, we only wait for the process we started
    noise = (
        f"fio --name=noise --filename=/{pool}/noise --rw=write --bs=1M --size=256M --direct=1 --time_based "
        f"--runtime=25 --ioengine=psync --output=/dev/null; rm -f /{pool}/noise"
    )
    writer = subprocess.Popen(lab.command(["sh", "-c", noise]), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        found = None
        for _ in range(10):  # the first seconds of the writer may still be in memory (txg not synced yet)
            v = pf.before_run(lab, pool, disks, pf.PreflightPolicy(load="off", swap="off", window_s=2.0))
            if v.facts.disk_iops > 10:
                found = v
                break
        assert found is not None, "no I/O seen on the pool's disk while dd wrote to it"
        assert found.action == "run" and found.warnings and "other I/O on " + disks[0] in found.warnings[0]
        assert found.checks()["preflight.noise"] == ["disk_io"]
    finally:
        assert writer.wait(timeout=300) == 0


ENCRYPTED = """
[host]
kind = "lab"
name = "{lab}"
slog = true

[campaign]
name = "trust-enc"
runtime = "1s"
ramp = "0s"

[pool]
name = "tbtrustenc"
vdevs = ["{disk}"]
confirm = ["{disk}"]
ashift = 12

[[target]]
name = "fs"
kind = "dataset"
size = "8M"
props = {{ encryption = "aes-256-gcm" }}

[matrix]
rw = ["randwrite"]
bs = ["64k"]
"""


def test_an_encrypted_campaign_keeps_its_key_private_and_clean_removes_it(lab: LabHost, tmp_path: Path) -> None:
    disk = vm.lab_data_disks(LAB)[1]
    campaign = tmp_path / "enc.toml"
    campaign.write_text(ENCRYPTED.format(lab=LAB, disk=disk))
    run = tankbench("run", str(campaign), "--journal", str(tmp_path / "j.sqlite"), "--no-report", cwd=tmp_path)
    try:
        assert run.returncode == 0, run.stderr
        locations = sh(lab, "zfs get -H -o value keylocation -r -t filesystem tbtrustenc").split()
        (key,) = [v for v in locations if v.startswith("file://")]
        key = key[len("file://") :]
        assert key.startswith("/root/.cache/tankbench/keys/tbtrustenc_")
        assert sh(lab, f"stat -c '%u %a %s' {key}").split() == ["0", "600", "32"]
    finally:
        clean = tankbench("clean", str(campaign), cwd=tmp_path)
        sh(lab, f"wipefs -a -q {shlex.quote(disk)}")
    assert clean.returncode == 0 and "destroyed key file of tbtrustenc/" in clean.stdout, clean.stdout + clean.stderr
    assert lab.run(["test", "-e", key]).returncode != 0
