"""tankbench vs bare fio on the same jobs, side by side in one go.

1. Throughput: two jobs, ioengine=null (no I/O: any cost tankbench adds shows up directly) and libaio on a file
   on tmpfs; prints IOPS ratios and the samplers' CPU share.
2. Fixed cost: ten 1-second tests on a tmpfs file (`cooldown = "0s"`) under `tankbench run` against the same
   exported jobs run one after the other with plain fio; prints the wall times, their ratio, the per-run fixed
   cost (time between two runs' starts beyond what bare fio needs for that job) and the journal's per-step
   account of the time between runs (`harness.*_s`).
Rounds alternate bare and tankbench so drift on a noisy machine hits both alike; medians are reported.
"""

from __future__ import annotations

import argparse
import json
import os
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

CAMPAIGN = """
[campaign]
name = "overhead-{engine}"
runtime = "{runtime}s"
host = "local"

[[target]]
name = "shm"
kind = "file"
path = "{dir}"
size = "64M"

[matrix]
rw = ["randread"]
bs = ["4k"]
iodepth = [{iodepth}]
io = ["{io}"]
ioengine = ["{engine}"]
"""


def tankbench(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "tankbench", *args], capture_output=True, text=True, check=True)


def bare_iops(job: Path) -> float:
    out = subprocess.run(
        ["fio", "--output-format=json", str(job)], capture_output=True, text=True, check=True, cwd=job.parent
    )
    doc = json.loads(out.stdout[out.stdout.index("{") :])
    return sum(j["read"]["iops"] for j in doc["jobs"])


def with_logs(job: Path) -> Path:
    """The exported job with the per-second logs every tankbench run adds (fio/jobs.py run_job_text), for bare fio:
    what the logs alone cost (issue 32)."""
    from tankbench.fio.jobs import SEC_LOG, SEC_LOG_MSEC

    logs = f"write_iops_log={SEC_LOG}\nwrite_bw_log={SEC_LOG}\nwrite_lat_log={SEC_LOG}\nlog_avg_msec={SEC_LOG_MSEC}\n"
    out = job.with_name("logs-" + job.name)
    out.write_text(job.read_text().replace("[global]\n", "[global]\n" + logs, 1))
    return out


def measure(engine: str, io: str, iodepth: int, runtime: int, rounds: int, work: Path) -> dict[str, float]:
    d = work / engine
    d.mkdir()
    campaign = d / "c.toml"
    campaign.write_text(CAMPAIGN.format(engine=engine, runtime=runtime, dir=d / "data", io=io, iodepth=iodepth))
    tankbench("plan", str(campaign), "--export", str(d / "export"))
    job = d / "export" / "0001-job.fio"
    journal = d / "j.sqlite"
    bare, logged, tb, sampler_share = [], [], [], []
    subprocess.run(["sh", str(d / "export" / "0001-job.sh")], capture_output=True, check=True)  # layout
    log_job = with_logs(job)
    for _ in range(rounds):
        bare.append(bare_iops(job))
        logged.append(bare_iops(log_job))
        tankbench("run", str(campaign), "--journal", str(journal), "-q")
        conn = sqlite3.connect(journal)
        m = json.loads(conn.execute("SELECT metrics FROM runs ORDER BY id DESC LIMIT 1").fetchone()[0])
        conn.close()
        journal.unlink()
        tb.append(m["total.iops"])
        sampler_share.append(100.0 * m["sys.sampler_cpu_s"] / m["sys.sampled_s"])
    return {
        "bare": statistics.median(bare),
        "tankbench": statistics.median(tb),
        "ratio": statistics.median(t / b for t, b in zip(tb, bare)),
        "logs_ratio": statistics.median(x / b for x, b in zip(logged, bare)),
        "sampler_pct_core": statistics.median(sampler_share),
    }


FIXED_CAMPAIGN = """
[campaign]
name = "fixed-cost"
runtime = "1s"
host = "local"
repeats = 1
cooldown = "0s"

[[target]]
name = "shm"
kind = "file"
path = "{dir}"
size = "16M"

[matrix]
rw = ["randread", "read"]
bs = ["4k", "8k", "16k", "64k", "1M"]
iodepth = [1]
io = ["buffered"]
"""


def timed(argv: list[str]) -> float:
    t0 = time.monotonic()
    subprocess.run(argv, capture_output=True, text=True, check=True)
    return time.monotonic() - t0


