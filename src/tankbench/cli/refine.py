"""`tankbench refine JOURNAL`: the follow-up of a screening (issue 29). From the screening's runs it fits each
workload's factors, measures the top ones in full with every other factor at its best level, in the same journal
(one report covers both steps). The choice is journalled first, so an interrupted refine resumes the same tests."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from tankbench.analysis.factors import measured_values, workload_candidates, workload_fit
from tankbench.analysis.refine import WorkloadRefine, choose
from tankbench.campaign import Spec
from tankbench.campaign.expand import expand_matrix
from tankbench.cli._campaign import add_campaign_options, load_campaign
from tankbench.cli._common import print_json
from tankbench.errors import UserError
from tankbench.journal import Journal
from tankbench.journal.lock import JournalLock
from tankbench.model import Run
from tankbench.schedule.design import refine_spec
from tankbench.schedule.rules import FINISHED


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser(
        "refine",
        help="after a screening: measure each workload's top factors in full",
        description='Fit the screening\'s runs in JOURNAL (a campaign run with design = "screening"), rank each '
        "workload's factors by effect, then run the follow-up in the same journal: the top factors in full, every "
        "other factor at its best level. The choice is journalled before anything runs; running refine again "
        "resumes it. Exit status as for run; 2 for bad input (nothing runs).",
    )
    p.add_argument("journal", metavar="JOURNAL", help="the journal of the screening (its .sqlite file)")
    p.add_argument(
        "--top", type=int, default=None, metavar="N", help="factors measured in full (default: campaign.design.top, 3)"
    )
    p.add_argument(
        "--plan", action="store_true", help="print the follow-up's tests and why; run nothing, write nothing"
    )
    p.add_argument("--json", action="store_true", help="with --plan: print it as JSON")
    p.add_argument("-q", "--quiet", action="store_true", help="no progress lines")
    p.add_argument("--keep-lab", action="store_true", help="leave the lab VM up afterwards if this run booted it")
    p.add_argument("--no-report", action="store_true", help="do not write the report next to the journal afterwards")
    p.set_defaults(func=cmd_refine)


def screening_step(path: str, steps: list[dict[str, Any]]) -> dict[str, Any]:
    """The journal's screening step; UserError (exit 2) when it has none."""
    step = next((s for s in steps if s["step"] == "screening"), None)
    if step is None:
        raise UserError(
            f'{path}: has no screening step (its tests were run without campaign.design = "screening")',
            "refine follows a screening: tankbench run CAMPAIGN --set campaign.design=screening --journal "
            f"{path}, then tankbench refine {path}",
        )
    return step


def campaign_of(path: str, step: dict[str, Any]) -> Spec:
    """The campaign the screening ran, with the options it ran with; refused when it no longer has its tests."""
    ref = step["data"]["campaign"]
    parser = argparse.ArgumentParser(prog="tankbench refine", add_help=False)
    parser.add_argument("campaign")
    parser.add_argument("--scale", default="")
    add_campaign_options(parser)
    args = parser.parse_args([ref["campaign"], *ref["options"]])
    try:
        spec = load_campaign(args)
    except UserError as e:  # the file moved or changed since: say whose campaign it was
        raise UserError(f"{path}: the screening's campaign ({ref['campaign']}): {e.message}", e.hint) from None
    have = {t.id for t in expand_matrix(spec)}
    missing = [c["name"] for w in step["data"]["workloads"] for c in w["candidates"] if c["id"] not in have]
    if missing:
        raise UserError(
            f"{path}: the campaign {ref['campaign']} no longer has {len(missing)} of the screening's tests "
            f"(e.g. {missing[0]}): it changed since the screening",
            "restore the campaign file as it was when the screening ran, or screen the new matrix again",
        )
    return spec


def _unfinished(step: dict[str, Any], runs: list[Run], skipped: set[str]) -> list[str]:
    """The screening's tests that have neither a finished run nor a skip (a test that crashed its host too often)."""
    done = {r.test_id for r in runs if not r.warmup and r.status in FINISHED} | skipped
    names = {c["id"]: c["name"] for w in step["data"]["workloads"] for c in w["candidates"]}
    return [names[i] for w in step["data"]["workloads"] for i in w["chosen"] if i not in done]


