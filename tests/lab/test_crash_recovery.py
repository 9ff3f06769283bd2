"""Crash injection (issue 18 items 1 and 3): the lab's kernel is crashed for real (`echo c > /proc/sysrq-trigger`)
during a run, a layout and a provisioning step, and the one `tankbench run` command finishes the campaign by itself: each
crash is journalled against the test (and step) that was running, tankbench boots the lab again on its disks,
imports the pool, replaces the encrypted datasets whose key file went with the old root disk, sets the
tunables again (read back), and goes on. No run is lost, none is duplicated.

Then a hang (issue 34 item 1): during the fourth test's run (sync writes) the pool's disk stops completing I/O (qemu
throttles it to 1 byte/s: a disk that takes every request and answers none). Nothing moves for hung_after, fio waits
in the kernel (D state): the run is the host's hang, not a late run; its row is `crashed` with `crash.kind = hang`,
tankbench stops the hung lab and boots it again on its disks, and the test is run again.

The lab is this test's own (booted by the campaign, shut down by it at the end): its kernel is crashed, so it is
never the session's shared lab. Three crashes, so four boots (~40-90 s each under TCG)."""

from __future__ import annotations

import sqlite3
import subprocess
import threading
import time
from pathlib import Path
from typing import Any

from tankbench.lab import vm
from tankbench.lab.qemu import qmp
from tests.conftest import tankbench
from tests.lab.conftest import LAB
from tests.lab.test_zfs_campaign import runs

NAME = f"{LAB[:22]}-crash"

CAMPAIGN = f"""
[campaign]
name = "crash-recovery"
runtime = "3s"
order = "sequential"
host_wait = "10m"
crash_retries = 2
hung_after = "20s"
cooldown = "0s"

[host]
kind = "lab"
name = "{NAME}"
disks = 1

[pool]
name = "tbcrash"
vdevs = ["/dev/disk/by-id/virtio-tbdata0"]
confirm = ["/dev/disk/by-id/virtio-tbdata0"]
ashift = 12

[tunables]
zfs_txg_timeout = 7

[[target]]
name = "fs"
kind = "dataset"
size = "64M"
props = {{ encryption = "aes-256-gcm" }}

[matrix]
rw = ["randread"]
bs = ["64k"]
ioengine = ["psync"]
compression = ["off", "lz4", "gzip"]
layout = ["random"]

[[include]]
rw = "randwrite"
compression = "zle"
sync = "always"
"""


def lab_sh(script: str, timeout: float = 30) -> subprocess.CompletedProcess[str]:
    """A shell command in this test's lab, as it runs now (its ssh port changes when it is booted again)."""
    state = vm.read_state(NAME)
    assert state is not None
    host = vm.ssh_host(state)
    # a connection of its own: closing the campaign's shared control master would cut tankbench's commands off
    host.control = "none"
    return subprocess.run(host.command(["sh", "-c", script]), capture_output=True, text=True, timeout=timeout)


def crash(seen: dict[str, Any], what: str) -> None:
    """The kernel crashes at once: ssh never returns (its connection dies with the guest)."""
    seen.setdefault("crashes", []).append((what, time.time()))
    try:
        lab_sh("echo c > /proc/sysrq-trigger", timeout=15)
    except subprocess.TimeoutExpired:
        pass


def query(journal: Path, sql: str, *args: object) -> list[tuple[Any, ...]]:
    if not journal.exists():
        return []
    conn = sqlite3.connect(journal, timeout=30)
    try:
        return conn.execute(sql, args).fetchall()
    except sqlite3.OperationalError:  # the tables are not there yet
        return []
    finally:
        conn.close()


#: writes to the pool's disk at 64 KiB/s: `zfs create` waits for its txg to reach the disk, for seconds
SLOW = {"bps": 0, "bps_rd": 0, "bps_wr": 64 << 10, "iops": 0, "iops_rd": 0, "iops_wr": 0}
#: the disk stops: 1 byte/s takes every request and completes none for hours (a stalled device)
STALL = {"bps": 1, "bps_rd": 0, "bps_wr": 0, "iops": 0, "iops_rd": 0, "iops_wr": 0}


