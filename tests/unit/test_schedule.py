"""Time to answer (issue 11): stopping rule, racing, run order, warm-up placement, resume, campaign keys."""

from __future__ import annotations

import math
import statistics
from collections.abc import Callable

import pytest

from tankbench.campaign import expand, parse_spec
from tankbench.errors import SpecError
from tankbench.schedule.configs import config_groups, warmup_tests
from tankbench.schedule.rules import Observation, pooled_cv, race, stop_rule
from tankbench.schedule.scheduler import Scheduler, Slot
from tankbench.schedule.steady import steady_state_checks

CAMPAIGN = """
[campaign]
name = "sched"
runtime = "60s"
ramp = "0s"
{extra}

[[target]]
name = "a"
kind = "file"
path = "/tmp/tb-a"
size = "64M"

[[target]]
name = "b"
kind = "file"
path = "/tmp/tb-b"
size = "64M"

[matrix]
rw = ["read", "write"]
bs = ["4k"]
iodepth = [1, 4]
"""


def spec_of(extra: str):  # type: ignore[no-untyped-def]
    return parse_spec(CAMPAIGN.format(extra=extra), "sched.toml")


# ------------------------------------------------------------------ stopping rule
def test_stop_rule_uses_student_t_on_the_mean() -> None:
    # n=2: t(0.975, 1) = 12.71, sd = 0.707 -> half width 6.35 > 5 % of 100.5: keep going
    c = stop_rule([100.0, 101.0], 2, 2, 10, 0.05)
    assert not c.stop and c.half_width == pytest.approx(6.353, abs=0.01) and c.target == pytest.approx(5.025)
    # n=3, sd 0.25: t(0.975, 2) = 4.30 -> half width 0.62 < 5.0: stop on the CI
    c = stop_rule([100.0, 100.5, 100.2], 3, 2, 10, 0.05)
    assert c.stop and c.reason == "ci" and c.half_width == pytest.approx(0.6255, abs=0.01)


def test_stop_rule_min_max_and_fixed() -> None:
    assert not stop_rule([100.0, 100.0], 2, 3, 10, 0.05).stop, "never before min"
    c = stop_rule([50.0, 150.0, 90.0], 3, 2, 3, 0.05)
    assert c.stop and c.reason == "max", "max ends a noisy test"
    assert stop_rule([1.0, 2.0, 3.0], 3, 3, 3, None).reason == "fixed"
    assert not stop_rule([1.0, 2.0], 2, 3, 3, None).stop
    # a failed run uses budget but gives no value: 2 runs, 1 value -> no interval, not stopped
    assert not stop_rule([100.0], 2, 2, 10, 0.05).stop


# ------------------------------------------------------------------ racing
def test_race_drops_only_what_is_clearly_behind_with_evidence() -> None:
    values = {"lead": [100.0, 101.0, 99.0], "close": [97.0, 101.0, 99.0], "slow": [60.0, 61.0, 59.0], "one": [10.0]}
    drops = race(values, ["close", "slow", "one"], margin=0.05, min_n=2)
    assert [d.test_id for d in drops] == ["slow"]
    ev = drops[0].evidence
    assert drops[0].leader_id == "lead" and ev["ci_high"] < ev["leader_ci_low"] * 0.95 == ev["bar"]
    assert ev["n"] == 3 and ev["leader_n"] == 3
    # a margin larger than the gap keeps it racing
    assert race(values, ["slow"], margin=0.5, min_n=2) == []
    assert race(values, ["slow"], margin=0.05, min_n=4) == [], "not before min runs"


# ------------------------------------------------------------------ warm-ups and configurations
def test_warmup_modes_and_configurations() -> None:
    tests = expand(spec_of('warmup = "per-config"'))
    groups = config_groups(tests)
    assert [len(g) for g in groups] == [4, 4] and {t.target.name for t in groups[1]} == {"b"}
    assert warmup_tests(tests, "per-config") == {groups[0][0].id, groups[1][0].id}
    assert warmup_tests(tests, "per-test") == {t.id for t in tests}
    assert warmup_tests(tests, "none") == set()


def test_warmup_true_keeps_its_old_meaning() -> None:
    assert spec_of("warmup = true").schedule.warmup == "per-test"
    assert spec_of("warmup = false").schedule.warmup == "none"
    assert spec_of('warmup = "per-config"').warmup is True


