"""bench/ss-replay: which steady-state rule may end zvol-issues' runs early, replayed on full-length runs.

`run OUTDIR` runs bench/ss-window.toml in a lab: zvol-issues' own machine (hdd-modelled data disk, ssd-modelled
log, lz4 + aes-256-gcm) and its **real window** (ramp 10 s, runtime 90 s, not scaled down), without any steady-state
rule, so every run lasts the whole window, and fio logs its IOPS once a second (`write_iops_log`, `log_avg_msec =
1000`). It then copies those logs out of the lab and prints the report. `report OUTDIR` prints it again.

The report replays steady-state rules on each run's own per-second IOPS, as fio computes them (steadystate.c: over
the last `ss_dur` one-second samples, `iops:L%` is attained when the largest deviation from the window's mean is
below L % of it, `iops_slope:L%` when the least-squares slope per second is below L % of the mean): where the rule
would have ended the run, and what fio would then have reported (the mean IOPS from the ramp's end to that second)
against what the full run reported. Both figures come from one run, so the difference is what ending early costs,
free of run-to-run noise. Per class (run_class: reads, direct, buffered, sync writes): how many runs the rule ends,
where (0 = ramp + ss_dur, 1 = ramp + runtime, the fraction the estimate prices), and the error of the early result
(median, largest); per test case, Kendall's tau of the early results against the full ones.

A slope rule asks whether the rate still drifts, not whether each second is like the others: ZFS writes come in
txg bursts (every few seconds), so per-second samples of a steady write rate are rarely all within 5 % of their
mean, while the rate does not drift. The lab's CPU is emulated (TCG), so its per-second samples are noisier than a
real host's: where a rule ends runs here is a late estimate of where it would on a real host.
"""

from __future__ import annotations

import argparse
import json
import sqlite3
import statistics
import subprocess
import sys
import tomllib
from dataclasses import dataclass
from pathlib import Path

from tankbench.schedule.estimate import RUN_CLASSES, classify
from tankbench.schedule.steady import window_figures

ROOT = Path(__file__).resolve().parent.parent
CAMPAIGN = ROOT / "bench" / "ss-window.toml"
LOG_STEM = "ivl"  # bench/ss-window.toml: [fio] write_iops_log
#: the levers replayed: a steady-state rule (criterion, ss_dur seconds), the preset's first, or a shorter fixed
#: runtime ("runtime", seconds)
LEVERS = [
    ("iops:5%", 30),
    ("iops:10%", 30),
    ("iops_slope:0.1%", 30),
    ("iops_slope:0.2%", 30),
    ("iops_slope:0.3%", 30),
    ("iops_slope:0.5%", 30),
    ("iops_slope:0.3%", 20),
    ("iops_slope:0.5%", 20),
    ("runtime", 30),
    ("runtime", 45),
    ("runtime", 60),
]
MARGIN = 0.05


@dataclass
class Series:
    test_id: str
    name: str
    case: str
    cls: str
    iops: list[float]  # one sample per second after the ramp


def attained(window: list[float], criterion: str) -> bool:
    """fio's steady-state check on one window of per-second samples (percent limits): the window's figures as
    every run records them (schedule/steady.py window_figures; tests/unit check them against fio's own)."""
    kind, limit_s = criterion.split(":")
    figures = window_figures(window)
    if not figures:
        return False  # a window of 0 IOPS is a stall, not a steady state (fio says -nan%)
    measured = abs(figures["slope_pct"]) if kind.endswith("_slope") else figures["spread_pct"]
    return bool(measured < float(limit_s.rstrip("%")))


def replay(iops: list[float], criterion: str, dur: int) -> int:
    """Seconds after the ramp at which the rule ends the run (the run's length if it never does)."""
    for t in range(dur, len(iops) + 1):
        if attained(iops[t - dur : t], criterion):
            return t
    return len(iops)


def parse_log(text: str, ddir: int) -> list[float]:
    """A fio iops log (`msec, value, ddir, bs, offset[, prio]`, one line per second with log_avg_msec=1000) as one
    value per second. fio writes no line for a second in which no I/O completed (a zvol's writes stall for 10 s
    and more while ZFS's write throttle holds them): such seconds are 0 IOPS, as fio's own steady-state samples
    count them."""
    per_second: dict[int, float] = {}
    for line in text.splitlines():
        parts = [p.strip() for p in line.split(",")]
        if len(parts) >= 3 and parts[2] == str(ddir):
            per_second[max(1, round(float(parts[0]) / 1000.0))] = float(parts[1])
    if not per_second:
        return []
    return [per_second.get(i, 0.0) for i in range(1, max(per_second) + 1)]


def load(outdir: Path) -> list[Series]:
    db = sqlite3.connect(outdir / "journal.sqlite")
    rows = db.execute("SELECT id, name, test_case, canonical FROM tests").fetchall()
    series = []
    for test_id, name, case, canonical in rows:
        log = outdir / "logs" / f"{test_id}.log"
        if not log.exists():
            continue
        c = json.loads(canonical)
        cls = classify(c["params"], c["target"].get("props", {}))
        ddir = 0 if cls == "read" else 1
        iops = parse_log(log.read_text(), ddir)
        if iops:
            series.append(Series(test_id, name, case, cls, iops))
    return series


