"""`tankbench report`: index.html, results.xlsx, summary.md, results.csv and results.json from a journal."""

from __future__ import annotations

import argparse
import os
from typing import Any

from tankbench.analysis.analyse import RANK_BY, analyse_dataset, check_rank_by, load
from tankbench.cli.show import add_journal_args, journal_path
from tankbench.journal.db import Journal
from tankbench.reports.write import write_all


def register(sub: Any) -> None:
    p = sub.add_parser(
        "report", help="write the report (HTML, XLSX, Markdown, CSV, JSON) of a journal",
        description="Analyse a journal — leaderboards per test case, ratios vs baseline and winner with "
                    "significance tests, timing issues, cost, validity warnings with fixes, recommendations, "
                    "workload mix and goals from the campaign — and write index.html, results.xlsx, summary.md, "
                    "results.csv and results.json into --out.")
    add_journal_args(p)
    p.add_argument("--out", metavar="DIR", help="output directory (default: report/ next to the journal)")
    p.add_argument("--rank-by", default="mibs", metavar="METRIC",
                   help=f"rank leaderboards by one of: {', '.join(RANK_BY)} (default mibs; corrected = bytes / "
                        "time until on disk, for runs that finished late)")
    p.set_defaults(func=cmd_report)


def cmd_report(args: argparse.Namespace) -> int:
    rank_by = check_rank_by(args.rank_by)
    path = journal_path(args)
    with Journal.open_readonly(path) as j:
        a = analyse_dataset(load(j), rank_by)
        out = args.out or os.path.join(os.path.dirname(os.path.abspath(path)), "report")
        paths = write_all(a, out, j)
    if a.emulated:
        print("Note: emulated machine (qemu TCG): the numbers measure the emulator, not your disks.")
    counts = {s: sum(1 for w in a.warnings if w.severity == s) for s in ("error", "warning", "info")}
    print(f"{len(a.dataset.tests)} tests, {a.dataset.n_runs} runs, {len(a.leaderboards)} test cases; "
          f"warnings: {counts['error']} errors, {counts['warning']} warnings, {counts['info']} notes")
    for p in paths:
        print(f"wrote {p}")
    return 0
