"""fio job files and standalone shell scripts for a Test."""

from __future__ import annotations

import shlex

from tankbench.copytest import copy_script_lines
from tankbench.model import Test
from tankbench.targets import kind_of
from tankbench.units import fmt_seconds_fio, fmt_size


def test_file_path(test: Test) -> str:
    """The file or device fio opens (its target kind decides)."""
    return kind_of(test.target).fio_filename(test)


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
    lines = ["#!/bin/sh",
             f"# tankbench test {test.number:04d}: {test.name} (id {test.id})",
             "# Reproduces this test with plain fio; JSON result on stdout.",
             "set -eu",
             'cd "$(dirname "$0")"']
    kind = kind_of(test.target)
    lines += kind.script_lines(test, campaign_id)
    if kind.runs_in_guest:
        return "\n".join(lines + [f"echo 'run {fio_name} with fio inside the test guest (see above)' >&2"]) + "\n"
    if test.is_copy:
        return "\n".join(lines + copy_script_lines(test, path)) + "\n"
    lines.append(f"exec fio --output-format=json {shlex.quote(fio_name)}")
    return "\n".join(lines) + "\n"
