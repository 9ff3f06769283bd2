"""Import foreign fio JSON results into a journal: one test per distinct job, one run per job result (the entries
of one group with the same options, which fio ran at the same time, are one run)."""

from __future__ import annotations

import codecs
import json
import math
import os
import re
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from tankbench import __version__
from tankbench.errors import UserError
from tankbench.fio.parse import (
    FioOutputError,
    decode_json_at,
    find_fio_json,
    fio_version,
    job_entries,
    metrics_from_jobs,
)
from tankbench.fio.shape import check_directions_match, check_shape, verifies
from tankbench.journal.db import Journal
from tankbench.model import Fingerprint, Run, Target, Test, short_hash
from tankbench.units import parse_duration, parse_size

# Options that become test axes or the target; everything else stays a fio option of the test.
_AXIS_OPTIONS = (
    "name",
    "filename",
    "directory",
    "rw",
    "readwrite",
    "bs",
    "blocksize",
    "iodepth",
    "numjobs",
    "direct",
    "buffered",
    "sync",
    "fsync",
    "fdatasync",
    "runtime",
    "ramp_time",
    "size",
    "rwmixread",
)


@dataclass(frozen=True)
class ImportedJob:
    """One run of a foreign fio JSON file: the job entries fio ran in parallel (numjobs, clients) as one test
    and its aggregated metrics; `hosts` are the fio --client servers it ran on (empty for a local run)."""

    test: Test
    metrics: Mapping[str, float]
    error: int
    fio_json: str
    source: str
    timestamp: float
    fio_version: str = ""
    hosts: tuple[str, ...] = ()
    concurrent: int = 1  # distinct job names summed (jobs of one group with the same options ran at once)


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
        "rw": rw,
        "bs": o.get("bs", o.get("blocksize", "4k")),
        "iodepth": int(o.get("iodepth", "1")),
        "numjobs": int(o.get("numjobs", "1")),
        "io": "direct" if o.get("direct", "0") == "1" else "buffered",
        "sync_mode": _sync_mode(o),
    }
    if "rwmixread" in o and "rw" in rw[-2:]:
        params["rwmixread"] = int(o["rwmixread"])
    fio = {k: v for k, v in o.items() if k not in _AXIS_OPTIONS}
    runtime = parse_duration(o["runtime"]) if "runtime" in o else 0.0
    ramp = parse_duration(o["ramp_time"]) if "ramp_time" in o else 0.0
    return Test(0, jobname or "imported", _target(o), params, fio, runtime, ramp)


_BOMS = ((codecs.BOM_UTF8, "utf-8-sig"), (codecs.BOM_UTF16_LE, "utf-16"), (codecs.BOM_UTF16_BE, "utf-16"))
#: fio --client adds these to each client's options: they name the host, not the test
_CLIENT_KEYS = ("hostname", "port")


def decode_fio_bytes(data: bytes, path: str) -> str:
    """UTF-8, or UTF-8/UTF-16 with a byte order mark (PowerShell's `>` writes UTF-16 LE with a BOM)."""
    for bom, codec in _BOMS:
        if data.startswith(bom):
            try:
                return data.decode(codec)
            except UnicodeDecodeError as e:
                raise UserError(
                    f"{path}: not valid {codec.upper()} text at byte {e.start}",
                    "pass the fio JSON file as fio wrote it",
                ) from e
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as e:
        raise UserError(
            f"{path}: not UTF-8 text (byte {data[e.start]:#04x} at offset {e.start})",
            "pass fio JSON files written by --output-format=json (UTF-8, or UTF-16 with a BOM)",
        ) from e


def _host_of(job: Mapping[str, Any]) -> str:
    if not job.get("hostname"):
        return ""
    return f"{job['hostname']}:{job['port']}" if job.get("port") else str(job["hostname"])


def _global_options(doc: Mapping[str, Any], job: Mapping[str, Any]) -> dict[str, Any]:
    """fio's global options for this entry: a dict, or (fio >= 3.4x with several servers) one per client."""
    glob = doc.get("global options") or {}
    if isinstance(glob, list):
        mine = [g for g in glob if isinstance(g, dict) and _host_of(g) == _host_of(job)]
        glob = mine[0] if mine else (glob[0] if glob and isinstance(glob[0], dict) else {})
    return {k: v for k, v in dict(glob).items() if k not in _CLIENT_KEYS}


