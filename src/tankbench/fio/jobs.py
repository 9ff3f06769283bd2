"""fio job files and standalone shell scripts for a Test."""

from __future__ import annotations

import shlex

from tankbench.model import Test
from tankbench.units import fmt_seconds_fio, fmt_size, parse_size


def test_file_path(test: Test) -> str:
    """The file or device fio opens: the device for raw, one laid-out file per target for file."""
    if test.target.kind == "raw":
        return test.target.path
    if test.target.kind in ("dataset", "zvol"):
        from tankbench.targets.zfs import fio_filename
        return fio_filename(test)
    return f"{test.target.path}/tankbench-{test.target.name}.fiodata"


def job_text(test: Test, filename: str | None = None) -> str:
    """An fio job file that runs exactly this test (for a copy test: a comment naming the command)."""
    p = test.params
    if test.is_copy:
        return (f"; tankbench test {test.number:04d} {test.name} (id {test.id})\n"
                f"; copy test, not an fio job: {p['workload']} of a {p['copy_size']} random-filled source onto "
                f"{filename or test_file_path(test)}, timed until the command returns and until the data is durable\n")
    g: dict[str, object] = {
        "ioengine": p.get("ioengine", "libaio"),
        "filename": filename or test_file_path(test),
        "time_based": 1,
        "runtime": fmt_seconds_fio(test.runtime),
        "ramp_time": fmt_seconds_fio(test.ramp),
        "group_reporting": 1,
        "direct": 1 if p.get("io", "direct") == "direct" else 0,
    }
    size = p.get("size") or (fmt_size(test.target.size) if test.target.size else "")
    if size:
        g["size"] = size
    mode = p.get("sync_mode", "async")
    if mode == "sync":
        g["sync"] = 1
    elif mode in ("fsync", "fdatasync"):
        g[mode] = 1
    for key, value in test.fio_options.items():
        g[key] = value
    lines = [f"; tankbench test {test.number:04d} {test.name} (id {test.id})",
             f"; test case: {test.test_case}; target {test.target.name} ({test.target.kind})",
             "[global]"]
    lines += [f"{k}={v}" for k, v in g.items()]
    lines += ["", f"[{test.name}]", f"rw={p['rw']}", f"bs={p['bs']}", f"iodepth={p.get('iodepth', 1)}",
              f"numjobs={p.get('numjobs', 1)}"]
    if "rwmixread" in p:
        lines.append(f"rwmixread={p['rwmixread']}")
    return "\n".join(lines) + "\n"


def job_script(test: Test, fio_name: str, campaign_id: str = "") -> str:
    """A POSIX shell script that reproduces the test with plain fio (no tankbench needed)."""
    path = test_file_path(test)
    q = shlex.quote
    lines = ["#!/bin/sh",
             f"# tankbench test {test.number:04d}: {test.name} (id {test.id})",
             "# Reproduces this test with plain fio; JSON result on stdout.",
             "set -eu",
             'cd "$(dirname "$0")"']
    if test.target.kind in ("dataset", "zvol"):
        from tankbench.targets.zfs import script_lines
        lines.append("# Create the dataset/zvol with the test's properties (tagged as tankbench's), as tankbench does.")
        lines += script_lines(test, campaign_id)
    if test.target.kind == "zvol" and not test.is_copy:
        size = test.target.size
        lines += ["# Fill the zvol with incompressible data first: a new zvol reads zeros without any I/O.",
                  f"head -c {size} /dev/urandom | dd of={q(path)} bs=1M iflag=fullblock conv=fsync status=none"]
    if test.target.kind in ("file", "dataset") and not test.is_copy:
        size = test.target.size
        lines += [
            "# Lay out the test file with incompressible data first, so reads hit real blocks (not a sparse file).",
            f"f={q(path)}",
            'mkdir -p "$(dirname "$f")"',
            f'if [ ! -f "$f" ] || [ "$(stat -c %s "$f")" -ne {size} ] || [ $(( $(stat -c %b "$f") * 512 )) -lt {size * 98 // 100} ]; then',
            f'  head -c {size} /dev/urandom > "$f" && sync "$f"',
            "fi",
        ]
    elif test.target.kind in ("raw", "zvol"):
        lines.append(f"# WARNING: writes to the block device {path} if the job writes.")
    if test.is_copy:
        if test.target.kind == "file":
            lines.append(f'mkdir -p "$(dirname {q(path)})"')
        from tankbench.runner import copy_argv
        size = parse_size(str(test.params["copy_size"]))
        src = "/var/tmp/tankbench-copy-source.bin"
        lines += [f"[ -s {src} ] || head -c {size} /dev/urandom > {src}",
                  "t0=$(date +%s.%N)", shlex.join(copy_argv(str(test.params["workload"]), src, path)),
                  "t1=$(date +%s.%N)", "sync", "t2=$(date +%s.%N)",
                  'awk -v a="$t0" -v b="$t1" -v c="$t2" \'BEGIN { printf "command %.2f s, durable after %.2f s\\n", b - a, c - a }\'']
        return "\n".join(lines) + "\n"
    lines.append(f"exec fio --output-format=json {q(fio_name)}")
    return "\n".join(lines) + "\n"
