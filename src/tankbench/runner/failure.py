"""Failure handling for one host, as a state machine with typed states (docs/architecture.md, "Failure handling").

A HostError during a step of a test (`StepFailed`, raised by run.py) enters the machine as `Failed`; each state's
`next` does that state's work (journal a row, wait, restore, call a hook) and returns the state after it, until
`Resumed` (the row as it ends: the scheduler goes on) or `Stopped` (the campaign stops with that error):

    Failed ──(not waiting for hosts: a fleet)──────────────────────────────► Stopped
      │ ──(same boot, command failed)──► HostUp ──(a test guest died)──► GuestDied ──► Resumed
      │                                     └──(no guest died)─────────────────────────► Stopped
      └──(no answer, or connection lost)──► HostDown ──(answers again)──► Blip (same boot) ──► Resumed | Stopped
                                               ▲                       └► Rebooted ─────────► Resumed
                                               └──── failed again while brought back (at most 2 times) ◄┘

A new kind of failure (a hung run, say) is a new state class with its `next`, entered from the state that detects
it; nothing else changes.
"""

from __future__ import annotations

import time
from abc import ABC, abstractmethod
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

from tankbench.errors import HostError
from tankbench.hosts.base import work_root
from tankbench.hosts.lab import LabHost
from tankbench.model import Run, Test
from tankbench.recovery import Back, HostWaiter, connection_lost
from tankbench.runner.context import Attempt, CrashedRow, HostRun, Step, StepFailed
from tankbench.targets import TargetKind
from tankbench.units import fmt_duration

#: runs of a test in a row that a lost connection may interrupt (the host answering with the same boot)
MAX_BLIPS = 3
#: times a host that failed again while it was brought back is waited for again
MAX_AGAIN = 2


class Ongoing(ABC):
    """A state the machine goes on from."""

    @abstractmethod
    def next(self, h: FailureHandling) -> State:
        """Do this state's work; the state after it."""


@dataclass(frozen=True)
class Resumed:
    """Final: the failed run's row as it ends (`crashed`, or `interrupted`); the campaign goes on."""

    run: Run


@dataclass(frozen=True)
class Stopped:
    """Final: the campaign stops with this error (exit status 3)."""

    error: HostError


State = Ongoing | Resumed | Stopped


@dataclass(frozen=True)
class Failed(Ongoing):
    """Entry: the host failed during `step` of `test`; `crashed` is the row fio's run left if it had begun."""

    test: Test
    at: Attempt
    step: Step
    error: HostError
    crashed: CrashedRow | None
    down_since: float

    def next(self, h: FailureHandling) -> State:
        if not h.wait_for_host:
            return self.stopped(h)
        boot = h.waiter.boot_id(timeout=20)
        if boot is not None and boot == h.ctx.pre.boot_id and not connection_lost(str(self.error)):
            return HostUp(self)
        crashed = self.crashed or h.crashed_row(self)
        ctx, name = h.ctx, self.test.name
        ctx.outcome.host_failures += 1
        message = f"the host failed during the {self.step.value} of {name}: {self.error}"
        ctx.progress.note(message)
        ctx.hook("crash", message, test=name)
        ctx.hook("host-down", f"{ctx.host.name} stopped answering during the {self.step.value} of {name}", test=name)
        return HostDown(self, crashed, 0)

    def stopped(self, h: FailureHandling) -> Stopped:
        """The campaign stops with the error; a run whose fio had begun crashed (the hook says so)."""
        if self.crashed is not None:
            h.ctx.hook(
                "crash", f"the host failed during the run of {self.test.name}: {self.error}", test=self.test.name
            )
        return Stopped(self.error)


@dataclass(frozen=True)
class HostUp(Ongoing):
    """The host answers with the same boot and the connection was not lost: a test guest died, or a command
    failed (no host failure to wait out: the campaign stops as before)."""

    failed: Failed

    def next(self, h: FailureHandling) -> State:
        guest = h.crashed_guest()
        if guest is None:
            return self.failed.stopped(h)
        return GuestDied(self.failed, self.failed.crashed or h.crashed_row(self.failed), *guest)


