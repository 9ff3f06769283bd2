"""fio JSON (local `jobs` or client/server `client_stats`, fio 2.x to 3.4x) -> a flat metrics dict.

Metric keys (all numbers; bandwidth in bytes/s, latency in ns, whatever unit the fio version wrote):
  {read,write,trim}.{iops, bw_bytes, io_bytes, total_ios, bw_stdev_bytes, iops_stdev}
  {read,write,trim}.lat_{mean,stdev,max}_ns        total latency (fio's `lat`: submission + completion)
  {read,write,trim}.clat_{mean,stdev,max}_ns       completion latency (fio's `clat`)
  {read,write,trim}.clat_{p50,p99,p999}_ns         completion latency percentiles (what fio prints)
  {read,write,trim}.lat_{p50,p99,p999}_ns          the same completion latency percentiles, under the key
                                                   the reports rank by (kept for old journals)
  {read,write,trim}.lat_approx                     1 when the jobs' percentiles were combined without json+
                                                   histogram bins (an approximation), else absent
  verify.<any of the direction keys above>         a write or trim job's verify reads (verify=... in its
                                                   options): a later phase, not in total.* nor in the p99
  total.{iops, bw_bytes, io_bytes}                 read + write + trim (+ mixed); never verify.*
  fio.{runtime_s, elapsed_s, error, usr_cpu_pct, sys_cpu_pct, ctx, jobs}
Several job entries (numjobs > 1 without group_reporting, several clients) are one run: IOPS and bandwidth
are summed; latency means and deviations are pooled by I/O count (exact); percentiles come from the merged
json+ histogram when every job has one (exact), else from the I/O-weighted mean of the jobs' percentiles
(approximate, flagged). fio.runtime_s is the longest direction runtime fio printed: with group_reporting,
fio's job_runtime is the sum over the group's jobs, so it is used only when no direction has a runtime.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Sequence
from typing import Any

DIRECTIONS = ("read", "write", "trim")
#: the averaging window of the per-job IOPS logs a run may add (fio/jobs.py run_job_text)
IO_LOG_MSEC = 100
PERCENTILES = (("p50", 50.0), ("p99", 99.0), ("p999", 99.9))

#: What each latency key means, for labels in reports.
LATENCY_LABELS = {
    "lat_mean_ns": "mean total latency (fio lat: submission + completion)",
    "lat_stdev_ns": "standard deviation of total latency (fio lat)",
    "lat_max_ns": "maximum total latency (fio lat)",
    "clat_mean_ns": "mean completion latency (fio clat)",
    "clat_stdev_ns": "standard deviation of completion latency (fio clat)",
    "clat_max_ns": "maximum completion latency (fio clat)",
    **{f"clat_{n}_ns": f"{p:g}th percentile of completion latency (fio clat)" for n, p in PERCENTILES},
    **{
        f"lat_{n}_ns": f"{p:g}th percentile of completion latency (fio clat; same as clat_{n}_ns)"
        for n, p in PERCENTILES
    },
}


class FioOutputError(ValueError):
    """fio printed something that is not the JSON we asked for."""


#: where fio's JSON can start: at the beginning of a line (a `{` inside a line is text, e.g. `job{1}: (g=0): ...`
#: in --output-format=json,normal)
_LINE_START = re.compile(r"^\{", re.MULTILINE)


def decode_json_at(text: str, start: int) -> tuple[Any, int]:
    """The JSON value at `start` and the offset after it. JSONDecodeError when it is not JSON; FioOutputError when
    it nests too deeply for Python's decoder (a hand-made file, never fio's)."""
    try:
        return json.JSONDecoder().raw_decode(text, start)
    except RecursionError as e:
        raise FioOutputError("not fio JSON (nested too deeply)") from e


def find_fio_json(text: str) -> tuple[dict[str, Any], int]:
    """The first fio JSON document and the offset after it: the first line starting with `{` that parses as JSON
    (fio's JSON starts at column 0), else, when none does, the first `{` anywhere."""
    for m in _LINE_START.finditer(text):
        try:
            doc, end = decode_json_at(text, m.start())
        except json.JSONDecodeError:
            continue
        break
    else:
        start = text.find("{")
        if start < 0:
            raise FioOutputError("no JSON object in fio output")
        try:
            doc, end = decode_json_at(text, start)
        except json.JSONDecodeError as e:
            raise FioOutputError(f"fio output is not valid JSON: {e}") from e
    if not isinstance(doc, dict) or not (doc.get("jobs") or doc.get("client_stats")):
        raise FioOutputError("fio JSON has no jobs")
    return doc, end


def load_fio_json(text: str) -> dict[str, Any]:
    """Parse fio's JSON output: skip what fio printed before the JSON (see find_fio_json) and ignore what follows
    the JSON document (fio messages such as "fio: file hash not empty on exit", or `--output-format=json,normal`)."""
    return find_fio_json(text)[0]


def job_entries(doc: dict[str, Any]) -> list[dict[str, Any]]:
    """The per-job results: `jobs` locally, `client_stats` from fio --client (minus the 'All clients' sum)."""
    if doc.get("jobs"):
        return list(doc["jobs"])
    entries = [j for j in doc.get("client_stats", []) if j.get("jobname") != "All clients"]
    return entries or list(doc.get("client_stats", []))


def _block(d: dict[str, Any], name: str) -> tuple[dict[str, Any], float]:
    """fio 3.x `clat_ns` (ns), else fio 2.x `clat` (µs); returns the block and its factor to ns."""
    if isinstance(d.get(f"{name}_ns"), dict):
        return d[f"{name}_ns"], 1.0
    if isinstance(d.get(name), dict):
        return d[name], 1000.0
    return {}, 1.0


def _percentile(block: dict[str, Any], pct: float) -> float | None:
    table = block.get("percentile") or {}
    for key, value in table.items():
        try:
            if abs(float(key) - pct) < 1e-9:
                return float(value)
        except ValueError:
            continue
    return None


def _count(d: dict[str, Any], block: dict[str, Any]) -> float:
    """How many I/Os a latency block covers: fio >= 3.17 says (N); before, total_ios or iops x runtime."""
    if "N" in block:
        return float(block["N"])
    if "total_ios" in d:
        return float(d["total_ios"])
    return float(d.get("iops", 0.0)) * float(d.get("runtime", 0)) / 1000.0


def _direction(d: dict[str, Any]) -> dict[str, Any]:
    """One direction of one job entry, in bytes and ns whatever the fio version."""
    # fio 2.x wrote io_bytes in KiB (no io_kbytes key); fio 3.x writes bytes and io_kbytes
    io_bytes = float(d.get("io_bytes", 0)) * (1 if "io_kbytes" in d else 1024)
    out: dict[str, Any] = {
        "iops": float(d.get("iops", 0.0)),
        "bw_bytes": float(d["bw_bytes"]) if "bw_bytes" in d else float(d.get("bw", 0)) * 1024,
        "io_bytes": io_bytes,
        "total_ios": float(d.get("total_ios", 0)),
        "bw_stdev_bytes": float(d.get("bw_dev", 0.0)) * 1024,
        "iops_stdev": float(d.get("iops_stddev", 0.0)),
        "runtime_ms": float(d.get("runtime", 0)),
    }
    for name in ("lat", "clat"):
        block, f = _block(d, name)
        n = _count(d, block)
        if not block or n <= 0:
            continue
        out[name] = {
            "n": n,
            "mean": float(block.get("mean", 0.0)) * f,
            "stdev": float(block.get("stddev", 0.0)) * f,
            "max": float(block.get("max", 0.0)) * f,
            "pct": {k: v * f for k, p in PERCENTILES if (v := _percentile(block, p)) is not None},
            "bins": {int(k): int(c) for k, c in (block.get("bins") or {}).items()},
        }
    return out


def bins_percentile(bins: dict[int, int], pct: float) -> float:
    """fio's own rule: the first bin (by latency) at which the cumulative count reaches pct % of all I/Os."""
    total = sum(bins.values())
    cum = 0
    for value in sorted(bins):
        cum += bins[value]
        if cum >= pct / 100.0 * total:
            return float(value)
    return float(max(bins)) if bins else 0.0


def _merge_latency(parts: Sequence[dict[str, Any]], prefix: str, out: dict[str, float]) -> bool:
    """Pool one latency kind (`lat` or `clat`) over parallel jobs into `out`; True when approximate."""
    blocks = [p for p in parts if p]
    n = sum(b["n"] for b in blocks)
    if not blocks or n <= 0:
        return False
    mean = sum(b["mean"] * b["n"] for b in blocks) / n
    second = sum(b["n"] * (b["stdev"] ** 2 + b["mean"] ** 2) for b in blocks) / n
    out[f"{prefix}_mean_ns"] = mean
    out[f"{prefix}_stdev_ns"] = math.sqrt(max(second - mean * mean, 0.0)) if len(blocks) > 1 else blocks[0]["stdev"]
    out[f"{prefix}_max_ns"] = max(b["max"] for b in blocks)
    if len(blocks) == 1:
        out.update({f"{prefix}_{k}_ns": v for k, v in blocks[0]["pct"].items()})
        if blocks[0]["bins"]:  # json+ with a percentile_list lacking one of ours: from the bins, as for several
            missing = [(k, p) for k, p in PERCENTILES if k not in blocks[0]["pct"]]
            out.update({f"{prefix}_{k}_ns": bins_percentile(blocks[0]["bins"], p) for k, p in missing})
        return False
    if all(b["bins"] for b in blocks):
        merged: dict[int, int] = {}
        for b in blocks:
            for value, count in b["bins"].items():
                merged[value] = merged.get(value, 0) + count
        out.update({f"{prefix}_{k}_ns": bins_percentile(merged, p) for k, p in PERCENTILES})
        return False
    for k, _ in PERCENTILES:
        have = [b for b in blocks if k in b["pct"]]
        if have:
            out[f"{prefix}_{k}_ns"] = sum(b["pct"][k] * b["n"] for b in have) / sum(b["n"] for b in have)
    return any(b["pct"] for b in blocks)


def _merge_direction(parts: Sequence[dict[str, Any]]) -> dict[str, float]:
    merged = {
        k: sum(p[k] for p in parts)
        for k in ("iops", "bw_bytes", "io_bytes", "total_ios", "bw_stdev_bytes", "iops_stdev")
    }
    _merge_latency([p.get("lat", {}) for p in parts], "lat", merged)
    approx = _merge_latency([p.get("clat", {}) for p in parts], "clat", merged)
    for k, _ in PERCENTILES:  # the key reports rank by: completion latency, as fio prints percentiles
        if f"clat_{k}_ns" in merged:
            merged[f"lat_{k}_ns"] = merged[f"clat_{k}_ns"]
    if "lat_mean_ns" not in merged and "clat_mean_ns" in merged:  # fio wrote no total latency
        merged["lat_mean_ns"] = merged["clat_mean_ns"]
    if approx:
        merged["lat_approx"] = 1.0
    return merged


def runtime_s(jobs: Sequence[dict[str, Any]]) -> float:
    """fio's runtime of a run: the longest direction runtime it printed (ms); job_runtime only when no direction
    ran (group_reporting sums job_runtime over the group's jobs); else the elapsed wall seconds of the jobs
    without an error."""
    runs = [float(j[d].get("runtime", 0)) for j in jobs for d in (*DIRECTIONS, "mixed") if isinstance(j.get(d), dict)]
    if any(runs):
        return max(runs) / 1000.0
    job_rt = [float(j["job_runtime"]) for j in jobs if j.get("job_runtime")]
    if job_rt:
        return max(job_rt) / 1000.0
    # a job that failed (error != 0) and ran nothing has no runtime: elapsed is the whole fio run's wall seconds
    return max((float(j.get("elapsed", 0)) for j in jobs if not j.get("error")), default=0.0)


#: fio's rw patterns that move data one way: with unified_rw_reporting their one "mixed" block is that direction
_ONE_WAY = {"read": "read", "randread": "read", "write": "write", "randwrite": "write", "trim": "trim",
            "randtrim": "trim"}  # fmt: skip


def _merged(jobs: Sequence[dict[str, Any]], block: str) -> dict[str, float] | None:
    """One direction block (or "mixed") pooled over the run's job entries; None where none did I/O."""
    parts = [_direction(j[block]) for j in jobs if isinstance(j.get(block), dict)]
    if not parts or not any(p["total_ios"] or p["io_bytes"] for p in parts):
        return None
    return _merge_direction(parts)


def one_way(rw: str) -> str:
    """The direction a one-way rw pattern moves data in (`randread:8` -> "read"), "" for any other pattern."""
    return _ONE_WAY.get(rw.split(":")[0], "")


def metrics_from_jobs(jobs: Sequence[dict[str, Any]], rw: str = "", verify: bool = False) -> dict[str, float]:
    """Flatten the job entries of one run (parallel jobs, or one group_reporting entry) into metric keys.

    With unified_rw_reporting (fio's "mixed" block in place of read/write/trim: `1` or `mixed`; `both` writes
    the three as well, and those are read) the mixed figures are the run's: a one-way pattern's (`rw`, or the
    jobs' own rw option) under its direction, any other as mixed.* keys in the totals, and
    fio.unified_rw_reporting says the split by direction is unknown.

    `verify`: the jobs' options enable verify, so a one-way writing pattern's reads are its verify pass, kept as
    verify.* keys out of the totals and the p99."""
    if not jobs:
        raise FioOutputError("fio JSON has no jobs")
    m: dict[str, float] = {}
    own = one_way(rw) if verify else ""
    for direction in DIRECTIONS:
        prefix = "verify" if own and own != "read" and direction == "read" else direction
        for key, value in (_merged(jobs, direction) or {}).items():
            m[f"{prefix}.{key}"] = value
    mixed = None if m else _merged(jobs, "mixed")
    if mixed is not None:
        rw = rw or str((jobs[0].get("job options") or {}).get("rw", ""))
        where = one_way(rw) or "mixed"
        m.update({f"{where}.{key}": value for key, value in mixed.items()})
        m["fio.unified_rw_reporting"] = 1.0
    ways = (*DIRECTIONS, "mixed")
    m["total.iops"] = sum(m.get(f"{d}.iops", 0.0) for d in ways)
    m["total.bw_bytes"] = sum(m.get(f"{d}.bw_bytes", 0.0) for d in ways)
    m["total.io_bytes"] = sum(m.get(f"{d}.io_bytes", 0.0) for d in ways)
    m["fio.runtime_s"] = runtime_s(jobs)
    elapsed = [float(j["elapsed"]) for j in jobs if "elapsed" in j]
    if elapsed:
        m["fio.elapsed_s"] = max(elapsed)
    m["fio.error"] = float(max(int(j.get("error", 0)) for j in jobs))
    m["fio.usr_cpu_pct"] = sum(float(j.get("usr_cpu", 0.0)) for j in jobs)
    m["fio.sys_cpu_pct"] = sum(float(j.get("sys_cpu", 0.0)) for j in jobs)
    m["fio.ctx"] = float(sum(int(j.get("ctx", 0)) for j in jobs))
    m["fio.jobs"] = float(len(jobs))
    return m


def metrics_from_fio(doc: dict[str, Any]) -> dict[str, float]:
    """Flatten fio's result into metric keys: all its job entries are taken as one run (see metrics_from_jobs)."""
    glob = doc.get("global options")
    rw = str(glob.get("rw", "")) if isinstance(glob, dict) else ""
    return metrics_from_jobs(job_entries(doc), rw)


def fio_version(doc: dict[str, Any]) -> str:
    return str(doc.get("fio version", ""))


def end_fsync_seconds(
    doc: dict[str, Any], numjobs: int, runtime_s: float, time_based: bool, io_log_last: dict[str, str] | None = None
) -> float | None:
    """Seconds each job spent, on average, in its final fsync (end_fsync / fsync_on_close) after its last I/O.

    fio counts that fsync in a job's `job_runtime` (ms; with group_reporting, the sum over the group's jobs) and
    reports nothing else about it. A time-based job's I/O ends at `runtime`, so the rest of its runtime is the
    fsync. A size-based job's I/O ends at the last entry of its IOPS log (`io_log_last`: {log name: last line},
    averaged over windows of IO_LOG_MSEC; half a window is taken off). None when the runtimes or logs are
    missing.
    """
    entries = job_entries(doc)
    runtimes = [float(e["job_runtime"]) for e in entries if isinstance(e.get("job_runtime"), (int, float))]
    if not entries or len(runtimes) != len(entries) or numjobs < 1:
        return None
    jobs = numjobs if len(entries) == 1 else len(entries)  # one group entry, or one entry per job
    total_ms = sum(runtimes)
    if time_based:
        io_ms = runtime_s * 1000.0 * jobs
    else:
        last = [line.split(",")[0].strip() for line in (io_log_last or {}).values()]
        if len(last) != jobs or not all(is_number(v) for v in last):
            return None
        io_ms = sum(float(v) + IO_LOG_MSEC / 2 for v in last)
    return round(max(0.0, total_ms - io_ms) / jobs / 1000.0, 3)


def is_number(text: str) -> bool:
    """Whether float() reads the text (fio writes numbers as text in io logs and as keys of its tables)."""
    try:
        float(text)
    except ValueError:
        return False
    return True
