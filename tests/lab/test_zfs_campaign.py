"""ZFS in the matrix, against real OpenZFS in the lab: properties really set, SLOG really present or
absent, the zvol really the device fio opened, ZFS metrics in every run, and untagged datasets untouched
through run, kill -9, resume and clean."""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

from tankbench.hosts.ssh import SshHost
from tests.conftest import tankbench
from tests.lab.conftest import LAB

HEAD = f"""
[campaign]
name = "{{name}}"
runtime = "2s"
ramp = "0s"
copy_size = "16M"

[host]
kind = "lab"
name = "{LAB}"
disks = 2
slog = true
"""

CREATED_POOL = """
[pool]
name = "tbtest"
vdevs = ["/dev/disk/by-id/virtio-tbdata0"]
log = ["/dev/disk/by-id/virtio-tblog0"]
confirm = ["/dev/disk/by-id/virtio-tbdata0", "/dev/disk/by-id/virtio-tblog0"]
ashift = 12
"""

MATRIX = """
[[target]]
name = "fs"
kind = "dataset"
size = "32M"
props = { compression = "lz4" }

[[target]]
name = "vol"
kind = "zvol"
size = "32M"
props = { volblocksize = "8k" }

[matrix]
slog = [false, true]
recordsize = ["4k", "1M"]
sync = ["always"]
rw = ["randwrite"]
bs = ["4k"]
iodepth = [2]

[[include]]
target = "fs"
workload = "cp"
"""


def runs(journal: Path) -> list[dict]:
    conn = sqlite3.connect(journal)
    conn.row_factory = sqlite3.Row
    try:
        out = []
        for r in conn.execute("SELECT r.*, t.canonical, t.target_kind FROM runs r JOIN tests t ON t.id = r.test_id"):
            d = dict(r)
            for k in ("metrics", "checks", "samples", "canonical"):
                d[k] = json.loads(d[k] or "{}")
            out.append(d)
        return out
    finally:
        conn.close()


def sh(lab: SshHost, script: str) -> str:
    return lab.run(["sh", "-c", script], check=True, timeout=300).stdout


def test_zfs_axes_are_real(lab: SshHost, tmp_path: Path):
    campaign = tmp_path / "zfs.toml"
    campaign.write_text(HEAD.format(name="zfsaxes") + CREATED_POOL + MATRIX)
    try:
        zfs_axes_are_real(lab, tmp_path, campaign)
    finally:  # the pool it created goes whatever failed: the session's later lab tests need its disks
        if "tbtest" in sh(lab, "zpool list -H -o name || true").split():
            tankbench("clean", str(campaign), cwd=tmp_path, timeout=600)


def zfs_axes_are_real(lab: SshHost, tmp_path: Path, campaign: Path) -> None:
    journal = tmp_path / "j.sqlite"
    res = tankbench("run", str(campaign), "--journal", str(journal), cwd=tmp_path, timeout=1800)
    assert res.returncode == 0, res.stdout + res.stderr
    rows = runs(journal)
    # dataset: 2 slog x 2 recordsize; zvol: 2 slog (recordsize does not apply); one cp copy test
    assert len(rows) == 7 and {r["status"] for r in rows} == {"done"}, [r["note"] for r in rows]
    copies = [r for r in rows if r["canonical"]["params"].get("workload") == "cp"]
    assert len(copies) == 1 and copies[0]["metrics"]["copy.bytes"] == 16 << 20
    assert copies[0]["metrics"]["copy.durable_seconds"] >= copies[0]["metrics"]["copy.seconds"]
    assert "arc.hits" in copies[0]["metrics"] and copies[0]["checks"]["zfs.props_match"] is True
    for r in rows:
        if r in copies:
            continue
        params, checks, metrics = r["canonical"]["params"], r["checks"], r["metrics"]
        assert checks["zfs.props_match"] is True, checks
        assert checks["zfs.props"]["sync"] == "always"
        assert checks["zfs.slog_present"] is bool(params["slog"]), "zpool status shows the SLOG exactly when asked"
        assert "arc.hits" in metrics and "zpool.write_ops_per_s" in metrics and "zfs.txgs_synced" in metrics
        assert metrics["zfs.logical_bytes_written"] > 0 and metrics["zfs.physical_bytes_written"] > 0
        assert checks["zfs.version"].startswith("2.") and checks["zfs.ashift"] == 12
        assert checks["layout.verified"] is True, checks
        opened = json.loads(r["fio_json"])["jobs"][0]["job options"]
        if r["target_kind"] == "dataset":
            assert checks["zfs.props"]["recordsize"] == str(4096 if params["recordsize"] == "4k" else 1 << 20)
            assert checks["zfs.props"]["compression"] == "lz4"
        else:
            assert checks["zfs.props"]["volblocksize"] == "8192"
            fio_file = opened.get("filename") or json.loads(r["fio_json"])["global options"]["filename"]
            assert fio_file == f"/dev/zvol/{checks['zfs.dataset']}", "the zvol is the device fio opened"
            real = sh(lab, f"readlink -f {fio_file}").strip()
            assert real.startswith("/dev/zd"), real
        if params["slog"]:
            assert metrics["zpool.log_write_ops_per_s"] > 0, "sync=always writes went to the SLOG"
    fp = json.loads(sqlite3.connect(journal).execute("SELECT data FROM fingerprints").fetchone()[0])
    assert fp["accelerator"] in ("tcg", "kvm") and fp["zfs_version"].startswith("2.")
    assert "zfs_txg_timeout" in fp["zfs_tunables"]
    # the property read back on the live dataset (the last one used stays until clean), not only in the journal
    last = [r for r in rows if r["target_kind"] == "dataset"][-1]
    want = str(4096 if last["canonical"]["params"]["recordsize"] == "4k" else 1 << 20)
    assert sh(lab, f"zfs get -Hp -o value recordsize {last['checks']['zfs.dataset']}").strip() == want
    assert tankbench("clean", str(campaign), cwd=tmp_path, timeout=600).returncode == 0
    assert "tbtest" not in sh(lab, "zpool list -H -o name || true")


