"""Time to answer: pure functions that decide which run comes next, when repeats stop, which tests a race drops,
and how long the rest will take. No I/O: the runner feeds them what the journal holds and journals what they decide.

Vocabulary (DESIGN.md): a *configuration* is the provisioned target state a test runs on (target + ZFS
properties + SLOG state + file size): tests of one configuration share one dataset/zvol/file. A *round* is one
more measured run of each still-active test of the configuration being worked on.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from tankbench.analysis.stats import summarise, t_quantile
from tankbench.model import Run, Test, short_hash
from tankbench.spec.parse import FIO_AXES, Cooldown, Schedule, Spec
from tankbench.targets import kind_of

#: statuses that finish a planned run (a crashed run is retried once, like before)
FINISHED = ("done", "failed", "timeout")
#: the value a race and the stopping rule look at, in order of preference (same bs within a test case, so
#: bandwidth ranks exactly like IOPS); copy tests rank by durable bandwidth
VALUE_KEYS = ("total.bw_bytes", "copy.durable_bw_bytes")


# ------------------------------------------------------------------ configurations and warm-ups
def config_key(test: Test) -> str:
    """The provisioned state a test runs on: its target and every non-fio axis (ZFS properties, SLOG, size)."""
    state = {k: v for k, v in test.params.items() if k not in FIO_AXES or k == "size"}
    return short_hash({"target": test.target.canonical(), "state": state})


def config_groups(tests: Sequence[Test]) -> list[list[Test]]:
    """Tests grouped by configuration, groups in order of first appearance, tests in plan order."""
    groups: dict[str, list[Test]] = {}
    for t in tests:
        groups.setdefault(config_key(t), []).append(t)
    return list(groups.values())


def warmup_tests(tests: Sequence[Test], mode: str) -> set[str]:
    """Ids of the tests that get a warm-up run (run 0): all (per-test), the first of each configuration
    (per-config), or none."""
    if mode == "per-test":
        return {t.id for t in tests}
    if mode == "per-config":
        return {g[0].id for g in config_groups(tests)}
    return set()


# ------------------------------------------------------------------ what the journal says about a test
@dataclass(frozen=True)
class Observation:
    """One journalled run as the scheduler sees it."""

    run_no: int
    warmup: bool
    status: str
    value: float | None = None


def observation(run: Run) -> Observation:
    """The scheduler's view of a journalled Run (its ranking value when it is done)."""
    value = None
    if run.status == "done":
        value = next((float(run.metrics[k]) for k in VALUE_KEYS if k in run.metrics), None)
    return Observation(run.run_no, run.warmup, run.status, value)


@dataclass
class _TestState:
    test: Test
    position: int
    warmup: bool
    obs: list[Observation] = field(default_factory=list)
    final: str = ""  # "stop", "drop", "max" or "skip" once decided

    def finished(self, run_no: int, warm: bool) -> bool:
        return any(o.run_no == run_no and o.warmup == warm and o.status in FINISHED for o in self.obs)

    def attempt(self, run_no: int, warm: bool) -> int:
        """1 + the rows this run already has (crashed or interrupted attempts)."""
        return 1 + sum(1 for o in self.obs if o.run_no == run_no and o.warmup == warm)

    @property
    def measured(self) -> int:
        """Measured runs that finished (done, failed or timed out): they use up the repeat budget."""
        return len({o.run_no for o in self.obs if not o.warmup and o.status in FINISHED})

    @property
    def values(self) -> list[float]:
        return [o.value for o in self.obs if not o.warmup and o.status == "done" and o.value is not None]

    @property
    def crashes(self) -> int:
        """Runs that took their host down (`interrupted` ones, where only tankbench died, do not count)."""
        return sum(1 for o in self.obs if o.status == "crashed")


# ------------------------------------------------------------------ stopping rule and racing
@dataclass(frozen=True)
class StopCheck:
    """Whether a test needs more repeats, with the numbers that decided it."""

    stop: bool
    reason: str  # "ci", "max", "fixed" when stopping; "" when more repeats are needed
    n: int
    mean: float | None = None
    half_width: float | None = None
    target: float | None = None


def ci_half_width(values: Sequence[float]) -> float | None:
    """Half width of the 95 % confidence interval of the mean (Student t); None with fewer than 2 values."""
    if len(values) < 2:
        return None
    s = summarise(values)
    assert s is not None
    return t_quantile(0.975, len(values) - 1) * s.sd / math.sqrt(len(values))


