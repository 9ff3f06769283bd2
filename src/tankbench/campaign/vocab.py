"""The campaign file's vocabulary: its sections and keys, the axes and their values (tables only).

The axes a target kind owns (ZFS properties, a test guest's disk) come from the kinds themselves
(`tankbench.targets`): a new kind brings its axes and its [[target]] keys without an edit here.
"""

from __future__ import annotations

import re
from typing import Any

from tankbench import diskmodels
from tankbench.campaign.unattended import UNATTENDED_KEYS
from tankbench.model import COPY_WORKLOADS, FILL, FIO_JOB_AXES
from tankbench.targets import kind_axes, kind_names, kinds

RW_VALUES = ("read", "write", "randread", "randwrite", "rw", "readwrite", "randrw", "trim", "randtrim")

HOST_KINDS = ("auto", "local", "lab", "ssh")

#: fio axes tankbench understands; any other fio option goes under [fio] (same for every test)
FIO_AXES = ("workload", *FIO_JOB_AXES, "buffer_compress_percentage", "refill_buffers")

#: what the test file holds and whether caches are emptied before a run (all target kinds; not copy tests)
DATA_AXES = ("layout", "cache")

#: host-wide settings: ZFS module parameters (all target kinds, copy tests too)
HOST_AXES = ("tunables",)

#: `layout`: how tankbench lays out the test file / region before each run (`compressible:<N>%` too)
LAYOUTS = ("random", "zero", "unwritten")

CACHE_STATES = ("warm", "cold")

#: `campaign.mode`: time-based runs (runtime) or size-based runs (each job moves its size, then fio ends)
RUN_MODES = ("time", "size")

#: `workload`: fio, a copy command (seed 000's non-synthetic tests) writing campaign.copy_size bytes, or the
#: pool-full experiment of vm-disk targets (fill, seed 003)
WORKLOADS = ("fio", *COPY_WORKLOADS, FILL)

#: the target kinds' own axes (outermost first, so that consecutive tests share one dataset configuration),
#: and those that go inside the host-wide axes (a test guest's disk)
KIND_AXES, INNER_AXES = kind_axes()
#: every axis in expansion order
AXES = KIND_AXES + HOST_AXES + INNER_AXES + DATA_AXES + FIO_AXES
#: the kind whose `axis_value` validates each of the kinds' axes (the first that declares it)
AXIS_OWNERS = {axis: kinds()[k] for k in reversed(kind_names()) for axis in kinds()[k].axes + kinds()[k].inner_axes}


def axes_of(kind: str) -> tuple[str, ...]:
    """The kind's own axes (those of other kinds are dropped for its targets, so tests are not duplicated)."""
    cls = kinds()[kind]
    return cls.axes + cls.inner_axes


DEFAULT_AXES: dict[str, list[Any]] = {
    "workload": ["fio"],
    "iodepth": [1],
    "numjobs": [1],
    "io": ["direct"],
    "sync_mode": ["async"],
}

#: validation patterns end in \Z, not $: `$` also matches before a last "\n" (a name "x\n" split fio job files)
NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}\Z")

CAMPAIGN_KEYS = (
    "name",
    "description",
    "runtime",
    "ramp",
    "warmup",
    "repeats",
    "cooldown",
    "deadline_grace",
    "timing_threshold",
    "max_tests",
    "host",
    "hosts",
    "hosts_mode",
    "drain_max",
    "sample_interval",
    "copy_size",
    "order",
    "shuffle_seed",
    "racing",
    "ss",
    "ss_dur",
    "ss_ramp",
    "mode",
    "min_throughput",
    "fill_room",
    "design",
    *UNATTENDED_KEYS,
)

TOP_KEYS = (
    "campaign",
    "host",
    "pool",
    "target",
    "matrix",
    "exclude",
    "include",
    "fio",
    "goal",
    "claim",
    "mix",
    "report",
    "scale",
    "preflight",
    "tunables",
)
#: a [[target]] table: its name and kind, then the keys its kind takes
TARGET_KEYS = ("name", "kind") + tuple(dict.fromkeys(key for k in kind_names() for key in kinds()[k].table_keys))
POOL_KEYS = ("name", "vdevs", "log", "cache", "special", "confirm", "ashift", "properties", "parent")

#: vdev classes written in zpool create's grammar (`["raidz1", a, b, c]`, `["mirror", a, b, "mirror", c, d]`)
VDEV_CLASSES = ("vdevs", "log", "cache", "special")


HOST_KEYS = (
    "kind",
    "address",
    "user",
    "port",
    "identity",
    "known_hosts",
    "name",
    "disks",
    "slog",
    *diskmodels.HOST_KEYS,
)

COOLDOWN_KEYS = ("fixed", "max", "load1", "dirty", "auto", "idle_iops", "idle_for")

#: time to answer (issue 11): where warm-ups go, in which order runs go, when repeats stop
WARMUP_MODES = ("per-test", "per-config", "none")

ORDERS = ("sequential", "round-robin", "shuffle")

REPEATS_KEYS = ("min", "max", "ci", "settle", "decide")

RACING_KEYS = ("margin", "min")

SS_RE = re.compile(r"^(iops|bw)(_slope)?:[0-9]+(\.[0-9]+)?%?\Z")

TUNABLE_RE = re.compile(r"^[a-z][a-z0-9_]{0,63}\Z")

TUNABLE_VALUE_RE = re.compile(r"^-?[A-Za-z0-9_.:,+-]{1,64}\Z")

FIO_RESERVED: dict[str, str] = {
    "filename": "tankbench sets it from the target",
    "directory": "tankbench sets it from the target",
    "output": "tankbench reads fio's JSON itself",
    "output-format": "tankbench asks for JSON itself",
    "runtime": "set campaign.runtime",
    "ramp_time": "set campaign.ramp",
    "time_based": "every test is time based",
    "rw": "use matrix.rw",
    "readwrite": "use matrix.rw",
    "bs": "use matrix.bs",
    "blocksize": "use matrix.bs",
    "iodepth": "use matrix.iodepth",
    "numjobs": "use matrix.numjobs",
    "direct": 'use matrix.io = ["direct"]',
    "buffered": 'use matrix.io = ["buffered"]',
    "sync": "use matrix.sync_mode",
    "fsync": "use matrix.sync_mode",
    "fdatasync": "use matrix.sync_mode",
    "size": "set the target's size or matrix.size",
    "ss": "set campaign.ss",
    "ss_dur": "set campaign.ss_dur",
    "ss_ramp": "set campaign.ss_ramp",
}
