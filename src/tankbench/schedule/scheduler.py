"""Which runs come next, batch by batch; rebuilt from the journal on resume."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from tankbench.campaign.parse import Schedule
from tankbench.model import Run, Test, short_hash
from tankbench.schedule.configs import config_groups, warmup_tests
from tankbench.schedule.decide import (
    ClaimScope,
    claim_verdicts,
    decided_evidence,
    nominal_level,
    scopes,
    waiting_and_held,
)
from tankbench.schedule.rules import (
    FINISHED,
    Decision,
    Observation,
    observation,
    places,
    pooled_cv,
    race,
    stop_decision,
    stop_rule,
)

#: repeats.decide: neighbours in a test case whose difference is known to lie within this fraction are a tie (their
#: order does not matter, so it counts as decided)
DECIDE_TIE = 0.05


@dataclass
class _TestState:
    test: Test
    position: int
    warmup: bool
    obs: list[Observation] = field(default_factory=list)
    final: str = ""  # "stop", "drop", "settled", "decided", "max" or "skip" once decided

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


@dataclass(frozen=True)
class Slot:
    """One run to do next: which test, run number (0 = warm-up), attempt, and its round."""

    test: Test
    run_no: int
    warmup: bool
    attempt: int
    round_no: int
    resumed: bool = False  # a warm-up again: the configuration was warmed by an earlier `run`

    def label(self, rmax: int) -> str:
        """Progress text: "warm-up" or "run 2/10"."""
        text = ("warm-up (resumed)" if self.resumed else "warm-up") if self.warmup else f"run {self.run_no}/{rmax}"
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
        crash_retries: int = 1,
    ) -> None:
        self.schedule = schedule
        #: a test is skipped once it crashed its host this many times (campaign.crash_retries + 1)
        self.max_crashes = crash_retries + 1
        warm = warmup_tests(tests, schedule.warmup)
        self.states = {t.id: _TestState(t, i, t.id in warm, list(history.get(t.id, ()))) for i, t in enumerate(tests)}
        self.groups = [[self.states[t.id] for t in g] for g in config_groups(tests)]
        self.decisions: list[Decision] = []
        self.round_no = 0
        #: tests whose warm-up finished in this `run`: one from an earlier run does not warm a resumed
        #: configuration (the caches, metaslabs and disks it warmed have gone cold since)
        self.warmed: set[str] = set()
        self.level = 0.95
        self.scopes: list[ClaimScope] = []
        if schedule.decide is not None:  # repeats.decide: the claims' tests and the sequential test's level
            self.scopes = scopes(schedule.claims, tests, schedule.case_keys)
            self.level = nominal_level(schedule.decide, schedule.repeats_min, schedule.repeats_max)
        for tid, kind in (decided or {}).items():
            # a test `check` stopped once its claims were decided runs on to the campaign's own repeats in a `run`
            # without repeats.decide (check decides claims; the campaign asked for its repeats)
            if tid in self.states and (kind != "decided" or schedule.decide is not None):
                self.states[tid].final = kind
        for st in self.states.values():  # a journal may already hold enough repeats (resume)
            if not st.final:
                self._check(st, record=False)
        #: tests that wait, active, while a sample of their claim's tests measures its noise (waiting_and_held)
        self.held: set[str] = set()
        self.snake = False  # the next settle round's configurations in reverse plan order (it flips each round)
        if self.scopes and all(st.measured >= 1 for st in self.states.values() if self.active(st)):
            self.held = self._waiting_and_held()[2]  # resumed during a noise sample: the sample goes on alone

    # -- planning ------------------------------------------------------------------------
    def active(self, st: _TestState) -> bool:
        return not st.final

    def runs_now(self, st: _TestState) -> bool:
        """Active and not held back while a sample measures its claim's noise."""
        return self.active(st) and st.test.id not in self.held

    def next_batch(self) -> list[Slot]:
        """The next runs to do (a round, or one run in sequential order); [] when the campaign is complete."""
        if self.schedule.settle is not None or self.schedule.decide is not None:
            return self._settle_batch()
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
        if sched.warmup == "per-config" and group_warm is not None and self.needs_warmup(group_warm):
            return [self._warm_slot(group_warm)]
        for st in live:
            if sched.warmup == "per-test" and self.needs_warmup(st):
                slots.append(self._warm_slot(st))
            run_no = self._next_run_no(st)
            slots.append(Slot(st.test, run_no, False, st.attempt(run_no, False), self.round_no))
        return slots

    def _settle_batch(self) -> list[Slot]:
        """`repeats.settle`: a round is one more run of every test still in doubt, across configurations (a test's
        neighbours usually sit on other ones), in plan order and in reverse in turn: it starts on the configuration
        the last ended on (not laid out again) and order effects fall on each end (docs/schedule.md)."""
        sched = self.schedule
        live = [st for group in self.groups for st in group if self.runs_now(st)]
        if not live and self.held:  # never end a campaign on held tests (their sample could not run)
            self.held = set()
            live = [st for group in self.groups for st in group if self.active(st)]
        if not live:
            return []
        low = min(st.measured for st in live)
        self.round_no = low + 1
        slots: list[Slot] = []
        self.snake = not self.snake
        for group in self.groups if self.snake else self.groups[::-1]:
            members = [st for st in group if self.runs_now(st) and st.measured == low]
            if not members:
                continue
            warm = next((st for st in group if st.warmup and st.final != "skip"), None)
            if sched.warmup == "per-config" and warm is not None and self.needs_warmup(warm):
                slots.append(self._warm_slot(warm))
            if sched.order == "shuffle":
                members.sort(key=lambda st: short_hash([sched.shuffle_seed, self.round_no, st.test.id]))
            for st in members:
                if sched.warmup == "per-test" and self.needs_warmup(st):
                    slots.append(self._warm_slot(st))
                run_no = self._next_run_no(st)
                slots.append(Slot(st.test, run_no, False, st.attempt(run_no, False), self.round_no))
        return slots

    def needs_warmup(self, st: _TestState) -> bool:
        """A warm-up is due: the test gets one and none finished in this `run` (resumed: again)."""
        return st.warmup and st.test.id not in self.warmed

    def _warm_slot(self, st: _TestState) -> Slot:
        """A warm-up run; `resumed` when an earlier `run` warmed this already (not a retry after a crash)."""
        earlier = st.finished(0, True)
        attempt = 1 if earlier else st.attempt(0, True)
        return Slot(st.test, 0, True, attempt, 0, resumed=earlier)

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
        if obs.warmup and obs.status in FINISHED:
            self.warmed.add(test_id)
        before = len(self.decisions)
        if st.crashes >= self.max_crashes and not st.final:
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
        out = self._settle() if sched.settle is not None else self._decide() if sched.decide is not None else []
        if not sched.racing:
            return out
        by_case: dict[str, list[_TestState]] = {}
        for st in self.states.values():
            by_case.setdefault(st.test.test_case, []).append(st)
        for case, members in sorted(by_case.items()):
            values = {st.test.id: st.values for st in members if st.final != "skip"}
            candidates = [st.test.id for st in members if self.active(st)]
            for drop in race(values, candidates, sched.racing_margin, sched.racing_min):
                st = self.states[drop.test_id]
                st.final = "drop"
                ev = dict(drop.evidence, leader=drop.leader_id, test_case=case)
                text = dropped_text(ev, self.states[drop.leader_id].test.name, sched.racing_margin)
                out.append(Decision(drop.test_id, "drop", st.measured, self.round_no, text, ev))
        self.decisions.extend(d for d in out if d.kind == "drop")
        return out

    def _settle(self) -> list[Decision]:
        """After a round: tests whose place in their test case is settled need no more runs (`settled`)."""
        sched = self.schedule
        assert sched.settle is not None
        if any(self.active(st) and st.measured < self.round_no for st in self.states.values()):
            return []  # the round is not complete (a crash, an interrupted run): judge it once it is
        live = [st for st in self.states.values() if st.final != "skip"]
        cv = pooled_cv({st.test.id: st.values for st in live})
        by_case: dict[str, list[_TestState]] = {}
        for st in live:
            by_case.setdefault(st.test.test_case, []).append(st)
        out: list[Decision] = []
        for case, members in sorted(by_case.items()):
            values = {st.test.id: st.values for st in members}
            candidates = [st.test.id for st in members if self.active(st) and st.measured >= sched.repeats_min]
            # a settled place is judged again each round: a neighbour's new runs (or the campaign's noise level)
            # may have moved into its interval; below repeats.max it then runs again
            settled = [st.test.id for st in members if st.final == "settled" and st.measured < sched.repeats_max]
            for place in places(values, candidates + settled, sched.settle, cv):
                if place.test_id in settled:
                    if not place.settled:
                        out.append(self._reopen(self.states[place.test_id], place.evidence, case))
                    continue
                if not place.settled:
                    continue
                st = self.states[place.test_id]
                st.final = "settled"
                ev = dict(place.evidence, test_case=case)
                tied = [self.states[t].test.name for t in ev.get("tied_with", ())]
                text = settled_text(ev, case, st.measured, sched.settle, tied)
                out.append(Decision(st.test.id, "settled", st.measured, self.round_no, text, ev))
        self.decisions.extend(out)
        return out

    def figures(self, test_id: str, key: str) -> tuple[float, ...]:
        """The measured values of a registry metric over a test's done runs (what a claim is judged on)."""
        st = self.states[test_id]
        vals = (o.figure(key, st.test.ramp) for o in st.obs if not o.warmup and o.status == "done")
        return tuple(v for v in vals if v is not None)

    def _decide(self) -> list[Decision]:
        """`repeats.decide`, after a complete round: a test stops once every claim it belongs to is decided at the
        sequential test's nominal level and (unless `check` runs it) its leaderboard place is too."""
        sched = self.schedule
        if any(self.runs_now(st) and st.measured < self.round_no for st in self.states.values()):
            return []  # the round is not complete (a crash, an interrupted run): judge it once it is
        verdicts, waiting, self.held = self._waiting_and_held()
        mine = {tid: [s.claim.name for s in self.scopes if tid in s.tests] for tid in self.states}
        unsettled = self._orders_open() if sched.decide_orders else set()
        out: list[Decision] = []
        for tid, st in self.states.items():
            if not self.active(st) or st.measured < max(sched.repeats_min, 1) or tid in unsettled:
                continue
            if tid in waiting or tid in self.held:
                continue
            st.final = "decided"
            ev = decided_evidence(mine[tid], verdicts, self.level)
            text = decided_text(ev, st.measured, self.level, sched)
            out.append(Decision(tid, "decided", st.measured, self.round_no, text, ev))
        self.decisions.extend(out)
        return out

    def _waiting_and_held(self) -> tuple[dict[str, str], dict[str, list[str]], set[str]]:
        """The claims' verdicts at the sequential level, the tests that run again for them, and those held back."""
        numbers = {tid: st.test.number for tid, st in self.states.items()}
        verdicts = claim_verdicts(self.scopes, self.figures, numbers, self.level)
        rmax = self.schedule.repeats_max
        runnable = {tid for tid, st in self.states.items() if self.active(st) and st.measured < rmax}
        waiting, held = waiting_and_held(self.scopes, verdicts, lambda t, m: len(self.figures(t, m)), runnable)
        return verdicts, waiting, held

    def _orders_open(self) -> set[str]:
        """Tests whose place in their test case is not yet settled at the sequential level (ties within
        DECIDE_TIE count as settled)."""
        live = [st for st in self.states.values() if st.final != "skip"]
        cv = pooled_cv({st.test.id: st.values for st in live})
        by_case: dict[str, list[_TestState]] = {}
        for st in live:
            by_case.setdefault(st.test.test_case, []).append(st)
        out: set[str] = set()
        for members in by_case.values():
            values = {st.test.id: st.values for st in members}
            candidates = [st.test.id for st in members if self.active(st)]
            out |= {p.test_id for p in places(values, candidates, DECIDE_TIE, cv, self.level) if not p.settled}
        return out

    def _reopen(self, st: _TestState, evidence: Mapping[str, Any], case: str) -> Decision:
        """A settled test whose place is in doubt again: active, with the numbers that reopened it."""
        assert self.schedule.settle is not None
        st.final = ""
        ev = dict(evidence, test_case=case)
        return Decision(
            st.test.id,
            "reopened",
            st.measured,
            self.round_no,
            reopened_text(ev, case, st.measured, self.schedule.settle),
            ev,
        )

    def _check(self, st: _TestState, record: bool) -> None:
        s = self.schedule
        check = stop_rule(st.values, st.measured, s.repeats_min, s.repeats_max, s.ci)
        if check.stop:
            st.final = "stop" if check.reason == "ci" else "max"
            if record:
                self.decisions.append(stop_decision(st.test.id, check, self.round_no, s.ci))
        elif st.crashes >= self.max_crashes:
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
            warm += sum(1 for st in group if self.needs_warmup(st))
            low += sum(max(0, s.repeats_min - st.measured) for st in live)
            high += sum(max(0, s.repeats_max - st.measured) for st in live)
        return Remaining(low, high, warm, configs)


