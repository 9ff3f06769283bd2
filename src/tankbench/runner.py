"""`run`: provision, precondition, run fio under a watchdog with samplers, journal each run, resume after crashes."""

from __future__ import annotations

import os
import re
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from tankbench import __version__, resumeboot
from tankbench import preflight as preflight_mod
from tankbench.analysis.cases import index_for_reports
from tankbench.campaign import Spec, expand
from tankbench.campaign.unattended import legacy_grace_note
from tankbench.coldcache import prepare_cache
from tankbench.copytest import copy_argv
from tankbench.errors import HostError, UserError
from tankbench.fio.jobs import deadline_s, job_text, run_job_text, test_file_path
from tankbench.hooks import call_hook
from tankbench.hosts.base import Host, agent_sha256, work_root
from tankbench.hosts.lab import LabHost
from tankbench.journal import Journal
from tankbench.journal.lock import JournalLock
from tankbench.model import Fingerprint, Run, Test
from tankbench.progress import Progress
from tankbench.recovery import Back, HostWaiter, connection_lost, crashes_found
from tankbench.schedule.configs import config_key
from tankbench.schedule.cooldown import cooldown_checks, cooldown_request, idle_marks
from tankbench.schedule.estimate import Estimator, priors_for
from tankbench.schedule.rules import FINISHED, Decision, observation
from tankbench.schedule.scheduler import Scheduler, decided_from_runs, history_from_runs
from tankbench.schedule.steady import steady_state_from_text
from tankbench.targets import TargetKind, Workspace, kind_of
from tankbench.tunables import Tunables
from tankbench.units import fmt_duration
from tankbench.verdict import decide_run
from tankbench.zfs.checks import direct_io_confirm, run_validity


def default_journal_path(spec: Spec) -> str:
    """Where results go unless --journal says otherwise: ./tankbench-results/<campaign>/journal.sqlite."""
    return os.path.join("tankbench-results", spec.name, "journal.sqlite")


def local_has_zfs() -> bool:
    return os.path.exists("/sys/module/zfs")


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
        from tankbench.lab.vm import lab_host

        return lab_host(h.lab_name, disks=h.lab_disks, slog=h.lab_slog, machine=h.lab_machine, progress=progress)
    from tankbench.hosts.ssh import SshHost

    known = os.path.expanduser(h.known_hosts) if h.known_hosts else None
    host = SshHost(address=h.address, user=h.user, port=h.port, identity=h.identity, known_hosts=known)
    host.check_connection()  # a first contact says which key to accept, an unreachable host says so (exit 2)
    return host


@dataclass
class Preflight:
    """What the host told us before anything was written: fingerprint facts and per-target checks."""

    fingerprint: dict[str, Any]
    load1: float
    dirty_bytes: int
    zfs_params: dict[str, str] = field(default_factory=dict)
    #: the host's boot id: a run left `running` under another boot id died with its host
    boot_id: str = ""


def target_kinds(ws: Workspace) -> dict[str, TargetKind]:
    """One instance of each target kind the campaign uses, sharing the workspace."""
    return {t.kind: kind_of(t)(ws) for t in ws.spec.targets if t.kind}


#: job-file options that name files: left out of the parse check (fio never opens a file with --parse-only, and
#: without them the jobs of one configuration's tests are alike)
_FILE_OPTIONS = ("filename=", "directory=", "filename_format=")
_PARSE_CHUNK = 1000  # jobs per file: fio takes at most a few thousand jobs in one run


def parse_check_jobs(tests: Sequence[Test]) -> list[str]:
    """The campaign's distinct fio jobs (file options left out, every job named `job`), as job files of at most
    _PARSE_CHUNK jobs each, for `fio --parse-only` on the host (zvol-issues' 2,630 fio jobs parse in ~0.2 s)."""
    seen: dict[str, None] = {}
    for t in tests:
        if t.is_copy:
            continue
        lines = []
        for line in run_job_text(t).splitlines():
            if line.startswith(_FILE_OPTIONS) or line.startswith(";"):
                continue
            lines.append("[job]" if line.startswith("[") and line.strip() != "[global]" else line)
        seen.setdefault("\n".join(lines) + "\n", None)
    texts = list(seen)
    return ["\n".join(texts[i : i + _PARSE_CHUNK]) for i in range(0, len(texts), _PARSE_CHUNK)]


def fio_refusal(spec: Spec, host: Host, said: str) -> UserError:
    """fio's refusal of the campaign's jobs as an Error naming the campaign key that set the option."""
    m = re.search(r"(?:Bad option <|failed parsing )([A-Za-z0-9_]+)=?([^>;]*)", said)
    where = "[fio]"
    if m:
        name, value = m.group(1), m.group(2).strip()
        if name in spec.fio:
            where = f"[fio] {name} = {spec.fio[name]!r}"
        elif name in spec.matrix:
            where = f"matrix.{name} (fio got {name}={value})"
        else:
            where = f"fio option {name}={value}"
    return UserError(
        f"{spec.path}: {where}: fio on {host.name} refuses the campaign's jobs: {said}",
        "fix the option (`fio --cmdhelp=NAME` lists what this fio takes); nothing was written",
    )


