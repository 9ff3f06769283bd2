"""Real OpenZFS in the lab VM: pools on the virtio disks, datasets, zvols, fio JSON back to the host."""

from __future__ import annotations

import json
import os
import shlex
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tankbench.fio.clientserver import FioServers
from tankbench.fio.parse import load_fio_json, metrics_from_fio
from tankbench.hosts.lab import LabHost
from tankbench.hosts.ssh import SshHost
from tankbench.lab import control, vm
from tankbench.lab.qemu import qmp
from tests.lab.shell import sh

from .conftest import LAB, LAB_B

pytestmark = pytest.mark.lab


@pytest.fixture(scope="module")
def pool(lab: SshHost) -> Iterator[str]:
    """A pool 'tank' on the two data disks by id, with the log disk as SLOG."""
    data = vm.lab_data_disks(LAB)
    log = vm.lab_log_disks(LAB)
    assert data == ["/dev/disk/by-id/virtio-tbdata0", "/dev/disk/by-id/virtio-tbdata1"]
    sh(lab, f"zpool create -f -o ashift=12 -O atime=off tank {shlex.join(data)} log {shlex.join(log)}")
    yield "tank"
    # free the disks for the next module's campaigns (tests/lab/test_zfs_campaign.py creates its own pool)
    sh(lab, "zpool destroy tank && wipefs -a -q " + shlex.join(data + log))


def test_lab_host_identity(lab: SshHost) -> None:
    assert lab.name == f"lab:{LAB}"
    assert lab.accelerator in ("tcg", "kvm")
    assert sh(lab, "hostname").strip() == "tankbench-lab"


def test_zfs_version_is_2x(lab: SshHost) -> None:
    out = sh(lab, "zfs version")
    assert out.startswith("zfs-2."), out
    assert "zfs-kmod-2." in out


def test_zpool_on_virtio_disks_by_id(lab: SshHost, pool: str) -> None:
    status = sh(lab, f"zpool status -P {pool}")
    assert "/dev/disk/by-id/virtio-tbdata0" in status and "virtio-tbdata1" in status
    assert "logs" in status and "virtio-tblog0" in status
    assert sh(lab, f"zpool list -H -o health {pool}").strip() == "ONLINE"


def test_dataset_properties_read_back(lab: SshHost, pool: str) -> None:
    sh(lab, f"zfs create -o recordsize=1M -o compression=lz4 -o sync=disabled -o tankbench:owner=pytest {pool}/fs")
    out = sh(lab, f"zfs get -H -p -o property,value recordsize,compression,sync,tankbench:owner {pool}/fs")
    props = dict(line.split("\t") for line in out.strip().splitlines())
    assert props == {"recordsize": "1048576", "compression": "lz4", "sync": "disabled", "tankbench:owner": "pytest"}


def test_zvol_appears_under_dev_zvol(lab: SshHost, pool: str) -> None:
    sh(lab, f"zfs create -V 256M -o volblocksize=16k {pool}/vol && udevadm settle -t 60")
    deadline = time.monotonic() + 60
    while lab.run(["test", "-b", f"/dev/zvol/{pool}/vol"]).returncode != 0:
        assert time.monotonic() < deadline, sh(lab, "ls -lR /dev/zvol /dev/zd* 2>&1 || true")
        time.sleep(1)
    assert sh(lab, f"zfs get -H -p -o value volblocksize {pool}/vol").strip() == "16384"


def test_fio_json_back_to_the_host(lab: SshHost, pool: str) -> None:
    sh(lab, f"zfs list {pool}/fs >/dev/null 2>&1 || zfs create {pool}/fs")
    out = sh(
        lab,
        f"fio --name=labtest --filename=/{pool}/fs/f --rw=randwrite --bs=16k --size=32M --ioengine=libaio "
        "--iodepth=4 --runtime=3 --time_based --output-format=json",
    )
    doc = load_fio_json(out)
    metrics = metrics_from_fio(doc)
    assert metrics["write.iops"] > 0 and metrics["write.io_bytes"] > 0
    assert metrics["fio.error"] == 0


