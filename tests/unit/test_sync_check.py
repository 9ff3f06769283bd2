"""Seed 003's sync question as pure functions: the final fsync's duration from fio's JSON, ZIL commits from the
kstats (real OpenZFS 2.3.2 captures), and the check that reads them."""

from __future__ import annotations

import json

from tankbench import model
from tankbench.fio.jobs import ends_with_fsync, run_job_text
from tankbench.fio.parse import IO_LOG_MSEC, end_fsync_seconds
from tankbench.model import Target
from tankbench.zfs.checks import sync_check
from tankbench.zfs.parse import kstat_dataset_name, zil_run_delta
from tankbench.zfs.props import ZfsOptions
from tests.conftest import ROOT

ZFS = ROOT / "tests" / "fixtures" / "zfs"


def _doc(*runtimes_ms: int) -> dict[str, object]:
    return {"jobs": [{"jobname": "j", "job_runtime": ms, "write": {"runtime": ms}} for ms in runtimes_ms]}


def _test(mode: str = "", **fio: object) -> model.Test:
    params: dict[str, object] = {"rw": "randwrite", "bs": "4k", "numjobs": 2}
    if mode:
        params["mode"] = mode
    return model.Test(
        number=1,
        name="t",
        target=Target(name="f", kind="file", path="/srv/x", size=1 << 26),
        params=params,
        fio_options=fio,
        runtime=60,
        ramp=0,
    )


def test_time_based_tail_is_runtime_beyond_the_io_phase_per_job() -> None:
    # group_reporting: one entry whose job_runtime sums 2 jobs of 60 s I/O + 3 s and 5 s of fsync
    assert end_fsync_seconds(_doc(128_000), numjobs=2, runtime_s=60, time_based=True) == 4.0
    # one entry per job (no group_reporting)
    assert end_fsync_seconds(_doc(63_000, 65_000), numjobs=2, runtime_s=60, time_based=True) == 4.0
    assert end_fsync_seconds(_doc(59_990), numjobs=1, runtime_s=60, time_based=True) == 0.0  # never negative


def test_size_based_tail_reads_the_last_io_of_each_jobs_log() -> None:
    logs = {"tbio_iops.1.log": "3500, 360, 1, 0, 0", "tbio_iops.2.log": "3000, 300, 1, 0, 0"}
    tail = end_fsync_seconds(_doc(9_000), numjobs=2, runtime_s=0, time_based=False, io_log_last=logs)
    assert tail == round((9_000 - 3_500 - 3_000 - IO_LOG_MSEC) / 2 / 1000, 3)
    # a log missing, or no logs: not measured (None), never a made-up number
    assert end_fsync_seconds(_doc(9_000), 2, 0, False, {"tbio_iops.1.log": "3500, 1, 1, 0, 0"}) is None
    assert end_fsync_seconds(_doc(9_000), 2, 0, False, None) is None
    assert end_fsync_seconds({"jobs": [{"jobname": "j"}]}, 1, 60, True) is None


def test_run_job_text_adds_100ms_io_logs_only_to_size_based_jobs_that_end_with_an_fsync() -> None:
    sized = _test("size", end_fsync=1)
    assert ends_with_fsync(sized) and not ends_with_fsync(_test("size"))
    text = run_job_text(sized)
    assert (
        f"[global]\nwrite_iops_log=tbio\nwrite_bw_log=tbsec\nwrite_lat_log=tbsec\nlog_avg_msec={IO_LOG_MSEC}\n"
        "per_job_logs=1\n"
    ) in text
    # every other run logs IOPS, bandwidth and latency per second (the report's time series, issue 32)
    for other in (_test(end_fsync=1), _test("size", fsync_on_close=0)):
        assert "write_iops_log=tbsec\nwrite_bw_log=tbsec\nwrite_lat_log=tbsec\nlog_avg_msec=1000\n" in run_job_text(
            other
        )


