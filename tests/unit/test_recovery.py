"""recovery.py: waiting for a host (real ssh to a port nobody listens on; the local host), telling a reboot
from a blip, what a crashed kernel's log says, which host errors are a lost connection."""

from __future__ import annotations

import socket
from pathlib import Path

import pytest

from tankbench.errors import HostError
from tankbench.hosts.local import LocalHost
from tankbench.hosts.ssh import SshHost
from tankbench.recovery import Back, HostWaiter, connection_lost, tail

CONSOLE = """[   12.0] zfs: module loaded
[  101.5] sysrq: Trigger a crash
[  101.5] Kernel panic - not syncing: sysrq triggered crash
[  101.5] CPU: 0 PID: 1234 Comm: sh Not tainted 6.1.0-27-amd64
[  101.6] ---[ end Kernel panic - not syncing: sysrq triggered crash ]---
"""


def closed_port() -> int:
    """A local port nobody listens on (bound, then closed: connecting is refused)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_the_local_host_answers_at_once_with_its_boot_id() -> None:
    notes: list[str] = []
    back = HostWaiter(LocalHost(), 60, notes.append).wait("an-older-boot")
    assert back.boot_id == Path("/proc/sys/kernel/random/boot_id").read_text().strip()
    assert back.rebooted and back.tries == 1 and not back.relaunched
    same = HostWaiter(LocalHost(), 60, notes.append).wait(back.boot_id)
    assert not same.rebooted, "the same boot id is a network blip, not a reboot"


def test_a_host_that_never_answers_ends_after_host_wait_with_what_it_waited_for(tmp_path: Path) -> None:
    host = SshHost("127.0.0.1", port=closed_port(), control_dir=tmp_path, connect_timeout=2, strict_host_keys=False)
    notes: list[str] = []
    with pytest.raises(HostError) as e:
        HostWaiter(host, 3, notes.append).wait("b00t")
    assert "did not come back within campaign.host_wait (3s" in str(e.value)
    assert "the campaign stops here" in str(e.value)
    assert notes[0].startswith(f"{host.name} does not answer: waiting for it to come back, at most 3s")
    assert any("gives up in" in n and "next try in 2s" in n for n in notes), notes


def test_back_keeps_the_kernels_last_words_and_names_the_panic() -> None:
    back = Back("a", "b", 42.04, relaunched=True, kernel_log=tail(CONSOLE), tries=3)
    assert back.panic_line() == "[  101.6] ---[ end Kernel panic - not syncing: sysrq triggered crash ]---"
    c = back.checks()
    assert c["recovery.rebooted"] and c["recovery.lab_rebooted_by_tankbench"]
    assert c["recovery.down_s"] == 42.0 and c["recovery.tries"] == 3
    assert "sysrq: Trigger a crash" in c["crash.kernel_log"]
    assert Back("a", "a", 1.0).panic_line() == "" and "crash.kernel_log" not in Back("a", "a", 1.0).checks()


def test_tail_keeps_the_last_lines_only() -> None:
    text = "\n".join(f"line {i}" for i in range(500))
    kept = tail(text).splitlines()
    assert kept[-1] == "line 499" and len(kept) == 60


@pytest.mark.parametrize(
    ("message", "lost"),
    [
        ("lab: agent fio_run ended without a result (exit 255): ", True),
        ("`zfs create -o compression=lz4 tbcrash/x` exited 255: ", True),
        ("lab: `cat /x` did not finish in 30 s", True),
        ("ssh: connect to host 127.0.0.1 port 2222: Connection refused", True),
        ("`zfs create tank/x` exited 1: cannot create 'tank/x': out of space", False),
        ("lab: copy source /w/c.bin failed verification: {}", False),
    ],
)
def test_which_host_errors_are_a_lost_connection(message: str, lost: bool) -> None:
    assert connection_lost(message) is lost


def test_a_run_found_running_after_a_reboot_is_a_crash_with_its_boot_ids_and_hooks(tmp_path: Path) -> None:
    """What `run` does on start when the machine went down under a run (a local campaign resumed at boot): the
    row becomes `crashed` with both boot ids, and the crash and host-back hooks name its test."""
    from tankbench.journal import Journal
    from tankbench.recovery import crashes_found

    host = LocalHost()
    now = Path("/proc/sys/kernel/random/boot_id").read_text().strip()
    calls: list[tuple[str, str]] = []
    with Journal(str(tmp_path / "j.sqlite")) as j:
        gone = j.begin_run("t1", 1, False, 1, 3.0, host.name, boot_id="an-older-boot")
        killed = j.begin_run("t2", 1, False, 1, 3.0, host.name, boot_id=now)  # only tankbench died
        stale = j.mark_crashed({host.name: now})
        found = crashes_found(
            j,
            host,
            stale,
            now,
            {"t1": "zfs-one"},
            lambda ev, msg, test="": calls.append((ev, test)),
            print,
            "tankbench-resume-x.service",
        )
        rows = {r.row_id: r for r in j.runs()}
    assert found == 1
    assert calls == [("crash", "zfs-one"), ("host-back", "zfs-one")]
    crashed = rows[gone]
    assert crashed.status == "crashed" and rows[killed].status == "interrupted"
    assert crashed.checks["crash.step"] == "run" and crashed.checks["recovery.rebooted"] is True
    assert crashed.checks["recovery.boot_id_before"] == "an-older-boot"
    assert crashed.checks["recovery.boot_id_after"] == now
    assert crashed.checks["recovery.resumed_by"] == "tankbench-resume-x.service"
    assert "recovery.down_s" not in crashed.checks and "recovery.found_on_resume" in crashed.checks
    assert "crash.step" not in rows[killed].checks


def test_the_last_line_counts_host_and_guest_failures_apart() -> None:
    """run's last line says what went down and came back: the host (waited for) and the test guest (booted again)."""
    from tankbench.runner import Outcome, summary_line

    o = Outcome(runs_done=7, host_failures=1, guest_failures=2, journal="j.sqlite", seconds=61.0)
    line = summary_line(o)
    assert line.startswith("7 run(s) done in 1m01s") and line.endswith("; journal: j.sqlite"), line
    assert "the host went down 1 time(s) and was waited for" in line
    assert "the test guest died 2 time(s) and was booted again" in line
    assert "guest" not in summary_line(Outcome(runs_done=1, journal="j"))
