"""The limiter rules (analysis/limiters/), each on the figures that make it hold and on the near misses that must
not, and how name_limiter chooses among the rules that hold (issue 32)."""

from __future__ import annotations

from typing import Any

from tankbench.analysis.limiters import RULES, arc, cpu, disks, name_limiter, network, rmw, run_facts, throttle
from tankbench.analysis.limiters.facts import BUSY, RunFacts
from tankbench.targets import traits_of
from tankbench.units import pct

HDD = {"read_iops_qd1": 40.0, "read_iops_deep": 40.0, "read_mibs_seq": 16.0, "how": "probe"}
OPTANE = {"read_iops_qd1": 1000.0, "read_iops_deep": 1000.0, "read_mibs_seq": 128.0, "how": "probe"}
B = "/dev/disk/by-id/"
CAPS = [{"disk": f"{B}virtio-tbdata0", **HDD}, {"disk": f"{B}virtio-tblog0", **OPTANE}]
LAB = {"accelerator": "tcg", "cpu_count": 2, "device_capability": CAPS}
REAL = {"accelerator": "kvm", "cpu_count": 8, "device_capability": CAPS}


def dev(
    label: str, role: str = "data", r: float = 0.0, w: float = 0.0, size: int = 4096, busy: float = 50.0
) -> dict[str, Any]:
    return {
        "id": f"{B}virtio-{label}",
        "label": label,
        "role": role,
        "read_iops": r,
        "write_iops": w,
        "read_bw_bytes": r * size,
        "write_bw_bytes": w * size,
        "busy_pct": busy,
        "queue": 1.0,
    }


def facts(
    params: dict[str, Any],
    metrics: dict[str, Any],
    checks: dict[str, Any] | None = None,
    kind: str = "dataset",
    fp: dict[str, Any] | None = None,
    props: dict[str, Any] | None = None,
) -> RunFacts:
    base = {"rw": "randread", "bs": "4k", "io": "direct", "sync_mode": "async", "iodepth": 1}
    return run_facts(
        {**base, **params}, props or {}, traits_of(kind), metrics, checks or {}, REAL if fp is None else fp
    )


def reads(read_bytes: float = 196_608.0, seconds: float = 5.0, **m: float) -> dict[str, float]:
    return {"read.io_bytes": read_bytes, "read.iops": read_bytes / 4096 / seconds, "fio.runtime_s": seconds, **m}


# -- the ARC ------------------------------------------------------------------------------------
def test_direct_reads_that_reached_the_disk_are_not_the_arc() -> None:
    """The issue's example: O_DIRECT 4k reads of 16k records, 0 data hits and misses, 88 metadata hits, every
    read from the disk (786,432 bytes for 196,608 read)."""
    m = reads(
        **{
            "arc.hits": 88.0,
            "arc.misses": 0.0,
            "arc.hit_ratio": 1.0,
            "arc.demand_data_hits": 0.0,
            "arc.demand_data_misses": 0.0,
            "arc.demand_metadata_hits": 88.0,
            "arc.prefetch_data_hits": 0.0,
            "arc.prefetch_data_misses": 0.0,
            "dev.read_bytes": 786_432.0,
        }
    )
    f = facts({}, m, {"zfs.block_bytes": 16384}, fp={})
    assert arc.find(f) is None
    limit = name_limiter(f)
    assert limit.kind != "arc"
    assert "reads amplify: the disks read 4.0× what fio read (4.0 KiB reads of 16.0 KiB blocks)" in limit.evidence


def test_warm_reads_from_the_arc_are_the_arc() -> None:
    m = reads(
        512 * 2**20,
        **{"arc.demand_data_hits": 9_800.0, "arc.demand_data_misses": 100.0, "arc.prefetch_data_hits": 0.0},
        **{
            "arc.prefetch_data_misses": 0.0,
            "dev.read_bytes": 2 * 2**20,
            "fio.usr_cpu_pct": 20.0,
            "fio.sys_cpu_pct": 79.0,
        },
    )
    found = arc.find(facts({"io": "buffered"}, m))
    assert found is not None and found.kind == "arc" and found.score > 0.98
    limit = name_limiter(facts({"io": "buffered"}, m))
    assert limit.kind == "arc", limit
    assert "the ARC served 99 % of data reads (9,800 demand/prefetch data hits, 100 misses)" in limit.evidence
    assert "behind it: cpu" in limit.evidence  # fio's thread at 99 % copies from memory