def test_untagged_datasets_survive_run_crash_resume_and_clean(lab: SshHost, tmp_path: Path):
    sh(
        lab,
        "zpool list tbkeep >/dev/null 2>&1 || (truncate -s 512M /var/tmp/tbkeep.img && "
        "zpool create tbkeep /var/tmp/tbkeep.img); zfs create -p tbkeep/bench/keep-sibling && "
        "echo precious > /tbkeep/bench/keep-sibling/data",
    )
    campaign = tmp_path / "parent.toml"
    campaign.write_text(
        HEAD.format(name="keepsafe")
        + '\n[pool]\nparent = "tbkeep/bench"\n'
        + """
[[target]]
name = "fs"
kind = "dataset"
size = "16M"

[matrix]
recordsize = ["4k", "16k", "64k", "128k"]
rw = ["randwrite", "randread"]
bs = ["4k"]
"""
    )
    journal = tmp_path / "j.sqlite"
    proc = subprocess.Popen(
        [sys.executable, "-m", "tankbench", "run", str(campaign), "--journal", str(journal)],
        cwd=tmp_path,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    try:
        deadline = time.monotonic() + 900
        while time.monotonic() < deadline:
            if (
                journal.exists()
                and sum(r["status"] == "done" for r in runs(journal)) >= 2
                and any(r["status"] == "running" for r in runs(journal))
            ):
                break
            time.sleep(0.5)
        else:
            raise AssertionError("campaign never got going: " + (proc.stderr.read().decode() if proc.poll() else ""))
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
    # a user's dataset created inside the campaign's root inherits the tag but is not the campaign's
    root = sh(lab, "zfs list -H -o name -r tbkeep/bench | grep '/tb-' | head -1").strip()
    sh(lab, f"zfs create {root}/intruder")
    res = tankbench("run", str(campaign), "--journal", str(journal), cwd=tmp_path, timeout=1800)
    assert res.returncode == 0, res.stdout + res.stderr
    done = [(r["test_id"], r["run_no"]) for r in runs(journal) if r["status"] == "done"]
    assert len(done) == 8 and len(set(done)) == 8
    cleaned = tankbench("clean", str(campaign), cwd=tmp_path, timeout=600)
    assert cleaned.returncode == 0, cleaned.stderr
    assert f"kept {root}/intruder" in cleaned.stdout and f"kept {root} " in cleaned.stdout
    left = sh(lab, "zfs list -H -o name -r tbkeep").split()
    assert "tbkeep/bench/keep-sibling" in left and f"{root}/intruder" in left and "tbkeep/bench" in left
    assert sh(lab, "cat /tbkeep/bench/keep-sibling/data").strip() == "precious"
    assert not [n for n in left if n.startswith(root + "/fs-")], "every tagged dataset was destroyed"
    sh(lab, "zpool destroy tbkeep && rm -f /var/tmp/tbkeep.img")


CLEAN_AFTER_CTRL_C = f"""
[campaign]
name = "clean-after-interrupt"
runtime = "60s"
ramp = "0s"
warmup = false
repeats = 1

[host]
kind = "lab"
name = "{LAB}"
disks = 2
slog = true

[pool]
name = "tbclean"
vdevs = ["/dev/disk/by-id/virtio-tbdata0"]
confirm = ["/dev/disk/by-id/virtio-tbdata0"]
ashift = 12

[[target]]
name = "vol"
kind = "zvol"
size = "256M"

[matrix]
rw = ["write"]
bs = ["1M"]
io = ["buffered"]
layout = ["unwritten"]
"""

#: writes to the pool's disk at 1 MiB/s: the interrupted fio's last close flushes its buffered writes for a while
SLOW_WRITES = {"bps": 0, "bps_rd": 0, "bps_wr": 1 << 20, "iops": 0, "iops_rd": 0, "iops_wr": 0}


def _in_flight(journal: Path) -> bool:
    """Whether a run's fio runs (its pid journalled); False until the journal's tables exist."""
    try:
        return journal.exists() and any(r["status"] == "running" and r["pid"] for r in runs(journal))
    except sqlite3.OperationalError:
        return False


def test_clean_after_ctrl_c_of_a_buffered_zvol_write(lab: SshHost, tmp_path: Path) -> None:
    """Issue 34 item 2: after Ctrl-C during a buffered zvol write, the interrupted fio (its last close flushing the
    page cache to a slow pool) still holds the zvol; `clean` stopped at "dataset is busy" with a hint about ssh.
    Now it ends and waits for tankbench's own fio, by pid, then destroys the zvol and the pool."""
    from tankbench.lab import vm
    from tankbench.lab.qemu import qmp

    campaign = tmp_path / "c.toml"
    campaign.write_text(CLEAN_AFTER_CTRL_C)
    journal = tmp_path / "j.sqlite"
    proc = subprocess.Popen(
        [sys.executable, "-m", "tankbench", "run", str(campaign), "--journal", str(journal), "--no-report"],
        cwd=tmp_path,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    throttled = False
    try:
        deadline = time.monotonic() + 900
        while not _in_flight(journal):
            assert proc.poll() is None and time.monotonic() < deadline, proc.stdout.read() if proc.stdout else ""
            time.sleep(0.5)
        time.sleep(8)  # fio fills the page cache with the zvol's writes
        qmp(vm.labs_dir() / LAB, "block_set_io_throttle", {"device": "tbdata0", **SLOW_WRITES})
        throttled = True
        os.killpg(proc.pid, signal.SIGINT)  # a terminal's Ctrl-C: the whole foreground group
        out = proc.communicate(timeout=300)[0].decode(errors="replace")
        assert proc.returncode == 130, out
        held = sh(lab, "pgrep -x fio || true").split()
        cleaned = tankbench("clean", str(campaign), cwd=tmp_path, timeout=900)
        assert cleaned.returncode == 0, cleaned.stdout + cleaned.stderr
        assert "destroyed tbclean/" in cleaned.stdout and "destroyed pool tbclean" in cleaned.stdout, cleaned.stdout
        # whether clean still meets the interrupted fio is a race it cannot lose but a test cannot fix: the run's
        # own Ctrl-C handling already sent fio SIGTERM then SIGKILL, and a fio in D state (its write into the
        # throttled pool) dies when that write returns — seen between pgrep listing it, even stopped, and clean
        # looking 2 s later. Clean ending our fio by pid is tested with a scripted agent in
        # tests/unit/test_release_udev.py; here, the end: the zvol and pool destroyed, no fio left.
        if "still held by tankbench's own fio from an interrupted run" in cleaned.stderr:
            assert held, cleaned.stderr
        print(f"fio processes left by the interrupted run when clean began: {held}\n{cleaned.stderr}")
        assert sh(lab, "zpool list -H -o name").split().count("tbclean") == 0
        assert sh(lab, "pgrep -x fio || true").strip() == ""
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        if throttled:
            qmp(vm.labs_dir() / LAB, "block_set_io_throttle", {"device": "tbdata0", **dict.fromkeys(SLOW_WRITES, 0)})
        lab.run(["sh", "-c", "zpool destroy tbclean 2>/dev/null; wipefs -a -q /dev/disk/by-id/virtio-tbdata0 || true"])
