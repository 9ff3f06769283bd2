"""Validity warnings: one per honesty rule of DESIGN.md the journal lets us check, each with its fix."""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from tankbench.analysis.cases import ZFS_KINDS, Dataset, TestSummary
from tankbench.analysis.stats import monotonic_increase
from tankbench.units import fmt_size

CV_LIMIT = 0.10
DIRTY_LIMIT = 64 * 1024 * 1024
DEFAULT_TXG_TIMEOUT = 5.0


@dataclass(frozen=True)
class Warning:
    """A reason to distrust some numbers, the rows it concerns (tests.id, runs.id) and how to fix it."""

    code: str
    severity: str  # "error" (numbers wrong), "warning" (numbers doubtful), "info" (cannot check)
    message: str
    fix: str
    test_ids: tuple[str, ...] = ()
    run_rows: tuple[int, ...] = ()


def _size_bytes(text: Any) -> int | None:
    m = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([kmgtp]?)(i?b?)\s*", str(text).lower())
    if not m:
        return None
    return int(float(m.group(1)) * 1024 ** " kmgtp".index(m.group(2) or " "))


def _tests(ds: Dataset, pred: Any) -> list[TestSummary]:
    return [t for t in ds.tests if pred(t)]


def _mk(
    code: str, sev: str, tests: list[TestSummary], msg: str, fix: str, rows: Iterable[int] = ()
) -> Iterator[Warning]:
    if tests:
        names = ", ".join(f"#{t.number}" for t in tests[:12]) + (" …" if len(tests) > 12 else "")
        yield Warning(code, sev, f"{msg} (tests {names})", fix, tuple(t.id for t in tests), tuple(rows))


_ACCEL = {"tcg": "qemu TCG (emulated)", "kvm": "KVM", "": "not virtualised"}


def emulation_layers(fingerprints: Iterable[Mapping[str, Any]]) -> tuple[str, ...]:
    """How the runs' machines were virtualised, one phrase per distinct fingerprint: the host (the lab VM or a
    real machine) and, where fio ran in a test guest, the guest, e.g. "host: qemu TCG (emulated); test guest:
    qemu TCG (emulated) inside it"."""
    out: dict[str, None] = {}
    for fp in fingerprints:
        host = str(fp.get("accelerator", ""))
        text = f"host: {_ACCEL.get(host, host)}"
        if fp.get("guest_accelerator"):
            guest = str(fp["guest_accelerator"])
            text += f"; test guest: {_ACCEL.get(guest, guest)}" + (" inside it" if fp.get("guest_nested") else "")
        out[text] = None
    return tuple(out)


def _emulated(fp: Mapping[str, Any]) -> bool:
    return fp.get("accelerator") == "tcg" or fp.get("guest_accelerator") == "tcg"


def lab_disk_note(fingerprints: Iterable[Mapping[str, Any]]) -> str:
    """The lab's disk models and ARC cap as the runs recorded them, one phrase ('' when no disk was modelled)."""
    out: dict[str, None] = {}
    for fp in fingerprints:
        models = fp.get("lab_disk_models") or {}
        named = {d: str(m).split(":", 1)[0] for d, m in models.items()}
        if not any(m != "none" for m in named.values()):
            continue
        groups: dict[str, list[str]] = {}
        for d, m in named.items():
            groups.setdefault(m, []).append(d)
        text = "; ".join(f"{', '.join(ds)}: {m}" for m, ds in groups.items())
        if fp.get("lab_arc_max"):
            text += f"; ARC max {fmt_size(int(fp['lab_arc_max']))}"
        out[text] = None
    return " | ".join(out)


def emulation_banner(fingerprints: Iterable[Mapping[str, Any]]) -> str:
    """What an emulated machine's numbers mean, for the report's banner and the `emulated` warning."""
    fps = list(fingerprints)
    text = (
        f"These runs ran in an emulated machine ({' / '.join(emulation_layers(fps))}): the numbers measure the "
        "emulator, not your disks. They are not for choosing hardware or a configuration."
    )
    disks = lab_disk_note(fps)
    if disks:
        text += (
            f" The lab's disks were modelled ({disks}; scaled-down models, see docs/lab.md): the direction of a "
            "disk-bound effect is meaningful, its size is not."
        )
    return text


def check_emulated(ds: Dataset) -> Iterator[Warning]:
    tcg = [fp.data for fp in ds.fingerprints.values() if _emulated(fp.data)]
    if tcg:
        yield Warning(
            "emulated",
            "error",
            emulation_banner(tcg),
            "run the campaign on the real host, or in a VM with KVM",
        )


