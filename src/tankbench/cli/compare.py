"""`tankbench compare A B`: per-test deltas between two journals, with significance; refuses unlike systems."""

from __future__ import annotations

import argparse
from typing import Any

from tankbench import EXPORT_FORMAT, __version__
from tankbench.analysis.analyse import RANK_BY, check_rank_by, load, open_journal
from tankbench.analysis.compare import Comparison, compare, comparison_dict
from tankbench.analysis.present import fmt
from tankbench.cli._common import print_json
from tankbench.metrics import METRICS


def register(sub: Any) -> None:
    p = sub.add_parser(
        "compare",
        help="compare journals test by test (before/after a change, or a chain of tuning steps)",
        description="For every test in both journals (same test id, else same name): mean of A and B, change "
        "in %, and Welch's t-test. With more journals (one per tuning step, seed 001) each step is "
        "compared with the one before. Refuses journals from different fingerprints (kernel, fio, CPU, "
        "RAM, ZFS version or tunables) unless --force.",
    )
    p.add_argument("a", metavar="A", help="journal before (the reference)")
    p.add_argument("b", metavar="B", help="journal after")
    p.add_argument("more", metavar="C", nargs="*", help="journals of further steps, in order")
    p.add_argument(
        "--metric",
        default="auto",
        help=f"one of {', '.join(RANK_BY)} (default auto: durable MiB/s for a test with a run that "
        "finished late in either journal, fio's MiB/s otherwise)",
    )
    p.add_argument("--force", action="store_true", help="compare even when the fingerprints differ")
    p.add_argument("--json", action="store_true", help="print JSON")
    p.set_defaults(func=cmd_compare)


def print_comparison(c: Comparison) -> None:
    """One step as a table: test, figure, A, B, change, verdict (fio's MiB/s beside a durable figure)."""
    if c.fingerprint_diff:
        print(
            "WARNING: different systems (--force): " + "; ".join(f"{k}: {a} vs {b}" for k, a, b in c.fingerprint_diff)
        )
    print(f"{'test':<44} {'figure':<16} {'A':>12} {'B':>12} {'change':>9}  verdict")
    for d in c.deltas:
        change = f"{d.change_pct:+.1f} %" if d.change_pct is not None else "—"
        name = f"#{d.test_a.number} {d.test_a.name}"[:44]
        print(
            f"{name:<44} {METRICS[d.metric].label:<16} {fmt(d.mean_a):>12} {fmt(d.mean_b):>12} {change:>9}  {d.verdict}"
        )
        if d.metric != "mibs" and d.test_a.mean("mibs") is not None:
            print(f"{'':<44} {'  fio MiB/s':<16} {fmt(d.test_a.mean('mibs')):>12} {fmt(d.test_b.mean('mibs')):>12}")
    if c.only_a or c.only_b:
        print(f"{len(c.only_a)} tests only in A, {len(c.only_b)} only in B (not compared)")


def cmd_compare(args: argparse.Namespace) -> int:
    key = check_rank_by(args.metric)
    paths = [args.a, args.b, *args.more]
    datasets = []
    for path in paths:
        with open_journal(path) as j:
            datasets.append(load(j))
    steps = [compare(x, y, key, args.force) for x, y in zip(datasets, datasets[1:])]
    if args.json:
        if len(steps) == 1:
            print_json(comparison_dict(steps[0]))
        else:
            print_json(
                {
                    "format_version": EXPORT_FORMAT,
                    "tankbench_version": __version__,
                    "journals": paths,
                    "steps": [dict(comparison_dict(c), a=pa, b=pb) for c, pa, pb in zip(steps, paths, paths[1:])],
                }
            )
        return 0
    for i, c in enumerate(steps):
        if len(steps) > 1:
            print(f"{'' if i == 0 else chr(10)}Step {i + 1}: {paths[i]} → {paths[i + 1]}")
        print_comparison(c)
    return 0