def stop_rule(values: Sequence[float], runs: int, rmin: int, rmax: int, ci: float | None) -> StopCheck:
    """Stop at `rmax` runs, or after at least `rmin` once the 95 % CI half width is within `ci` x |mean|.

    `runs` counts finished measured runs (a failed run uses up budget but gives no value)."""
    s = summarise(values)
    mean = s.mean if s else None
    half = ci_half_width(values)
    target = ci * abs(mean) if ci is not None and mean is not None else None
    if runs >= rmax:
        return StopCheck(True, "max" if ci is not None else "fixed", runs, mean, half, target)
    if ci is None or runs < rmin or half is None or target is None:
        return StopCheck(False, "", runs, mean, half, target)
    return StopCheck(half <= target, "ci" if half <= target else "", runs, mean, half, target)


@dataclass(frozen=True)
class Bounds:
    """Mean and 95 % confidence bounds of one test's measured values."""

    test_id: str
    n: int
    mean: float
    low: float
    high: float


def bounds(test_id: str, values: Sequence[float]) -> Bounds | None:
    """Confidence bounds of the mean; None with fewer than 2 values (no interval yet)."""
    half = ci_half_width(values)
    if half is None:
        return None
    mean = math.fsum(values) / len(values)
    return Bounds(test_id, len(values), mean, mean - half, mean + half)


@dataclass(frozen=True)
class RaceDrop:
    """A test a race drops: its upper bound is below the leader's lower bound by more than the margin."""

    test_id: str
    leader_id: str
    evidence: Mapping[str, float]


def race(values: Mapping[str, Sequence[float]], candidates: Iterable[str], margin: float, min_n: int) -> list[RaceDrop]:
    """Inside one test case (higher is better): drop each candidate with at least `min_n` values whose
    upper 95 % bound < leader's lower bound x (1 - margin). The leader is the highest mean with an interval."""
    bs = {tid: b for tid, v in values.items() if (b := bounds(tid, v)) is not None}
    if not bs:
        return []
    leader = max(bs.values(), key=lambda b: (b.mean, b.test_id))
    bar = leader.low * (1.0 - margin)
    out = []
    for tid in candidates:
        b = bs.get(tid)
        if b is None or tid == leader.test_id or b.n < min_n or b.high >= bar:
            continue
        out.append(
            RaceDrop(
                tid,
                leader.test_id,
                {
                    "n": b.n,
                    "mean": b.mean,
                    "ci_high": b.high,
                    "leader_n": leader.n,
                    "leader_mean": leader.mean,
                    "leader_ci_low": leader.low,
                    "margin": margin,
                    "bar": bar,
                },
            )
        )
    return out


# ------------------------------------------------------------------ decisions (journal records)
@dataclass(frozen=True)
class Decision:
    """An adaptive decision about one test, for the journal and the report: nothing is decided silently.

    kind: "stop" (CI within target), "max" (max repeats reached without it), "drop" (a race dropped it),
    "skip" (crashed twice)."""

    test_id: str
    kind: str
    after_runs: int
    round_no: int
    reason: str
    evidence: Mapping[str, Any] = field(default_factory=dict)

    def as_checks(self) -> dict[str, Any]:
        """Flat `schedule.*` keys, e.g. for the checks of the test's last run."""
        out: dict[str, Any] = {
            "schedule.decision": self.kind,
            "schedule.after_runs": self.after_runs,
            "schedule.round": self.round_no,
            "schedule.reason": self.reason,
        }
        out.update({f"schedule.{k}": v for k, v in self.evidence.items()})
        return out


def _rel(half: float | None, mean: float | None) -> str:
    """A CI half width as a percentage of the mean ("n/a" without an interval)."""
    if half is None or not mean:
        return "n/a"
    return f"±{half / abs(mean):.1%}"


def _stop_decision(st: _TestState, check: StopCheck, round_no: int, ci: float | None) -> Decision:
    ev: dict[str, Any] = {"n": check.n, "mean": check.mean, "ci_half_width": check.half_width}
    if check.reason == "ci":
        ev["ci_target"] = check.target
        text = (
            f"95 % CI of the mean {_rel(check.half_width, check.mean)} is within the target ±{ci:.1%} "
            f"after {check.n} runs"
        )
        return Decision(st.test.id, "stop", check.n, round_no, text, ev)
    if check.reason == "max":
        ev["ci_target"] = check.target
        text = (
            f"max repeats ({check.n}) reached with the 95 % CI of the mean at "
            f"{_rel(check.half_width, check.mean)}, target ±{ci:.1%}"
        )
        return Decision(st.test.id, "max", check.n, round_no, text, ev)
    return Decision(st.test.id, "max", check.n, round_no, f"all {check.n} planned repeats done", ev)