def drive(
    sched: Scheduler, value: Callable[[Slot], float], limit: int = 1000, stop_after: int | None = None
) -> list[tuple[str, int, bool]]:
    """Run the scheduler to the end (or `stop_after` runs), as the runner would; return the runs done."""
    done: list[tuple[str, int, bool]] = []
    while len(done) < limit:
        batch = sched.next_batch()
        if not batch:
            break
        for slot in batch:
            if stop_after is not None and len(done) >= stop_after:
                return done
            sched.observe(slot.test.id, Observation(slot.run_no, slot.warmup, "done", value(slot)))
            done.append((slot.test.id, slot.run_no, slot.warmup))
        sched.end_batch()
    return done


def history(done: list[tuple[str, int, bool]], value: Callable[[str, int], float]) -> dict[str, list[Observation]]:
    out: dict[str, list[Observation]] = {}
    for tid, run_no, warm in done:
        out.setdefault(tid, []).append(Observation(run_no, warm, "done", value(tid, run_no)))
    return out


def test_round_robin_interleaves_inside_a_configuration_with_one_warmup() -> None:
    spec = spec_of('warmup = "per-config"\nrepeats = 3\norder = "round-robin"')
    tests = expand(spec)
    order = drive(Scheduler(tests, spec.schedule, {}), lambda s: 100.0)
    g0 = [t.id for t in config_groups(tests)[0]]
    assert order[0] == (g0[0], 0, True), "one warm-up before the configuration's first run"
    assert order[1:5] == [(tid, 1, False) for tid in g0], "round 1: each test once"
    assert order[5:9] == [(tid, 2, False) for tid in g0]
    assert sum(1 for o in order if o[2]) == 2 and len(order) == 2 + 8 * 3


def test_sequential_with_per_test_warmups_is_the_old_order() -> None:
    spec = spec_of("warmup = true\nrepeats = 2")
    tests = expand(spec)
    order = drive(Scheduler(tests, spec.schedule, {}), lambda s: 1.0)
    expected = [(t.id, n, n == 0) for t in tests for n in (0, 1, 2)]
    assert order == expected


def test_shuffle_is_seeded_and_recorded() -> None:
    a = spec_of('repeats = 3\norder = "shuffle"\nshuffle_seed = 1')
    b = spec_of('repeats = 3\norder = "shuffle"\nshuffle_seed = 2')
    tests = expand(a)
    run_a = drive(Scheduler(tests, a.schedule, {}), lambda s: 1.0)
    assert run_a == drive(Scheduler(tests, a.schedule, {}), lambda s: 1.0), "same seed, same order"
    assert run_a != drive(Scheduler(tests, b.schedule, {}), lambda s: 1.0)
    assert sorted(run_a) == sorted(drive(Scheduler(tests, b.schedule, {}), lambda s: 1.0))
    assert spec_of('order = "shuffle"').schedule.shuffle_seed == spec_of('order = "shuffle"').schedule.shuffle_seed


@pytest.mark.parametrize("order", ["sequential", "round-robin", "shuffle"])
def test_resume_continues_the_same_order(order: str) -> None:
    spec = spec_of(
        f'warmup = "per-config"\nrepeats = {{ min = 2, max = 6, ci = "5%" }}\norder = "{order}"\nracing = true'
    )

    def value(tid: str, run_no: int) -> float:  # deterministic, different noise per test
        return 100.0 + (hash((tid, run_no)) % 7) * (3.0 if tid[0] in "0123" else 0.1)

    tests = expand(spec)
    full = drive(Scheduler(tests, spec.schedule, {}), lambda s: value(s.test.id, s.run_no))
    group_of = {t.id: i for i, g in enumerate(config_groups(tests)) for t in g}
    for cut in (1, 5, 11, 17):
        first = full[:cut]
        sched = Scheduler(tests, spec.schedule, history(first, value))
        rest = drive(sched, lambda s: value(s.test.id, s.run_no))
        measured = [r for r in first + rest if not r[2]]
        assert measured == [r for r in full if not r[2]], f"resume after {cut} runs: same measured runs, same order"
        # every configuration the resumed run works on gets one warm-up in it, the one the cut fell in too (its
        # warm-up in the earlier run has gone cold), and it comes first
        warmups_rest = [group_of[r[0]] for r in rest if r[2]]
        assert sorted(warmups_rest) == sorted({group_of[r[0]] for r in rest}), f"resume after {cut}"
        assert rest[0][2], f"resume after {cut}: a warm-up first"
        labels = [s.label(6) for s in Scheduler(tests, spec.schedule, history(first, value)).next_batch()]
        assert labels[0] == "warm-up (resumed)" or not any(
            r[2] for r in first if group_of[r[0]] == group_of[rest[0][0]]
        )