def test_data_hits_with_the_disks_reading_are_not_the_arc() -> None:
    m = reads(
        100 * 2**20, **{"arc.demand_data_hits": 950.0, "arc.demand_data_misses": 50.0, "dev.read_bytes": 40 * 2**20}
    )
    assert arc.find(facts({}, m)) is None


def test_writes_and_non_zfs_targets_never_measure_the_arc() -> None:
    m = reads(**{"arc.demand_data_hits": 1000.0, "arc.demand_data_misses": 0.0, "dev.read_bytes": 0.0})
    assert arc.find(facts({}, m, kind="file")) is None
    w = {"write.io_bytes": 1e6, "arc.demand_data_hits": 1000.0, "arc.demand_data_misses": 0.0}
    assert arc.find(facts({"rw": "randwrite"}, w)) is None


# -- the disks -----------------------------------------------------------------------------------
def test_a_data_disk_at_its_capability_is_the_limit() -> None:
    f = facts({}, reads(), {"dev.devices": {"vdb": dev("tbdata0", r=39.0, busy=99.0)}})
    found = disks.find_data(f)
    assert found is not None and found.detail == "tbdata0"
    assert found.evidence.startswith("tbdata0 at 39 IOPS (156.0 KiB/s) of the 40 it can do at 4.0 KiB requests (98 %)")
    assert name_limiter(f).kind == "data-disks"


def test_a_data_disk_below_its_capability_is_not() -> None:
    f = facts({}, reads(), {"dev.devices": {"vdb": dev("tbdata0", r=20.0, busy=99.0)}})
    assert disks.find_data(f) is None


def test_large_requests_are_judged_by_bandwidth() -> None:
    # 16 MiB/s of 1M requests: 16 ops/s is the hdd model's limit at that size, not 40
    f = facts({}, reads(), {"dev.devices": {"vdb": dev("tbdata0", r=15.5, size=2**20, busy=99.0)}})
    found = disks.find_data(f)
    assert found is not None and abs(found.score - 15.5 / 16) < 0.01


def test_without_a_capability_only_a_disk_always_busy_counts() -> None:
    d = dev("loop3", r=900.0, busy=99.0)
    d["id"] = "loop3"
    assert disks.find_data(facts({}, reads(), {"dev.devices": {"loop3": d}}, kind="file")) is not None
    d["busy_pct"] = 80.0
    assert disks.find_data(facts({}, reads(), {"dev.devices": {"loop3": d}}, kind="file")) is None


def test_the_log_device_bounds_sync_writes_only() -> None:
    devices = {"vdb": dev("tbdata0", w=5.0), "vde": dev("tblog0", role="log", w=990.0, busy=99.0)}
    m = {"write.io_bytes": 4e7, "write.iops": 990.0, "zil.commit_count": 9900.0, "fio.runtime_s": 10.0}
    f = facts({"rw": "randwrite", "sync_mode": "sync"}, m, {"dev.devices": devices})
    found = disks.find_log(f)
    assert found is not None and found.detail == "tblog0" and "9,900 ZIL commits" in found.evidence
    assert name_limiter(f).kind == "log-device"
    assert disks.find_log(facts({"rw": "randwrite"}, {"write.io_bytes": 4e7}, {"dev.devices": devices})) is None


# -- the CPU ---------------------------------------------------------------------------------------
def test_the_emulator_busy_is_the_cpu() -> None:
    m = reads(**{"cpu.emulator_busy_pct": 97.0, "cpu.emulator_pct": 80.0, "fio.usr_cpu_pct": 30.0})
    limit = name_limiter(facts({}, m, fp=LAB))
    assert (limit.kind, limit.detail) == ("cpu", "emulator")
    assert "the emulator (qemu, one TCG thread) was 97 % busy (80 % running" in limit.evidence


