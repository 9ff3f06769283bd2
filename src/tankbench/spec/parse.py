"""Campaign TOML -> validated Spec. Pure: reads the file, touches nothing else."""

from __future__ import annotations

import difflib
import re
import tomllib
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from tankbench.errors import SpecError, UserError
from tankbench.guest import layers as guest_layers
from tankbench.guest.pauses import WERROR_VALUES
from tankbench.model import COPY_WORKLOADS, FILL, IO_MODES, SYNC_MODES, Target, frozen_map, short_hash
from tankbench.preflight import PreflightPolicy, policy_from_table
from tankbench.spec.fill import DEFAULT_ROOM, check_fill
from tankbench.spec.unattended import UNATTENDED_KEYS, Unattended, parse_unattended
from tankbench.targets import kind_names
from tankbench.targets.zfs import PROPERTY_AXES
from tankbench.tunables import canonical_tunables
from tankbench.units import fmt_size, parse_duration, parse_size

RW_VALUES = ("read", "write", "randread", "randwrite", "rw", "readwrite", "randrw", "trim", "randtrim")
HOST_KINDS = ("auto", "local", "lab", "ssh")
#: fio axes tankbench understands; any other fio option goes under [fio] (same for every test)
FIO_AXES = (
    "workload",
    "rw",
    "bs",
    "iodepth",
    "numjobs",
    "size",
    "io",
    "sync_mode",
    "rwmixread",
    "ioengine",
    "buffer_compress_percentage",
    "refill_buffers",
)
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
#: ZFS axes, outermost first so that consecutive tests share one dataset configuration
ZFS_AXES = ("slog", *PROPERTY_AXES)  # the properties of targets/zfs.py, and the SLOG (a pool change)
#: a test guest's disk (vm-disk targets): its backing on the host, then qemu's settings for it
VM_AXES: tuple[str, ...] = (
    "backing",
    "qcow2_cluster",
    "preallocation",
    "l2_cache",
    "bus",
    "disk_cache",
    "aio",
    "iothread",
    "werror",
)
VM_AXES += guest_layers.AXES  # what the guest puts between fio and the disk: guest_luks, guest_fs
VM_CHOICES = {
    "guest_fs": guest_layers.FILESYSTEMS,
    "backing": ("zvol", "qcow2", "raw"),
    "preallocation": ("off", "metadata", "falloc", "full"),
    "bus": ("virtio-blk", "virtio-scsi"),
    "disk_cache": ("none", "writeback", "writethrough", "directsync", "unsafe"),
    "aio": ("threads", "native", "io_uring"),
    "werror": WERROR_VALUES,
}
#: every axis in expansion order
AXES = ZFS_AXES + HOST_AXES + VM_AXES + DATA_AXES + FIO_AXES
#: which ZFS axes apply to which target kind (others are dropped for that target, so tests are not duplicated)
ZFS_AXES_FOR = {
    "raw": (),
    "file": (),
    "dataset": (
        "slog",
        "encryption",
        "recordsize",
        "compression",
        "sync",
        "logbias",
        "primarycache",
        "atime",
        "direct",
    ),
    "zvol": ("slog", "encryption", "volblocksize", "compression", "sync", "logbias", "primarycache"),
    "vm-disk": tuple(a for a in ZFS_AXES if a != "direct") + VM_AXES,
}
ZFS_CHOICES = {
    "encryption": ("off", "aes-128-ccm", "aes-192-ccm", "aes-256-ccm", "aes-128-gcm", "aes-192-gcm", "aes-256-gcm"),
    "sync": ("standard", "always", "disabled"),
    "logbias": ("latency", "throughput"),
    "primarycache": ("all", "metadata", "none"),
    "atime": ("on", "off"),
    "direct": ("standard", "always", "disabled"),
}
#: properties a target may fix in its `props` table (besides the axes above)
TARGET_PROPS = (
    "recordsize",
    "volblocksize",
    "compression",
    "encryption",
    "sync",
    "logbias",
    "primarycache",
    "secondarycache",
    "atime",
    "direct",
    "checksum",
    "dedup",
    "copies",
    "redundant_metadata",
    "xattr",
    "dnodesize",
    "special_small_blocks",
)
DEFAULT_AXES: dict[str, list[Any]] = {
    "workload": ["fio"],
    "iodepth": [1],
    "numjobs": [1],
    "io": ["direct"],
    "sync_mode": ["async"],
}
NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$")

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
    "mix",
    "report",
    "scale",
    "preflight",
    "tunables",
)
TARGET_KEYS = ("name", "kind", "path", "size", "confirm", "props")
POOL_KEYS = ("name", "vdevs", "log", "cache", "special", "confirm", "ashift", "properties", "parent")
#: vdev classes written in zpool create's grammar (`["raidz1", a, b, c]`, `["mirror", a, b, "mirror", c, d]`)
VDEV_CLASSES = ("vdevs", "log", "cache", "special")
#: group keywords and the fewest devices each takes (as zpool create enforces)
VDEV_GROUPS = {"mirror": 2, "raidz": 2, "raidz1": 2, "raidz2": 3, "raidz3": 4}
HOST_KEYS = ("kind", "address", "user", "port", "identity", "name", "disks", "slog")
COOLDOWN_KEYS = ("fixed", "max", "load1", "dirty", "auto", "idle_iops", "idle_for")
#: time to answer (issue 11): where warm-ups go, in which order runs go, when repeats stop
WARMUP_MODES = ("per-test", "per-config", "none")
ORDERS = ("sequential", "round-robin", "shuffle")
REPEATS_KEYS = ("min", "max", "ci")
RACING_KEYS = ("margin", "min")
SS_RE = re.compile(r"^(iops|bw)(_slope)?:[0-9]+(\.[0-9]+)?%?$")


@dataclass(frozen=True)
class HostSpec:
    """Where the campaign runs: auto (local if it has ZFS, else the lab), local, lab or ssh."""

    kind: str = "auto"
    address: str = ""
    user: str = ""
    port: int = 22
    identity: str = ""
    lab_name: str = "default"
    lab_disks: int = 2
    lab_slog: bool = True


@dataclass(frozen=True)
class PoolSpec:
    """ZFS pool for dataset/zvol targets: one tankbench creates (`name` + `vdevs`), or an existing `parent`
    dataset under which tankbench creates and destroys only its own, tagged children."""

    name: str = ""
    vdevs: tuple[str, ...] = ()
    log: tuple[str, ...] = ()
    confirm: tuple[str, ...] = ()
    ashift: int = 12
    properties: Mapping[str, str] = field(default_factory=frozen_map)
    parent: str = ""
    cache: tuple[str, ...] = ()
    special: tuple[str, ...] = ()

    @property
    def creates(self) -> bool:
        return bool(self.name)

    @property
    def data_devices(self) -> tuple[str, ...]:
        """The data vdevs' device paths, without the group keywords (mirror, raidz1, …)."""
        return tuple(d for d in self.vdevs if d not in VDEV_GROUPS)

    @property
    def devices(self) -> tuple[str, ...]:
        """Every device the pool is created on: data, log, cache and special (no keywords)."""
        return tuple(d for d in self.vdevs + self.log + self.cache + self.special if d not in VDEV_GROUPS)

    @property
    def layout(self) -> str:
        """A one-line description, e.g. `raidz1(3) + log(1) + cache(1)` (for fingerprints and reports)."""
        parts = [
            f"{name}{groups}"
            for name, groups in (
                ("", _groups(self.vdevs)),
                ("log ", _groups(self.log)),
                ("cache ", _groups(self.cache)),
                ("special ", _groups(self.special)),
            )
            if groups
        ]
        return " + ".join(parts)

    @property
    def pool_name(self) -> str:
        return self.name or self.parent.split("/")[0]


