"""Why (issue 32): what bounded each test, said where people look — a test case whose winner and runner-up were
bounded by different things says so in one sentence — and the campaign that would move each limiter (`advise`).
Pure: reads the Dataset's per-test limiters (analysis/limiters)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from tankbench.analysis.cases import Dataset, TestSummary
from tankbench.analysis.leaderboard import Leaderboard
from tankbench.analysis.limiters import LABELS, Limit
from tankbench.units import fmt_size


def short(evidence: str) -> str:
    """The evidence's first clause (up to the first ';' outside parentheses), for a sentence naming two limiters."""
    depth = 0
    for i, c in enumerate(evidence):
        depth += {"(": 1, ")": -1}.get(c, 0)
        if c == ";" and depth <= 0:
            return evidence[:i].strip()
    return evidence.strip()


def bound_by(t: TestSummary) -> str:
    """ "#3 zfs-zvol-… is bound by the data disks (tbdata0): tbdata0 at 39 IOPS of the 40 …"."""
    limit = t.limit
    if limit is None:
        return f"#{t.number} {t.name}: not measured"
    if limit.kind == "not-determined":
        return f"#{t.number} {t.name}: limiter not determined ({short(limit.evidence)})"
    part = f" ({limit.detail})" if limit.detail and limit.detail not in LABELS[limit.kind] else ""
    return f"#{t.number} {t.name} is bound by {LABELS[limit.kind]}{part}: {short(limit.evidence)}"


def pair_sentence(lb: Leaderboard) -> str:
    """One sentence when a test case's winner and runner-up were bounded by different things, else ''."""
    rows = [r for r in lb.rows if r.value is not None]
    if len(rows) < 2:
        return ""
    a, b = rows[0].test, rows[1].test
    if a.limit is None or b.limit is None or a.limit.kind == b.limit.kind:
        return ""
    return f"Different limiters at the top: {bound_by(a)}; {bound_by(b)}."


@dataclass(frozen=True)
class Move:
    """The campaign that would move a limiter: what to vary and the campaign lines that do it."""

    limiter: str
    text: str
    campaign: str


def move(t: TestSummary) -> Move | None:
    """What to run next to move this test's limiter (None when there is nothing to propose)."""
    limit = t.limit
    if limit is None:
        return None
    p = t.axes()
    text, lines = _move(limit, t, str(p.get("bs", "")), str(p.get("sync_mode", "async")))
    return Move(limit.kind, text, lines) if text else None


def _move(limit: Limit, t: TestSummary, bs: str, sync: str) -> tuple[str, str]:
    kind, p = limit.kind, t.axes()
    if kind == "log-device" or (kind == "data-disks" and sync != "async" and not p.get("slog")):
        if kind == "data-disks":
            return (
                "sync writes wait for the ZIL on the data disks: try a separate log device",
                "[matrix]\nslog = [false, true]",
            )
        return (
            "the log device is the limit: a faster log device, or logbias=throughput for large sync writes",
            '[matrix]\nlogbias = ["latency", "throughput"]',
        )
    if kind == "read-modify-write":
        key = "volblocksize" if t.traits.volume else "recordsize"
        return (
            f"writes of part of a block: a {key} that matches bs {bs}",
            f'[matrix]\n{key} = ["{bs}", "{p.get(key, "default")}"]',
        )
    if kind == "arc":
        size = max(t.size, 1) * 4
        return (
            "the reads measured the ARC: a working set larger than the ARC (or primarycache=metadata)",
            f'# [[target]] size = "{fmt_size(size)}" (or more than the ARC\'s c_max)\n[matrix]\nprimarycache = ["all", "metadata"]',
        )
    if kind == "write-throttle":
        return (
            "ZFS's write throttle held the writers: more dirty data room, or faster data disks",
            "[matrix]\ntunables = [{}, { zfs_dirty_data_max = 4294967296 }]",
        )
    if kind == "data-disks":
        return (
            "the data disks are the limit: more or faster disks (a wider pool, mirrors), or larger I/O",
            "[matrix]\niodepth = [1, 8, 32]",
        )
    if kind == "cpu":
        if limit.detail == "emulator":
            return (
                "the emulator is the limit: run the campaign on the real host (or a VM with KVM)",
                '[host]\nkind = "ssh"',
            )
        if limit.detail == "fio":
            return ("fio's own thread is the limit: more jobs", "[matrix]\nnumjobs = [1, 2, 4]")
        return (
            "ZFS's threads are the limit: lighter compression or encryption",
            '[matrix]\ncompression = ["off", "lz4"]',
        )
    if kind == "network":
        return ("the network is the limit: a faster link, or the load nearer the pool", "")
    return ("", "")


def moves(ds: Dataset, tests: Sequence[TestSummary] | None = None) -> list[tuple[TestSummary, Move]]:
    """The move of each test's limiter, one per (limiter, part) so advise does not repeat itself."""
    seen: set[tuple[str, str]] = set()
    out = []
    for t in tests if tests is not None else ds.tests:
        m = move(t)
        key = (m.limiter, t.limit.detail if t.limit else "") if m else ("", "")
        if m is not None and key not in seen:
            seen.add(key)
            out.append((t, m))
    return out
