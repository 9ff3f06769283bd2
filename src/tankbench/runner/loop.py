"""The schedule loop of one host: every pending run in the scheduler's order (warm-ups, rounds, adaptive repeats,
racing), each done by run.py, each host failure handed to failure.py, each decision journalled and said."""

from __future__ import annotations

from typing import Any

from tankbench.campaign import Spec
from tankbench.errors import HostError
from tankbench.hosts.base import Host
from tankbench.journal import Journal
from tankbench.model import Fingerprint, Run, Test
from tankbench.progress import Progress
from tankbench.runner.context import Attempt, HostRun, StepFailed
from tankbench.runner.failure import FailureHandling
from tankbench.runner.outcome import Outcome, describe
from tankbench.runner.probe import Preflight
from tankbench.runner.run import OneRun
from tankbench.schedule.configs import config_key
from tankbench.schedule.estimate import Estimator, priors_for
from tankbench.schedule.rules import FINISHED, Decision, observation
from tankbench.schedule.scheduler import Scheduler, decided_from_runs, history_from_runs
from tankbench.targets import TargetKind, Workspace
from tankbench.tunables import Tunables


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
        self.ctx = HostRun(spec, host, journal, progress, pre, extra_fingerprint)
        self.one = OneRun(self.ctx)
        self.failure = FailureHandling(self.ctx, on_reboot=self.one.forget_host_state)
        self._names: dict[str, str] = {}  # test id -> name, of the tests run()

    # what callers and tests read of the host's run
    @property
    def spec(self) -> Spec:
        return self.ctx.spec

    @property
    def kinds(self) -> dict[str, TargetKind]:
        return self.ctx.kinds

    @property
    def ws(self) -> Workspace:
        return self.ctx.ws

    @property
    def pre(self) -> Preflight:
        return self.ctx.pre

    @property
    def fingerprint(self) -> Fingerprint:
        return self.ctx.fingerprint

    @property
    def tunables(self) -> Tunables | None:
        return self.ctx.tunables

    @property
    def outcome(self) -> Outcome:
        return self.ctx.outcome

    @property
    def wait_for_host(self) -> bool:
        """Wait for a host that failed and go on (single host), or stop (a fleet moves its test cases)."""
        return self.failure.wait_for_host

    @wait_for_host.setter
    def wait_for_host(self, value: bool) -> None:
        self.failure.wait_for_host = value

    def result_to_run(self, test: Test, run_no: int, warm: bool, attempt: int, *rest: Any) -> Run:
        """OneRun.result_to_run (fio's JSON, the agent's measurements and the kind's capture as one Run)."""
        return self.one.result_to_run(test, run_no, warm, attempt, *rest)

    def run(self, tests: list[Test]) -> Outcome:
        """Every pending run in the schedule's order (issue 11: warm-ups, rounds, adaptive repeats, racing)."""
        ctx = self.ctx
        ctx.outcome.tests = len(tests)
        self._names = {t.id: t.name for t in tests}
        existing = [r for r in ctx.journal.runs(with_samples=False) if r.test_id in {t.id for t in tests}]
        sched = Scheduler(
            tests,
            ctx.spec.schedule,
            history_from_runs(existing),
            decided_from_runs(existing),
            crash_retries=ctx.spec.unattended.crash_retries,
        )
        ctx.outcome.runs_skipped_existing = sum(1 for r in existing if r.status in FINISHED)
        self.skip_crashed(sched)
        estimator = Estimator(ctx.spec, priors_for(ctx.host.accelerator == "tcg"))
        estimator.learn(existing, tests)
        ctx.progress.estimate = lambda: estimator.estimate(sched)
        ctx.progress.runs_left = lambda: ((r := sched.remaining()).runs_low + r.warmups, r.runs_high + r.warmups)
        try:
            self.setup_kinds(sorted({t.target.kind for t in tests if not sched.states[t.id].final}))
            estimator.setup_done = True
            # what setup learned (e.g. the accelerator a test guest booted with) belongs to every run's fingerprint
            ctx.fingerprint = ctx.make_fingerprint()
            ctx.journal.add_fingerprint(ctx.fingerprint)
            with ctx.host.agent_session():  # one agent process for the runs, not a python3 start per call
                self.run_schedule(tests, sched, existing, estimator)
        finally:
            for k in ctx.kinds.values():
                k.finish()  # e.g. power off a test guest, whatever happened
        return ctx.outcome

    def setup_kinds(self, kinds: list[str]) -> None:
        """Each kind's setup (pool creation, a guest's boot). A host that goes down meanwhile is waited for as during
        a run (recovery.py), then the setup is done again, at most crash_retries + 1 more times; no test is to
        blame, so no row is journalled: the progress and the hooks say it."""
        retries = self.ctx.spec.unattended.crash_retries
        for again in range(retries + 2):
            try:
                for kind in kinds:
                    self.ctx.kinds[kind].setup()
                return
            except HostError as e:
                if not self.failure.wait_for_host or again > retries:
                    raise
                self.failure.during_setup(kinds, e)

    def run_schedule(self, tests: list[Test], sched: Scheduler, existing: list[Run], estimator: Estimator) -> None:
        """Each batch the scheduler hands out: prepare, cool down, check noise, run, observe, decide."""
        ctx = self.ctx
        seen_configs: set[str] = {config_key(t) for t in tests if sched.states[t.id].obs}
        last_row: dict[str, int] = {r.test_id: r.row_id for r in existing}
        prev_end: float | None = None
        while batch := sched.next_batch():
            for slot in batch:
                test = slot.test
                if sched.states[test.id].final == "skip":  # it crashed its host once too often in this batch
                    continue
                at = Attempt(slot.run_no, slot.warmup, slot.attempt)
                try:
                    checks = self.one.between_runs(test, prev_end)
                    label = slot.label(ctx.spec.schedule.repeats_max)
                    ctx.progress.start(test.number, len(tests), test.number, test.name, label, test.expected_s + 1)
                    run = self.one.execute(test, at, checks)
                except StepFailed as failed:
                    run = self.failure.handle(test, at, failed)
                    last_row[test.id] = run.row_id
                    prev_end = None
                    self.record(sched.observe(test.id, observation(run)), last_row, estimator)
                    continue
                self.failure.went_through(test)
                ctx.outcome.count(run)
                ctx.progress.finish(run.status, describe(run))
                new_config = config_key(test) not in seen_configs
                seen_configs.add(config_key(test))
                estimator.observe(run, test, 0.0 if prev_end is None else run.started - prev_end, new_config)
                prev_end = run.ended
                last_row[test.id] = run.row_id
                self.record(sched.observe(test.id, observation(run)), last_row, estimator)
            self.record(sched.end_batch(), last_row, estimator)

    def skip_crashed(self, sched: Scheduler) -> None:
        """Tests that crashed their host more than campaign.crash_retries times are skipped (noted in the journal)."""
        for st in sched.states.values():
            if st.final == "skip" or st.crashes >= sched.max_crashes:
                note = f"skipped: crashed {st.crashes} times (the host went down during its runs)"
                self.ctx.journal.set_skip_note(st.test.id, note)
                self.ctx.outcome.tests_skipped.append(st.test.name)
                self.ctx.progress.note(f"{st.test.number:04d} {st.test.name}: {note}")

    def record(self, decisions: list[Decision], last_row: dict[str, int], estimator: Estimator) -> None:
        """Journal each adaptive decision in the checks of the test's last run, and say it."""
        ctx = self.ctx
        for d in decisions:
            if d.test_id in last_row:
                ctx.journal.merge_run_checks(last_row[d.test_id], d.as_checks())
            if d.kind in ("stop", "max", "drop", "settled"):
                estimator.learn_repeats([d.after_runs])
            if d.kind != "max" or ctx.spec.schedule.adaptive:
                ctx.progress.note(f"    {d.kind}: {d.reason}")
            if d.kind == "skip":  # it crashed its host once too often in this run of the campaign (host waited for)
                note = f"skipped: crashed {d.evidence.get('crashes', '?')} times (the host went down during its runs)"
                ctx.journal.set_skip_note(d.test_id, note)
                name = self._names.get(d.test_id, d.test_id)
                if name not in ctx.outcome.tests_skipped:
                    ctx.outcome.tests_skipped.append(name)