def test_adaptive_repeats_stop_early_on_stable_tests_and_decisions_have_evidence() -> None:
    spec = spec_of('repeats = { min = 2, max = 10, ci = "5%" }\norder = "round-robin"')
    tests = expand(spec)
    noisy = tests[0].id
    sched = Scheduler(tests, spec.schedule, {})
    order = drive(sched, lambda s: 100.0 + (30.0 if s.run_no % 2 else -30.0) * (s.test.id == noisy) + 0.1 * s.run_no)
    runs = {t.id: sum(1 for o in order if o[0] == t.id) for t in tests}
    assert runs[noisy] == 10 and all(n == 2 for tid, n in runs.items() if tid != noisy)
    kinds = {d.test_id: d.kind for d in sched.decisions}
    assert kinds[noisy] == "max" and sum(k == "stop" for k in kinds.values()) == 7
    stop = next(d for d in sched.decisions if d.kind == "stop")
    c = stop.as_checks()
    assert c["schedule.decision"] == "stop" and c["schedule.ci_half_width"] <= c["schedule.ci_target"]
    assert "is within the target ±5.0%" in stop.reason


def test_racing_drops_losers_after_a_round() -> None:
    spec = spec_of('repeats = { min = 2, max = 10, ci = "0.1%" }\norder = "round-robin"\nracing = { margin = "10%" }')
    tests = expand(spec)
    fast = {t.id for t in tests if t.params["iodepth"] == 4 and t.target.name == "a"}

    def value(s: Slot) -> float:
        return (200.0 if s.test.id in fast else 100.0) + (s.run_no % 3)

    sched = Scheduler(tests, spec.schedule, {})
    order = drive(sched, value)
    drops = [d for d in sched.decisions if d.kind == "drop"]
    assert {d.test_id for d in drops} == {t.id for t in tests if t.id not in fast}
    assert all(d.after_runs == 2 and d.evidence["leader"] in fast for d in drops)
    assert all(sum(1 for o in order if o[0] == d.test_id) == 2 for d in drops)
    assert "upper 95 % bound" in drops[0].reason


def test_remaining_runs_for_estimates() -> None:
    spec = spec_of('warmup = "per-config"\nrepeats = { min = 2, max = 10, ci = "5%" }')
    rem = Scheduler(expand(spec), spec.schedule, {}).remaining()
    assert (rem.runs_low, rem.runs_high, rem.warmups, rem.configs) == (16, 80, 2, 2)


# ------------------------------------------------------------------ campaign keys
def test_schedule_keys_parse() -> None:
    s = spec_of(
        'repeats = { min = 2, max = 10, ci = "5%" }\nracing = { margin = "3%" }\nss = "iops:5%"\n'
        'ss_dur = "20s"\nss_ramp = "5s"\ncooldown = "auto"\norder = "round-robin"'
    )
    sch = s.schedule
    assert (sch.repeats_min, sch.repeats_max, sch.ci, sch.racing, sch.racing_margin) == (2, 10, 0.05, True, 0.03)
    assert sch.adaptive and s.repeats == 10
    assert dict(s.fio)["ss"] == "iops:5%" and dict(s.fio)["ss_dur"] == "20s" and dict(s.fio)["ss_ramp"] == "5s"
    assert "ss=iops:5%" in __import__("tankbench.fio.jobs", fromlist=["job_text"]).job_text(expand(s)[0])
    c = s.cooldown
    assert c.auto and c.active and c.load1_auto and c.dirty_bytes == 4 << 20 and c.max_s == 300


