"""`tankbench plan`: expand a campaign into numbered tests; optionally export standalone fio scripts."""

from __future__ import annotations

import argparse
import os
import sys

from tankbench.campaign import Spec
from tankbench.campaign.expand import expand_matrix, include_ids
from tankbench.cli._campaign import add_campaign_options, load_campaign
from tankbench.cli._common import print_json
from tankbench.cli._design import design_lines
from tankbench.errors import UserError
from tankbench.fio.jobs import job_script, job_text
from tankbench.journal import Journal
from tankbench.model import Test
from tankbench.progress import fmt_estimate
from tankbench.runner import default_journal_path, local_has_zfs
from tankbench.schedule.design import select, step_spec
from tankbench.schedule.estimate import Estimate, Estimator, describe_priors, priors_for
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


def estimate(
    spec: Spec, tests: list[Test], journal_path: str = "", real_host: bool = False
) -> tuple[Estimate, Scheduler, bool]:
    """Time left for the campaign as a range; learned from its journal when one exists (else priors for the
    host it runs on, or for a real ZFS host with `real_host`)."""
    path = journal_path or default_journal_path(spec)
    runs = []
    if os.path.exists(path):
        with Journal(path, create=False) as journal:
            ids = {t.id for t in tests}
            runs = [r for r in journal.runs(with_samples=False) if r.test_id in ids]
    sched = Scheduler(
        tests, spec.schedule, history_from_runs(runs), decided_from_runs(runs), spec.unattended.crash_retries
    )
    est = Estimator(spec, priors_for(runs_in_emulated_lab(spec) and not real_host))
    est.learn(runs, tests)
    est.learn_repeats(st.measured for st in sched.states.values() if st.final in ("stop", "drop", "settled"))
    return est.estimate(sched), sched, bool(runs)


def cmd_plan(args: argparse.Namespace) -> int:
    spec = step_spec(load_campaign(args))
    full = expand_matrix(spec)
    tests = select(spec, full, include_ids(spec))  # the tests this step runs (all of them unless a design)
    est, sched, learned = estimate(spec, tests, args.journal)
    real = estimate(spec, tests, args.journal, real_host=True)[0] if runs_in_emulated_lab(spec) else None
    rem = sched.remaining()
    steps, steps_json = (
        design_lines(spec, full, tests, est, real, args.journal, estimate)
        if spec.design.step == "screening"
        else ([], None)
    )
    if args.export:
        export(tests, args.export, spec.campaign_id)
    if args.json:
        print_json(
            {
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
                        "runs": spec.schedule.repeats_max + (1 if sched.states[t.id].warmup else 0),
                    }
                    for t in tests
                ],
                "resolved_sizes": list(spec.extras.get("resolved_sizes", ())),
                "design": steps_json,
                "estimated_seconds": round(est.likely, 1),
                "estimate": {
                    "low_s": round(est.low, 1),
                    "likely_s": round(est.likely, 1),
                    "high_s": round(est.high, 1),
                    "learned_from_journal": learned,
                    "emulated_lab": real is not None,
                },
                "estimate_real_host": None
                if real is None
                else {"low_s": round(real.low, 1), "likely_s": round(real.likely, 1), "high_s": round(real.high, 1)},
                "runs_left": {
                    "measured_low": rem.runs_low,
                    "measured_high": rem.runs_high,
                    "warmups": rem.warmups,
                    "configurations": rem.configs,
                },
            }
        )
        return 0
    out = sys.stdout
    width = max((len(t.name) for t in tests), default=4)
    out.write(f"{'#':>4}  {'id':12}  {'name':{width}}  test case\n")
    for t in tests:
        out.write(f"{t.number:04d}  {t.id}  {t.name:{width}}  {t.test_case}\n")
    out.write("\n" + summary(spec, tests, est, sched, learned) + "\n")
    settle = spec.schedule.settle is not None
    if not learned:
        out.write(f"Priors: {describe_priors(priors_for(real is not None), settle, spec.schedule.ss)}.\n")
    out.write(resolved_sizes(spec))
    if real is not None and not learned:
        out.write(
            f"This runs in the lab VM, emulated here (TCG): on a real ZFS host it would take {fmt_estimate(real)}.\n"
            f"Real-host priors: {describe_priors(priors_for(False), settle, spec.schedule.ss)}.\n"
        )
    out.write("".join(line + "\n" for line in steps))
    if args.export:
        out.write(f"Exported {len(tests)} job scripts to {args.export}/ (run any NNNN-job.sh with plain fio).\n")
    return 0


def resolved_sizes(spec: Spec) -> str:
    """The sizes the campaign gave relative to the host, as this host resolved them (empty if none)."""
    lines = spec.extras.get("resolved_sizes", ())
    return "".join(["Sizes relative to the host:\n", *(f"  {x}\n" for x in lines)]) if lines else ""


def summary(spec: Spec, tests: list[Test], est: Estimate, sched: Scheduler, learned: bool) -> str:
    """What the schedule will do and how long it takes, with what the estimate counts."""
    s = spec.schedule
    rem = sched.remaining()
    repeats = (
        f"{s.repeats_min}–{s.repeats_max} repeats (95 % CI within ±{s.ci:.0%})"
        if s.ci is not None and s.repeats_min < s.repeats_max
        else f"{s.repeats_min}–{s.repeats_max} repeats (more only where the order is in doubt, margin {s.settle:.0%})"
        if s.settle is not None and s.repeats_min < s.repeats_max
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
        with open(os.path.join(directory, base + ".fio"), "w") as f:
            f.write(job_text(t))
        script = os.path.join(directory, base + ".sh")
        with open(script, "w") as f:
            f.write(job_script(t, base + ".fio", campaign_id))
        os.chmod(script, 0o755)
        index.append(f"{t.number:04d}\t{t.id}\t{t.name}\t{t.test_case}\t{base}.sh")
    with open(os.path.join(directory, "tests.tsv"), "w") as f:
        f.write("\n".join(index) + "\n")
