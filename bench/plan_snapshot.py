#!/usr/bin/env python3
"""Write `tankbench plan --json` and `plan --export` of every preset (also at --scale quick), every campaign
under tests/fixtures/*.toml and examples/ into OUT, so two trees can be compared byte for byte (`diff -r`)
before and after a refactor that must not change behaviour.

Usage: bench/plan_snapshot.py OUT [TANKBENCH]   (TANKBENCH: the command, default .venv/bin/tankbench)
"""

from __future__ import annotations

import glob
import json
import os
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def campaigns(tb: str) -> list[tuple[str, str, str]]:
    """(label, campaign, scale) for every campaign the comparison covers."""
    out = subprocess.run([tb, "presets", "--json"], capture_output=True, text=True, check=True).stdout
    presets = [p["name"] for p in json.loads(out)]
    found = [(p, p, "") for p in presets] + [(f"{p}@quick", p, "quick") for p in presets]
    for path in sorted(glob.glob(f"{ROOT}/tests/fixtures/*.toml") + glob.glob(f"{ROOT}/examples/*.toml")):
        found.append((os.path.relpath(path, ROOT).replace("/", "_"), path, ""))
    return found


def main() -> int:
    out = sys.argv[1]
    tb = sys.argv[2] if len(sys.argv) > 2 else f"{ROOT}/.venv/bin/tankbench"
    os.makedirs(out, exist_ok=True)
    env = dict(os.environ, NO_COLOR="1")
    for label, campaign, scale in campaigns(tb):
        args = [campaign] + (["--scale", scale] if scale else []) + ["--journal", "/nonexistent/tb.sqlite"]
        res = subprocess.run([tb, "plan", "--json", *args], capture_output=True, text=True, env=env)
        with open(f"{out}/{label}.json", "w") as f:
            f.write(f"exit {res.returncode}\n{res.stdout}{res.stderr}")
        res = subprocess.run(  # a relative DIR: the output names it, and must not differ between two trees
            [tb, "plan", "--export", f"{label}.export", *args], capture_output=True, text=True, env=env, cwd=out
        )
        with open(f"{out}/{label}.export.txt", "w") as f:
            f.write(f"exit {res.returncode}\n{res.stdout}{res.stderr}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