def check_fingerprints(ds: Dataset) -> Iterator[Warning]:
    comparable = {repr(sorted(fp.comparable_keys().items())) for fp in ds.fingerprints.values()}
    if len(comparable) > 1:
        yield Warning(
            "fingerprints-differ",
            "warning",
            f"The journal mixes {len(comparable)} different "
            "fingerprints (kernel, fio, CPU, RAM, ZFS version or tunables): rankings compare unlike "
            "systems.",
            "rerun the campaign on one system, or split it with `tankbench compare --force`",
        )


def check_failures(ds: Dataset) -> Iterator[Warning]:
    bad = [(t, r) for t in ds.tests for r in t.runs if r.status in ("failed", "timeout", "crashed")]
    tests = list({t.id: t for t, _ in bad}.values())
    yield from _mk(
        "failed-runs",
        "warning",
        tests,
        f"{len(bad)} runs failed, timed out or crashed; they are not ranked",
        "look at stderr in `tankbench show`, fix the cause and rerun (resume keeps good runs)",
        (r.row_id for _, r in bad),
    )
    cut = [(t, r) for t in ds.tests for r in t.runs if r.status == "interrupted"]
    yield from _mk(
        "interrupted-runs",
        "info",
        list({t.id: t for t, _ in cut}.values()),
        f"{len(cut)} runs were interrupted because tankbench itself stopped (the host stayed up); they are not ranked",
        "resume the campaign with `tankbench run`: it reruns them",
        (r.row_id for _, r in cut),
    )
    never = _tests(ds, lambda t: not t.measured)
    yield from _mk(
        "not-measured",
        "info",
        never,
        "Tests with no finished measured run",
        "run the campaign (again); skipped tests say why in their skip note",
    )


def check_repeats(ds: Dataset) -> Iterator[Warning]:
    single = _tests(ds, lambda t: len(t.measured) == 1)
    yield from _mk(
        "single-run",
        "warning",
        single,
        "Tests with one measured run: no standard deviation, "
        'confidence interval or significance test, so no "faster" claim is made for them',
        "set repeats = 3 or more in the campaign",
    )
    noisy = _tests(
        ds, lambda t: any(s and s.n >= 2 and s.cv > CV_LIMIT for k, s in t.stats.items() if k in ("mibs", "iops"))
    )
    yield from _mk(
        "high-variation",
        "warning",
        noisy,
        f"Run-to-run standard deviation above {CV_LIMIT:.0%} of the mean",
        "find the noise (other load, scrub, thermal limits, a cache filling up); lengthen runtime; add repeats",
    )
    warming = _tests(
        ds,
        lambda t: monotonic_increase([r.values.get("mibs") or r.values.get("durable_mibs") or 0.0 for r in t.measured]),
    )
    yield from _mk(
        "cache-warming",
        "warning",
        warming,
        "Throughput grows run after run (seed 002): the cache is warming and later runs measure RAM, not disks",
        "use a working set larger than "
        "the ARC, add a warm-up run, or drop caches / export-import the pool between runs",
    )


def check_timing(ds: Dataset) -> Iterator[Warning]:
    late = [(t, r) for t in ds.tests for r in t.runs if r.late]
    yield from _mk(
        "timing-issue",
        "warning",
        list({t.id: t for t, _ in late}.values()),
        f"{len(late)} runs took longer than ramp + runtime by more than the threshold, counting the "
        "drain until the data was on disk (seed 000: a buffered zvol test finished 3.8 h late); fio's "
        "MiB/s overstates them, so their test cases rank by durable MiB/s",
        "keep the default ranking (auto) or `--rank-by durable_mibs`; look at load and dirty data of those runs",
        (r.row_id for _, r in late),
    )
    unknown = _tests(ds, lambda t: t.measured and all(r.wall_s is None for r in t.measured))
    yield from _mk(
        "wall-unknown",
        "info",
        unknown,
        "No wall-clock time recorded (e.g. imported fio JSON): timing issues and durable throughput cannot be checked",
        "run the tests with `tankbench run`",
    )