@pytest.mark.parametrize(
    ("extra", "key", "hint"),
    [
        ('warmup = "per-run"', "campaign.warmup", "per-config"),
        ("repeats = { min = 5, max = 2 }", "campaign.repeats.max", "max ="),
        ('repeats = { min = 1, max = 5, ci = "5%" }', "campaign.repeats.min", "min = 2"),
        ('repeats = { min = 2, ci = "120%" }', "campaign.repeats.ci", "ci ="),
        ("repeats = { mni = 2 }", "campaign.repeats.mni", "min"),
        ('order = "random"', "campaign.order", "shuffle"),
        ('racing = "yes"', "campaign.racing", "margin"),
        ('ss = "iops 5%"', "campaign.ss", "iops:5%"),
        ('ss = "iops:5%"\nss_dur = "90s"', "campaign.ss_dur", "runtime"),
        ('ss_dur = "10s"', "campaign.ss_dur", "campaign.ss"),
        ("cooldown = { idle_iops = 3 }", "campaign.cooldown.idle_iops", "auto"),
        ('cooldown = { auto = true, load1 = "high" }', "campaign.cooldown.load1", "auto"),
    ],
)
def test_bad_schedule_keys_name_file_key_and_value(extra: str, key: str, hint: str) -> None:
    with pytest.raises(SpecError) as e:
        spec_of(extra)
    text = str(e.value) + " " + e.value.hint
    assert "sched.toml" in text and key in text and hint in text


def test_ss_in_fio_table_is_refused() -> None:
    with pytest.raises(SpecError) as e:
        parse_spec(CAMPAIGN.format(extra="") + '\n[fio]\nss = "iops:5%"\n', "sched.toml")
    assert "campaign.ss" in e.value.hint


# ------------------------------------------------------------------ steady state
def test_steady_state_checks_from_fio_json() -> None:
    doc = {
        "jobs": [
            {
                "steadystate": {
                    "ss": "iops:5.000000%",
                    "duration": 5,
                    "attained": 1,
                    "criterion": "3.204201%",
                    "max_deviation": 540.6,
                    "slope": 0.0,
                }
            }
        ]
    }
    c = steady_state_checks(doc)
    assert c["steadystate.attained"] is True and c["steadystate.criterion"] == "iops:5.000000%"
    doc["jobs"][0]["steadystate"]["attained"] = 0
    assert steady_state_checks(doc)["steadystate.attained"] is False
    assert steady_state_checks({"jobs": [{"read": {}}]}) == {}


def test_steady_state_window_figures_whichever_rule_ended_the_run() -> None:
    """Both of fio's measures of the last window are recorded from its samples (`data`): a slope rule that ended
    a run still says how far the seconds spread, and a deviation rule how much the rate drifted."""
    # a lab run's block (bench/zvol-issues-window): iops:5 % attained over 4 s, fio's own criterion 2.956167 %
    block = {
        "ss": "iops:5.000000%",
        "duration": 4,
        "attained": 1,
        "criterion": "2.956167%",
        "max_deviation": 7.25,
        "slope": 0.0,
        "data": {
            "bw_mean": 1005668,
            "iops_mean": 245,
            "iops": [248, 252, 243, 238],
            "bw": [1016824, 1032192, 995328, 978331],
        },
    }
    c = steady_state_checks({"jobs": [{"steadystate": block}]})
    mean = (248 + 252 + 243 + 238) / 4
    assert c["steadystate.window_spread_pct"] == pytest.approx(100 * 7.25 / mean, abs=1e-3)  # fio's max_deviation
    assert c["steadystate.window_slope_pct"] == pytest.approx(100 * -3.9 / mean, abs=1e-3)  # -19.5 / 5 IOPS per second
    # a rising window under a slope rule: what the slope moved the rate by, and the seconds' spread
    ramp = {"ss": "iops_slope:0.300000%", "duration": 5, "attained": 0, "data": {"iops": [100, 110, 120, 130, 140]}}
    c = steady_state_checks({"jobs": [{"steadystate": ramp}]})
    assert c["steadystate.window_slope_pct"] == pytest.approx(100 * 10 / 120, abs=1e-3)
    assert c["steadystate.window_spread_pct"] == pytest.approx(100 * 20 / 120, abs=1e-3)
    bw = {"ss": "bw:5%", "duration": 2, "attained": 1, "data": {"iops": [1, 1], "bw": [100, 300]}}
    assert steady_state_checks({"jobs": [{"steadystate": bw}]})["steadystate.window_spread_pct"] == 50.0
    for data in ({"iops": [0, 0, 0]}, {"iops": [5]}, {"iops": [1, "x"]}, {}, {"iops": "nan"}):
        stalled = {"ss": "iops:5%", "duration": 3, "attained": 1, "data": data}
        assert not any("window" in k for k in steady_state_checks({"jobs": [{"steadystate": stalled}]}))