def test_fio_busy_in_the_lab_without_the_emulator_figure_is_the_emulator() -> None:
    m = reads(**{"fio.usr_cpu_pct": 10.0, "fio.sys_cpu_pct": 88.0, "fio.jobs": 1.0})
    limit = name_limiter(facts({}, m, fp=LAB))
    assert (limit.kind, limit.detail) == ("cpu", "emulator"), limit
    assert "in an emulated machine (TCG)" in limit.evidence
    real = name_limiter(facts({}, m))
    assert (real.kind, real.detail) == ("cpu", "fio")


def test_a_zfs_thread_group_at_its_limit() -> None:
    checks = {"cpu.groups": {"z_wr_iss": 380.0, "fio": 20.0}, "cpu.group_threads": {"z_wr_iss": 4}}
    found = cpu.find(facts({"rw": "write"}, {"write.io_bytes": 1e9}, checks))
    assert found is not None and found.detail == "z_wr_iss" and "380 % of a CPU" in found.evidence
    checks["cpu.group_threads"] = {"z_wr_iss": 8}  # 8 threads on 8 CPUs: 380 % is half of what they can use
    assert cpu.find(facts({"rw": "write"}, {"write.io_bytes": 1e9}, checks)) is None


# -- ZFS mechanisms --------------------------------------------------------------------------------
def writes(n: float = 10_000.0, **m: float) -> dict[str, float]:
    return {"write.io_bytes": n * 4096, "write.total_ios": n, "write.iops": n / 10, "fio.runtime_s": 10.0, **m}


def test_the_write_throttle_names_its_delays() -> None:
    m = writes(**{"dmu_tx.assigned": 12_000.0, "dmu_tx.dirty_delay": 1900.0, "dmu_tx.dirty_over_max": 3.0})
    found = throttle.find(facts({"rw": "write", "io": "buffered"}, {**m, "zfs.txgs_synced": 4.0}))
    assert found is not None
    assert found.evidence.startswith("ZFS held writers back 1,903 times (dirty_delay 1,900, dirty_over_max 3; dmu_tx)")
    # the lab's buffered zvol writes: the ARC's dirty data over its share held the writeback 64 times
    lab = {"dmu_tx.assigned": 24_633.0, "dmu_tx.dirty_throttle": 64.0, "dmu_tx.dirty_delay": 0.0}
    assert throttle.find(facts({"rw": "write", "io": "buffered"}, writes(**lab), kind="zvol")) is not None
    few = {"dmu_tx.assigned": 24_633.0, "dmu_tx.dirty_delay": 9.0}
    assert throttle.find(facts({"rw": "write"}, writes(**few))) is None
    assert throttle.find(facts({"rw": "write"}, writes())) is None  # no dmu_tx kstat: not judged


def test_read_modify_write_of_partial_blocks_with_busy_disks() -> None:
    devices = {"vdb": dev("tbdata0", r=20.0, w=20.0, size=8192, busy=99.0)}
    f = facts(
        {"rw": "randwrite"},
        writes(),
        {"dev.devices": devices, "zfs.block_bytes": 8192, "zfs.partial_record_writes": True},
        kind="zvol",
    )
    found = rmw.find(f)
    assert found is not None
    assert found.evidence.startswith(
        "4.0 KiB writes into 8.0 KiB blocks read-modify-write: the data disks read 20 ops/s"
    )
    limit = name_limiter(f)
    assert limit.kind == "read-modify-write"
    assert "behind it: data disks" in limit.evidence


def test_whole_block_writes_are_not_read_modify_write() -> None:
    devices = {"vdb": dev("tbdata0", r=20.0, w=20.0, busy=99.0)}
    f = facts({"rw": "randwrite"}, writes(), {"dev.devices": devices, "zfs.block_bytes": 4096}, kind="zvol")
    assert rmw.find(f) is None