# ------------------------------------------------------------------ the scheduler
@dataclass(frozen=True)
class Slot:
    """One run to do next: which test, run number (0 = warm-up), attempt, and its round."""

    test: Test
    run_no: int
    warmup: bool
    attempt: int
    round_no: int

    def label(self, rmax: int) -> str:
        """Progress text: "warm-up" or "run 2/10"."""
        text = "warm-up" if self.warmup else f"run {self.run_no}/{rmax}"
        return text + (f" (attempt {self.attempt}, after a crash)" if self.attempt > 1 else "")


class Scheduler:
    """Which runs come next, batch by batch; pure and resumable (its state is rebuilt from the journal).

    Order: configurations one after the other (switching one means re-provisioning), inside a configuration
    `sequential` (all runs of a test, then the next), `round-robin` (one run of each test per round) or
    `shuffle` (each round in a seeded order: the same on resume). Warm-ups come before the first measured
    run of their test (per-test) or configuration (per-config)."""

    def __init__(
        self,
        tests: Sequence[Test],
        schedule: Schedule,
        history: Mapping[str, Sequence[Observation]],
        decided: Mapping[str, str] | None = None,
    ) -> None:
        self.schedule = schedule
        warm = warmup_tests(tests, schedule.warmup)
        self.states = {t.id: _TestState(t, i, t.id in warm, list(history.get(t.id, ()))) for i, t in enumerate(tests)}
        self.groups = [[self.states[t.id] for t in g] for g in config_groups(tests)]
        self.decisions: list[Decision] = []
        self.round_no = 0
        for tid, kind in (decided or {}).items():
            if tid in self.states:
                self.states[tid].final = kind
        for st in self.states.values():  # a journal may already hold enough repeats (resume)
            if not st.final:
                self._check(st, record=False)

    # -- planning ------------------------------------------------------------------------
    def active(self, st: _TestState) -> bool:
        return not st.final

    def next_batch(self) -> list[Slot]:
        """The next runs to do (a round, or one run in sequential order); [] when the campaign is complete."""
        for group in self.groups:
            live = [st for st in group if self.active(st)]
            if live:
                return self._batch(group, live)
        return []

    def _batch(self, group: list[_TestState], live: list[_TestState]) -> list[Slot]:
        sched = self.schedule
        if sched.order == "sequential":
            live = live[:1]
        else:
            low = min(st.measured for st in live)
            live = [st for st in live if st.measured == low]
        self.round_no = min(st.measured for st in live) + 1
        if sched.order == "shuffle":
            live.sort(key=lambda st: short_hash([sched.shuffle_seed, self.round_no, st.test.id]))
        slots: list[Slot] = []
        group_warm = next((st for st in group if st.warmup and st.final != "skip"), None)
        if sched.warmup == "per-config" and group_warm is not None and not group_warm.finished(0, True):
            return [Slot(group_warm.test, 0, True, group_warm.attempt(0, True), 0)]
        for st in live:
            if sched.warmup == "per-test" and st.warmup and not st.finished(0, True):
                slots.append(Slot(st.test, 0, True, st.attempt(0, True), 0))
            run_no = self._next_run_no(st)
            slots.append(Slot(st.test, run_no, False, st.attempt(run_no, False), self.round_no))
        return slots

    @staticmethod
    def _next_run_no(st: _TestState) -> int:
        done = {o.run_no for o in st.obs if not o.warmup and o.status in FINISHED}
        n = 1
        while n in done:
            n += 1
        return n

    # -- learning --------------------------------------------------------------------------
    def observe(self, test_id: str, obs: Observation) -> list[Decision]:
        """Record a finished run; returns the decisions it causes (stop, max, skip) for that test."""
        st = self.states[test_id]
        st.obs.append(obs)
        before = len(self.decisions)
        if st.crashes >= 2 and not st.final:
            st.final = "skip"
            self.decisions.append(
                Decision(
                    test_id, "skip", st.measured, self.round_no, f"crashed {st.crashes} times", {"crashes": st.crashes}
                )
            )
        elif not obs.warmup and not st.final:
            self._check(st, record=True)
        return self.decisions[before:]

    def end_batch(self) -> list[Decision]:
        """After a round: the race (opt-in) drops tests clearly behind their test case's leader."""
        sched = self.schedule
        if not sched.racing:
            return []
        by_case: dict[str, list[_TestState]] = {}
        for st in self.states.values():
            by_case.setdefault(st.test.test_case, []).append(st)
        out: list[Decision] = []
        for case, members in sorted(by_case.items()):
            values = {st.test.id: st.values for st in members if st.final != "skip"}
            candidates = [st.test.id for st in members if self.active(st)]
            for drop in race(values, candidates, sched.racing_margin, sched.racing_min):
                st = self.states[drop.test_id]
                st.final = "drop"
                ev = dict(drop.evidence, leader=drop.leader_id, test_case=case)
                text = (
                    f"behind {self.states[drop.leader_id].test.name}: upper 95 % bound "
                    f"{ev['ci_high']:.4g} < leader's lower bound {ev['leader_ci_low']:.4g} - {sched.racing_margin:.0%}"
                )
                out.append(Decision(drop.test_id, "drop", st.measured, self.round_no, text, ev))
        self.decisions.extend(out)
        return out

    def _check(self, st: _TestState, record: bool) -> None:
        s = self.schedule
        check = stop_rule(st.values, st.measured, s.repeats_min, s.repeats_max, s.ci)
        if check.stop:
            st.final = "stop" if check.reason == "ci" else "max"
            if record:
                self.decisions.append(_stop_decision(st, check, self.round_no, s.ci))
        elif st.crashes >= 2:
            st.final = "skip"

    # -- what is left (for estimates) ------------------------------------------------------
    def remaining(self) -> Remaining:
        """Runs still to do at best (every active test stops at its minimum) and at worst (at max)."""
        s = self.schedule
        low = high = warm = 0
        configs = 0
        for group in self.groups:
            live = [st for st in group if self.active(st)]
            if not live:
                continue
            if any(st.measured == 0 for st in live):
                configs += 1
            warm += sum(1 for st in group if st.warmup and not st.finished(0, True))
            low += sum(max(0, s.repeats_min - st.measured) for st in live)
            high += sum(max(0, s.repeats_max - st.measured) for st in live)
        return Remaining(low, high, warm, configs)


