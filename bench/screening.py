"""bench/screening: a reduced zvol-issues measured exhaustively and by screening + refine, side by side (issue 29).

`run OUTDIR` runs bench/screening.toml in the lab (the preset's modelled machine; see the file for what is reduced)
three times into OUTDIR, each resuming from its journal if it was interrupted: exhaustively (exhaustive.sqlite),
then with `--set campaign.design=screening` (screening.sqlite) and `tankbench refine` on that journal; then prints the
report below. `report EXHAUSTIVE.sqlite SCREENING.sqlite` prints it from journals already made:

- the runs each took (measured runs, warm-ups), the tests each measured and the lab time (first start to last end,
  and the sum of the runs' own durations: the lab's boots and the pauses between steps left out);
- per workload class: the top-3 factors by effect in each journal (analysis/factors.py: log throughput fitted to
  the factors; the exhaustive journal's fit is over every test), and whether they agree;
- per test case: each journal's winner (the best measured mean); when they differ, whether the screening's winner
  is significantly slower in the exhaustive run (difference of log means against the exhaustive fit's noise);
- per test case: Kendall's tau between the two journals' leaderboards over the tests both measured (all pairs, and
  the pairs > 5 % apart in the exhaustive run), and between the two factor rankings.
"""

from __future__ import annotations

import argparse
import math
import sqlite3
import subprocess
import sys
from pathlib import Path

from time_to_answer import MARGIN, tau_beyond_margin

from tankbench.analysis.factormeasure import journal_measure
from tankbench.analysis.factors import FactorReport, WorkloadFactors, factor_report
from tankbench.analysis.stats import kendall_tau, t_quantile
from tankbench.journal.db import Journal

ROOT = Path(__file__).resolve().parent.parent
CAMPAIGN = ROOT / "bench" / "screening.toml"
TOP = 3


def tankbench(*args: str) -> int:
    """`python -m tankbench ARGS` with this interpreter (and its PYTHONPATH: a frozen copy of the code may run it)."""
    cmd = [sys.executable, "-m", "tankbench", *args]
    print("+ tankbench " + " ".join(args), flush=True)
    return subprocess.call(cmd)


#: the second lab of `run --two-labs` (the exhaustive arm's)
SECOND_LAB = "screening-bench-x"


def screening_steps(sc: Path) -> tuple[tuple[str, ...], ...]:
    """The screening arm: the campaign with design = screening, then `refine` in the same journal."""
    design = ("--set", "campaign.design=screening")
    return (
        ("run", str(CAMPAIGN), *design, "--journal", str(sc), "--no-report", "--keep-lab"),
        ("refine", str(sc), "--no-report"),
    )


def steps(*each: tuple[str, ...]) -> int:
    """Each step in turn (each resumes from its journal); stop at one that did not end 0 or 1 (1: some runs failed,
    they are rows; anything else stopped the step). The first lab is shut down after."""
    try:
        for args in each:
            rc = tankbench(*args)
            if rc not in (0, 1):
                return rc
        return 0
    finally:
        tankbench("lab", "down", "--name", "screening-bench")


def run_two_labs(out: Path) -> int:
    """The exhaustive arm on a second lab of the same model, beside the screening arm and its refine on the
    first: both arms at once, each lab's emulator on one of two cores (the comparison is within each arm: both
    see the same machine load while they overlap). About the exhaustive arm's time instead of the sum."""
    out.mkdir(parents=True, exist_ok=True)
    ex, sc = out / "exhaustive.sqlite", out / "screening.sqlite"
    ex_args = ["run", str(CAMPAIGN), "--set", f"host.name={SECOND_LAB}", "--journal", str(ex), "--no-report"]
    print("+ tankbench " + " ".join(ex_args) + " &", flush=True)
    with (out / "exhaustive.log").open("w") as log:
        proc = subprocess.Popen([sys.executable, "-m", "tankbench", *ex_args], stdout=log, stderr=subprocess.STDOUT)
        try:
            rc = steps(*screening_steps(sc))
        finally:
            rc_ex = proc.wait()
    print(f"exhaustive arm (log: {out / 'exhaustive.log'}): exit {rc_ex}", flush=True)
    return rc or (rc_ex if rc_ex not in (0, 1) else report(ex, sc))


def run(out: Path) -> int:
    """The three steps on one lab (each resumes from its journal), the lab shut down after, then the report."""
    out.mkdir(parents=True, exist_ok=True)
    ex, sc = out / "exhaustive.sqlite", out / "screening.sqlite"
    exhaustive = ("run", str(CAMPAIGN), "--journal", str(ex), "--no-report", "--keep-lab")
    return steps(exhaustive, *screening_steps(sc)) or report(ex, sc)


