"""Why: what bounded each run, named with the figures that show it (issue 32).

One rule per limiter, each its own module with its own tests, in a registry like the validity checks: the ARC,
the network, read-modify-write, the write throttle, the log device, the data disks, the CPU. A rule reads only
what the run recorded (`RunFacts`: the journal's metrics and checks, the test and the fingerprint); none touches a
host. `name_limiter` asks every rule and names one: the run did not measure the pool at all (tier 1: ARC,
network) before a ZFS mechanism that made the disks or writers wait (tier 2: read-modify-write, write throttle)
before a plain resource at its limit (tier 3: log device, data disks, CPU — the fullest wins); none holding is
"not determined", with what was missing.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from typing import Any

from tankbench.analysis.limiters import arc, cpu, disks, network, rmw, throttle
from tankbench.analysis.limiters.base import KINDS, LABELS, Finding, Limit, Rule, count, size
from tankbench.analysis.limiters.facts import RunFacts
from tankbench.model import Test
from tankbench.targets import KindTraits, traits_of
from tankbench.zfs.props import zfs_options

__all__ = [
    "KINDS",
    "LABELS",
    "LIMIT_CHECK_KEYS",
    "ZFS_GAP",
    "RULES",
    "Finding",
    "Limit",
    "Rule",
    "RunFacts",
    "limit_checks",
    "name_limiter",
    "run_facts",
    "summary_limit",
]

#: every limiter rule, in the order ties are broken within a tier
RULES: tuple[Rule, ...] = (arc.RULE, network.RULE, rmw.RULE, throttle.RULE, disks.LOG, disks.DATA, cpu.RULE)


def run_facts(
    params: Mapping[str, Any],
    props: Mapping[str, Any],
    traits: KindTraits,
    metrics: Mapping[str, Any],
    checks: Mapping[str, Any],
    fingerprint: Mapping[str, Any] | None = None,
    drain_s: float | None = None,
) -> RunFacts:
    """A run's facts; `props` are the target's properties (a matrix axis of the same name in `params` wins)."""
    merged = {**props, **{k: v for k, v in params.items() if k in ("recordsize", "volblocksize")}}
    return RunFacts(params, merged, traits, metrics, checks, fingerprint or {}, drain_s)


def _amplification(f: RunFacts) -> str:
    """Reads smaller than the ZFS block read the whole block: the measured factor, for reads that reached the disks."""
    disk = arc.disk_read_bytes(f)
    if f.direction != "read" or not f.zfs or not disk or f.read_bytes <= 0:
        return ""
    factor = disk / f.read_bytes
    if factor < 1.3:
        return ""
    why = f" ({size(f.bs)} reads of {size(f.block)} blocks)" if f.block and f.bs and f.bs < f.block else ""
    return f"; reads amplify: the disks read {factor:.1f}× what fio read{why}"


def _late(f: RunFacts) -> str:
    """A run whose data was durable well after fio's runtime (seed 000): how late, and where the writes waited."""
    past = f.durable_late_s
    if past is None:
        return ""
    excess = f.m0("timing.excess_s")
    text = f"; the data was durable {past:.0f} s after fio's runtime (fio exited {max(0.0, excess):.0f} s late"
    text += f", then {f.drain_s:.1f} s of drain)" if f.drain_s else ")"
    if not f.direct and f.traits.block_device:
        text += ": fio's buffered writes waited in the kernel's page cache in front of the device, and its last close waited for them"
    elif not f.direct:
        text += ": fio's buffered writes waited in memory until they were flushed"
    return text


#: ZIL bytes, as a share of what fio wrote, from which an async-write run's ZIL commits are worth a sentence
ZIL_SHARE = 0.1


def _zil(f: RunFacts) -> str:
    """Async writes committed through the ZIL at the end (seed 000): every dirty byte a second time, to the log
    (on a pool without a log device: the data disks), or each block written whole where it was logged indirectly."""
    commits, written = f.m0("zil.commit_count"), f.write_bytes
    if not f.zfs or f.direction != "write" or f.sync_writes or not commits or written <= 0:
        return ""
    normal, slog = f.zil_log_bytes("normal"), f.zil_log_bytes("slog")
    indirect = f.m0("zil.itx_indirect_bytes")
    parts = []
    if normal >= ZIL_SHARE * written:
        parts.append(
            f"{size(normal)} of log blocks to the pool's data disks: fio's data written twice, to the log and by the txg"
        )
    if slog >= ZIL_SHARE * written:
        parts.append(f"{size(slog)} of log blocks to the log device")
    if indirect >= ZIL_SHARE * written:
        parts.append(f"the blocks of {size(indirect)} of writes it logged indirectly, each block whole (dmu_sync)")
    if not parts:
        return ""
    phys, logical = f.m("zfs.physical_bytes_written"), f.m("zfs.logical_bytes_written")
    factor = f" ({phys / logical:.1f}× what fio wrote reached the disks)" if phys and logical else ""
    return (
        f"; {count(commits)} ZIL commit(s) of these async writes (a flush or an fsync: fio's end_fsync, a device's "
        f"last close; or a sync(2), which commits every mounted dataset's ZIL{_drain_sync(f)}) wrote "
        f"{'; '.join(parts)}{factor}"
    )