def fixed_cost(rounds: int, work: Path) -> dict[str, Any]:
    """Ten 1-second tests: tankbench run vs the exported jobs with plain fio, alternating rounds."""
    d = work / "fixed"
    d.mkdir()
    campaign = d / "c.toml"
    campaign.write_text(FIXED_CAMPAIGN.format(dir=d / "data"))
    tankbench("plan", str(campaign), "--export", str(d / "export"))
    jobs = sorted((d / "export").glob("*-job.fio"))
    subprocess.run(["sh", str(d / "export" / "0001-job.sh")], capture_output=True, check=True)  # layout once
    journal = d / "j.sqlite"
    bare_totals, tb_totals, per_run, steps = [], [], [], []
    for _ in range(rounds):
        bare = [timed(["fio", "--output-format=json", str(j)]) for j in jobs]
        bare_totals.append(sum(bare))
        tb_totals.append(
            timed([sys.executable, "-m", "tankbench", "run", str(campaign), "--journal", str(journal), "-q"])
        )
        conn = sqlite3.connect(journal)
        rows = conn.execute("SELECT started, checks FROM runs ORDER BY started").fetchall()
        conn.close()
        journal.unlink()
        starts = [float(r[0]) for r in rows]
        # run i's fixed cost: from its start to the next run's start, minus bare fio's time for the same job
        per_run += [b - a - bare[i] for i, (a, b) in enumerate(zip(starts, starts[1:]))]
        for _, checks in rows[1:]:
            steps.append({k: v for k, v in json.loads(checks).items() if k.startswith("harness.")})
    keys = sorted({k for s in steps for k in s})
    return {
        "tests": len(jobs),
        "bare": statistics.median(bare_totals),
        "tankbench": statistics.median(tb_totals),
        "ratio": statistics.median(t / b for t, b in zip(tb_totals, bare_totals)),
        "per_run": statistics.median(per_run),
        "steps": {k: statistics.median(float(s.get(k, 0.0)) for s in steps) for k in keys},
    }


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--runtime", type=int, default=5, help="seconds per fio run (default 5)")
    ap.add_argument("--rounds", type=int, default=3, help="bare/tankbench pairs per job (default 3)")
    ap.add_argument("--only", choices=("throughput", "fixed"), help="run one of the two parts")
    args = ap.parse_args()
    shm = "/dev/shm" if os.path.isdir("/dev/shm") else None
    with tempfile.TemporaryDirectory(prefix="tb-overhead-", dir=shm) as tmp:
        work = Path(tmp)
        if args.only != "throughput":
            print_fixed(fixed_cost(args.rounds, work), args.rounds)
        if args.only == "fixed":
            return 0
        print(
            f"{'job':34} {'bare IOPS':>12} {'tankbench IOPS':>15} {'ratio':>7} {'bare+logs':>10} {'samplers % core':>16}"
        )
        for label, engine, io, qd in (
            ("ioengine=null randread 4k", "null", "buffered", 1),
            ("libaio randread 4k on tmpfs", "libaio", "buffered", 8),
        ):
            r = measure(engine, io, qd, args.runtime, args.rounds, work)
            print(
                f"{label:34} {r['bare']:12.0f} {r['tankbench']:15.0f} {r['ratio']:7.3f} {r['logs_ratio']:10.3f} "
                f"{r['sampler_pct_core']:16.3f}"
            )
    print(
        f"(median of {args.rounds} alternating rounds of {args.runtime} s; bare+logs: bare fio with tankbench's "
        "per-second logs, as a ratio of bare fio; target: ratio >= 0.99, samplers < 1 % of one core)"
    )
    return 0


def print_fixed(r: dict[str, Any], rounds: int) -> None:
    n = r["tests"]
    print(f"fixed cost: {n} tests of 1 s on a tmpfs file, cooldown 0s (median of {rounds} alternating rounds)")
    print(f"  bare fio, the exported jobs one after the other  {r['bare']:7.2f} s")
    print(f"  tankbench run (whole command)                    {r['tankbench']:7.2f} s   ratio {r['ratio']:.2f}")
    print(f"  per-run fixed cost (start to next start - bare)  {r['per_run']:7.3f} s   (target <= 0.100 s)")
    print(
        f"  per-campaign cost (startup, preflight, fingerprint) ~ {r['tankbench'] - r['bare'] - n * r['per_run']:.2f} s"
    )
    if r["steps"]:
        print("  between two runs, per step (median, from the journal's harness.*_s):")
        for k, v in r["steps"].items():
            print(f"    {k:32} {v:7.3f} s")
        why = r["steps"].get("harness.evidence_s", 0.0) + r["steps"].get("harness.fio_logs_s", 0.0)
        print(f"  of which the limiter's evidence (samplers' snapshots, fio's per-second logs read): {why:.3f} s")


if __name__ == "__main__":
    raise SystemExit(main())