def check_runs_detail(ds: Dataset) -> Iterator[Warning]:
    """Checks on Run.checks (layout, dirty data) and fio's runtime, run by run."""
    sparse: list[tuple[TestSummary, int]] = []
    compressible: list[tuple[TestSummary, int]] = []
    unverified: list[tuple[TestSummary, int]] = []
    dirty: list[tuple[TestSummary, int]] = []
    short: list[tuple[TestSummary, int]] = []
    qemu_wrong: list[tuple[TestSummary, int]] = []
    for t, r in ((x, r) for x in ds.tests for r in x.runs if r.status == "done"):
        c = r.extra
        if _sparse(c):
            sparse.append((t, r.row_id))
        if (c.get("layout.sample_compress_ratio") or 1.0) > 1.1:
            compressible.append((t, r.row_id))
        if t.target_kind in ("file", "dataset") and not c.get("layout.verified"):
            unverified.append((t, r.row_id))
        if c.get("guest.settings_match") is False:
            qemu_wrong.append((t, r.row_id))
        if max(c.get("preflight.dirty_bytes") or 0, c.get("drain.dirty_end_bytes") or 0) > DIRTY_LIMIT:
            dirty.append((t, r.row_id))
        rt = c.get("fio.runtime_s")
        if rt is not None:  # fio counts a job's final fsync (end_fsync) in its runtime: the I/O phase is shorter
            rt -= c.get("sync.end_fsync_s") or 0.0
        steady_early = bool(c.get("steadystate.attained")) and rt is not None and rt < t.runtime  # campaign.ss
        if rt is not None and t.runtime and abs(rt - t.runtime) > 0.1 * t.runtime + 0.5 and not steady_early:
            short.append((t, r.row_id))
    for code, sev, items, msg, fix in (
        (
            "sparse-file",
            "error",
            sparse,
            "Test file sparse or not fully allocated: reads of holes measure nothing",
            "let tankbench lay out the file (it writes incompressible data and verifies allocated size)",
        ),
        (
            "compressible-data",
            "error",
            compressible,
            "The test file's data compresses: with compression on, ZFS moves less than fio reports (seed 002)",
            "lay out with incompressible data; set refill_buffers and do not set buffer_compress_percentage",
        ),
        (
            "layout-unverified",
            "info",
            unverified,
            "Allocated size of the test file was not verified",
            "use a file target laid out by tankbench",
        ),
        (
            "dirty-carried",
            "warning",
            dirty,
            f"More than {DIRTY_LIMIT >> 20} MiB of dirty data before a run or "
            "after its drain: one test's writes land in the next test's numbers",
            "raise the drain timeout or add a pause between tests",
        ),
        (
            "qemu-settings-mismatch",
            "error",
            qemu_wrong,
            "qemu reports other settings for the guest's disk than the test asked for (bus, format, qcow2 cluster, "
            "cache mode, iothread or werror; the run's check guest.settings_mismatch says which): its numbers "
            "belong to the settings qemu used",
            "check the qemu version on the host (`tankbench show` the run) and file an issue with its checks",
        ),
        (
            "fio-runtime-mismatch",
            "warning",
            short,
            "fio's runtime (less its final fsync) differs from the configured runtime",
            "check fio's stderr; a short runtime means fio stopped early (size reached or error)",
        ),
    ):
        tl = list({t.id: t for t, _ in items}.values())
        yield from _mk(code, sev, tl, msg, fix, (row for _, row in items))


def _sparse(c: Mapping[str, Any]) -> bool:
    """Holes, not compression: allocated below 90 % of what the dataset's compressratio explains (lz4 on fio's data
    allocates 41.8M of 64M without any hole, and older agents called that sparse). Block devices have no allocated
    size: then the agent's own verdict counts."""
    allocated, apparent = c.get("layout.allocated_bytes"), c.get("layout.apparent_bytes") or 0
    if allocated is None:
        return bool(c.get("layout.sparse"))
    ratio = max(float(c.get("zfs.compressratio") or 1.0), 1.0)
    return bool(allocated * ratio < 0.9 * apparent)


TRAP_LAYOUTS = ("unwritten", "zero")


def check_layout(ds: Dataset) -> Iterator[Warning]:
    """Seed 002's trap as an axis: reads of an unwritten or zero-filled file measure memory; compressible data
    with compression on moves less than fio reports; and data that compressed although nobody asked for it."""
    trap = _tests(ds, lambda t: str(t.params.get("layout", "")) in TRAP_LAYOUTS and "read" in t.case)
    yield from _mk(
        "layout-reads-meaningless",
        "error",
        trap,
        "Reads of an unwritten (sparse) or zero-filled file: "
        "ZFS returns holes or compressed zeros from memory without touching the disks, so these "
        "reads measure CPU and RAM (seed 002: 2458 MB/s unwritten vs 897 MB/s written)",
        "compare with layout = random (written with incompressible data); read these tests as a "
        "demonstration of the trap, not as the pool's read speed",
    )
    comp = _tests(
        ds,
        lambda t: (
            str(t.params.get("layout", "")).startswith("compressible")
            and str(t.axes().get("compression", "off")) not in ("off", "none", "")
        ),
    )
    yield from _mk(
        "layout-compressible",
        "warning",
        comp,
        "Compressible layout with compression on: ZFS "
        "reads and writes fewer bytes than fio counts, so MiB/s is the logical, not the physical rate",
        "compare physical MiB/s and physical/logical; use layout = random for the pool's raw speed",
    )
    meas = _tests(
        ds,
        lambda t: (
            (t.mean("compressratio") or 1.0) > 1.1
            and "layout" not in t.params
            and not any(k in t.fio_options for k in ("buffer_compress_percentage", "zero_buffers"))
        ),
    )
    yield from _mk(
        "compressed-writes",
        "warning",
        meas,
        "The dataset's compressratio after the run is above 1.1 "
        "although no compressible data was asked for: fio's buffers compressed (fio reuses its buffers "
        "unless refill_buffers is set), so ZFS wrote less than fio reports",
        "set refill_buffers=1 and buffer_compress_percentage=0 (or a random layout), or compression=off for the test",
    )