def lever_stop(lever: tuple[str, int], iops: list[float]) -> int:
    """Seconds after the ramp at which a lever ends the run: a steady-state rule (criterion, ss_dur) or a fixed
    shorter runtime ("runtime", seconds): the first T seconds of the full run are what a run of T seconds measures."""
    what, seconds = lever
    if what == "runtime":
        return min(seconds, len(iops))
    return replay(iops, what, seconds)


def tau_beyond_margin(full: list[float], early: list[float]) -> tuple[int, int]:
    """(concordant, discordant) pairs among those whose full results differ by more than the margin."""
    con = dis = 0
    for i in range(len(full)):
        for j in range(i + 1, len(full)):
            if abs(full[i] - full[j]) <= MARGIN * max(full[i], full[j]):
                continue
            if (full[i] - full[j]) * (early[i] - early[j]) > 0:
                con += 1
            else:
                dis += 1
    return con, dis


def report(outdir: Path) -> None:
    series = load(outdir)
    if not series:
        sys.exit(f"Error: no per-second logs under {outdir}/logs (run `bench/ss-replay run {outdir}` first)")
    n = statistics.median(len(s.iops) for s in series)
    print(f"{len(series)} full-length runs, {n:g} one-second samples each after the ramp (median)")
    print("err: |early result / full result - 1| per run; where: 0 = ramp + ss_dur, 1 = ramp + runtime\n")
    cases: dict[str, list[Series]] = {}
    for s in series:
        cases.setdefault(s.case, []).append(s)
    print(f"{'lever':24} {'class':15} {'ended':>6} {'where':>6} {'err med':>8} {'err max':>8}")
    for lever in LEVERS:
        label = f"runtime {lever[1]}s" if lever[0] == "runtime" else f"{lever[0]} / {lever[1]}s"
        for cls in RUN_CLASSES:
            mine = [s for s in series if s.cls == cls]
            if not mine:
                continue
            ended, fractions, errors = 0, [], []
            for s in mine:
                t = lever_stop(lever, s.iops)
                full = statistics.fmean(s.iops)
                early = statistics.fmean(s.iops[:t])
                ended += t < len(s.iops)
                if lever[0] != "runtime":
                    fractions.append((t - lever[1]) / max(1, len(s.iops) - lever[1]))
                errors.append(abs(early / full - 1.0) if full > 0 else 0.0)
            where = f"{statistics.fmean(fractions):6.2f}" if fractions else f"{'-':>6}"
            print(
                f"{label:24} {cls:15} {ended:>2}/{len(mine):<3} {where} "
                f"{statistics.median(errors):8.1%} {max(errors):8.1%}"
            )
        con = dis = same = 0
        swapped = []
        for case, ss in sorted(cases.items()):
            if len(ss) < 2:
                continue
            fulls = [statistics.fmean(s.iops) for s in ss]
            earlies = [statistics.fmean(s.iops[: lever_stop(lever, s.iops)]) for s in ss]
            c, d = tau_beyond_margin(fulls, earlies)
            con, dis = con + c, dis + d
            same += max(range(len(ss)), key=fulls.__getitem__) == max(range(len(ss)), key=earlies.__getitem__)
            if d:
                swapped.append(f"{case}: {d}")
        far = con + dis
        tau = (con - dis) / far if far else 1.0
        print(
            f"{'':24} leaderboards: tau {tau:+.2f} over the {far} pairs > {MARGIN:.0%} apart, winners the same in "
            f"{same} of {sum(1 for ss in cases.values() if len(ss) >= 2)} test cases"
            + (f"; swapped pairs: {', '.join(swapped)}" if swapped else "")
            + "\n"
        )


def fetch_logs(lab: str, outdir: Path) -> None:
    """Copy every test's per-second IOPS log out of the lab: <workdir>/<campaign id>/<test id>/ivl_iops.1.log."""
    script = f'for f in $(find / -xdev -path "*/*/{LOG_STEM}_iops.*.log" 2>/dev/null); do echo "== $f"; cat "$f"; done'
    out = subprocess.run(
        [str(ROOT / "tankbench"), "lab", "ssh", "--name", lab, "--", script],
        check=True,
        capture_output=True,
        text=True,
    ).stdout
    logs = outdir / "logs"
    logs.mkdir(parents=True, exist_ok=True)
    current: list[str] = []
    name = ""
    for line in out.splitlines() + ["== end"]:
        if line.startswith("== "):
            if name:
                (logs / f"{name}.log").write_text("\n".join(current) + "\n")
            parts = line[3:].split("/")
            name, current = (parts[-2] if len(parts) >= 2 else ""), []
        else:
            current.append(line)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)
    r = sub.add_parser("run", help="run bench/ss-window.toml in its lab, fetch the logs, report")
    r.add_argument("outdir", type=Path)
    p = sub.add_parser("report", help="replay the levers on the logs of an earlier run")
    p.add_argument("outdir", type=Path)
    a = ap.parse_args()
    if a.cmd == "run":
        lab = tomllib.loads(CAMPAIGN.read_text())["host"]["name"]
        a.outdir.mkdir(parents=True, exist_ok=True)
        journal = a.outdir / "journal.sqlite"
        try:
            cmd = [str(ROOT / "tankbench"), "run", str(CAMPAIGN), "--journal", str(journal), "--keep-lab"]
            subprocess.run(cmd, check=True)
            fetch_logs(lab, a.outdir)
        finally:
            subprocess.run([str(ROOT / "tankbench"), "lab", "down", "--name", lab], check=False)
    report(a.outdir)


if __name__ == "__main__":
    main()
