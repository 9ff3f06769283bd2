"""vm-disk targets in the lab: the zvol-vs-qcow2 preset's quick form run through tankbench in a test guest
booted inside the lab (nested TCG), with the backing, qemu's settings and the sync check recorded per run."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

from tankbench.hosts.lab import LabHost
from tests.conftest import ROOT, tankbench
from tests.lab.conftest import LAB


def _campaign(tmp_path: Path) -> Path:
    text = (ROOT / "src" / "tankbench" / "presets" / "zvol-vs-qcow2.toml").read_text()
    text = text.replace("[pool]", f'[host]\nkind = "lab"\nname = "{LAB}"\ndisks = 2\nslog = true\n\n[pool]', 1)
    path = tmp_path / "zvol-vs-qcow2.toml"
    path.write_text(text)
    return path


def test_zvol_vs_qcow2_quick_runs_in_a_guest_and_records_both_sides(lab: LabHost, tmp_path: Path) -> None:
    campaign = _campaign(tmp_path)
    journal = tmp_path / "j.sqlite"
    res = tankbench("run", str(campaign), "--scale", "quick", "--journal", str(journal), cwd=tmp_path, timeout=3000)
    (tmp_path / "run.log").write_text(res.stdout + res.stderr)
    try:
        assert res.returncode == 0, res.stdout[-3000:] + res.stderr[-3000:]
        conn = sqlite3.connect(journal)
        rows = conn.execute(
            "SELECT t.name, t.canonical, r.status, r.checks, r.metrics FROM runs r "
            "JOIN tests t ON t.id = r.test_id WHERE NOT r.warmup"
        ).fetchall()
        conn.close()
        assert len(rows) == 5 and all(r[2] == "done" for r in rows), [(r[0], r[2]) for r in rows]
        guest = {r[0]: (json.loads(r[1])["params"], json.loads(r[3]), json.loads(r[4])) for r in rows if "-vm-" in r[0]}
        assert set(guest) == {
            "zfs-vm-zvol-randwrite-4k",
            "zfs-vm-qcow2-64k-randwrite-4k",
            "zfs-vm-qcow2-8k-randwrite-4k",
            "zfs-vm-raw-randwrite-4k",
        }
        for name, (params, checks, metrics) in guest.items():
            qemu = checks["guest.qemu"]
            # qemu's own view of the disk, read back over QMP: the backing and settings the test asked for
            assert qemu["cache_mode"] == "none" and checks["guest.settings_match"], (name, qemu)
            assert qemu["driver"] == ("qcow2" if params["backing"] == "qcow2" else "raw"), (name, qemu)
            if params["backing"] == "qcow2":
                assert qemu["cluster_size"] == (8192 if params["qcow2_cluster"] == "8k" else 65536), (name, qemu)
            assert checks["layout.verified"], (name, checks)
            assert "sync.honoured" in checks and checks["sync.guest_expects_durable"] is True
            assert metrics["write.iops"] > 0 and metrics["guest.qemu_cpu_s"] > 0
            assert checks["zfs.dataset"].startswith("tbvm/")  # the host side was captured in the same run
        assert guest["zfs-vm-zvol-randwrite-4k"][1]["guest.backing"].startswith("/dev/zvol/tbvm/")
        html = (tmp_path / "report" / "index.html").read_text()
        assert "write random 4k, guest vs host: best is" in html  # the guest/host ratio per test case (seed 001)
    finally:
        tankbench("clean", str(campaign), "--scale", "quick", cwd=tmp_path, timeout=600)
    assert lab.run(["zpool", "list", "tbvm"]).returncode != 0, "clean destroyed the pool the campaign created"
