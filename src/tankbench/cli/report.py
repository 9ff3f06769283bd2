"""`tankbench report`: index.html, results.xlsx, summary.md, results.csv and results.json from a journal."""

from __future__ import annotations

import argparse
import os
from collections.abc import Sequence
from typing import Any

from tankbench.analysis.analyse import RANK_BY, analyse_dataset, check_rank_by, load
from tankbench.analysis.checks import lab_disk_note
from tankbench.analysis.result import Analysis
from tankbench.analysis.select import Where, parse_group_by, parse_where
from tankbench.cli.show import add_journal_args, journal_path
from tankbench.journal.bundle import default_report_dir
from tankbench.journal.db import Journal
from tankbench.reports.write import write_all


def add_selection_args(p: Any) -> None:
    """--group-by and --where, shared by report and advise."""
    p.add_argument(
        "--group-by",
        metavar="KEYS",
        help="regroup test cases by these axes (comma-separated, e.g. rw,bs,iodepth), overriding the "
        "campaign's [report] test_case; the journal is not changed",
    )
    p.add_argument(
        "--where",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="keep only tests whose axis KEY equals (KEY=a,b: one of) or, with KEY!=VALUE, differs "
        "from VALUE, e.g. --where sync!=disabled; repeat to combine; the journal is not changed",
    )


def selection(args: argparse.Namespace) -> tuple[tuple[str, ...] | None, list[Where], tuple[str, ...]]:
    """(group-by keys, where filters, their text for the outputs) from the parsed arguments."""
    group_by = parse_group_by(args.group_by) if args.group_by is not None else None
    where = [parse_where(w) for w in args.where]
    text = ((f"--group-by {','.join(group_by)}",) if group_by else ()) + tuple(f"--where {w.text}" for w in where)
    return group_by, where, text


def register(sub: Any) -> None:
    p = sub.add_parser(
        "report",
        help="write the report (HTML, XLSX, Markdown, CSV, JSON) of a journal",
        description="Analyse a journal — leaderboards per test case, ratios vs baseline and winner with "
        "significance tests, timing issues, cost, validity warnings with fixes, recommendations, "
        "workload mix and goals from the campaign — and write index.html, results.xlsx, summary.md, "
        "results.csv and results.json into --out. Every figure is defined once in docs/metrics.md.",
    )
    add_journal_args(p)
    p.add_argument("--out", metavar="DIR", help="output directory (default: report/ next to the journal)")
    p.add_argument(
        "--rank-by",
        default="auto",
        metavar="METRIC",
        help=f"rank leaderboards by one of: {', '.join(RANK_BY)} (default auto: durable MiB/s for a "
        "test case with runs that finished late or copy tests, fio's MiB/s otherwise)",
    )
    add_selection_args(p)
    p.set_defaults(func=cmd_report)


def write_report(
    path: str,
    out: str,
    rank_by: str = "auto",
    group_by: tuple[str, ...] | None = None,
    where: Sequence[Where] = (),
    text: tuple[str, ...] = (),
) -> tuple[Analysis, list[str], bool]:
    """Analyse the journal at `path` and write every output into `out`: (the analysis, the files written,
    whether several hosts ran every test). `report` and `bundle` both write reports with it."""
    with Journal.open_readonly(path) as j:
        a = analyse_dataset(load(j, group_by=group_by, where=list(where)), rank_by, selection=text, journal=j)
    paths = write_all(a, out)  # with clients.md, and hosts.md and a report per host (hosts_mode = "each")
    return a, paths, a.get("hosts") is not None


def cmd_report(args: argparse.Namespace) -> int:
    rank_by = check_rank_by(args.rank_by)
    group_by, where, text = selection(args)
    path = journal_path(args)
    out = args.out or (
        default_report_dir(args.bundle.path)
        if args.bundle
        else os.path.join(os.path.dirname(os.path.abspath(path)), "report")
    )
    a, paths, each = write_report(path, out, rank_by, group_by, where, text)
    if each:
        print(
            "Note: several hosts ran every test (hosts_mode = each): compare them in hosts.md (or index.html), one "
            "report per host; index.html pools their runs per test"
        )
    if a.emulated:
        print("Note: emulated machine (qemu TCG): the numbers measure the emulator, not your disks.")
        disks = lab_disk_note(fp.data for fp in a.dataset.fingerprints.values())
        if disks:
            print(f"Note: modelled lab disks ({disks}): the direction of a disk-bound effect is meaningful.")
    counts = {s: sum(1 for w in a.warnings if w.severity == s) for s in ("error", "warning", "info")}
    print(
        f"{len(a.dataset.tests)} tests, {a.dataset.n_runs} runs, {len(a.leaderboards)} test cases; "
        f"warnings: {counts['error']} errors, {counts['warning']} warnings, {counts['info']} notes"
    )
    for p in paths:
        print(f"wrote {p}")
    return 0