def preflight(
    host: Host, spec: Spec, kinds: dict[str, TargetKind] | None = None, tests: Sequence[Test] | None = None
) -> Preflight:
    """Read-only checks of every target on the host, and of the campaign's fio jobs by the host's fio (`fio
    --parse-only`); raise UserError before anything is written."""
    kinds = kinds if kinds is not None else target_kinds(Workspace(host, spec))
    dirs: list[str] = []
    devices: list[str] = []
    for t in spec.targets:
        d, b = kinds[t.kind].probe_paths(t)
        dirs += d
        devices += b
    req: dict[str, Any] = {"op": "probe", "paths": dirs, "block_devices": devices}
    if tests is not None:
        req["fio_parse"] = parse_check_jobs(tests)
    probe = host.call_agent(req, timeout=300)
    if not probe["fingerprint"].get("fio_version"):
        raise UserError(f"{host.name}: fio is not installed on the host", "install it (Debian: apt-get install fio)")
    parsed = probe.get("fio_parse")
    if isinstance(parsed, dict) and not parsed.get("ok", True):
        raise fio_refusal(spec, host, str(parsed.get("error", "")))
    for t in spec.targets:
        kinds[t.kind].check(t, probe)
    return Preflight(
        fingerprint=probe["fingerprint"],
        load1=probe["load1"],
        dirty_bytes=probe["dirty_bytes"],
        zfs_params=probe.get("zfs_params", {}),
        boot_id=str(probe.get("boot_id", "")),
    )


@dataclass
class Outcome:
    """What a campaign run did, for the summary and the exit status."""

    tests: int = 0
    runs_done: int = 0
    runs_failed: int = 0
    runs_timeout: int = 0
    runs_crashed_found: int = 0
    #: times the host went down during this run of the campaign and was waited for (recovery.py)
    host_failures: int = 0
    #: times a test guest died while its host stayed up, and was booted again (guest_failed)
    guest_failures: int = 0
    runs_skipped_existing: int = 0
    tests_skipped: list[str] = field(default_factory=list)
    journal: str = ""
    seconds: float = 0.0

    @property
    def exit_status(self) -> int:
        return 0 if not (self.runs_failed or self.runs_timeout or self.tests_skipped) else 1


