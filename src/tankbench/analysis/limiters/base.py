"""The values a limiter rule returns and the registry entry a rule is."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

from tankbench.analysis.limiters.facts import RunFacts

#: every limiter kind, as `limit.kind` names it (the order is the report's legend order)
KINDS = (
    "data-disks",
    "log-device",
    "cpu",
    "write-throttle",
    "read-modify-write",
    "arc",
    "network",
    "not-determined",
)
#: what each kind means, one phrase (reports, `advise`)
LABELS = {
    "data-disks": "the pool's data disks (IOPS or bandwidth)",
    "log-device": "the log device (sync writes wait for the ZIL)",
    "cpu": "the CPU",
    "write-throttle": "ZFS's dirty-data write throttle / txg sync",
    "read-modify-write": "read-modify-write (small writes into larger blocks make the disks read)",
    "arc": "the ARC (the run measured memory, not the pool)",
    "network": "the network",
    "not-determined": "not determined",
}


@dataclass(frozen=True)
class Finding:
    """A rule's verdict on one run: it holds, how strongly (`score`: the share of the resource's limit reached,
    1.0 for a mechanism that holds), which part (`detail`: a disk, "emulator", "fio", a thread group) and the
    sentence with the figures that show it."""

    kind: str
    score: float
    evidence: str
    detail: str = ""
    figures: Mapping[str, float] = field(default_factory=dict)


@dataclass(frozen=True)
class Rule:
    """One limiter: `find` returns a Finding when the run's figures show it bounded the run, else None.
    `tier`: mechanisms that explain a resource's saturation (1: the run did not measure the pool at all; 2: ZFS
    made the disks or the writer wait) win over plain resources (3), which compete by score."""

    kind: str
    tier: int
    find: Callable[[RunFacts], Finding | None]
    #: what the rule reads, for docs and "not determined"
    reads: str


@dataclass(frozen=True)
class Limit:
    """What bounded one run: `kind` (one of KINDS), `evidence` (one sentence with figures), the part named
    (`detail`), the figures, and the evidence the run lacked (`missing`)."""

    kind: str
    evidence: str
    detail: str = ""
    figures: Mapping[str, float] = field(default_factory=dict)
    missing: tuple[str, ...] = ()

    @property
    def label(self) -> str:
        """Short: "data disks (tbdata0)", "cpu (emulator)", "write throttle"."""
        name = self.kind.replace("-", " ")
        return f"{name} ({self.detail})" if self.detail else name

    def checks(self) -> dict[str, object]:
        """The run's `limit.*` checks (journal, `results`, CSV/JSON)."""
        out: dict[str, object] = {"limit.kind": self.kind, "limit.evidence": self.evidence}
        if self.detail:
            out["limit.detail"] = self.detail
        if self.figures:
            out["limit.figures"] = dict(self.figures)
        if self.missing:
            out["limit.missing"] = list(self.missing)
        return out


def count(x: float) -> str:
    """A count or rate as people read it: 1,900 / 39 / 3.5."""
    return f"{x:,.0f}" if abs(x) >= 10 else f"{x:.1f}".rstrip("0").rstrip(".") or "0"


def size(n: float) -> str:
    for unit, f in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if abs(n) >= f:
            return f"{n / f:.1f} {unit}"
    return f"{n:.0f} B"