@dataclass(frozen=True)
class Cooldown:
    """Pause between runs: `fixed` seconds, then until load1 and dirty data are low, at most `max_s`.

    `auto`: also until the pool's txgs have synced and its disks have been idle (at most `idle_iops` ops/s)
    for `idle_s` seconds; `load1_auto` takes the preflight load1 + 1.0 (at least 1.0) as the load threshold."""

    fixed_s: float = 0.0
    max_s: float = 0.0
    load1: float | None = None
    dirty_bytes: int | None = None
    auto: bool = False
    idle_iops: float = 5.0
    idle_s: float = 3.0
    load1_auto: bool = False

    @property
    def active(self) -> bool:
        return self.fixed_s > 0 or self.max_s > 0 or self.auto


@dataclass(frozen=True)
class Schedule:
    """Time to answer: warm-up placement, run order, adaptive repeats, racing and fio steady state.

    `repeats_min == repeats_max` with `ci` None is the classic fixed number of repeats."""

    warmup: str = "none"
    repeats_min: int = 1
    repeats_max: int = 1
    ci: float | None = None
    order: str = "sequential"
    shuffle_seed: int = 0
    racing: bool = False
    racing_margin: float = 0.05
    racing_min: int = 2
    ss: str = ""
    ss_dur_s: float = 0.0
    ss_ramp_s: float = 0.0

    @property
    def adaptive(self) -> bool:
        """Whether the number of repeats is decided while the campaign runs."""
        return self.repeats_min < self.repeats_max and (self.ci is not None or self.racing)


@dataclass(frozen=True)
class Spec:
    """A validated campaign file."""

    path: str
    text: str
    name: str
    description: str
    runtime: float
    ramp: float
    warmup: bool
    repeats: int
    cooldown: Cooldown
    deadline_grace: float
    timing_threshold: float
    max_tests: int
    drain_max: float
    sample_interval: float
    copy_size: int
    host: HostSpec
    targets: tuple[Target, ...]
    matrix: Mapping[str, tuple[Any, ...]]
    excludes: tuple[Mapping[str, tuple[Any, ...]], ...]
    includes: tuple[Mapping[str, Any], ...]
    fio: Mapping[str, Any]
    extras: Mapping[str, Any] = field(default_factory=frozen_map)
    pool: PoolSpec | None = None
    scale: str = ""
    #: what to do before each run about noise on the host (scrub, other I/O, swap, load): [preflight]
    preflight: PreflightPolicy = field(default_factory=PreflightPolicy)
    schedule: Schedule = field(default_factory=Schedule)
    mode: str = "time"
    min_throughput: int = 1 << 20
    tunables: Mapping[str, str] = field(default_factory=frozen_map)
    #: workload = "fill": the pool's free space a fill test leaves before the guest writes (the rest is ballast)
    fill_room: int = DEFAULT_ROOM
    #: the watchdog, crash retries, waiting for the host, the event hook (spec/unattended.py)
    unattended: Unattended = field(default_factory=Unattended)

    @property
    def size_based(self) -> bool:
        """Runs end when each job has moved its size (campaign.mode = "size"), not after a runtime."""
        return self.mode == "size"

    @property
    def campaign_id(self) -> str:
        """Stable across edits of the matrix: results of one campaign stay in one place."""
        return short_hash({"campaign": self.name})

    @property
    def zfs_root(self) -> str:
        """The dataset under which this campaign's datasets and zvols live (tagged as tankbench's)."""
        if self.pool is None:
            return ""
        base = self.pool.name if self.pool.creates else self.pool.parent
        return f"{base}/tb-{self.campaign_id[:8]}"


class _Ctx:
    """Carries the file name so every error names file, key and value."""

    def __init__(self, path: str) -> None:
        self.path = path

    def err(self, key: str, value: object, problem: str, hint: str = "") -> SpecError:
        return SpecError(self.path, key, value, problem, hint)

    def unknown_keys(self, table: Mapping[str, Any], allowed: tuple[str, ...], prefix: str) -> None:
        for key in table:
            if key not in allowed:
                close = difflib.get_close_matches(key, allowed, n=1)
                hint = f"did you mean `{close[0]}`?" if close else f"known keys: {', '.join(allowed)}"
                raise self.err(f"{prefix}{key}", None, "unknown key", hint)

    def table(self, doc: Mapping[str, Any], key: str, required: bool = False) -> dict[str, Any]:
        value = doc.get(key)
        if value is None:
            if required:
                raise self.err(f"[{key}]", None, "missing table", f"add a [{key}] table")
            return {}
        if not isinstance(value, dict):
            raise self.err(key, value, "must be a table", f"write it as [{key}]")
        return value

    def duration(self, key: str, value: object, positive: bool = False) -> float:
        try:
            seconds = parse_duration(value)  # type: ignore[arg-type]
        except (ValueError, TypeError):
            raise self.err(
                key,
                value,
                "not a duration (and durations cannot be negative)",
                'write e.g. "30s", "2m", "1h30m" or a number of seconds',
            ) from None
        if positive and seconds <= 0:
            raise self.err(key, value, "must be longer than zero", 'e.g. "60s"')
        return seconds

    def size(self, key: str, value: object, positive: bool = True) -> int:
        try:
            n = parse_size(value)  # type: ignore[arg-type]
        except (ValueError, TypeError):
            raise self.err(key, value, "not a size", 'write e.g. "4k", "1M", "64M", "8G" (powers of 1024)') from None
        if positive and n <= 0:
            raise self.err(key, value, "must be larger than zero", 'e.g. "4k"')
        return n

    def integer(self, key: str, value: object, lo: int, hi: int) -> int:
        if isinstance(value, bool) or not isinstance(value, int):
            raise self.err(key, value, "must be a whole number", f"e.g. {lo}")
        if not lo <= value <= hi:
            raise self.err(key, value, f"must be between {lo} and {hi}", f"e.g. {lo}")
        return value

    def boolean(self, key: str, value: object) -> bool:
        if not isinstance(value, bool):
            raise self.err(key, value, "must be true or false", "write it without quotes: true / false")
        return value

    def string(self, key: str, value: object) -> str:
        if not isinstance(value, str):
            raise self.err(key, value, "must be a string", "put it in double quotes")
        return value

    def choice(self, key: str, value: object, choices: tuple[str, ...]) -> str:
        if value not in choices:
            close = difflib.get_close_matches(str(value), choices, n=1)
            hint = f"did you mean {close[0]!r}?" if close else f"one of: {', '.join(choices)}"
            raise self.err(key, value, f"must be one of {', '.join(choices)}", hint)
        return str(value)


