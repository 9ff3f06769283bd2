"""Why (issue 32): what bounded each measured test — the limiter its runs recorded, with the figures that show it
(analysis/limiters) — the test cases whose winner and runner-up had different limiters, in one sentence each, what
each disk can do (the capability the fingerprint keeps), and the ZFS evidence a target not on ZFS cannot have."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from tankbench.analysis.cases import TestSummary
from tankbench.analysis.limiters import LABELS, ZFS_GAP
from tankbench.analysis.limiters.facts import capabilities
from tankbench.analysis.result import Analysis, Context, SectionSpec
from tankbench.analysis.section import READ, Block, Column, Items, Para, Section, Table
from tankbench.analysis.why import pair_sentence

#: a capability's figures, in the order its table shows them
CAPABILITY = ("read_iops_qd1", "read_iops_deep", "read_mibs_seq")


@dataclass(frozen=True)
class Why:
    """The measured tests with a limiter, the test cases whose top two differ (case, sentence), each disk's
    capability ({disk, name, figures, how}) and the ZFS evidence some targets cannot have."""

    tests: tuple[TestSummary, ...]
    pairs: tuple[tuple[str, str], ...]
    disks: tuple[Mapping[str, Any], ...]
    not_zfs: tuple[str, ...]  # the tests whose target is not on ZFS
    zfs_gap: str = ""  # the ZFS evidence they cannot have


def compute(ctx: Context) -> Why:
    tests = tuple(t for t in ctx.ds.tests if t.measured and t.limit is not None)
    pairs = tuple((lb.case, s) for lb in ctx.a.leaderboards if (s := pair_sentence(lb)))
    disks: dict[str, Mapping[str, Any]] = {}
    for fp in ctx.ds.fingerprints.values():
        for c in capabilities(fp.data).values():
            disks.setdefault(str(c.get("disk", "")), c)
    gap = next((m for t in tests if t.limit for m in t.limit.missing if m.startswith(ZFS_GAP)), "")
    not_zfs = tuple(f"#{t.number}" for t in tests if t.limit and gap in t.limit.missing) if gap else ()
    return Why(tests, pairs, tuple(disks[d] for d in sorted(disks)), not_zfs, gap.removeprefix(ZFS_GAP))


def render(a: Analysis, d: Why) -> Section | None:
    if not d.tests:
        return None
    blocks: list[Block] = [
        Para(
            "What bounded each test's runs, named from the figures they recorded (docs/limiters.md): the data disks "
            "or the log device against what each can do, the CPU (fio, ZFS's threads, the emulator), ZFS's write "
            "throttle, read-modify-write, the ARC, the network; or not determined, with what was missing."
        )
    ]
    if d.pairs:
        blocks.append(Items(tuple(f"{case}: {text}" for case, text in d.pairs)))
    cols = (Column("test"), Column("limit.kind", "limiter", tip="docs/limiters.md"), Column("limit.evidence", "why"))
    rows = [(f"#{t.number} {t.name}", t.limit.label, t.limit.evidence) for t in d.tests if t.limit]
    blocks.append(Table(cols, rows, only=READ, wide=False))
    if d.disks:
        blocks.append(Para("What each disk can do (a read-only fio probe, once per disk and fingerprint):", "small"))
        dcols = (
            Column("disk"),
            Column("read_iops_qd1", "4k random reads, QD1 (IOPS)", num=True),
            Column("read_iops_deep", "QD32 (IOPS)", num=True),
            Column("read_mibs_seq", "1M sequential (MiB/s)", num=True),
            Column("how"),
        )
        drows = [(_disk(c), *(c.get(k) for k in CAPABILITY), str(c.get("error") or c.get("how", ""))) for c in d.disks]
        blocks.append(Table(dcols, drows, only=READ, wide=False))
    if d.not_zfs:
        text = (
            f"Tests {', '.join(d.not_zfs)} are not on ZFS: their limiter is named from the disk and CPU figures "
            f"alone; the ZFS evidence they cannot have: {d.zfs_gap}."
        )
        blocks.append(Para(text, "note"))
    return Section("why", "Why: what bounded each test", tuple(blocks))


def _disk(c: Mapping[str, Any]) -> str:
    name, disk = str(c.get("name", "")), str(c.get("disk", ""))
    label = disk.rsplit("/", 1)[-1].removeprefix("virtio-") if "virtio-" in disk else name
    return label or disk


def to_json(a: Analysis, d: Why) -> Mapping[str, Any]:
    return {
        "limiters": [
            {
                "test_id": t.id,
                "test_number": t.number,
                "limit.kind": t.limit.kind,
                "limit.label": LABELS[t.limit.kind] if t.limit.kind in LABELS else t.limit.kind,
                "limit.detail": t.limit.detail,
                "limit.evidence": t.limit.evidence,
                "limit.missing": list(t.limit.missing),
            }
            for t in d.tests
            if t.limit
        ],
        "limiter_pairs": [{"case": c, "text": s} for c, s in d.pairs],
        "device_capability": [dict(c) for c in d.disks],
        "zfs_evidence_unavailable": {"tests": list(d.not_zfs), "evidence": d.zfs_gap} if d.not_zfs else None,
    }


SECTION = SectionSpec("why", 105, compute, render, to_json)
