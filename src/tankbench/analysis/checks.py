"""Validity warnings: one per honesty rule of DESIGN.md the journal lets us check, each with its fix."""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from tankbench.analysis.cases import Dataset, RunView, TestSummary
from tankbench.analysis.emulation import _emulated
from tankbench.analysis.emulation import emulation_banner as emulation_banner
from tankbench.analysis.emulation import emulation_layers as emulation_layers
from tankbench.analysis.emulation import lab_disk_note as lab_disk_note
from tankbench.analysis.mechanisms import MECHANISM_CHECKS
from tankbench.analysis.stats import monotonic_increase
from tankbench.analysis.warning import Warning as Warning
from tankbench.analysis.warning import _warning as _warning

CV_LIMIT = 0.10
DIRTY_LIMIT = 64 * 1024 * 1024
DEFAULT_TXG_TIMEOUT = 5.0


def _size_bytes(text: Any) -> int | None:
    m = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([kmgtp]?)(i?b?)\s*", str(text).lower())
    if not m:
        return None
    return int(float(m.group(1)) * 1024 ** " kmgtp".index(m.group(2) or " "))


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


def _misaligned_ashift(z: Mapping[str, Any]) -> bool:
    ashift = z.get("zfs.ashift")
    rs = _size_bytes(z.get("zfs.recordsize") or z.get("zfs.volblocksize") or "")
    if not ashift or not rs:
        return False
    return bool(rs % (1 << int(ashift)))


@dataclass(frozen=True)
class TestCheck:
    """A rule about a test as a whole: the tests it holds for become one warning."""

    code: str
    severity: str
    message: str
    fix: str
    applies: Callable[[TestSummary], Any]
    #: the rule is checked only when the whole journal allows it (e.g. no ZFS metrics at all)
    needs: Callable[[Dataset], bool] | None = None

    def warnings(self, ds: Dataset) -> Iterator[Warning]:
        if self.needs is None or self.needs(ds):
            yield from _warning(
                self.code, self.severity, [t for t in ds.tests if self.applies(t)], self.message, self.fix
            )


@dataclass(frozen=True)
class RunCheck:
    """A rule about single runs: the runs it holds for (their rows listed) become one warning. `{n}` in the message
    is their number; with `detail`, the schedule's reasons of the first three follow it."""

    code: str
    severity: str
    message: str
    fix: str
    applies: Callable[[TestSummary, RunView], Any]
    runs: Callable[[TestSummary], Iterable[RunView]] = lambda t: t.runs
    detail: bool = False
    #: with `detail`: the run check whose text (or list of texts) says why each of the first three holds
    detail_key: str = "schedule.reason"

    def warnings(self, ds: Dataset) -> Iterator[Warning]:
        applies, runs = self.applies, self.runs
        tests: dict[str, TestSummary] = {}
        rows: list[int] = []
        first: list[tuple[TestSummary, RunView]] = []  # the first hits, for `detail`
        for t in ds.tests:  # per test, not per (test, run) pair: a report checks 100,000s of runs
            hits = [r for r in runs(t) if applies(t, r)]
            if hits:
                tests[t.id] = t
                rows += [r.row_id for r in hits]
                if len(first) < 3:
                    first += [(t, r) for r in hits[:3]]
        msg = self.message.replace("{n}", str(len(rows)))
        if self.detail:
            reasons = "; ".join(f"#{t.number}: {_text(r.extra.get(self.detail_key, ''))}" for t, r in first[:3])
            msg += f" ({reasons}{' …' if len(rows) > 3 else ''})"
        yield from _warning(self.code, self.severity, list(tests.values()), msg, self.fix, rows)


def _text(value: Any) -> str:
    return ", ".join(map(str, value)) if isinstance(value, list) else str(value)


def _done(t: TestSummary) -> Iterable[RunView]:
    return t.done


def _measured(t: TestSummary) -> Iterable[RunView]:
    return t.measured


def _decided(t: TestSummary) -> Iterable[RunView]:
    """Runs holding an adaptive decision (schedule.decision): the schedule-* checks look at no others."""
    return t.decided


def _runtime_mismatch(t: TestSummary, r: RunView) -> bool:
    """fio's runtime less its final fsync (fio counts end_fsync in a job's runtime) against the configured one;
    a run that reached its steady state early (campaign.ss) ends short on purpose."""
    rt, runtime = r.extra.get("fio.runtime_s"), t.runtime
    if rt is None or not runtime:
        return False
    rt -= r.extra.get("sync.end_fsync_s") or 0.0
    steady_early = bool(r.extra.get("steadystate.attained")) and rt < runtime
    return abs(rt - runtime) > 0.1 * runtime + 0.5 and not steady_early


def _compress_options(t: TestSummary) -> bool:
    return any(k in t.fio_options for k in ("buffer_compress_percentage", "zero_buffers"))