def _drain_sync(f: RunFacts) -> str:
    """Whether tankbench's own drain was a sync(2) that committed the ZIL, as the run recorded it (drain.method);
    a run journalled before it was recorded: the drain called sync(2) on ZFS targets until it drained with
    `zpool sync` alone."""
    method = f.checks.get("drain.method")
    if method is None:
        return " — tankbench's drain called it on ZFS targets until it drained with `zpool sync` alone"
    return " — tankbench's drain after this run called it" if method == "sync(2)" else ""


def _notes(f: RunFacts) -> str:
    """What the figures say beside the limiter: reads amplified, a late run, async writes committed through the
    ZIL, the network not the limit or not judged."""
    text = _amplification(f) + _late(f) + _zil(f)
    note = network.note(f)
    return text + (f"; {note}" if note else "")


def _undetermined(f: RunFacts) -> Limit:
    parts = [p for p in (disks.busiest_text(f), cpu.summary(f) and f"CPU: {cpu.summary(f)}") if p]
    text = "no figure reached its limit" + (f" ({'; '.join(parts)})" if parts else "")
    missing = f.missing()
    if missing:
        text += "; missing: " + ", ".join(missing)
    return Limit("not-determined", text + _notes(f), "", {}, missing + _zfs_gap(f))


#: how `limit.missing` says what a target not on ZFS cannot have (the report lists those tests with it)
ZFS_GAP = "ZFS evidence (not a ZFS target): "


def _zfs_gap(f: RunFacts) -> tuple[str, ...]:
    gap = f.zfs_unavailable()
    return (ZFS_GAP + ", ".join(gap),) if gap else ()


def name_limiter(f: RunFacts) -> Limit:
    """What bounded the run (see the module's docstring for how one is chosen among the rules that hold)."""
    found = [(r, x) for r in RULES if (x := r.find(f)) is not None]
    if not found:
        return _undetermined(f)
    tier = min(r.tier for r, _ in found)
    best = max((x for r, x in found if r.tier == tier), key=lambda x: x.score)
    text = best.evidence
    behind = [x for r, x in found if r.tier == 3 and x is not best]
    if tier < 3 and behind:
        top = max(behind, key=lambda x: x.score)
        text += f"; behind it: {top.kind.replace('-', ' ')} — {top.evidence}"
    return Limit(best.kind, text + _notes(f), best.detail, best.figures, f.missing() + _zfs_gap(f))


#: the run checks the report reads per run (journal index): what bounded it, the part, the sentence
LIMIT_CHECK_KEYS = ("limit.kind", "limit.detail", "limit.evidence", "limit.missing")


def summary_limit(runs: Sequence[Mapping[str, Any]], last: RunFacts | None) -> Limit | None:
    """A test's limiter from its measured runs' checks: the kind most of them recorded, with the last such run's
    evidence (and how many runs named another); with none recorded (an older journal, imported fio output), its
    last measured run's figures named now. None without a measured run."""
    kinds = [str(r["limit.kind"]) for r in runs if r.get("limit.kind")]
    if not kinds:
        return name_limiter(last) if last is not None else None
    top, n = Counter(kinds).most_common(1)[0]
    run = next(r for r in reversed(runs) if r.get("limit.kind") == top)
    evidence = str(run.get("limit.evidence", ""))
    if n < len(kinds):
        others = ", ".join(f"{k} {c}" for k, c in Counter(kinds).items() if k != top)
        evidence += f" ({n} of {len(kinds)} runs; the others: {others})"
    missing = run.get("limit.missing")
    return Limit(
        top, evidence, str(run.get("limit.detail", "")), {}, tuple(missing) if isinstance(missing, list) else ()
    )


def limit_checks(
    test: Test,
    metrics: Mapping[str, Any],
    checks: Mapping[str, Any],
    fingerprint: Mapping[str, Any],
    drain_s: float | None,
) -> dict[str, object]:
    """The `limit.*` checks of a run being recorded (the runner calls this once the run's figures are complete)."""
    f = run_facts(
        test.params, zfs_options(test.target).props, traits_of(test.target.kind), metrics, checks, fingerprint, drain_s
    )
    return name_limiter(f).checks()
