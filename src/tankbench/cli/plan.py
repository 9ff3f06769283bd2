"""`tankbench plan`: expand a campaign into numbered tests; optionally export standalone fio scripts."""

from __future__ import annotations

import argparse
import os
import sys

from tankbench.cli._common import print_json
from tankbench.cli.presets import resolve_campaign
from tankbench.errors import UserError
from tankbench.fio.jobs import job_script, job_text
from tankbench.runner import planned_runs
from tankbench.spec import expand, load_spec
from tankbench.units import fmt_duration


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("plan", help="list the tests a campaign expands to",
                       description="Expand CAMPAIGN's matrix into numbered tests with stable ids. Nothing runs.")
    p.add_argument("campaign", metavar="CAMPAIGN", help="campaign file (TOML), or the name of a preset")
    p.add_argument("--scale", metavar="NAME", default="", help="apply the campaign's [scale.NAME] overrides (e.g. quick)")
    p.add_argument("--json", action="store_true", help="print the tests as JSON")
    p.add_argument("--export", metavar="DIR", help="write NNNN-job.sh and NNNN-job.fio per test into DIR")
    p.set_defaults(func=cmd_plan)


def cmd_plan(args: argparse.Namespace) -> int:
    spec = load_spec(resolve_campaign(args.campaign), args.scale)
    tests = expand(spec)
    runs = len(planned_runs(spec))
    per_test = runs * (spec.ramp + spec.runtime) + spec.cooldown.fixed_s
    if args.export:
        export(tests, args.export, spec.campaign_id)
    if args.json:
        print_json({"campaign": spec.name, "campaign_id": spec.campaign_id, "tests": [
            {"number": t.number, "id": t.id, "name": t.name, "test_case": t.test_case, "target": t.target.name,
             "target_kind": t.target.kind, "params": dict(t.params), "runs": runs} for t in tests],
            "estimated_seconds": per_test * len(tests)})
        return 0
    out = sys.stdout
    width = max((len(t.name) for t in tests), default=4)
    out.write(f"{'#':>4}  {'id':12}  {'name':{width}}  test case\n")
    for t in tests:
        out.write(f"{t.number:04d}  {t.id}  {t.name:{width}}  {t.test_case}\n")
    out.write(f"\n{len(tests)} tests x {runs} run(s) each ({'warm-up + ' if spec.warmup else ''}"
              f"{spec.repeats} repeat(s)); at least {fmt_duration(per_test * len(tests))} of fio time"
              f"{' plus cooldowns' if spec.cooldown.active else ''}.\n")
    if args.export:
        out.write(f"Exported {len(tests)} job scripts to {args.export}/ (run any NNNN-job.sh with plain fio).\n")
    return 0


def export(tests: list, directory: str, campaign_id: str = "") -> None:
    """Write NNNN-job.fio and an executable NNNN-job.sh per test, and an index tests.tsv."""
    try:
        os.makedirs(directory, exist_ok=True)
    except OSError as e:
        raise UserError(f"cannot create export directory {directory}: {e.strerror}", "pick a writable directory") from e
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
