"""The shape checks of `tankbench import`: refuse, naming the key, fio JSON whose parts have the wrong type or an
impossible value (a hand-edited or foreign file), and entries whose directions contradict their options."""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Mapping
from typing import Any

from tankbench.errors import UserError
from tankbench.fio.parse import DIRECTIONS, is_number, one_way


def verifies(opts: Mapping[str, Any]) -> bool:
    """Whether fio's options make a job verify what it wrote (its read pass shows as reads)."""
    return str(opts.get("verify", "0")) not in ("", "0", "none") or str(opts.get("verify_only", "0")) not in ("", "0")


def check_shape(doc: Mapping[str, Any], path: str, hint: str) -> None:
    """Refuse, naming the key, a JSON document whose parts have the wrong type for fio's output (a hand-edited or
    foreign file): the rest of the importer can then read it without guarding every access."""

    def bad(key: str, value: object, want: str) -> UserError:
        shown = json.dumps(value, default=str)
        shown = shown if len(shown) <= 60 else shown[:57] + "..."
        return UserError(f"{path}: {key} = {shown}: {want} in fio's JSON", hint)

    ts = doc.get("timestamp", 0)
    if isinstance(ts, bool) or not isinstance(ts, (int, float)) or not 0 <= ts < 1e11:
        raise bad("timestamp", ts, "must be seconds since 1970")
    for name in ("jobs", "client_stats"):
        entries = doc.get(name, [])
        if not isinstance(entries, list):
            raise bad(name, entries, "must be a list of job objects")
        for i, job in enumerate(entries):
            if not isinstance(job, dict):
                raise bad(f"{name}[{i}]", job, "must be a job object")
            opts = job.get("job options", {})
            if not isinstance(opts, dict):
                raise bad(f"{name}[{i}].job options", opts, "must be an object of option names and values")
            _check_options(opts, f"{name}[{i}].job options", bad)
            if "jobname" in job and not isinstance(job["jobname"], str):
                raise bad(f"{name}[{i}].jobname", job["jobname"], "must be a string")
            _check_directions(job, f"{name}[{i}]", bad)
            err = job.get("error", 0)
            if isinstance(err, bool) or not isinstance(err, int) or not 0 <= err < 1 << 31:
                raise bad(f"{name}[{i}].error", err, "must be an errno (a whole number)")
    glob = doc.get("global options", {})
    if not (isinstance(glob, dict) or (isinstance(glob, list) and all(isinstance(g, dict) for g in glob))):
        raise bad("global options", glob, "must be an object (or, from fio --client, a list of them)")
    for i, g in enumerate(glob if isinstance(glob, list) else [glob]):
        _check_options(g, f"global options[{i}]" if isinstance(glob, list) else "global options", bad)


Bad = Callable[[str, object, str], UserError]
#: options the importer reads as whole numbers of at least 1
_POSITIVE_OPTIONS = ("numjobs", "iodepth")


def _check_options(opts: Mapping[str, Any], where: str, bad: Bad) -> None:
    """Option values are what fio writes (text, or a number): not objects or lists, which would be stored as a
    Python repr; numjobs and iodepth are whole numbers of at least 1."""
    for k, v in opts.items():
        if v is not None and not isinstance(v, str | int | float | bool):
            raise bad(f"{where}.{k}", v, "must be a text or a number")
        if k in _POSITIVE_OPTIONS and not (
            (isinstance(v, int) and not isinstance(v, bool) and v >= 1)
            or (isinstance(v, str) and v.strip().isdigit() and int(v) >= 1)
        ):
            raise bad(f"{where}.{k}", v, "must be a whole number of at least 1")


#: a direction's figures that cannot be negative or infinite (NaN is fio's "not measured" and is dropped later)
_AMOUNTS = ("iops", "bw", "bw_bytes", "io_bytes", "io_kbytes", "total_ios", "runtime")
_LATENCY_VALUES = ("mean", "max")


def _check_value(key: str, v: object, bad: Bad) -> None:
    x = float(v) if isinstance(v, str) and is_number(v) else v
    if isinstance(x, int | float) and not isinstance(x, bool) and (x < 0 or x == math.inf):
        raise bad(key, v, "must be a non-negative finite number")


#: a job's per-direction blocks and, in each, the latency blocks with their tables (fio 2.x µs and 3.x ns names)
_DIRECTION_KEYS = ("read", "write", "trim", "sync", "mixed")
_LATENCY_KEYS = ("lat", "clat", "slat", "lat_ns", "clat_ns", "slat_ns")


def _check_directions(job: Mapping[str, Any], where: str, bad: Bad) -> None:
    for d in _DIRECTION_KEYS:
        block = job.get(d)
        if block is None:
            continue
        if not isinstance(block, dict):
            raise bad(f"{where}.{d}", block, "must be an object of that direction's results")
        for k in _AMOUNTS:
            _check_value(f"{where}.{d}.{k}", block.get(k), bad)
        for name in _LATENCY_KEYS:
            lat = block.get(name)
            if lat is not None and not isinstance(lat, dict):
                raise bad(f"{where}.{d}.{name}", lat, "must be a latency object")
            for k in _LATENCY_VALUES:
                _check_value(f"{where}.{d}.{name}.{k}", (lat or {}).get(k), bad)
            for table in ("percentile", "bins"):
                _check_table((lat or {}).get(table), f"{where}.{d}.{name}.{table}", bad)


def _check_table(value: object, where: str, bad: Bad) -> None:
    """A latency block's percentile table (latencies) or json+ histogram (I/O counts per latency bin)."""
    if value is None:
        return
    if not isinstance(value, dict):
        raise bad(where, value, "must be an object")
    for k, v in value.items():  # the report reads these tables again from the stored JSON
        if isinstance(v, bool) or not isinstance(v, int | float) or not is_number(k):
            raise bad(f"{where}.{k}", v, "must be a number keyed by a number")
        if where.endswith(".bins") and (not isinstance(v, int) or v < 0):
            raise bad(f"{where}.{k}", v, "must be a count of I/Os (a whole number of at least 0)")
        _check_value(f"{where}.{k}", v, bad)


def check_directions_match(opts: Mapping[str, Any], job: Mapping[str, Any], path: str) -> None:
    """Refuse an entry that did I/O in a direction its one-way rw cannot produce (and no verify pass explains):
    group_reporting folds a group's jobs into one entry with the first job's name and the last job's options, so
    its figures belong to no one option set."""
    rw = str(opts.get("rw", opts.get("readwrite", "")))
    own = one_way(rw)
    if not own:
        return
    allowed = {own, "read"} if verifies(opts) else {own}
    for d in DIRECTIONS:
        block = job.get(d)
        if d in allowed or not isinstance(block, dict) or not (block.get("total_ios") or block.get("io_bytes")):
            continue
        raise UserError(
            f"{path}: job {job.get('jobname', '')!r}: fio reports {d} I/O, which its option rw={rw} cannot do "
            "(fio's group_reporting gives one entry for all the jobs of a group, with the last job's options)",
            "run fio without group_reporting, or with one kind of job per group (stonewall or new_group between them)",
        )