def test_the_network_when_netcount_says_so() -> None:
    checks = {"net.limit": "network", "net.why": "eth0 moved 112 MiB/s one way: 94 % of its 1000 Mb/s link"}
    found = network.find(facts({}, reads(), checks, kind="nfs"))
    assert found is not None and found.evidence.endswith("link")
    unknown = {"net.limit": "unknown", "net.why": "the link's speed is unknown"}
    assert network.find(facts({}, reads(), unknown, kind="nfs")) is None
    limit = name_limiter(facts({}, reads(**{"cpu.emulator_busy_pct": 99.0}), unknown, kind="nfs", fp=LAB))
    assert limit.kind == "cpu" and "network not judged" in limit.evidence


# -- choosing ----------------------------------------------------------------------------------------
def test_nothing_at_its_limit_is_not_determined_with_what_was_missing() -> None:
    limit = name_limiter(facts({}, reads(**{"fio.usr_cpu_pct": 5.0}), fp={}))
    assert limit.kind == "not-determined"
    assert "missing: per-disk figures (diskstats), host CPU, CPU per thread group" in limit.evidence


def test_a_local_file_run_is_named_from_disks_and_cpu_and_says_what_zfs_evidence_it_lacks() -> None:
    d = dev("loop3", r=0.0, w=2000.0, busy=99.5)
    d["id"] = "loop3"
    checks = {"dev.devices": {"loop3": d}, "cpu.groups": {"fio": 30.0}}
    limit = name_limiter(facts({"rw": "write"}, writes(), checks, kind="file", fp={"cpu_count": 2}))
    assert limit.kind == "data-disks" and limit.detail == "loop3"
    assert any(m.startswith("ZFS evidence (not a ZFS target): ARC hits") for m in limit.missing), limit.missing


def test_every_rule_is_registered_once_with_a_known_kind() -> None:
    from tankbench.analysis.limiters import KINDS

    kinds = [r.kind for r in RULES]
    assert len(kinds) == len(set(kinds)) and set(kinds) < set(KINDS)
    assert all(r.reads and r.tier in (1, 2, 3) for r in RULES)


def test_a_late_buffered_zvol_run_says_where_its_writes_waited() -> None:
    m = writes(**{"timing.excess_s": 14.0, "dmu_tx.assigned": 5000.0, "dmu_tx.dirty_throttle": 60.0})
    f = run_facts({"rw": "write", "bs": "4k", "io": "buffered"}, {}, traits_of("zvol"), m, {}, REAL, drain_s=9.0)
    limit = name_limiter(f)
    assert limit.kind == "write-throttle"
    assert "the data was durable 23 s after fio's runtime (fio exited 14 s late, then 9.0 s of drain)" in limit.evidence
    assert "page cache in front of the device, and its last close waited for them" in limit.evidence


def test_a_copy_test_writes() -> None:
    f = run_facts({"workload": "cp", "copy_size": "64M"}, {}, traits_of("dataset"), {"copy.bytes": 64e6}, {})
    assert f.direction == "write"
    assert facts({"rw": "randrw"}, {}).direction == "mixed" and facts({"rw": "randread"}, {}).direction == "read"


def test_sync_writes_waiting_on_hdd_latency_below_its_throughput_are_disk_bound() -> None:
    """Seed 001 without a log: each 4k O_SYNC write waits for its ZIL block on a raidz1 of three 40-IOPS disks:
    fio does 30 writes/s, each disk 20 requests/s (67 % of what it can), each request 25 ms against fio's 33 ms."""
    devices = {f"vd{c}": {**dev(f"tbdata{i}", w=20.0, busy=55.0), "await_ms": 25.0} for i, c in enumerate("bcd")}
    m = {"write.io_bytes": 300 * 4096.0, "write.iops": 30.0, "write.lat_mean_ns": 33e6, "fio.runtime_s": 10.0}
    p = {"rw": "randwrite", "sync_mode": "sync", "ioengine": "psync"}
    f = facts(p, m, {"dev.devices": devices})
    found = disks.find_data(f)
    assert found is not None and found.figures["latency_share"] > 1.0
    assert "fio's I/O waited on the disks: tbdata0 took 25.0 ms per request" in found.evidence
    assert name_limiter(f).kind == "data-disks"
    # with a log device, the data disks' background txg writes do not make fio wait for them
    with_log = {**devices, "vde": {**dev("tblog0", role="log", w=245.0, busy=40.0), "await_ms": 1.5}}
    assert disks.find_data(facts(p, {**m, "write.iops": 245.0}, {"dev.devices": with_log})) is None
    # buffered async writes never wait on the disks' latency
    assert disks.find_data(facts({"rw": "write", "io": "buffered"}, m, {"dev.devices": devices})) is None


