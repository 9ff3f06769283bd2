"""`tankbench plan`: expand a campaign into numbered tests; optionally export standalone fio scripts."""

from __future__ import annotations

import argparse
import os
import sys
from typing import NamedTuple, TextIO

from tankbench.campaign import Spec
from tankbench.campaign.expand import expand, expand_matrix, include_ids
from tankbench.campaign.host import default_journal_path, local_has_zfs
from tankbench.campaign.hosts import FleetHost
from tankbench.cli._campaign import add_campaign_options, load_campaign
from tankbench.cli._common import print_json
from tankbench.cli._design import design_lines
from tankbench.errors import UserError
from tankbench.fio.jobs import job_script, job_text
from tankbench.journal import Journal
from tankbench.model import Run, Test
from tankbench.progress import fmt_estimate
from tankbench.schedule.decide import CHECK_ALPHA
from tankbench.schedule.design import select, step_spec
from tankbench.schedule.estimate import Estimate, Estimator, Priors, describe_priors, likely_claim_runs, priors_for
from tankbench.schedule.scheduler import Scheduler, decided_from_runs, history_from_runs
from tankbench.units import fmt_duration


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser(
        "plan",
        help="list the tests a campaign expands to",
        description="Expand CAMPAIGN's matrix into numbered tests with stable ids. Nothing runs.",
    )
    p.add_argument("campaign", metavar="CAMPAIGN", help="campaign file (TOML), or the name of a preset")
    p.add_argument(
        "--scale", metavar="NAME", default="", help="apply the campaign's [scale.NAME] overrides (e.g. quick)"
    )
    p.add_argument("--json", action="store_true", help="print the tests as JSON")
    p.add_argument(
        "--check",
        action="store_true",
        help="plan and price what `tankbench check` would run: the tests that decide the claims, repeated until "
        "each claim is decided (at most repeats.max, at least 3)",
    )
    p.add_argument("--export", metavar="DIR", help="write NNNN-job.sh and NNNN-job.fio per test into DIR")
    p.add_argument(
        "--journal",
        metavar="PATH",
        default="",
        help="learn costs and what is done from this journal (default: the campaign's, if it exists)",
    )
    add_campaign_options(p)
    p.set_defaults(func=cmd_plan)


def runs_in_emulated_lab(spec: Spec) -> bool:
    """Whether the campaign would run in the lab VM, which is emulated (TCG) on machines without KVM."""
    return spec.host.kind == "lab" or (spec.host.kind == "auto" and not local_has_zfs())


def journal_runs(spec: Spec, tests: list[Test], journal_path: str = "") -> list[Run]:
    """The journal's runs of these tests ([] without a journal)."""
    path = journal_path or default_journal_path(spec)
    if not os.path.exists(path):
        return []
    with Journal.open_readonly(path) as journal:  # plan only reads it (never a file beside it)
        ids = {t.id for t in tests}
        return [r for r in journal.runs(with_samples=False) if r.test_id in ids]


def estimate_with(spec: Spec, tests: list[Test], runs: list[Run], emulated: bool) -> tuple[Estimate, Scheduler]:
    """Time left for `tests` on one host, from these runs and the priors of an emulated (lab) or a real host."""
    sched = Scheduler(
        tests, spec.schedule, history_from_runs(runs), decided_from_runs(runs), spec.unattended.crash_retries
    )
    est = Estimator(spec, priors_for(emulated))
    est.learn(runs, tests)
    est.learn_repeats(st.measured for st in sched.states.values() if st.final in ("stop", "drop", "settled", "decided"))
    return est.estimate(sched), sched


def estimate(
    spec: Spec, tests: list[Test], journal_path: str = "", real_host: bool = False
) -> tuple[Estimate, Scheduler, bool]:
    """Time left for the campaign as a range; learned from its journal when one exists (else priors for the
    host it runs on, or for a real ZFS host with `real_host`). A fleet's is its hosts' (fleet_estimate)."""
    runs = journal_runs(spec, tests, journal_path)
    if spec.fleet is not None and not real_host:
        total, _per, sched = fleet_estimate(spec, tests, runs)
        return total, sched, bool(runs)
    est, sched = estimate_with(spec, tests, runs, runs_in_emulated_lab(spec) and not real_host)
    return est, sched, bool(runs)