class CampaignRunner:
    """Runs every pending run of a campaign on one host; each run is journalled as it ends."""

    def __init__(
        self,
        spec: Spec,
        host: Host,
        journal: Journal,
        progress: Progress,
        pre: Preflight,
        extra_fingerprint: dict[str, Any] | None = None,
    ) -> None:
        self.spec = spec
        self.host = host
        self.journal = journal
        self.progress = progress
        self.pre = pre
        self.workdir = f"{work_root(host)}/{spec.campaign_id}"
        self.ws = Workspace(
            host,
            spec,
            progress.note,
            self.workdir,
            zfs_params=dict(pre.zfs_params),
            zfs_version=str(pre.fingerprint.get("zfs_version", "")),
        )
        self.kinds = target_kinds(self.ws)
        #: module parameters the campaign sets ([tunables], matrix.tunables); restored by run_campaign
        self.tunables = (
            Tunables(host, spec.campaign_id, spec.path) if spec.tunables or "tunables" in spec.matrix else None
        )
        self._extra_fingerprint = dict(extra_fingerprint or {})
        self.fingerprint = self.make_fingerprint()
        self.outcome = Outcome()
        self._copy_source_ready = False
        self._devices: dict[str, list[str]] = {}  # target name -> physical devices sampled
        #: per disk, where the next cooldown's idle window can start (schedule/cooldown.py idle_marks)
        self._idle_marks: dict[str, list[dict[str, Any]]] = {}
        #: the agent's counters where the next noise window can start (the last run's end, a cooldown's start)
        self._since: dict[str, Any] | None = None
        #: a noise measurement the next run's own fio_run request makes (preflight.deferrable): (request, pool)
        self._noise: tuple[dict[str, Any], str | None] | None = None
        #: what the runner is doing for the test in hand (a host failure is attributed to it): run, layout, …
        self.step = ""
        #: the row and Run journalled `crashed` when the host failed during a run; its fio's pid
        self._failed: tuple[int, Run, int | None] | None = None
        #: runs of a test in a row that a lost connection interrupted (the host answered with the same boot)
        self._blips: dict[str, int] = {}
        #: wait for a host that failed (recovery.py) and go on; off in a fleet, where its test case moves to
        #: another host instead (fleet.py), and the campaign stops as before
        self.wait_for_host = False
        self._names: dict[str, str] = {}  # test id -> name, of the tests run()

    def make_fingerprint(self) -> Fingerprint:
        """The host's facts, each target kind's (after setup: e.g. how a test guest is emulated) and the extras."""
        fp = dict(self.pre.fingerprint)
        fp["accelerator"] = self.host.accelerator
        fp["host"] = self.host.name
        fp.update(tankbench_version=__version__, agent_sha256=agent_sha256())  # what produced the run (pyperf)
        for kind in self.kinds.values():
            fp.update(kind.fingerprint())
        fp.update(self._extra_fingerprint)
        return Fingerprint(fp)

    # -- one run -------------------------------------------------------------------------
    def prepare(self, test: Test) -> dict[str, Any]:
        """Provision and lay out the test's target; return the checks that prove it (verified, not assumed)."""
        kind = self.kinds[test.target.kind]
        if type(kind).prepare is TargetKind.prepare and not test.is_copy:  # the two steps apart: a crash names its step
            self.step = "provisioning"
            kind.provision(test)
            self.step = "layout"
            checks = kind.lay_out(test)
        else:
            self.step = "provisioning and layout"
            checks = kind.prepare(test)
        if test.target.name not in self._devices:
            self._devices[test.target.name] = self.devices(test)
        checks["devices"] = self._devices[test.target.name]
        return checks

    def execute(self, test: Test, run_no: int, warm: bool, attempt: int, checks: dict[str, Any]) -> Run:
        """Run fio once and journal the frozen Run (a `running` row exists while it is in flight)."""
        spec = self.spec
        self.ws.run_seq += 1  # what a kind learned at the end of the previous run no longer stands for the next
        row = self.journal.begin_run(
            test.id, run_no, warm, attempt, test.expected_s, self.host.name, boot_id=self.pre.boot_id
        )
        watch = spec.unattended
        deadline = deadline_s(test, watch.late_max_s, spec.min_throughput)
        request = {
            "op": "fio_run",
            "job_text": run_job_text(test),
            "deadline_s": deadline,
            "hung_after_s": watch.hung_after_s,
            "workdir": f"{self.workdir}/{test.id}",
            "devices": checks.get("devices", []),
            "interval": spec.sample_interval,
            "drain_max_s": spec.drain_max,
        }
        if test.is_copy:
            request["argv"] = copy_argv(str(test.params["workload"]), self.copy_source(), test_file_path(test))
            request["sync_cmd"] = ["sync"]
            request["deadline_s"] = deadline = spec.copy_size / (1 << 20) + watch.late_max_s
        request.update(self.kinds[test.target.kind].capture(test))
        noise, self._noise = self._noise, None
        if noise is not None:
            request["noise"] = noise[0]

        pid: list[int] = []

        def on_event(ev: dict[str, Any]) -> None:
            if ev.get("event") == "started":
                pid.append(int(ev["pid"]))
                self.journal.set_run_pid(row, int(ev["pid"]))

        started = time.time()

        def unprocessed(status: str, note: str, **measured: Any) -> Run:
            """The row of a run whose result could not be made into a Run: what was measured, and why."""
            return Run(
                test_id=test.id,
                run_no=run_no,
                warmup=warm,
                attempt=attempt,
                status=status,
                started=started,
                ended=time.time(),
                host=self.host.name,
                fingerprint_id=self.fingerprint.id,
                expected_s=test.expected_s,
                note=note,
                **measured,
            )

        self._since = None
        try:
            res = self.kinds[test.target.kind].run_fio(test, request, on_event, deadline + spec.drain_max + 120)
            if isinstance(res.get("counters"), dict):
                self._since = dict(res["counters"], **{"from": "previous run"})
            self._idle_marks.update(idle_marks(res))
        except HostError as e:
            failed = unprocessed("crashed", f"the host failed during the run: {e}", checks={"crash.step": "run"})
            self.journal.finish_run(row, failed)
            self._failed = (row, failed, pid[-1] if pid else None)
            raise
        if noise is not None and isinstance(res.get("noise"), dict):
            checks = dict(
                checks, **self.noise_verdict(test, preflight_mod.verdict_of(res["noise"], noise[1], spec.preflight))
            )
        try:
            run = self.result_to_run(test, run_no, warm, attempt, started, res, checks)
        except (KeyError, ValueError, TypeError) as e:  # a bug of ours must not lose what was measured
            self.progress.note(f"warning: could not process the result of {test.name}: {type(e).__name__}: {e}")
            run = unprocessed(
                "failed",
                f"tankbench could not process this result ({type(e).__name__}: {e}); raw output kept",
                wall_s=res.get("wall_s"),
                drain_s=res.get("drain_s"),
                samples=res.get("samples", {}),
                fio_json=res.get("fio_json", ""),
                exit_status=res.get("exit_status"),
                stderr_tail=res.get("stderr_tail", ""),
            )
        self.journal.finish_run(row, run)
        return replace(run, row_id=row)

    def hook(self, event: str, message: str, test: str = "", exit_status: int | None = None) -> None:
        """Tell the campaign's hook command (campaign.hook) about an event."""
        call_hook(
            self.spec.unattended.hook,
            event,
            self.progress.note,
            campaign=self.spec.name,
            journal=self.journal.path,
            host=self.host.name,
            message=message,
            test=test,
            exit_status=exit_status,
        )

    def copy_source(self) -> str:
        """A random-filled source file for copy tests, laid out and verified once per run of the campaign."""
        path = f"{self.workdir}/copy-source.bin"
        if not self._copy_source_ready:
            res = self.host.call_agent(
                {"op": "prepare_file", "path": path, "size": self.spec.copy_size},
                timeout=max(600.0, self.spec.copy_size / (5 << 20)),
            )
            if not res["checks"].get("layout.verified"):
                raise HostError(f"{self.host.name}: copy source {path} failed verification: {res['checks']}")
            self._copy_source_ready = True
        return path

    def result_to_run(
        self,
        test: Test,
        run_no: int,
        warm: bool,
        attempt: int,
        started: float,
        res: dict[str, Any],
        checks: dict[str, Any],
    ) -> Run:
        """Combine fio's JSON, the agent's measurements and the target kind's capture into one validated Run."""
        verdict = decide_run(test, res, self.spec.timing_threshold, self.spec.copy_size)
        metrics = dict(verdict.metrics)
        all_checks = dict(checks)
        all_checks.update(res.get("checks", {}))
        all_checks.update(verdict.checks)
        all_checks.update(steady_state_from_text(res.get("fio_json", "")))
        all_checks.setdefault("preflight.load1", self.pre.load1)
        all_checks.setdefault("preflight.dirty_bytes", self.pre.dirty_bytes)
        all_checks.pop("devices", None)
        samples = dict(res.get("samples", {}))
        # module parameters as this run had them (a tunables axis changes them between runs)
        res = dict(res, tunables=checks.get("tunables.readback", {}))
        km, kc, ks = self.kinds[test.target.kind].after_run(test, res, metrics)
        metrics.update(km)
        all_checks.update(kc)
        samples.update(ks)
        if "zfs.direct_ignored" in all_checks:  # the prediction from version and properties, against the run
            all_checks.update(direct_io_confirm(all_checks.get("zfs.direct_ignored"), metrics))
        invalid = run_validity(test.params, all_checks)
        all_checks["valid"] = not invalid
        if invalid:
            all_checks["validity.reasons"] = invalid
            verdict = replace(verdict, notes=(*verdict.notes, "not a valid measurement: " + "; ".join(invalid)))
        return Run(
            test_id=test.id,
            run_no=run_no,
            warmup=warm,
            attempt=attempt,
            status=verdict.status,
            started=started,
            ended=time.time(),
            host=self.host.name,
            fingerprint_id=self.fingerprint.id,
            expected_s=test.expected_s,
            wall_s=verdict.wall_s,
            drain_s=float(res.get("drain_s", 0.0)),
            metrics=metrics,
            checks=all_checks,
            samples=samples,
            fio_json=res.get("fio_json", ""),
            exit_status=res.get("exit_status"),
            stderr_tail=res.get("stderr_tail", ""),
            note="; ".join(verdict.notes),
        )

    def cooldown(self, test: Test) -> dict[str, Any]:
        """Wait before a run (fixed, or until the host is quiet); return cooldown.* checks for that run."""
        c = self.spec.cooldown
        if not c.active:
            return {}
        pool = self.spec.pool.pool_name if self.spec.pool is not None and kind_of(test.target).needs_pool else ""
        devices = self._devices.get(test.target.name) or self.devices(test)
        req = dict(cooldown_request(c, devices, pool, self.pre.load1, self._idle_marks), counters_devices=devices)
        res = self.host.call_agent(req, timeout=c.fixed_s + c.max_s + 120)
        if isinstance(res.get("counters"), dict):
            self._since = dict(res["counters"], **{"from": "cooldown"})
        return cooldown_checks(res)

    def run(self, tests: list[Test]) -> Outcome:
        """Every pending run in the schedule's order (issue 11: warm-ups, rounds, adaptive repeats, racing)."""
        self.outcome.tests = len(tests)
        self._names = {t.id: t.name for t in tests}
        existing = [r for r in self.journal.runs(with_samples=False) if r.test_id in {t.id for t in tests}]
        sched = Scheduler(
            tests,
            self.spec.schedule,
            history_from_runs(existing),
            decided_from_runs(existing),
            crash_retries=self.spec.unattended.crash_retries,
        )
        self.outcome.runs_skipped_existing = sum(1 for r in existing if r.status in FINISHED)
        self.skip_crashed(sched)
        estimator = Estimator(self.spec, priors_for(self.host.accelerator == "tcg"))
        estimator.learn(existing, tests)
        self.progress.estimate = lambda: estimator.estimate(sched)
        self.progress.runs_left = lambda: ((r := sched.remaining()).runs_low + r.warmups, r.runs_high + r.warmups)
        try:
            self.setup_kinds(sorted({t.target.kind for t in tests if not sched.states[t.id].final}))
            estimator.setup_done = True
            # what setup learned (e.g. the accelerator a test guest booted with) belongs to every run's fingerprint
            self.fingerprint = self.make_fingerprint()
            self.journal.add_fingerprint(self.fingerprint)
            with self.host.agent_session():  # one agent process for the runs, not a python3 start per call
                self.run_schedule(tests, sched, existing, estimator)
        finally:
            for k in self.kinds.values():
                k.finish()  # e.g. power off a test guest, whatever happened
        return self.outcome

    def setup_kinds(self, kinds: list[str]) -> None:
        """Each kind's setup (pool creation, a guest's boot). A host that goes down meanwhile is waited for as during
        a run (recovery.py), then the setup is done again, at most crash_retries + 1 more times; no test is to
        blame, so no row is journalled: the progress and the hooks say it."""
        for again in range(self.spec.unattended.crash_retries + 2):
            try:
                for kind in kinds:
                    self.kinds[kind].setup()
                return
            except HostError as e:
                if not self.wait_for_host or again > self.spec.unattended.crash_retries:
                    raise
                waiter = HostWaiter(self.host, self.spec.unattended.host_wait_s, self.progress.note)
                down_since = time.monotonic()
                boot = waiter.boot_id(timeout=20)
                if boot is not None and boot == self.pre.boot_id and not connection_lost(str(e)):
                    raise  # a command failed on a host that is up: no host failure to wait out
                message = f"the host failed during the setup ({', '.join(kinds)}): {e}"
                self.progress.note(message)
                self.outcome.host_failures += 1
                self.hook("crash", message)
                self.hook("host-down", f"{self.host.name} stopped answering during the setup")
                back = waiter.wait(self.pre.boot_id, since=down_since)
                if back.rebooted:
                    self.pre.boot_id = back.boot_id
                    self.reset_after_reboot()
                self.hook("host-back", f"{self.host.name} is back; the setup is done again")

    def run_schedule(self, tests: list[Test], sched: Scheduler, existing: list[Run], estimator: Estimator) -> None:
        """Each batch the scheduler hands out: prepare, cool down, check noise, run, observe, decide."""
        seen_configs: set[str] = {config_key(t) for t in tests if sched.states[t.id].obs}
        last_row: dict[str, int] = {r.test_id: r.row_id for r in existing}
        prev_end: float | None = None
        while batch := sched.next_batch():
            for slot in batch:
                test = slot.test
                if sched.states[test.id].final == "skip":  # it crashed its host once too often in this batch
                    continue
                try:
                    checks = self.between_runs(test, prev_end)
                    self.progress.start(
                        test.number,
                        len(tests),
                        test.number,
                        test.name,
                        slot.label(self.spec.schedule.repeats_max),
                        test.expected_s + 1,
                    )
                    self.step = "run"
                    run = self.execute(test, slot.run_no, slot.warmup, slot.attempt, checks)
                except HostError as e:
                    run = self.host_failed(test, slot.run_no, slot.warmup, slot.attempt, e)
                    last_row[test.id] = run.row_id
                    prev_end = None
                    self.record(sched.observe(test.id, observation(run)), last_row, estimator)
                    continue
                self._blips.pop(test.id, None)
                self.count(run)
                self.progress.finish(run.status, describe(run))
                new_config = config_key(test) not in seen_configs
                seen_configs.add(config_key(test))
                estimator.observe(run, test, 0.0 if prev_end is None else run.started - prev_end, new_config)
                prev_end = run.ended
                last_row[test.id] = run.row_id
                self.record(sched.observe(test.id, observation(run)), last_row, estimator)
            self.record(sched.end_batch(), last_row, estimator)

    def host_failed(self, test: Test, run_no: int, warm: bool, attempt: int, e: HostError) -> Run:
        """The host failed during `self.step` of a test: journal it `crashed` (attributed to the test and step),
        wait for the host (recovery.py), bring it back to the campaign's state and return the row as it ends
        (`crashed`, or `interrupted` when only the connection was lost). HostError when the host does not come
        back within campaign.host_wait, or when it answers with the same boot and the failure was no lost
        connection (a plain failure of a command: the campaign stops as before)."""
        down_since = time.monotonic()
        self.host.drop_agent_session(wait_s=0.5)  # it may be a stale process on a host that went away
        step, self.step = self.step or "run", ""
        failed, self._failed = self._failed, None
        if not self.wait_for_host:
            if failed is not None:
                self.hook("crash", f"the host failed during the run of {test.name}: {e}", test=test.name)
            raise e
        waiter = HostWaiter(self.host, self.spec.unattended.host_wait_s, self.progress.note)
        boot = waiter.boot_id(timeout=20)
        if boot is not None and boot == self.pre.boot_id and not connection_lost(str(e)):
            # the host is up, same boot: a test guest that crashed is booted again and the test retried;
            # otherwise a command failed (no host failure to wait out) and the campaign stops
            guest = self.crashed_guest()
            if guest is not None:
                return self.guest_failed(
                    test, step, failed or self.crashed_row(test, run_no, warm, attempt, step, e), *guest
                )
            if failed is not None:
                self.hook("crash", f"the host failed during the run of {test.name}: {e}", test=test.name)
            raise e
        failed = failed or self.crashed_row(test, run_no, warm, attempt, step, e)
        row, run, pid = failed
        run = replace(run, row_id=row)
        self.outcome.host_failures += 1
        message = f"the host failed during the {step} of {test.name}: {e}"
        self.progress.note(message)
        self.hook("crash", message, test=test.name)
        self.hook("host-down", f"{self.host.name} stopped answering during the {step} of {test.name}", test=test.name)
        for again in range(3):
            back = waiter.wait(self.pre.boot_id, since=down_since if again == 0 else None)
            try:
                return self.host_back(test, step, row, run, pid, back, e)
            except HostError as failed_again:  # it went down again while being brought back: wait again
                if again == 2 or not connection_lost(str(failed_again)):
                    raise
                self.progress.note(f"{self.host.name} failed again while it was brought back: {failed_again}")
        raise AssertionError("unreachable")

    def crashed_row(
        self, test: Test, run_no: int, warm: bool, attempt: int, step: str, e: HostError
    ) -> tuple[int, Run, int | None]:
        """A failure outside fio: a row of its own says which step of which test the host (or guest) failed in."""
        row = self.journal.begin_run(
            test.id, run_no, warm, attempt, test.expected_s, self.host.name, boot_id=self.pre.boot_id
        )
        run = Run(
            test_id=test.id,
            run_no=run_no,
            warmup=warm,
            attempt=attempt,
            status="crashed",
            started=time.time(),
            ended=time.time(),
            host=self.host.name,
            fingerprint_id=self.fingerprint.id,
            expected_s=test.expected_s,
            note=f"the host failed during the {step} of this test: {e}",
            checks={"crash.step": step},
        )
        self.journal.finish_run(row, run)
        return row, run, None

    def crashed_guest(self) -> tuple[TargetKind, str] | None:
        """The kind whose test guest died while the host stayed up, and why (None when no guest did)."""
        for kind in self.kinds.values():
            try:
                why = kind.crashed_guest()
            except HostError:
                continue
            if why:
                return kind, why
        return None

    def guest_failed(
        self, test: Test, step: str, failed: tuple[int, Run, int | None], kind: TargetKind, why: str
    ) -> Run:
        """The test guest died during `step` of a test (the host did not): the row stays `crashed`, attributed to
        the test and the guest, a new guest boots, and the scheduler retries the test (campaign.crash_retries
        counts it like a host crash)."""
        row, run, _ = failed
        note = f"the test guest crashed during the {step} of this test: {why}"
        run = replace(
            run, row_id=row, note=note, checks=dict(run.checks, **{"crash.layer": "guest", "crash.guest": why})
        )
        self.journal.finish_run(row, run)
        self.outcome.guest_failures += 1
        self.progress.note(f"{test.name}: {note}; booting a new guest")
        self.hook("crash", f"the test guest crashed during the {step} of {test.name}: {why}", test=test.name)
        kind.restart_guest()
        return run

    def host_back(self, test: Test, step: str, row: int, run: Run, pid: int | None, back: Back, e: HostError) -> Run:
        """The host answers again: after a blip, end the run's fio if it still runs and journal it `interrupted`;
        after a reboot, restore the campaign's state and keep the row `crashed` with what its kernel said."""
        checks = dict(run.checks, **back.checks())
        if not back.rebooted:
            blips = self._blips[test.id] = self._blips.get(test.id, 0) + 1
            ended = self.host.call_agent(
                {"op": "end_pids", "pids": [(pid, f"{self.workdir}/{test.id}/job.fio")] if pid else []}, timeout=60
            )
            what = f"its fio (pid {pid}) was still running and was ended" if ended.get("ended") else "no fio of it runs"
            run = replace(
                run,
                status="interrupted",
                checks=checks,
                note=f"the connection to {self.host.name} was lost during the {step} (same boot, {what}): {e}",
            )
            self.journal.finish_run(row, run)
            self.hook(
                "host-back", f"{self.host.name} answers again (same boot); {test.name} is run again", test=test.name
            )
            if blips > 3:
                raise HostError(f"{self.host.name}: the connection was lost {blips} times in a row during {test.name}")
            return run
        self.progress.note(
            f"{self.host.name} is back after {fmt_duration(back.down_s)} (rebooted"
            + (" by tankbench" if back.relaunched else "")
            + "); restoring the campaign's state"
        )
        self.pre.boot_id = back.boot_id
        checks.update(self.restore_after_reboot(back))
        if back.panic_line():
            run = replace(run, note=f"{run.note}; kernel: {back.panic_line()}")
        run = replace(run, checks=checks)
        self.journal.finish_run(row, run)
        self.hook(
            "host-back", f"{self.host.name} is back (rebooted); the campaign goes on with {test.name}", test=test.name
        )
        return run

    def restore_after_reboot(self, back: Back) -> dict[str, Any]:
        """The host booted again: its private dirs anew, the lab's disk models and ARC, the pool imported with keys
        loaded (each target kind's `recover`); tunables are set and read back again before the next run."""
        self.reset_after_reboot()
        self.ws.zfs_recovered = False
        checks: dict[str, Any] = {}
        for kind in self.kinds.values():
            checks.update(kind.recover(True))
        return checks

    def reset_after_reboot(self) -> None:
        """What a reboot took with it: the host's private dirs, the lab's disk models and ARC size (set again)."""
        self.host.__dict__.pop("_private_dirs", None)
        self.workdir = self.ws.workdir = f"{work_root(self.host)}/{self.spec.campaign_id}"
        self._since = None
        self._copy_source_ready = False
        if isinstance(self.host, LabHost):
            from tankbench.lab import vm

            vm.apply_machine(self.host.lab_name, self.host, self.spec.host.lab_machine, self.progress.note)

    def between_runs(self, test: Test, prev_end: float | None) -> dict[str, Any]:
        """Everything before a run (tunables, prepare, cache, cooldown, noise check), each step's seconds in the
        run's checks (`harness.*_s`; `harness.gap_s`: from the previous run's end, journalling included)."""
        steps: dict[str, float] = {}
        t = time.monotonic()

        def step(name: str) -> None:
            nonlocal t
            now = time.monotonic()
            steps[f"harness.{name}_s"] = round(now - t, 4)
            t = now

        self.step = "tunables"
        tunables = self.tunables.apply(test) if self.tunables else {}
        step("tunables")
        checks = self.prepare(test)
        checks.update(tunables)
        step("prepare")
        pool = self.spec.pool.name if self.spec.pool is not None and self.spec.pool.creates else None
        pool = pool if kind_of(test.target).cold_cache_cycles_pool else None
        self.step = "cache"
        checks.update(prepare_cache(self.host, test, pool))  # after the layout: cold means cold
        step("cache")
        self.step = "cooldown"
        checks.update(self.cooldown(test))  # after prepare: its layout and checks are I/O too
        step("cooldown")
        self.step = "noise check"
        checks.update(self.noise_check(test, checks["devices"]))
        step("noise")
        checks.update(steps)
        if prev_end is not None:
            checks["harness.gap_s"] = round(time.time() - prev_end, 4)
        return checks

    def skip_crashed(self, sched: Scheduler) -> None:
        """Tests that crashed their host more than campaign.crash_retries times are skipped (noted in the journal)."""
        for st in sched.states.values():
            if st.final == "skip" or st.crashes >= sched.max_crashes:
                note = f"skipped: crashed {st.crashes} times (the host went down during its runs)"
                self.journal.set_skip_note(st.test.id, note)
                self.outcome.tests_skipped.append(st.test.name)
                self.progress.note(f"{st.test.number:04d} {st.test.name}: {note}")

    def record(self, decisions: list[Decision], last_row: dict[str, int], estimator: Estimator) -> None:
        """Journal each adaptive decision in the checks of the test's last run, and say it."""
        for d in decisions:
            if d.test_id in last_row:
                self.journal.merge_run_checks(last_row[d.test_id], d.as_checks())
            if d.kind in ("stop", "max", "drop", "settled"):
                estimator.learn_repeats([d.after_runs])
            if d.kind != "max" or self.spec.schedule.adaptive:
                self.progress.note(f"    {d.kind}: {d.reason}")
            if d.kind == "skip":  # it crashed its host once too often in this run of the campaign (host waited for)
                note = f"skipped: crashed {d.evidence.get('crashes', '?')} times (the host went down during its runs)"
                self.journal.set_skip_note(d.test_id, note)
                name = self._names.get(d.test_id, d.test_id)
                if name not in self.outcome.tests_skipped:
                    self.outcome.tests_skipped.append(name)

    def noise_check(self, test: Test, devices: list[str]) -> dict[str, Any]:
        """Before a run: scrub/resilver, other I/O on its disks, swap traffic, load — wait, refuse or record and
        warn, as the campaign's [preflight] says (preflight.py); the verdict goes into the run's checks."""
        policy = self.spec.preflight
        if all(getattr(policy, k) == "off" for k in ("scrub", "disk_io", "swap", "load")):
            return {}
        pool = self.spec.pool.pool_name if self.spec.pool is not None and kind_of(test.target).needs_pool else None
        # measured by the run's own request (one round trip less), where that request is the host agent's fio_run
        if preflight_mod.deferrable(policy, pool) and not kind_of(test.target).runs_in_guest:
            self._noise = (preflight_mod.noise_request(pool, devices, policy, self._since), pool)
            return {}
        verdict = preflight_mod.before_run(self.host, pool, devices, policy, note=self.progress.note, since=self._since)
        if verdict.action == "refuse":
            raise UserError(*verdict.refusal())
        return self.noise_verdict(test, verdict)

    def noise_verdict(self, test: Test, verdict: preflight_mod.PreflightVerdict) -> dict[str, Any]:
        """Say the verdict's warnings; return its checks for the run."""
        for warning in verdict.warnings:
            self.progress.note(f"warning: {test.name}: {warning}")
        return dict(verdict.checks())

    def devices(self, test: Test) -> list[str]:
        """Physical disks under the test's target, for /proc/diskstats sampling (ZFS: the pool's vdevs)."""
        paths = self.kinds[test.target.kind].device_paths(test)
        probe = self.host.call_agent({"op": "probe", "paths": paths, "block_devices": []}, timeout=120)
        return sorted({d for p in paths for d in probe["paths"][p]["devices"]})

    def count(self, run: Run) -> None:
        o = self.outcome
        if run.status == "done":
            o.runs_done += 1
        elif run.status == "timeout":
            o.runs_timeout += 1
        else:
            o.runs_failed += 1


