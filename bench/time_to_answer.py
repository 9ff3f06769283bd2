"""bench/time-to-answer: the same leaderboards in a fraction of the machine time? (issue 11)

A testbed of known, stable behaviour: five loop devices, each throttled by the block cgroup controller
(cgroup v2 io.max, or v1 blkio.throttle.*) to its own read/write IOPS and bandwidth limits, so every test's true
throughput is known in advance (min(iops limit, bandwidth limit / bs)). One campaign of 20 tests
(5 devices x randread/randwrite x 4k/16k: four test cases of five entries) runs twice through `tankbench run`:

- reference: the seed's kind of schedule: a warm-up per test, a long fixed runtime, 3 repeats, a fixed cooldown;
- adaptive: steady state ends runs early, a warm-up per configuration, one run per test and then further runs
  (up to 4) only for tests whose place in their test case is in doubt (`repeats.settle` 5 %), in rounds across
  configurations, an automatic cooldown.

It prints the wall-time ratio, Kendall's tau between the two leaderboards of each test case (and of each against
the known truth), whether the winners agree, and where the adaptive schedule got an order wrong.
The devices are laid out (random data) before either schedule runs, so both find their targets ready, and it
prints where each schedule's time went (fio, preparation, cooldown) from the two journals.
Needs root (loop devices, cgroups) and fio. Everything it creates (files, loop devices, a cgroup) is removed.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sqlite3
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from tankbench.analysis.stats import kendall_tau

ROOT = Path(__file__).resolve().parent.parent
MIB = 1 << 20


@dataclass(frozen=True)
class Device:
    """A throttled loop device: read/write IOPS and bandwidth limits."""

    name: str
    riops: int
    rbps: int
    wiops: int
    wbps: int

    def truth(self, rw: str, bs: int) -> float:
        """Throughput (bytes/s) the throttle allows: the lower of the IOPS and the bandwidth limit."""
        iops, bps = (self.riops, self.rbps) if rw == "randread" else (self.wiops, self.wbps)
        return min(iops * bs, bps)


# close pairs on purpose (d0/d1 randread 4k: 5 %; d4/d2 randread 16k and d2/d3 randwrite 16k: 4 %)
DEVICES = (
    Device("d0", 1000, 12 * MIB, 500, 8 * MIB),
    Device("d1", 950, 20 * MIB, 650, 4 * MIB),
    Device("d2", 800, 6 * MIB, 400, 16 * MIB),
    Device("d3", 600, 16 * MIB, 700, 6 * MIB),
    Device("d4", 400, 10 * MIB, 300, 12 * MIB),
)
CASES = (("randread", 4096), ("randread", 16384), ("randwrite", 4096), ("randwrite", 16384))

SCHEDULES = {
    "reference": 'runtime = "3s"\nwarmup = true\nrepeats = 3\ncooldown = "1s"\n',
    "adaptive": (
        'runtime = "3s"\nss = "iops:5%"\nss_dur = "2s"\nwarmup = "per-config"\n'
        'repeats = { min = 1, max = 4, settle = "5%" }\norder = "round-robin"\n'
        'cooldown = { auto = true, max = "2s", load1 = false, idle_for = "1s", idle_iops = 1000000 }\n'
    ),
}


def campaign(name: str, schedule: str, loops: dict[str, str]) -> str:
    """The campaign file of one schedule: the same 20 tests, only the schedule differs."""
    targets = "".join(
        f'\n[[target]]\nname = "{d}"\nkind = "raw"\npath = "{p}"\nconfirm = "{p}"\nsize = "32M"\n'
        for d, p in loops.items()
    )
    return (
        f'[campaign]\nname = "tta-{name}"\nhost = "local"\nramp = "0s"\n{schedule}{targets}\n'
        '[matrix]\nrw = ["randread", "randwrite"]\nbs = ["4k", "16k"]\niodepth = [4]\nio = ["direct"]\n'
    )


class Throttle:
    """A block-cgroup with per-device limits; this process joins it, so `tankbench run` and fio inherit it."""

    def __init__(self, name: str) -> None:
        v2 = Path("/sys/fs/cgroup/cgroup.controllers")
        self.v2 = v2.exists() and "io" in v2.read_text().split()
        base = Path("/sys/fs/cgroup") if self.v2 else Path("/sys/fs/cgroup/blkio")
        if not self.v2 and not (base / "blkio.throttle.read_iops_device").exists():
            sys.exit(
                "Error: neither cgroup v2 io.max nor v1 blkio.throttle is available\n"
                "Hint: run on a Linux host with the io (v2) or blkio (v1) controller mounted"
            )
        self.path = base / name
        self.parent = base
        self.path.mkdir()

    def limit(self, majmin: str, d: Device) -> None:
        if self.v2:
            (self.path / "io.max").write_text(f"{majmin} riops={d.riops} wiops={d.wiops} rbps={d.rbps} wbps={d.wbps}")
            return
        for key, value in (
            ("read_iops", d.riops),
            ("write_iops", d.wiops),
            ("read_bps", d.rbps),
            ("write_bps", d.wbps),
        ):
            (self.path / f"blkio.throttle.{key}_device").write_text(f"{majmin} {value}")

    def join(self) -> None:
        (self.path / "cgroup.procs").write_text(str(os.getpid()))

    def close(self) -> None:
        (self.parent / "cgroup.procs").write_text(str(os.getpid()))
        self.path.rmdir()


def fio_bw(dev: str, rw: str, bs: int) -> float:
    """A short fio run on a device (for verifying the throttle): bytes/s."""
    out = subprocess.run(
        [
            "fio",
            "--name=v",
            f"--filename={dev}",
            f"--rw={rw}",
            f"--bs={bs}",
            "--direct=1",
            "--ioengine=libaio",
            "--iodepth=4",
            "--runtime=2",
            "--time_based",
            "--size=32M",
            "--output-format=json",
        ],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    job = json.loads(out[out.index("{") :])["jobs"][0]
    return float(job["read" if "read" in rw else "write"]["bw_bytes"])


def leaderboards(journal: Path) -> tuple[dict[str, dict[str, float]], int, list[str]]:
    """Mean measured throughput per (test case, target), number of runs, and the schedule's decisions."""
    conn = sqlite3.connect(journal)
    try:
        rows = conn.execute(
            "SELECT t.test_case, t.target, r.warmup, r.status, "
            "json_extract(r.metrics, '$.\"total.bw_bytes\"'), r.checks FROM runs r "
            "JOIN tests t ON t.id = r.test_id ORDER BY r.id"
        ).fetchall()
    finally:
        conn.close()
    values: dict[tuple[str, str], list[float]] = {}
    decisions = []
    for case, target, warm, status, bw, checks in rows:
        c = json.loads(checks or "{}")
        if c.get("schedule.decision") in ("drop", "stop", "settled"):
            decisions.append(f"{case} {target}: {c['schedule.decision']} after {c['schedule.after_runs']} runs")
        if not warm and status == "done" and bw is not None:
            values.setdefault((case, target), []).append(float(bw))
    boards: dict[str, dict[str, float]] = {}
    for (case, target), vs in values.items():
        boards.setdefault(case, {})[target] = sum(vs) / len(vs)
    return boards, len(rows), decisions


