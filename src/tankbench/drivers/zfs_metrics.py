"""What a run on a ZFS target captures (request fields for the agent) and the journal fields made from it."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from tankbench.fio.layout import ends_with_fsync, size_based
from tankbench.hosts.base import Host
from tankbench.model import Test
from tankbench.targets.zfsplan import buffer_check, dataset_name, pool_root, zfs_props
from tankbench.units import parse_size
from tankbench.zfs.evidence import DMU_TX
from tankbench.zfs.props import REPORTED, SIZE_PROPS

if TYPE_CHECKING:
    from tankbench.agent import FioRunExtras

ARCSTATS = "/proc/spl/kstat/zfs/arcstats"
#: pool-wide ZIL counters (OpenZFS >= 0.8); per dataset in each objset kstat from 2.2 on
ZIL_KSTAT = "/proc/spl/kstat/zfs/zil"


def objset_kstats(pool: str) -> str:
    """The per-dataset kstats of a pool (the agent expands the pattern)."""
    return f"/proc/spl/kstat/zfs/{pool}/objset-*"


def txgs_path(pool: str) -> str:
    return f"/proc/spl/kstat/zfs/{pool}/txgs"


def zfs_capture(test: Test, pool: str) -> FioRunExtras:
    """Agent request fields: files read before/after fio, `zpool iostat` streamed during it, properties after,
    and `zpool sync` both before (no dirty data carried in) and after (drain until durable)."""
    ds = dataset_name(test)
    return {
        "capture_files": [ARCSTATS, txgs_path(pool), ZIL_KSTAT, objset_kstats(pool), DMU_TX],
        # -l -q: each vdev's waits and queues beside its ops (the limiter's evidence, zfs/evidence.py)
        "during_cmd": ["zpool", "iostat", "-HpvP", "-l", "-q", "-y", pool, "1"],
        "after_cmds": [
            ["zfs", "get", "-Hp", "-o", "name,property,value,source", "all", ds],
            # the pool-level ashift reads 0 unless set at creation; the vdevs carry the real one
            ["zpool", "get", "-Hp", "-o", "name,property,value,source", "ashift", pool, "all-vdevs"],
            ["zpool", "status", "-P", pool],
        ],
        "sync_cmd": ["zpool", "sync", pool],
    }


def tunables(params: dict[str, str]) -> dict[str, str]:
    """Fingerprint-relevant module parameters."""
    from tankbench.zfs import checks as zchecks

    return zchecks.tunables(params)


def pool_vdev_paths(host: Host, pool: str) -> list[str]:
    """Data, log and cache device paths of an existing pool (for /proc/diskstats sampling)."""
    from tankbench.zfs import parse as zparse

    status = zparse.parse_zpool_status(host.run(["zpool", "status", "-P", pool], check=True, timeout=120).stdout)
    return [d for d in list(status.get("data", [])) + list(status.get("logs", [])) if d.startswith("/dev/")]


def _after(res: dict[str, Any], sub: str) -> str:
    for item in res.get("after_outputs", []):
        if sub in " ".join(item.get("argv", [])) and item.get("rc") == 0:
            return str(item.get("stdout", ""))
    return ""


def from_capture(
    test: Test,
    res: dict[str, Any],
    version_text: str,
    params: dict[str, str],
    run_metrics: dict[str, float],
    qemu_cache: str | None = None,
    zfs_object: str = "",
) -> tuple[dict[str, float], dict[str, Any], dict[str, list[float]]]:
    """(metrics, checks, samples) from what the agent captured around one fio run on a ZFS target
    (`qemu_cache`: the cache mode of the test guest's disk, for vm-disk targets; `zfs_object`: the kind's
    trait, "filesystem" or "volume" when fio opens a dataset's file or a zvol on the host)."""
    from tankbench.zfs import iostat as ziostat
    from tankbench.zfs import parse as zparse

    pool = pool_root(test).split("/")[0]
    before, after = res.get("files_before", {}), res.get("files_after", {})
    metrics: dict[str, float] = {}
    checks: dict[str, Any] = {}
    arc_after = zparse.parse_arcstats(after.get(ARCSTATS, ""))
    metrics.update(zparse.arc_delta(zparse.parse_arcstats(before.get(ARCSTATS, "")), arc_after))
    status = zparse.parse_zpool_status(_after(res, "zpool status"))
    intervals = ziostat.parse_zpool_iostat(res.get("during_output", ""), status)
    metrics.update(ziostat.summarize_iostat(intervals))
    samples = ziostat.iostat_series(intervals)
    rows_before = zparse.parse_txgs(before.get(txgs_path(pool), ""))
    last_txg = zparse.last_committed_txg(rows_before)  # the txg open at the start belongs to this run
    txgs = zparse.parse_txgs(after.get(txgs_path(pool), ""))
    metrics.update(zparse.txg_summary(last_txg, txgs))
    t0 = dict(res.get("checks", {})).get("fio.t0_monotonic_ns")
    if isinstance(t0, int):  # when each txg synced, on fio's time axis (the report marks them on its series)
        from tankbench.zfs.evidence import txg_syncs

        samples.update(txg_syncs(txgs, last_txg, t0, test.ramp))
    ds = dataset_name(test)
    zil, zil_source = zparse.zil_run_delta(before, after, ds)
    metrics.update(zil)
    if zil_source:
        checks["zil.source"] = zil_source  # "dataset": this test's own; "global": every dataset of the host
    props = zparse.parse_zfs_get(_after(res, "zfs get")).get(ds, {})
    checks["zfs.dataset"] = ds
    checks["zfs.props"] = {k: props[k] for k in sorted(props) if k in REPORTED}
    checks["zfs.expected_props"] = zfs_props(test)
    checks["zfs.props_match"] = all(
        props.get(k) == _zfs_value(k, v) for k, v in zfs_props(test).items() if k != "encryption"
    ) and bool(props)
    if "compressratio" in props:
        metrics["zfs.compressratio"] = float(str(props["compressratio"]).rstrip("x") or 0)
    checks.update(buffer_check(test, props.get("compression"), metrics.get("zfs.compressratio")))
    checks.update(_evidence(res, status, before, after, metrics))
    checks["zfs.slog_present"] = bool(status.get("logs"))
    checks["zfs.scan_active"] = status.get("scan_active")
    # logical: what fio wrote; physical: what reached the vdev disks (diskstats), incl. metadata and ZIL
    if "dev.write_bytes" in run_metrics:
        metrics["zfs.physical_bytes_written"] = float(run_metrics["dev.write_bytes"])
    metrics["zfs.logical_bytes_written"] = float(run_metrics.get("write.io_bytes", 0.0))
    checks.update(_honesty(test, version_text, props, arc_after, params, _after(res, "zpool get"), zfs_object))
    checks.update(sync_checks(test, props, {**run_metrics, **metrics}, res, qemu_cache))
    return metrics, checks, samples


def _evidence(
    res: dict[str, Any],
    status: dict[str, Any],
    before: dict[str, str],
    after: dict[str, str],
    metrics: dict[str, float],
) -> dict[str, Any]:
    """The limiter's ZFS evidence (issue 32): write-throttle counters into `metrics`; each vdev's waits and queues
    and each sampled disk's role in the pool as checks."""
    from tankbench.zfs import evidence

    metrics.update(evidence.dmu_tx_delta(before.get(DMU_TX, ""), after.get(DMU_TX, "")))
    out: dict[str, Any] = {}
    vdevs = evidence.vdev_figures(res.get("during_output", ""), status)
    if vdevs:
        out["zfs.vdevs"] = vdevs
    devices = dict(res.get("checks", {})).get("dev.devices")
    if isinstance(devices, dict) and status.get("pool"):
        out["dev.devices"] = evidence.with_roles(devices, status)
    return out


def sync_checks(
    test: Test, props: dict[str, str], m: dict[str, float], res: dict[str, Any], qemu_cache: str | None
) -> dict[str, Any]:
    """The sync check's inputs from one run: what the job asked for, what ZFS and fio saw. A copy in a test guest
    ends with the guest's `sync` (its flush must reach the ZIL); a copy on the host is drained with `zpool sync`,
    which writes a txg and no ZIL record: nothing to judge there."""
    from tankbench.zfs import checks as zchecks

    if test.is_copy and qemu_cache is None:
        return {}
    per_write = str(test.params.get("sync_mode", "async")) != "async"
    tail = m.get("sync.end_fsync_s")
    if test.is_copy:
        io_s = m.get("copy.seconds", 0.0)
    elif size_based(test):
        io_s = max(0.0, m.get("fio.runtime_s", 0.0) - (tail or 0.0))
    else:
        io_s = float(test.runtime)
    return zchecks.sync_check(
        flushes=per_write or ends_with_fsync(test) or test.is_copy,
        per_write_sync=per_write,
        zfs_sync=props.get("sync"),
        zil_commits=m.get("zil.commit_count"),
        end_fsync_s=tail,
        io_s=io_s,
        host_drain_s=res.get("drain_s"),
        qemu_cache=qemu_cache,
        guest_flushes=m.get("guest.disk_flushes"),
    )


def _zfs_value(key: str, value: str) -> str:
    """Normalise a property value as `zfs get -p` prints it (sizes in bytes)."""
    if key in SIZE_PROPS:  # special_small_blocks = "16k" is 16384 to zfs get -p: every run was "did not take"
        return str(parse_size(value))
    return value


def _honesty(
    test: Test,
    version_text: str,
    props: dict[str, str],
    arc: dict[str, int],
    params: dict[str, str],
    zpool_get: str,
    zfs_object: str,
) -> dict[str, Any]:
    """The checks the report's validity warnings read: direct I/O, alignment, working set, txg interval."""
    from tankbench.zfs import checks as zchecks
    from tankbench.zfs import parse as zparse

    out: dict[str, Any] = {}
    version = zparse.zfs_version(version_text)
    out["zfs.version"] = ".".join(str(x) for x in version) if version else ""
    out.update(
        zchecks.direct_io_check(
            version,
            zfs_object,
            str(test.params.get("io", "direct")),
            props.get("direct"),
            params.get("zfs_dio_enabled"),
        )
    )
    ashift = zparse.pool_ashift(zparse.parse_zfs_get(zpool_get)) or 0
    rs = int(props["recordsize"]) if props.get("recordsize", "").isdigit() else None
    vbs = int(props["volblocksize"]) if props.get("volblocksize", "").isdigit() else None
    if ashift and "bs" in test.params:  # copy tests have no fio block size
        out.update(zchecks.alignment_check(ashift, rs, vbs, parse_size(str(test.params["bs"]))))
    if arc.get("c_max"):
        out.update(zchecks.working_set_check(test.target.size, int(arc["c_max"])))
    if params.get("zfs_txg_timeout") and not test.is_copy and test.runtime > 0:  # size-based runs: no runtime
        out.update(zchecks.txg_check(test.runtime, float(params["zfs_txg_timeout"])))
    return out
