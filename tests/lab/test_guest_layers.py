"""Guest layers and in-guest copies in the lab (nested TCG), through the CLI: ext4 on a zvol, xfs on LUKS2 on a
qcow2 image, and cp, rsync and dd copy tests, in one guest boot; the journal must prove that the layers existed
and that fio and the copies wrote through them to the host's backing."""

from __future__ import annotations

import json
import signal
import sqlite3
import subprocess
import sys
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from tankbench.campaign import load_spec
from tankbench.hosts.lab import LabHost
from tankbench.units import parse_size
from tests.conftest import tankbench
from tests.lab.conftest import LAB

CAMPAIGN = """
[campaign]
name = "guest-layers"
runtime = "3s"
ramp = "0s"
repeats = 1
warmup = false
cooldown = "0s"
copy_size = "8M"            # small: copies into ext4 on a zvol crawl under nested emulation

[host]
kind = "lab"
name = "{lab}"
disks = 2
slog = true

[pool]
name = "tbgfs"
vdevs = ["/dev/disk/by-id/virtio-tbdata0", "/dev/disk/by-id/virtio-tbdata1"]
confirm = ["/dev/disk/by-id/virtio-tbdata0", "/dev/disk/by-id/virtio-tbdata1"]

[[target]]
name = "guest"
kind = "vm-disk"
size = "16M"               # what fio works on: laid out in the nested guest at ~0.6 MiB/s (64M took 98-111 s a layout)

[matrix]
backing = ["zvol"]
bus = ["virtio-scsi"]      # hot-plugs on microvm, the fastest nested boot
guest_fs = ["ext4"]
workload = ["fio", "cp", "rsync", "dd"]
rw = ["randwrite"]
bs = ["4k"]
iodepth = [4]

[[include]]                # xfs on LUKS2 on a qcow2 image
backing = "qcow2"
guest_fs = "xfs"
guest_luks = true
"""

Row = Mapping[str, Any]


def journal_rows(journal: Path) -> list[dict[str, Any]]:
    """Every measured run of a journal: the test's name and params, the run's status, checks, metrics, fio JSON."""
    conn = sqlite3.connect(journal)
    rows = conn.execute(
        "SELECT t.name, t.canonical, r.status, r.checks, r.metrics, r.fio_json, r.note FROM runs r "
        "JOIN tests t ON t.id = r.test_id WHERE NOT r.warmup"
    ).fetchall()
    conn.close()
    return [
        {
            "name": r[0],
            "params": json.loads(r[1])["params"],
            "target_size": json.loads(r[1])["target"]["size"],
            "status": r[2],
            "checks": json.loads(r[3]),
            "metrics": json.loads(r[4]),
            "fio": json.loads(r[5]) if r[5] else None,
            "note": r[6],
        }
        for r in rows
    ]