def saboteur(journal: Path, stop: threading.Event, seen: dict[str, Any]) -> None:
    """Crash 1: as soon as the first run's fio runs. Crash 2: when the second test's dataset exists (it was
    provisioned) and its run has not begun: its layout (64 MiB of random data) is being written. Crash 3: while
    the third test's `zfs create` runs (its provisioning), made slow by throttling the disk's writes once the
    second test is done (the reboot's new qemu, and tankbench's disk models applied again, end the throttle)."""
    while not stop.wait(0.3):
        row = query(journal, "SELECT id, test_id FROM runs WHERE status = 'running' AND pid IS NOT NULL")
        if row:
            seen["run_crash"] = row[0]
            crash(seen, "run")
            break
    # back after the reboot: the first test's runs finish, then the second test is provisioned
    while not stop.wait(0.3):
        done = query(journal, "SELECT DISTINCT test_id FROM runs WHERE status = 'done'")
        if not done or vm.read_state(NAME) is None:
            continue
        try:
            script = "zfs get -H -r -o value,source compression tbcrash | grep -c 'lz4.local' || true"
            out = lab_sh(script, timeout=20).stdout.strip()
        except subprocess.TimeoutExpired:
            continue
        if out not in ("", "0"):
            seen["layout_tests_done"] = {t for (t,) in done}
            crash(seen, "layout")
            break
    while not stop.wait(0.3):
        done = query(journal, "SELECT DISTINCT test_id FROM runs WHERE status = 'done'")
        if len(done) >= 2 and vm.read_state(NAME) is not None:
            qmp(vm.labs_dir() / NAME, "block_set_io_throttle", {"device": "tbdata0", **SLOW})
            break
    while not stop.wait(0.2):
        try:  # gzi[p]: the pattern does not match pgrep's own command line
            out = lab_sh("pgrep -f 'zfs create .*compression=gzi[p]' || true", timeout=20).stdout.strip()
        except subprocess.TimeoutExpired:
            continue
        if out:
            seen["provisioning_tests_done"] = {t for (t,) in done}
            crash(seen, "provisioning")
            break
    # the hang: the fourth test's run is in flight (its sync writes wait for the disk), and the disk stops
    while not stop.wait(0.3):
        done = query(journal, "SELECT DISTINCT test_id FROM runs WHERE status = 'done'")
        row = query(journal, "SELECT id, test_id FROM runs WHERE status = 'running' AND pid IS NOT NULL")
        if len(done) >= 3 and row and vm.read_state(NAME) is not None:
            time.sleep(1.0)  # fio is writing
            qmp(vm.labs_dir() / NAME, "block_set_io_throttle", {"device": "tbdata0", **STALL})
            seen["hang"] = (row[0], time.time())
            break


