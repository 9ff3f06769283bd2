"""Why CI's labs hung (issue 34 item 1): the kernel's hung-task lines ("task fio blocked for more than 120 seconds",
"task kworker/u8:1 blocked …") in a shared session lab, with commands that did not finish in 300 s.

Two suspects. A lab's disk models (qemu throttling, set over QMP by a campaign with `disk_model`, e.g. the
zvol-vs-qcow2 preset's `ssd`) stay on its drives after that campaign ends; a later campaign that reaches the same lab
as an *ssh* host (a host file, as test_real_host's quick start does) sets none, so it runs on throttled disks without
knowing. And this machine itself: the lab's disks are sparse files in the host's page cache (qemu's default cache,
writeback), so when the host's dirty memory reaches its limit (vm.dirty_ratio, 20 % of RAM) every writer on it,
qemu included, waits in the kernel until the host's own disk has taken enough of it; CI writes gigabytes beside its
labs (fio's test files, loop devices, other labs' layouts).

This bench runs the quick start's heaviest kind of job (buffered 4k random writes at QD16 into a dataset on a mirror,
with the final fsync) on one lab: with no model, with the models a preset leaves behind, and with no model while
this machine writes GiBs of its own beside the lab's images. It counts the kernel's hung-task lines with the
detector's threshold lowered to 20 s (kernel.hung_task_timeout_secs; the default is 120 s): each says a task waited
that long for I/O. Prints per case: fio's wall time against its 30 s runtime, the final flush, the longest completion
(fio's clat max) and the hung-task lines with the tasks they name.

Boots its own lab (`hang-bench`, two data disks), shut down at the end.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path

from tankbench.diskmodels import LabMachine
from tankbench.lab import control, vm

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


def host_writes(path: Path, gib: int) -> subprocess.Popen[bytes]:
    """This machine writing `gib` GiB of its own, buffered, beside the lab's disk images (as CI's other tests do)."""
    return subprocess.Popen(
        ["dd", "if=/dev/zero", f"of={path}", "bs=1M", f"count={gib << 10}", "status=none"], stdout=subprocess.DEVNULL
    )


def one(host: vm.LabHost, name: str, model: str, busy_gib: int = 0) -> dict[str, object]:
    """One case: the job on a fresh pool, with `model` on the data disks and `busy_gib` GiB written by this machine."""
    disks = vm.lab_data_disks(name)
    control.apply_machine(name, host, LabMachine(disk_model=model), lambda m: None)
    sh(host, f"zpool create -f -o ashift=12 tbhang mirror {' '.join(disks)} && zfs create tbhang/fs")
    sh(host, "sysctl -q kernel.hung_task_timeout_secs=20 && dmesg -C")
    junk = vm.labs_dir() / name / "host-dirty.img"
    writer = host_writes(junk, busy_gib) if busy_gib else None
    t0 = time.monotonic()
    res = host.run(JOB, timeout=3600)
    wall = time.monotonic() - t0
    if writer is not None:
        writer.wait()
        os.sync()
        junk.unlink()
    doc = json.loads(res.stdout[res.stdout.index("{") :]) if "{" in res.stdout else {}
    job = doc.get("jobs", [{}])[0] if doc else {}
    log = sh(host, "dmesg")
    control.apply_machine(name, host, LabMachine(), lambda m: None)  # the next case starts from disks that answer
    sh(host, "zpool destroy tbhang && wipefs -a -q " + " ".join(disks))
    return {
        "wall_s": wall,
        "fio_s": float(job.get("job_runtime", 0)) / 1000,
        "clat_max_s": float(job.get("write", {}).get("clat_ns", {}).get("max", 0)) / 1e9,
        "hung_lines": len(re.findall(r"blocked for more than \d+ seconds", log)),
        "tasks": sorted(set(re.findall(r"task (\S+?):\d+ blocked", log))),
    }


def main() -> int:
    ap = argparse.ArgumentParser(prog="bench/lab-hang")
    ap.add_argument("--models", default="none,ssd,hdd", help="models left on the lab's data disks, in turn")
    ap.add_argument("--host-gib", type=int, default=6, help="GiB this machine writes during the last case (0: none)")
    args = ap.parse_args()
    name = "hang-bench"
    host = control.lab_host(name, disks=2, slog=False, progress=lambda m: print(m, file=sys.stderr))
    cases = [(m, 0) for m in args.models.split(",") if m] + ([("none", args.host_gib)] if args.host_gib else [])
    try:
        print(f"{'case':<32} {'fio wall':>8} {'runtime':>7} {'flush':>6} {'clat max':>8}  hung-task lines (>20 s)")
        for model, gib in cases:
            r = one(host, name, model, gib)
            flush = float(r["wall_s"]) - float(r["fio_s"])  # type: ignore[arg-type]
            label = f"model {model} left" + (f", host writes {gib} GiB" if gib else "")
            tasks = ", ".join(r["tasks"])  # type: ignore[arg-type]
            print(
                f"{label:<32} {r['wall_s']:>7.0f}s {r['fio_s']:>6.0f}s {flush:>5.0f}s {r['clat_max_s']:>7.1f}s  "
                f"{r['hung_lines']} {tasks}",
                flush=True,
            )
    finally:
        host.close()
        vm.down(name)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