def runs_of(journal: Path) -> dict[str, float]:
    """Measured runs, warm-ups, tests measured, span and busy seconds of a journal."""
    conn = sqlite3.connect(journal)
    try:
        r = conn.execute(
            "SELECT sum(warmup = 0), sum(warmup = 1), count(DISTINCT CASE WHEN warmup = 0 THEN test_id END), "
            "max(ended) - min(started), sum(ended - started) FROM runs WHERE ended IS NOT NULL"
        ).fetchone()
    finally:
        conn.close()
    return {"measured": r[0] or 0, "warmups": r[1] or 0, "tests": r[2] or 0, "span": r[3] or 0.0, "busy": r[4] or 0.0}


def leaderboards(journal: Path) -> tuple[dict[str, dict[str, list[float]]], FactorReport | None]:
    """Test case -> test name -> its measured runs in the figure the report ranks it by (durable MiB/s where runs
    finished late, fio's MiB/s otherwise), and the journal's factor report fitted to the same figures."""
    with Journal.open_readonly(str(journal)) as j:
        measure = journal_measure(j)
        out: dict[str, dict[str, list[float]]] = {}
        for t in j.tests():
            if measure.values.get(t.id):
                out.setdefault(t.test_case, {})[t.name] = list(measure.values[t.id])
        return out, factor_report(j, measure)


def gmean(v: list[float]) -> float:
    return math.exp(sum(math.log(x) for x in v) / len(v))


def top_factors(w: WorkloadFactors | None) -> list[str]:
    return [e.factor for e in w.effects if e.estimated][:TOP] if w else []


def top_within_resolution(w: WorkloadFactors) -> tuple[set[str], set[str]]:
    """What the exhaustive fit itself can say of its top TOP: the factors surely in it (above a neighbour pair
    separated at 95 % before place TOP) and the factors that may fill its remaining places (the run of neighbours,
    not separated from each other, that straddles place TOP; only those with an effect at 95 % when they are
    enough to fill them: a factor the fit cannot tell from no effect is not a candidate beside ones it can)."""
    est = [e for e in w.effects if e.estimated]
    names = [e.factor for e in est]
    sure_end = max((i + 1 for i in range(min(TOP, len(names))) if i < len(w.certain) and w.certain[i]), default=0)
    end = TOP
    while end < len(names) and not (end - 1 < len(w.certain) and w.certain[end - 1]):
        end += 1
    maybe = est[sure_end:end]
    if sum(e.significant for e in maybe) >= TOP - sure_end:
        maybe = [e for e in maybe if e.significant]
    return set(names[:sure_end]), {e.factor for e in maybe}


def agrees_within_resolution(sure: set[str], maybe: set[str], b: list[str]) -> bool:
    """The screening's top TOP has every factor the exhaustive fit puts surely in its top TOP (`sure`), the rest
    from those it cannot order against its own third (`maybe`; both from top_within_resolution): a choice the
    reference itself cannot make is not a disagreement."""
    return sure <= set(b) and set(b) <= sure | maybe


def pure_error(board: dict[str, list[float]]) -> tuple[float, int]:
    """The run-to-run sd of log throughput pooled over the tests of a leaderboard with two runs or more, and its
    degrees of freedom ((0, 0) when no test has two runs)."""
    ss, df = 0.0, 0
    for vals in board.values():
        if len(vals) > 1:
            logs = [math.log(v) for v in vals]
            m = sum(logs) / len(logs)
            ss += sum((x - m) ** 2 for x in logs)
            df += len(logs) - 1
    return (math.sqrt(ss / df), df) if df else (0.0, 0)


def winner_line(case: str, ex: dict[str, list[float]], sc: dict[str, list[float]], noise: float, df: int) -> str:
    """Each journal's winner; when they differ, the screening's winner's deficit in the exhaustive run and whether
    it is significant against the exhaustive run's run-to-run noise (pooled over the test case's repeated tests;
    the exhaustive fit's residual noise when none was repeated), log scale, t with its degrees of freedom."""
    pe, pe_df = pure_error(ex)
    if pe_df >= 2:
        noise, df = pe, pe_df
    wx = max(ex, key=lambda n: gmean(ex[n]))
    ws = max(sc, key=lambda n: gmean(sc[n]))
    if wx == ws:
        return f"  {case}: same winner, {wx} ({gmean(ex[wx]):.1f} exhaustive, {gmean(sc[ws]):.1f} screening)"
    if ws not in ex:
        return f"  {case}: DIFFERENT: exhaustive {wx}, screening {ws} (not in the exhaustive journal)"
    d = math.log(gmean(ex[wx])) - math.log(gmean(ex[ws]))
    half = t_quantile(0.975, max(df, 1)) * noise * math.sqrt(1 / len(ex[wx]) + 1 / len(ex[ws]))
    verdict = "not significantly different" if d <= half else "SIGNIFICANTLY slower"
    return (
        f"  {case}: exhaustive {wx} ({gmean(ex[wx]):.1f}), screening {ws} ({gmean(ex[ws]):.1f} in the "
        f"exhaustive run, {math.exp(-d):.2f}x; 95 % interval of the log difference ±{half:.2f}): {verdict}"
    )


