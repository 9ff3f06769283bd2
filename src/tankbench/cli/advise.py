"""`tankbench advise`: recommendations, workload-mix ranking and goals of a journal, as text or JSON."""

from __future__ import annotations

import argparse
from typing import Any

from tankbench.analysis.advice import check_mix_cases
from tankbench.analysis.analyse import RANK_BY, analyse_dataset, check_rank_by, load
from tankbench.analysis.present import fmt, metric_label
from tankbench.analysis.result import Analysis
from tankbench.analysis.settings import parse_mix_text
from tankbench.cli._common import print_json
from tankbench.cli.report import add_selection_args, selection
from tankbench.cli.show import add_journal_args, journal_path
from tankbench.journal.db import Journal
from tankbench.reports.json import analysis_dict


def register(sub: Any) -> None:
    p = sub.add_parser(
        "advise",
        help="recommendations, workload-mix ranking and goals from a journal",
        description="Conclusions derived from the journal's numbers: the winner of each test case (claimed "
        "only when a significance test supports it), cost trade-offs, axis summaries, the ranking "
        "of configurations for a workload mix and which configurations meet the campaign's goals.",
    )
    add_journal_args(p)
    p.add_argument(
        "--mix",
        metavar="'CASE=W,…'",
        help='workload mix overriding the campaign\'s [mix], e.g. "read random 4k=70,write random 4k=30"',
    )
    p.add_argument(
        "--rank-by",
        default="auto",
        metavar="METRIC",
        help=f"one of {', '.join(RANK_BY)} (default auto, as in `report`)",
    )
    add_selection_args(p)
    p.add_argument("--json", action="store_true", help="print JSON")
    p.set_defaults(func=cmd_advise)


def advice_dict(a: Analysis) -> dict[str, Any]:
    d = analysis_dict(a)
    return {
        k: d[k]
        for k in (
            "format_version",
            "tankbench_version",
            "journal",
            "rank_by",
            "selection",
            "emulated",
            "recommendations",
            "mix",
            "goals",
            "warnings",
        )
    }


def print_advice(a: Analysis) -> None:
    if a.emulated:
        print("NOTE: emulated machine (qemu TCG): these numbers are for checking the tool, not choosing a config.\n")
    print("Recommendations:")
    for r in a.recommendations:
        print(f"  - {r.text}")
    if a.mix:
        print(f"\nWorkload mix ({', '.join(f'{c} {w:.0%}' for c, w in a.mix.weights)}); {a.mix.formula}:")
        for i, e in enumerate(a.mix.entries[:15], 1):
            miss = f"  (missing: {', '.join(e.missing)})" if e.missing else ""
            value = f"{fmt(e.expected)} {metric_label(a.mix.metric)}" if e.expected is not None else "incomplete"
            print(f"  {i:>2}. {value:>16}  {e.config}{miss}")
        for c in a.mix.unknown_cases:
            print(f"  ! test case {c!r} is not in the journal")
    for g in a.goals:
        met = ", ".join(f"#{t.number} {t.name}" for t, _, _ in g.passing) or "none"
        print(f"\nGoal {g.goal.name} ({g.goal.text}): {'not measured' if g.not_measured else 'met by ' + met}")
    errors = [w for w in a.warnings if w.severity != "info"]
    if errors:
        print(f"\n{len(errors)} warnings affect these conclusions; see `tankbench report` for each fix:")
        for w in errors:
            print(f"  - {w.code}: {w.message}")


def cmd_advise(args: argparse.Namespace) -> int:
    key = check_rank_by(args.rank_by)
    mix = parse_mix_text(args.mix) if args.mix is not None else None
    group_by, where, text = selection(args)
    with Journal.open_readonly(journal_path(args)) as j:
        ds = load(j, group_by=group_by, where=where)
        if mix is not None:
            check_mix_cases(ds, mix)
        a = analyse_dataset(ds, key, mix, text)
    if args.json:
        print_json(advice_dict(a))
    else:
        print_advice(a)
    return 0