def _door_job(directory: str, marker: str) -> str:
    """A job that, if any fio server ran it, would leave `marker` in the lab (fio runs exec_prerun as its user)."""
    job = os.path.join(directory, "door.fio")
    with open(job, "w") as f:
        f.write(f"[door]\nexec_prerun=touch {marker}\nfilename=/tmp/door.data\nrw=write\nbs=4k\nsize=4k\n")
    os.chmod(job, 0o644)
    return job


def _listening_ports(pids: set[int]) -> list[int]:
    """TCP ports on this machine that the given processes listen on (`ss -ltnpH`)."""
    out = subprocess.run(["ss", "-ltnpH"], capture_output=True, text=True, check=True).stdout
    ports = []
    for line in out.splitlines():
        if any(f"pid={p}," in line for p in pids):
            ports.append(int(line.split()[3].rsplit(":", 1)[1]))
    return ports


def _ours(top: int) -> set[int]:
    """`top` and every process under it (this test's ssh connections and forwards)."""
    parent = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            parent[int(stat.parent.name)] = int(stat.read_text().rsplit(")", 1)[1].split()[1])
        except (OSError, IndexError):
            continue
    out, grew = {top}, True
    while grew:
        grew = False
        for pid, ppid in parent.items():
            if ppid in out and pid not in out:
                out.add(pid)
                grew = True
    return out


def test_fio_server_in_the_lab_only_through_ssh_and_no_port_runs_a_job(lab: SshHost, pool: str) -> None:
    """Issue 34 item 3: the lab runs no fio server of its own; one a campaign needs (the lab as a client) is reached
    only through the ssh connection. An unprivileged local user (nobody) reaches no port of the lab's qemu or of our
    ssh connections that runs a job, and cannot open the forwarded sockets."""
    assert sh(lab, "pgrep -x fio || true").strip() == "", "no fio server runs in a lab that no campaign asked for"
    marker = f"/tmp/tankbench-door-{os.getpid()}"
    public = tempfile.mkdtemp(prefix="tankbench-door-")
    os.chmod(public, 0o755)
    job = _door_job(public, marker)
    try:
        with FioServers([lab]) as servers:
            per, _total, _text = servers.run(
                f"[c]\nfilename=/{pool}/fs/client\nrw=write\nbs=64k\nsize=16M\nioengine=libaio\n", timeout=300
            )
            assert per[0].host == lab.name and per[0].write_bw_bytes > 0
            assert sh(lab, "ss -ltnpH | grep fio || true").strip() == "", "the lab's fio server has no TCP port"
            qemu = vm.require_up(LAB).pid
            ports = _listening_ports(_ours(os.getpid()) | {qemu})
            assert ports == [vm.status(LAB)["ssh_port"]], ports  # ssh is the only way in
            sockets = list(servers.sockets.values())
            for target in [f"127.0.0.1,{p}" for p in ports] + [f"sock:{s}" for s in sockets]:
                tried = subprocess.run(
                    [
                        "setpriv",
                        "--reuid=nobody",
                        "--regid=nogroup",
                        "--clear-groups",
                        "--reset-env",
                        "timeout",  # sshd answers fio's client with its banner and waits: ended, not refused
                        "20",
                        "fio",
                        f"--client={target}",
                        job,
                    ],
                    capture_output=True,
                    text=True,
                    timeout=120,
                    cwd=public,
                )
                assert tried.returncode != 0, (target, tried.stdout, tried.stderr)
                assert '"client_stats"' not in tried.stdout, "no server ran the job"
        assert sh(lab, f"test -e {marker} && echo RAN || echo no").strip() == "no"
        assert sh(lab, "pgrep -x fio || true").strip() == "", "the server ended with the campaign's use of it"
    finally:
        shutil.rmtree(public, ignore_errors=True)