def load_spec(path: str, scale: str = "") -> Spec:
    """Read and validate a campaign file; raise UserError/SpecError naming the file, key and value."""
    try:
        with open(path, "rb") as f:
            raw = f.read()
    except FileNotFoundError:
        raise UserError(
            f"campaign file not found: {path}", "check the path; `tankbench presets` lists the presets"
        ) from None
    except IsADirectoryError:
        raise UserError(f"{path}: is a directory, not a campaign file", "pass the .toml file itself") from None
    except OSError as e:
        raise UserError(f"cannot read campaign file {path}: {e.strerror}", "check the file's permissions") from e
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        raise UserError(f"{path}: not UTF-8 text", "save the campaign file as UTF-8") from None
    return parse_spec(text, path, scale)


def apply_scale(ctx: _Ctx, doc: dict[str, Any], scale: str) -> dict[str, Any]:
    """`[scale.NAME]` overrides: its tables are merged key by key into the file's, its arrays replace them."""
    scales = doc.get("scale", {})
    if not isinstance(scales, dict) or not all(isinstance(v, dict) for v in scales.values()):
        raise ctx.err("scale", scales, "must hold tables like [scale.quick]", "write [scale.quick] then overrides")
    if not scale:
        return doc
    if scale not in scales:
        known = ", ".join(sorted(scales)) or "none"
        raise UserError(
            f"{ctx.path}: no [scale.{scale}] in this campaign (scales: {known})",
            "pick one of its scales, or run it without --scale",
        )
    out = {k: (dict(v) if isinstance(v, dict) else v) for k, v in doc.items()}
    for key, value in scales[scale].items():
        if key not in TOP_KEYS or key == "scale":
            raise ctx.err(f"scale.{scale}.{key}", None, "unknown key", f"known keys: {', '.join(TOP_KEYS)}")
        if isinstance(value, dict) and isinstance(out.get(key), dict):
            out[key].update(value)
        else:
            out[key] = value
    return out


def parse_spec(text: str, path: str = "<campaign>", scale: str = "") -> Spec:
    """Validate campaign TOML text (pure); `scale` applies that [scale.NAME] table's overrides."""
    ctx = _Ctx(path)
    try:
        doc = tomllib.loads(text)
    except tomllib.TOMLDecodeError as e:
        raise UserError(
            f"{path}: not valid TOML: {e}", "check quotes, brackets and `key = value` syntax there"
        ) from None
    ctx.unknown_keys(doc, TOP_KEYS, "")
    doc = apply_scale(ctx, doc, scale)
    camp = ctx.table(doc, "campaign", required=True)
    ctx.unknown_keys(camp, CAMPAIGN_KEYS, "campaign.")
    name = ctx.string("campaign.name", camp.get("name", ""))
    if not NAME_RE.match(name):
        raise ctx.err(
            "campaign.name", name, "must be 1-64 letters, digits, '.', '_' or '-'", 'e.g. name = "zvol-vs-dataset"'
        )
    mode, min_throughput = _run_mode(ctx, camp)
    runtime = 0.0 if mode == "size" else ctx.duration("campaign.runtime", camp.get("runtime", "60s"), positive=True)
    ramp = ctx.duration("campaign.ramp", camp.get("ramp", "0s"))
    schedule = _schedule(ctx, camp, runtime, name)
    repeats = schedule.repeats_max
    warmup = schedule.warmup != "none"
    grace = ctx.duration("campaign.deadline_grace", camp.get("deadline_grace", "60s"))  # retired: read, ignored
    unattended = parse_unattended(ctx, camp)
    threshold = _threshold(ctx, camp.get("timing_threshold", "10%"))
    max_tests = ctx.integer("campaign.max_tests", camp.get("max_tests", 5000), 1, 1_000_000)
    drain_max = ctx.duration("campaign.drain_max", camp.get("drain_max", "10m"), positive=True)
    interval = ctx.duration("campaign.sample_interval", camp.get("sample_interval", "1s"), positive=True)
    cooldown = _cooldown(ctx, camp.get("cooldown", "0s"))
    copy_size = ctx.size("campaign.copy_size", camp.get("copy_size", "256M"))
    fill_room = ctx.size("campaign.fill_room", camp.get("fill_room", "64M"))
    host = _host(ctx, camp.get("host"), doc.get("host"))
    targets = _targets(ctx, doc.get("target"))
    pool = _pool(ctx, doc.get("pool"), targets)
    matrix = _matrix(ctx, ctx.table(doc, "matrix", required=True), targets)
    if True in matrix.get("slog", ()) and (pool is None or not pool.log):
        raise ctx.err(
            "matrix.slog",
            list(matrix["slog"]),
            "needs log devices in [pool]",
            'add log = ["/dev/disk/by-id/…"] (and confirm it) to a pool tankbench creates',
        )
    excludes = tuple(_rule(ctx, r, i, "exclude", matrix, targets) for i, r in enumerate(_list(ctx, doc, "exclude")))
    includes = tuple(_include(ctx, r, i, matrix, targets) for i, r in enumerate(_list(ctx, doc, "include")))
    _guest_copies(ctx, matrix, includes, targets)
    fio = _fio(ctx, ctx.table(doc, "fio"))
    if schedule.ss:  # fio's own steady-state detection: part of the job, so part of each test's id
        fio.update({"ss": schedule.ss, "ss_dur": f"{schedule.ss_dur_s:g}s", "ss_ramp": f"{schedule.ss_ramp_s:g}s"})
    tunables = _tunables_table(ctx, ctx.table(doc, "tunables"))
    _check_new_axes(ctx, matrix, fio, pool, targets, mode)
    check_fill(ctx.err, matrix, excludes, includes, pool, targets, fill_room)
    extras: dict[str, Any] = {k: doc[k] for k in ("goal", "mix", "report") if k in doc}
    return Spec(
        path=path,
        text=text,
        name=name,
        description=str(camp.get("description", "")),
        runtime=runtime,
        ramp=ramp,
        warmup=warmup,
        repeats=repeats,
        cooldown=cooldown,
        deadline_grace=grace,
        unattended=unattended,
        timing_threshold=threshold,
        max_tests=max_tests,
        drain_max=drain_max,
        sample_interval=interval,
        copy_size=copy_size,
        host=host,
        targets=targets,
        matrix=frozen_map(matrix),
        excludes=excludes,
        includes=includes,
        fio=frozen_map(fio),
        extras=frozen_map(extras),
        pool=pool,
        scale=scale,
        preflight=policy_from_table(ctx.table(doc, "preflight"), path),
        schedule=schedule,
        mode=mode,
        min_throughput=min_throughput,
        tunables=frozen_map(tunables),
        fill_room=fill_room,
    )


def _list(ctx: _Ctx, doc: Mapping[str, Any], key: str) -> list[dict[str, Any]]:
    value = doc.get(key, [])
    if not isinstance(value, list) or not all(isinstance(v, dict) for v in value):
        raise ctx.err(key, value, "must be an array of tables", f"write each one as [[{key}]]")
    return value


def _threshold(ctx: _Ctx, value: object) -> float:
    key = "campaign.timing_threshold"
    if isinstance(value, (int, float)) and not isinstance(value, bool) and value >= 0:
        return float(value)
    if isinstance(value, str) and value.endswith("%"):
        try:
            pct = float(value[:-1])
        except ValueError:
            pct = -1
        if pct >= 0:
            return pct / 100.0
    raise ctx.err(key, value, "must be a percentage", 'e.g. "10%" (wall time allowed beyond ramp + runtime)')