def test_kendall_tau() -> None:
    from tankbench.analysis.stats import kendall_tau

    assert kendall_tau([1, 2, 3, 4], [10, 20, 30, 40]) == 1.0
    assert kendall_tau([1, 2, 3, 4], [4, 3, 2, 1]) == -1.0
    assert kendall_tau([1, 2, 3, 4], [1, 3, 2, 4]) == pytest.approx(2 / 3)
    with pytest.raises(ValueError):
        kendall_tau([1.0], [1.0])


# ------------------------------------------------------------------ repeat where the order is in doubt
def test_settle_repeats_only_tests_whose_place_is_in_doubt() -> None:
    spec = spec_of('warmup = "per-config"\nrepeats = { max = 4, settle = "5%" }')
    assert spec.schedule.repeats_min == 1 and spec.schedule.settle == 0.05 and spec.schedule.adaptive
    tests = expand(spec)
    # read 4k: far apart everywhere; write 4k: two tests 3 % apart at the bottom, the rest far apart
    truth = {}
    for t in tests:
        base = {"read": 100.0, "write": 50.0}[str(t.params["rw"])]
        truth[t.id] = base * (1.0 if t.target.name == "a" else 4.0) * (1.0 if t.params["iodepth"] == 1 else 2.0)
    close = [t.id for t in tests if t.params["rw"] == "write" and t.target.name == "a"]
    truth[close[1]] = truth[close[0]] * 1.03
    sched = Scheduler(tests, spec.schedule, {})
    done = drive(sched, lambda s: truth[s.test.id])
    measured = [d for d in done if not d[2]]
    assert len(measured) == len(tests) + 2, "one run each, then one more for the two close tests only"
    assert {tid for tid, n, _ in measured if n == 2} == set(close)
    assert sum(1 for d in done if d[2]) == 2, "one warm-up per configuration, before its first run"
    first_round = [tid for tid, _, warm in done[: len(tests) + 2] if not warm]
    assert set(first_round) == {t.id for t in tests}, "the first round covers every configuration"
    kinds = {d.test_id: d for d in sched.decisions}
    assert all(d.kind == "settled" for d in kinds.values()) and len(kinds) == len(tests)
    ev = kinds[close[0]].evidence
    assert ev["n"] == 2 and ev["cv"] == 0.0 and ev["cv_df"] == 2, "noise learned from the repeated tests"
    assert kinds[tests[0].id].evidence["cv_df"] == 0 and "assumed" in kinds[tests[0].id].reason


def test_settle_separates_the_winner_or_runs_to_max() -> None:
    spec = spec_of('repeats = { max = 3, settle = "5%" }')
    tests = expand(spec)
    reads = [t.id for t in tests if t.params["rw"] == "read"]
    truth = {t.id: 100.0 * (i + 1) for i, t in enumerate(tests)}
    truth[reads[-1]] = truth[reads[-2]] * 1.02  # a near tie for first place: within the margin, still a winner
    noise = iter([1.0, 0.97, 1.03, 0.99, 1.01, 1.02, 0.98] * 20)
    sched = Scheduler(tests, spec.schedule, {})
    done = drive(sched, lambda s: truth[s.test.id] * next(noise))
    runs = {tid: sum(1 for d in done if d[0] == tid and not d[2]) for tid in truth}
    assert runs[reads[-1]] == runs[reads[-2]] == 3, "a winner not separated gets every repeat"
    assert min(runs.values()) == 1