def time_spent(journal: Path) -> str:
    """Where a schedule's time went beside fio: the journal's per-step seconds summed over its runs."""
    conn = sqlite3.connect(journal)
    try:
        rows = conn.execute("SELECT r.wall_s, r.checks FROM runs r").fetchall()
    finally:
        conn.close()
    fio = prepare = cooldown = 0.0
    for wall, checks in rows:
        c = json.loads(checks or "{}")
        fio += float(wall or 0.0)
        prepare += float(c.get("harness.prepare_s", 0.0))
        cooldown += float(c.get("cooldown.waited_s", 0.0))
    return f"fio {fio:.0f} s, prepare {prepare:.0f} s, cooldown {cooldown:.0f} s"


def run_schedule(name: str, work: Path, loops: dict[str, str]) -> tuple[float, Path]:
    """`tankbench run` of one schedule's campaign; its wall time and journal."""
    path = work / f"{name}.toml"
    path.write_text(campaign(name, SCHEDULES[name], loops))
    journal = work / f"{name}.sqlite"
    t0 = time.monotonic()
    res = subprocess.run(
        [str(ROOT / ".venv/bin/tankbench"), "run", str(path), "--journal", str(journal)],
        cwd=work,
        capture_output=True,
        text=True,
    )
    wall = time.monotonic() - t0
    if res.returncode != 0:
        sys.exit(f"Error: tankbench run ({name}) exited {res.returncode}:\n{res.stderr[-3000:]}")
    return wall, journal


MARGIN = 0.05


def tau_beyond_margin(ref: list[float], ada: list[float], margin: float = MARGIN) -> tuple[float, int]:
    """Kendall's tau between the two leaderboards over the pairs whose reference means differ by more than
    the margin (closer pairs are ties the schedule need not break), and how many such pairs there are."""
    concordant = discordant = 0
    for i in range(len(ref)):
        for j in range(i + 1, len(ref)):
            if abs(ref[i] - ref[j]) <= margin * max(abs(ref[i]), abs(ref[j])):
                continue
            if (ref[i] - ref[j]) * (ada[i] - ada[j]) > 0:
                concordant += 1
            else:
                discordant += 1
    n = concordant + discordant
    return ((concordant - discordant) / n if n else 1.0), n