def test_zil_counters_of_the_zvol_from_its_objset_kstat() -> None:
    before = {"/proc/spl/kstat/zfs/zil": (ZFS / "lab-zil-before.txt").read_text()}
    obj = (ZFS / "lab-objset-zvol-after.txt").read_text()
    after = {
        "/proc/spl/kstat/zfs/zil": (ZFS / "lab-zil-after.txt").read_text(),
        "/proc/spl/kstat/zfs/tbz/objset-0x84": obj,
    }
    assert kstat_dataset_name(obj) == "tbz/v"
    delta, source = zil_run_delta(before, after, "tbz/v")
    # the zvol was created after the first capture: its own counters count from 0
    assert source == "dataset"
    assert delta["zil.commit_count"] == 452 and delta["zil.itx_metaslab_slog_write"] == 3690496
    assert delta["zil.itx_metaslab_normal_write"] == 0  # the pool has a log device: nothing went to the main disks
    # another dataset has no objset kstat here: the pool-wide counters stand in, and say so
    delta, source = zil_run_delta(before, after, "tbz/other")
    assert source == "global" and delta["zil.commit_count"] == 452
    # an objset id reused by another dataset since the first capture does not count that dataset's commits
    reused = {**before, "/proc/spl/kstat/zfs/tbz/objset-0x84": obj.replace("tbz/v", "tbz/old")}
    delta, _ = zil_run_delta(reused, after, "tbz/v")
    assert delta["zil.commit_count"] == 452
    assert zil_run_delta({}, {}, "tbz/v") == ({}, "")


def _check(**kw: object) -> dict[str, object]:
    args: dict[str, object] = {
        "flushes": True,
        "per_write_sync": False,
        "zfs_sync": "standard",
        "zil_commits": 12.0,
        "end_fsync_s": 0.2,
        "io_s": 60.0,
        "host_drain_s": 4.0,
        "qemu_cache": "none",
    }
    args.update(kw)
    return sync_check(**args)  # type: ignore[arg-type]


def test_sync_check_honoured_when_flushes_reach_the_zil() -> None:
    c = _check()
    # a long host drain is recorded, not judged: what the ZIL holds is durable while its txg is still open
    assert c["sync.honoured"] is True and c["sync.early_ack"] is False and c["sync.host_drain_s"] == 4.0


def test_sync_check_not_honoured_when_flushes_are_dropped_or_ignored() -> None:
    unsafe = _check(qemu_cache="unsafe", zil_commits=0.0)
    assert unsafe["sync.honoured"] is False and "cache=unsafe" in str(unsafe["sync.note"])
    disabled = _check(zfs_sync="disabled")
    assert disabled["sync.honoured"] is False and "sync=disabled" in str(disabled["sync.note"])
    lost = _check(zil_commits=0.0)
    assert lost["sync.honoured"] is False and "no ZIL commit" in str(lost["sync.note"])
    assert "sync.honoured" not in _check(flushes=False)  # a job that never asked for durability is not judged
    assert _check(zil_commits=None)["sync.honoured"] is True  # not measured (old OpenZFS): no false alarm


def test_sync_check_flags_seed_003s_long_final_fsync() -> None:
    late = _check(end_fsync_s=25.0)
    assert late["sync.early_ack"] is True and "25.0 s" in str(late["sync.early_ack_note"])
    assert _check(end_fsync_s=2.9)["sync.early_ack"] is False  # under 5 % of 60 s
    assert "sync.early_ack" not in _check(end_fsync_s=None)
    assert json.dumps(late)  # checks are journalled as JSON


def test_copies_are_judged_in_a_guest_only() -> None:
    from tankbench.drivers.zfs_metrics import sync_checks

    cp = model.Test(
        number=1,
        name="c",
        target=Target(name="g", kind="vm-disk", size=1 << 26, options=ZfsOptions(pool="tb")),
        params={"backing": "zvol", "workload": "cp", "copy_size": "32M", "guest_fs": "ext4"},
        fio_options={},
        runtime=0,
        ramp=0,
    )
    m = {"copy.seconds": 12.0, "zil.commit_count": 3.0}
    # in a guest the copy ends with the guest's sync: a flush that must reach the ZIL
    out = sync_checks(cp, {"sync": "standard"}, m, {"drain_s": 0.5}, "none")
    assert out["sync.job_flushes"] is True and out["sync.honoured"] is True
    lost = sync_checks(cp, {"sync": "standard"}, dict(m, **{"zil.commit_count": 0.0}), {}, "none")
    assert lost["sync.honoured"] is False
    # on the host the drain is `zpool sync`: a txg, no ZIL record; nothing to judge
    assert sync_checks(cp, {"sync": "standard"}, m, {"drain_s": 0.5}, None) == {}