@dataclass(frozen=True)
class GuestDied(Ongoing):
    """The test guest died during a step of a test (its host did not): the row stays `crashed`, attributed to the
    test and the guest, a new guest boots, and the scheduler retries the test (crash_retries counts it)."""

    failed: Failed
    crashed: CrashedRow
    kind: TargetKind
    why: str

    def next(self, h: FailureHandling) -> State:
        ctx, test, step = h.ctx, self.failed.test, self.failed.step.value
        note = f"the test guest crashed during the {step} of this test: {self.why}"
        checks = dict(self.crashed.run.checks, **{"crash.layer": "guest", "crash.guest": self.why})
        run = replace(self.crashed.run, row_id=self.crashed.row, note=note, checks=checks)
        ctx.journal.finish_run(self.crashed.row, run)
        ctx.outcome.guest_failures += 1
        ctx.progress.note(f"{test.name}: {note}; booting a new guest")
        ctx.hook("crash", f"the test guest crashed during the {step} of {test.name}: {self.why}", test=test.name)
        self.kind.restart_guest()
        return Resumed(run)


@dataclass(frozen=True)
class HostDown(Ongoing):
    """Waiting for the host to answer (at most campaign.host_wait, from when it failed); `again` counts the times it
    failed again while it was brought back."""

    failed: Failed
    crashed: CrashedRow
    again: int

    def next(self, h: FailureHandling) -> State:
        back = h.waiter.wait(h.ctx.pre.boot_id, since=self.failed.down_since if self.again == 0 else None)
        return Rebooted(self, back) if back.rebooted else Blip(self, back)

    def failed_again(self, h: FailureHandling, e: HostError) -> State:
        """It went down again while being brought back: wait again (a lost connection, at most MAX_AGAIN times)."""
        if self.again == MAX_AGAIN or not connection_lost(str(e)):
            return Stopped(e)
        h.ctx.progress.note(f"{h.ctx.host.name} failed again while it was brought back: {e}")
        return HostDown(self.failed, self.crashed, self.again + 1)


@dataclass(frozen=True)
class Blip(Ongoing):
    """The host answers with the same boot (only the connection was lost): end the run's fio if it still runs and
    journal the row `interrupted`; the test is run again (more than MAX_BLIPS in a row stop the campaign)."""

    down: HostDown
    back: Back

    def next(self, h: FailureHandling) -> State:
        ctx, test, crashed = h.ctx, self.down.failed.test, self.down.crashed
        blips = h.blips[test.id] = h.blips.get(test.id, 0) + 1
        pid = crashed.pid
        try:
            ended = ctx.host.call_agent(
                {"op": "end_pids", "pids": [(pid, f"{ctx.workdir}/{test.id}/job.fio")] if pid else []}, timeout=60
            )
        except HostError as e:
            return self.down.failed_again(h, e)
        what = f"its fio (pid {pid}) was still running and was ended" if ended.get("ended") else "no fio of it runs"
        run = replace(
            crashed.run,
            row_id=crashed.row,
            status="interrupted",
            checks=dict(crashed.run.checks, **self.back.checks()),
            note=f"the connection to {ctx.host.name} was lost during the {self.down.failed.step.value} "
            f"(same boot, {what}): {self.down.failed.error}",
        )
        ctx.journal.finish_run(crashed.row, run)
        ctx.hook("host-back", f"{ctx.host.name} answers again (same boot); {test.name} is run again", test=test.name)
        if blips > MAX_BLIPS:
            return Stopped(
                HostError(f"{ctx.host.name}: the connection was lost {blips} times in a row during {test.name}")
            )
        return Resumed(run)


@dataclass(frozen=True)
class Rebooted(Ongoing):
    """The host booted again: restore the campaign's state on it and keep the row `crashed` with what its kernel
    said before it went down."""

    down: HostDown
    back: Back

    def next(self, h: FailureHandling) -> State:
        ctx, test, crashed, back = h.ctx, self.down.failed.test, self.down.crashed, self.back
        ctx.progress.note(
            f"{ctx.host.name} is back after {fmt_duration(back.down_s)} (rebooted"
            + (" by tankbench" if back.relaunched else "")
            + "); restoring the campaign's state"
        )
        ctx.pre.boot_id = back.boot_id
        checks = dict(crashed.run.checks, **back.checks())
        try:
            checks.update(h.restore_after_reboot())
        except HostError as e:
            return self.down.failed_again(h, e)
        run = replace(crashed.run, row_id=crashed.row)
        if back.panic_line():
            run = replace(run, note=f"{run.note}; kernel: {back.panic_line()}")
        run = replace(run, checks=checks)
        ctx.journal.finish_run(crashed.row, run)
        ctx.hook(
            "host-back", f"{ctx.host.name} is back (rebooted); the campaign goes on with {test.name}", test=test.name
        )
        return Resumed(run)