def test_qd1_reads_whose_disk_takes_the_dominant_share_of_each_io_are_disk_bound() -> None:
    """bench/limiter's data-disks case: 4k O_DIRECT reads at QD1 of an `hdd`-modelled disk (40 IOPS) did 31.6 IOPS
    (79 %): each read 25 ms in the disk of fio's 31.6 ms, the rest in the emulated CPU's path. One I/O at a time, the
    disk's share is the limit (>= 2/3); at a deeper queue, or with the disk a smaller share, it is not named."""
    devices = {"vdb": {**dev("tbdata0", r=31.6, busy=79.0), "await_ms": 25.0}}
    m = {**reads(31.6 * 4096 * 6, 6.0), "read.lat_mean_ns": 31.6e6, "cpu.emulator_busy_pct": 40.0}
    qd1 = {"ioengine": "psync", "iodepth": 1}
    f = facts(qd1, m, {"dev.devices": devices}, kind="raw", fp=LAB)
    found = disks.find_data(f)
    assert found is not None and found.figures["latency_share"] == 0.791
    assert "(79 % of its latency in the disks, the rest of each I/O outside them, one I/O at a time (CPU: " in (
        found.evidence
    )
    assert "emulator 40 %" in found.evidence
    assert name_limiter(f).kind == "data-disks"
    # four I/Os in flight, the disks' time the same 79 % share of fio's latency: the disks must take >= 85 %
    deep = {"ioengine": "libaio", "iodepth": 4}
    f4 = facts(deep, {**m, "read.lat_mean_ns": 31.6e6 / 4}, {"dev.devices": devices}, kind="raw", fp=LAB)
    assert round(disks.waited(f4, f4.role_devices("data")) or 0, 3) == 0.791
    assert disks.find_data(f4) is None
    # the disk a smaller share than 2/3 at QD1 (the CPU's path took 45 %): not the disks
    slow = {**m, "read.lat_mean_ns": 45.5e6}
    assert disks.find_data(facts(qd1, slow, {"dev.devices": devices}, kind="raw", fp=LAB)) is None
    assert name_limiter(facts(qd1, slow, {"dev.devices": devices}, kind="raw", fp=LAB)).kind == "not-determined"


def test_a_share_below_a_rules_limit_never_prints_as_reaching_it() -> None:
    """84.6 % of a disk's capability printed "85 %" beside "not at its limit" (threshold 85 %)."""
    assert pct(0.846, BUSY) == "84.6 %"
    assert pct(0.85, BUSY) == "85 %" and pct(0.9, BUSY) == "90 %"
    assert pct(0.844, BUSY) == "84 %" and pct(0.846) == "85 %"  # without a limit: whole percent
    assert pct(0.9899) == "99 %"


def test_a_link_below_its_limit_never_prints_as_reaching_it() -> None:
    """The network's "neither near its limit" line formats its share as the limiter rules do (netcount.BUSY: 85 %)."""
    from tankbench.targets import netcount

    moved = int(0.846 * 100e6 / 8)  # 84.6 % of a 100 Mb/s link in one second
    net = netcount.judge(
        seconds=1.0, server={"eth0": {"rx_bytes": moved, "tx_bytes": 0}}, speed_mbps=100, client_mibs=0.0, cpu_pct=10.0
    )
    assert net["net.limit"] == "disks" and "(84.6 % of 100 Mb/s)" in net["net.why"], net