def test_arcstats_readable(lab: SshHost) -> None:
    text = lab.read_file("/proc/spl/kstat/zfs/arcstats")
    rows = dict(line.split()[0::2] for line in text.splitlines()[2:] if line.strip())
    assert int(rows["size"]) > 0 and "hits" in rows and "c_max" in rows


def test_write_file_and_agent_path(lab: SshHost) -> None:
    lab.write_file("/tmp/tb-test.txt", b"hello 'lab' $HOME\n")
    assert lab.read_file("/tmp/tb-test.txt") == "hello 'lab' $HOME\n"


def test_lab_status_json_and_fingerprint(lab: LabHost) -> None:
    cp = subprocess.run(
        [sys.executable, "-m", "tankbench", "lab", "status", "--name", LAB, "--json"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert cp.returncode == 0, cp.stderr
    doc = json.loads(cp.stdout)
    assert doc["state"] == "up" and doc["accelerator"] == lab.accelerator
    assert doc["ssh_port"] == lab.port and doc["disks"][-1] == "/dev/disk/by-id/virtio-tblog0"
    fp = lab.fingerprint_extra()
    assert fp["accelerator"] == lab.accelerator and str(fp["lab_disk_backing"]).startswith("sparse file on ")
    assert fp["lab_memory_mb"] == 3072 and fp["lab_cpus"] == 2


def test_lab_ssh_cli_returns_remote_exit_status(lab: SshHost) -> None:
    base = [sys.executable, "-m", "tankbench", "lab", "ssh", "--name", LAB, "--"]
    assert subprocess.run([*base, "exit 7"], timeout=60).returncode == 7
    cp = subprocess.run([*base, "echo", "a b", "$HOME"], capture_output=True, text=True, timeout=60)
    assert cp.returncode == 0 and cp.stdout == "a b $HOME\n"


def test_second_lab_does_not_collide_and_down_leaves_no_qemu(lab: SshHost, monkeypatch: pytest.MonkeyPatch) -> None:
    """Two labs side by side (own ports, dirs, disks); `lab down` stops only its own qemu.

    The second lab is first handed the first lab's ssh port (as if another process took a port between
    the check and qemu's bind): qemu refuses it and the boot retries with new ports.
    """
    taken = [lab.port]
    real_free_port = vm.free_port

    def first_port_taken(exclude: tuple[int, ...] | list[int] = ()) -> int:
        return taken.pop() if taken else real_free_port(exclude)

    monkeypatch.setattr(vm, "free_port", first_port_taken)
    messages: list[str] = []
    other = control.lab_host(LAB_B, disks=1, progress=messages.append)
    assert not taken and any("port was taken" in m for m in messages), messages
    try:
        a, b = vm.status(LAB), vm.status(LAB_B)
        assert a["ssh_port"] != b["ssh_port"] and "fio_port" not in a
        assert a["dir"] != b["dir"] and a["pid"] != b["pid"]
        sh(other, "echo b > /tmp/who")
        assert lab.run(["test", "-e", "/tmp/who"]).returncode != 0
        assert sh(other, "ls /dev/disk/by-id/").split() == ["virtio-tbdata0", "virtio-tbroot"]
    finally:
        other.close()
        pid = int(vm.status(LAB_B)["pid"])  # type: ignore[call-overload]
        # a paused lab (a test's pause, qemu's werror=stop on a full host disk) is continued and powers off cleanly
        qmp(Path(str(vm.status(LAB_B)["dir"])), "stop")
        cp = subprocess.run(
            [sys.executable, "-m", "tankbench", "lab", "down", "--name", LAB_B],
            capture_output=True,
            text=True,
            timeout=180,
        )
    assert cp.returncode == 0, cp.stderr
    assert f"lab {LAB_B}: paused (paused); continuing it" in cp.stderr and "did not power off" not in cp.stderr, (
        cp.stderr
    )
    assert not os.path.exists(f"/proc/{pid}") or not vm.is_our_qemu(pid, LAB_B)
    assert vm.status(LAB_B)["state"] == "down"
    assert sh(lab, "hostname").strip() == "tankbench-lab"  # the first lab is untouched


def test_lab_up_is_idempotent_and_refuses_contradicting_options(lab: LabHost) -> None:
    up = [sys.executable, "-m", "tankbench", "lab", "up", "--name", LAB]
    cp = subprocess.run(up, capture_output=True, text=True, timeout=120)
    assert cp.returncode == 0, cp.stderr
    assert "already up" in cp.stderr and f"-p {lab.port}" in cp.stdout
    cp = subprocess.run([*up, "--disks", "5"], capture_output=True, text=True, timeout=120)
    assert cp.returncode == 2 and "already up with disks 2" in cp.stderr, cp.stderr
    assert vm.status(LAB)["state"] == "up"


def _tiny_lab_campaign(tmp_path: Path, lab_name: str, *, pool: bool = False) -> Path:
    """A one-test campaign on the lab `lab_name`: a file target, or with `pool` a dataset on a pool on the lab's
    first disk (never created here: only `clean` reads it)."""
    suffix = "-pool" if pool else ""
    path = tmp_path / f"{lab_name}{suffix}.toml"
    storage = (
        """[pool]
name = "tblifecycle"
vdevs = ["/dev/disk/by-id/virtio-tbdata0"]
confirm = ["/dev/disk/by-id/virtio-tbdata0"]
[[target]]
name = "ds"
kind = "dataset"
size = "8M"
"""
        if pool
        else """[[target]]
name = "scratch"
kind = "file"
path = "/var/tmp/tb-lifecycle"
size = "8M"
"""
    )
    path.write_text(f"""
[campaign]
name = "lifecycle{suffix}"
runtime = "1s"
warmup = false
repeats = 1
[host]
kind = "lab"
name = "{lab_name}"
{storage}[matrix]
rw = ["randread"]
bs = ["4k"]
""")
    return path


def test_run_and_clean_shut_down_the_lab_they_booted_and_leave_one_that_was_up(lab: LabHost, tmp_path: Path) -> None:
    run = [sys.executable, "-m", "tankbench", "run", "--no-report"]
    cp = subprocess.run(
        [*run, str(_tiny_lab_campaign(tmp_path, LAB)), "--journal", str(tmp_path / "a.sqlite")],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert cp.returncode == 0, cp.stderr
    assert (
        f"lab {LAB} was up before this run and is still up: stop it with `tankbench lab down --name {LAB}`" in cp.stderr
    )
    assert vm.status(LAB)["state"] == "up"
    other = LAB_B.replace("-b", "-c")
    cp = subprocess.run(
        [*run, str(_tiny_lab_campaign(tmp_path, other)), "--journal", str(tmp_path / "b.sqlite")],
        capture_output=True,
        text=True,
        timeout=900,
    )
    try:
        assert cp.returncode == 0, cp.stderr
        assert f"lab {other}: down" in cp.stderr
        assert vm.status(other)["state"] == "down"
        # `clean` leaves a lab as it found it too: it boots a lab that is down to look for the campaign's pool,
        # and shuts it down again (after the quick start, `clean` left the default lab up, ~3 GB resident)
        for name, was_up in ((other, False), (LAB, True)):
            cp = subprocess.run(
                [sys.executable, "-m", "tankbench", "clean", str(_tiny_lab_campaign(tmp_path, name, pool=True))],
                capture_output=True,
                text=True,
                timeout=900,
            )
            assert cp.returncode == 0 and "nothing to clean" in cp.stdout, cp.stdout + cp.stderr
            assert vm.status(name)["state"] == ("up" if was_up else "down"), (name, cp.stderr)
            assert (f"lab {name} was up before this run and is still up" in cp.stderr) == was_up, cp.stderr
    finally:
        if vm.read_state(other) is not None:
            vm.down(other)
