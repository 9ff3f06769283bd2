"""Seeds 001 and 003 side by side: per workload, each test guest disk (backing and qemu settings) next to the
same workload on the host, with what the sync check found and the guest/host ratio.

A table appears for every test case and workload that has vm-disk tests. Rows: the guest's configurations, then
the host's zvol and dataset tests with the same workload. Every figure is the mean of the test's measured runs;
the check columns say how many measured runs passed.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from tankbench.analysis.cases import Dataset, RunView, TestSummary
from tankbench.analysis.leaderboard import Ratio, rank, ratio
from tankbench.model import FIO_JOB_AXES

#: what decides a workload (the same fio job on either side); the rest of the params is the storage setup
WORKLOAD_KEYS = (*FIO_JOB_AXES, "workload")
#: the settings that tell guest configurations apart, in the order a reader compares them
SETUP_KEYS = (
    "backing",
    "qcow2_cluster",
    "preallocation",
    "l2_cache",
    "guest_fs",
    "guest_luks",
    "bus",
    "disk_cache",
    "aio",
    "iothread",
    "recordsize",
    "volblocksize",
    "compression",
    "sync",
    "logbias",
    "slog",
    "encryption",
)


@dataclass(frozen=True)
class CheckCount:
    """How many measured runs a check held in, of those that recorded it (n = 0: not recorded)."""

    passed: int
    n: int

    @property
    def text(self) -> str:
        if not self.n:
            return "not recorded"
        if self.passed == self.n:
            return "yes" if self.n == 1 else f"yes ({self.n}/{self.n})"
        return "no" if self.passed == 0 else f"{self.passed}/{self.n} runs"


@dataclass(frozen=True)
class GuestRow:
    """One test of the table: its side (guest or host), storage setup, figures and sync findings."""

    test: TestSummary
    side: str  # "guest" | "host"
    setup: str
    honoured: CheckCount
    early_ack: CheckCount  # runs whose final fsync showed writes acknowledged long before durable
    drain_s: float | None  # mean host drain after the job (recorded, not judged)
    notes: tuple[str, ...]
    vs_host: Ratio | None  # guest rows: against the best host row of the table


@dataclass(frozen=True)
class GuestTable:
    """One workload of one test case, guest configurations and host tests side by side."""

    case: str
    workload: str
    metric: str  # registry key the rows are ranked and compared by (the case's ranking figure)
    rows: tuple[GuestRow, ...]
    best_host: TestSummary | None


def _workload(t: TestSummary) -> tuple[tuple[str, str], ...]:
    return tuple(sorted((k, str(v)) for k, v in t.params.items() if k in WORKLOAD_KEYS))


def setup_text(t: TestSummary) -> str:
    """ "qcow2 cluster 8k, virtio-scsi, cache none" for a guest disk; "zvol volblocksize 8k" on the host."""
    p = {**t.props, **t.params}
    if not t.traits.runs_in_guest:
        bits = [t.target_kind] + [f"{k} {p[k]}" for k in SETUP_KEYS if k in p and k not in ("backing",)]
        return ", ".join(bits)
    backing = str(p.get("backing", "zvol"))
    bits = [backing + (f" cluster {p['qcow2_cluster']}" if "qcow2_cluster" in p else "")]
    for k in SETUP_KEYS[2:]:
        if k in p:
            v = p[k]
            bits.append(k if v is True else f"no {k}" if v is False else f"{k.replace('disk_', '')} {v}")
    return ", ".join(bits)


def _count(runs: Sequence[RunView], key: str) -> CheckCount:
    seen = [r.extra[key] for r in runs if isinstance(r.extra.get(key), bool)]
    return CheckCount(sum(1 for v in seen if v), len(seen))


def _notes(runs: Sequence[RunView]) -> tuple[str, ...]:
    out: dict[str, None] = {}
    for r in runs:
        for key in ("sync.note", "sync.early_ack_note"):
            if isinstance(r.extra.get(key), str):
                out[str(r.extra[key])] = None
    return tuple(out)


def _mean(xs: Sequence[float | None]) -> float | None:
    vals = [x for x in xs if x is not None]
    return sum(vals) / len(vals) if vals else None


def _row(t: TestSummary, metric: str, best_host: TestSummary | None) -> GuestRow:
    runs = t.measured
    guest = t.traits.runs_in_guest
    vs = ratio(t, best_host, metric, f"the host's best (test #{best_host.number})") if guest and best_host else None
    return GuestRow(
        test=t,
        side="guest" if guest else "host",
        setup=setup_text(t),
        honoured=_count(runs, "sync.honoured"),
        early_ack=_count(runs, "sync.early_ack"),
        drain_s=_mean([r.drain_s for r in runs]),
        notes=_notes(runs),
        vs_host=vs,
    )


def guest_tables(ds: Dataset, metric_of: Mapping[str, tuple[str, str]]) -> tuple[GuestTable, ...]:
    """One table per test case and workload that has vm-disk tests (none for campaigns without them)."""
    out = []
    for case, tests in ds.cases().items():
        key = metric_of[case][0]
        groups: dict[tuple[tuple[str, str], ...], list[TestSummary]] = {}
        for t in tests:
            if t.traits.runs_in_guest or t.traits.host_zfs:
                groups.setdefault(_workload(t), []).append(t)
        for wl, group in groups.items():
            guests = rank([t for t in group if t.traits.runs_in_guest], key)
            if not guests:
                continue
            hosts = rank([t for t in group if t.traits.host_zfs], key)
            best = next((h for h in hosts if h.mean(key) is not None), None)
            rows = tuple(_row(t, key, best) for t in [*guests, *hosts])
            workload = ", ".join(f"{k} {v}" for k, v in wl if k not in ("rw", "bs"))
            out.append(GuestTable(case, workload, key, rows, best))
    return tuple(out)
