"""fio job files and standalone shell scripts for a Test (asks the test's target kind; the layout helpers the
kinds themselves use are in fio.layout, below them)."""

from __future__ import annotations

import os
import shlex
from typing import TYPE_CHECKING

from tankbench.copytest import copy_script_lines
from tankbench.fio import layout as fio_layout
from tankbench.fio.layout import ends_with_fsync as ends_with_fsync
from tankbench.fio.layout import layout_of as layout_of
from tankbench.fio.layout import numjobs_of as numjobs_of
from tankbench.fio.layout import size_based as size_based
from tankbench.fio.parse import IO_LOG_MSEC
from tankbench.guestconf.fill import fill_job, fill_size
from tankbench.model import Test
from tankbench.targets import clients as clients_mod
from tankbench.targets import kind_of
from tankbench.units import fmt_seconds_fio, fmt_size, parse_size

if TYPE_CHECKING:
    from tankbench.agent import PrepareFileRequest, PrepareRawRequest


def _block(test: Test) -> bool:
    """fio opens a block device (raw, zvol): one region shared by the jobs, no file to create."""
    return kind_of(test.target).traits.block_device


def per_job_files(test: Test) -> bool:
    """Each job has its own laid-out file (see fio.layout.per_job_files)."""
    return fio_layout.per_job_files(test, kind_of(test.target))


def test_file_path(test: Test) -> str:
    """The file or device fio opens (see fio.layout.test_file_path)."""
    return fio_layout.test_file_path(test, kind_of(test.target))


def test_file_paths(test: Test) -> list[str]:
    """Every file fio opens, one per job when each job has its own (what the layout must cover)."""
    return fio_layout.test_file_paths(test, kind_of(test.target))


def layout_request(test: Test, path: str | None = None) -> PrepareFileRequest | PrepareRawRequest:
    """The agent request that lays out and verifies what fio will open (see fio.layout.layout_request)."""
    return fio_layout.layout_request(test, kind_of(test.target), path)


def job_bytes(test: Test) -> int:
    """Bytes each job reads or writes over (fio's `size`): the test's size axis or the target's size; on a
    block device with numjobs > 1, the region is shared out between the jobs."""
    if test.is_fill:  # twice the room the ballast leaves, not the whole (maybe large) disk
        return fill_size(test.target.size, parse_size(str(test.params["fill_room"])))
    size = parse_size(str(test.params["size"])) if test.params.get("size") else test.target.size
    if _block(test) and numjobs_of(test) > 1:
        return size // numjobs_of(test)
    return size


def deadline_s(test: Test, late_s: float, min_throughput: int) -> float:
    """The watchdog's cap: when it ends fio even though fio still makes progress (a run that stops making
    progress ends earlier, after campaign.hung_after). Time based: ramp + runtime + late_s (campaign.late_max).
    Size based, where the duration is not known in advance: ramp + the bytes all jobs move (size x numjobs;
    fio's size counts reads and writes together) at the floor throughput `min_throughput`
    (campaign.min_throughput, default 1 MiB/s) + late_s."""
    if not size_based(test):
        return test.expected_s + late_s
    total = job_bytes(test) * numjobs_of(test)
    return test.ramp + total / max(1, min_throughput) + late_s


#: fio options that decide what write buffers hold: a campaign that sets one gets exactly what it asked for
BUFFER_OPTIONS = frozenset(
    {
        "refill_buffers",
        "buffer_compress_percentage",
        "buffer_compress_chunk",
        "zero_buffers",
        "buffer_pattern",
        "dedupe_percentage",
        "scramble_buffers",
    }
)


def writes_buffers(test: Test) -> bool:
    """Whether an fio test writes data from fio's buffers (any write or trim pattern; not a copy test)."""
    rw = str(test.params.get("rw", ""))
    return not test.is_copy and (any(w in rw for w in ("write", "rw")) or rw == "readwrite")


