"""Disk models for the lab's disks: what a named model means, parsing the `[host]` keys that choose them, and
applying them to a running lab (qemu block throttling over QMP; the ARC size over ssh).

The lab's disks are sparse files in the host's page cache: unmodelled, a "disk" reads at GB/s and no
disk-bound effect can be seen. A model throttles a drive in qemu (`block_set_io_throttle`: ops/s and
bytes/s, with `iops_size` so a request larger than it counts as several ops), so the modelled disk, not the
emulated CPU, is the bottleneck. The models are scaled down from the real disks they stand for (an HDD's
~150 random IOPS becomes 40) because the emulated CPU under TCG is ~20x slower than a real one: the gap
between a disk-bound and a CPU-bound path must stay as wide as on a real machine. The ladder between models
is compressed to fit under the emulator's own ceiling (~2,700 4k IOPS at QD1): an `optane` is 25 `hdd`s
here, not 3,000. `bench/disk-models` measures every model against these numbers.

Flushes: qemu does not throttle them. The lab's drives keep qemu's default cache (writeback): a guest flush
is an fdatasync of the image file on the host, a real but unmodelled cost, small on a host with a fast disk
(`bench/disk-models`: `optane` sync 4k writes at 0.98 of the model on the CI machine). A sync 4k write
therefore costs one op of the model, as a write plus its cache flush roughly does on a real 7200 rpm disk.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from tankbench.units import parse_size

MIB = 1 << 20


@dataclass(frozen=True)
class DiskModel:
    """A modelled disk: a rate of ops and of bytes (0 = unlimited); `iops_size`: a request larger than it
    counts as size/iops_size ops (0 = every request is one op)."""

    name: str
    iops: int
    mib_s: int
    iops_size: int
    stands_for: str

    def throttle(self) -> dict[str, int]:
        """The arguments of QMP block_set_io_throttle for this model (all zero: no throttling)."""
        args = {
            "bps": self.mib_s * MIB,
            "bps_rd": 0,
            "bps_wr": 0,
            "iops": self.iops,
            "iops_rd": 0,
            "iops_wr": 0,
        }
        if self.iops_size:
            args["iops_size"] = self.iops_size
        return args

    def rate(self, bs: int) -> tuple[float, float]:
        """What the model allows for requests of `bs` bytes: (ops/s, MiB/s); inf where it sets no limit."""
        limits: list[float] = []
        if self.iops:
            cost = max(1.0, bs / self.iops_size) if self.iops_size else 1.0
            limits.append(self.iops / cost)
        if self.mib_s:
            limits.append(self.mib_s * MIB / bs)
        ops = min(limits) if limits else float("inf")
        return ops, ops * bs / MIB

    def describe(self) -> str:
        if not self.iops and not self.mib_s:
            return f"{self.name}: not modelled ({self.stands_for})"
        size = f", requests over {self.iops_size // 1024}k count by size" if self.iops_size else ""
        return f"{self.name}: {self.iops} IOPS, {self.mib_s} MiB/s{size} (stands for {self.stands_for})"


MODELS: dict[str, DiskModel] = {
    m.name: m
    for m in (
        DiskModel("none", 0, 0, 0, "a sparse file in the host's page cache: the emulator's speed"),
        DiskModel("hdd", 40, 16, 1 * MIB, "a 7200 rpm disk: ~150 random IOPS, ~150 MB/s, scaled down"),
        DiskModel("ssd", 250, 64, 256 << 10, "a SATA SSD, scaled down and compressed under the emulator"),
        DiskModel("nvme", 600, 128, 256 << 10, "an NVMe SSD, scaled down and compressed under the emulator"),
        DiskModel(
            "optane",
            1000,
            128,
            128 << 10,
            "a low-latency log device (Optane, ZeusRAM): the fastest the emulator keeps steady",
        ),
    )
}
#: the smallest zfs_arc_max OpenZFS accepts (smaller values are ignored by the module)
ARC_MIN = 64 * MIB
#: the fastest link model (Mb/s): the emulator's user-mode network moves far less
LINK_MAX = 10_000


@dataclass(frozen=True)
class LabMachine:
    """The lab machine a campaign asks for: its disks' models and the ARC's size (0 = the module's default)."""

    disk_model: str = "none"
    slog_model: str = "none"
    l2arc: bool = False
    l2arc_model: str = "none"
    arc_max: int = 0
    #: the lab's network link in Mb/s (0: not modelled): its NIC is shaped to this rate and says it (issue 32)
    link_mbps: int = 0

    def models(self, disks: int, slog: bool) -> dict[str, str]:
        """Drive id -> model name, for every disk of a lab with this many data disks (and a log disk)."""
        out = {f"tbdata{i}": self.disk_model for i in range(disks)}
        if slog:
            out["tblog0"] = self.slog_model
        if self.l2arc:
            out["tbcache0"] = self.l2arc_model
        return out


def data_disk_ids(disks: int, slog: bool = False, l2arc: bool = False) -> list[str]:
    """The serials of a lab's disks: tbdata0.. then tblog0, then tbcache0 (pure: the parser checks a lab campaign's
    pool against them, the lab gives its disks these serials)."""
    return [f"tbdata{i}" for i in range(disks)] + (["tblog0"] if slog else []) + (["tbcache0"] if l2arc else [])


#: the [host] keys this module reads
HOST_KEYS = ("disk_model", "slog_model", "l2arc", "l2arc_model", "arc_max", "link_mbps")


def parse_host_keys(table: Mapping[str, Any], err: Callable[[str, object, str, str], Exception]) -> LabMachine:
    """The lab machine from a campaign's [host] table; `err(key, value, problem, hint)` makes the error."""
    names = tuple(MODELS)

    def model(key: str) -> str:
        value = table.get(key, "none")
        if not isinstance(value, str) or value not in MODELS:
            raise err(f"host.{key}", value, f"is not a disk model ({', '.join(names)})", f'e.g. {key} = "hdd"')
        return str(value)

    l2arc = table.get("l2arc", False)
    if not isinstance(l2arc, bool):
        raise err("host.l2arc", l2arc, "must be true or false", "write it without quotes: true / false")
    arc_max = 0
    if "arc_max" in table:
        raw = table["arc_max"]
        try:
            arc_max = parse_size(raw)
        except (ValueError, TypeError):
            raise err("host.arc_max", raw, "not a size", 'write e.g. arc_max = "256M"') from None
        if arc_max < ARC_MIN:
            raise err("host.arc_max", raw, "is below the 64M that OpenZFS accepts", 'e.g. arc_max = "256M"')
    if "l2arc_model" in table and not l2arc:
        raise err("host.l2arc_model", table["l2arc_model"], "needs a cache disk", "add l2arc = true")
    link = table.get("link_mbps", 0)
    if not isinstance(link, int) or isinstance(link, bool) or not 0 <= link <= LINK_MAX:
        raise err(
            "host.link_mbps",
            link,
            f"must be a whole number of Mb/s from 0 (not modelled) to {LINK_MAX}",
            "e.g. link_mbps = 40",
        )
    return LabMachine(
        disk_model=model("disk_model"),
        slog_model=model("slog_model"),
        l2arc=l2arc,
        l2arc_model=model("l2arc_model"),
        arc_max=arc_max,
        link_mbps=link,
    )


def fingerprint(models: Mapping[str, str], arc_max: int, arc_c_max: int, link_mbps: int = 0) -> dict[str, object]:
    """What a run's fingerprint records about the lab machine: every disk's model with its numbers, the ARC, and
    the network link's model when there is one."""
    out: dict[str, object] = {
        "lab_disk_models": {d: MODELS[m].describe() for d, m in sorted(models.items())},
        "lab_arc_max": arc_max,
        "lab_arc_c_max": arc_c_max,
    }
    if link_mbps:
        out["lab_link_mbps"] = link_mbps
    return out


def link_script(iface: str, mbps: int) -> str:
    """The guest's shell commands that shape its NIC's egress to `mbps` (tc tbf) and then print the root qdisc, or
    remove the shaping (0): the server's sending side is what a network share's reads wait for."""
    if not mbps:
        return f"tc qdisc del dev {iface} root 2>/dev/null; tc qdisc show dev {iface}"
    burst = max(32, mbps * 1000 // 8 // 100)  # KiB: at least one timer tick's worth at HZ=100
    return f"tc qdisc replace dev {iface} root tbf rate {mbps}mbit burst {burst}kb latency 200ms && tc qdisc show dev {iface}"


def summary(models: Mapping[str, str]) -> str:
    """e.g. 'tbdata0-2: hdd; tblog0: optane' (pure)."""
    groups: dict[str, list[str]] = {}
    for d, m in models.items():
        groups.setdefault(m, []).append(d)
    return "; ".join(f"{', '.join(ds)}: {m}" for m, ds in groups.items())