def assert_guest_layers(rows: Sequence[Row]) -> int:
    """For every vm-disk run with guest_fs/guest_luks: the layers existed as asked (blkid, /proc/mounts,
    cryptsetup status read back in the guest), the AES-NI flag and the cipher's implementation were recorded,
    and fio or the copy wrote through the layers into the host's backing (its allocation; a marker written in
    the guest found there in plaintext without LUKS, and not with it). Returns how many runs it checked."""
    checked = 0
    for r in rows:
        p, c = r["params"], r["checks"]
        fs, luks = p.get("guest_fs", "none"), bool(p.get("guest_luks", False))
        if fs == "none" and not luks:
            continue
        where = (r["name"], r["note"])
        if r["status"] == "crashed":  # the test guest that was killed (or panicked under emulation): retried
            assert r["checks"].get("crash.layer") == "guest", where
            continue
        checked += 1
        assert r["status"] == "done", where
        assert c["layers.verified"] is True, (where, c.get("layers.problems"))
        assert c["valid"] is True, (where, c.get("validity.reasons"))
        disk, did = c["layers.guest_device"], c["guest.device"]
        assert disk == did, where
        blkid = c["layers.blkid"]
        if luks:
            assert blkid[disk]["TYPE"] == "crypto_LUKS", (where, blkid)
            assert c["layers.luks.cipher"] == "aes-xts-plain64" and c["layers.luks.key_bits"] == 512, where
            assert c["layers.luks.status"]["type"] == "LUKS2", where
            driver = c["layers.luks.crypto_driver"]
            # the guest's CPU flag and the kernel's choice agree: AES-NI present <=> an aesni implementation
            assert isinstance(c["guest.cpu_aes"], bool) and c["guest.cpu_aes"] == ("aesni" in driver), (where, driver)
            assert c["layers.luks.device_bytes"] == c["layers.disk_bytes"] - (16 << 20), where
        if fs != "none":
            fs_dev = c["layers.mount"]["device"]
            assert blkid[fs_dev]["TYPE"] == fs and c["layers.mount"]["fstype"] == fs, (where, blkid, c["layers.mount"])
            assert fs_dev == (f"/dev/mapper/{c['layers.path'].split('/')[2]}" if luks else disk), where
            assert c["layers.fs_block_bytes"] == 4096, where  # a real filesystem, not mke2fs's "small" type
        payload = c["layers.payload_bytes"]
        assert c["layers.disk_bytes"] > payload == r["target_size"], where  # fio's size; the disk has the overhead
        if p.get("workload", "fio") == "fio":
            assert r["fio"]["global options"]["filename"] == c["layers.path"], where  # fio opened the layer's path
            assert r["metrics"]["write.io_bytes"] > 0, where
            grown = c["layout.allocated_bytes"] - c["layers.allocated_before_layout_bytes"]
            assert c["layout.verified"] and grown >= 0.9 * payload, (where, grown)
            assert c["layers.marker_on_host"] is (not luks) and c["layers.marker_as_expected"] is True, where
        else:
            size = parse_size(str(p["copy_size"]))
            assert r["metrics"]["copy.bytes"] == size and r["metrics"]["copy.durable_bw_bytes"] > 0, where
            tool, dest = c["copy.command"].split()[0], c["layers.path"]
            assert c["copy.where"] == "guest" and tool.rsplit("/", 1)[-1] == p["workload"], where  # GNU cp, rsync, dd
            assert (f"of={dest}" if p["workload"] == "dd" else f" {dest}") in c["copy.command"], where
            assert c["copy.guest_disk_write_bytes"] >= size, where  # through the layers onto the guest's disk
            assert c["copy.guest_source_read_bytes"] >= size, where  # the source was read from its disk
            assert c["copy.backing_allocated_after_bytes"] >= 0.9 * size, where
            # the copy ends with the guest's sync: its flush reached the backing's ZIL on the host
            assert c["sync.job_flushes"] is True and c["sync.honoured"] is True, (where, c.get("sync.note"))
    return checked


def _running_guest_test(journal: Path) -> bool:
    """A run of the guest's fio test is in flight (read-only: `run` is writing the journal)."""
    if not journal.exists():
        return False
    conn = sqlite3.connect(f"file:{journal}?mode=ro", uri=True)
    try:
        return bool(
            conn.execute(
                "SELECT 1 FROM runs r JOIN tests t ON t.id = r.test_id "
                "WHERE r.status = 'running' AND t.name = 'zfs-vm-zvol-randwrite-4k-ext4'"
            ).fetchall()
        )
    except sqlite3.OperationalError:  # the journal's tables are not created yet
        return False
    finally:
        conn.close()


