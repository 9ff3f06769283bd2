"""A host whose I/O hangs (issue 34 item 1), through the failure state machine (runner/failure.py): an ssh host is
rebooted over ssh only when the campaign says `on_hang = "reboot"`, then waited for and its campaign state restored;
otherwise the campaign stops and says what to do. The host here is a fake at the one boundary that cannot run in a
test: a real reboot of a machine (the lab's real hang and reboot: tests/lab/test_crash_recovery.py)."""

from __future__ import annotations

import io
from collections.abc import Sequence
from pathlib import Path

import pytest

from tankbench.campaign import expand, parse_spec
from tankbench.errors import HostError, HostHung
from tankbench.hosts.base import Result
from tankbench.hosts.local import LocalHost
from tankbench.journal import Journal
from tankbench.model import Run
from tankbench.progress import Progress
from tankbench.runner.context import Attempt, CrashedRow, HostRun, Step, StepFailed
from tankbench.runner.failure import FailureHandling
from tankbench.runner.probe import Preflight

CAMPAIGN = """
[campaign]
name = "hang"
runtime = "1s"
host_wait = "1m"
hook = ["{hook}"]
{on_hang}

[[target]]
name = "scratch"
kind = "file"
path = "{dir}"
size = "1M"

[matrix]
rw = ["write"]
bs = ["4k"]
"""


class FakeRebootableHost(LocalHost):
    """FAKE (a stand-in for what cannot run here: rebooting a machine): commands run on this machine, except the
    boot id, which changes once sysrq `b` was written, and sysrq itself, which only records that it was asked."""

    name = "ssh:root@hung.example"

    def __init__(self) -> None:
        self.rebooted = False
        self.asked: list[str] = []

    def run(
        self, argv: Sequence[str], *, input: bytes | None = None, timeout: float | None = None, check: bool = False
    ) -> Result:
        text = " ".join(argv)
        if "sysrq-trigger" in text:
            self.asked.append(text)
            self.rebooted = True
            raise HostError(f"{self.name}: `{text}` did not finish in {timeout} s")  # the kernel went, with ssh
        if text == "cat /proc/sys/kernel/random/boot_id":
            return Result(tuple(argv), 0, "boot-after\n" if self.rebooted else "boot-before\n", "")
        if text.startswith("journalctl"):
            return Result(tuple(argv), 0, "kernel: INFO: task fio:1234 blocked for more than 120 seconds.\n", "")
        return super().run(argv, input=input, timeout=timeout, check=check)


def setup(tmp_path: Path, on_hang: str) -> tuple[FailureHandling, FakeRebootableHost, Path, StepFailed, Run]:
    events = tmp_path / "events"
    hook = tmp_path / "hook.sh"
    hook.write_text(f'#!/bin/sh\necho "$1 $TANKBENCH_TEST" >> {events}\n')
    hook.chmod(0o755)
    path = tmp_path / "c.toml"
    path.write_text(CAMPAIGN.format(hook=hook, on_hang=on_hang, dir=tmp_path / "scratch"))
    spec = parse_spec(path.read_text(), str(path))
    test = expand(spec)[0]
    host = FakeRebootableHost()
    journal = Journal(str(tmp_path / "j.sqlite"))
    pre = Preflight(fingerprint={"kernel": "x"}, load1=0.0, dirty_bytes=0, boot_id="boot-before")
    ctx = HostRun(spec, host, journal, Progress(0, stream=io.StringIO()), pre)
    h = FailureHandling(ctx, on_reboot=lambda: None)
    h.wait_for_host = True
    row = journal.begin_run(test.id, 1, False, 1, test.expected_s, host.name, boot_id="boot-before")
    run = Run(
        test_id=test.id,
        run_no=1,
        warmup=False,
        attempt=1,
        status="crashed",
        started=0.0,
        ended=0.0,
        host=host.name,
        fingerprint_id=ctx.fingerprint.id,
        expected_s=test.expected_s,
        note="the host's I/O hung during the run: fio (pid 1234) in D state",
        checks={"crash.step": "run", "crash.kind": "hang", "hang.host": True},
    )
    journal.finish_run(row, run)
    error = HostHung("fio (pid 1234) in D state, waiting in io_schedule")
    return h, host, events, StepFailed(Step.RUN, error, CrashedRow(row, run, 1234)), run


