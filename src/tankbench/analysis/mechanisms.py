"""Warnings that name a ZFS mechanism (issue 32): each names the one that fits the run's direction — reads of part
of a block read the whole block (read amplification), writes of part of a block read-modify-write it — with the
factor the run measured; and the ARC warning is the ARC limiter rule itself (data hits, checked against the bytes
the disks read), not a hit ratio that counts metadata."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass

from tankbench.analysis.cases import Dataset, TestSummary
from tankbench.analysis.limiters import arc, rmw
from tankbench.analysis.limiters.base import size
from tankbench.analysis.limiters.facts import RunFacts
from tankbench.analysis.warning import Warning
from tankbench.units import pct


@dataclass(frozen=True)
class MechanismCheck:
    """A rule about a test's last measured run whose message names, per test, what the run measured: `says`
    returns that phrase, or None when the rule does not hold for the test."""

    code: str
    severity: str
    message: str
    fix: str
    says: Callable[[RunFacts], str | None]

    def warnings(self, ds: Dataset) -> Iterator[Warning]:
        hits = [(t, p) for t in ds.tests if t.facts is not None and (p := self.says(t.facts)) is not None]
        if hits:
            shown = "; ".join(f"#{t.number}: {p}" for t, p in hits[:6]) + (" …" if len(hits) > 6 else "")
            yield Warning(self.code, self.severity, f"{self.message} ({shown})", self.fix, tuple(t.id for t, _ in hits))


def _reads(f: RunFacts) -> bool:
    return f.direction in ("read", "mixed")


def _writes(f: RunFacts) -> bool:
    return f.direction in ("write", "mixed")


def _measured_reads(f: RunFacts) -> str:
    disk = arc.disk_read_bytes(f)
    if disk is None or f.read_bytes <= 0:
        return "amplification not measured"
    return f"the disks read {disk / f.read_bytes:.1f}× what fio read"


def _measured_writes(f: RunFacts) -> str:
    factor = rmw.read_factor(f)
    return "not measured" if factor is None else f"the disks read {factor:.2f} B per B fio wrote"


def _partial(f: RunFacts) -> str:
    return f"{size(f.bs)} I/O into {size(f.block)} blocks" if f.block and f.bs else "bs not a whole number of blocks"


def direct_unaligned(f: RunFacts) -> str | None:
    """O_DIRECT with bs not a multiple of the block: reads read whole blocks; writes read-modify-write them."""
    if not f.direct or not f.zfs or not rmw.partial(f):
        return None
    parts = []
    if _reads(f):
        parts.append(f"reads amplify: {_measured_reads(f)}")
    if _writes(f):
        parts.append(f"writes read-modify-write: {_measured_writes(f)}")
    return f"{_partial(f)}; " + "; ".join(parts)


def partial_record_writes(f: RunFacts) -> str | None:
    """Writes of part of a block (any io): ZFS reads the rest of the block before it writes it back."""
    if not _writes(f) or not f.zfs or not rmw.partial(f) or f.direct:
        return None
    return f"{_partial(f)}; {_measured_writes(f)}"


def arc_hits(f: RunFacts) -> str | None:
    """The ARC limiter rule: the run's data reads came from the ARC, not the disks."""
    found = arc.find(f)
    if found is None:
        return None
    share = found.figures.get("disk_read_share")
    disks = f", disks {pct(share)} of fio's reads" if share is not None else ""
    return f"{pct(found.score)} of data reads hit{disks}"


#: the mechanism warnings, listed after the other checks' (analysis/checks.py)
MECHANISM_CHECKS: tuple[MechanismCheck, ...] = (
    MechanismCheck(
        "direct-unaligned",
        "warning",
        "O_DIRECT with a block size that is not a multiple of recordsize/volblocksize: a read reads the whole "
        "record (read amplification); a write read-modify-writes it",
        "match bs to recordsize (or volblocksize), or test buffered I/O",
        direct_unaligned,
    ),
    MechanismCheck(
        "partial-record-writes",
        "warning",
        "Writes of part of a record/volblock: ZFS reads the rest of the block and writes it whole "
        "(read-modify-write) unless the block is in the ARC",
        "match bs to recordsize/volblocksize, or expect this cost in the numbers",
        partial_record_writes,
    ),
    MechanismCheck(
        "arc-hits",
        "warning",
        "The ARC served over 90 % of the data reads (demand and prefetch data hits) and the disks read under 10 % "
        "of what fio read: the reads measure the cache",
        "make the working set larger than the ARC, or set primarycache=metadata for the test",
        arc_hits,
    ),
)


def limiter_of(t: TestSummary) -> str:
    """The test's limiter as a leaderboard shows it: "data disks (tbdata0)", "-" when not known."""
    return t.limit.label if t.limit is not None else "-"
