"""`tankbench show`: status of every test in a journal."""

from __future__ import annotations

import argparse
import sys
from collections import Counter
from typing import Any

from tankbench import colour
from tankbench.cli._common import print_json
from tankbench.errors import UserError
from tankbench.journal import Journal
from tankbench.journal.bundle import looks_like_bundle, read_bundle
from tankbench.model import Run


def add_journal_args(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "campaign",
        metavar="CAMPAIGN",
        nargs="?",
        help="campaign file (to find its default journal), or a bundle (`tankbench bundle`)",
    )
    p.add_argument("--journal", metavar="PATH", help="journal file or bundle (default: from CAMPAIGN)")
    p.set_defaults(bundle=None)


def journal_path(args: argparse.Namespace) -> str:
    """--journal, or the campaign's default journal; a bundle (given either way) is verified and its journal
    copied to a private temporary directory (`args.bundle` then holds the opened bundle)."""
    given = args.journal or (args.campaign if args.campaign and looks_like_bundle(args.campaign) else None)
    if given and looks_like_bundle(str(given)):
        opened = read_bundle(str(given))
        args.bundle = opened
        return opened.journal_path
    if args.journal:
        return str(args.journal)
    if args.campaign:
        from tankbench.campaign import load_spec
        from tankbench.cli.presets import resolve_campaign
        from tankbench.runner import default_journal_path

        return default_journal_path(load_spec(resolve_campaign(args.campaign)))
    raise UserError("no journal given", "pass CAMPAIGN or --journal PATH")


def open_journal(args: argparse.Namespace) -> Journal:
    """The journal the arguments name, opened read-only (UserError when missing or not a journal)."""
    return Journal.open_readonly(journal_path(args))


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser(
        "show",
        help="status of each test in a journal",
        description="One line per test: its runs by status and its mean throughput.",
    )
    add_journal_args(p)
    p.add_argument("--json", action="store_true", help="print JSON")
    p.set_defaults(func=cmd_show)


def test_status(journal: Journal) -> list[dict[str, Any]]:
    """Per test: counts of runs by status, overall state and mean IOPS / MiB/s of measured (non warm-up) runs."""
    out = []
    runs_by_test: dict[str, list[Run]] = {}
    for r in journal.iter_runs():
        runs_by_test.setdefault(r.test_id, []).append(r)
    for t in journal.tests():
        runs = runs_by_test.get(t.id, [])
        counts = Counter(r.status for r in runs)
        measured = [r for r in runs if r.status == "done" and not r.warmup]
        if t.skip_note:
            state = "skipped"
        elif not runs:
            state = "pending"
        elif counts.get("running"):
            state = "running"
        elif counts.get("done") and not (counts.get("failed") or counts.get("timeout")):
            state = "done"
        else:
            state = "problem" if (counts.get("failed") or counts.get("timeout")) else "incomplete"
        row: dict[str, Any] = {
            "number": t.number,
            "id": t.id,
            "name": t.name,
            "test_case": t.test_case,
            "state": state,
            "runs": dict(counts),
            "note": t.skip_note,
        }
        if measured:
            row["iops"] = sum(r.metrics.get("total.iops", 0) for r in measured) / len(measured)
            row["mib_s"] = sum(r.metrics.get("total.bw_bytes", 0) for r in measured) / len(measured) / 1048576
        out.append(row)
    return out


def cmd_show(args: argparse.Namespace) -> int:
    with open_journal(args) as journal:
        rows = test_status(journal)
    if args.json:
        print_json(rows)
        return 0
    width = max((len(r["name"]) for r in rows), default=4)
    sys.stdout.write(f"{'#':>4}  {'name':{width}}  {'state':10} {'runs':28} {'IOPS':>10} {'MiB/s':>9}\n")
    for r in rows:
        runs = " ".join(f"{k}={v}" for k, v in sorted(r["runs"].items())) or "-"
        iops = f"{r['iops']:10.0f}" if "iops" in r else f"{'-':>10}"
        mib = f"{r['mib_s']:9.1f}" if "mib_s" in r else f"{'-':>9}"
        state = colour.status(r["state"], sys.stdout, f"{r['state']:10}")
        sys.stdout.write(
            f"{r['number']:04d}  {r['name']:{width}}  {state} {runs:28} {iops} {mib}"
            f"{'  ' + r['note'] if r['note'] else ''}\n"
        )
    return 0
