"""One run of a test: everything before it (tunables, provisioning and layout, cache, cooldown, noise check), fio
under the agent's watchdog with its samplers, and the result made into a validated Run and journalled. A host
failure is raised as StepFailed naming the step (failure.py takes it from there)."""

from __future__ import annotations

import time
from dataclasses import replace
from typing import Any

from tankbench import preflight as preflight_mod
from tankbench.coldcache import prepare_cache
from tankbench.copytest import copy_argv
from tankbench.errors import HostError, UserError
from tankbench.fio.jobs import deadline_s, run_job_text, test_file_path
from tankbench.model import Run, Test
from tankbench.runner.context import Attempt, CrashedRow, HostRun, Step, StepFailed, during
from tankbench.schedule.cooldown import cooldown_checks, cooldown_request, idle_marks
from tankbench.schedule.steady import steady_state_from_text
from tankbench.targets import TargetKind, kind_of
from tankbench.verdict import decide_run
from tankbench.zfs.checks import direct_io_confirm, run_validity

#: a noise measurement the next run's own fio_run request makes (preflight.deferrable): (request, pool)
Deferred = tuple[dict[str, Any], str | None]


class OneRun:
    """Runs one test once on the host; keeps what one run leaves for the next (idle marks, counters)."""

    def __init__(self, ctx: HostRun) -> None:
        self.ctx = ctx
        self._copy_source_ready = False
        self._devices: dict[str, list[str]] = {}  # target name -> physical devices sampled
        #: per disk, where the next cooldown's idle window can start (schedule/cooldown.py idle_marks)
        self._idle_marks: dict[str, list[dict[str, Any]]] = {}
        #: the agent's counters where the next noise window can start (the last run's end, a cooldown's start)
        self._since: dict[str, Any] | None = None
        self._noise: Deferred | None = None

    def forget_host_state(self) -> None:
        """The host rebooted: the counters and the copy source went with it."""
        self._since = None
        self._copy_source_ready = False

    # -- before the run ------------------------------------------------------------------
    def between_runs(self, test: Test, prev_end: float | None) -> dict[str, Any]:
        """Everything before a run (tunables, prepare, cache, cooldown, noise check), each step's seconds in the
        run's checks (`harness.*_s`; `harness.gap_s`: from the previous run's end, journalling included)."""
        ctx = self.ctx
        steps: dict[str, float] = {}
        t = time.monotonic()

        def step(name: str) -> None:
            nonlocal t
            now = time.monotonic()
            steps[f"harness.{name}_s"] = round(now - t, 4)
            t = now

        with during(Step.TUNABLES):
            tunables = ctx.tunables.apply(test) if ctx.tunables else {}
        step("tunables")
        checks = self.prepare(test)
        checks.update(tunables)
        step("prepare")
        pool = ctx.spec.pool.name if ctx.spec.pool is not None and ctx.spec.pool.creates else None
        pool = pool if kind_of(test.target).cold_cache_cycles_pool else None
        with during(Step.CACHE):
            checks.update(prepare_cache(ctx.host, test, pool))  # after the layout: cold means cold
        step("cache")
        with during(Step.COOLDOWN):
            checks.update(self.cooldown(test))  # after prepare: its layout and checks are I/O too
        step("cooldown")
        with during(Step.NOISE):
            checks.update(self.noise_check(test, checks["devices"]))
        step("noise")
        checks.update(steps)
        if prev_end is not None:
            checks["harness.gap_s"] = round(time.time() - prev_end, 4)
        return checks

    def prepare(self, test: Test) -> dict[str, Any]:
        """Provision and lay out the test's target; return the checks that prove it (verified, not assumed)."""
        kind = self.ctx.kinds[test.target.kind]
        if type(kind).prepare is TargetKind.prepare and not test.is_copy:  # the two steps apart: a crash names its step
            with during(Step.PROVISIONING):
                kind.provision(test)
            with during(Step.LAYOUT):
                checks = kind.lay_out(test)
                return self._with_devices(test, checks)
        with during(Step.PREPARE):
            return self._with_devices(test, kind.prepare(test))

    def _with_devices(self, test: Test, checks: dict[str, Any]) -> dict[str, Any]:
        if test.target.name not in self._devices:
            self._devices[test.target.name] = self.devices(test)
        checks["devices"] = self._devices[test.target.name]
        return checks

    def devices(self, test: Test) -> list[str]:
        """Physical disks under the test's target, for /proc/diskstats sampling (ZFS: the pool's vdevs)."""
        paths = self.ctx.kinds[test.target.kind].device_paths(test)
        probe = self.ctx.host.call_agent({"op": "probe", "paths": paths, "block_devices": []}, timeout=120)
        return sorted({d for p in paths for d in probe["paths"][p]["devices"]})

    def cooldown(self, test: Test) -> dict[str, Any]:
        """Wait before a run (fixed, or until the host is quiet); return cooldown.* checks for that run."""
        ctx = self.ctx
        c = ctx.spec.cooldown
        if not c.active:
            return {}
        pool = ctx.spec.pool.pool_name if ctx.spec.pool is not None and kind_of(test.target).needs_pool else ""
        devices = self._devices.get(test.target.name) or self.devices(test)
        req = dict(cooldown_request(c, devices, pool, ctx.pre.load1, self._idle_marks), counters_devices=devices)
        res = ctx.host.call_agent(req, timeout=c.fixed_s + c.max_s + 120)
        if isinstance(res.get("counters"), dict):
            self._since = dict(res["counters"], **{"from": "cooldown"})
        return cooldown_checks(res)

    def noise_check(self, test: Test, devices: list[str]) -> dict[str, Any]:
        """Before a run: scrub/resilver, other I/O on its disks, swap traffic, load — wait, refuse or record and
        warn, as the campaign's [preflight] says (preflight.py); the verdict goes into the run's checks."""
        ctx = self.ctx
        policy = ctx.spec.preflight
        if all(getattr(policy, k) == "off" for k in ("scrub", "disk_io", "swap", "load")):
            return {}
        pool = ctx.spec.pool.pool_name if ctx.spec.pool is not None and kind_of(test.target).needs_pool else None
        # measured by the run's own request (one round trip less), where that request is the host agent's fio_run
        if preflight_mod.deferrable(policy, pool) and not kind_of(test.target).runs_in_guest:
            self._noise = (preflight_mod.noise_request(pool, devices, policy, self._since), pool)
            return {}
        verdict = preflight_mod.before_run(ctx.host, pool, devices, policy, note=ctx.progress.note, since=self._since)
        if verdict.action == "refuse":
            raise UserError(*verdict.refusal())
        return self.noise_verdict(test, verdict)

    def noise_verdict(self, test: Test, verdict: preflight_mod.PreflightVerdict) -> dict[str, Any]:
        """Say the verdict's warnings; return its checks for the run."""
        for warning in verdict.warnings:
            self.ctx.progress.note(f"warning: {test.name}: {warning}")
        return dict(verdict.checks())

    def copy_source(self) -> str:
        """A random-filled source file for copy tests, laid out and verified once per run of the campaign."""
        ctx = self.ctx
        path = f"{ctx.workdir}/copy-source.bin"
        if not self._copy_source_ready:
            res = ctx.host.call_agent(
                {"op": "prepare_file", "path": path, "size": ctx.spec.copy_size},
                timeout=max(600.0, ctx.spec.copy_size / (5 << 20)),
            )
            if not res["checks"].get("layout.verified"):
                raise HostError(f"{ctx.host.name}: copy source {path} failed verification: {res['checks']}")
            self._copy_source_ready = True
        return path

    # -- the run -------------------------------------------------------------------------
    def fio_request(self, test: Test, checks: dict[str, Any]) -> tuple[dict[str, Any], float]:
        """The agent's fio_run request for the test, and its deadline in seconds."""
        spec = self.ctx.spec
        watch = spec.unattended
        deadline = deadline_s(test, watch.late_max_s, spec.min_throughput)
        request = {
            "op": "fio_run",
            "job_text": run_job_text(test),
            "deadline_s": deadline,
            "hung_after_s": watch.hung_after_s,
            "workdir": f"{self.ctx.workdir}/{test.id}",
            "devices": checks.get("devices", []),
            "interval": spec.sample_interval,
            "drain_max_s": spec.drain_max,
        }
        if test.is_copy:
            request["argv"] = copy_argv(str(test.params["workload"]), self.copy_source(), test_file_path(test))
            request["sync_cmd"] = ["sync"]
            request["deadline_s"] = deadline = spec.copy_size / (1 << 20) + watch.late_max_s
        request.update(self.ctx.kinds[test.target.kind].capture(test))
        return request, deadline

    def execute(self, test: Test, at: Attempt, checks: dict[str, Any]) -> Run:
        """Run fio once and journal the frozen Run (a `running` row exists while it is in flight)."""
        with during(Step.RUN):
            return self._execute(test, at, checks)

    def _execute(self, test: Test, at: Attempt, checks: dict[str, Any]) -> Run:
        ctx = self.ctx
        ctx.ws.run_seq += 1  # what a kind learned at the end of the previous run no longer stands for the next
        row = ctx.journal.begin_run(
            test.id, at.run_no, at.warmup, at.attempt, test.expected_s, ctx.host.name, boot_id=ctx.pre.boot_id
        )
        request, deadline = self.fio_request(test, checks)
        noise, self._noise = self._noise, None
        if noise is not None:
            request["noise"] = noise[0]
        pid: list[int] = []

        def on_event(ev: dict[str, Any]) -> None:
            if ev.get("event") == "started":
                pid.append(int(ev["pid"]))
                ctx.journal.set_run_pid(row, int(ev["pid"]))

        started = time.time()
        self._since = None
        try:
            res = ctx.kinds[test.target.kind].run_fio(test, request, on_event, deadline + ctx.spec.drain_max + 120)
            if isinstance(res.get("counters"), dict):
                self._since = dict(res["counters"], **{"from": "previous run"})
            self._idle_marks.update(idle_marks(res))
        except HostError as e:
            note = f"the host failed during the run: {e}"
            failed = self.unprocessed(test, at, started, "crashed", note, checks={"crash.step": Step.RUN.value})
            ctx.journal.finish_run(row, failed)
            raise StepFailed(Step.RUN, e, CrashedRow(row, failed, pid[-1] if pid else None)) from e
        if noise is not None and isinstance(res.get("noise"), dict):
            verdict = preflight_mod.verdict_of(res["noise"], noise[1], ctx.spec.preflight)
            checks = dict(checks, **self.noise_verdict(test, verdict))
        run = self.processed(test, at, started, res, checks)
        ctx.journal.finish_run(row, run)
        return replace(run, row_id=row)

    def processed(self, test: Test, at: Attempt, started: float, res: dict[str, Any], checks: dict[str, Any]) -> Run:
        """The run made of the agent's result; a bug of ours in that must not lose what was measured."""
        try:
            return self.result_to_run(test, at.run_no, at.warmup, at.attempt, started, res, checks)
        except (KeyError, ValueError, TypeError) as e:
            what = f"{type(e).__name__}: {e}"
            self.ctx.progress.note(f"warning: could not process the result of {test.name}: {what}")
            return self.unprocessed(
                test,
                at,
                started,
                "failed",
                f"tankbench could not process this result ({what}); raw output kept",
                wall_s=res.get("wall_s"),
                drain_s=res.get("drain_s"),
                samples=res.get("samples", {}),
                fio_json=res.get("fio_json", ""),
                exit_status=res.get("exit_status"),
                stderr_tail=res.get("stderr_tail", ""),
            )

    def unprocessed(self, test: Test, at: Attempt, started: float, status: str, note: str, **measured: Any) -> Run:
        """The row of a run whose result could not be made into a Run: what was measured, and why."""
        return Run(
            test_id=test.id,
            run_no=at.run_no,
            warmup=at.warmup,
            attempt=at.attempt,
            status=status,
            started=started,
            ended=time.time(),
            host=self.ctx.host.name,
            fingerprint_id=self.ctx.fingerprint.id,
            expected_s=test.expected_s,
            note=note,
            **measured,
        )

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
        ctx = self.ctx
        verdict = decide_run(test, res, ctx.spec.timing_threshold, ctx.spec.copy_size)
        metrics = dict(verdict.metrics)
        all_checks = dict(checks)
        all_checks.update(res.get("checks", {}))
        all_checks.update(verdict.checks)
        all_checks.update(steady_state_from_text(res.get("fio_json", "")))
        all_checks.setdefault("preflight.load1", ctx.pre.load1)
        all_checks.setdefault("preflight.dirty_bytes", ctx.pre.dirty_bytes)
        all_checks.pop("devices", None)
        samples = dict(res.get("samples", {}))
        # module parameters as this run had them (a tunables axis changes them between runs)
        res = dict(res, tunables=checks.get("tunables.readback", {}))
        km, kc, ks = ctx.kinds[test.target.kind].after_run(test, res, metrics)
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
            host=ctx.host.name,
            fingerprint_id=ctx.fingerprint.id,
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
