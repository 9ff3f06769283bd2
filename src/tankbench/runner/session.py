"""The session of a campaign on one host, around its runs: the journal readied (report index, stale runs closed
and their fio ended, the plan recorded), crashes found on resume, stale module parameters restored, the `end`
hook, module parameters restored at the end, and leaving a lab this run booted. `run_campaign` drives one
session; a fleet (fleet.py) drives the same session per host."""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from tankbench import resumeboot
from tankbench.analysis.cases import index_for_reports
from tankbench.campaign import Spec, expand
from tankbench.campaign.host import default_journal_path, local_has_zfs
from tankbench.campaign.unattended import legacy_grace_note, on_hang_note
from tankbench.errors import HostError, UserError
from tankbench.fio.jobs import job_text
from tankbench.hosts.base import Host, work_root
from tankbench.journal import Journal
from tankbench.journal.lock import JournalLock
from tankbench.model import Test
from tankbench.progress import Progress
from tankbench.recovery import crashes_found
from tankbench.runner.context import campaign_tunables, tell_hook
from tankbench.runner.loop import CampaignRunner
from tankbench.runner.outcome import Outcome, stop_status, summary_line
from tankbench.runner.probe import Preflight, preflight

#: a run found `running` on start: (row, test id, its fio's pid, its host)
Stale = tuple[int, str, int | None, str]


def open_host(spec: Spec, progress: Callable[[str], None] | None = None) -> Host:
    """The Host the campaign names; `auto` is local when this kernel has ZFS, else the lab VM."""
    h = spec.host
    kind = h.kind
    if kind == "auto":
        kind = "local" if local_has_zfs() else "lab"
        if progress:
            progress(
                f"host: {kind} (no host in the campaign; "
                + ("this kernel has ZFS)" if kind == "local" else "no ZFS in this kernel, using the lab VM)")
            )
    if kind == "local":
        from tankbench.hosts.local import LocalHost

        return LocalHost()
    if kind == "lab":
        from tankbench.lab.control import lab_host

        return lab_host(h.lab_name, disks=h.lab_disks, slog=h.lab_slog, machine=h.lab_machine, progress=progress)
    from tankbench.hosts.ssh import SshHost

    known = os.path.expanduser(h.known_hosts) if h.known_hosts else None
    host = SshHost(address=h.address, user=h.user, port=h.port, identity=h.identity, known_hosts=known)
    host.check_connection()  # a first contact says which key to accept, an unreachable host says so (exit 2)
    return host


def ready_journal(journal: Journal, spec: Spec, tests: list[Test], boot_ids: Mapping[str, str]) -> list[Stale]:
    """The journal before any run: the report's index kept, runs a dead tankbench left `running` closed (crashed
    where their host's boot id changed since, else interrupted), the campaign and its tests recorded."""
    index_for_reports(journal)
    crashed = journal.mark_crashed(dict(boot_ids) or None)
    journal.add_campaign(spec.campaign_id, spec.name, os.path.abspath(spec.path), spec.text)
    journal.add_tests(spec.campaign_id, tests, {t.id: job_text(t) for t in tests})
    return crashed


def end_stale(host: Host, crashed: list[Stale], spec: Spec) -> None:
    """fio processes of crashed runs that still live on this host: end them (only ours, by pid)."""
    pids = [
        (pid, f"{work_root(host)}/{spec.campaign_id}/{test_id}/job.fio")
        for _, test_id, pid, h in crashed
        if pid and h == host.name
    ]
    if pids:
        host.call_agent({"op": "end_pids", "pids": pids}, timeout=60)


#: what a single host's progress says when it found runs a dead tankbench left `running`
RESUMING = (
    "resuming: {n} run(s) were in progress when the last run died; they are retried (marked crashed if the host "
    "went down since, else interrupted: only host crashes count toward skipping a test)"
)