def choose_refine(path: str, journal: Journal, step: dict[str, Any], top: int) -> list[WorkloadRefine]:
    """Each workload's refine from the screening's measured runs; UserError while the screening is unfinished."""
    runs = journal.runs(with_samples=False)
    left = _unfinished(step, runs, {t.id for t in journal.tests() if t.skip_note})
    if left:
        raise UserError(
            f"{path}: {len(left)} of the screening's tests have no finished run yet (e.g. {left[0]})",
            "finish the screening first: run the campaign again with the same --journal (it resumes)",
        )
    values = measured_values(runs)
    out = []
    for name, points, record in workload_candidates([step], journal.tests()):
        fit, factors, _ = workload_fit(points, values, record)
        if fit is None:  # every test ran in the screening already (or nothing to rank): nothing to add
            out.append(WorkloadRefine(name, (), {}, (), (), ("no fit: the screening measured every test it could",)))
            continue
        out.append(choose(name, fit, points, top))
    return out


def cmd_refine(args: argparse.Namespace) -> int:
    path = args.journal
    if args.top is not None and args.top < 1:
        raise UserError(
            f"--top {args.top}: must be 1 or more", "e.g. --top 3 (the factors each workload measures in full)"
        )
    with Journal.open_readonly(path) as j:
        steps = j.design_steps()
        step = screening_step(path, steps)
        spec = campaign_of(path, step)
        top = args.top or spec.design.top
        done = next((s for s in steps if s["step"] == "refine"), None)
        refines = None if done else choose_refine(path, j, step, top)
    data: dict[str, Any] = done["data"] if done else {"top": top, "workloads": [w.as_dict() for w in refines or []]}
    ids = [i for w in data["workloads"] for i in w["chosen"]]
    if args.plan:
        return print_plan(data, spec, ids, args.json, done is not None, path)
    if not done:
        with JournalLock(path), Journal(path) as j:
            j.add_design_step(spec.campaign_id, "refine", data)
    if not args.quiet:
        for w in data["workloads"]:
            fixed = ", ".join(f"{k}={v}" for k, v in w["fixed"].items()) or "nothing"
            print(f"refine {w['name']}: in full {', '.join(w['top']) or '-'}; fixed {fixed}; {len(w['chosen'])} tests")
    from tankbench.cli.run import write_report
    from tankbench.runner import run_campaign, summary_line

    outcome = run_campaign(refine_spec(spec, ids), path, quiet=args.quiet, keep_lab=args.keep_lab)
    print(summary_line(outcome), file=sys.stderr if args.quiet else sys.stdout)
    if not args.no_report:
        write_report(outcome.journal, args.quiet)
    return outcome.exit_status


def print_plan(data: dict[str, Any], spec: Spec, ids: list[str], as_json: bool, resumed: bool, journal: str) -> int:
    """--plan: what the refine runs and why (the journal's choice when a refine was recorded already), and how
    long it takes (learned from the screening's runs in the journal)."""
    from tankbench.cli.plan import estimate
    from tankbench.progress import fmt_estimate

    rspec = refine_spec(spec, ids)
    tests = [t for t in expand_matrix(spec) if t.id in rspec.design.ids]
    est, sched, learned = estimate(rspec, tests, journal)
    rem = sched.remaining()
    names = {t.id: t.name for t in tests}
    if as_json:
        timing = {"low_s": round(est.low, 1), "likely_s": round(est.likely, 1), "high_s": round(est.high, 1)}
        tests_json = [{"id": i, "name": names.get(i, i)} for i in ids]
        print_json(
            {"resumed": resumed, **data, "tests": tests_json, "estimate": timing, "learned_from_journal": learned}
        )
        return 0
    out = sys.stdout
    state = "recorded already: running it resumes" if resumed else "not recorded yet"
    runs = f"{rem.runs_low}" + (f"–{rem.runs_high}" if rem.runs_high != rem.runs_low else "")
    out.write(f"Refine ({state}): {len(ids)} tests, {runs} runs left.\n")
    for w in data["workloads"]:
        fixed = ", ".join(f"{k}={v}" for k, v in w["fixed"].items()) or "nothing"
        out.write(f"{w['name']}: in full {', '.join(w['top']) or '-'}; fixed {fixed}; {len(w['chosen'])} tests\n")
        for i in w["chosen"]:
            out.write(f"  {names.get(i, i)}\n")
        for note in w["notes"]:
            out.write(f"  note: {note}\n")
    src = "learned from the screening's runs" if learned else "from priors"
    out.write(f"Estimated time: {fmt_estimate(est)} ({src}).\n")
    return 0