def tau_line(case: str, ex: dict[str, list[float]], sc: dict[str, list[float]]) -> str:
    common = sorted(set(ex) & set(sc))
    if len(common) < 2:
        return f"  {case}: fewer than 2 tests in both"
    a = [gmean(ex[n]) for n in common]
    b = [gmean(sc[n]) for n in common]
    far, n_far = tau_beyond_margin(a, b, MARGIN)
    return f"  {case}: tau {kendall_tau(a, b):+.2f} over {len(common)} tests both measured; {far:+.2f} over {n_far} pairs > 5 % apart"


def factor_tau(wx: WorkloadFactors, ws: WorkloadFactors) -> float:
    """Kendall's tau between the two factor rankings (by effect size)."""
    names = [e.factor for e in wx.effects]
    sx = {e.factor: abs(math.log(e.ratio)) for e in wx.effects}
    ss = {e.factor: abs(math.log(e.ratio)) for e in ws.effects}
    common = [n for n in names if n in ss]
    return kendall_tau([sx[n] for n in common], [ss[n] for n in common])


def report(ex: Path, sc: Path) -> int:
    rx, rs = runs_of(ex), runs_of(sc)
    print("runs (measured + warm-ups), tests measured, lab time (first start to last end; sum of runs):")
    for name, r in (("exhaustive", rx), ("screening + refine", rs)):
        print(
            f"  {name:20} {r['measured']:.0f} + {r['warmups']:.0f} runs, {r['tests']:.0f} tests, "
            f"{r['span'] / 60:.0f} min; {r['busy'] / 60:.0f} min"
        )
    total_x, total_s = rx["measured"] + rx["warmups"], rs["measured"] + rs["warmups"]
    print(
        f"  ratio: runs {total_s / max(total_x, 1):.2f}, lab time {rs['busy'] / max(rx['busy'], 1):.2f} (target <= 0.25)"
    )
    lx, fx = leaderboards(ex)
    ls, fs = leaderboards(sc)
    return compare(fx, fs, lx, ls)


def compare(
    fx: FactorReport | None,
    fs: FactorReport | None,
    lx: dict[str, dict[str, list[float]]],
    ls: dict[str, dict[str, list[float]]],
) -> int:
    wx = {w.name: w for w in (fx.workloads if fx else ())}
    ws = {w.name: w for w in (fs.workloads if fs else ())}
    print(f"top-{TOP} factors by effect per workload class (exhaustive | screening + refine):")
    agree = 0
    for name in wx:
        a, b = top_factors(wx[name]), top_factors(ws.get(name))
        same = set(a) == set(b)
        sure, maybe = top_within_resolution(wx[name])
        resolved = agrees_within_resolution(sure, maybe, b)
        agree += resolved
        tau = factor_tau(wx[name], ws[name]) if name in ws else float("nan")
        print(
            f"  {name}: {', '.join(a)} | {', '.join(b)} -> {'agree' if same else 'DIFFER'}"
            f" ({'agree' if resolved else 'DIFFER'} within the exhaustive fit's resolution: surely top {TOP} "
            f"{', '.join(sorted(sure)) or 'none'}, then any of {', '.join(sorted(maybe)) or 'none'})"
            f"; factor-ranking tau {tau:+.2f}"
        )
        for w, label in ((wx[name], "exhaustive"), (ws.get(name), "screening")):
            if w is not None:
                print(f"    {label}: {w.certainty()}")
    print("each test case's winner:")
    for case in lx:
        w = wx.get(case)
        print(
            winner_line(case, lx[case], ls.get(case, {}), w.noise if w else 0.0, w.df if w else 1)
            if case in ls
            else f"  {case}: not measured by the screening"
        )
    print("Kendall's tau of each leaderboard (tests both measured):")
    for case in lx:
        print(tau_line(case, lx[case], ls.get(case, {})))
    return 0 if agree == len(wx) else 1


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = p.add_subparsers(dest="cmd", required=True)
    r = sub.add_parser("run", help="run both ways in the lab (resumes), then report")
    r.add_argument("out", type=Path)
    r.add_argument(
        "--two-labs",
        action="store_true",
        help=f"the exhaustive arm at the same time on a second lab "
        f"({SECOND_LAB}); about half the time, on a 2-core machine",
    )
    rep = sub.add_parser("report", help="compare two journals already made")
    rep.add_argument("exhaustive", type=Path)
    rep.add_argument("screening", type=Path)
    a = p.parse_args()
    if a.cmd == "run":
        return run_two_labs(a.out) if a.two_labs else run(a.out)
    return report(a.exhaustive, a.screening)


if __name__ == "__main__":
    sys.exit(main())
