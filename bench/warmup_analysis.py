"""Is one warm-up per configuration enough? Run 0 (warm-up) vs the measured runs in real journals (issue 11).

For each test: the warm-up's throughput relative to the mean of the measured repeats, against the repeats'
own spread. A warm-up "matters" for a test when run 0 lies outside the range of the repeats by more than the
repeats differ among themselves. The first test on each configuration is shown apart: that is the only test a
per-config schedule warms up.

    .venv/bin/python bench/warmup_analysis.py tests/fixtures/journal-local-file.sqlite
"""

from __future__ import annotations

import json
import shutil
import sqlite3
import sys
import tempfile
from pathlib import Path


def rows(path: str) -> list[tuple[int, str, str, str, int, int, float]]:
    """(number, name, target, canonical, run_no, warmup, bw) of done runs, in start order (a copy is read)."""
    with tempfile.TemporaryDirectory() as tmp:
        copy = Path(tmp) / "j.sqlite"
        shutil.copy(path, copy)
        conn = sqlite3.connect(copy)
        try:
            return conn.execute(
                "SELECT t.number, t.name, t.target, t.canonical, r.run_no, r.warmup, "
                "json_extract(r.metrics, '$.\"total.bw_bytes\"') FROM runs r JOIN tests t ON t.id = r.test_id "
                "WHERE r.status = 'done' ORDER BY r.started"
            ).fetchall()
        finally:
            conn.close()


def config_of(canonical: str) -> str:
    """The configuration a test ran on: its target and non-fio params (as schedule.config_key)."""
    c = json.loads(canonical)
    fio_axes = {"workload", "rw", "bs", "iodepth", "numjobs", "io", "sync_mode", "rwmixread", "ioengine"}
    return json.dumps([c["target"], {k: v for k, v in c["params"].items() if k not in fio_axes}], sort_keys=True)


def first_runs(tests: dict[int, dict]) -> int:  # type: ignore[type-arg]
    """Journals without warm-ups: run 1 vs run 2, first test on a configuration vs the others."""
    ratios: dict[bool, list[float]] = {True: [], False: []}
    print(f"{'#':>4} {'test':45} {'first':5} {'run1/run2':>9}")
    for number, t in sorted(tests.items()):
        r1, r2 = t["runs"].get((1, False)), t["runs"].get((2, False))
        if r1 and r2:
            ratios[t["first"]].append(r1 / r2)
            print(f"{number:4d} {t['name'][:45]:45} {'yes' if t['first'] else '':5} {r1 / r2:9.2f}")
    for first in (True, False):
        rs = ratios[first]
        if rs:
            below = sum(1 for r in rs if r < 0.9)
            print(
                f"{'first test on its configuration' if first else 'other tests'}: run 1 more than 10 % slower "
                f"than run 2 in {below} of {len(rs)}; run1/run2 {min(rs):.2f}..{max(rs):.2f} "
                f"(mean {sum(rs) / len(rs):.2f})"
            )
    return 0


def main(path: str) -> int:
    data = rows(path)
    tests: dict[int, dict] = {}  # type: ignore[type-arg]
    seen: set[str] = set()
    for number, name, _target, canonical, run_no, warm, bw in data:
        t = tests.setdefault(number, {"name": name, "runs": {}, "first": False})
        cfg = config_of(canonical)
        if cfg not in seen:
            t["first"] = True
            seen.add(cfg)
        t["runs"][(run_no, bool(warm))] = float(bw)
    if not any((0, True) in t["runs"] for t in tests.values()):
        return first_runs(tests)
    print(f"{'#':>4} {'test':45} {'first':5} {'run0/mean':>9} {'repeat spread':>13} {'run0 slower':>11}")
    slower = {True: 0, False: 0}
    count = {True: 0, False: 0}
    ratios: dict[bool, list[float]] = {True: [], False: []}
    for number, t in sorted(tests.items()):
        r0 = t["runs"].get((0, True))
        reps = [v for (n, w), v in t["runs"].items() if not w]
        if r0 is None or len(reps) < 2:
            continue
        mean = sum(reps) / len(reps)
        spread = (max(reps) - min(reps)) / mean
        cold = (min(reps) - r0) / mean > spread  # slower than every repeat by more than they differ: a cold start
        count[t["first"]] += 1
        slower[t["first"]] += cold
        ratios[t["first"]].append(r0 / mean)
        print(
            f"{number:4d} {t['name'][:45]:45} {'yes' if t['first'] else '':5} {r0 / mean:9.2f} {spread:13.1%} "
            f"{'YES' if cold else 'no':>11}"
        )
    for first in (True, False):
        if count[first]:
            rs = ratios[first]
            print(
                f"{'first test on its configuration' if first else 'other tests'}: run 0 slower than every repeat "
                f"by more than their spread in {slower[first]} of {count[first]}; run0/mean "
                f"{min(rs):.2f}..{max(rs):.2f} (mean {sum(rs) / len(rs):.2f})"
            )
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1] if len(sys.argv) > 1 else "tests/fixtures/journal-local-file.sqlite"))