@dataclass(frozen=True)
class Remaining:
    """Runs left: measured runs at least / at most, warm-up runs, configurations still to provision."""

    runs_low: int
    runs_high: int
    warmups: int
    configs: int


def decided_from_runs(runs: Iterable[Run]) -> dict[str, str]:
    """Stops and drops already journalled (`schedule.decision` in a run's checks), so a resume keeps them;
    "max" is not sticky: raising repeats.max in the campaign gives such tests more runs."""
    return {
        r.test_id: str(r.checks["schedule.decision"])
        for r in runs
        if r.checks.get("schedule.decision") in ("stop", "drop")
    }


def history_from_runs(runs: Iterable[Run]) -> dict[str, list[Observation]]:
    """Journal runs -> the scheduler's history, by test id."""
    out: dict[str, list[Observation]] = {}
    for r in runs:
        if r.status != "running":
            out.setdefault(r.test_id, []).append(observation(r))
    return out


# ------------------------------------------------------------------ cooldown request
def cooldown_request(c: Cooldown, devices: Sequence[str], pool: str, preflight_load1: float) -> dict[str, Any]:
    """The agent's `cooldown` request for this campaign's cooldown (auto mode: txg, disks, dirty, load)."""
    load1 = c.load1
    if c.load1_auto:
        load1 = max(1.0, preflight_load1 + 1.0)
    req: dict[str, Any] = {
        "op": "cooldown",
        "fixed_s": c.fixed_s,
        "max_s": c.max_s,
        "load1": load1,
        "dirty_bytes": c.dirty_bytes,
    }
    if c.auto:
        req.update(
            {"mode": "auto", "devices": list(devices), "pool": pool, "idle_iops": c.idle_iops, "idle_s": c.idle_s}
        )
    return req


def cooldown_checks(result: Mapping[str, Any]) -> dict[str, Any]:
    """The agent's cooldown result as run checks: cooldown.waited_s and cooldown.ended_by (plus what it saw)."""
    out: dict[str, Any] = {
        "cooldown.waited_s": round(float(result.get("waited_s", 0.0)), 3),
        "cooldown.ended_by": str(result.get("ended_by", "fixed")),
    }
    for key in ("unmet", "load1", "dirty_bytes", "dev_iops", "txg_pending"):
        if key in result:
            out[f"cooldown.{key}"] = result[key]
    return out


