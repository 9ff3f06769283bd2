"""tankbench vs bare fio on the same job, side by side in one go; prints IOPS ratios and samplers' CPU share.

Two jobs: ioengine=null (no I/O: any cost tankbench adds shows up directly) and libaio on a file on tmpfs.
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
from pathlib import Path

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
    out = subprocess.run(["fio", "--output-format=json", str(job)], capture_output=True, text=True, check=True)
    doc = json.loads(out.stdout[out.stdout.index("{") :])
    return sum(j["read"]["iops"] for j in doc["jobs"])


def measure(engine: str, io: str, iodepth: int, runtime: int, rounds: int, work: Path) -> dict[str, float]:
    d = work / engine
    d.mkdir()
    campaign = d / "c.toml"
    campaign.write_text(CAMPAIGN.format(engine=engine, runtime=runtime, dir=d / "data", io=io, iodepth=iodepth))
    tankbench("plan", str(campaign), "--export", str(d / "export"))
    job = d / "export" / "0001-job.fio"
    journal = d / "j.sqlite"
    bare, tb, sampler_share = [], [], []
    subprocess.run(["sh", str(d / "export" / "0001-job.sh")], capture_output=True, check=True)  # layout
    for _ in range(rounds):
        bare.append(bare_iops(job))
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
        "sampler_pct_core": statistics.median(sampler_share),
    }


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--runtime", type=int, default=5, help="seconds per fio run (default 5)")
    ap.add_argument("--rounds", type=int, default=3, help="bare/tankbench pairs per job (default 3)")
    args = ap.parse_args()
    shm = "/dev/shm" if os.path.isdir("/dev/shm") else None
    with tempfile.TemporaryDirectory(prefix="tb-overhead-", dir=shm) as tmp:
        work = Path(tmp)
        print(f"{'job':34} {'bare IOPS':>12} {'tankbench IOPS':>15} {'ratio':>7} {'samplers % core':>16}")
        for label, engine, io, qd in (
            ("ioengine=null randread 4k", "null", "buffered", 1),
            ("libaio randread 4k on tmpfs", "libaio", "buffered", 8),
        ):
            r = measure(engine, io, qd, args.runtime, args.rounds, work)
            print(
                f"{label:34} {r['bare']:12.0f} {r['tankbench']:15.0f} {r['ratio']:7.3f} {r['sampler_pct_core']:16.3f}"
            )
    print(
        f"(median of {args.rounds} alternating rounds of {args.runtime} s; target: ratio >= 0.98, "
        "samplers < 1 % of one core)"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