def dropped_text(ev: Mapping[str, Any], leader: str, margin: float) -> str:
    """Why the race dropped a test, in words."""
    return (
        f"behind {leader}: upper 95 % bound {ev['ci_high']:.4g} < leader's lower bound {ev['leader_ci_low']:.4g} - "
        f"{margin:.0%}"
    )


def decided_text(ev: Mapping[str, Any], measured: int, level: float, sched: Schedule) -> str:
    """Why `repeats.decide` stopped a test, in words."""
    said = "; ".join(f"{n}: {v}" for n, v in ev["claims"].items()) or "no claim"
    order = ", and its place in its test case is settled" if sched.decide_orders else ""
    return (
        f"decided after {measured} run(s) at the {level:.2%} level of a {sched.decide:.0%} error "
        f"rate (repeated confidence intervals, Pocock): {said}{order}"
    )


def settled_text(ev: Mapping[str, Any], case: str, measured: int, margin: float, tied: Sequence[str]) -> str:
    """Why a test's place in its test case is settled (`repeats.settle`), in words."""
    return (
        f"place {ev['rank']} in {case} settled after {measured} run(s): its interval "
        f"{ev['ci_low']:.4g}–{ev['ci_high']:.4g} (run-to-run noise {ev['cv']:.1%}"
        f"{' assumed' if not ev['cv_df'] else ''}{', its own' if 'cv_campaign' in ev else ''}): the "
        f"interval of its difference from each neighbour reaches no more than {margin:.0%} into "
        f"the other order{' (the winner: not at all)' if ev['rank'] <= 2 else ''}"
        + (
            f", except {', '.join(tied)}: tied within {margin:.0%} (the interval of the difference "
            "lies inside the margin; more runs would not order them)"
            if tied
            else ""
        )
    )


def reopened_text(ev: Mapping[str, Any], case: str, measured: int, margin: float) -> str:
    """Why a settled place is in doubt again, in words."""
    return (
        f"place {ev['rank']} in {case} in doubt again after {measured} run(s): with a neighbour's new runs "
        f"(its own interval {ev['ci_low']:.4g}–{ev['ci_high']:.4g}) the interval of their difference reaches "
        f"{ev['worst_overlap']:.1%} of the larger mean into the other order (more than "
        f"{margin:.0%}, or at all between the two leaders; noise {ev['cv']:.1%})"
    )


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
        if r.checks.get("schedule.decision") in ("stop", "drop", "settled", "decided")
    }


def history_from_runs(runs: Iterable[Run]) -> dict[str, list[Observation]]:
    """Journal runs -> the scheduler's history, by test id."""
    out: dict[str, list[Observation]] = {}
    for r in runs:
        if r.status != "running":
            out.setdefault(r.test_id, []).append(observation(r))
    return out
