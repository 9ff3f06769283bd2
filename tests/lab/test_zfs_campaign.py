"""ZFS in the matrix, against real OpenZFS in the lab: properties really set, SLOG really present or
absent, the zvol really the device fio opened, ZFS metrics in every run, and untagged datasets untouched
through run, kill -9, resume and clean."""

from __future__ import annotations

import json
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