def describe(run: Run) -> str:
    """One line: IOPS, MiB/s, p99 and the timing KPI of a run."""
    m = run.metrics
    bits = []
    if "copy.bytes" in m:
        bits.append(
            f"apparent {m['copy.apparent_bw_bytes'] / 1048576:.1f} MiB/s, "
            f"durable {m['copy.durable_bw_bytes'] / 1048576:.1f} MiB/s"
        )
    elif "total.iops" in m:
        bits.append(f"{m['total.iops']:.0f} IOPS, {m.get('total.bw_bytes', 0) / 1048576:.1f} MiB/s")
        if "timing.durable_bw_bytes" in m:
            bits.append(f"durable {m['timing.durable_bw_bytes'] / 1048576:.1f} MiB/s")
    p99 = max(m.get("read.lat_p99_ns", 0), m.get("write.lat_p99_ns", 0))
    if p99:
        bits.append(f"p99 {p99 / 1e6:.2f} ms")
    if run.wall_s is not None:
        bits.append(f"wall {run.wall_s:.1f}s vs expected {run.expected_s:.1f}s")
    if run.drain_s:
        bits.append(f"drain {run.drain_s:.1f}s")
    if run.checks.get("timing.issue"):
        bits.append("TIMING ISSUE")
    if run.note:
        bits.append(run.note)
    return ", ".join(bits)


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
    journal_path = journal_path or default_journal_path(spec)
    try:
        pre = preflight(host, spec, tests=tests)
        extra = dict(host.fingerprint_extra())
        with JournalLock(journal_path):
            journal = Journal(journal_path)
            try:
                index_for_reports(journal)
                crashed = journal.mark_crashed({host.name: pre.boot_id} if pre.boot_id else None)
                end_stale(host, crashed, spec)
                journal.add_campaign(spec.campaign_id, spec.name, os.path.abspath(spec.path), spec.text)
                journal.add_tests(spec.campaign_id, tests, {t.id: job_text(t) for t in tests})
                runner = CampaignRunner(spec, host, journal, progress, pre, extra)
                runner.wait_for_host = True
                runner.outcome.runs_crashed_found = len(crashed)
                if crashed and pre.boot_id:  # the machine went down under them: crash rows and hooks as over ssh
                    crashes_found(
                        journal,
                        host,
                        crashed,
                        pre.boot_id,
                        {t.id: t.name for t in tests},
                        runner.hook,
                        progress.note,
                        resumeboot.resumed_by(),
                    )
                if crashed:
                    progress.note(
                        f"resuming: {len(crashed)} run(s) were in progress when the last run died; they "
                        "are retried (marked crashed if the host went down since, else interrupted: "
                        "only host crashes count toward skipping a test)"
                    )
                if runner.tunables is not None:
                    stale = runner.tunables.restore_stale()
                    if stale:
                        progress.note(
                            f"restored module parameters a crashed run left set: {stale['tunables.restored']}"
                        )
                stopped: BaseException | None = None
                try:
                    outcome = runner.run(tests)
                    outcome.journal, outcome.seconds = journal_path, time.monotonic() - t0
                    runner.hook("end", summary_line(outcome), exit_status=outcome.exit_status)
                except BaseException as e:
                    stopped = e
                    status = stop_status(e)
                    runner.hook("end", f"the campaign stopped: {e or type(e).__name__}", exit_status=status)
                    raise
                finally:
                    if runner.tunables is not None:
                        try:
                            runner.tunables.restore()
                        except (HostError, UserError) as err:
                            if stopped is None:
                                raise
                            # the host that stopped the campaign cannot take them back: the next run does
                            progress.note(f"warning: module parameters not restored ({err}); `tankbench run` does")
            finally:
                journal.close()
    finally:
        host.close()
        if isinstance(host, LabHost):
            leave_lab(host, keep_lab, progress.note)
    outcome.journal = journal_path
    outcome.seconds = time.monotonic() - t0
    return outcome


