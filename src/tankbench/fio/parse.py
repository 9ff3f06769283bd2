"""fio JSON (local `jobs` or client/server `client_stats`) -> a flat metrics dict.

Metric keys (all numbers; bandwidth in bytes/s, latency in ns):
  {read,write,trim}.{iops, bw_bytes, io_bytes, total_ios, lat_mean_ns, lat_p50_ns, lat_p99_ns, lat_p999_ns,
                     lat_max_ns, lat_stdev_ns, bw_stdev_bytes, iops_stdev}
  total.{iops, bw_bytes, io_bytes}
  fio.{runtime_s, elapsed_s, error, usr_cpu_pct, sys_cpu_pct, ctx}
Latency is completion latency (clat) percentiles, as fio prints them by default; lat_mean_ns is total latency.
"""

from __future__ import annotations

import json
from typing import Any

DIRECTIONS = ("read", "write", "trim")


class FioOutputError(ValueError):
    """fio printed something that is not the JSON we asked for."""


def load_fio_json(text: str) -> dict[str, Any]:
    """Parse fio's JSON output, tolerating the non-JSON lines fio sometimes prints before it."""
    start = text.find("{")
    if start < 0:
        raise FioOutputError("no JSON object in fio output")
    try:
        doc = json.loads(text[start:])
    except json.JSONDecodeError as e:
        raise FioOutputError(f"fio output is not valid JSON: {e}") from e
    if not isinstance(doc, dict) or not (doc.get("jobs") or doc.get("client_stats")):
        raise FioOutputError("fio JSON has no jobs")
    return doc


def job_entries(doc: dict[str, Any]) -> list[dict[str, Any]]:
    """The per-job results: `jobs` locally, `client_stats` from fio --client (minus the 'All clients' sum)."""
    if doc.get("jobs"):
        return list(doc["jobs"])
    entries = [j for j in doc.get("client_stats", []) if j.get("jobname") != "All clients"]
    return entries or list(doc.get("client_stats", []))


def _percentile(clat: dict[str, Any], pct: float) -> float | None:
    table = clat.get("percentile") or {}
    for key, value in table.items():
        if abs(float(key) - pct) < 1e-9:
            return float(value)
    return None


def _direction(d: dict[str, Any]) -> dict[str, float]:
    out: dict[str, float] = {
        "iops": float(d.get("iops", 0.0)),
        "bw_bytes": float(d.get("bw_bytes", d.get("bw", 0) * 1024)),
        "io_bytes": float(d.get("io_bytes", d.get("io_kbytes", 0) * 1024)),
        "total_ios": float(d.get("total_ios", 0)),
        "bw_stdev_bytes": float(d.get("bw_dev", 0.0)) * 1024,
        "iops_stdev": float(d.get("iops_stddev", 0.0)),
    }
    lat = d.get("lat_ns") or {}
    clat = d.get("clat_ns") or {}
    if lat.get("N") or clat.get("N"):
        out["lat_mean_ns"] = float(lat.get("mean", clat.get("mean", 0.0)))
        out["lat_max_ns"] = float(lat.get("max", clat.get("max", 0.0)))
        out["lat_stdev_ns"] = float(lat.get("stddev", clat.get("stddev", 0.0)))
        for name, pct in (("lat_p50_ns", 50.0), ("lat_p99_ns", 99.0), ("lat_p999_ns", 99.9)):
            v = _percentile(clat, pct)
            if v is not None:
                out[name] = v
    return out


def metrics_from_fio(doc: dict[str, Any]) -> dict[str, float]:
    """Flatten fio's result into metric keys (summing jobs when group_reporting was off)."""
    jobs = job_entries(doc)
    if not jobs:
        raise FioOutputError("fio JSON has no jobs")
    m: dict[str, float] = {}
    for direction in DIRECTIONS:
        parts = [_direction(j[direction]) for j in jobs if isinstance(j.get(direction), dict)]
        if not parts or not any(p["total_ios"] or p["io_bytes"] for p in parts):
            continue
        merged: dict[str, float] = {}
        for key in ("iops", "bw_bytes", "io_bytes", "total_ios", "bw_stdev_bytes", "iops_stdev"):
            merged[key] = sum(p.get(key, 0.0) for p in parts)
        for key in ("lat_mean_ns", "lat_p50_ns", "lat_p99_ns", "lat_p999_ns", "lat_stdev_ns"):
            vals = [p[key] for p in parts if key in p]
            if vals:
                merged[key] = max(vals) if key != "lat_mean_ns" else sum(vals) / len(vals)
        maxes = [p["lat_max_ns"] for p in parts if "lat_max_ns" in p]
        if maxes:
            merged["lat_max_ns"] = max(maxes)
        for key, value in merged.items():
            m[f"{direction}.{key}"] = value
    m["total.iops"] = sum(m.get(f"{d}.iops", 0.0) for d in DIRECTIONS)
    m["total.bw_bytes"] = sum(m.get(f"{d}.bw_bytes", 0.0) for d in DIRECTIONS)
    m["total.io_bytes"] = sum(m.get(f"{d}.io_bytes", 0.0) for d in DIRECTIONS)
    m["fio.runtime_s"] = max(float(j.get("job_runtime", 0)) for j in jobs) / 1000.0
    elapsed = [float(j["elapsed"]) for j in jobs if "elapsed" in j]
    if elapsed:
        m["fio.elapsed_s"] = max(elapsed)
    m["fio.error"] = float(max(int(j.get("error", 0)) for j in jobs))
    m["fio.usr_cpu_pct"] = sum(float(j.get("usr_cpu", 0.0)) for j in jobs)
    m["fio.sys_cpu_pct"] = sum(float(j.get("sys_cpu", 0.0)) for j in jobs)
    m["fio.ctx"] = float(sum(int(j.get("ctx", 0)) for j in jobs))
    return m


def fio_version(doc: dict[str, Any]) -> str:
    return str(doc.get("fio version", ""))