def job_text(test: Test, filename: str | None = None) -> str:
    """An fio job file that runs exactly this test (for a copy test: a comment naming the command)."""
    p = test.params
    if test.is_fill:
        head = f"; tankbench test {test.number:04d} {test.name} (id {test.id})\n"
        return head + fill_job(filename or test_file_path(test), job_bytes(test))
    if test.is_copy:
        return (
            f"; tankbench test {test.number:04d} {test.name} (id {test.id})\n"
            f"; copy test, not an fio job: {p['workload']} of a {p['copy_size']} random-filled source onto "
            f"{filename or test_file_path(test)}, timed until the command returns and until the data is durable\n"
        )
    g: dict[str, object] = {"ioengine": p.get("ioengine", "libaio")}
    g.update(_file_options(test, filename))
    if size_based(test):
        if test.ramp:
            g["ramp_time"] = fmt_seconds_fio(test.ramp)
    else:
        g.update(time_based=1, runtime=fmt_seconds_fio(test.runtime), ramp_time=fmt_seconds_fio(test.ramp))
    g["group_reporting"] = 1
    g["direct"] = 1 if p.get("io", "direct") == "direct" else 0
    size = job_bytes(test)
    if size:
        g["size"] = fmt_size(size)
    if numjobs_of(test) > 1 and _block(test) and size:
        g["offset_increment"] = fmt_size(size)  # job j works on [j * size, (j + 1) * size)
    if "buffer_compress_percentage" in p:
        g["buffer_compress_percentage"] = p["buffer_compress_percentage"]
    if "refill_buffers" in p:
        g["refill_buffers"] = 1 if p["refill_buffers"] else 0
    elif writes_buffers(test) and not BUFFER_OPTIONS & (set(p) | set(test.fio_options)):
        # fio fills one buffer once: small blocks repeat inside each record and the written file compresses.
        # Fresh random data per write keeps it as incompressible as its layout, so the next run on it needs no
        # new layout, and ZFS writes what fio reports.
        g["refill_buffers"] = 1
    mode = p.get("sync_mode", "async")
    if mode == "sync":
        g["sync"] = 1
    elif mode in ("fsync", "fdatasync"):
        g[mode] = 1
    for key, value in test.fio_options.items():
        g[key] = value
    lines = [
        f"; tankbench test {test.number:04d} {test.name} (id {test.id})",
        f"; test case: {test.test_case}; target {test.target.name} ({test.target.kind})",
        "[global]",
    ]
    lines += [f"{k}={v}" for k, v in g.items()]
    lines += [
        "",
        f"[{test.name}]",
        f"rw={p['rw']}",
        f"bs={p['bs']}",
        f"iodepth={p.get('iodepth', 1)}",
        f"numjobs={p.get('numjobs', 1)}",
    ]
    if "rwmixread" in p:
        lines.append(f"rwmixread={p['rwmixread']}")
    return "\n".join(lines) + "\n"


#: per-job I/O logs a run adds to time a job's final fsync (the agent and the test guest collect `tbio_*.log`)
IO_LOG = "tbio"


#: per-second logs of IOPS, bandwidth and latency every run on the host writes (the agent reads `tbsec_*.log`)
SEC_LOG = "tbsec"
SEC_LOG_MSEC = 1000


def run_job_text(test: Test) -> str:
    """The job file a run executes: job_text(), plus fio's own per-second IOPS, bandwidth and latency logs (the
    report's time series, issue 32: bench/overhead measures what they cost), and per-job IOPS logs averaged over
    100 ms when a size-based job ends with an fsync. fio counts that fsync in each job's runtime but reports no
    figure of its own; the time of the last logged I/O tells where the I/O ended and the fsync began (a
    time-based job's I/O ends at `runtime`); the other logs then share the 100 ms window (fio has one per job)
    and the agent sums them per second. A job in a test guest writes no logs. The logs change no I/O."""
    text = job_text(test)
    if test.is_copy or test.is_fill or kind_of(test.target).traits.runs_in_guest:
        return text
    timing = ends_with_fsync(test) and size_based(test)
    iops = IO_LOG if timing else SEC_LOG
    msec = IO_LOG_MSEC if timing else SEC_LOG_MSEC
    logs = (
        f"write_iops_log={iops}\nwrite_bw_log={SEC_LOG}\nwrite_lat_log={SEC_LOG}\nlog_avg_msec={msec}\nper_job_logs=1\n"
    )
    return text.replace("[global]\n", "[global]\n" + logs, 1)


def fio_path(path: str) -> str:
    """A path as fio's filename/directory options take it: fio splits them at ':' (several files or directories),
    so a colon in a name (/dev/disk/by-path/pci-0000:00:1f.2-ata-1, a USB disk's by-id `…-0:0`) is escaped."""
    return path.replace(":", "\\:")


def _file_options(test: Test, filename: str | None) -> dict[str, object]:
    """`filename`, or `directory` + `filename_format` when each job has its own file."""
    path = filename or test_file_path(test)
    if not per_job_files(test):
        return {"filename": fio_path(path)}
    stem = fio_layout.file_stem(test, kind_of(test.target))
    if filename:  # the caller named the first job's file: derive the others from it
        stem = filename[: -len(".0.fiodata")] if filename.endswith(".0.fiodata") else filename
    return {
        "directory": fio_path(os.path.dirname(stem)),
        "filename_format": fio_path(os.path.basename(stem)) + ".$jobnum.fiodata",
    }