# ------------------------------------------------------------------ steady state
def steady_state_checks(doc: Mapping[str, Any]) -> dict[str, Any]:
    """fio's `steadystate` block of each job -> checks; {} when the job did not ask for steady state.

    `steadystate.attained` is true only if every job attained it (fio ends a job early once it has)."""
    jobs = [j for j in doc.get("jobs", []) if isinstance(j, dict) and isinstance(j.get("steadystate"), dict)]
    if not jobs:
        return {}
    blocks = [j["steadystate"] for j in jobs]
    first = blocks[0]
    return {
        "steadystate.criterion": str(first.get("ss", "")),
        "steadystate.duration_s": first.get("duration"),
        "steadystate.attained": all(bool(b.get("attained")) for b in blocks),
        "steadystate.measured": str(first.get("criterion", "")),
        "steadystate.max_deviation": first.get("max_deviation"),
        "steadystate.slope": first.get("slope"),
    }


def steady_state_from_text(fio_json: str) -> dict[str, Any]:
    """steady_state_checks of fio's JSON text; {} when there is none or it does not parse (the run's verdict
    reports unreadable output already)."""
    start = fio_json.find("{")
    if start < 0:
        return {}
    try:
        doc = json.loads(fio_json[start:])
    except ValueError:
        return {}
    return steady_state_checks(doc) if isinstance(doc, dict) else {}


def never_steady(runs: Iterable[Run]) -> list[Run]:
    """Measured runs that asked fio for steady state and never got there (the report marks them)."""
    return [r for r in runs if not r.warmup and r.status == "done" and r.checks.get("steadystate.attained") is False]


# ------------------------------------------------------------------ estimates
@dataclass(frozen=True)
class Estimate:
    """Seconds left: at best, most likely (from what the journal taught so far), at worst."""

    low: float
    likely: float
    high: float


@dataclass(frozen=True)
class Priors:
    """Costs assumed before the journal has measured them (seconds)."""

    run_overhead_s: float = 4.0  # agent start, samplers, drain, bookkeeping per run
    config_s: float = 15.0  # create dataset/zvol, add/remove a SLOG, settle udev
    layout_bytes_per_s: float = 100 * 2**20  # laying out a test file (seed 000's HDD wrote ~140 MiB/s)
    cooldown_auto_s: float = 15.0  # a typical automatic cooldown before one was measured
    run_cv: float = 0.03  # run-to-run coefficient of variation assumed for the CI stopping rule
    guest_boot_s: float = 10.0  # boot a test guest (vm-disk targets), once per `run`: ~9 s under TCG, less with KVM
    guest_config_s: float = 5.0  # hot-plug a guest disk and check it in the guest (per vm-disk configuration)


#: an emulated lab VM (qemu TCG), measured on tests/fixtures/journal-lab-zfs.sqlite: ~9 s per 3 s run beyond
#: fio's wall time (agent, samplers, file checks, drain), ~20 s per new dataset/zvol, layout at ~5 MiB/s; a test
#: guest inside it (nested TCG) was ready after 71-263 s (docs/guest.md) and each guest request costs 2-6 s
LAB_PRIORS = Priors(
    run_overhead_s=9.0,
    config_s=15.0,
    layout_bytes_per_s=5 * 2**20,
    cooldown_auto_s=20.0,
    guest_boot_s=180.0,
    guest_config_s=30.0,
)


def priors_for(emulated: bool) -> Priors:
    """Priors for a host: a lab VM under emulation is several times slower at everything but fio's clock."""
    return LAB_PRIORS if emulated else Priors()


def _mean(xs: Sequence[float], default: float) -> float:
    return math.fsum(xs) / len(xs) if xs else default


def expected_repeats(rmin: int, rmax: int, ci: float | None, cv: float) -> int:
    """Repeats the CI rule needs when runs vary with coefficient of variation `cv` (max without a CI)."""
    if ci is None:
        return rmax
    for n in range(max(2, rmin), rmax + 1):
        if t_quantile(0.975, n - 1) * cv / math.sqrt(n) <= ci:
            return n
    return rmax


