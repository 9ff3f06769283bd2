#!/usr/bin/env python3
"""How `tankbench plan` scales with the number of tests: a file-target campaign of N tests (bs x iodepth), planned
in a fresh interpreter, this tree beside another source tree, alternating; prints the seconds and the ratio.

Usage: bench/plan_size.py [--baseline SRC] [--tests N,N,…] [--repeat R]
  SRC: another tree's `src/` (e.g. `git worktree add /tmp/main main` then /tmp/main/src); default: only this tree.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def campaign(n: int, directory: str) -> str:
    """A campaign of exactly n tests on one file target (n = bs values x iodepth values)."""
    depths = next(d for d in range(min(n, 512), 0, -1) if n % d == 0)
    sizes = n // depths
    path = os.path.join(directory, f"plan-{n}.toml")
    with open(path, "w") as f:
        f.write(
            f'[campaign]\nname = "plan-size"\nruntime = "1s"\nmax_tests = {max(n, 1)}\n\n'
            f'[[target]]\nname = "f"\nkind = "file"\npath = "{directory}"\nsize = "16M"\n\n'
            f'[matrix]\nrw = ["randread"]\nbs = [{", ".join(str(512 * (i + 1)) for i in range(sizes))}]\n'
            f"iodepth = [{', '.join(str(i + 1) for i in range(depths))}]\n"
        )
    return path


def timed(src: str, path: str) -> float:
    env = dict(os.environ, PYTHONPATH=src, NO_COLOR="1")
    t0 = time.perf_counter()
    res = subprocess.run([sys.executable, "-m", "tankbench", "plan", path], capture_output=True, text=True, env=env)
    if res.returncode != 0:
        raise SystemExit(f"plan failed with {src}: {res.stderr}")
    return time.perf_counter() - t0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--baseline", metavar="SRC")
    ap.add_argument("--tests", default="1000,10000,100000")
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()
    trees = [("this", os.path.join(ROOT, "src"))] + ([("baseline", args.baseline)] if args.baseline else [])
    with tempfile.TemporaryDirectory() as d:
        print(f"{'tests':>8} " + " ".join(f"{name:>10}" for name, _ in trees) + ("   ratio" if args.baseline else ""))
        for n in [int(x) for x in args.tests.split(",")]:
            path = campaign(n, d)
            best = {name: min(timed(src, path) for _ in range(args.repeat)) for name, src in trees}
            line = f"{n:>8} " + " ".join(f"{best[name]:>9.2f}s" for name, _ in trees)
            if args.baseline:
                line += f"   {best['baseline'] / best['this']:.2f}x"
            print(line, flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