def _cooldown(ctx: _Ctx, value: object) -> Cooldown:
    if value == "auto":
        value = {"auto": True}
    if not isinstance(value, dict):
        return Cooldown(fixed_s=ctx.duration("campaign.cooldown", value))
    ctx.unknown_keys(value, COOLDOWN_KEYS, "campaign.cooldown.")
    auto = ctx.boolean("campaign.cooldown.auto", value.get("auto", False))
    fixed = ctx.duration("campaign.cooldown.fixed", value.get("fixed", "0s"))
    max_s = ctx.duration("campaign.cooldown.max", value.get("max", "5m"), positive=True)
    load1 = value.get("load1", "auto" if auto else None)
    load1_auto = auto and load1 == "auto"
    if load1_auto or load1 is False:
        load1 = None
    elif load1 is not None and (isinstance(load1, bool) or not isinstance(load1, (int, float)) or load1 < 0):
        raise ctx.err(
            "campaign.cooldown.load1",
            load1,
            "must be a non-negative number",
            'e.g. load1 = 0.5; with auto = true also "auto" (preflight load1 + 1.0) or false (not checked)',
        )
    dirty = (
        ctx.size("campaign.cooldown.dirty", value.get("dirty", "4M" if auto else 0), positive=False)
        if auto or "dirty" in value
        else None
    )
    if not auto:
        for key in ("idle_iops", "idle_for"):
            if key in value:
                raise ctx.err(
                    f"campaign.cooldown.{key}",
                    value[key],
                    "only applies to an automatic cooldown",
                    'add auto = true, or write cooldown = "auto"',
                )
    idle = value.get("idle_iops", 5.0)
    if isinstance(idle, bool) or not isinstance(idle, (int, float)) or idle < 0:
        raise ctx.err(
            "campaign.cooldown.idle_iops",
            idle,
            "must be a non-negative number",
            "e.g. idle_iops = 5 (disk operations per second that still count as idle)",
        )
    idle_s = ctx.duration("campaign.cooldown.idle_for", value.get("idle_for", "3s"))
    return Cooldown(
        fixed_s=fixed,
        max_s=max_s,
        load1=float(load1) if load1 is not None else None,
        dirty_bytes=dirty,
        auto=auto,
        idle_iops=float(idle),
        idle_s=idle_s,
        load1_auto=load1_auto,
    )


def _fraction(ctx: _Ctx, key: str, value: object, hint: str) -> float:
    """ "5%" or 0.05 -> 0.05 (a positive fraction below 1)."""
    frac = -1.0
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        frac = float(value)
    elif isinstance(value, str) and value.endswith("%"):
        try:
            frac = float(value[:-1]) / 100.0
        except ValueError:
            pass
    if not 0 < frac < 1:
        raise ctx.err(key, value, "must be a percentage between 0 and 100", hint)
    return frac


def _schedule(ctx: _Ctx, camp: Mapping[str, Any], runtime: float, name: str) -> Schedule:
    """warmup, repeats, order, racing and steady state (issue 11: time to answer)."""
    warm = camp.get("warmup", False)
    if isinstance(warm, bool):
        mode = "per-test" if warm else "none"  # `true` keeps its old meaning: every test gets a run 0
    else:
        if warm not in WARMUP_MODES:
            raise ctx.err(
                "campaign.warmup",
                warm,
                'must be true or false, or one of "per-test", "per-config", "none"',
                'warmup = "per-config": one warm-up run per provisioned configuration (docs/schedule.md)',
            )
        mode = str(warm)
    rmin, rmax, ci = _repeats(ctx, camp.get("repeats", 1))
    order = ctx.choice("campaign.order", camp.get("order", "sequential"), ORDERS)
    seed = camp.get("shuffle_seed", int(short_hash({"campaign": name}, 8), 16))
    seed = ctx.integer("campaign.shuffle_seed", seed, 0, 2**32 - 1)
    racing, margin, race_min = _racing(ctx, camp.get("racing", False), rmin)
    ss = ctx.string("campaign.ss", camp.get("ss", ""))
    if ss and not SS_RE.match(ss):
        raise ctx.err(
            "campaign.ss",
            ss,
            "not an fio steady-state criterion",
            'e.g. "iops:5%" (IOPS within 5 % of their mean) or "bw_slope:0.5%"',
        )
    for key in ("ss_dur", "ss_ramp"):
        if key in camp and "ss" not in camp:  # ss = "" (e.g. in a quick scale) turns it off with them
            raise ctx.err(f"campaign.{key}", camp[key], "needs campaign.ss", 'add e.g. ss = "iops:5%"')
    dur = ctx.duration("campaign.ss_dur", camp.get("ss_dur", "30s"), positive=True) if ss else 0.0
    ss_ramp = ctx.duration("campaign.ss_ramp", camp.get("ss_ramp", "0s")) if ss else 0.0
    if ss and ss_ramp + dur > runtime:
        raise ctx.err(
            "campaign.ss_dur",
            camp.get("ss_dur", "30s"),
            "ss_ramp + ss_dur is longer than the runtime",
            "fio could never see steady state: lengthen campaign.runtime (the longest a run may take)",
        )
    return Schedule(
        warmup=mode,
        repeats_min=rmin,
        repeats_max=rmax,
        ci=ci,
        order=order,
        shuffle_seed=seed,
        racing=racing,
        racing_margin=margin,
        racing_min=race_min,
        ss=ss,
        ss_dur_s=dur,
        ss_ramp_s=ss_ramp,
    )


def _repeats(ctx: _Ctx, value: object) -> tuple[int, int, float | None]:
    """`repeats = 3`, or adaptive `repeats = { min = 2, max = 10, ci = "5%" }`."""
    if not isinstance(value, dict):
        n = ctx.integer("campaign.repeats", value, 1, 1000)
        return n, n, None
    ctx.unknown_keys(value, REPEATS_KEYS, "campaign.repeats.")
    rmin = ctx.integer("campaign.repeats.min", value.get("min", 2), 1, 1000)
    rmax = ctx.integer("campaign.repeats.max", value.get("max", max(rmin, 10)), 1, 1000)
    if rmax < rmin:
        raise ctx.err("campaign.repeats.max", rmax, f"is smaller than min ({rmin})", f"e.g. max = {max(rmin, 10)}")
    ci = None
    if "ci" in value:
        ci = _fraction(
            ctx,
            "campaign.repeats.ci",
            value["ci"],
            'e.g. ci = "5%": stop once the 95 % CI of the mean is within ±5 % of the mean',
        )
        if rmin < 2:
            raise ctx.err("campaign.repeats.min", rmin, "a confidence interval needs at least 2 repeats", "min = 2")
    return rmin, rmax, ci


def _racing(ctx: _Ctx, value: object, rmin: int) -> tuple[bool, float, int]:
    """`racing = true`, or `racing = { margin = "5%", min = 2 }`."""
    if isinstance(value, bool):
        return value, 0.05, max(2, rmin)
    if not isinstance(value, dict):
        raise ctx.err(
            "campaign.racing", value, "must be true, false or a table", 'e.g. racing = { margin = "5%", min = 2 }'
        )
    ctx.unknown_keys(value, RACING_KEYS, "campaign.racing.")
    margin = _fraction(
        ctx,
        "campaign.racing.margin",
        value.get("margin", "5%"),
        'e.g. margin = "5%": drop a test only when it is at least 5 % behind the leader',
    )
    race_min = ctx.integer("campaign.racing.min", value.get("min", max(2, rmin)), 2, 1000)
    return True, margin, race_min


