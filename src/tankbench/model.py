"""Frozen values that cross module boundaries: Target, Test, Run, Fingerprint."""

from __future__ import annotations

import functools
import hashlib
import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

RUN_STATUSES = ("running", "done", "failed", "timeout", "crashed", "interrupted")
#: `workload` values that copy a random-filled source with a command instead of running an fio job
COPY_WORKLOADS = ("cp", "rsync", "dd")
#: `workload = "fill"`: the pool-full experiment of a vm-disk target (seed 003, guestconf/fill.py)
FILL = "fill"
IO_MODES = ("buffered", "direct")
SYNC_MODES = ("async", "sync", "fsync", "fdatasync")
#: the axes that make an fio job what it is (the same job on any target); the campaign's fio axes add the
#: `workload` and the buffer options (campaign/vocab.py), the analysis compares tests by them
FIO_JOB_AXES = ("rw", "bs", "iodepth", "numjobs", "size", "io", "sync_mode", "rwmixread", "ioengine")


def canonical_json(value: Any) -> str:
    """Stable JSON text: sorted keys, no whitespace; the input of every id hash."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"), default=str)


def short_hash(value: Any, length: int = 12) -> str:
    """Hex digest prefix of the canonical JSON of value."""
    return hashlib.sha256(canonical_json(value).encode()).hexdigest()[:length]


def frozen_map(d: Mapping[str, Any] | None = None) -> Mapping[str, Any]:
    """A read-only mapping, so frozen dataclasses stay frozen all the way down."""
    return MappingProxyType(dict(d or {}))


@dataclass(frozen=True)
class ClientHost:
    """An ssh host that generates a target's load through fio's client/server mode (targets/clients.py)."""

    address: str
    user: str = "root"
    port: int = 22
    identity: str = ""
    known_hosts: str = ""

    @property
    def name(self) -> str:
        """How runs, reports and errors name it (the same form as an ssh campaign host's name)."""
        return f"ssh:{self.user}@{self.address}" + (f":{self.port}" if self.port != 22 else "")


@dataclass(frozen=True)
class TargetOptions:
    """A target kind's own settings of a target: each kind declares a frozen subclass with its fields (the ZFS
    kinds' props and pool, a raw disk's confirmation, a file target's clients, a share's export and mount). The
    shared model has no field of any kind's; `canonical` says which of them identify the target in a test id."""

    def canonical(self) -> dict[str, Any]:
        """The settings that change what is measured (they go into the test id)."""
        return {}


@dataclass(frozen=True)
class Target:
    """What fio hits. `path` is a device (raw, zvol: assigned at provision) or a directory (file); `options` are
    the kind's own settings (targets/<kind>.py declares their type)."""

    name: str
    kind: str
    path: str = ""
    size: int = 0
    options: TargetOptions = field(default_factory=TargetOptions)

    def __post_init__(self) -> None:
        if not self.kind.replace("-", "").isalpha():  # which kinds exist is the targets registry's business
            raise ValueError(f"invalid target kind {self.kind!r}")
        if self.size < 0:
            raise ValueError("negative size")

    def canonical(self) -> dict[str, Any]:
        """What identifies the target in a test id: its name, kind, path, size and its kind's settings that change
        what is measured (not a permission like a raw disk's `confirm`)."""
        d: dict[str, Any] = {"name": self.name, "kind": self.kind, "path": self.path, "size": self.size}
        d.update(self.options.canonical())
        return d


@dataclass(frozen=True)
class Test:
    """One point of the matrix. `params` holds the axes (rw, bs, iodepth, numjobs, io, sync_mode, …)."""

    number: int
    name: str
    target: Target
    params: Mapping[str, Any]
    fio_options: Mapping[str, Any]
    runtime: float
    ramp: float

    def __post_init__(self) -> None:
        object.__setattr__(self, "params", frozen_map(self.params))
        object.__setattr__(self, "fio_options", frozen_map(self.fio_options))

    def canonical(self) -> dict[str, Any]:
        """Everything that changes what is measured; its hash is the test id."""
        return {
            "target": self.target.canonical(),
            "params": dict(self.params),
            "fio": dict(self.fio_options),
            "runtime": self.runtime,
            "ramp": self.ramp,
        }

    @functools.cached_property
    def id(self) -> str:
        # computed once: a plan of 100,000 tests asked for each id ~13 times (13 s of its 15 s)
        return short_hash(self.canonical())

    @property
    def expected_s(self) -> float:
        """How long fio should take: ramp + runtime."""
        return self.ramp + self.runtime

    @property
    def test_case(self) -> str:
        """The leaderboard group, e.g. "write seq 4k", "read random 1M"."""
        return test_case_for(self.params)

    @property
    def is_copy(self) -> bool:
        """A copy test (cp, rsync, dd of a random-filled source) instead of an fio job."""
        return self.params.get("workload", "fio") in COPY_WORKLOADS

    @property
    def is_fill(self) -> bool:
        """The pool-full experiment: the guest writes until the pool is full (not a performance test)."""
        return self.params.get("workload") == FILL


def test_case_for(params: Mapping[str, Any]) -> str:
    """The default test case of a test's params: (rw, bs) for fio, the command and size for a copy test."""
    if params.get("workload") == FILL:
        return "pool full"
    if params.get("workload", "fio") != "fio":
        return f"copy {params['workload']} {params.get('copy_size', '')}".strip()
    return test_case_of(str(params.get("rw", "")), str(params.get("bs", "")))


def case_name(params: Mapping[str, Any], keys: tuple[str, ...] = ("rw", "bs")) -> str:
    """A test's case under [report] test_case `keys`: "write seq 4k" for the default (rw, bs); other keys are
    appended as key=value."""
    base = test_case_for(params) if {"rw", "bs"} <= set(keys) or params.get("workload", "fio") != "fio" else ""
    extra = [f"{k}={params.get(k, '-')}" for k in keys if k not in ("rw", "bs")]
    return " ".join([b for b in [base] if b] + extra)


def test_case_of(rw: str, bs: str) -> str:
    """Name a test case the way seed 000's sheet does: "<direction> <seq|random|mixed> <bs>"."""
    direction = {
        "read": "read",
        "write": "write",
        "randread": "read",
        "randwrite": "write",
        "rw": "readwrite",
        "readwrite": "readwrite",
        "randrw": "readwrite",
        "trim": "trim",
        "randtrim": "trim",
    }.get(rw.split(":")[0], rw)  # `randread:8`: fio's offset modifier, the same pattern
    pattern = "random" if rw.startswith("rand") else "seq"
    return f"{direction} {pattern} {bs}"


@dataclass(frozen=True)
class Fingerprint:
    """What the numbers depend on besides the test: kernel, fio, CPU, RAM, devices, later ZFS."""

    data: Mapping[str, Any]

    def __post_init__(self) -> None:
        object.__setattr__(self, "data", frozen_map(self.data))

    @property
    def id(self) -> str:
        return short_hash(dict(self.data), 16)

    def comparable_keys(self) -> dict[str, Any]:
        """The fields that make two runs incomparable when they differ (not hostname or uptime)."""
        keep = (
            "kernel",
            "fio_version",
            "cpu_model",
            "cpu_count",
            "mem_bytes",
            "accelerator",
            "guest_accelerator",
            "zfs_version",
            "zfs_tunables",
            "device_models",
            "lab_disk_models",
            "lab_arc_max",
        )
        return {k: self.data[k] for k in keep if k in self.data}


@dataclass(frozen=True)
class Run:
    """One execution of a test: fio's numbers, what fio misses, and how it ended. Immutable."""

    test_id: str
    run_no: int
    warmup: bool
    attempt: int
    status: str
    started: float
    ended: float | None = None
    host: str = ""
    fingerprint_id: str = ""
    expected_s: float = 0.0
    wall_s: float | None = None
    drain_s: float | None = None
    metrics: Mapping[str, float] = field(default_factory=frozen_map)
    checks: Mapping[str, Any] = field(default_factory=frozen_map)
    samples: Mapping[str, Any] = field(default_factory=frozen_map)
    fio_json: str = ""
    exit_status: int | None = None
    stderr_tail: str = ""
    note: str = ""
    row_id: int = 0

    def __post_init__(self) -> None:
        if self.status not in RUN_STATUSES:
            raise ValueError(f"unknown run status {self.status!r}")
        if self.run_no < 0 or self.attempt < 1:
            raise ValueError("run_no must be >= 0 and attempt >= 1")
        if self.wall_s is not None and self.wall_s < 0:
            raise ValueError("negative wall time")
        object.__setattr__(self, "metrics", frozen_map(self.metrics))
        object.__setattr__(self, "checks", frozen_map(self.checks))
        object.__setattr__(self, "samples", frozen_map(self.samples))