def check_options(ds: Dataset) -> Iterator[Warning]:
    comp = _tests(
        ds,
        lambda t: (
            any(k in t.fio_options for k in ("buffer_compress_percentage", "zero_buffers"))
            or str(t.fio_options.get("refill_buffers", "1")) == "0"
        ),
    )
    yield from _mk(
        "compressible-buffers",
        "error",
        comp,
        "fio writes compressible or zero-filled buffers: with compression on, throughput is inflated",
        "remove buffer_compress_percentage / zero_buffers; tankbench's default is incompressible refill_buffers",
    )
    unaligned = _tests(ds, _direct_unaligned)
    yield from _mk(
        "direct-unaligned",
        "warning",
        unaligned,
        "O_DIRECT with a block size that is not a multiple "
        "of recordsize/volblocksize: each I/O becomes a read-modify-write of a whole record",
        "match bs to recordsize (or volblocksize), or test buffered I/O",
    )
    return


def _direct_unaligned(t: TestSummary) -> bool:
    rs, bs = _size_bytes(t.props.get("recordsize", t.props.get("volblocksize", ""))), _size_bytes(t.params.get("bs"))
    return t.params.get("io") == "direct" and bool(rs and bs) and bs % rs != 0  # type: ignore[operator]


def check_zfs(ds: Dataset) -> Iterator[Warning]:
    """ARC, txg, direct-ignored and ashift checks need ZFS metrics; say so when the journal has none."""
    zfs = [t for t in ds.tests if t.target_kind in ZFS_KINDS]
    if not zfs:
        return
    have = _zfs_checks(ds)
    if not have:
        yield from _mk(
            "zfs-not-measured",
            "info",
            zfs,
            "The journal has no ZFS metrics (arcstats, recordsize, "
            "ashift, txg_timeout): not checked whether the working set exceeds the ARC, whether the "
            "runtime covers several txgs, whether O_DIRECT was ignored, or whether recordsize aligns "
            "with ashift",
            "run with a tankbench that records ZFS metrics (ZFS host or lab VM)",
        )
        return
    yield from _zfs_warnings(ds, have)


def _zfs_checks(ds: Dataset) -> dict[str, Mapping[str, Any]]:
    return {t.id: t.zfs for t in ds.tests if t.zfs}