def _arc_max(z: Mapping[str, Any]) -> Any:
    return z.get("arc.c_max") or z.get("zfs.arc_c_max") or 0


#: every check on tests and runs, in the order their warnings are listed within a severity
CHECKS: tuple[TestCheck | RunCheck, ...] = (
    RunCheck(
        "failed-runs",
        "warning",
        "{n} runs failed, timed out or crashed; they are not ranked",
        "look at stderr in `tankbench show`, fix the cause and rerun (resume keeps good runs)",
        lambda t, r: r.status in ("failed", "timeout", "crashed"),
    ),
    RunCheck(
        "invalid-runs",
        "error",
        "{n} runs measured something other than what their tests name (the runner found a property that did not "
        "take, a SLOG state against the test's axis, or a scrub during the run): their tests are never recommended",
        "`tankbench show` the runs (their check validity.reasons), fix the cause and rerun them",
        lambda t, r: r.extra.get("valid") is False,
        _done,
        detail=True,
        detail_key="validity.reasons",
    ),
    RunCheck(
        "interrupted-runs",
        "info",
        "{n} runs were interrupted because tankbench itself stopped (the host stayed up); they are not ranked",
        "resume the campaign with `tankbench run`: it reruns them",
        lambda t, r: r.status == "interrupted",
    ),
    TestCheck(
        "not-measured",
        "info",
        "Tests with no finished measured run",
        "run the campaign (again); skipped tests say why in their skip note",
        lambda t: not t.measured,
    ),
    TestCheck(
        "single-run",
        "warning",
        "Tests with one measured run: no standard deviation, "
        'confidence interval or significance test, so no "faster" claim is made for them',
        "set repeats = 3 or more in the campaign",
        lambda t: len(t.measured) == 1,
    ),
    TestCheck(
        "high-variation",
        "warning",
        f"Run-to-run standard deviation above {CV_LIMIT:.0%} of the mean",
        "find the noise (other load, scrub, thermal limits, a cache filling up); lengthen runtime; add repeats",
        lambda t: any(s and s.n >= 2 and s.cv > CV_LIMIT for k, s in t.stats.items() if k in ("mibs", "iops")),
    ),
    TestCheck(
        "cache-warming",
        "warning",
        "Throughput grows run after run (seed 002): the cache is warming and later runs measure RAM, not disks",
        "use a working set larger than the ARC, add a warm-up run, or drop caches / export-import the pool between runs",
        lambda t: monotonic_increase([r.values.get("mibs") or r.values.get("durable_mibs") or 0.0 for r in t.measured]),
    ),
    RunCheck(
        "timing-issue",
        "warning",
        "{n} runs took longer than ramp + runtime by more than the threshold, counting the "
        "drain until the data was on disk (seed 000: a buffered zvol test finished 3.8 h late); fio's "
        "MiB/s overstates them, so their test cases rank by durable MiB/s",
        "keep the default ranking (auto) or `--rank-by durable_mibs`; look at load and dirty data of those runs",
        lambda t, r: r.late,
    ),
    RunCheck(
        "read-startup",
        "info",
        "{n} read runs took longer than ramp + runtime: a read has no data to make durable, so the extra wall time is "
        "fio's start-up (opening and laying out its files, under load), not lateness; fio's MiB/s ranks them",
        "nothing to fix in the numbers; a long start-up says the host was busy before the run (see load1)",
        lambda t, r: _startup(r) > _startup_limit(r),
        lambda t: t.done if t.reads_only else (),  # a test-level fact: asked once per test, not per run
    ),
    TestCheck(
        "wall-unknown",
        "info",
        "No wall-clock time recorded (e.g. imported fio JSON): timing issues and durable throughput cannot be checked",
        "run the tests with `tankbench run`",
        lambda t: t.measured and all(r.wall_s is None for r in t.measured),
    ),
    TestCheck(
        "compressible-buffers",
        "error",
        "fio writes compressible or zero-filled buffers: with compression on, throughput is inflated",
        "remove buffer_compress_percentage / zero_buffers; tankbench's default is incompressible refill_buffers",
        lambda t: _compress_options(t) or str(t.fio_options.get("refill_buffers", "1")) == "0",
    ),
    # seed 002's trap as an axis: reads of an unwritten or zero-filled file measure memory; compressible data with
    # compression on moves less than fio reports; and data that compressed although nobody asked for it
    TestCheck(
        "layout-reads-meaningless",
        "error",
        "Reads of an unwritten (sparse) or zero-filled file: "
        "ZFS returns holes or compressed zeros from memory without touching the disks, so these "
        "reads measure CPU and RAM (seed 002: 2458 MB/s unwritten vs 897 MB/s written)",
        "compare with layout = random (written with incompressible data); read these tests as a "
        "demonstration of the trap, not as the pool's read speed",
        lambda t: str(t.params.get("layout", "")) in TRAP_LAYOUTS and "read" in t.case,
    ),
    TestCheck(
        "layout-compressible",
        "warning",
        "Compressible layout with compression on: ZFS "
        "reads and writes fewer bytes than fio counts, so MiB/s is the logical, not the physical rate",
        "compare physical MiB/s and physical/logical; use layout = random for the pool's raw speed",
        lambda t: (
            str(t.params.get("layout", "")).startswith("compressible")
            and str(t.axes().get("compression", "off")) not in ("off", "none", "")
        ),
    ),
    TestCheck(
        "compressed-writes",
        "warning",
        "The dataset's compressratio after the run is above 1.1 "
        "although no compressible data was asked for: fio's buffers compressed (fio reuses its buffers "
        "unless refill_buffers is set), so ZFS wrote less than fio reports",
        "set refill_buffers=1 and buffer_compress_percentage=0 (or a random layout), or compression=off for the test",
        lambda t: (t.mean("compressratio") or 1.0) > 1.1 and "layout" not in t.params and not _compress_options(t),
    ),
    # the layout, dirty data, qemu's settings and fio's runtime, run by run
    RunCheck(
        "sparse-file",
        "error",
        "Test file sparse or not fully allocated: reads of holes measure nothing",
        "let tankbench lay out the file (it writes incompressible data and verifies allocated size)",
        lambda t, r: _sparse(r.extra),
        _done,
    ),
    RunCheck(
        "compressible-data",
        "error",
        "The test file's data compresses: with compression on, ZFS moves less than fio reports (seed 002)",
        "lay out with incompressible data; set refill_buffers and do not set buffer_compress_percentage",
        lambda t, r: (r.extra.get("layout.sample_compress_ratio") or 1.0) > 1.1,
        _done,
    ),
    RunCheck(
        "layout-unverified",
        "info",
        "Allocated size of the test file was not verified",
        "use a file target laid out by tankbench",
        lambda t, r: not r.extra.get("layout.verified"),
        lambda t: t.done if t.traits.test_file else (),
    ),
    RunCheck(
        "dirty-carried",
        "warning",
        f"More than {DIRTY_LIMIT >> 20} MiB of dirty data before a run or "
        "after its drain: one test's writes land in the next test's numbers",
        "raise the drain timeout or add a pause between tests",
        lambda t, r: (
            max(r.extra.get("preflight.dirty_bytes") or 0, r.extra.get("drain.dirty_end_bytes") or 0) > DIRTY_LIMIT
        ),
        _done,
    ),
    RunCheck(
        "drain-incomplete",
        "warning",
        "The drain after the run did not finish (the run's check drain.incomplete says what failed): its drain time "
        "and durable throughput understate what the writes cost",
        "check the pool's health and the sync command's error; raise campaign.drain_max if it ran out of time",
        lambda t, r: bool(r.extra.get("drain.incomplete")),
        _done,
    ),
    RunCheck(
        "qemu-settings-mismatch",
        "error",
        "qemu reports other settings for the guest's disk than the test asked for (bus, format, qcow2 cluster, "
        "cache mode, iothread or werror; the run's check guest.settings_mismatch says which): its numbers "
        "belong to the settings qemu used",
        "check the qemu version on the host (`tankbench show` the run) and file an issue with its checks",
        lambda t, r: r.extra.get("guest.settings_match") is False,
        _done,
    ),
    RunCheck(
        "fio-runtime-mismatch",
        "warning",
        "fio's runtime (less its final fsync) differs from the configured runtime",
        "check fio's stderr; a short runtime means fio stopped early (size reached or error)",
        _runtime_mismatch,
        _done,
    ),
    # ARC, txg, direct-ignored and ashift need ZFS metrics: without any, say what was not checked
    TestCheck(
        "zfs-not-measured",
        "info",
        "The journal has no ZFS metrics (arcstats, recordsize, "
        "ashift, txg_timeout): not checked whether the working set exceeds the ARC, whether the "
        "runtime covers several txgs, whether O_DIRECT was ignored, or whether recordsize aligns "
        "with ashift",
        "run with a tankbench that records ZFS metrics (ZFS host or lab VM)",
        lambda t: t.traits.zfs,
        lambda ds: not any(t.zfs for t in ds.tests),
    ),
    TestCheck(
        "working-set-in-arc",
        "warning",
        "Working set not larger than the ARC: reads come from RAM",
        "use a test file larger than zfs_arc_max (or lower zfs_arc_max for the campaign)",
        lambda t: (
            t.zfs and "read" in t.case and (t.zfs.get("zfs.working_set_fits_arc") or _arc_max(t.zfs) >= t.size > 0)
        ),
    ),
    TestCheck(
        "runtime-vs-txg",
        "warning",
        "Write runtime shorter than 3 txg intervals: where the txg syncs fall decides the result",
        "set runtime to at least 3 × zfs_txg_timeout (15 s at the default 5 s; longer is better)",
        lambda t: (
            t.zfs
            and "write" in t.case
            and (
                t.zfs.get("zfs.runtime_near_txg")
                or t.runtime < 3 * float(t.zfs.get("zfs.txg_timeout") or DEFAULT_TXG_TIMEOUT)
            )
        ),
    ),
    TestCheck(
        "direct-ignored",
        "error",
        "O_DIRECT was requested but ZFS served it through the ARC "
        "(zvols always; datasets on OpenZFS < 2.3, with direct=disabled or zfs_dio_enabled=0): the test "
        "measured cached I/O",
        "read these tests as buffered; for real direct I/O use a dataset on "
        "OpenZFS >= 2.3 with direct=standard or always",
        lambda t: t.zfs.get("zfs.direct_ignored"),
    ),
    TestCheck(
        "direct-forced",
        "error",
        'Buffered I/O on a dataset with direct=always (OpenZFS >= 2.3): the "buffered" test measured direct I/O',
        "set direct=standard on the dataset for buffered tests",
        lambda t: t.zfs.get("zfs.direct_forced"),
    ),
    TestCheck(
        "ashift-alignment",
        "warning",
        "recordsize/volblocksize smaller than or not a multiple of the pool's sector size (2^ashift) (seed 001)",
        "use a recordsize/volblocksize that is a multiple of 2^ashift, or recreate the pool with the right ashift",
        lambda t: t.zfs and (t.zfs.get("zfs.misaligned") or _misaligned_ashift(t.zfs)),
    ),
    # issue 11: runs that never reached fio's steady state, and what the adaptive schedule decided (stop early,
    # drop from a race, max repeats without the CI), each with its evidence, so nothing is decided silently
    RunCheck(
        "never-steady",
        "warning",
        "{n} measured runs never reached fio's steady state (campaign.ss): they ran the "
        "whole runtime on a moving target",
        "lengthen campaign.runtime, loosen campaign.ss, or find what drifts (a cache filling, txg bursts)",
        lambda t, r: r.extra.get("steadystate.attained") is not None and not r.extra["steadystate.attained"],
        _measured,
    ),
    RunCheck(
        "schedule-drop",
        "info",
        "A race stopped repeating these tests, clearly behind their test case's leader",
        "set racing = false to give every test its full repeats",
        lambda t, r: r.extra.get("schedule.decision") == "drop",
        _decided,
        detail=True,
    ),
    RunCheck(
        "schedule-max",
        "info",
        "These tests reached repeats.max before their confidence interval met repeats.ci",
        "raise repeats.max, or find the noise",
        lambda t, r: (
            r.extra.get("schedule.decision") == "max" and "max repeats" in str(r.extra.get("schedule.reason", ""))
        ),
        _decided,
        detail=True,
    ),
    RunCheck(
        "schedule-stop",
        "info",
        "These tests stopped early: their confidence interval met repeats.ci",
        "set a fixed repeats = N for a fixed number of runs",
        lambda t, r: r.extra.get("schedule.decision") == "stop",
        _decided,
        detail=True,
    ),
    RunCheck(
        "schedule-settled",
        "info",
        "These tests ran no more once their place in their test case was settled (repeats.settle): their "
        "intervals overlap no neighbour's by more than the margin",
        "set a fixed repeats = N, or a smaller settle margin, for more runs of every test",
        lambda t, r: r.extra.get("schedule.decision") == "settled",
        _decided,
        detail=True,
    ),
    RunCheck(
        "schedule-reopened",
        "info",
        "A neighbour's later runs put these settled places in doubt again: they ran again",
        "nothing to do: the decisions after it (in the test's later runs) are the ones that count",
        lambda t, r: r.extra.get("schedule.decision") == "reopened",
        _decided,
        detail=True,
    ),
)


def _startup(r: RunView) -> float:
    return r.excess_s if r.excess_s is not None else 0.0


def _startup_limit(r: RunView) -> float:
    """The timing threshold the run recorded, else 10 % of ramp + runtime (the report's default)."""
    limit = r.extra.get("timing.threshold_s")
    return float(limit) if isinstance(limit, int | float) else 0.1 * r.expected_s


def validity_warnings(ds: Dataset) -> tuple[Warning, ...]:
    """All warnings, most severe first."""
    out: list[Warning] = [*check_emulated(ds), *check_fingerprints(ds)]
    for check in (*CHECKS, *MECHANISM_CHECKS):
        out.extend(check.warnings(ds))
    order = {"error": 0, "warning": 1, "info": 2}
    return tuple(sorted(out, key=lambda w: order[w.severity]))