def test_settle_rounds_snake_so_each_starts_on_the_configuration_the_last_ended_on() -> None:
    """A target keeps one configuration's dataset: a round that starts where the one before ended does not
    provision and lay it out again (seed 004's check re-laid out its file at every round's first run)."""
    from tankbench.schedule.configs import config_key

    spec = spec_of('repeats = { max = 3, settle = "5%" }')
    tests = expand(spec)
    noise = iter([1.0, 0.9, 1.1, 0.95, 1.05] * 20)
    sched = Scheduler(tests, spec.schedule, {})  # equal means, wide noise: every test in doubt to max
    rounds: list[list[str]] = []
    while batch := sched.next_batch():
        rounds.append([config_key(slot.test) for slot in batch])
        for slot in batch:
            sched.observe(slot.test.id, Observation(slot.run_no, slot.warmup, "done", 100.0 * next(noise)))
        sched.end_batch()
    plan = list(dict.fromkeys(config_key(t) for t in tests))
    assert len(plan) == 2 and len(rounds) >= 3 and len(rounds[0]) == len(tests), [len(r) for r in rounds]
    for n, r in enumerate(rounds):
        order = plan[::-1] if n % 2 else plan
        assert list(dict.fromkeys(r)) == [c for c in order if c in r], (n, r)
    assert all(a[-1] == b[0] for a, b in zip(rounds, rounds[1:], strict=False) if a[-1] in b)  # no switch
    assert rounds[1][0] == rounds[0][-1]


def test_settle_is_kept_on_resume_and_cannot_be_combined_with_ci() -> None:
    from tankbench.model import Run
    from tankbench.schedule.scheduler import decided_from_runs

    run = Run("t1", 1, False, 1, "done", 0.0, 1.0, "h", "fp", 1.0, checks={"schedule.decision": "settled"})
    assert decided_from_runs([run]) == {"t1": "settled"}
    with pytest.raises(SpecError, match="repeats.settle.*cannot be combined with repeats.ci"):
        spec_of('repeats = { max = 3, ci = "5%", settle = "5%" }')
    with pytest.raises(SpecError, match="repeats.settle"):
        spec_of('repeats = { max = 3, settle = "500%" }')


@pytest.mark.parametrize("retries", [0, 1, 3])
def test_a_test_is_skipped_after_crash_retries_plus_one_crashes(retries: int) -> None:
    """campaign.crash_retries (issue 18) replaces the fixed "skipped after two crashes"."""
    spec = parse_spec(CAMPAIGN.format(extra=f"crash_retries = {retries}"))
    assert spec.unattended.crash_retries == retries
    tests = expand(spec)
    sched = Scheduler(tests, spec.schedule, {}, crash_retries=spec.unattended.crash_retries)
    tid = tests[0].id
    for n in range(retries + 1):
        decisions = sched.observe(tid, Observation(1, False, "crashed", None))
        assert [d.kind for d in decisions] == (["skip"] if n == retries else []), n
    assert sched.states[tid].final == "skip"


def test_a_settled_place_is_judged_again_when_a_neighbour_moves() -> None:
    spec = spec_of('repeats = { max = 3, settle = "5%" }')
    tests = expand(spec)
    reads = [t.id for t in tests if t.params["rw"] == "read"]
    assert len(reads) >= 3
    truth = {t.id: 1000.0 * (i + 1) for i, t in enumerate(tests)}
    truth[reads[0]], truth[reads[1]], truth[reads[2]] = 100.0, 101.0, 200.0  # 0, 1 in doubt; 2 settled at once

    def value(slot: Slot) -> float:  # the in-doubt neighbour's second run lands on the settled test
        return 205.0 if (slot.test.id, slot.run_no) == (reads[1], 2) else truth[slot.test.id]

    sched = Scheduler(tests, spec.schedule, {})
    done = drive(sched, value)
    first = [d for d in sched.decisions if d.test_id == reads[2]]
    assert [d.kind for d in first][:2] == ["settled", "reopened"], first
    reopened = first[1]
    assert reopened.after_runs == 1 and "in doubt again" in reopened.reason
    assert reopened.evidence["worst_overlap"] > 0.05 and reopened.evidence["test_case"]
    assert sum(1 for tid, _, warm in done if tid == reads[2] and not warm) >= 2, "it ran again"
    # every reopened test was settled before it, and each ends settled again or at max
    for tid in {d.test_id for d in sched.decisions if d.kind == "reopened"}:
        kinds = [d.kind for d in sched.decisions if d.test_id == tid]
        assert kinds[0] == "settled" and kinds[-1] in ("settled", "max"), (tid, kinds)


def test_a_settled_place_at_max_is_not_reopened() -> None:
    spec = spec_of('repeats = { max = 1, settle = "5%" }')
    sched = Scheduler(expand(spec), spec.schedule, {})
    drive(sched, lambda s: 100.0)
    assert all(d.kind != "reopened" for d in sched.decisions)