def _group_key(opts: Mapping[str, Any], job: Mapping[str, Any]) -> str:
    """Entries of one run: same group and options (numjobs clones, the same job on each client, and jobs of other
    names with the same options: fio runs a group's jobs at the same time, so they are not repeats)."""
    return json.dumps([job.get("groupid", 0), sorted(opts.items())], default=str)


#: C0 controls, DEL and C1 controls: a job name or option holding them could rewrite a terminal's rows
_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f]")
_ESCAPES = {"\n": "\\n", "\r": "\\r", "\t": "\\t"}


def escaped(text: str) -> str:
    """The text with each control character as a backslash escape (`\\n`, `\\x1b`): no later text output
    (show, results, advise) can then be spoofed by a job name."""
    return _CONTROL.sub(lambda m: _ESCAPES.get(m[0], f"\\x{ord(m[0]):02x}"), text)


def _run_name(jobs: Sequence[Mapping[str, Any]]) -> tuple[str, int]:
    """The test name of a run's entries and how many distinct job names they have: `a1 + a2 + a3`, or the first
    name and "+ N more" when that is long."""
    names = list(dict.fromkeys(escaped(str(j.get("jobname", ""))) for j in jobs))
    joined = " + ".join(names)
    if len(names) > 1 and len(joined) > 60:
        joined = f"{names[0]} + {len(names) - 1} more"
    return joined, len(names)


def _unknown_options(job: Mapping[str, Any]) -> dict[str, str]:
    """fio < 2.2 printed no options: say what the JSON proves (the directions that did I/O), not fio's defaults."""
    did = [d for d in ("read", "write", "trim") if isinstance(job.get(d), dict) and job[d].get("io_bytes")]
    rw = did[0] if len(did) == 1 else "rw"
    # without options, the job's name is all that tells its tests apart
    return {
        "rw": rw,
        "bs": "unknown",
        "options": "unknown (fio wrote no options in its JSON)",
        "jobname": escaped(str(job.get("jobname", ""))),
    }


