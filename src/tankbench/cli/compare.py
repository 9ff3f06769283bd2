"""`tankbench compare A B`: per-test deltas between two journals, with significance; refuses unlike systems."""

from __future__ import annotations

import argparse
from typing import Any

from tankbench.analysis.analyse import RANK_BY, check_rank_by, load, open_journal
from tankbench.analysis.compare import compare, comparison_dict
from tankbench.cli._common import print_json
from tankbench.metrics import METRICS
from tankbench.reports.common import fmt


def register(sub: Any) -> None:
    p = sub.add_parser(
        "compare", help="compare two journals test by test (before/after a change)",
        description="For every test in both journals (same test id, else same name): mean of A and B, change "
                    "in %, and Welch's t-test. Refuses journals from different fingerprints (kernel, fio, CPU, "
                    "RAM, ZFS version or tunables) unless --force.")
    p.add_argument("a", metavar="A", help="journal before (the reference)")
    p.add_argument("b", metavar="B", help="journal after")
    p.add_argument("--metric", default="auto",
                   help=f"one of {', '.join(RANK_BY)} (default auto: durable MiB/s for a test with a run that "
                        "finished late in either journal, fio's MiB/s otherwise)")
    p.add_argument("--force", action="store_true", help="compare even when the fingerprints differ")
    p.add_argument("--json", action="store_true", help="print JSON")
    p.set_defaults(func=cmd_compare)


def cmd_compare(args: argparse.Namespace) -> int:
    key = check_rank_by(args.metric)
    with open_journal(args.a) as ja, open_journal(args.b) as jb:
        c = compare(load(ja), load(jb), key, args.force)
    if args.json:
        print_json(comparison_dict(c))
        return 0
    if c.fingerprint_diff:
        print("WARNING: different systems (--force): " + "; ".join(f"{k}: {a} vs {b}" for k, a, b in c.fingerprint_diff))
    print(f"{'test':<44} {'figure':<16} {'A':>12} {'B':>12} {'change':>9}  verdict")
    for d in c.deltas:
        change = f"{d.change_pct:+.1f} %" if d.change_pct is not None else "—"
        name = f"#{d.test_a.number} {d.test_a.name}"[:44]
        print(f"{name:<44} {METRICS[d.metric].label:<16} {fmt(d.mean_a):>12} {fmt(d.mean_b):>12} {change:>9}  "
              f"{d.verdict}")
        if d.metric != "mibs" and d.test_a.mean("mibs") is not None:
            print(f"{'':<44} {'  fio MiB/s':<16} {fmt(d.test_a.mean('mibs')):>12} {fmt(d.test_b.mean('mibs')):>12}")
    if c.only_a or c.only_b:
        print(f"{len(c.only_a)} tests only in A, {len(c.only_b)} only in B (not compared)")
    return 0
