"""A host that goes away for good mid-campaign (issue 18 item 3): the campaign waits for it (progress says what
for), gives up when campaign.host_wait has passed, with a clear message and exit status 3; the run in flight is
journalled `crashed` against its test. A real sshd in a network namespace (tests/netns.py), taken down whole."""

from __future__ import annotations

import os
import signal
import sqlite3
import subprocess
from pathlib import Path

from tests.conftest import journal_rows, run_until
from tests.netns import NetnsHost, namespace_hosts

CAMPAIGN = """
[campaign]
name = "host-gone"
runtime = "30s"
ramp = "0s"
host_wait = "25s"
cooldown = "0s"
hook = ["{hook}"]

[host]
kind = "ssh"
address = "{address}"
identity = "{identity}"
known_hosts = "{known_hosts}"

[[target]]
name = "scratch"
kind = "file"
path = "{target}/scratch"
size = "8M"

[matrix]
rw = ["read"]
bs = ["4k"]
io = ["direct"]
"""


def running(journal: Path) -> bool:
    return bool(journal_rows(journal, "SELECT 1 FROM runs WHERE status = 'running' AND pid IS NOT NULL"))


def take_down(h: NetnsHost) -> None:
    """The host is gone: every process in its namespace (sshd, agent, fio) killed, its link down."""
    for pid in subprocess.run(["ip", "netns", "pids", h.netns], capture_output=True, text=True).stdout.split():
        try:
            os.kill(int(pid), signal.SIGKILL)
        except ProcessLookupError:
            pass
    subprocess.run(["ip", "link", "set", h.veth, "down"], check=True)


def test_a_host_gone_for_good_ends_the_campaign_after_host_wait(tmp_path: Path) -> None:
    events = tmp_path / "events"
    hook = tmp_path / "hook.sh"
    hook.write_text(f'#!/bin/sh\necho "$1 $TANKBENCH_TEST" >> {events}\n')
    hook.chmod(0o755)
    with namespace_hosts(1, tmp_path / "ns") as (hosts, target):
        h = hosts[0]
        c = tmp_path / "c.toml"
        c.write_text(
            CAMPAIGN.format(
                hook=hook,
                address=h.address,
                identity=h.identity,
                known_hosts=h.known_hosts,
                target=target,
            )
        )
        j = tmp_path / "j.sqlite"
        proc = run_until(c, j, tmp_path, lambda: running(j))
        take_down(h)
        out, err = proc.communicate(timeout=300)
    assert proc.returncode == 3, out + err
    assert "did not come back within campaign.host_wait (25s" in err, err
    assert "waiting for ssh:" in err and "gives up in" in err, err
    conn = sqlite3.connect(j)
    statuses = conn.execute("SELECT status, checks FROM runs").fetchall()
    conn.close()
    assert [s for s, _ in statuses] == ["crashed"], statuses
    assert '"crash.step": "run"' in statuses[0][1]
    lines = events.read_text().splitlines()
    assert [ln.split()[0] for ln in lines] == ["crash", "host-down", "end"], lines
    assert lines[0].split()[1].startswith("file-"), lines


def test_a_lost_connection_with_the_host_up_is_a_blip_and_the_run_is_done_again(tmp_path: Path) -> None:
    """Only the ssh connection dies (the host's sshd sessions are killed, the host stays up): the same boot id
    answers, the run is `interrupted` (not a crash), its fio is gone, and it is run again: exit 0."""
    events = tmp_path / "events"
    hook = tmp_path / "hook.sh"
    hook.write_text(f'#!/bin/sh\necho "$1" >> {events}\n')
    hook.chmod(0o755)
    with namespace_hosts(1, tmp_path / "ns") as (hosts, target):
        h = hosts[0]
        c = tmp_path / "c.toml"
        text = CAMPAIGN.format(
            hook=hook, address=h.address, identity=h.identity, known_hosts=h.known_hosts, target=target
        )
        c.write_text(text.replace('runtime = "30s"', 'runtime = "3s"'))
        j = tmp_path / "j.sqlite"
        proc = run_until(c, j, tmp_path, lambda: running(j))
        assert h.sshd is not None
        for pid in subprocess.run(["ip", "netns", "pids", h.netns], capture_output=True, text=True).stdout.split():
            try:  # the sessions only: the listening sshd (and so the host) stays
                if int(pid) != h.sshd.pid and Path(f"/proc/{pid}/comm").read_text().strip() == "sshd":
                    os.kill(int(pid), signal.SIGKILL)
            except (ProcessLookupError, FileNotFoundError):
                pass
        out, err = proc.communicate(timeout=300)
    assert proc.returncode == 0, out + err
    conn = sqlite3.connect(j)
    rows = conn.execute("SELECT status, note, checks FROM runs ORDER BY id").fetchall()
    conn.close()
    assert [r[0] for r in rows] == ["interrupted", "done"], rows
    assert "was lost during the run (same boot" in rows[0][1], rows[0][1]
    assert '"recovery.rebooted": false' in rows[0][2], rows[0][2]
    assert events.read_text().split() == ["crash", "host-down", "host-back", "end"]
