"""`tankbench check PRESET|CAMPAIGN`: run only the tests that decide the campaign's claims, repeating them until each
claim is decided at the error rate (schedule/decide.py) or repeats.max, and print each claim's verdict on this
machine with its interval."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from typing import Any

from tankbench.analysis.claims import Verdict
from tankbench.campaign import Spec
from tankbench.campaign.expand import expand_matrix
from tankbench.cli._campaign import add_campaign_options, load_campaign
from tankbench.cli._common import print_json
from tankbench.errors import UserError
from tankbench.model import Test
from tankbench.schedule.decide import CHECK_ALPHA, CHECK_MAX, check_spec


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser(
        "check",
        help="does this machine show what a campaign (a seed's preset) claims? runs only what decides it",
        description="Run only the tests that decide CAMPAIGN's claims ([[claim]] and [[goal]]), each again only "
        "while a claim it belongs to is undecided at the error rate (a sequential test: repeated confidence "
        "intervals with Pocock's boundary, docs/schedule.md), and print per claim whether it holds on this "
        'machine, e.g. "holds on this machine: 12.1× [8.0–18.3]" (the ratio of the first level to the second and '
        "its 95 % interval). Runs already in the journal count. Exit status: 0 every claim decided, 1 a claim "
        "undecided or runs failed, 2 bad input (a claim naming an axis or level the matrix lacks, an unknown "
        "metric, an expectation that does not parse, a claim no test covers), 3 the host failed.",
    )
    p.add_argument("campaign", metavar="CAMPAIGN", help="campaign file (TOML), or the name of a preset")
    p.add_argument(
        "--scale", metavar="NAME", default="", help="apply the campaign's [scale.NAME] overrides (e.g. quick)"
    )
    p.add_argument("--journal", metavar="PATH", help="journal file (default: the one `run` uses for the campaign)")
    p.add_argument("--json", action="store_true", help="print the verdicts as JSON (progress goes to stderr)")
    p.add_argument(
        "--error-rate",
        metavar="P",
        default=f"{CHECK_ALPHA:.0%}",
        help="the chance, over all looks, that a claim's verdict is wrong (default %(default)s)",
    )
    p.add_argument(
        "--max",
        metavar="N",
        type=int,
        default=None,
        help=f"repeats of a test at most (default: the campaign's repeats.max, at least {CHECK_MAX}; 1: judge the "
        "journal's runs, adding only the first run of a test that has none)",
    )
    p.add_argument("-q", "--quiet", action="store_true", help="no progress lines")
    p.add_argument("--keep-lab", action="store_true", help="leave the lab VM up afterwards if this run booted it")
    add_campaign_options(p)
    p.set_defaults(func=cmd_check)


def error_rate(text: str) -> float:
    """--error-rate "5%" or 0.05 -> 0.05; UserError outside (0, 50 %)."""
    try:
        value = float(text[:-1]) / 100 if text.strip().endswith("%") else float(text)
    except ValueError:
        value = -1.0
    if not 0 < value < 0.5:
        raise UserError(f"--error-rate {text}: not a rate between 0 and 50 %", "e.g. --error-rate 5% (or 0.05)")
    return value


def prepare(spec: Spec, alpha: float, rmax: int | None, tests: list[Test] | None = None) -> tuple[Spec, int]:
    """The campaign as check runs it, and how many runs its own schedule would take (all tests x repeats.max);
    `tests`: its whole matrix when the caller has expanded it already (`plan --check`: 2,703 tests once, not twice)."""
    if not spec.report.claims:
        raise UserError(
            f"{spec.path}: the campaign states no claim",
            'add a [[claim]] (name, compare = { axis = [a, b] }, metric, expect = ">= 2x") or a [[goal]]',
        )
    if rmax is not None and rmax < 1:
        raise UserError(
            f"--max {rmax}: not a number of runs", "--max 3 (--max 1 judges the journal's runs, adding none)"
        )
    if tests is None:
        tests = expand_matrix(spec)  # the whole matrix (a screening design's too); refuses claims it cannot decide
    checked = check_spec(spec, tests, alpha, rmax)
    if not checked.only:
        raise UserError(
            f"{spec.path}: no test of this campaign decides its claims (goals on test cases it does not run)",
            "check the goals' `case` against `tankbench plan`",
        )
    return checked, len(tests) * spec.schedule.repeats_max


def cmd_check(args: argparse.Namespace) -> int:
    from tankbench.runner import run_campaign, summary_line

    alpha = error_rate(args.error_rate)
    spec, fixed_runs = prepare(load_campaign(args), alpha, args.max)
    quiet = args.quiet or args.json
    outcome = run_campaign(spec, args.journal, quiet=quiet, keep_lab=args.keep_lab)
    print(summary_line(outcome), file=sys.stderr if quiet else sys.stdout)
    verdicts, emulated, runs = judged(outcome.journal, spec)
    doc = {
        "campaign": spec.name,
        "scale": spec.scale,
        "journal": outcome.journal,
        "error_rate": alpha,
        "level": 0.95,
        "emulated": emulated,
        "tests": len(spec.only),
        "runs": runs,
        "runs_this_check": outcome.runs_done + outcome.runs_failed + outcome.runs_timeout,
        "fixed_runs": fixed_runs,
        "claims": [v.as_dict() for v in verdicts],
    }
    if args.json:
        print_json(doc)
    else:
        print("\n".join(render(spec, verdicts, doc)))
    undecided = any(not v.decided for v in verdicts)
    return 1 if undecided or outcome.exit_status else 0


def judged(journal_path: str, spec: Spec) -> tuple[tuple[Verdict, ...], str, int]:
    """The claims' verdicts from the journal (95 % intervals), the emulation banner ("" on real hardware) and the
    measured runs of the tests they were judged on."""
    from tankbench.analysis.analyse import load
    from tankbench.analysis.checks import validity_warnings
    from tankbench.analysis.claims import verdicts
    from tankbench.journal.db import Journal

    with Journal.open_readonly(journal_path) as j:
        ds = load(j, spec.report)
    warns = validity_warnings(ds)
    found = verdicts(ds, warns)
    emulated = next((w.message for w in warns if w.code == "emulated"), "")
    ids = {tid for v in found for tid in v.tests}
    runs = sum(len(t.measured) for t in ds.tests if t.id in ids)
    return found, emulated, runs


def render(spec: Spec, verdicts: Sequence[Verdict], doc: dict[str, Any]) -> list[str]:
    """The verdicts for people: the campaign-wide caveat once, then one block per claim."""
    out = [""]
    if doc["emulated"]:
        out += [f"Note: {doc['emulated']}", ""]
    out.append(
        f"Claims of {spec.name}{f' (scale {spec.scale})' if spec.scale else ''}: decided at a "
        f"{doc['error_rate']:.0%} error rate (repeated confidence intervals); intervals at 95 %"
    )
    for v in verdicts:
        out.append(f"- {v.name}: {v.sentence()}")
        out.append(f"    {v.claim}; {len(v.tests)} test(s), {v.runs} run(s); {v.method or 'no interval yet'}")
        out += [f"    weakened by {w}" for w in v.weakened_by]
        out += [f"    {n}" for n in v.notes]
    out.append(
        f"{doc['runs']} measured run(s) of {doc['tests']} test(s) decide these claims; the campaign's own schedule "
        f"would run up to {doc['fixed_runs']} (every test, repeats.max times)."
    )
    return out