def host_is_emulated(fh: FleetHost) -> bool:
    """A fleet host's priors: a lab is the emulated VM here (TCG without KVM), local and ssh hosts real ones."""
    return fh.kind == "lab"


def fleet_estimate(spec: Spec, tests: list[Test], runs: list[Run]) -> tuple[Estimate, dict[str, Estimate], Scheduler]:
    """(the campaign's time, each host's, the whole schedule) of a fleet, each host from its own priors and its own
    runs in the journal. `each`: every host runs every test, in parallel: the campaign takes its slowest host's
    time. `split`: whole test cases go to whichever host is free (the hosts are alike): cases estimated one by one
    and handed to the least loaded host in turn, longest first; a host's figure is its share."""
    assert spec.fleet is not None
    hosts = spec.fleet.hosts
    whole = estimate_with(spec, tests, runs, host_is_emulated(hosts[0]))[1]
    per: dict[str, Estimate] = {}
    if spec.fleet.mode == "each":
        for fh in hosts:
            per[fh.name] = estimate_with(spec, tests, [r for r in runs if r.host == fh.name], host_is_emulated(fh))[0]
    else:
        from tankbench.fleet import case_groups

        cases = [estimate_with(spec, g, runs, host_is_emulated(hosts[0]))[0] for g in case_groups(spec, tests)]
        load = {fh.name: [0.0, 0.0, 0.0] for fh in hosts}
        for c in sorted(cases, key=lambda e: -e.likely):
            least = min(load, key=lambda n: load[n][1])
            load[least] = [load[least][0] + c.low, load[least][1] + c.likely, load[least][2] + c.high]
        per = {n: Estimate(*v) for n, v in load.items()}
    slowest = Estimate(*(max(getattr(e, k) for e in per.values()) for k in ("low", "likely", "high")))
    return slowest, per, whole


def fleet_lines(spec: Spec, per: dict[str, Estimate]) -> str:
    """Each host's share of a fleet's time, and what it was estimated from."""
    assert spec.fleet is not None
    how = (
        "every host runs every test, in parallel: the campaign takes its slowest host's time"
        if spec.fleet.mode == "each"
        else "whole test cases go to whichever host is free: each host's share, the campaign its longest"
    )
    lines = [f"Per host ({how}):"]
    for fh in spec.fleet.hosts:
        priors = "the emulated lab's priors" if host_is_emulated(fh) else "a real host's priors"
        lines.append(f"  {fh.name}: {fmt_estimate(per[fh.name])} ({priors}, or its own runs in the journal)")
    return "\n".join(lines) + "\n"


class Planned(NamedTuple):
    """What plan says of a step: its estimate (and a real host's, for a lab), each fleet host's, its schedule."""

    est: Estimate
    real: Estimate | None
    per: dict[str, Estimate]
    sched: Scheduler
    learned: bool


def planned(spec: Spec, tests: list[Test], journal_path: str) -> Planned:
    """The estimate of these tests from the journal's runs or the priors: a fleet's per host (each from its own
    priors and runs, not as if the lab ran them all), a lab's also as a real host would take it."""
    runs = journal_runs(spec, tests, journal_path)
    if spec.fleet is not None:
        est, per, sched = fleet_estimate(spec, tests, runs)
        return Planned(est, None, per, sched, bool(runs))
    est, sched = estimate_with(spec, tests, runs, runs_in_emulated_lab(spec))
    real = estimate_with(spec, tests, runs, False)[0] if runs_in_emulated_lab(spec) else None
    return Planned(est, real, {}, sched, bool(runs))