def test_crashes_during_a_run_a_layout_and_a_provisioning_are_waited_out(tmp_path: Path) -> None:
    campaign = tmp_path / "crash.toml"
    events = tmp_path / "events"
    hook = tmp_path / "hook.sh"
    hook.write_text(f'#!/bin/sh\necho "$1 $TANKBENCH_TEST" >> {events}\n')
    hook.chmod(0o755)
    campaign.write_text(CAMPAIGN.replace('cooldown = "0s"', f'cooldown = "0s"\nhook = ["{hook}"]'))
    journal = tmp_path / "j.sqlite"
    stop, seen = threading.Event(), {}
    t = threading.Thread(target=saboteur, args=(journal, stop, seen), daemon=True)
    t.start()
    t0 = time.monotonic()
    try:
        res = tankbench("run", str(campaign), "--journal", str(journal), cwd=tmp_path, timeout=1500)
    finally:
        stop.set()
        t.join(60)
        if vm.read_state(NAME) is not None:
            vm.down(NAME)
    wall = time.monotonic() - t0
    log = res.stdout + res.stderr
    assert res.returncode == 0, log
    assert [w for w, _ in seen.get("crashes", [])] == ["run", "layout", "provisioning"], (seen, log)
    assert "hang" in seen, (seen, log)
    rows = runs(journal)

    # each crash is a row of the test that was running, naming its step, with the kernel's last words
    crashed = [r for r in rows if r["status"] == "crashed"]
    steps = [r["checks"]["crash.step"] for r in crashed]
    assert steps == ["run", "layout", "provisioning", "run"], [r["note"] for r in crashed]
    hung = crashed.pop()  # the hang: the fourth test's run, attributed to it and its step
    assert hung["test_id"] == seen["hang"][0][1] and hung["checks"]["crash.kind"] == "hang", hung["checks"]
    assert hung["checks"]["hang.host"] is True and hung["checks"]["watchdog.ended_by"] == "hung"
    assert "D state" in hung["checks"]["hang.evidence"], hung["checks"]["hang.evidence"]
    assert hung["checks"]["recovery.lab_rebooted_by_tankbench"] and hung["checks"]["recovery.rebooted"]
    assert hung["checks"]["recovery.boot_id_before"] != hung["checks"]["recovery.boot_id_after"]
    assert hung["checks"]["recovery.pool_imported"] is True
    assert "the host's I/O hung during the run" in hung["note"], hung["note"]
    assert crashed[0]["test_id"] == seen["run_crash"][1]
    assert len({r["test_id"] for r in crashed}) == 3, "three crashes, three tests"
    assert crashed[1]["test_id"] not in seen["layout_tests_done"]
    assert crashed[2]["test_id"] not in seen["provisioning_tests_done"]
    for r in crashed:
        c = r["checks"]
        assert c["recovery.rebooted"] and c["recovery.lab_rebooted_by_tankbench"], c
        assert c["recovery.boot_id_before"] != c["recovery.boot_id_after"], c
        assert "sysrq" in c["crash.kernel_log"].lower(), c["crash.kernel_log"]
        assert c["recovery.pool_imported"] is True, c
        assert c["recovery.keys_loaded"] is True, c
        assert "kernel:" in r["note"], r["note"]
    # the lab's root disk is new at every boot, so the key file went with it: the encrypted dataset of the test
    # that crashed is destroyed (its tag read back first) and made again with a new key
    assert crashed[0]["checks"]["recovery.keys_lost"], crashed[0]["checks"]

    # nothing lost, nothing twice: one finished run per planned run
    finished = [(r["test_id"], r["run_no"], r["warmup"]) for r in rows if r["status"] != "crashed"]
    assert all(r["status"] == "done" for r in rows if r["status"] != "crashed"), [
        (r["status"], r["note"]) for r in rows
    ]
    assert len(finished) == len(set(finished)) == 4, finished
    # after each reboot the tunable was set again and read back
    for r in rows:
        if r["status"] == "done":
            assert r["checks"]["tunables.verified"] is True
            assert str(r["checks"]["tunables.readback"]["zfs_txg_timeout"]) == "7", r["checks"]
    names = [ln.split() for ln in events.read_text().splitlines()]
    assert [n[0] for n in names] == ["crash", "host-down", "host-back"] * 4 + ["end"], names
    assert len({names[i][1] for i in (0, 3, 6, 9)}) == 4, "each crash hook names the test that was running"
    assert "is back after" in log and "restoring the campaign's state" in log, log
    assert vm.read_state(NAME) is None, "the campaign shuts down the lab it booted"
    # the timeline, for whoever reads the test's output: progress lines, crash times, the journal's rows
    print(f"crash-recovery campaign: {wall:.0f} s wall; crashes injected at {seen['crashes']}\n{res.stderr}")
    for r in rows:
        c = r["checks"]
        print(
            r["id"],
            r["test_id"],
            r["run_no"],
            r["attempt"],
            r["status"],
            c.get("crash.step", ""),
            c.get("recovery.down_s", ""),
            r["note"][:160],
        )