def _host(ctx: _Ctx, shortcut: object, table: object) -> HostSpec:
    if shortcut is not None and table is not None:
        raise ctx.err("campaign.host", shortcut, "given twice (also as a [host] table)", "keep one of them")
    if table is None:
        if shortcut is None:
            return HostSpec()
        kind = ctx.choice("campaign.host", shortcut, HOST_KINDS)
        if kind == "ssh":
            raise ctx.err(
                "campaign.host",
                shortcut,
                "an ssh host needs an address",
                'write a [host] table: kind = "ssh", address = "bench.example.org"',
            )
        return HostSpec(kind=kind)
    if not isinstance(table, dict):
        raise ctx.err("host", table, "must be a table", 'write [host] with kind = "local" | "lab" | "ssh"')
    ctx.unknown_keys(table, HOST_KEYS, "host.")
    kind = ctx.choice("host.kind", table.get("kind", "auto"), HOST_KINDS)
    spec = HostSpec(
        kind=kind,
        address=ctx.string("host.address", table.get("address", "")),
        user=ctx.string("host.user", table.get("user", "")),
        port=ctx.integer("host.port", table.get("port", 22), 1, 65535),
        identity=ctx.string("host.identity", table.get("identity", "")),
        lab_name=ctx.string("host.name", table.get("name", "default")),
        lab_disks=ctx.integer("host.disks", table.get("disks", 2), 1, 16),
        lab_slog=ctx.boolean("host.slog", table.get("slog", True)),
    )
    if kind == "ssh" and not spec.address:
        raise ctx.err("host.address", "", "is required for an ssh host", 'e.g. address = "bench.example.org"')
    if not NAME_RE.match(spec.lab_name):
        raise ctx.err("host.name", spec.lab_name, "must be letters, digits, '.', '_' or '-'", 'e.g. "default"')
    return spec


def _targets(ctx: _Ctx, value: object) -> tuple[Target, ...]:
    if value is None:
        raise ctx.err(
            "[[target]]",
            None,
            "no target",
            'add e.g. [[target]] name = "scratch" kind = "file" path = "/tmp/tb" size = "64M"',
        )
    if not isinstance(value, list) or not all(isinstance(v, dict) for v in value):
        raise ctx.err("target", value, "must be an array of tables", "write each target as [[target]]")
    if not value:
        raise ctx.err(
            "target",
            value,
            "no target",
            'add e.g. [[target]] name = "scratch" kind = "file" path = "/tmp/tb" size = "64M"',
        )
    out: list[Target] = []
    for i, t in enumerate(value):
        p = f"target[{i}]."
        ctx.unknown_keys(t, TARGET_KEYS, p)
        name = ctx.string(p + "name", t.get("name", ""))
        if not NAME_RE.match(name):
            raise ctx.err(p + "name", name, "must be 1-64 letters, digits, '.', '_' or '-'", 'e.g. name = "scratch"')
        if any(o.name == name for o in out):
            raise ctx.err(p + "name", name, "is used by two targets", "give each target its own name")
        kind = ctx.choice(p + "kind", t.get("kind"), kind_names())
        if kind in ("dataset", "zvol", "vm-disk"):
            out.append(_zfs_target(ctx, t, p, name, kind))
            continue
        if "props" in t:
            raise ctx.err(p + "props", t["props"], "only dataset and zvol targets take ZFS properties", "remove it")
        path_ = ctx.string(p + "path", t.get("path", ""))
        if not path_.startswith("/"):
            raise ctx.err(
                p + "path",
                path_,
                "must be an absolute path",
                'a directory for kind = "file", a /dev/disk/by-id/… path for kind = "raw"',
            )
        if kind == "raw" and not path_.startswith("/dev/"):
            raise ctx.err(
                p + "path",
                path_,
                "a raw target must be a block device under /dev",
                'name it by a stable id, e.g. "/dev/disk/by-id/virtio-tbdata0"',
            )
        if kind == "file" and "size" not in t:
            raise ctx.err(p + "size", None, "is required for a file target", 'e.g. size = "1G" (larger than the cache)')
        size = ctx.size(p + "size", t["size"]) if "size" in t else 0
        confirm = ctx.string(p + "confirm", t.get("confirm", ""))
        if confirm and kind != "raw":
            raise ctx.err(p + "confirm", confirm, "only raw targets take a confirmation", "remove it")
        out.append(Target(name=name, kind=kind, path=path_.rstrip("/") or "/", size=size, confirm=confirm))
    return tuple(out)


def _zfs_target(ctx: _Ctx, t: dict[str, Any], p: str, name: str, kind: str) -> Target:
    """A dataset (a test file on it) or a zvol; where it lives comes from [pool]."""
    for key in ("path", "confirm"):
        if key in t:
            raise ctx.err(
                p + key,
                t[key],
                f"a {kind} target does not take a {key}",
                "tankbench creates it under the campaign's [pool]",
            )
    if "size" not in t:
        what = {"dataset": "the test file's size", "zvol": "the zvol's volsize"}.get(kind, "the guest disk's size")
        raise ctx.err(p + "size", None, f"is required ({what})", 'e.g. size = "1G" (larger than the ARC for reads)')
    size = ctx.size(p + "size", t["size"])
    props = t.get("props", {})
    if not isinstance(props, dict):
        raise ctx.err(p + "props", props, "must be a table", 'e.g. props = { compression = "lz4" }')
    clean: dict[str, str] = {}
    for key, value in props.items():
        if key not in TARGET_PROPS:
            close = difflib.get_close_matches(key, TARGET_PROPS, n=1)
            raise ctx.err(
                f"{p}props.{key}",
                value,
                "not a ZFS property tankbench sets",
                f"did you mean `{close[0]}`?" if close else f"one of: {', '.join(TARGET_PROPS)}",
            )
        if key == "recordsize" and kind == "zvol" or key == "volblocksize" and kind == "dataset":
            raise ctx.err(
                f"{p}props.{key}", value, f"does not apply to a {kind}", "datasets have recordsize, zvols volblocksize"
            )
        if key in ZFS_AXES:
            clean[key] = str(_axis_value(ctx, f"{p}props.{key}", key, value))
        else:
            clean[key] = ctx.string(f"{p}props.{key}", value if not isinstance(value, int) else str(value))
    return Target(name=name, kind=kind, size=size, props=clean)