def _settle_values(reads: list[float], writes: list[float]) -> tuple[Scheduler, dict[str, float], list[str], list[str]]:
    spec = spec_of('repeats = { max = 4, settle = "5%" }')
    tests = expand(spec)
    r = [t.id for t in tests if t.params["rw"] == "read"]
    w = [t.id for t in tests if t.params["rw"] == "write"]
    truth = dict(zip(r, reads)) | dict(zip(w, writes))
    return Scheduler(tests, spec.schedule, {}), truth, r, w


def test_a_true_tie_settles_as_tied_instead_of_running_to_max() -> None:
    # two leaders with the same throughput: no number of runs separates them; their difference is known to be
    # inside the margin after two runs each, so both places settle, each naming the other
    sched, truth, r, _ = _settle_values([4000.0, 4000.0, 2000.0, 1000.0], [100.0, 200.0, 400.0, 800.0])
    done = drive(sched, lambda s: truth[s.test.id] * (1.003 if s.run_no % 2 else 0.997))
    runs = {tid: sum(1 for d in done if d[0] == tid and not d[2]) for tid in truth}
    tied = [d for d in sched.decisions if d.evidence.get("tied_with")]
    assert runs[r[0]] == runs[r[1]] == 2, runs
    assert {d.test_id for d in tied} == {r[0], r[1]} and all(d.kind == "settled" for d in tied)
    assert tied[0].evidence["tied_with"] == [r[1] if tied[0].test_id == r[0] else r[0]]
    assert "tied within 5%" in tied[0].reason
    assert max(runs.values()) == 2 and all(d.kind != "max" for d in sched.decisions)


def test_one_wild_run_does_not_reopen_every_place() -> None:
    # a close pair in each test case runs twice; one of those runs is disturbed (-40 %): the campaign's noise
    # stays the quiet tests' (the wild one's share capped), so the far-apart places stay settled after one run
    sched, truth, r, w = _settle_values([1000.0, 1020.0, 1600.0, 2600.0], [300.0, 306.0, 500.0, 800.0])

    def value(s: Slot) -> float:
        if (s.test.id, s.run_no) == (w[1], 2):
            return truth[s.test.id] * 0.6
        return truth[s.test.id] * (1.003 if s.run_no % 2 else 0.997)

    done = drive(sched, value)
    runs = {tid: sum(1 for d in done if d[0] == tid and not d[2]) for tid in truth}
    assert not [d for d in sched.decisions if d.kind == "reopened"], [d.reason for d in sched.decisions]
    assert runs[r[2]] == runs[r[3]] == runs[w[2]] == runs[w[3]] == 1, runs
    assert runs[w[1]] == 4, "the disturbed test itself is judged by its own noise: in doubt until max"
    cv = pooled_cv({tid: [truth[tid] * 1.003, truth[tid] * 0.997] for tid in r} | {w[1]: [306.0, 183.6]})
    assert cv is not None and cv[0] < 0.02 and cv[1] == 5


def test_an_uncapped_pool_when_no_test_stands_out() -> None:
    values = {"a": [100.0, 102.0], "b": [200.0, 196.0], "c": [50.0, 50.5]}
    cv, df = pooled_cv(values) or (0.0, 0)
    by_hand = math.sqrt(sum((statistics.stdev(v) / statistics.mean(v)) ** 2 for v in values.values()) / 3)
    assert df == 3 and cv == pytest.approx(by_hand)


def test_a_test_check_decided_runs_on_to_the_campaigns_repeats_in_a_run() -> None:
    """`check` stops a test once its claims are decided ("decided" in its runs); a later `run` of a campaign without
    repeats.decide still gives it the campaign's fixed repeats (seed 002's ARC-warming series needs all five). A
    stop of the campaign's own rule is kept on resume as before."""
    spec = spec_of("repeats = 5")
    tests = expand(spec)
    first, second = tests[0].id, tests[1].id
    sched = Scheduler(tests, spec.schedule, {}, {first: "decided", second: "stop"})
    assert not sched.states[first].final and sched.states[second].final == "stop"
    assert sched.remaining().runs_high == 5 * (len(tests) - 1)