def layout_script_lines(test: Test) -> list[str]:
    """Shell lines that lay out the test's file(s) or zvol the way tankbench does for its layout."""
    q = shlex.quote
    size, layout = test.target.size, layout_of(test)
    if fio_layout.owned_block(kind_of(test.target)):
        dev = q(test_file_path(test))
        if layout == "unwritten":
            return [
                "# layout unwritten: discard the zvol, so reads hit holes (ZFS answers them without disk I/O)",
                f"blkdiscard {dev}",
            ]
        if layout == "zero":
            return [
                "# layout zero: zero-filled (seed 000's retest: reading zeros is fast, and meaningless)",
                f"dd if=/dev/zero of={dev} bs=1M count={size >> 20} oflag=direct conv=fsync status=none",
            ]
        if layout.startswith("compressible:"):
            return [f"# layout {layout}", _fio_fill(test_file_path(test), size, layout)]
        return [
            "# Fill the zvol with incompressible data first: a new zvol reads zeros without any I/O.",
            f"head -c {size} /dev/urandom | dd of={dev} bs=1M iflag=fullblock conv=fsync status=none",
        ]
    lines = []
    for path in test_file_paths(test):
        lines += [f"f={q(path)}", 'mkdir -p "$(dirname "$f")"']
        if layout == "unwritten":
            lines += [
                "# layout unwritten: a never-written (sparse) file, as fio creates it; reads hit holes",
                f'rm -f "$f" && truncate -s {size} "$f"',
            ]
        elif layout == "zero":
            lines += [
                "# layout zero: zero-filled (with compression on, ZFS stores holes)",
                f'head -c {size} /dev/zero > "$f" && sync "$f"',
            ]
        elif layout.startswith("compressible:"):
            lines += [f"# layout {layout}", _fio_fill(path, size, layout)]
        else:
            lines += [
                "# Lay out the test file with incompressible data first, so reads hit real blocks (not a sparse file).",
                f'if [ ! -f "$f" ] || [ "$(stat -c %s "$f")" -ne {size} ] || [ $(( $(stat -c %b "$f") * 512 )) -lt {size * 98 // 100} ]; then',
                f'  head -c {size} /dev/urandom > "$f" && sync "$f"',
                "fi",
            ]
    return lines


def _fio_fill(path: str, size: int, layout: str) -> str:
    """The shell line that lays out `path` (as written, unquoted) compressible: fio's filename escaped (a colon is
    fio's file separator), then quoted for the shell."""
    pct = layout.split(":")[1].rstrip("%")
    return (
        f"fio --name=layout --filename={shlex.quote(fio_path(path))} --rw=write --bs=1M --size={size} --refill_buffers=1 "
        f"--buffer_compress_percentage={pct} --buffer_compress_chunk=4k --end_fsync=1 >/dev/null"
    )


def job_script(test: Test, fio_name: str, campaign_id: str = "") -> str:
    """A POSIX shell script that reproduces the test with plain fio (no tankbench needed)."""
    path = test_file_path(test)
    lines = [
        "#!/bin/sh",
        f"# tankbench test {test.number:04d}: {test.name} (id {test.id})",
        "# Reproduces this test with plain fio; JSON result on stdout.",
        "set -eu",
        'cd "$(dirname "$0")"',
    ]
    kind = kind_of(test.target)
    lines += kind.script_lines(test, campaign_id)
    if kind.load_from_clients(test.target):  # fio client/server on the target's client hosts, as `run` does it
        return "\n".join(lines + clients_mod.script_lines(test, fio_name)) + "\n"
    if kind.traits.runs_in_guest:
        what = "the copy" if test.is_copy else f"{fio_name} with fio"
        return "\n".join(lines + [f"echo 'run {what} inside the test guest (see above)' >&2"]) + "\n"
    if (
        not test.is_copy
        and (fio_layout.owned_block(kind_of(test.target)) or not _block(test))
        and (layout_of(test) != "random" or per_job_files(test))
    ):
        lines.append("# This test's layout, for the files fio opens:")
        lines += layout_script_lines(test)
    if test.is_copy:
        return "\n".join(lines + copy_script_lines(test, path)) + "\n"
    lines.append(f"exec fio --output-format=json {shlex.quote(fio_name)}")
    return "\n".join(lines) + "\n"