def _triple(values: Sequence[float], prior: float) -> tuple[float, float, float]:
    """(low, likely, high) of a per-run cost: mean -/+ one sd once measured (at least -25 %/+50 % of the mean
    while fewer than 3 were), half/twice the prior before."""
    if not values:
        return prior * 0.5, prior, prior * 2.0
    mean = _mean(values, prior)
    sd = math.sqrt(math.fsum((v - mean) ** 2 for v in values) / (len(values) - 1)) if len(values) > 1 else 0.0
    if len(values) < 3:
        sd = max(sd, 0.5 * mean)
    return max(0.0, min(mean - sd, 0.75 * mean if len(values) < 3 else mean)), mean, mean + sd


def cost_kind(test: Test) -> str:
    """Costs are learned per target kind (a zvol run costs more than a raw one), copy tests apart."""
    return test.target.kind + ("-copy" if test.is_copy else "")


class Estimator:
    """Learns per-run overhead and fio wall time, per-configuration provisioning/layout (both per target kind)
    and cooldown from journalled runs, and turns what the scheduler has left into a range. Pure: fed with
    observations, never reads the clock itself."""

    def __init__(self, spec: Spec, priors: Priors | None = None) -> None:
        self.spec = spec
        self.priors = priors or Priors()
        self.overheads: dict[str, list[float]] = {}  # seconds per run beyond fio's wall time, without cooldown
        self.config_costs: dict[str, list[float]] = {}  # seconds before the first run of a configuration
        self.walls: dict[str, list[float]] = {}  # fio wall time per measured run / (ramp + runtime)
        self.cooldowns: list[float] = []
        self.repeats_used: list[int] = []  # measured runs of tests the schedule has finished with
        self.setup_done = False  # the runner has set up the target kinds (booted the test guest): no more to pay

    # what one run costs -------------------------------------------------------------------
    def run_time(self, test: Test) -> tuple[float, float, float]:
        """(low, likely, high) fio seconds of one run: steady state can end it after ramp + ss_ramp + ss_dur."""
        s, expected = self.spec.schedule, test.expected_s
        if test.is_copy:
            expected = self.spec.copy_size / self.priors.layout_bytes_per_s
        low = min(expected, self.spec.ramp + s.ss_ramp_s + s.ss_dur_s) if s.ss and not test.is_copy else expected
        walls = self.walls.get(cost_kind(test), [])
        if not walls:
            return low, (low + expected) / 2, expected
        w_low, w_likely, w_high = _triple(walls, 1.0)
        return min(low, w_low * expected), w_likely * expected, max(expected, w_high * expected)

    def cooldown_bounds(self) -> tuple[float, float, float]:
        """(low, likely, high) seconds of one cooldown."""
        c = self.spec.cooldown
        if not c.active:
            return 0.0, 0.0, 0.0
        if not c.auto and c.load1 is None and c.dirty_bytes is None:
            return c.fixed_s, c.fixed_s, c.fixed_s
        likely = _mean(self.cooldowns, max(c.fixed_s, self.priors.cooldown_auto_s if c.auto else c.fixed_s))
        return c.fixed_s, min(max(likely, c.fixed_s), c.max_s + c.fixed_s), c.fixed_s + c.max_s

    def config_cost(self, test: Test) -> tuple[float, float, float]:
        """(low, likely, high) seconds to provision and lay out one configuration of the test's kind."""
        kind = kind_of(test.target)
        layout = test.target.size / self.priors.layout_bytes_per_s if not test.is_copy else 0.0
        zfs = self.priors.config_s if kind.needs_pool else 0.0
        guest = self.priors.guest_config_s if kind.runs_in_guest else 0.0
        return _triple(self.config_costs.get(cost_kind(test), []), layout + zfs + guest)

    def setup_cost(self, tests: Iterable[Test]) -> tuple[float, float, float]:
        """(low, likely, high) seconds before the first run of a `run`: booting a test guest when a test still
        to run needs one (each `run` boots its own, resumed or not)."""
        if not self.setup_done and any(kind_of(t.target).runs_in_guest for t in tests):
            return _triple([], self.priors.guest_boot_s)
        return 0.0, 0.0, 0.0

    # learning -----------------------------------------------------------------------------
    def observe(self, run: Run, test: Test, gap_s: float, new_config: bool) -> None:
        """One finished run; `gap_s`: seconds from the previous run's end to this one's start (prepare,
        provisioning, cooldown), `new_config`: the run was the first on its configuration."""
        kind = cost_kind(test)
        cooled = float(run.checks.get("cooldown.waited_s", 0.0) or 0.0)
        if "cooldown.waited_s" in run.checks:
            self.cooldowns.append(cooled)
        total = (run.ended or run.started) - run.started
        wall = run.wall_s or 0.0
        extra = max(0.0, total - wall)
        if new_config:
            self.config_costs.setdefault(kind, []).append(max(0.0, gap_s - cooled))
        else:
            extra += max(0.0, gap_s - cooled)
        self.overheads.setdefault(kind, []).append(extra)
        if run.wall_s is not None and run.expected_s > 0 and not run.warmup:
            self.walls.setdefault(kind, []).append(run.wall_s / run.expected_s)

    def learn(self, runs: Sequence[Run], tests: Sequence[Test]) -> None:
        """Learn from journalled runs in start order."""
        by_id = {t.id: t for t in tests}
        seen: set[str] = set()
        prev_end: float | None = None
        for r in sorted(runs, key=lambda r: r.started):
            test = by_id.get(r.test_id)
            if r.status == "running" or r.ended is None or test is None:
                continue
            cfg = config_key(test)
            gap = 0.0 if prev_end is None else max(0.0, r.started - prev_end)
            if gap < 3600:  # a gap of hours is a campaign stopped and resumed later
                self.observe(r, test, gap, cfg not in seen and prev_end is not None)
            seen.add(cfg)
            prev_end = r.ended

    # the range ---------------------------------------------------------------------------
    def estimate(self, sched: Scheduler) -> Estimate:
        """Seconds left for what the scheduler has still to do: at best, likely, at worst."""
        s = self.spec.schedule
        spread = self._spread()
        cd = self.cooldown_bounds()
        total = list(self.setup_cost(st.test for group in sched.groups for st in group if not st.final))
        for group in sched.groups:
            live = [st for st in group if not st.final]
            if not live:
                continue
            if not any(st.obs for st in group):
                for i, v in enumerate(self.config_cost(group[0].test)):
                    total[i] += v
            for st in live:
                lo = max(0, s.repeats_min - st.measured)
                hi = max(0, s.repeats_max - st.measured)
                warm = 1 if st.warmup and not st.finished(0, True) else 0
                runs = (lo + warm, lo + (hi - lo) * spread + warm, hi + warm)
                run = self.run_time(st.test)
                over = _triple(self.overheads.get(cost_kind(st.test), []), self.priors.run_overhead_s)
                for i in range(3):
                    total[i] += runs[i] * (run[i] + over[i] + cd[i])
        low, likely, high = total
        return Estimate(low, min(max(likely, low), high), high)

    def learn_repeats(self, counts: Iterable[int]) -> None:
        """Measured runs of the tests the scheduler has finished with (stopped, maxed or dropped)."""
        self.repeats_used.extend(counts)

    def _spread(self) -> float:
        """Where between min and max repeats an adaptive test most likely ends (0..1): learned from finished
        tests; before any, where the CI rule stops for runs with the prior's coefficient of variation."""
        s = self.spec.schedule
        if not s.adaptive:
            return 0.0
        if self.repeats_used:
            used = _mean([float(n) for n in self.repeats_used], s.repeats_min)
        else:
            used = float(expected_repeats(s.repeats_min, s.repeats_max, s.ci, self.priors.run_cv))
        return min(1.0, max(0.0, (used - s.repeats_min) / (s.repeats_max - s.repeats_min)))


# ------------------------------------------------------------------ comparing two schedules' leaderboards
def kendall_tau(a: Sequence[float], b: Sequence[float]) -> float:
    """Kendall's tau-b between two score lists of the same items (1: same order, -1: reversed; ties counted)."""
    n = len(a)
    if n != len(b) or n < 2:
        raise ValueError("kendall_tau needs two lists of the same length, at least 2")
    concordant = discordant = ties_a = ties_b = 0
    for i in range(n):
        for j in range(i + 1, n):
            da, db = a[i] - a[j], b[i] - b[j]
            if da == 0 and db == 0:
                continue
            if da == 0:
                ties_a += 1
            elif db == 0:
                ties_b += 1
            elif (da > 0) == (db > 0):
                concordant += 1
            else:
                discordant += 1
    denom = math.sqrt((concordant + discordant + ties_a) * (concordant + discordant + ties_b))
    return (concordant - discordant) / denom if denom else 1.0