def cmd_plan(args: argparse.Namespace) -> int:
    spec = step_spec(load_campaign(args))
    full = expand_matrix(spec)
    tests = select(spec, full, include_ids(spec))  # the tests this step runs (all of them unless a design)
    if args.check:  # what `check` runs: the claims' tests under the decide rule
        from tankbench.cli.check import prepare

        spec = prepare(spec, CHECK_ALPHA, None, full)[0]
        tests = expand(spec)
    p = planned(spec, tests, args.journal)
    steps, steps_json = (
        design_lines(spec, full, tests, p.est, p.real, args.journal, estimate)
        if spec.design.step == "screening"
        else ([], None)
    )
    if args.export:
        export(tests, args.export, spec.campaign_id)
    if args.json:
        print_json(plan_doc(spec, tests, p, steps_json))
        return 0
    write_plan(sys.stdout, spec, tests, p, steps)
    if args.export:
        sys.stdout.write(f"Exported {len(tests)} job scripts to {args.export}/ (run any NNNN-job.sh with plain fio).\n")
    return 0


def _range(e: Estimate) -> dict[str, float]:
    return {"low_s": round(e.low, 1), "likely_s": round(e.likely, 1), "high_s": round(e.high, 1)}


def plan_doc(spec: Spec, tests: list[Test], p: Planned, steps_json: object) -> dict[str, object]:
    """`plan --json`: the tests, the design's steps, the estimates and the runs left."""
    rem = p.sched.remaining()
    return {
        "campaign": spec.name,
        "campaign_id": spec.campaign_id,
        "tests": [
            {
                "number": t.number,
                "id": t.id,
                "name": t.name,
                "test_case": t.test_case,
                "target": t.target.name,
                "target_kind": t.target.kind,
                "params": dict(t.params),
                "runs": spec.schedule.repeats_max + (1 if p.sched.states[t.id].warmup else 0),
            }
            for t in tests
        ],
        "resolved_sizes": list(spec.extras.get("resolved_sizes", ())),
        "design": steps_json,
        "estimated_seconds": round(p.est.likely, 1),
        "estimate": dict(_range(p.est), learned_from_journal=p.learned, emulated_lab=p.real is not None),
        "estimate_per_host": {n: _range(e) for n, e in p.per.items()},
        "estimate_real_host": None if p.real is None else _range(p.real),
        "runs_left": {
            "measured_low": rem.runs_low,
            "measured_high": rem.runs_high,
            "warmups": rem.warmups,
            "configurations": rem.configs,
        }
        | ({"measured_likely": likely} if (likely := likely_runs(p.sched)) is not None else {}),
    }


def write_plan(out: TextIO, spec: Spec, tests: list[Test], p: Planned, steps: list[str]) -> None:
    """The plan for people: a line per test, the estimate, the priors it came from, the design's steps."""
    width = max((len(t.name) for t in tests), default=4)
    out.write(f"{'#':>4}  {'id':12}  {'name':{width}}  test case\n")
    for t in tests:
        out.write(f"{t.number:04d}  {t.id}  {t.name:{width}}  {t.test_case}\n")
    out.write("\n" + summary(spec, tests, p.est, p.sched, p.learned) + "\n")
    settle = spec.schedule.settle is not None
    if p.per:
        out.write(fleet_lines(spec, p.per))
    if not p.learned and not p.per:
        out.write(
            f"Priors: {describe_priors(priors_for(p.real is not None), settle, spec.schedule.ss, spec.schedule.decide)}.\n"
        )
    out.write(resolved_sizes(spec))
    if p.real is not None and not p.learned:
        out.write(
            f"This runs in the lab VM, emulated here (TCG): on a real ZFS host it would take {fmt_estimate(p.real)}.\n"
            f"Real-host priors: {describe_priors(priors_for(False), settle, spec.schedule.ss, spec.schedule.decide)}.\n"
        )
    out.write("".join(line + "\n" for line in steps))


def resolved_sizes(spec: Spec) -> str:
    """The sizes the campaign gave relative to the host, as this host resolved them (empty if none)."""
    lines = spec.extras.get("resolved_sizes", ())
    return "".join(["Sizes relative to the host:\n", *(f"  {x}\n" for x in lines)]) if lines else ""


