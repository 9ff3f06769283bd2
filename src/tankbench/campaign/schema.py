"""A validated campaign as values: Spec and its parts (host, pool, cooldown, schedule). Frozen, no parsing."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from tankbench.campaign.claims import Claim
from tankbench.campaign.fill import DEFAULT_ROOM
from tankbench.campaign.hosts import FleetSpec
from tankbench.campaign.report import Settings
from tankbench.campaign.unattended import Unattended
from tankbench.diskmodels import LabMachine
from tankbench.model import Target, frozen_map, short_hash
from tankbench.preflight import PreflightPolicy
from tankbench.zfs.vdevs import grouped, leaves


@dataclass(frozen=True)
class HostSpec:
    """Where the campaign runs: auto (local if it has ZFS, else the lab), local, lab or ssh."""

    kind: str = "auto"
    address: str = ""
    #: every ssh host entry ([host], --host ssh://, campaign.hosts, a target's clients) logs in as root unless it
    #: names a user: ZFS and raw devices need root there
    user: str = "root"
    port: int = 22
    identity: str = ""
    #: an ssh host's own known_hosts file (else the user's, as ssh reads it)
    known_hosts: str = ""
    lab_name: str = "default"
    lab_disks: int = 2
    lab_slog: bool = True
    #: the lab's disk models and ARC size (diskmodels.py)
    lab_machine: LabMachine = LabMachine()


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
        return tuple(leaves(self.vdevs))

    @property
    def devices(self) -> tuple[str, ...]:
        """Every device the pool is created on: data, log, cache and special (no keywords)."""
        return tuple(leaves(self.vdevs + self.log + self.cache + self.special))

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
    #: repeat only where the order is in doubt (`repeats.settle`, the margin within which order does not matter)
    settle: float | None = None
    ss: str = ""
    ss_dur_s: float = 0.0
    ss_ramp_s: float = 0.0
    #: `repeats.decide`: the error rate at which every claim and leaderboard order is decided (schedule/decide.py)
    decide: float | None = None
    #: with `decide`: leaderboard orders count too (`run`); `check` decides the claims alone
    decide_orders: bool = True
    #: the claims `decide` waits for (the campaign's [[claim]]s and [[goal]]s)
    claims: tuple[Claim, ...] = ()
    #: how test cases are named (report.test_case): a goal's `case` is one of these names
    case_keys: tuple[str, ...] = ("rw", "bs")

    @property
    def adaptive(self) -> bool:
        """Whether the number of repeats is decided while the campaign runs."""
        rules = (self.ci, self.settle, self.decide)
        return self.repeats_min < self.repeats_max and (self.racing or any(r is not None for r in rules))


#: `campaign.design`: the steps a campaign file may ask for (`refine` is `tankbench refine`'s, after a screening)
DESIGN_STEPS = ("exhaustive", "screening")


@dataclass(frozen=True)
class Design:
    """How the tests to run are chosen (schedule/design.py): `exhaustive` (the matrix), `screening` (a D-optimal
    fraction per workload), `refine` (the tests `tankbench refine` chose, by id). `top`: factors a refine
    measures in full; `runs`: tests per workload in a screening (0: the model's size plus a quarter);
    `workload`: the axes a workload is made of (the rest are factors)."""

    step: str = "exhaustive"
    top: int = 3
    runs: int = 0
    workload: tuple[str, ...] = ("workload", "rw", "bs")
    ids: frozenset[str] = frozenset()


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
    #: [report], [mix] and [[goal]]: what the report reads (checked when the campaign is read)
    report: Settings = field(default_factory=Settings)
    #: what the command line resolved for this campaign (`resolved_sizes`: relative sizes made absolute)
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
    #: several hosts ([campaign] hosts, hosts_mode): None for a campaign on one host
    fleet: FleetSpec | None = None
    #: the watchdog, crash retries, waiting for the host, the event hook (campaign/unattended.py)
    unattended: Unattended = field(default_factory=Unattended)
    #: when not empty, the ids of the only tests expand() keeps (`tankbench check`: the tests that decide the claims),
    #: numbered as in the whole matrix
    only: frozenset[str] = frozenset()
    #: which of the tests this step runs (campaign.design; issue 29)
    design: Design = field(default_factory=Design)

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


# -- pool layouts, tunables, layouts, cache state and size-based runs (issue 10) ---------------------------------
def _groups(items: tuple[str, ...]) -> str:
    """`raidz1(3)`, `mirror(2) mirror(2)`, `2 disks` for a vdev list in zpool grammar."""
    plain, groups = grouped(items)
    if plain:
        return f"{len(plain)} disk{'s' if len(plain) > 1 else ''}"
    return " ".join(f"{g.word}({len(devices)})" for g, devices in groups)