def stop_status(e: BaseException) -> int:
    """The exit status `tankbench run` ends with for an exception that stopped the campaign (cli/run.py)."""
    if isinstance(e, HostError):
        return 3
    if isinstance(e, UserError):
        return 2
    return 130 if isinstance(e, KeyboardInterrupt) else 1


def leave_lab(host: LabHost, keep: bool, note: Callable[[str], None]) -> None:
    """Shut down a lab this run booted (unless asked to keep it); say so when a lab stays up (~3 GB resident)."""
    name = host.lab_name
    how = "tankbench lab down" + ("" if name == "default" else f" --name {name}")
    if host.started_here and not keep:
        from tankbench.lab import vm

        vm.down(name, note)
    elif host.started_here:
        note(f"lab {name} is still up (--keep-lab): stop it with `{how}`")
    else:
        note(f"lab {name} was up before this run and is still up: stop it with `{how}`")


def end_stale(host: Host, crashed: list[tuple[int, str, int | None, str]], spec: Spec) -> None:
    """fio processes of crashed runs that still live on this host: end them (only ours, by pid)."""
    pids = [
        (pid, f"{work_root(host)}/{spec.campaign_id}/{test_id}/job.fio")
        for _, test_id, pid, h in crashed
        if pid and h == host.name
    ]
    if pids:
        host.call_agent({"op": "end_pids", "pids": pids}, timeout=60)


def summary_line(o: Outcome) -> str:
    """The campaign's last line: the time belongs to the runs ("13 run(s) done in 8m00s, the host went down 1
    time(s) …"), not to the last clause, which read as if the host had been waited for that long."""
    parts = [f"{o.runs_done} run(s) done in {fmt_duration(o.seconds)}"]
    if o.runs_failed:
        parts.append(f"{o.runs_failed} failed")
    if o.runs_timeout:
        parts.append(f"{o.runs_timeout} timed out")
    if o.runs_skipped_existing:
        parts.append(f"{o.runs_skipped_existing} already in the journal")
    if o.tests_skipped:
        parts.append(f"{len(o.tests_skipped)} test(s) skipped after crashing the host (campaign.crash_retries)")
    if o.host_failures:
        parts.append(f"the host went down {o.host_failures} time(s) and was waited for")
    if o.guest_failures:
        parts.append(f"the test guest died {o.guest_failures} time(s) and was booted again")
    return f"{', '.join(parts)}; journal: {o.journal}"