def _zfs_warnings(ds: Dataset, have: dict[str, Mapping[str, Any]]) -> Iterator[Warning]:
    tests = [t for t in ds.tests if t.id in have]
    arc = [
        t
        for t in tests
        if "read" in t.case
        and (
            have[t.id].get("zfs.working_set_fits_arc")
            or (have[t.id].get("arc.c_max") or have[t.id].get("zfs.arc_c_max") or 0) >= t.size > 0
        )
    ]
    yield from _mk(
        "working-set-in-arc",
        "warning",
        arc,
        "Working set not larger than the ARC: reads come from RAM",
        "use a test file larger than zfs_arc_max (or lower zfs_arc_max for the campaign)",
    )
    hits = [t for t in tests if "read" in t.case and (have[t.id].get("arc.hit_ratio") or 0) > 0.9]
    yield from _mk(
        "arc-hits",
        "warning",
        hits,
        "ARC hit ratio above 90 %: the reads measure the cache",
        "make the working set larger than the ARC, or set primarycache=metadata for the test",
    )
    txg = [
        t
        for t in tests
        if "write" in t.case
        and (
            have[t.id].get("zfs.runtime_near_txg")
            or t.runtime < 3 * float(have[t.id].get("zfs.txg_timeout") or DEFAULT_TXG_TIMEOUT)
        )
    ]
    yield from _mk(
        "runtime-vs-txg",
        "warning",
        txg,
        "Write runtime shorter than 3 txg intervals: where the txg syncs fall decides the result",
        "set runtime to at least 3 × zfs_txg_timeout (15 s at the default 5 s; longer is better)",
    )
    ign = [t for t in tests if have[t.id].get("zfs.direct_ignored")]
    yield from _mk(
        "direct-ignored",
        "error",
        ign,
        "O_DIRECT was requested but ZFS served it through the ARC "
        "(zvols always; datasets on OpenZFS < 2.3, with direct=disabled or zfs_dio_enabled=0): the test "
        "measured cached I/O",
        "read these tests as buffered; for real direct I/O use a dataset on "
        "OpenZFS >= 2.3 with direct=standard or always",
    )
    forced = [t for t in tests if have[t.id].get("zfs.direct_forced")]
    yield from _mk(
        "direct-forced",
        "error",
        forced,
        'Buffered I/O on a dataset with direct=always (OpenZFS >= 2.3): the "buffered" test measured direct I/O',
        "set direct=standard on the dataset for buffered tests",
    )
    partial = [t for t in tests if have[t.id].get("zfs.partial_record_writes")]
    yield from _mk(
        "partial-record-writes",
        "warning",
        partial,
        "bs is not a whole number of records/volblocks: overwrites read-modify-write whole blocks",
        "match bs to recordsize/volblocksize, or expect this cost in the numbers",
    )
    ash = [t for t in tests if have[t.id].get("zfs.misaligned") or _misaligned_ashift(have[t.id])]
    yield from _mk(
        "ashift-alignment",
        "warning",
        ash,
        "recordsize/volblocksize smaller than or not a multiple of the pool's sector size (2^ashift) (seed 001)",
        "use a recordsize/volblocksize that is a multiple of 2^ashift, or recreate the pool with the right ashift",
    )


def _misaligned_ashift(z: Mapping[str, Any]) -> bool:
    ashift = z.get("zfs.ashift")
    rs = _size_bytes(z.get("zfs.recordsize") or z.get("zfs.volblocksize") or "")
    if not ashift or not rs:
        return False
    return bool(rs % (1 << int(ashift)))


def check_schedule(ds: Dataset) -> Iterator[Warning]:
    """Issue 11: runs that never reached fio's steady state, and what the adaptive schedule decided (stop early,
    drop from a race, max repeats without the CI), each with its evidence, so nothing is decided silently."""
    unsteady = [
        (t, r)
        for t in ds.tests
        for r in t.measured
        if r.extra.get("steadystate.attained") is not None and not r.extra["steadystate.attained"]
    ]
    yield from _mk(
        "never-steady",
        "warning",
        list({t.id: t for t, _ in unsteady}.values()),
        f"{len(unsteady)} measured runs never reached fio's steady state (campaign.ss): they ran the "
        "whole runtime on a moving target",
        "lengthen campaign.runtime, loosen campaign.ss, or find what drifts (a cache filling, txg bursts)",
        (r.row_id for _, r in unsteady),
    )
    for kind, sev, msg, fix in (
        (
            "drop",
            "info",
            "A race stopped repeating these tests, clearly behind their test case's leader",
            "set racing = false to give every test its full repeats",
        ),
        (
            "max",
            "info",
            "These tests reached repeats.max before their confidence interval met repeats.ci",
            "raise repeats.max, or find the noise",
        ),
        (
            "stop",
            "info",
            "These tests stopped early: their confidence interval met repeats.ci",
            "set a fixed repeats = N for a fixed number of runs",
        ),
    ):
        hits = [
            (t, r)
            for t in ds.tests
            for r in t.runs
            if r.extra.get("schedule.decision") == kind
            and (kind != "max" or "max repeats" in str(r.extra.get("schedule.reason", "")))
        ]
        detail = "; ".join(f"#{t.number}: {r.extra.get('schedule.reason', '')}" for t, r in hits[:3])
        yield from _mk(
            f"schedule-{kind}",
            sev,
            [t for t, _ in hits],
            f"{msg} ({detail}{' …' if len(hits) > 3 else ''})",
            fix,
            (r.row_id for _, r in hits),
        )


def validity_warnings(ds: Dataset) -> tuple[Warning, ...]:
    """All warnings, most severe first."""
    out: list[Warning] = []
    for check in (
        check_emulated,
        check_fingerprints,
        check_failures,
        check_repeats,
        check_timing,
        check_options,
        check_layout,
        check_runs_detail,
        check_zfs,
        check_schedule,
    ):
        out.extend(check(ds))
    order = {"error": 0, "warning": 1, "info": 2}
    return tuple(sorted(out, key=lambda w: order[w.severity]))