class Session:
    """One host's part of a campaign, around its runs (see the module docstring)."""

    def __init__(
        self,
        spec: Spec,
        host: Host,
        journal: Journal,
        progress: Progress,
        pre: Preflight,
        extra: dict[str, Any] | None = None,
        *,
        wait_for_host: bool,
        started: float | None = None,
    ) -> None:
        self.spec, self.host, self.journal, self.progress, self.pre = spec, host, journal, progress, pre
        self.extra = dict(extra or {})
        #: wait for a host that failed and go on (one host); a fleet moves the host's test cases instead
        self.wait_for_host = wait_for_host
        self.outcome = Outcome()
        #: time.monotonic() when the campaign started (the summary's time counts from it)
        self.started = time.monotonic() if started is None else started
        #: module parameters the campaign sets ([tunables], matrix.tunables): restored when the session ends
        self.tunables = campaign_tunables(host, spec)

    def hook(self, event: str, message: str, test: str = "", exit_status: int | None = None) -> None:
        """Tell the campaign's hook command (campaign.hook) about an event on this host."""
        tell_hook(self, event, message, test, exit_status)

    def begin(self, crashed: list[Stale], tests: Iterable[Test], resuming: str = "") -> None:
        """Before the runs: crashes found on resume (rows completed, hooks called), `resuming` said, module
        parameters a crashed run left set restored."""
        mine = [c for c in crashed if c[3] == self.host.name]
        self.outcome.runs_crashed_found = len(mine)
        if mine and self.pre.boot_id:  # the machine went down under them: crash rows and hooks as over ssh
            names = {t.id: t.name for t in tests}
            by = resumeboot.resumed_by()
            crashes_found(self.journal, self.host, mine, self.pre.boot_id, names, self.hook, self.progress.note, by)
        if resuming:
            self.progress.note(resuming)
        if self.tunables is not None:
            stale = self.tunables.restore_stale()
            if stale:
                self.progress.note(f"restored module parameters a crashed run left set: {stale['tunables.restored']}")

    def run(self, tests: list[Test]) -> Outcome:
        """Every pending run of `tests` by a runner of their own (a fleet host runs one per test case it takes);
        their counts are added to the session's outcome."""
        runner = CampaignRunner(self.spec, self.host, self.journal, self.progress, self.pre, self.extra)
        runner.wait_for_host = self.wait_for_host
        runner.ctx.tunables = self.tunables
        try:
            return runner.run(tests)
        finally:
            self.outcome.add(runner.outcome)

    def end(self, stopped: BaseException | None) -> None:
        """After the runs: the `end` hook (the summary, or what stopped the campaign), module parameters restored.
        A host that stopped the campaign may not take them back: a warning, and the next run restores them."""
        self.outcome.journal, self.outcome.seconds = self.journal.path, time.monotonic() - self.started
        if stopped is None:
            self.hook("end", summary_line(self.outcome), exit_status=self.outcome.exit_status)
        else:
            status = stop_status(stopped)
            self.hook("end", f"the campaign stopped: {stopped or type(stopped).__name__}", exit_status=status)
        if self.tunables is None:
            return
        try:
            self.tunables.restore()
        except (HostError, UserError) as err:
            if stopped is None:
                raise
            # the host that stopped the campaign cannot take them back: the next run does
            self.progress.note(f"warning: module parameters not restored ({err}); `tankbench run` does")

    def __call__(self, tests: list[Test]) -> Outcome:
        """The whole session over `tests`: every run, then `end` however the runs ended."""
        try:
            self.run(tests)
        except BaseException as e:
            self.end(e)
            raise
        self.end(None)
        return self.outcome


def leave_host(host: Host, keep: bool, note: Callable[[str], None]) -> None:
    """Close the host; a lab this run booted is shut down unless `keep` (Host.leave)."""
    host.close()
    host.leave(keep, note)


def run_campaign(
    spec: Spec,
    journal_path: str | None = None,
    *,
    host: Host | None = None,
    quiet: bool = False,
    keep_lab: bool = False,
) -> Outcome:
    """The whole `run` command as a function: validate, then run and journal every pending run.

    A lab VM this call booted is shut down at the end unless `keep_lab`; a lab that was already up stays up,
    and the progress says so and how to stop it."""
    t0 = time.monotonic()
    tests = expand(spec)
    progress = Progress(0, quiet=quiet)
    if legacy := legacy_grace_note(spec.unattended):
        progress.note(legacy)
    host = host or open_host(spec, progress.note)
    kind = "lab" if host.managed else "local" if host.name == "local" else "ssh"
    if said := on_hang_note(spec.unattended, kind):
        progress.note(said)
    journal_path = journal_path or default_journal_path(spec)
    try:
        pre = preflight(host, spec, tests=tests)
        extra = dict(host.fingerprint_extra())
        with JournalLock(journal_path), Journal(journal_path) as journal:
            crashed = ready_journal(journal, spec, tests, {host.name: pre.boot_id} if pre.boot_id else {})
            end_stale(host, crashed, spec)
            session = Session(spec, host, journal, progress, pre, extra, wait_for_host=True, started=t0)
            session.begin(crashed, tests, RESUMING.format(n=len(crashed)) if crashed else "")
            outcome = session(tests)
    finally:
        leave_host(host, keep_lab, progress.note)
    outcome.journal = journal_path
    outcome.seconds = time.monotonic() - t0
    return outcome