def likely_runs(sched: Scheduler) -> int | None:
    """The measured runs left that deciding the claims most likely takes (`check`: likely_claim_runs on the priors'
    run-to-run noise); None for any other schedule."""
    s = sched.schedule
    if s.decide is None or s.decide_orders or s.repeats_min >= s.repeats_max:
        return None
    per = likely_claim_runs(sched, s.decide, Priors().run_cv)
    return sum(
        max(0, per.get(st.test.id, s.repeats_min) - st.measured) for g in sched.groups for st in g if not st.final
    )


def summary(spec: Spec, tests: list[Test], est: Estimate, sched: Scheduler, learned: bool) -> str:
    """What the schedule will do and how long it takes, with what the estimate counts."""
    s = spec.schedule
    rem = sched.remaining()
    repeats = (
        f"{s.repeats_min}–{s.repeats_max} repeats (95 % CI within ±{s.ci:.0%})"
        if s.ci is not None and s.repeats_min < s.repeats_max
        else f"{s.repeats_min}–{s.repeats_max} repeats (more only where the order is in doubt, margin {s.settle:.0%})"
        if s.settle is not None and s.repeats_min < s.repeats_max
        else f"{s.repeats_min}–{s.repeats_max} repeats (until every claim{'' if not s.decide_orders else ' and order'} "
        f"is decided at a {s.decide:.0%} error rate)"
        if s.decide is not None and s.repeats_min < s.repeats_max
        else f"{s.repeats_max} repeat(s)"
    )
    warm = {"per-test": "a warm-up per test", "per-config": "a warm-up per configuration", "none": "no warm-up"}[
        s.warmup
    ]
    lines = [
        f"{len(tests)} tests on {len(sched.groups)} configurations, {repeats}, {warm}"
        f"{', racing' if s.racing else ''}, order {s.order}"
        f"{f', steady state {s.ss} over {fmt_duration(s.ss_dur_s)}' if s.ss else ''}.",
        f"Runs left: {rem.runs_low}"
        + (f"–{rem.runs_high}" if rem.runs_high != rem.runs_low else "")
        + (f" (likely {likely})" if (likely := likely_runs(sched)) is not None else "")
        + f" measured + {rem.warmups} warm-up(s).",
        f"Estimated time: {fmt_estimate(est)} — fio time, per-run overhead (drain, samplers), "
        f"provisioning and layout of {rem.configs} configuration(s) and cooldowns, "
        + ("learned from the journal." if learned else "from priors until the journal has measured them."),
    ]
    return "\n".join(lines)


def export(tests: list[Test], directory: str, campaign_id: str = "") -> None:
    """Write NNNN-job.fio and an executable NNNN-job.sh per test, and an index tests.tsv."""
    if directory == "-":
        raise UserError("--export -: the export is a directory of scripts, not one stream", "name a directory")
    if os.path.exists(directory) and not os.path.isdir(directory):
        raise UserError(f"--export {directory}: exists and is not a directory", "name a directory (new or existing)")
    try:
        os.makedirs(directory, exist_ok=True)
        _write_export(tests, directory, campaign_id)
    except OSError as e:
        where = e.filename or directory
        raise UserError(f"cannot write the export to {where}: {e.strerror}", "pick a writable directory") from e


def _write_export(tests: list[Test], directory: str, campaign_id: str) -> None:
    index = ["number\tid\tname\ttest_case\tscript"]
    for t in tests:
        base = f"{t.number:04d}-job"
        with open(os.path.join(directory, base + ".fio"), "w", encoding="utf-8") as f:
            f.write(job_text(t))
        script = os.path.join(directory, base + ".sh")
        with open(script, "w", encoding="utf-8") as f:
            f.write(job_script(t, base + ".fio", campaign_id))
        os.chmod(script, 0o755)
        index.append(f"{t.number:04d}\t{t.id}\t{t.name}\t{t.test_case}\t{base}.sh")
    with open(os.path.join(directory, "tests.tsv"), "w", encoding="utf-8") as f:
        f.write("\n".join(index) + "\n")
