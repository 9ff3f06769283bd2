"""Why CI's labs hung (issue 34 item 1): the kernel's hung-task lines ("task fio blocked for more than 120 seconds",
"task kworker/u8:1 blocked …") in a shared session lab, with commands that did not finish in 300 s.

A lab's disk models (qemu throttling, set over QMP by a campaign with `disk_model`, e.g. the zvol-vs-qcow2 preset's
`ssd`) stay on its drives after that campaign ends; a later campaign that reaches the same lab as an *ssh* host (a host
file, as test_real_host's quick start does) sets no models, so it runs on the throttled disks without knowing. This
bench runs the quick start's heaviest kind of job (buffered 4k random writes at QD16 into a dataset on a mirror, with
the final fsync) on one lab with no model, then with the models a preset leaves behind, and counts the kernel's
hung-task lines with the detector's threshold lowered to 20 s (kernel.hung_task_timeout_secs; the default is 120 s):
each says a task waited that long for I/O. Prints, per model: fio's wall time against its 30 s runtime, how long
its final flush took, the hung-task lines and the longest wait the detector saw.

Boots its own lab (`hang-bench`, two data disks), shut down at the end.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import time

from tankbench.lab import vm
from tankbench.lab.diskmodels import LabMachine

JOB = [
    "fio",
    "--name=quickstart-like",
    "--directory=/tbhang/fs",
    "--rw=randwrite",
    "--bs=4k",
    "--iodepth=16",
    "--ioengine=libaio",
    "--size=512M",
    "--time_based",
    "--runtime=30",
    "--end_fsync=1",
    "--output-format=json",
]


def sh(host: vm.LabHost, script: str, timeout: float = 600) -> str:
    res = host.run(["sh", "-c", script], timeout=timeout)
    if res.returncode != 0:
        raise SystemExit(f"{script}: {res.stderr.strip()[-400:]}")
    return str(res.stdout)


def one(host: vm.LabHost, name: str, model: str) -> dict[str, object]:
    disks = vm.lab_data_disks(name)
    vm.apply_machine(name, host, LabMachine(disk_model=model), lambda m: None)
    sh(host, f"zpool create -f -o ashift=12 tbhang mirror {' '.join(disks)} && zfs create tbhang/fs")
    sh(host, "sysctl -q kernel.hung_task_timeout_secs=20 && dmesg -C")
    t0 = time.monotonic()
    res = host.run(JOB, timeout=3600)
    wall = time.monotonic() - t0
    doc = json.loads(res.stdout[res.stdout.index("{") :]) if "{" in res.stdout else {}
    runtime = float(doc.get("jobs", [{}])[0].get("job_runtime", 0)) / 1000 if doc else 0.0
    log = sh(host, "dmesg")
    waits = [int(s) for s in re.findall(r"blocked for more than (\d+) seconds", log)]
    tasks = sorted(set(re.findall(r"task (\S+?):\d+ blocked", log)))
    vm.apply_machine(name, host, LabMachine(), lambda m: None)  # the next model starts from a disk that answers
    sh(host, "zpool destroy tbhang && wipefs -a -q " + " ".join(disks))
    return {"model": model, "wall_s": wall, "fio_s": runtime, "hung_lines": len(waits), "tasks": tasks}


def main() -> int:
    ap = argparse.ArgumentParser(prog="bench/lab-hang")
    ap.add_argument("--models", default="none,ssd,hdd", help="models left on the lab's data disks, in turn")
    args = ap.parse_args()
    name = "hang-bench"
    host = vm.lab_host(name, disks=2, slog=False, progress=lambda m: print(m, file=sys.stderr))
    try:
        print(
            f"{'model left':<11} {'fio wall':>9} {'fio runtime':>12} {'flush after':>12} {'hung-task lines (>20 s)':>24}"
        )
        for model in [m for m in args.models.split(",") if m]:
            r = one(host, name, model)
            flush = float(r["wall_s"]) - float(r["fio_s"])  # type: ignore[arg-type]
            print(
                f"{model:<11} {r['wall_s']:>8.0f}s {r['fio_s']:>11.0f}s {flush:>11.0f}s "
                f"{r['hung_lines']:>6} {', '.join(r['tasks']) if r['tasks'] else ''}",  # type: ignore[arg-type]
                flush=True,
            )
    finally:
        host.close()
        vm.down(name)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
