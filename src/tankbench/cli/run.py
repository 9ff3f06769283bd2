"""`tankbench run`: run every pending test of a campaign and journal each run; resumes after crashes."""

from __future__ import annotations

import argparse
import os
import sys
from typing import Any

from tankbench.campaign import Spec
from tankbench.cli._campaign import add_campaign_options, load_campaign
from tankbench.cli.plan import resolved_sizes
from tankbench.runner import run_campaign, summary_line
from tankbench.schedule.design import step_spec


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
    boot = p.add_mutually_exclusive_group()
    boot.add_argument(
        "--resume-at-boot",
        action="store_true",
        help="on the ZFS host itself (host local, root, systemd): install a systemd unit that runs this campaign "
        "again after a reboot or crash; removed when the campaign ends (docs/unattended.md)",
    )
    boot.add_argument(
        "--no-resume-at-boot",
        action="store_true",
        help="remove the campaign's resume-at-boot unit (if tankbench installed one), then run without it "
        "(also when the campaign sets resume_at_boot = true)",
    )
    add_campaign_options(p)
    p.set_defaults(func=cmd_run)


def lab_note(spec: Spec) -> str:
    """On a machine whose kernel has ZFS, a campaign that names the lab (the quick start) still runs there: say so,
    and how to measure this machine's pool instead ('' otherwise)."""
    from tankbench.runner import local_has_zfs

    if spec.host.kind != "lab" or spec.fleet is not None or not local_has_zfs():
        return ""
    return (
        "note: this campaign runs in the lab VM (its host is the lab), though this machine's kernel has ZFS; to "
        "measure a pool here, run it with --host local (a preset with --disks naming spare disks, or --set "
        "pool.parent=POOL/DATASET: docs/real-host.md)\n"
    )


def cmd_run(args: argparse.Namespace) -> int:
    spec = step_spec(load_campaign(args))
    if not args.quiet:
        sys.stdout.write(resolved_sizes(spec))
        sys.stderr.write(lab_note(spec))
    if spec.design.step == "screening":  # its choice of tests goes into the journal first (tankbench refine reads it)
        from tankbench.cli._design import record_screening
        from tankbench.runner import default_journal_path

        record_screening(spec, args.journal or default_journal_path(spec), campaign_ref(args))
    if args.resume_at_boot or args.no_resume_at_boot or spec.unattended.resume_at_boot:
        return cmd_run_resumable(spec, args)
    if spec.fleet is not None:  # several hosts: fleet.py drives one single-host runner per host
        return cmd_run_fleet(spec, args)
    return cmd_run_one(spec, args)


def cmd_run_one(spec: Spec, args: argparse.Namespace) -> int:
    outcome = run_campaign(spec, args.journal, quiet=args.quiet, keep_lab=args.keep_lab)
    print(summary_line(outcome), file=sys.stderr if args.quiet else sys.stdout)
    if not args.no_report:
        write_report(outcome.journal, args.quiet)
    if spec.design.step == "screening" and not args.quiet:
        print(f"next: tankbench refine {outcome.journal} (the top {spec.design.top} factors of each workload in full)")
    return outcome.exit_status


def cmd_run_resumable(spec: Spec, args: argparse.Namespace) -> int:
    """--resume-at-boot: checked before anything is written, the unit kept for the campaign's lifetime;
    --no-resume-at-boot: this campaign's unit removed first."""
    from tankbench import resumeboot
    from tankbench.journal.lock import JournalLock
    from tankbench.runner import default_journal_path, local_has_zfs

    def note(msg: str) -> None:
        print(msg, file=sys.stderr, flush=True)

    if args.no_resume_at_boot:
        if not resumeboot.remove(spec.campaign_id, note):
            note(f"resume at boot: no unit of this campaign ({resumeboot.unit_name(spec.campaign_id)}) to remove")
        return cmd_run_fleet(spec, args) if spec.fleet is not None else cmd_run_one(spec, args)
    kind = spec.host.kind
    if kind == "auto":
        kind = "local" if local_has_zfs() else "lab"
    asked_by = "--resume-at-boot" if args.resume_at_boot else "campaign.resume_at_boot = true"
    resumeboot.check(spec.path, asked_by, kind, spec.fleet is not None)
    journal = args.journal or default_journal_path(spec)
    unit = resumeboot.plan(spec.campaign_id, spec.name, args.campaign, journal, resume_options(args), os.environ)
    if resumeboot.resumed_by():
        note(f"resume at boot: started by {resumeboot.resumed_by()} after a reboot; it stays until the campaign ends")
    args.journal = unit.argv[unit.argv.index("--journal") + 1]
    with JournalLock(args.journal):  # another run of this journal: refused before its unit is touched
        pass
    with resumeboot.kept_until_end(unit, note):
        return cmd_run_one(spec, args)


def campaign_ref(args: argparse.Namespace) -> dict[str, Any]:
    """How `refine` finds the campaign again: the file (absolute) or preset, and the options it ran with."""
    source = args.campaign
    if os.path.isfile(source):
        source = os.path.abspath(source)
    return {"campaign": source, "options": [o for o in resume_options(args) if o not in ("--quiet", "--no-report")]}


def resume_options(args: argparse.Namespace) -> list[str]:
    """The options of this `run` to give again at boot (a host file's path made absolute)."""
    opts: list[str] = []
    if args.scale:
        opts += ["--scale", args.scale]
    if args.quiet:
        opts.append("--quiet")
    if args.no_report:
        opts.append("--no-report")
    if args.host:
        opts += ["--host", os.path.abspath(args.host) if os.path.isfile(args.host) else args.host]
    for flag, values in (("--disks", args.disks), ("--log", args.log), ("--cache", args.cache)):
        for v in values:
            opts += [flag, v]
    for v in args.confirm:
        opts += ["--confirm", v]
    for v in args.sets:
        opts += ["--set", v]
    return opts


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
    paths = write_report(o.journal, quiet=True)
    hosts = [p for p in paths if os.path.basename(p) == "hosts.md"]
    if not args.quiet and hosts:
        out = os.path.dirname(hosts[0])
        print(
            f"report: {hosts[0]} (hosts side by side; each host's own report in {out}/<host>/; {out}/index.html "
            "pools their runs per test)"
        )
    return o.exit_status


def write_report(journal: str, quiet: bool) -> list[str]:
    """The report of the whole journal, in report/ beside it (what `tankbench report` writes); the paths written."""
    from tankbench.analysis.analyse import analyse_dataset, load
    from tankbench.journal.db import Journal
    from tankbench.reports.write import write_all

    out = os.path.join(os.path.dirname(os.path.abspath(journal)), "report")
    with Journal.open_readonly(journal) as j:
        paths = write_all(analyse_dataset(load(j), "auto", journal=j), out)
    if not quiet:
        print(
            f"report: {paths[0]} (and {', '.join(os.path.basename(p) for p in paths[1:5])}"
            + (f", {len(paths) - 5} more)" if len(paths) > 5 else ")")
        )
    return paths
