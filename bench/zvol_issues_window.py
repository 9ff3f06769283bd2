"""bench/zvol-issues-window: where zvol-issues' time goes, measured per class of test (issue 19 item 4)

`run OUTDIR` runs bench/zvol-issues-window.toml (the preset's modelled machine, rw/io/sync axes and properties on
three configurations, its window scaled 7.5x down) three times on one lab: with the preset's window (long), with a
shorter one (short: `--set campaign.runtime=4s --set campaign.ss_dur=3s`, a 30 s / 20 s window scaled alike;
`--short-set` chooses another), and with the long one again (the noise floor: how much the same window's
leaderboards differ between two runs); then prints the report below. `report LONG.sqlite [SHORT.sqlite]
[--again AGAIN.sqlite]` prints it from journals already made:

- per class (reads, direct writes, buffered writes, sync writes): how many runs attained steady state, and where
  fio ended each run in the window between ramp + ss_dur (0) and ramp + runtime (1) — the fraction the estimate
  prices a run at (schedule/estimate.py, `Priors.ss_fraction`);
- per class: what a run costs beyond fio's wall time (ended - started - wall_s: agent, samplers, drain, layout
  check), the time between two runs without the cooldown (harness.gap_s - cooldown), and the cooldown itself;
- the two windows' leaderboards, and the long window's against itself: per test case Kendall's tau (all pairs,
  and over the pairs more than 5 % apart in the first), whether the winners agree, and which pairs swapped;
- `--repeats J.sqlite`: a journal of a `repeats.settle` campaign, its leaderboards from all runs against those from
  each test's first two (what `repeats.max = 2` would have measured).

The lab's disks are modelled (hdd data disk, ssd log) but its CPU is emulated (TCG): its runs are noisier than a
real host's, so a fraction measured here is a late (conservative) estimate of where a real host's runs settle.
"""

from __future__ import annotations

import argparse
import json
import sqlite3
import statistics
import subprocess
import sys
import time
import tomllib
from dataclasses import dataclass
from pathlib import Path

from time_to_answer import MARGIN, tau_beyond_margin

from tankbench.analysis.stats import kendall_tau
from tankbench.schedule.estimate import RUN_CLASSES, classify

ROOT = Path(__file__).resolve().parent.parent
CAMPAIGN = ROOT / "bench" / "zvol-issues-window.toml"
SHORT = ["campaign.runtime=4s", "campaign.ss_dur=3s"]


@dataclass
class RunRow:
    name: str
    case: str
    cls: str
    warmup: bool
    status: str
    started: float
    ended: float
    wall_s: float
    bw: float | None
    attained: bool | None
    stalled: bool  # "attained" over a window of 0 IOPS (writes blocked by ZFS's write throttle): not steady
    fraction: float | None  # where fio ended in [ramp + ss_dur, ramp + runtime], 0..1
    beyond_s: float  # ended - started - wall_s
    gap_s: float | None  # harness.gap_s
    cooldown_s: float


def load(journal: Path) -> list[RunRow]:
    """Every finished run of a journal, in start order, with its class and window position."""
    conn = sqlite3.connect(journal)
    try:
        rows = conn.execute(
            "SELECT t.name, t.test_case, t.canonical, r.warmup, r.status, r.started, r.ended, r.wall_s, "
            "r.metrics, r.checks FROM runs r JOIN tests t ON t.id = r.test_id "
            "WHERE r.ended IS NOT NULL ORDER BY r.started"
        ).fetchall()
    finally:
        conn.close()
    out = []
    for name, case, canonical, warm, status, started, ended, wall, metrics_s, checks_s in rows:
        canon, metrics, checks = json.loads(canonical), json.loads(metrics_s), json.loads(checks_s)
        props = {str(k): str(v) for k, v in (canon.get("target", {}).get("props") or {}).items()}
        runtime = float(canon.get("runtime", 0.0))
        ss_dur = checks.get("steadystate.duration_s")
        ran = metrics.get("fio.runtime_s")
        attained = checks.get("steadystate.attained")
        stalled = bool(attained) and "nan" in str(checks.get("steadystate.measured", ""))
        fraction = None
        if ss_dur is not None and ran is not None and runtime > float(ss_dur):
            fraction = min(1.0, max(0.0, (float(ran) - float(ss_dur)) / (runtime - float(ss_dur))))
        out.append(
            RunRow(
                name=name,
                case=case,
                cls=classify(dict(canon.get("params", {})), props),
                warmup=bool(warm),
                status=status,
                started=started,
                ended=ended,
                wall_s=float(wall or 0.0),
                bw=metrics.get("total.bw_bytes"),
                attained=None if attained is None else bool(attained) and not stalled,
                stalled=stalled,
                fraction=fraction,
                beyond_s=max(0.0, ended - started - float(wall or 0.0)),
                gap_s=checks.get("harness.gap_s"),
                cooldown_s=float(checks.get("cooldown.waited_s", 0.0) or 0.0),
            )
        )
    return out