def late_zvol_writes(busy: float, w: float, excess: float = 25.0, drain: float = 0.2, **m: float) -> RunFacts:
    """Seed 000 in the lab (CI): buffered 4k writes to a zvol on an hdd, durable 25 s past a 5 s runtime, the disk
    writing 194 KiB requests a txg at a time."""
    checks = {"dev.devices": {"vdb": dev("tbdata0", w=w, size=194 * 1024, busy=busy)}, "cpu.groups": {"fio": 43.0}}
    metrics = {**writes(), "fio.runtime_s": 5.0, "timing.excess_s": excess, "cpu.emulator_pct": 82.0, **m}
    params = {"rw": "write", "io": "buffered"}
    return run_facts({**facts(params, {}).params}, {}, traits_of("zvol"), metrics, checks, LAB, drain_s=drain)


def test_late_writes_on_a_data_disk_at_its_limit_while_busy_are_disk_bound() -> None:
    # 33 IOPS of the 40 it can do (82 %) over the run, 81 % busy: 102 % of it while busy, capped at 100 %
    f = late_zvol_writes(busy=81.0, w=33.0)
    limit = name_limiter(f)
    assert limit.kind == "data-disks" and limit.detail == "tbdata0", limit.evidence
    assert "(82 %), 81 % busy: 100 % of it while busy" in limit.evidence, limit.evidence
    assert "a txg at a time" in limit.evidence and "the data was durable 25 s after fio's runtime" in limit.evidence
    assert limit.figures["busy_utilisation"] == round(33 / 40 / 0.81, 3)
    # the same figures with the data durable at fio's exit: nothing waited for the disk, so it is not the limit
    assert name_limiter(late_zvol_writes(busy=81.0, w=33.0, excess=0.5, drain=0.1)).kind == "not-determined"


def test_a_data_disk_below_its_limit_while_busy_or_seldom_busy_is_not() -> None:
    # 28 IOPS while 81 % busy: 86 % of 40 while busy holds; 26: 80 % does not
    assert disks.find_data(late_zvol_writes(busy=81.0, w=28.0)) is not None
    assert disks.find_data(late_zvol_writes(busy=81.0, w=26.0)) is None
    # busy under half the run: the disk idled most of it, whatever its pace while busy
    assert disks.busy_utilisation(disks.Device("vdb", "x", "x", "data", 0, 19.0, 0, 0, 49.0, 1.0, None, HDD)) is None
    assert disks.find_data(late_zvol_writes(busy=49.0, w=19.0)) is None
    # reads are never judged while busy: a read waits for its disk or it does not
    f = facts({}, reads(**{"timing.excess_s": 25.0}), {"dev.devices": {"vdb": dev("tbdata0", r=33.0, busy=81.0)}})
    assert f.durable_late_s is None and disks.find_data(f) is None


def test_the_emulator_fuller_than_the_disk_while_busy_is_still_the_cpu() -> None:
    limit = name_limiter(late_zvol_writes(busy=81.0, w=29.0, **{"cpu.emulator_pct": 97.0}))
    assert limit.kind == "cpu", limit.evidence


def test_late_writes_to_a_file_off_zfs_say_the_kernel_wrote_them_back() -> None:
    f = late_zvol_writes(busy=81.0, w=33.0)
    plain = run_facts(f.params, {}, traits_of("file"), f.metrics, f.checks, LAB, drain_s=0.2)
    found = disks.find_data(plain)
    assert found is not None and "the kernel wrote the dirty data back at the disk's pace" in found.evidence
    assert "txg" not in found.evidence