def _pool(ctx: _Ctx, value: object, targets: tuple[Target, ...]) -> PoolSpec | None:
    zfs = [t for t in targets if t.kind in ("dataset", "zvol", "vm-disk")]
    if value is None:
        if zfs:
            raise ctx.err(
                "[pool]",
                None,
                f"target {zfs[0].name!r} is a {zfs[0].kind} but there is no [pool]",
                'add [pool] with name + vdevs (tankbench creates it) or parent = "tank/bench"',
            )
        return None
    if not isinstance(value, dict):
        raise ctx.err("pool", value, "must be a table", "write [pool]")
    ctx.unknown_keys(value, POOL_KEYS, "pool.")
    name = ctx.string("pool.name", value.get("name", ""))
    parent = ctx.string("pool.parent", value.get("parent", ""))
    if bool(name) == bool(parent):
        raise ctx.err(
            "pool",
            None,
            "needs either name (a pool tankbench creates) or parent (an existing dataset)",
            'e.g. name = "tbpool" with vdevs = ["/dev/disk/by-id/…"], or parent = "tank/bench"',
        )
    if name and not re.match(r"^[A-Za-z][A-Za-z0-9_.-]{0,63}$", name):
        raise ctx.err("pool.name", name, "not a valid pool name", 'e.g. "tbpool"')
    if parent and not re.match(r"^[A-Za-z][A-Za-z0-9_.:/-]*[A-Za-z0-9_.:-]$", parent):
        raise ctx.err("pool.parent", parent, "not a dataset name", 'e.g. "tank/bench"')
    lists = {key: _vdev_list(ctx, key, value.get(key, [])) for key in VDEV_CLASSES + ("confirm",)}
    if name and not lists["vdevs"]:
        raise ctx.err("pool.vdevs", [], "a pool tankbench creates needs vdevs", '["/dev/disk/by-id/virtio-tbdata0"]')
    if parent and any(lists[k] for k in VDEV_CLASSES):
        given = [d for k in VDEV_CLASSES for d in lists[k]]
        raise ctx.err(
            "pool.vdevs",
            given,
            "an existing parent takes no vdevs",
            "tankbench never changes the layout of a pool it did not create",
        )
    _check_devices_once(ctx, lists)
    ashift = ctx.integer("pool.ashift", value.get("ashift", 12), 9, 16)
    props = value.get("properties", {})
    if not isinstance(props, dict):
        raise ctx.err("pool.properties", props, "must be a table", '{ compression = "off" }')
    return PoolSpec(
        name=name,
        vdevs=lists["vdevs"],
        log=lists["log"],
        confirm=lists["confirm"],
        ashift=ashift,
        properties={k: str(v) for k, v in props.items()},
        parent=parent,
        cache=lists["cache"],
        special=lists["special"],
    )


def _axis_value(ctx: _Ctx, key: str, axis: str, v: object) -> Any:
    """Validate and normalise one value of a matrix axis."""
    if axis in ("recordsize", "volblocksize"):
        if v in ("default", "def"):
            return "default"
        n = ctx.size(key, v)
        if n < 512 or n > 16 << 20 or n & (n - 1):
            raise ctx.err(key, v, "must be a power of two from 512 to 16M", 'e.g. "4k", "128k", "1M" or "default"')
        return fmt_size(n)
    if axis == "compression":
        s_ = ctx.string(key, v)
        if not re.match(r"^(on|off|lz4|lzjb|zle|gzip(-[1-9])?|zstd(-fast)?(-[0-9]+)?)$", s_):
            raise ctx.err(key, v, "not a ZFS compression value", 'e.g. "off", "lz4", "zstd", "gzip-6"')
        return s_
    if axis in ZFS_CHOICES:
        return ctx.choice(key, v, ZFS_CHOICES[axis])
    if axis in VM_CHOICES:
        return ctx.choice(key, v, VM_CHOICES[axis])
    if axis == "qcow2_cluster":
        n = ctx.size(key, v)
        if n < 512 or n > 2 << 20 or n & (n - 1):
            raise ctx.err(key, v, "must be a power of two from 512 to 2M (qcow2's cluster sizes)", 'e.g. "8k", "64k"')
        return fmt_size(n)
    if axis == "l2_cache":
        return fmt_size(ctx.size(key, v))
    if axis in ("iothread", "guest_luks"):
        return ctx.boolean(key, v)
    if axis == "slog":
        return ctx.boolean(key, v)
    if axis == "rw":
        return ctx.choice(key, v, RW_VALUES)
    if axis == "workload":
        return ctx.choice(key, v, WORKLOADS)
    if axis in ("bs", "size"):
        return fmt_size(ctx.size(key, v))
    if axis == "iodepth":
        return ctx.integer(key, v, 1, 65536)
    if axis == "numjobs":
        return ctx.integer(key, v, 1, 1024)
    if axis == "rwmixread":
        return ctx.integer(key, v, 0, 100)
    if axis == "io":
        return ctx.choice(key, v, IO_MODES)
    if axis == "sync_mode":
        return ctx.choice(key, v, SYNC_MODES)
    if axis == "ioengine":
        s = ctx.string(key, v)
        if not re.match(r"^[a-z0-9_:]+$", s):
            raise ctx.err(key, v, "not an fio ioengine name", 'e.g. "libaio", "psync", "io_uring", "null"')
        return s
    if axis in ("layout", "cache", "tunables", "buffer_compress_percentage", "refill_buffers"):
        return _data_axis_value(ctx, key, axis, v)
    raise ctx.err(key, v, "unknown axis", "")


def _matrix(ctx: _Ctx, table: dict[str, Any], targets: tuple[Target, ...]) -> dict[str, tuple[Any, ...]]:
    ctx.unknown_keys(table, AXES, "matrix.")
    for required in ("rw", "bs"):
        if required not in table:
            raise ctx.err(
                f"matrix.{required}",
                None,
                "is required",
                f'e.g. {required} = ["read", "write"]' if required == "rw" else 'e.g. bs = ["4k", "1M"]',
            )
    out: dict[str, tuple[Any, ...]] = {}
    for axis in AXES:
        values = table.get(axis, DEFAULT_AXES.get(axis))
        if values is None:
            continue
        if not isinstance(values, list):
            values = [values]
        if not values:
            raise ctx.err(f"matrix.{axis}", values, "is empty", "give at least one value or remove the key")
        norm = tuple(_axis_value(ctx, f"matrix.{axis}", axis, v) for v in values)
        if len(set(norm)) != len(norm):
            raise ctx.err(f"matrix.{axis}", values, "lists a value twice", "remove the duplicate")
        out[axis] = norm
    zfs_kinds = {t.kind for t in targets} & set(ZFS_AXES_FOR)
    for axis in ZFS_AXES + VM_AXES:
        if axis in out and not any(axis in ZFS_AXES_FOR[k] for k in zfs_kinds):
            kinds = [k for k in ZFS_AXES_FOR if axis in ZFS_AXES_FOR[k]]
            raise ctx.err(
                f"matrix.{axis}",
                list(out[axis]),
                f"applies only to {' and '.join(kinds)} targets",
                "add such a target, or remove the axis",
            )
    _vm_axes(ctx, out)
    for size in out.get("size", ()):
        for t in targets:
            if t.size and parse_size(size) > t.size:
                raise ctx.err(
                    "matrix.size",
                    size,
                    f"is larger than target {t.name!r} ({fmt_size(t.size)})",
                    "make the target larger or the size smaller",
                )
    return out