def _stat(xs: list[float]) -> str:
    if not xs:
        return "—"
    xs = sorted(xs)
    return f"{statistics.fmean(xs):5.2f} {statistics.median(xs):5.2f} ({xs[0]:.2f}–{xs[-1]:.2f})"


def classes_table(label: str, runs: list[RunRow]) -> list[str]:
    """Steady state, cost beyond fio and cooldown per class (measured runs only)."""
    lines = [
        f"{label}: per class (mean, median (min–max)); fraction: where fio ended between ramp + ss_dur (0) and ramp + "
        "runtime (1); stall: fio's 'attained' over 0 IOPS (writes blocked), counted as not steady",
        f"  {'class':15} {'runs':>4} {'steady':>7} {'stall':>5}  {'fraction':23} {'beyond fio s':23} {'gap - cooldown s':23} "
        f"{'cooldown s':23}",
    ]
    for cls in RUN_CLASSES:
        rs = [r for r in runs if r.cls == cls and not r.warmup and r.status == "done"]
        if not rs:
            continue
        steady = sum(1 for r in rs if r.attained)
        gaps = [max(0.0, r.gap_s - r.cooldown_s) for r in rs if r.gap_s is not None]
        lines.append(
            f"  {cls:15} {len(rs):4} {steady:3}/{len(rs):<3} {sum(r.stalled for r in rs):5}  "
            f"{_stat([r.fraction for r in rs if r.fraction is not None]):23} {_stat([r.beyond_s for r in rs]):23} "
            f"{_stat(gaps):23} {_stat([r.cooldown_s for r in rs]):23}"
        )
    measured = [r for r in runs if not r.warmup and r.status == "done"]
    if measured:
        span = max(r.ended for r in runs) - min(r.started for r in runs)
        fio = sum(r.wall_s for r in runs)
        lines.append(
            f"  all: {len(measured)} measured runs, {len(runs) - len(measured)} other(s); first run's start to "
            f"last run's end {span:.0f} s, of which fio {fio:.0f} s ({fio / span:.0%})"
        )
    return lines


def boards(runs: list[RunRow], max_runs: int = 0) -> dict[str, dict[str, float]]:
    """Mean ranking throughput per (test case, test name) of measured runs (the first `max_runs` of each test
    when > 0: what `repeats.max = max_runs` would have measured)."""
    vals: dict[tuple[str, str], list[float]] = {}
    for r in runs:
        if not r.warmup and r.status == "done" and r.bw is not None:
            got = vals.setdefault((r.case, r.name), [])
            if not max_runs or len(got) < max_runs:
                got.append(float(r.bw))
    out: dict[str, dict[str, float]] = {}
    for (case, name), vs in vals.items():
        out.setdefault(case, {})[name] = statistics.fmean(vs)
    return out


