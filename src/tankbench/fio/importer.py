"""Import foreign fio JSON results into a journal: one test per distinct job, one run per job result."""

from __future__ import annotations

import json
import os
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from tankbench.errors import UserError
from tankbench.fio.parse import FioOutputError, fio_version, job_entries, load_fio_json, metrics_from_fio
from tankbench.journal.db import Journal
from tankbench.model import Fingerprint, Run, Target, Test, short_hash
from tankbench.units import parse_duration, parse_size

# Options that become test axes or the target; everything else stays a fio option of the test.
_AXIS_OPTIONS = ("name", "filename", "directory", "rw", "readwrite", "bs", "blocksize", "iodepth", "numjobs",
                 "direct", "buffered", "sync", "fsync", "fdatasync", "runtime", "ramp_time", "size", "rwmixread")


@dataclass(frozen=True)
class ImportedJob:
    """One job result of a foreign fio JSON file, as a test and its measured metrics."""

    test: Test
    metrics: Mapping[str, float]
    error: int
    fio_json: str
    source: str
    timestamp: float


def _sync_mode(o: Mapping[str, str]) -> str:
    if o.get("sync", "0") not in ("0", "none", ""):
        return "sync"
    if o.get("fdatasync", "0") not in ("0", ""):
        return "fdatasync"
    if o.get("fsync", "0") not in ("0", ""):
        return "fsync"
    return "async"


def _target(o: Mapping[str, str]) -> Target:
    path = o.get("filename") or o.get("directory") or "(unknown)"
    kind = "zvol" if path.startswith("/dev/zvol/") else "raw" if path.startswith("/dev/") else "file"
    try:
        size = parse_size(o.get("size") or "0")
    except ValueError:  # "50%" of a device: unknown here
        size = 0
    return Target(name=path, kind=kind, path=path, size=size)


def job_to_test(options: Mapping[str, str], jobname: str) -> Test:
    """Turn fio's merged global + job options into a Test (axes from the options, the rest as fio options)."""
    o = {k: str(v) for k, v in options.items()}
    rw = o.get("rw", o.get("readwrite", "read"))
    params: dict[str, Any] = {
        "rw": rw, "bs": o.get("bs", o.get("blocksize", "4k")), "iodepth": int(o.get("iodepth", "1")),
        "numjobs": int(o.get("numjobs", "1")), "io": "direct" if o.get("direct", "0") == "1" else "buffered",
        "sync_mode": _sync_mode(o),
    }
    if "rwmixread" in o and "rw" in rw[-2:]:
        params["rwmixread"] = int(o["rwmixread"])
    fio = {k: v for k, v in o.items() if k not in _AXIS_OPTIONS}
    runtime = parse_duration(o["runtime"]) if "runtime" in o else 0.0
    ramp = parse_duration(o["ramp_time"]) if "ramp_time" in o else 0.0
    return Test(0, jobname or "imported", _target(o), params, fio, runtime, ramp)


def read_fio_file(path: str) -> list[ImportedJob]:
    """Parse one fio JSON file (local `jobs` or `--client` `client_stats`); UserError when it is not one."""
    try:
        with open(path, encoding="utf-8") as f:
            text = f.read()
        doc = load_fio_json(text)
    except OSError as e:
        raise UserError(f"cannot read {path}: {e.strerror}", "pass fio JSON files written by --output-format=json") from e
    except FioOutputError as e:
        raise UserError(f"{path}: {e}", "pass fio JSON files written by --output-format=json") from e
    glob = doc.get("global options") or {}
    out = []
    for job in job_entries(doc):
        opts = {**glob, **(job.get("job options") or {})}
        one = {"fio version": doc.get("fio version", ""), "jobs": [job]}
        out.append(ImportedJob(job_to_test(opts, str(job.get("jobname", ""))), metrics_from_fio(one),
                               int(job.get("error", 0)), json.dumps(one), os.path.basename(path),
                               float(doc.get("timestamp", 0) or 0)))
    return out


def parse_facts(items: Sequence[str]) -> dict[str, Any]:
    """`--fingerprint accelerator=tcg` items -> a dict (what the importer cannot know by itself)."""
    facts: dict[str, Any] = {}
    for item in items:
        k, sep, v = item.partition("=")
        if not sep or not k.strip():
            raise UserError(f"bad --fingerprint {item!r}", "write KEY=VALUE, e.g. --fingerprint accelerator=tcg")
        facts[k.strip()] = v.strip()
    return facts


def import_files(journal: Journal, paths: Sequence[str], facts: Mapping[str, Any]) -> list[tuple[Test, int]]:
    """Add tests and runs for every job of every file; return (test, run row id) pairs."""
    jobs = [j for p in paths for j in read_fio_file(p)]
    versions = sorted({str(json.loads(j.fio_json).get("fio version", "")) for j in jobs})
    fp = Fingerprint({"fio_version": ",".join(versions), "source": "import", **facts})
    fp_id = journal.add_fingerprint(fp)
    campaign = "import-" + short_hash([j.source for j in jobs] + [time.time()], 8)
    journal.add_campaign(campaign, "imported fio results", " ".join(paths), "")
    existing = {t.id: t.number for t in journal.tests()}
    numbered: dict[str, Test] = {}
    n = max(existing.values(), default=0)
    for j in jobs:
        t = j.test
        if t.id not in numbered:
            if t.id not in existing:
                n += 1
            numbered[t.id] = Test(existing.get(t.id, n), t.name, t.target, t.params, t.fio_options, t.runtime, t.ramp)
    journal.add_tests(campaign, [numbered[k] for k in numbered if k not in existing], {})
    return [(numbered[j.test.id], _add_run(journal, numbered[j.test.id], j, fp_id)) for j in jobs]


def _add_run(journal: Journal, test: Test, job: ImportedJob, fp_id: str) -> int:
    run_no = 1 + sum(1 for r in journal.runs(test.id, with_samples=False) if not r.warmup)
    row = journal.begin_run(test.id, run_no, False, 1, test.expected_s, "imported")
    when = time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime(job.timestamp)) if job.timestamp else "unknown time"
    journal.finish_run(row, Run(
        test_id=test.id, run_no=run_no, warmup=False, attempt=1, status="done" if job.error == 0 else "failed",
        started=job.timestamp or time.time(), ended=None, host="imported", fingerprint_id=fp_id,
        expected_s=test.expected_s, wall_s=None, drain_s=None, metrics=job.metrics, fio_json=job.fio_json,
        exit_status=job.error, note=f"imported from {job.source} ({fio_version(json.loads(job.fio_json))}, fio "
        f"timestamp {when} UTC) by tankbench import: wall time, samplers and layout checks unknown"))
    return row
