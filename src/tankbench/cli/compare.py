"""`tankbench compare A B`: per-test deltas between two journals, with significance; refuses unlike systems."""

from __future__ import annotations

import argparse
import os
from typing import Any

from tankbench import EXPORT_FORMAT, __version__
from tankbench.analysis.analyse import RANK_BY, check_rank_by, load, open_journal
from tankbench.analysis.cases import Dataset
from tankbench.analysis.compare import Comparison, compare, comparison_dict
from tankbench.analysis.machine_sections import verdict_text
from tankbench.analysis.machines import Machine, compare_machines, labels_for, machines_dict
from tankbench.analysis.present import fmt
from tankbench.cli._common import print_json
from tankbench.errors import UserError
from tankbench.journal.bundle import looks_like_bundle, read_bundle
from tankbench.metrics import METRICS
from tankbench.reports.machines import write_comparison


def register(sub: Any) -> None:
    p = sub.add_parser(
        "compare",
        help="compare journals test by test (before/after a change, or a chain of tuning steps)",
        description="For every test in both journals (same test id, else same name): mean of A and B, change "
        "in %, and Welch's t-test. With more journals (one per tuning step, seed 001) each step is "
        "compared with the one before. Journals or bundles (`tankbench bundle`) of different machines are "
        "compared side by side in compare.html and compare.md: the tests they share and those they do not, "
        "each machine's ratio to the first with its interval, one chart per test case, the fingerprints "
        "with their differences marked, and each claim's verdict per machine. Journals of one machine with "
        "different fingerprints (kernel, fio, CPU, RAM, ZFS version or tunables) are refused unless --force.",
    )
    p.add_argument("a", metavar="A", help="journal or bundle before, or of the reference machine")
    p.add_argument("b", metavar="B", help="journal or bundle after, or of another machine")
    p.add_argument(
        "more", metavar="C", nargs="*", default=[], help="journals or bundles of further steps or machines, in order"
    )
    p.add_argument(
        "--metric",
        default="auto",
        help=f"one of {', '.join(RANK_BY)} (default auto: durable MiB/s for a test with a run that "
        "finished late in either journal, fio's MiB/s otherwise)",
    )
    p.add_argument(
        "--force",
        action="store_true",
        help="compare journals of one machine even when their fingerprints differ (journals of different "
        "machines are compared anyway: the differences are the point, and every ratio says which versions differ)",
    )
    p.add_argument(
        "--out",
        metavar="DIR",
        help="where compare.html and compare.md go (default: ./tankbench-compare): every machine side by side",
    )
    p.add_argument("--json", action="store_true", help="print JSON")
    p.set_defaults(func=cmd_compare)


def judge_claims(ds: Dataset) -> list[tuple[str, str, str, object]]:
    """Every claim of a dataset's campaign, judged on it with its own tests' warnings: (key, name, text, verdict).
    Claims are matched across machines by name; the key (what the claim states) tells a name stated differently
    on another machine, which is said and not compared."""
    from tankbench.analysis.checks import validity_warnings
    from tankbench.analysis.claims import judge

    warns = list(validity_warnings(ds))
    return [(c.text, c.name, c.text, judge(c, ds, warns)) for c in ds.settings.claims]


def print_comparison(c: Comparison, machines: bool = False) -> None:
    """One step as a table: test, figure, A, B, change, verdict (fio's MiB/s beside a durable figure)."""
    if c.fingerprint_diff:
        what = "different machines" if machines else "WARNING: different systems (--force)"
        print(f"{what}: " + "; ".join(f"{k}: {a} vs {b}" for k, a, b in c.fingerprint_diff))
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


def _open(path: str) -> Dataset:
    """A journal or a bundle (verified, its journal copied to a private temporary directory), loaded."""
    if looks_like_bundle(path):
        path = read_bundle(path).journal_path
    with open_journal(path) as j:
        return load(j)


def one_machine(datasets: list[Dataset]) -> bool:
    """True unless every journal names its machine (the fingerprints' hostname) and they are not all the same: only
    then is a difference of fingerprints the point of the comparison rather than a reason to refuse it."""
    names = [{str(fp.data.get("hostname", "")) for fp in ds.fingerprints.values()} - {""} for ds in datasets]
    return any(not n for n in names) or len(set().union(*names)) == 1


def cmd_compare(args: argparse.Namespace) -> int:
    key = check_rank_by(args.metric, "--metric")
    paths = [args.a, args.b, *args.more]
    same = [p for i, p in enumerate(paths) if any(os.path.realpath(p) == os.path.realpath(q) for q in paths[:i])]
    if same:  # every ratio 1, "no significant change": a mistake, never a comparison
        raise UserError(
            f"{same[0]} is given twice: compare would compare it with itself",
            "name two different journals or bundles (e.g. before and after a change: tankbench compare A.sqlite "
            "B.sqlite)",
        )
    datasets = [_open(p) for p in paths]
    several = not one_machine(datasets)  # machines side by side: each against the first, differences expected
    pairs = [(0, i) for i in range(1, len(paths))] if several else [(i - 1, i) for i in range(1, len(paths))]
    steps = [compare(datasets[i], datasets[j], key, args.force or several) for i, j in pairs]
    machines = [Machine(label, p, ds) for label, p, ds in zip(labels_for(paths), paths, datasets)]
    mc = compare_machines(machines, key, judge_claims)
    written = write_comparison(mc, args.out or "tankbench-compare")
    if args.json:
        doc = (
            comparison_dict(steps[0])
            if len(steps) == 1
            else {
                "format_version": EXPORT_FORMAT,
                "tankbench_version": __version__,
                "journals": paths,
                "steps": [dict(comparison_dict(c), a=paths[i], b=paths[j]) for c, (i, j) in zip(steps, pairs)],
            }
        )
        print_json(dict(doc, machines=machines_dict(mc), written=written))
        return 0
    for n, (c, (i, j)) in enumerate(zip(steps, pairs)):
        if len(steps) > 1:
            what = f"{machines[j].label} vs {machines[i].label}" if several else f"Step {n + 1}"
            print(f"{'' if n == 0 else chr(10)}{what}: {paths[i]} → {paths[j]}")
        print_comparison(c, several)
    for note in mc.version_notes:
        print(f"Versions differ: {note}")
    for row in mc.claims:
        print(f"claim {row.name!r}: " + "; ".join(verdict_text(v, m.label) for m, v in zip(machines, row.verdicts)))
    for u in mc.unmatched_claims:
        print(f"claim not matched: {u}")
    for p in written:
        print(f"wrote {p}")
    return 0