def _run_killing_the_guest_once(campaign: Path, journal: Path, lab: LabHost) -> tuple[int, str]:
    """`run` the campaign; while the guest's first fio test runs, kill -9 the guest's qemu inside the lab (a test
    guest that dies while its host stays up: what a guest kernel panic under nested emulation does). The
    campaign must boot a new guest, retry the test and finish by itself."""
    guest = f"tb-{load_spec(str(campaign)).campaign_id[:8]}"
    log = campaign.parent / "run.log"
    with open(log, "w") as out:
        proc = subprocess.Popen(
            [sys.executable, "-m", "tankbench", "run", str(campaign), "--journal", str(journal)],
            cwd=campaign.parent,
            stdout=out,
            stderr=subprocess.STDOUT,
        )
    try:
        deadline = time.monotonic() + 1800
        while not _running_guest_test(journal):
            assert proc.poll() is None, f"run ended before its guest test ran:\n{log.read_text()[-3000:]}"
            assert time.monotonic() < deadline, f"the guest test never ran:\n{log.read_text()[-3000:]}"
            time.sleep(1)
        ps = lab.run(["sh", "-c", f"ps -eo pid,args | grep '[t]ankbench-guest-{guest} '"], timeout=60).stdout.split()
        assert ps, "the guest's qemu is not running while its test runs"
        lab.run(["kill", f"-{signal.SIGKILL.value}", ps[0]], timeout=60, check=True)
        rc = proc.wait(timeout=3600)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    return rc, log.read_text()


def test_guest_layers_and_copies_in_one_guest(lab: LabHost, tmp_path: Path) -> None:
    campaign = tmp_path / "guest-layers.toml"
    campaign.write_text(CAMPAIGN.format(lab=LAB))
    journal = tmp_path / "j.sqlite"
    t0 = time.monotonic()
    rc, out = _run_killing_the_guest_once(campaign, journal, lab)
    print(f"guest-layers campaign (its guest killed once): {time.monotonic() - t0:.0f} s")
    try:
        assert rc == 0, out[-3000:]
        assert "the test guest crashed during the run of this test" in out and "booting a new guest" in out, out[-3000:]
        rows = journal_rows(journal)
        crashed = [r for r in rows if r["status"] == "crashed"]
        assert crashed and crashed[0]["name"] == "zfs-vm-zvol-randwrite-4k-ext4", [
            (r["name"], r["note"]) for r in crashed
        ]
        assert all(r["checks"]["crash.layer"] == "guest" and r["checks"]["crash.step"] == "run" for r in crashed)
        assert f"the test guest died {len(crashed)} time(s) and was booted again; journal: " in out, out[-1000:]
        assert {r["name"] for r in rows if r["status"] == "done"} == {r["name"] for r in rows}  # each test done
        assert {r["name"] for r in rows} == {
            "zfs-vm-zvol-randwrite-4k-ext4",
            "zfs-vm-zvol-copy-cp-8M-ext4",
            "zfs-vm-zvol-copy-rsync-8M-ext4",
            "zfs-vm-zvol-copy-dd-8M-ext4",
            "zfs-vm-qcow2-randwrite-4k-xfs-luks",
        }
        assert assert_guest_layers(rows) == 5
        done = [r for r in rows if r["status"] == "done"]
        for r in done:
            c = r["checks"]
            print(r["name"], {k: c.get(k) for k in ("layers.seconds", "layers.setup_s", "layout.seconds")})
            assert c["zfs.dataset"].startswith("tbgfs/")  # the host side was captured in the same run
        xfs = next(r for r in done if r["params"].get("guest_luks"))
        assert xfs["checks"]["guest.backing"].endswith(".qcow2") and xfs["checks"]["guest.qemu"]["driver"] == "qcow2"
        image = next(r for r in done if r["params"].get("workload") == "cp")["checks"]["copy.source_image"]
        assert lab.run(["test", "-e", image]).returncode != 0, f"the copy source image {image} was left behind"
    finally:
        tankbench("clean", str(campaign), cwd=tmp_path, timeout=600)
    assert lab.run(["zpool", "list", "tbgfs"]).returncode != 0, "clean destroyed the pool the campaign created"