def compare(
    bl: dict[str, dict[str, float]], bs: dict[str, dict[str, float]], labels: tuple[str, str] = ("long", "short")
) -> list[str]:
    """Per test case: tau(a, b) over all pairs and over pairs > MARGIN apart (in a), winners, swapped pairs."""
    la, lb = labels
    lines = [f"leaderboards, {la} vs {lb} (ranking throughput, total.bw_bytes):"]
    all_pairs = concordant_pairs = 0
    for case in sorted(set(bl) & set(bs)):
        names = sorted(set(bl[case]) & set(bs[case]))
        if len(names) < 2:
            continue
        a, b = [bl[case][n] for n in names], [bs[case][n] for n in names]
        tau_m, pairs = tau_beyond_margin(a, b)
        all_pairs += pairs
        concordant_pairs += round(pairs * (1 + tau_m) / 2)
        win_a, win_b = max(names, key=lambda n: bl[case][n]), max(names, key=lambda n: bs[case][n])
        swapped = [
            f"{x}/{y} ({bl[case][x] / bl[case][y]:.2f}x {la}, {bs[case][x] / bs[case][y]:.2f}x {lb})"
            for i, x in enumerate(names)
            for y in names[i + 1 :]
            if (bl[case][x] - bl[case][y]) * (bs[case][x] - bs[case][y]) < 0
            and abs(bl[case][x] - bl[case][y]) > MARGIN * max(bl[case][x], bl[case][y])
        ]
        lines.append(
            f"  {case:16} {len(names):2} tests  tau {kendall_tau(a, b):+.2f}, over the {pairs} pairs > "
            f"{MARGIN:.0%} apart {tau_m:+.2f}  winners: {la} {win_a}, {lb} {win_b} "
            f"({'agree' if win_a == win_b else 'DISAGREE'})"
        )
        lines.extend(f"      swapped beyond the margin: {s}" for s in swapped)
    if all_pairs:
        tau_all = (2 * concordant_pairs - all_pairs) / all_pairs
        lines.append(f"  all test cases: {all_pairs} pairs > {MARGIN:.0%} apart, tau {tau_all:+.2f}")
    return lines


def run_all(out: Path, short: list[str]) -> tuple[Path, Path, Path]:
    """The long window, the short one and the long one again (the noise floor) on one lab (the campaign's
    [host] names it), shut down after."""
    journals = []
    runs = (("long", ["--keep-lab"]), ("short", [a for kv in short for a in ("--set", kv)]), ("again", []))
    for label, extra in runs:
        journal = out / label / "journal.sqlite"
        t0 = time.monotonic()
        res = subprocess.run(
            [str(ROOT / ".venv/bin/tankbench"), "run", str(CAMPAIGN), "--journal", str(journal), "-q", *extra],
            cwd=ROOT,
        )
        print(f"{label}: tankbench run exited {res.returncode} after {time.monotonic() - t0:.0f} s", flush=True)
        if res.returncode not in (0, 1):
            sys.exit(f"Error: tankbench run ({label}) exited {res.returncode}")
        journals.append(journal)
    lab = tomllib.loads(CAMPAIGN.read_text())["host"]["name"]
    subprocess.run([str(ROOT / ".venv/bin/tankbench"), "lab", "down", "--name", lab], cwd=ROOT, check=False)
    return journals[0], journals[1], journals[2]


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = p.add_subparsers(dest="cmd", required=True)
    r = sub.add_parser("run", help="run both windows in the lab, then report")
    r.add_argument("out", type=Path)
    r.add_argument("--short-set", action="append", metavar="KEY=VALUE", help=f"the short window (default {SHORT})")
    rep = sub.add_parser("report", help="report from journals already made")
    rep.add_argument("long", type=Path)
    rep.add_argument("short", type=Path, nargs="?")
    rep.add_argument("--again", type=Path, help="the long window run again: the noise floor")
    rep.add_argument("--repeats", type=Path, help="a journal of repeats.settle runs: all runs vs the first 2")
    args = p.parse_args()
    args.repeats = getattr(args, "repeats", None)
    if args.cmd == "run":
        long_j, short_j, again_j = run_all(args.out, args.short_set or SHORT)
    else:
        long_j, short_j, again_j = args.long, args.short, args.again
    long = load(long_j)
    lines = classes_table(f"long window ({long_j})", long)
    if short_j is not None:
        short = load(short_j)
        lines += classes_table(f"short window ({short_j})", short)
        lines += compare(boards(long), boards(short), ("long window", "short window"))
    if again_j is not None:
        again = load(again_j)
        lines += classes_table(f"long window again ({again_j})", again)
        lines += compare(boards(long), boards(again), ("long window", "long window again"))
        if short_j is not None:
            lines += compare(boards(again), boards(load(short_j)), ("long window again", "short window"))
    if args.repeats:
        runs = load(args.repeats)
        counts: dict[str, int] = {}
        for r in runs:
            if not r.warmup and r.status == "done":
                counts[r.name] = counts.get(r.name, 0) + 1
        hist = {n: sum(1 for c in counts.values() if c == n) for n in sorted(set(counts.values()))}
        lines += classes_table(f"repeats ({args.repeats})", runs)
        lines.append(f"  measured runs per test: {hist} (runs: tests)")
        lines += compare(boards(runs), boards(runs, 2), ("all runs", "first 2 runs (repeats.max = 2)"))
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