def _vm_axes(ctx: _Ctx, out: Mapping[str, tuple[Any, ...]]) -> None:
    """A guest disk's backing-specific axes need that backing in the matrix (qcow2_cluster on a zvol is a
    mistake, not a no-op)."""
    backings = out.get("backing", ("zvol",))
    for axis, needs in (("qcow2_cluster", ("qcow2",)), ("l2_cache", ("qcow2",)), ("preallocation", ("qcow2", "raw"))):
        if axis in out and not set(needs) & set(backings):
            raise ctx.err(
                f"matrix.{axis}",
                list(out[axis]),
                f"applies only to backing = {' or '.join(needs)}, and the matrix has backing = {list(backings)}",
                f'add "{needs[0]}" to matrix.backing, or remove the axis',
            )
    buses = out.get("bus", ("virtio-blk",))
    if True in out.get("iothread", ()) and "virtio-blk" not in buses:
        raise ctx.err(
            "matrix.iothread",
            list(out["iothread"]),
            f"applies only to bus = virtio-blk, and the matrix has bus = {list(buses)} (tankbench hot-plugs "
            "virtio-scsi disks on the guest's one SCSI controller, which has no iothread of its own)",
            'add "virtio-blk" to matrix.bus, or remove the axis',
        )


def _match_value(ctx: _Ctx, key: str, axis: str, v: object, targets: tuple[Target, ...]) -> Any:
    if axis == "target":
        names = tuple(t.name for t in targets)
        return ctx.choice(key, v, names)
    if axis == "kind":
        return ctx.choice(key, v, kind_names())
    return _axis_value(ctx, key, axis, v)


def _rule(
    ctx: _Ctx, rule: dict[str, Any], i: int, section: str, matrix: Mapping[str, Any], targets: tuple[Target, ...]
) -> Mapping[str, tuple[Any, ...]]:
    """An exclude rule: axis -> accepted values; a test matching every key is dropped."""
    allowed = ("target", "kind") + AXES
    ctx.unknown_keys(rule, allowed, f"{section}[{i}].")
    if not rule:
        raise ctx.err(f"{section}[{i}]", rule, "is empty (it would match every test)", "name at least one axis")
    out = {}
    for axis, values in rule.items():
        vals = values if isinstance(values, list) else [values]
        out[axis] = tuple(_match_value(ctx, f"{section}[{i}].{axis}", axis, v, targets) for v in vals)
    return frozen_map(out)


def _include(
    ctx: _Ctx, rule: dict[str, Any], i: int, matrix: Mapping[str, Any], targets: tuple[Target, ...]
) -> Mapping[str, Any]:
    """An extra test: one value per axis; axes not given take the matrix's first value."""
    allowed = ("target",) + AXES
    ctx.unknown_keys(rule, allowed, f"include[{i}].")
    out: dict[str, Any] = {}
    for axis, v in rule.items():
        if isinstance(v, list):
            raise ctx.err(f"include[{i}].{axis}", v, "takes one value, not a list", "write one [[include]] per test")
        out[axis] = _match_value(ctx, f"include[{i}].{axis}", axis, v, targets)
    return frozen_map(out)