def _finite(value: Any) -> Any:
    """The JSON value with NaN and infinities (which Python's json reads, and SQLite's JSON refuses) as null."""
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {k: _finite(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_finite(v) for v in value]
    return value


def _stored_json(one: Mapping[str, Any], path: str, hint: str) -> str:
    """The run's fio JSON as the journal stores it (strict JSON: NaN and infinities as null)."""
    try:
        return json.dumps(_finite(one))
    except RecursionError as e:  # a hand-made file nested deeper than Python recurses (fio's JSON never is)
        raise UserError(f"{path}: not fio JSON (nested too deeply)", hint) from e


def fio_documents(text: str) -> list[dict[str, Any]]:
    """Every fio JSON document in one file, in order: fio run several times with `>>` into one file appends one
    document per run (with fio's messages or --output-format=json,normal text between them). A later document
    starts at a line start, or right after the previous one; a `{` inside a line of text (a job named `job{1}`)
    is not one."""
    doc, pos = find_fio_json(text)  # the first: FioOutputError when there is none, or it is cut short
    docs = [doc]
    while (start := _next_start(text, pos)) >= 0:
        try:
            doc, pos = decode_json_at(text, start)
        except json.JSONDecodeError as e:
            raise FioOutputError(f"fio JSON document {len(docs) + 1} is not valid JSON: {e}") from e
        if not isinstance(doc, dict) or not (doc.get("jobs") or doc.get("client_stats")):
            raise FioOutputError(f"fio JSON document {len(docs) + 1} (line {_line(text, start)}) has no jobs")
        docs.append(doc)
    return docs


_DOC_START = re.compile(r"^\{", re.MULTILINE)


def _next_start(text: str, pos: int) -> int:
    """Where the next document after offset `pos` starts, or -1: right after the previous one (`}{`), else the
    next line that starts with `{`."""
    rest = text[pos:].lstrip()
    if rest.startswith("{"):
        return len(text) - len(rest)
    m = _DOC_START.search(text, pos)
    return m.start() if m else -1


def _line(text: str, pos: int) -> int:
    """The 1-based line of a character offset (for messages about a file's later documents)."""
    return text.count("\n", 0, pos) + 1


_TERSE_RE = re.compile(r"^[2-5];fio-[^;]*;", re.MULTILINE)


def _text_format(text: str) -> str:
    """Which of fio's text formats a file without JSON is in ("terse", "normal"), or "" if it is neither."""
    if _TERSE_RE.search(text):
        return "terse"
    if "Run status group" in text or re.search(r"^\S+: \(g=\d+\): rw=", text, re.MULTILINE):
        return "normal"
    return ""


def read_fio_file(path: str) -> list[ImportedJob]:
    """Parse one fio JSON file (local `jobs` or `--client` `client_stats`, one or more documents) into runs, one
    per distinct job of each document: parallel entries of a job (numjobs without group_reporting, several
    clients) aggregate into one run. UserError when the file is not fio JSON."""
    hint = "pass fio JSON files written by --output-format=json"
    try:
        with open(path, "rb") as f:
            text = decode_fio_bytes(f.read(), path)
        docs = fio_documents(text)
    except OSError as e:
        raise UserError(f"cannot read {path}: {e.strerror}", hint) from e
    except FioOutputError as e:
        if other := _text_format(text):
            raise UserError(
                f"{path}: fio's {other} output, not JSON",
                "run fio again with --output-format=json (or json+): the text formats lack the options and units",
            ) from e
        raise UserError(f"{path}: {e}", hint) from e
    out: list[ImportedJob] = []
    for i, doc in enumerate(docs):
        where = f"{path} (document {i + 1} of {len(docs)})" if len(docs) > 1 else path
        out += _read_document(doc, where, os.path.basename(path), hint)
    return out


def _read_document(doc: dict[str, Any], path: str, source: str, hint: str) -> list[ImportedJob]:
    """The runs of one fio JSON document (one fio invocation)."""
    check_shape(doc, path, hint)
    groups: dict[str, tuple[dict[str, Any], list[dict[str, Any]]]] = {}
    for job in job_entries(doc):
        opts = {**_global_options(doc, job), **(job.get("job options") or {})}
        if "global options" not in doc and "job options" not in job:
            opts = _unknown_options(job)
        opts = {escaped(k): escaped(v) if isinstance(v, str) else v for k, v in opts.items()}
        check_directions_match(opts, job, path)
        groups.setdefault(_group_key(opts, job), (opts, []))[1].append(job)
    out = []
    for opts, jobs in groups.values():
        hosts = tuple(sorted({h for j in jobs if (h := _host_of(j))}))
        one = {"fio version": doc.get("fio version", ""), "jobs": jobs}
        try:
            metrics = dict(metrics_from_jobs(jobs, str(opts.get("rw", "")), verifies(opts)))
            name, concurrent = _run_name(jobs)
            test = job_to_test(opts, name)
            for host in hosts if len(hosts) > 1 else ():  # each client's own share, beside the run's sum
                mine = metrics_from_jobs(
                    [j for j in jobs if _host_of(j) == host], str(opts.get("rw", "")), verifies(opts)
                )
                metrics.update({f"client[{host}].{k}": mine[k] for k in ("total.iops", "total.bw_bytes")})
        except (TypeError, ValueError, KeyError, AttributeError, OverflowError) as e:
            raise UserError(f"{path}: job {jobs[0].get('jobname', '')!r}: unexpected fio JSON ({e})", hint) from e
        out.append(
            ImportedJob(
                test,
                {k: v for k, v in metrics.items() if math.isfinite(v)},  # fio's "nan": not measured, not a number
                max(int(j.get("error", 0)) for j in jobs),
                _stored_json(one, path, hint),
                source,
                float(doc.get("timestamp", 0) or 0),
                fio_version(doc),
                hosts,
                concurrent,
            )
        )
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


def file_fingerprint(jobs: Sequence[ImportedJob], facts: Mapping[str, Any]) -> Fingerprint:
    """The system one imported file ran on, as far as the file and the user's --fingerprint facts tell."""
    versions = sorted({j.fio_version for j in jobs})
    hosts = sorted({h for j in jobs for h in j.hosts})
    data: dict[str, Any] = {"fio_version": versions[0] if len(versions) == 1 else versions, "source": "import"}
    data["tankbench_version"] = __version__  # no agent ran: the runs came from fio's own output
    if hosts:
        data["fio_clients"] = hosts
    return Fingerprint({**data, **facts})


def import_files(
    journal: Journal, paths: Sequence[str], facts: Mapping[str, Any], skipped: dict[str, int] | None = None
) -> list[tuple[Test, int]]:
    """Add tests and runs for every job of every file, each file with its own fingerprint; return
    (test, run row id) pairs. A job result the journal already holds (the same stored fio JSON in a run of its
    test), or one this call already took, is not added again: `skipped` counts those per file."""
    per_file = [(p, read_fio_file(p)) for p in paths]
    with journal.batch():  # all files or none: a kill -9 part-way must not leave half an import to add again
        new, dropped = _new_jobs(journal, per_file)
        if skipped is not None:
            skipped.update(dropped)
        if not any(js for _, js in new):
            return []
        return _import(journal, new, paths, facts)


def _new_jobs(
    journal: Journal, per_file: list[tuple[str, list[ImportedJob]]]
) -> tuple[list[tuple[str, list[ImportedJob]]], dict[str, int]]:
    """The job results not yet in the journal nor earlier in this call (the same file passed twice, an import run
    again, a document appended twice): one fio result must be one run, not repeats of a single measurement."""
    seen: dict[str, set[str]] = {}
    kept: list[tuple[str, list[ImportedJob]]] = []
    skipped: dict[str, int] = {}
    for path, jobs in per_file:
        mine = []
        for j in jobs:
            if j.test.id not in seen:
                seen[j.test.id] = {r.fio_json for r in journal.runs(j.test.id)}
            if j.fio_json in seen[j.test.id]:
                skipped[path] = skipped.get(path, 0) + 1
                continue
            seen[j.test.id].add(j.fio_json)
            mine.append(j)
        kept.append((path, mine))
    return kept, skipped


def _import(
    journal: Journal, per_file: list[tuple[str, list[ImportedJob]]], paths: Sequence[str], facts: Mapping[str, Any]
) -> list[tuple[Test, int]]:
    jobs = [j for _, js in per_file for j in js]
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
    done = []
    for _, file_jobs in per_file:
        if not file_jobs:
            continue
        fp_id = journal.add_fingerprint(file_fingerprint(file_jobs, facts))
        done += [(numbered[j.test.id], _add_run(journal, numbered[j.test.id], j, fp_id)) for j in file_jobs]
    return done


def _add_run(journal: Journal, test: Test, job: ImportedJob, fp_id: str) -> int:
    run_no = 1 + sum(1 for r in journal.runs(test.id, with_samples=False) if not r.warmup)
    host = ",".join(job.hosts) or "imported"
    row = journal.begin_run(test.id, run_no, False, 1, test.expected_s, host)
    when = time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime(job.timestamp)) if job.timestamp else "unknown time"
    parallel = int(job.metrics.get("fio.jobs", 1))
    merged = f"; {parallel} parallel job entries summed into this run" if parallel > 1 else ""
    if job.concurrent > 1:
        merged += f" ({job.concurrent} concurrent job entries of one group with the same options were summed)"
    journal.finish_run(
        row,
        Run(
            test_id=test.id,
            run_no=run_no,
            warmup=False,
            attempt=1,
            status="done" if job.error == 0 else "failed",
            started=job.timestamp or time.time(),
            ended=None,
            host=host,
            fingerprint_id=fp_id,
            expected_s=test.expected_s,
            wall_s=None,
            drain_s=None,
            metrics=job.metrics,
            fio_json=job.fio_json,
            exit_status=job.error,
            note=f"imported from {job.source} ({job.fio_version}, fio timestamp {when} UTC"
            f"{merged}) by tankbench import: wall time, samplers and layout checks unknown",
        ),
    )
    return row