def test_async_writes_committed_through_the_zil_say_the_data_was_written_twice() -> None:
    # seed 000 in the lab (this stop's full run): 128 MiB of buffered 4k zvol writes, one ZIL commit at the end that
    # wrote 137 MiB of log blocks to the pool's only (data) disk; 262 MiB reached the disk
    zil = {"zil.commit_count": 1.0, "zil.itx_metaslab_normal_write": 137 * 2**20, "zil.itx_indirect_bytes": 0.0}
    both = {"zfs.physical_bytes_written": 262 * 2**20, "zfs.logical_bytes_written": 128 * 2**20}
    f = late_zvol_writes(busy=81.0, w=33.0, **{**zil, **both, "write.io_bytes": 128 * 2**20})
    text = name_limiter(f).evidence
    assert "1 ZIL commit(s) of these async writes (a flush or an fsync" in text, text
    assert "wrote 137.0 MiB of log blocks to the pool's data disks: fio's data written twice" in text, text
    assert text.endswith("(2.0× what fio wrote reached the disks)"), text
    # the dataset's O_DIRECT 4k writes into 128k records: logged indirectly, each record written whole
    indirect = {"zil.commit_count": 1.0, "zil.itx_metaslab_normal_write": 2**20, "zil.itx_indirect_bytes": 71 * 2**20}
    g = late_zvol_writes(busy=81.0, w=33.0, **{**indirect, "write.io_bytes": 71 * 2**20})
    assert "wrote the blocks of 71.0 MiB of writes it logged indirectly, each block whole" in name_limiter(g).evidence
    assert "log blocks to the pool's data disks" not in name_limiter(g).evidence  # 1 MiB of 71: under a tenth
    # sync writes go through the ZIL by design (the log-device and latency rules speak of it); no commit, no sentence
    sync = run_facts({**f.params, "sync_mode": "sync"}, {}, traits_of("zvol"), f.metrics, f.checks, LAB, drain_s=0.2)
    assert "ZIL commit(s) of these async writes" not in name_limiter(sync).evidence
    quiet = late_zvol_writes(busy=81.0, w=33.0, **{**zil, "zil.commit_count": 0.0})
    assert "ZIL commit" not in name_limiter(quiet).evidence


def test_the_zil_sentence_names_tankbenchs_drain_only_where_it_called_sync() -> None:
    # drain.method, recorded with each run: `zpool sync` alone commits no ZIL, so a run drained by it is not told
    # about tankbench's sync(2); a run drained by sync(2) is; a run journalled before the method was recorded
    # (its drain called sync(2) on ZFS targets until it drained with `zpool sync` alone) keeps the history
    zil = {"zil.commit_count": 1.0, "zil.itx_metaslab_normal_write": 137 * 2**20, "write.io_bytes": 128 * 2**20}
    f = late_zvol_writes(busy=81.0, w=33.0, **zil)

    def evidence(method: str | None) -> str:
        checks = {**f.checks, **({"drain.method": method} if method is not None else {})}
        return name_limiter(run_facts(f.params, {}, traits_of("zvol"), f.metrics, checks, LAB, drain_s=0.2)).evidence

    pooled = evidence("zpool sync tank")
    assert "1 ZIL commit(s) of these async writes" in pooled and "tankbench's drain" not in pooled, pooled
    assert "mounted dataset's ZIL — tankbench's drain after this run called it) wrote" in evidence("sync(2)")
    assert "tankbench's drain called it on ZFS targets until it drained with `zpool sync` alone" in evidence(None)


def test_sync_writes_are_never_durable_late_so_the_txg_after_them_is_not_their_limit() -> None:
    """CI's seed 001 (stop 47): 4k sync writes (sync_mode=sync) acknowledged by an optane log at 529 IOPS, then 1 s
    of late exit and 2.8 s of drain while ZFS wrote the txg to an hdd data disk at 89 % of it while busy: named
    data-disks, and "the data was durable 4 s after fio's runtime". Each write was durable in the ZIL when fio had
    its answer."""
    sync = late_zvol_writes(busy=52.0, w=19.0, excess=1.0, drain=2.8, **{"zil.commit_count": 2653.0})
    sync = run_facts({**sync.params, "sync_mode": "sync"}, {}, sync.traits, sync.metrics, sync.checks, LAB, drain_s=2.8)
    assert sync.sync_writes and sync.durable_late_s is None
    assert disks.find_data(sync) is None
    assert "the data was durable" not in name_limiter(sync).evidence
    # the same figures for async writes: late, and the data disk while busy bounded them
    async_ = late_zvol_writes(busy=52.0, w=19.0, excess=1.0, drain=2.8)
    assert async_.durable_late_s == 3.8 and disks.find_data(async_) is not None