_FIO_RESERVED: dict[str, str] = {
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


def _fio(ctx: _Ctx, table: dict[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in table.items():
        if key in _FIO_RESERVED:
            raise ctx.err(f"fio.{key}", value, "is set by tankbench", _FIO_RESERVED[key])
        if not re.match(r"^[a-z0-9_]+$", key):
            raise ctx.err(f"fio.{key}", value, "is not an fio option name", "fio options are lower_case_words")
        if isinstance(value, bool):
            value = int(value)
        if not isinstance(value, (str, int, float)) or (isinstance(value, str) and "\n" in value):
            raise ctx.err(f"fio.{key}", value, "must be a string or number on one line", 'e.g. ioengine = "libaio"')
        out[key] = value
    return out


def describe_axes(spec: Spec) -> Callable[[str], int]:
    """How many values each axis has (names only show the axes that vary)."""
    return lambda axis: len(spec.matrix.get(axis, ()))


# -- pool layouts, tunables, layouts, cache state and size-based runs (issue 10) ---------------------------------
def _groups(items: tuple[str, ...]) -> str:
    """`raidz1(3)`, `mirror(2) mirror(2)`, `2 disks` for a vdev list in zpool grammar."""
    groups: list[list[Any]] = []
    plain = 0
    for x in items:
        if x in VDEV_GROUPS:
            groups.append([x, 0])
        elif groups:
            groups[-1][1] += 1
        else:
            plain += 1
    if plain:
        return f"{plain} disk{'s' if plain > 1 else ''}"
    return " ".join(f"{word}({n})" for word, n in groups)


def _vdev_list(ctx: _Ctx, key: str, items: object) -> tuple[str, ...]:
    """One vdev class in zpool create's grammar: devices by id, optionally grouped by mirror/raidzN keywords."""
    if not isinstance(items, list) or not all(isinstance(x, str) for x in items):
        raise ctx.err(f"pool.{key}", items, "must be a list of device paths", '["/dev/disk/by-id/…"]')
    if key == "confirm":
        return tuple(items)
    groups: list[tuple[str, int]] = []
    plain = 0
    for x in items:
        if x in VDEV_GROUPS:
            if key == "cache":
                raise ctx.err(
                    "pool.cache",
                    x,
                    "cache devices cannot be grouped",
                    "list the L2ARC devices by id without mirror/raidz",
                )
            if key in ("log", "special") and x != "mirror":
                raise ctx.err(f"pool.{key}", x, f"a {key} vdev is a disk or a mirror", '["mirror", a, b] or [a]')
            groups.append((x, 0))
        elif not x.startswith("/dev/disk/by-id/"):
            hint = (
                "use /dev/disk/by-id/… paths"
                if x.startswith("/")
                else f"group keywords are {', '.join(VDEV_GROUPS)}; devices are /dev/disk/by-id/… paths"
            )
            raise ctx.err(f"pool.{key}", x, "vdevs are named by stable id", hint)
        elif groups:
            groups[-1] = (groups[-1][0], groups[-1][1] + 1)
        else:
            plain += 1
    if groups and plain:
        raise ctx.err(
            f"pool.{key}",
            items,
            "mixes single disks with mirror/raidz groups",
            "start the list with a keyword and give every disk a group (zpool refuses mixed redundancy)",
        )
    for word, n in groups:
        if n < VDEV_GROUPS[word]:
            raise ctx.err(
                f"pool.{key}",
                items,
                f"a {word} group needs at least {VDEV_GROUPS[word]} devices (has {n})",
                f'e.g. ["{word}", {", ".join(["id"] * VDEV_GROUPS[word])}]',
            )
    return tuple(items)


def _check_devices_once(ctx: _Ctx, lists: Mapping[str, tuple[str, ...]]) -> None:
    """Each device in one place only, and every one of them confirmed (creating the pool destroys them)."""
    seen: dict[str, str] = {}
    for key in VDEV_CLASSES:
        for d in lists[key]:
            if d in VDEV_GROUPS:
                continue
            if d in seen:
                raise ctx.err(f"pool.{key}", d, f"is already listed in pool.{seen[d]}", "use each device once")
            seen[d] = key
    missing = [d for d in seen if d not in lists["confirm"]]
    if missing:
        raise ctx.err(
            "pool.confirm",
            list(lists["confirm"]),
            f"does not confirm {missing[0]}",
            "list every vdev, log, cache and special device again in confirm: creating the pool "
            "destroys their contents",
        )


def _run_mode(ctx: _Ctx, camp: Mapping[str, Any]) -> tuple[str, int]:
    """campaign.mode: "time" (runtime) or "size" (fio ends when each job has moved its size)."""
    mode = ctx.choice("campaign.mode", camp.get("mode", "time"), RUN_MODES)
    if mode == "size" and "runtime" in camp:
        raise ctx.err(
            "campaign.runtime",
            camp["runtime"],
            'has no meaning with mode = "size"',
            "remove runtime: each job ends after its size; campaign.min_throughput bounds the watchdog",
        )
    if mode == "time" and "min_throughput" in camp:
        raise ctx.err(
            "campaign.min_throughput",
            camp["min_throughput"],
            'applies only to mode = "size"',
            'remove it, or set mode = "size"',
        )
    floor = ctx.size("campaign.min_throughput", camp.get("min_throughput", "1M"))
    return mode, floor


def _layout_value(ctx: _Ctx, key: str, v: object) -> str:
    """random | zero | unwritten | compressible:<N>% (N from 1 to 99)."""
    if isinstance(v, str) and v.startswith("compressible:"):
        m = re.match(r"^compressible:([0-9]{1,2})%$", v)
        if not m or not 1 <= int(m.group(1)) <= 99:
            raise ctx.err(
                key,
                v,
                "needs a percentage from 1 to 99",
                'e.g. "compressible:50%" (half of each block compresses away)',
            )
        return f"compressible:{int(m.group(1))}%"
    if v not in LAYOUTS:
        raise ctx.err(
            key,
            v,
            f"must be one of {', '.join(LAYOUTS)} or compressible:<N>%",
            'e.g. layout = ["unwritten", "random"] (seed 002: never-written vs written file)',
        )
    return str(v)


def _data_axis_value(ctx: _Ctx, key: str, axis: str, v: object) -> Any:
    if axis == "layout":
        return _layout_value(ctx, key, v)
    if axis == "cache":
        return ctx.choice(key, v, CACHE_STATES)
    if axis == "tunables":
        return canonical_tunables(_tunable_set(ctx, key, v))
    if axis == "buffer_compress_percentage":
        return ctx.integer(key, v, 0, 100)
    return ctx.boolean(key, v)


TUNABLE_RE = re.compile(r"^[a-z][a-z0-9_]{0,63}$")
TUNABLE_VALUE_RE = re.compile(r"^-?[A-Za-z0-9_.:,+-]{1,64}$")


def _tunable_set(ctx: _Ctx, key: str, table: object) -> dict[str, str]:
    """A table of ZFS module parameters (names as in /sys/module/zfs/parameters) and their values."""
    if not isinstance(table, dict):
        raise ctx.err(
            key,
            table,
            "must be a table of module parameters",
            "e.g. tunables = [{}, { zfs_txg_timeout = 10 }] ({} keeps the host's values)",
        )
    out: dict[str, str] = {}
    for name, value in table.items():
        if not TUNABLE_RE.match(name):
            raise ctx.err(
                f"{key}.{name}",
                value,
                "is not a module parameter name",
                "names as in /sys/module/zfs/parameters, e.g. zfs_txg_timeout",
            )
        if isinstance(value, bool) or not isinstance(value, (int, str)) or not TUNABLE_VALUE_RE.match(str(value)):
            raise ctx.err(
                f"{key}.{name}",
                value,
                "must be a whole number or a short word",
                "e.g. zfs_txg_timeout = 10, zfs_arc_max = 1073741824 (bytes)",
            )
        out[name] = str(value)
    return out


def _tunables_table(ctx: _Ctx, table: dict[str, Any]) -> dict[str, str]:
    """[tunables]: module parameters fixed for the whole campaign (merged under matrix.tunables)."""
    return _tunable_set(ctx, "tunables", table) if table else {}


def _check_new_axes(
    ctx: _Ctx,
    matrix: Mapping[str, tuple[Any, ...]],
    fio: Mapping[str, Any],
    pool: PoolSpec | None,
    targets: tuple[Target, ...],
    mode: str,
) -> None:
    """Cross-key rules of the issue-10 keys: one place per fio buffer option, cold caches only where
    tankbench may export the pool, size-based runs only with a size, slog only with single log disks."""
    for axis in ("buffer_compress_percentage", "refill_buffers"):
        if axis in matrix and axis in fio:
            raise ctx.err(f"fio.{axis}", fio[axis], f"is also an axis (matrix.{axis})", "set it in one place")
    if "cold" in matrix.get("cache", ()) and pool is not None and not pool.creates:
        raise ctx.err(
            "matrix.cache",
            list(matrix["cache"]),
            "cold needs a pool tankbench creates",
            "emptying the ARC means exporting and importing the pool; tankbench never exports a pool "
            'it did not create: use [pool] name + vdevs, or drop "cold"',
        )
    guests = [i for i, t in enumerate(targets) if t.kind == "vm-disk"]
    if "cold" in matrix.get("cache", ()) and guests:
        raise ctx.err(
            "matrix.cache",
            list(matrix["cache"]),
            f"cold cannot be applied to a vm-disk target (target[{guests[0]}])",
            "emptying the ARC exports and imports the pool, and a running test guest holds its disk open: "
            'drop "cold", or move the vm-disk target to a campaign of its own',
        )
    if True in matrix.get("slog", ()) and pool is not None and any(d in VDEV_GROUPS for d in pool.log):
        raise ctx.err(
            "pool.log",
            list(pool.log),
            "the slog axis adds and removes single log disks",
            "list the log disks without mirror, or remove the slog axis",
        )
    if mode == "size":
        for i, t in enumerate(targets):
            if not t.size and "size" not in matrix:
                raise ctx.err(
                    f"target[{i}].size",
                    None,
                    "size-based runs need a size",
                    'give the target a size, or set matrix.size = ["256M"]',
                )


def _guest_copies(
    ctx: _Ctx,
    matrix: Mapping[str, tuple[Any, ...]],
    includes: tuple[Mapping[str, Any], ...],
    targets: tuple[Target, ...],
) -> None:
    """cp and rsync on a vm-disk target write a file in the guest's filesystem: refuse them where the guest has
    none (guest_fs = "none" only), instead of planning copy tests that cannot run or dropping them unasked."""
    vm = [t.name for t in targets if t.kind == "vm-disk"]
    copies = [w for w in matrix.get("workload", ()) if w in guest_layers.FILE_COPIES]
    hint = 'add "ext4" or "xfs" to matrix.guest_fs, or use workload = "dd" (it can write the guest\'s disk itself)'
    if vm and copies and len(vm) == len(targets) and set(matrix.get("guest_fs", ("none",))) == {"none"}:
        raise ctx.err(
            "matrix.workload",
            list(matrix["workload"]),
            f"{' and '.join(copies)} {'write' if len(copies) > 1 else 'writes'} a file in the test guest's "
            f"filesystem, and matrix.guest_fs = {list(matrix.get('guest_fs', ('none',)))} gives it none",
            hint,
        )
    for i, inc in enumerate(includes):
        fs = inc.get("guest_fs", matrix.get("guest_fs", ("none",))[0])
        if (
            inc.get("workload") in guest_layers.FILE_COPIES
            and fs == "none"
            and inc.get("target", vm[0] if vm else "") in vm
        ):
            raise ctx.err(
                f"include[{i}].workload",
                inc["workload"],
                "writes a file in the test guest, which has no filesystem",
                hint,
            )