def compare(ref: dict[str, dict[str, float]], ada: dict[str, dict[str, float]]) -> list[str]:
    """Per test case: tau(reference, adaptive), tau of each vs the known truth, winners, wrong orders."""
    lines = []
    by_name = {d.name: d for d in DEVICES}
    for rw, bs in CASES:
        case = f"{'read' if rw == 'randread' else 'write'} random {bs // 1024}k"
        names = sorted(set(ref.get(case, {})) & set(ada.get(case, {})))
        if len(names) < 2:
            lines.append(f"  {case}: not measured")
            continue
        r, a = [ref[case][n] for n in names], [ada[case][n] for n in names]
        truth = [by_name[n].truth(rw, bs) for n in names]
        win_r, win_a = max(names, key=lambda n: ref[case][n]), max(names, key=lambda n: ada[case][n])
        wrong = [
            f"{x}/{y}"
            for i, x in enumerate(names)
            for y in names[i + 1 :]
            if (ref[case][x] - ref[case][y]) * (ada[case][x] - ada[case][y]) < 0
        ]
        tau_m, pairs = tau_beyond_margin(r, a)
        lines.append(
            f"  {case:18} tau(ref, adaptive) {kendall_tau(r, a):+.2f}, over the {pairs} pairs > {MARGIN:.0%} apart "
            f"{tau_m:+.2f}   tau vs truth: ref "
            f"{kendall_tau(r, truth):+.2f}, adaptive {kendall_tau(a, truth):+.2f}   winners: ref {win_r}, "
            f"adaptive {win_a} ({'agree' if win_r == win_a else 'DISAGREE'})"
            + (f"   swapped pairs: {', '.join(wrong)}" if wrong else "")
        )
    return lines


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--keep", action="store_true", help="keep the work directory (journals, campaigns)")
    args = p.parse_args()
    if os.geteuid() != 0:
        sys.exit("Error: bench/time-to-answer needs root (loop devices and a block cgroup)\nHint: run it as root")
    work = Path(tempfile.mkdtemp(prefix="tb-time-to-answer-", dir="/var/tmp"))
    loops: dict[str, str] = {}
    throttle = Throttle(f"tb-time-to-answer-{os.getpid()}")
    try:
        for d in DEVICES:
            backing = work / f"{d.name}.img"
            with open(backing, "wb") as img:
                # laid out before either schedule runs (random data: what a raw target's default layout
                # writes and verifies), so neither pays the one-time layout: until 2026-11-25 the reference,
                # which ran first, wrote every device's 32M through the throttle (~90 s of its wall time)
                for _ in range(64):
                    img.write(os.urandom(MIB))
            loops[d.name] = subprocess.run(
                ["losetup", "--show", "-f", str(backing)], capture_output=True, text=True, check=True
            ).stdout.strip()
            majmin = subprocess.run(
                ["lsblk", "-dno", "MAJ:MIN", loops[d.name]], capture_output=True, text=True, check=True
            ).stdout.strip()
            throttle.limit(majmin, d)
        throttle.join()
        got = fio_bw(loops["d0"], "randread", 4096)
        want = DEVICES[0].truth("randread", 4096)
        print(f"throttle check: d0 randread 4k {got / 4096:.0f} IOPS (limit {want / 4096:.0f})")
        if got > 1.1 * want:
            sys.exit(
                "Error: the block throttle does not hold on loop devices here; the testbed would not be "
                "of known behaviour\nHint: run on a host whose kernel throttles direct I/O to loop devices"
            )
        if got < 0.8 * want:
            print(
                "warning: the machine is too busy to reach the throttle's limit: 'tau vs truth' will suffer; "
                "the reference/adaptive comparison still runs on the same machine"
            )
        results = {}
        for name in ("reference", "adaptive"):
            print(f"running the {name} schedule ...", flush=True)
            results[name] = run_schedule(name, work, loops)
        (ref_wall, ref_j), (ada_wall, ada_j) = results["reference"], results["adaptive"]
        ref, ref_runs, _ = leaderboards(ref_j)
        ada, ada_runs, decisions = leaderboards(ada_j)
        print(
            f"\nreference: {ref_wall:.0f} s, {ref_runs} runs;  adaptive: {ada_wall:.0f} s, {ada_runs} runs;  "
            f"wall-time ratio adaptive/reference = {ada_wall / ref_wall:.2f}"
        )
        print(f"  where it went: reference {time_spent(ref_j)};  adaptive {time_spent(ada_j)}")
        print("\n".join(compare(ref, ada)))
        print(f"adaptive decisions: {len(decisions)} ({'; '.join(decisions) or 'none'})")
        if args.keep:
            print(f"journals and campaigns kept in {work}")
    finally:
        throttle.close()
        for dev in loops.values():
            subprocess.run(["losetup", "-d", dev], check=False)
        if not args.keep:
            shutil.rmtree(work)  # the directory this run made (mkdtemp): journals, campaigns, reports, images
    return 0


if __name__ == "__main__":
    sys.exit(main())
