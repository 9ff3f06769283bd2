"""`split` over three namespace hosts vs one host: the wall-time ratio and whether the leaderboards agree.

The namespace hosts (tests/netns.py) are real sshd hosts on this machine, so they share its cores and disk:
the tests are wall-clock bound on purpose (fio with a rate limit per job), as tests on separate machines would
be for a campaign whose runs each take their full runtime. numjobs 1/2/4 with the per-job rate gives each test
case a leaderboard with a known order, so "same leaderboards" is a real check, not a tie broken by noise.
Prints: seconds on one host, on three, the ratio (about 1/3 expected), and each leaderboard from both.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from tankbench.analysis.analyse import load  # noqa: E402
from tankbench.journal.db import Journal  # noqa: E402
from tests.netns import NetnsHost, namespace_hosts  # noqa: E402

CAMPAIGN = """
[campaign]
name = "bench-fleet"
runtime = "{runtime}s"
ramp = "0s"
warmup = false
repeats = 1
hosts = [{hosts}]
hosts_mode = "split"

[[target]]
name = "scratch"
kind = "file"
path = "{dir}"
size = "16M"

[matrix]
rw = ["read", "write", "randread"]
bs = ["4k", "64k"]
numjobs = [1, 2, 4]
iodepth = [1]
io = ["direct"]

[fio]
rate = "{rate}"
"""


def run(hosts: list[NetnsHost], target: Path, work: Path, runtime: int, rate: str) -> tuple[float, Path]:
    """Run the campaign on these hosts; (wall seconds, journal)."""
    work.mkdir()
    c = work / "c.toml"
    tables = ", ".join(h.table() for h in hosts)
    c.write_text(CAMPAIGN.format(hosts=tables, dir=target / "scratch", runtime=runtime, rate=rate))
    j = work / "j.sqlite"
    t0 = time.monotonic()
    res = subprocess.run(
        [sys.executable, "-m", "tankbench", "run", "-q", "--no-report", str(c), "--journal", str(j)],
        capture_output=True,
        text=True,
    )
    wall = time.monotonic() - t0
    if res.returncode != 0:
        sys.exit(f"run on {len(hosts)} host(s) failed ({res.returncode}): {res.stderr[-2000:]}")
    return wall, j


def leaderboards(journal: Path) -> dict[str, list[str]]:
    """Each test case's tests, best MiB/s first."""
    with Journal.open_readonly(str(journal)) as j:
        ds = load(j)
    return {
        case: [t.name for t in sorted(tests, key=lambda t: -(t.mean("mibs") or 0.0))]
        for case, tests in sorted(ds.cases().items())
    }


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runtime", type=int, default=4, help="seconds per run (default 4)")
    ap.add_argument("--rate", default="512k", help="fio rate per job (default 512k)")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="bench-fleet-") as tmp:
        base = Path(tmp)
        with namespace_hosts(3, base / "ns") as (hosts, target):
            one, j1 = run(hosts[:1], target, base / "one", args.runtime, args.rate)
            three, j3 = run(hosts, target, base / "three", args.runtime, args.rate)
            b1, b3 = leaderboards(j1), leaderboards(j3)
    print(f"18 tests, {args.runtime} s each, fio rate {args.rate} per job, split")
    print(f"one host:    {one:7.1f} s")
    print(f"three hosts: {three:7.1f} s")
    print(f"ratio three/one: {three / one:.2f} (1/3 = 0.33 would be a perfect split)")
    same = b1 == b3
    for case in b1:
        print(f"  {case}: one host {' > '.join(b1[case])}")
        if b3.get(case) != b1[case]:
            print(f"  {case}: three hosts {' > '.join(b3.get(case, []))}  DIFFERENT")
    print("leaderboards: " + ("the same" if same else "DIFFER"))
    return 0 if same else 1


if __name__ == "__main__":
    sys.exit(main())