def test_on_hang_reboot_reboots_the_ssh_host_waits_for_it_and_goes_on(tmp_path: Path) -> None:
    h, host, events, failed, _ = setup(tmp_path, 'on_hang = "reboot"')
    test = expand(h.ctx.spec)[0]
    run = h.handle(test, Attempt(1, False, 1), failed)
    assert host.asked == ["sh -c echo 1 > /proc/sys/kernel/sysrq; echo b > /proc/sysrq-trigger"]
    assert run.status == "crashed" and run.checks["crash.kind"] == "hang"
    assert run.checks["recovery.rebooted"] is True and run.checks["recovery.boot_id_after"] == "boot-after"
    assert "blocked for more than 120 seconds" in run.checks["crash.kernel_log"]
    assert h.ctx.pre.boot_id == "boot-after" and h.ctx.outcome.host_failures == 1
    assert [line.split()[0] for line in events.read_text().splitlines()] == ["crash", "host-down", "host-back"]
    stored = h.ctx.journal.runs(test.id)
    assert [r.status for r in stored] == ["crashed"] and stored[0].checks["recovery.rebooted"] is True


@pytest.mark.parametrize("on_hang", ["", 'on_hang = "stop"'])
def test_by_default_a_hung_ssh_host_is_reported_and_the_campaign_stops(tmp_path: Path, on_hang: str) -> None:
    h, host, events, failed, _ = setup(tmp_path, on_hang)
    with pytest.raises(HostError) as e:
        h.handle(expand(h.ctx.spec)[0], Attempt(1, False, 1), failed)
    assert host.asked == [], "never rebooted without campaign.on_hang = reboot"
    assert str(e.value).startswith("ssh:root@hung.example's I/O hangs (fio (pid 1234) in D state")
    assert "reboot the host" in str(e.value) and 'campaign.on_hang = "reboot"' in str(e.value)
    assert [line.split()[0] for line in events.read_text().splitlines()] == ["crash"]
    assert h.ctx.journal.runs()[0].checks["crash.kind"] == "hang"


class FakeLab:
    """FAKE lab (only what lab_hang reads: its console log and the guest's uptime)."""

    def __init__(self, lab_dir: Path, uptime: float) -> None:
        self.lab_dir, self.uptime = lab_dir, uptime

    def run(self, argv: Sequence[str], timeout: float | None = None) -> Result:
        return Result(tuple(argv), 0, f"{self.uptime} 100.0\n", "")


CONSOLE = """LABMARK init-start uptime=3.1
[  400.120000] INFO: task kworker/u8:1:77 blocked for more than 120 seconds.
[  400.130000]       Not tainted 6.12.95+deb12-amd64 #1
[ 1693.500000] INFO: task fio:2210 blocked for more than 120 seconds.
"""


def test_a_lab_hangs_when_its_kernel_said_so_lately(tmp_path: Path) -> None:
    """CI's lab hangs: commands did not finish, the console had the kernel's hung-task lines (docs/unattended.md)."""
    from tankbench.hangrecovery import lab_hang

    (tmp_path / "console.log").write_text(CONSOLE)
    now = lab_hang(FakeLab(tmp_path, 1700.0))  # type: ignore[arg-type]
    assert now == "kernel: [ 1693.500000] INFO: task fio:2210 blocked for more than 120 seconds."
    assert lab_hang(FakeLab(tmp_path, 5000.0)) == "", "a stall that ended long ago is no hang now"  # type: ignore[arg-type]
    (tmp_path / "console.log").write_text("LABMARK init-start uptime=3.1\n")
    assert lab_hang(FakeLab(tmp_path, 1700.0)) == ""  # type: ignore[arg-type]
