"""The pool-full experiment (workload = "fill", seed 003) in the lab: a test guest booted inside the lab (nested
TCG) writes a zvol, a qcow2 image and a raw image until the real OpenZFS pool is full; the journal says what
each guest saw, whether qemu paused and resumed it, and whether its data reads back intact; the pool is back to
normal afterwards. One guest boot serves all three backings."""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from tankbench.guest.fill import SAW
from tankbench.guest.pauses import WERROR_VALUES
from tankbench.hosts.lab import LabHost
from tests.conftest import tankbench
from tests.lab.conftest import LAB

MIB = 1 << 20
POOL = "tbfill"
CAMPAIGN = f"""
[campaign]
name = "pool-full"
fill_room = "40M"

[host]
kind = "lab"
name = "{LAB}"
disks = 2
slog = true

[pool]
name = "{POOL}"
vdevs = ["/dev/disk/by-id/virtio-tbdata0"]
confirm = ["/dev/disk/by-id/virtio-tbdata0"]

[[target]]
name = "guest"
kind = "vm-disk"
size = "96M"

[matrix]
workload = ["fill"]
backing = ["zvol", "qcow2", "raw"]
bus = ["virtio-scsi"]      # hot-plugs on microvm, the fastest nested boot
rw = ["write"]
bs = ["1M"]
"""

Row = tuple[str, Mapping[str, Any], str, Mapping[str, Any], Mapping[str, float]]


def journal_rows(journal: Path) -> list[Row]:
    """(test name, params, status, checks, metrics) of every measured run."""
    conn = sqlite3.connect(journal)
    try:
        raw = conn.execute(
            "SELECT t.name, t.canonical, r.status, r.checks, r.metrics FROM runs r "
            "JOIN tests t ON t.id = r.test_id WHERE NOT r.warmup ORDER BY r.id"
        ).fetchall()
    finally:
        conn.close()
    return [(n, json.loads(c)["params"], s, json.loads(ch), json.loads(m)) for n, c, s, ch, m in raw]


def assert_fill_runs(rows: Sequence[Row], disk_bytes: int, room: int) -> dict[str, str]:
    """Every fill run recorded what its guest saw consistently: a pause was followed by a resume and an intact
    verify, an I/O error by an intact verify of what came before it; the ballast left `room` and is gone, and
    the pool's available space is back. Returns {backing: what the guest saw} for the caller's own checks."""
    seen: dict[str, str] = {}
    fills = [r for r in rows if r[1].get("workload") == "fill"]
    assert fills, "no fill runs in the journal"
    for name, params, status, c, m in fills:
        assert status == "done", (name, status, c)
        saw = c["fill.guest_saw"]
        assert saw in SAW and c["fill.werror"] in WERROR_VALUES, (name, c)
        assert m["fill.disk_bytes"] == disk_bytes
        asked = m["fill.write_bytes"]  # what the fill job writes: twice the room, at most the disk
        assert asked == min(disk_bytes, 2 * room), (name, m)
        # ZFS's view: the ballast left about the room asked for, and everything it took came back
        assert room <= m["fill.room_bytes"] <= room + 16 * MIB, (name, m)
        assert c["fill.ballast_destroyed"] and c["fill.cleaned"], (name, c)
        assert m["fill.pool_available_after"] >= m["fill.pool_available_before"] - 16 * MIB, (name, m)
        assert 0 < m["fill.bytes_before_stop"] <= m["fill.bytes_written"] <= asked, (name, m)
        assert m["fill.host_io_errors"] >= 1, (name, m)  # the pool was really full: the host refused a write
        assert c["fill.intact"] is True, (name, c)  # what the guest was told was written reads back
        assert m["fill.verified_bytes"] == m["fill.bytes_written"] // MIB * MIB, (name, m)
        if saw == "paused":
            pauses = c["fill.pause_records"]
            assert m["fill.pauses"] == len(pauses) >= 1 and c["fill.resumed"] is True, (name, c)
            assert all(p["resumed"] and p["paused_s"] > 0 and p["command_rc"] == 0 for p in pauses), pauses
            assert m["fill.bytes_written"] == asked, (name, m)  # the guest went on after the resume
            assert m["fill.bytes_before_stop"] < asked
        elif saw == "io-error":
            assert c["fill.fio_errno"] in (5, 28) and c["fill.resumed"] is None, (name, c)
            assert m["fill.bytes_written"] < asked, (name, m)
        seen[str(params.get("backing"))] = saw
    return seen


def test_fill_each_backing_until_the_pool_is_full(lab: LabHost, tmp_path: Path) -> None:
    campaign = tmp_path / "fill.toml"
    campaign.write_text(CAMPAIGN)
    journal = tmp_path / "j.sqlite"
    try:
        res = tankbench("run", str(campaign), "--journal", str(journal), cwd=tmp_path, timeout=2400)
        (tmp_path / "run.log").write_text(res.stdout + res.stderr)
        assert res.returncode == 0, res.stdout[-3000:] + res.stderr[-3000:]
        seen = assert_fill_runs(journal_rows(journal), 96 * MIB, 40 * MIB)
        print(f"\nwhat each guest saw when the pool filled: {seen}")
        assert set(seen) == {"zvol", "qcow2", "raw"}
        listed = lab.run(["zfs", "list", "-H", "-o", "name", "-r", POOL]).stdout.split()
        assert not [n for n in listed if n.endswith("/fill-ballast")], listed  # nothing left filling the pool
        rep = tankbench("report", "--journal", str(journal), "--out", str(tmp_path / "rep"), cwd=tmp_path, timeout=300)
        assert rep.returncode == 0, rep.stderr
        md = (tmp_path / "rep" / "summary.md").read_text()
        assert "## Pool full" in md and md.count("| #") >= 3, md
        assert len(json.loads((tmp_path / "rep" / "results.json").read_text())["pool_full"]) == 3
    finally:
        tankbench("clean", str(campaign), cwd=tmp_path, timeout=600)
    assert lab.run(["zpool", "list", POOL]).returncode != 0, "clean destroyed the pool the campaign created"