class FailureHandling:
    """Runs the machine for one host's failures; what the states share (the host's waiter, lost connections in a
    row per test) and do (journal a crashed row, find a dead guest, restore after a reboot)."""

    def __init__(self, ctx: HostRun, on_reboot: Callable[[], None]) -> None:
        self.ctx = ctx
        #: what else a reboot resets (one run's state: the copy source, the agent's counters)
        self.on_reboot = on_reboot
        #: wait for a host that failed (recovery.py) and go on; off in a fleet, where its test case moves to
        #: another host instead (fleet.py), and the campaign stops as before
        self.wait_for_host = False
        #: runs of a test in a row that a lost connection interrupted (the host answered with the same boot)
        self.blips: dict[str, int] = {}
        self.waiter = HostWaiter(ctx.host, ctx.spec.unattended.host_wait_s, ctx.progress.note)

    def handle(self, test: Test, at: Attempt, f: StepFailed) -> Run:
        """The failed run's row as it ends, once the host (or its test guest) is back; HostError when the campaign
        stops (the host did not come back within campaign.host_wait, or a command failed on a host that is up)."""
        state: State = Failed(test, at, f.step, f.error, f.crashed, time.monotonic())
        self.ctx.host.drop_agent_session(wait_s=0.5)  # it may be a stale process on a host that went away
        while isinstance(state, Ongoing):
            state = state.next(self)
        if isinstance(state, Stopped):
            raise state.error
        return state.run

    def went_through(self, test: Test) -> None:
        """A run of the test ended on its own: lost connections no longer count in a row."""
        self.blips.pop(test.id, None)

    def crashed_row(self, failed: Failed) -> CrashedRow:
        """A failure outside fio: a row of its own says which step of which test the host (or guest) failed in."""
        ctx, test, at = self.ctx, failed.test, failed.at
        row = ctx.journal.begin_run(
            test.id, at.run_no, at.warmup, at.attempt, test.expected_s, ctx.host.name, boot_id=ctx.pre.boot_id
        )
        run = Run(
            test_id=test.id,
            run_no=at.run_no,
            warmup=at.warmup,
            attempt=at.attempt,
            status="crashed",
            started=time.time(),
            ended=time.time(),
            host=ctx.host.name,
            fingerprint_id=ctx.fingerprint.id,
            expected_s=test.expected_s,
            note=f"the host failed during the {failed.step.value} of this test: {failed.error}",
            checks={"crash.step": failed.step.value},
        )
        ctx.journal.finish_run(row, run)
        return CrashedRow(row, run, None)

    def crashed_guest(self) -> tuple[TargetKind, str] | None:
        """The kind whose test guest died while the host stayed up, and why (None when no guest did)."""
        for kind in self.ctx.kinds.values():
            try:
                why = kind.crashed_guest()
            except HostError:
                continue
            if why:
                return kind, why
        return None

    def restore_after_reboot(self) -> dict[str, Any]:
        """The host booted again: its private dirs anew, the lab's disk models and ARC, the pool imported with keys
        loaded (each target kind's `recover`); tunables are set and read back again before the next run."""
        self.reset_after_reboot()
        self.ctx.ws.zfs_recovered = False
        checks: dict[str, Any] = {}
        for kind in self.ctx.kinds.values():
            checks.update(kind.recover(True))
        return checks

    def reset_after_reboot(self) -> None:
        """What a reboot took with it: the host's private dirs, the lab's disk models and ARC size (set again)."""
        ctx = self.ctx
        ctx.host.__dict__.pop("_private_dirs", None)
        ctx.ws.workdir = f"{work_root(ctx.host)}/{ctx.spec.campaign_id}"
        self.on_reboot()
        if isinstance(ctx.host, LabHost):
            from tankbench.lab import vm

            vm.apply_machine(ctx.host.lab_name, ctx.host, ctx.spec.host.lab_machine, ctx.progress.note)

    def during_setup(self, kinds: list[str], e: HostError) -> None:
        """The host failed during the kinds' setup: no test is to blame, so no row; wait for it as during a run and
        return when it is back (the setup is then done again); raise `e` when a command failed on a host that is
        up, HostError when it does not come back."""
        ctx = self.ctx
        down_since = time.monotonic()
        boot = self.waiter.boot_id(timeout=20)
        if boot is not None and boot == ctx.pre.boot_id and not connection_lost(str(e)):
            raise e  # a command failed on a host that is up: no host failure to wait out
        message = f"the host failed during the setup ({', '.join(kinds)}): {e}"
        ctx.progress.note(message)
        ctx.outcome.host_failures += 1
        ctx.hook("crash", message)
        ctx.hook("host-down", f"{ctx.host.name} stopped answering during the setup")
        back = self.waiter.wait(ctx.pre.boot_id, since=down_since)
        if back.rebooted:
            ctx.pre.boot_id = back.boot_id
            self.reset_after_reboot()
        ctx.hook("host-back", f"{ctx.host.name} is back; the setup is done again")
