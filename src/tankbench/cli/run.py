"""`tankbench run`: run every pending test of a campaign and journal each run; resumes after crashes."""

from __future__ import annotations

import argparse
import os
import sys

from tankbench.cli._campaign import add_campaign_options, load_campaign
from tankbench.cli.plan import resolved_sizes
from tankbench.runner import run_campaign, summary_line
from tankbench.spec import Spec


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser(
        "run",
        help="run a campaign (resumes where it stopped)",
        description="Run every pending test of CAMPAIGN and commit each run to the journal as it ends. "
        "Runs already in the journal are kept; a run that was in progress when tankbench died is "
        "marked crashed and retried; a test that crashed its host more than campaign.crash_retries times "
        "(default 1) is skipped with a note. "
        "Exit status: 0 all runs done, 1 some runs failed/timed out/were skipped, 2 bad input, "
        "3 the host failed.",
    )
    p.add_argument("campaign", metavar="CAMPAIGN", help="campaign file (TOML), or the name of a preset")
    p.add_argument(
        "--scale", metavar="NAME", default="", help="apply the campaign's [scale.NAME] overrides (e.g. quick)"
    )
    p.add_argument("--journal", metavar="PATH", help="journal file (default: tankbench-results/<name>/journal.sqlite)")
    p.add_argument("-q", "--quiet", action="store_true", help="no progress lines")
    p.add_argument(
        "--keep-lab",
        action="store_true",
        help="leave the lab VM up afterwards if this run booted it (default: shut it down)",
    )
    p.add_argument(
        "--no-report",
        action="store_true",
        help="do not write the report (index.html, summary.md, …) next to the journal afterwards",
    )
    add_campaign_options(p)
    p.set_defaults(func=cmd_run)


def cmd_run(args: argparse.Namespace) -> int:
    spec = load_campaign(args)
    if not args.quiet:
        sys.stdout.write(resolved_sizes(spec))
    if spec.fleet is not None:  # several hosts: fleet.py drives one single-host runner per host
        return cmd_run_fleet(spec, args)
    outcome = run_campaign(spec, args.journal, quiet=args.quiet, keep_lab=args.keep_lab)
    print(summary_line(outcome), file=sys.stderr if args.quiet else sys.stdout)
    if not args.no_report:
        write_report(outcome.journal, args.quiet)
    return outcome.exit_status


def cmd_run_fleet(spec: Spec, args: argparse.Namespace) -> int:
    """`run` of a campaign with several hosts: the summary per host, and for hosts_mode = "each" one report per
    host beside hosts.md, which compares them."""
    from tankbench.fleet import fleet_summary, run_fleet

    assert spec.fleet is not None
    o = run_fleet(spec, args.journal, quiet=args.quiet, keep_lab=args.keep_lab)
    stream = sys.stderr if args.quiet else sys.stdout
    print(summary_line(o), file=stream)
    for line in fleet_summary(o):
        print(line, file=stream)
    if args.no_report:
        return o.exit_status
    if spec.fleet.mode == "split":
        write_report(o.journal, args.quiet)
        return o.exit_status
    from tankbench.fleetreport import write_host_reports

    out = os.path.join(os.path.dirname(os.path.abspath(o.journal)), "report")
    paths = write_host_reports(o.journal, out)
    if not args.quiet and paths:
        print(f"report: {paths[0]} (hosts side by side; each host's own report in {out}/<host>/)")
    return o.exit_status


def write_report(journal: str, quiet: bool) -> None:
    """The report of the whole journal, in report/ beside it (what `tankbench report` writes)."""
    from tankbench.analysis.analyse import analyse_dataset, load
    from tankbench.analysis.detail import with_run_detail
    from tankbench.clientreport import write_clients
    from tankbench.journal.db import Journal
    from tankbench.reports.write import write_all

    out = os.path.join(os.path.dirname(os.path.abspath(journal)), "report")
    with Journal.open_readonly(journal) as j:
        analysis = analyse_dataset(load(j), "auto")
        paths = write_all(with_run_detail(analysis, j), out)
        paths += write_clients(j, out)  # per-client figures of client/server tests (clients.md)
    if not quiet:
        print(f"report: {paths[0]} (and {', '.join(os.path.basename(p) for p in paths[1:])})")
