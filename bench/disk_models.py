"""Do the lab's disk models hold? Plain fio in a lab against each model on a raw lab disk: random 4k reads at
QD1 and QD32, sequential 1M reads, sync 4k writes (O_SYNC, QD1); prints measured vs modelled and the ratio.
A model whose measured rate is off by more than 15 % is wrong (exit status 1).

Boots its own lab (`disks-bench`, one data disk) unless --lab names a running one; the models are switched
over QMP between them (no reboot), as a campaign does.
"""

from __future__ import annotations

import argparse
import json
import sys

from tankbench.diskmodels import MIB, MODELS, LabMachine
from tankbench.lab import control, vm

#: (label, fio options, block size): the four workloads of issue 17
JOBS = (
    ("4k randread QD1", ["--rw=randread", "--ioengine=psync", "--iodepth=1"], 4096),
    ("4k randread QD32", ["--rw=randread", "--ioengine=libaio", "--iodepth=32"], 4096),
    ("1M read QD4", ["--rw=read", "--ioengine=libaio", "--iodepth=4"], MIB),
    ("4k sync write QD1", ["--rw=randwrite", "--ioengine=psync", "--iodepth=1", "--sync=1"], 4096),
)
TOLERANCE = 0.15


def fio(host: vm.LabHost, disk: str, opts: list[str], bs: int, runtime: int) -> tuple[float, float]:
    """(ops/s, MiB/s) of one fio job on the raw disk."""
    argv = [
        "fio",
        "--name=m",
        f"--filename={disk}",
        "--direct=1",
        f"--bs={bs}",
        "--size=2G",
        "--time_based",
        f"--runtime={runtime}",
        "--ramp_time=1",
        "--output-format=json",
        *opts,
    ]
    res = host.run(argv, timeout=runtime + 120)
    if res.returncode != 0:
        raise SystemExit(f"fio failed: {res.stderr.strip()[-500:]}")
    job = json.loads(res.stdout[res.stdout.index("{") :])["jobs"][0]
    side = job["write"] if "write" in opts[0] else job["read"]
    return float(side["iops"]), float(side["bw_bytes"]) / MIB


def main() -> int:
    ap = argparse.ArgumentParser(prog="bench/disk-models")
    ap.add_argument("--lab", default="", help="a running lab to use (its first data disk); default: boot one")
    ap.add_argument("--runtime", type=int, default=10, help="seconds per fio job (default 10)")
    ap.add_argument("--models", default=",".join(m for m in MODELS if m != "none"))
    args = ap.parse_args()
    name = args.lab or "disks-bench"
    if args.lab:
        host = vm.ssh_host(vm.require_up(name))
    else:
        host = control.lab_host(name, disks=1, slog=False, progress=lambda m: print(m, file=sys.stderr))
    disk = vm.lab_data_disks(name)[0]
    wrong = 0
    try:
        print(f"{'model':<8} {'workload':<19} {'modelled':>14} {'measured':>14} {'ratio':>6}")
        for model in [m for m in args.models.split(",") if m]:
            control.apply_machine(name, host, LabMachine(disk_model=model), lambda m: None)
            for label, opts, bs in JOBS:
                iops, mib = fio(host, disk, opts, bs, args.runtime)
                ops, mib_model = MODELS[model].rate(bs)
                if bs >= MIB:
                    want, got, unit = mib_model, mib, "MiB/s"
                else:
                    want, got, unit = ops, iops, "IOPS"
                ratio = got / want if want != float("inf") else float("nan")
                bad = not (1 - TOLERANCE <= ratio <= 1 + TOLERANCE) if model != "none" else False
                wrong += bad
                print(
                    f"{model:<8} {label:<19} {want:>8.1f} {unit:<5} {got:>8.1f} {unit:<5} {ratio:>6.2f}"
                    + ("  <- off by more than 15 %" if bad else ""),
                    flush=True,
                )
        control.apply_machine(name, host, LabMachine(), lambda m: None)
    finally:
        host.close()
        if not args.lab:
            vm.down(name, lambda m: None)
    print(f"{wrong} workload(s) off their model by more than 15 %" if wrong else "every model within 15 %")
    return 1 if wrong else 0


if __name__ == "__main__":
    sys.exit(main())
