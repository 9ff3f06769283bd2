"""ZFS parsers against real OpenZFS 2.3.2 outputs (tests/fixtures/zfs/README.md says where each came from)."""

from __future__ import annotations

import pytest

from tankbench.zfs.iostat import iostat_series, parse_zpool_iostat, summarize_iostat
from tankbench.zfs.parse import (
    arc_delta,
    last_committed_txg,
    parse_arcstats,
    parse_module_params,
    parse_txgs,
    parse_zfs_get,
    parse_zpool_status,
    pool_ashift,
    txg_summary,
    zfs_get_sources,
    zfs_version,
)
from tests.conftest import zfs_fixture as fixture


# ------------------------------------------------------------------ arcstats
def test_parse_arcstats_real():
    arc = parse_arcstats(fixture("tank-arcstats.txt"))
    assert len(arc) == 147  # the kstat header says ndata 147
    assert arc["hits"] == 34858
    assert arc["misses"] == 0
    assert arc["demand_data_hits"] == 5373
    assert arc["demand_metadata_hits"] == 29485
    assert arc["mru_hits"] == 10882
    assert arc["mfu_hits"] == 23976
    assert arc["c_max"] == 2047639552
    assert arc["size"] == 559539800
    assert arc["memory_available_bytes"] == 2236951040  # type 3 (int64) row
    assert "name" not in arc and "18" not in arc


def test_parse_arcstats_empty_and_truncated():
    assert parse_arcstats("") == {}
    text = fixture("tank-arcstats.txt")
    cut = text[: text.index("mru_hits") + len("mru_hits         ")]  # last row cut mid-line
    arc = parse_arcstats(cut)
    assert arc["hits"] == 34858 and "mru_hits" not in arc


def test_arc_delta_real_run():
    before = parse_arcstats(fixture("tbparse-arcstats-before.txt"))
    after = parse_arcstats(fixture("tbparse-arcstats-after.txt"))
    d = arc_delta(before, after)
    assert d["arc.hits"] == 13264 - 11502
    assert d["arc.misses"] == 0
    assert d["arc.hit_ratio"] == 1.0
    assert d["arc.mru_hits"] == 3730 - 3551
    assert d["arc.mfu_hits"] == 9534 - 7951
    assert d["arc.demand_data_hits"] == 0
    assert d["arc.l2_hits"] == 0 and d["arc.l2_misses"] == 0
    assert d["arc.size"] == 15390872
    assert d["arc.c_max"] == 2047651840
    assert d["arc.c"] == 97543552
    assert set(d) == {
        "arc.hits",
        "arc.misses",
        "arc.hit_ratio",
        "arc.demand_data_hits",
        "arc.demand_data_misses",
        "arc.demand_metadata_hits",
        "arc.demand_metadata_misses",
        "arc.prefetch_data_hits",
        "arc.prefetch_data_misses",
        "arc.mru_hits",
        "arc.mfu_hits",
        "arc.mru_ghost_hits",
        "arc.mfu_ghost_hits",
        "arc.l2_hits",
        "arc.l2_misses",
        "arc.size",
        "arc.c_max",
        "arc.c",
    }


def test_arc_delta_hit_ratio_and_missing_counters():
    after = parse_arcstats(fixture("tank-arcstats.txt"))
    before = dict(after, hits=after["hits"] - 30, misses=after["misses"] - 10)
    assert arc_delta(before, after)["arc.hit_ratio"] == 0.75
    # no accesses: no ratio
    assert "arc.hit_ratio" not in arc_delta(after, after)
    # an older module without L2/ghost counters: simply absent
    old = {k: v for k, v in after.items() if not k.startswith("l2_") and "ghost" not in k}
    d = arc_delta(old, old)
    assert "arc.l2_hits" not in d and "arc.mru_ghost_hits" not in d and d["arc.hits"] == 0
    # counters went backwards (module reloaded): dropped, gauges still reported
    d = arc_delta(after, dict(after, hits=5))
    assert "arc.hits" not in d and "arc.hit_ratio" not in d and d["arc.size"] == after["size"]
    assert arc_delta({}, {}) == {}


# ------------------------------------------------------------------ zpool iostat
def test_iostat_scripted_with_status_files_log_and_cache_rows():
    status = parse_zpool_status(fixture("tbparse-zpool-status.txt"))
    intervals = parse_zpool_iostat(fixture("tbparse-zpool-iostat-Hpv-y-slog.txt"), status)
    assert len(intervals) == 3
    first = intervals[0]
    assert first["pool"] == {
        "alloc": 302592,
        "free": 251355648,
        "read_ops": 0,
        "write_ops": 312,
        "read_bw": 0,
        "write_bw": 4411921,
    }
    assert list(first["vdevs"]) == ["mirror-0", "/tmp/tbparse-a.img", "/tmp/tbparse-b.img"]
    assert first["vdevs"]["/tmp/tbparse-a.img"]["write_ops"] == 53
    assert first["logs"] == {
        "/tmp/tbparse-log.img": {
            "alloc": 4096,
            "free": 251654144,
            "read_ops": 0,
            "write_ops": 209,
            "read_bw": 0,
            "write_bw": 4265205,
        }
    }
    assert list(first["cache"]) == ["/tmp/tbparse-cache.img"]
    assert first["unassigned"] == {} and first["special"] == {}
    assert first["top"] == {"data": ["mirror-0"], "logs": ["/tmp/tbparse-log.img"], "cache": ["/tmp/tbparse-cache.img"]}
    assert intervals[2]["cache"]["/tmp/tbparse-cache.img"]["write_bw"] == 475835


def test_summarize_iostat_real_slog_run():
    status = parse_zpool_status(fixture("tbparse-zpool-status.txt"))
    s = summarize_iostat(parse_zpool_iostat(fixture("tbparse-zpool-iostat-Hpv-y-slog.txt"), status))
    assert s["zpool.write_ops_per_s"] == pytest.approx((312 + 344 + 143) / 3)
    assert s["zpool.write_bw_bytes"] == pytest.approx((4411921 + 12338116 + 2947500) / 3)
    assert s["zpool.read_ops_per_s"] == 0 and s["zpool.read_bw_bytes"] == 0
    assert s["zpool.log_write_ops_per_s"] == pytest.approx((209 + 148 + 142) / 3)
    assert s["zpool.log_write_bw_bytes"] == pytest.approx((4265205 + 3040222 + 2920151) / 3)
    assert s["zpool.avg_write_io_bytes"] == pytest.approx((4411921 + 12338116 + 2947500) / (312 + 344 + 143))


def test_iostat_series_real_slog_run():
    status = parse_zpool_status(fixture("tbparse-zpool-status.txt"))
    series = iostat_series(parse_zpool_iostat(fixture("tbparse-zpool-iostat-Hpv-y-slog.txt"), status))
    assert series == {
        "zpool_write_ops": [312, 344, 143],
        "zpool_write_bw_bytes": [4411921, 12338116, 2947500],
        "zpool_read_ops": [0, 0, 0],
        "zpool_read_bw_bytes": [0, 0, 0],
        "zpool_log_write_ops": [209, 148, 142],
    }


def test_iostat_scripted_without_status_cannot_tell_sections():
    # -H prints no "logs"/"cache" labels, only blank lines: without zpool status they stay unassigned
    intervals = parse_zpool_iostat(fixture("tbparse-zpool-iostat-Hpv-y-slog.txt"))
    assert len(intervals) == 3
    assert list(intervals[0]["unassigned"]) == ["/tmp/tbparse-log.img", "/tmp/tbparse-cache.img"]
    assert intervals[0]["logs"] == {} and intervals[0]["top"]["data"] == ["mirror-0"]
    s = summarize_iostat(intervals)
    assert "zpool.log_write_ops_per_s" not in s and "zpool.log_write_bw_bytes" not in s
    assert s["zpool.write_ops_per_s"] == pytest.approx((312 + 344 + 143) / 3)
    assert "zpool_log_write_ops" not in iostat_series(intervals)


def test_iostat_special_vdev_group_order():
    status = parse_zpool_status(fixture("tbparse-zpool-status-special.txt"))
    intervals = parse_zpool_iostat(fixture("tbparse-zpool-iostat-Hpv-y-special.txt"), status)
    assert len(intervals) == 2
    assert list(intervals[1]["special"]) == ["/tmp/tbparse-special.img"]
    assert intervals[1]["logs"]["/tmp/tbparse-log.img"]["write_ops"] == 331
    s = summarize_iostat(intervals)
    assert s["zpool.log_write_ops_per_s"] == pytest.approx((341 + 331) / 2)
    assert s["zpool.write_ops_per_s"] == pytest.approx((338 + 332) / 2)


def test_iostat_mirror_without_log_traffic():
    # first capture (names /tmp/v...): 4 intervals, log vdev idle; no status for it, so rows are unassigned
    intervals = parse_zpool_iostat(fixture("tbparse1-zpool-iostat-Hpv-y.txt"))
    assert [i["pool"]["write_ops"] for i in intervals] == [31, 67, 22, 85]
    assert [i["pool"]["write_bw"] for i in intervals] == [2323417, 1211683, 1550658, 1994079]
    assert intervals[3]["vdevs"]["/tmp/v2"]["write_bw"] == 1161244
    # a status for that layout (same names) files them
    status = {
        "pool": "tbparse",
        "tree": {
            "data": {"mirror-0": ["/tmp/v", "/tmp/v2"]},
            "logs": {"/tmp/vlog": ["/tmp/vlog"]},
            "cache": {"/tmp/vcache": ["/tmp/vcache"]},
        },
    }
    s = summarize_iostat(parse_zpool_iostat(fixture("tbparse1-zpool-iostat-Hpv-y.txt"), status))
    assert s["zpool.log_write_ops_per_s"] == 0 and s["zpool.log_write_bw_bytes"] == 0


def test_iostat_columns_format_with_labels():
    # without -H: header, dashes, indented names and "logs"/"cache" label rows (shared fixture, since boot)
    (interval,) = parse_zpool_iostat(fixture("tank-zpool-iostat.txt"))
    assert interval["pool"]["write_ops"] == 130 and interval["pool"]["read_bw"] == 1255653
    assert interval["vdevs"] == {
        "virtio-zdata": {
            "alloc": 540094464,
            "free": 3486437376,
            "read_ops": 9,
            "write_ops": 108,
            "read_bw": 1255422,
            "write_bw": 11106769,
        }
    }
    assert interval["logs"]["virtio-zlog"]["write_bw"] == 130619
    assert interval["cache"]["virtio-zcache"]["write_ops"] == 13
    s = summarize_iostat([interval])
    assert s["zpool.log_write_ops_per_s"] == 23 and s["zpool.log_write_bw_bytes"] == 130619
    assert s["zpool.avg_write_io_bytes"] == pytest.approx(11233389 / 130)


def test_iostat_columns_format_nested_mirror_and_vanished_pool():
    # second interval is a bare header: the pool was destroyed while iostat ran
    intervals = parse_zpool_iostat(fixture("tbparse1-zpool-iostat-pv.txt"))
    assert len(intervals) == 1
    assert intervals[0]["top"] == {"data": ["mirror-0"], "logs": ["/tmp/vlog"], "cache": ["/tmp/vcache"]}
    assert intervals[0]["vdevs"]["/tmp/v"]["read_bw"] == 629012


def test_iostat_without_y_first_interval_is_since_import():
    # documented trap: without -y the first report is the average since import, not the first second
    intervals = parse_zpool_iostat(fixture("tbparse1-zpool-iostat-Hpv-noy.txt"))
    assert [i["pool"]["read_ops"] for i in intervals] == [24, 200]


def test_iostat_truncated_stream():
    text = fixture("tbparse-zpool-iostat-Hpv-y-slog.txt")
    lines = text.splitlines(keepends=True)
    # cut inside the third interval: it has fewer rows than the second, so it is dropped
    assert len(parse_zpool_iostat("".join(lines[:19]))) == 2
    # cut mid-line in the third pool row: the partial row is not a row, the rest of interval 3 never came
    cut = "".join(lines[:16]) + lines[16][:12]
    assert len(parse_zpool_iostat(cut)) == 2
    # third pool row lost but its vdev rows arrived: they must not overwrite interval 2
    lost = "".join(lines[:16] + lines[17:])
    intervals = parse_zpool_iostat(lost)
    assert len(intervals) == 2 and intervals[1]["vdevs"]["mirror-0"]["write_ops"] == 195
    # started mid-interval, with the pool name known from status
    status = parse_zpool_status(fixture("tbparse-zpool-status.txt"))
    assert len(parse_zpool_iostat("".join(lines[3:]), status)) == 2


def test_iostat_empty():
    assert parse_zpool_iostat("") == []
    assert summarize_iostat([]) == {}
    assert iostat_series([]) == {
        "zpool_write_ops": [],
        "zpool_write_bw_bytes": [],
        "zpool_read_ops": [],
        "zpool_read_bw_bytes": [],
        "zpool_log_write_ops": [],
    }


def test_iostat_no_writes_has_no_average_io_size():
    idle = "tank\t100\t200\t0\t0\t0\t0\nvirtio-zdata\t100\t200\t0\t0\t0\t0\n"
    s = summarize_iostat(parse_zpool_iostat(idle))
    assert "zpool.avg_write_io_bytes" not in s and s["zpool.log_write_ops_per_s"] == 0


# ------------------------------------------------------------------ zfs get / zpool get
def test_parse_zfs_get_all_real():
    props = parse_zfs_get(fixture("tbparse-zfs-get-all.txt"))
    assert set(props) == {"tbparse", "tbparse/ds"}
    assert props["tbparse/ds"]["recordsize"] == "16384"
    assert props["tbparse"]["recordsize"] == "131072"
    assert props["tbparse"]["compression"] == "on"
    assert props["tbparse"]["direct"] == "standard"
    assert props["tbparse"]["mountpoint"] == "/tbparse"
    assert props["tbparse/ds"]["logicalused"] == "9062912"
    assert props["tbparse"]["compressratio"] == "1.00"
    sources = zfs_get_sources(fixture("tbparse-zfs-get-all.txt"))
    assert sources["tbparse/ds"]["recordsize"] == "local"
    assert sources["tbparse/ds"]["direct"] == "default"
    assert sources["tbparse"]["used"] == "-"


def test_parse_zfs_get_zvol_has_no_direct_property():
    vol = parse_zfs_get(fixture("tbparse-zfs-get-vol.txt"))["tbparse/vol"]
    assert vol == {"volblocksize": "16384", "recordsize": "-", "direct": "-", "volsize": "33554432"}


def test_parse_zpool_get_all_real():
    pool = parse_zfs_get(fixture("tbparse-zpool-get-all.txt"))["tbparse"]
    assert pool["size"] == "251658240"
    assert pool["health"] == "ONLINE"
    assert pool["ashift"] == "0"  # "auto": the pool property does not say what the vdevs use
    assert pool["feature@block_cloning"] == "enabled"
    assert pool["altroot"] == "-"


def test_pool_ashift_from_vdev_properties():
    assert pool_ashift(parse_zfs_get(fixture("tbparse-zpool-get-ashift-all-vdevs.txt"))) == 9
    assert pool_ashift({"root-0": {"ashift": "0"}}) is None
    assert pool_ashift({}) is None


def test_parse_zfs_get_without_H_and_three_columns():
    props = parse_zfs_get(fixture("tank-zfs-props.txt"))
    assert len(props) == 7
    assert props["tank/vol"]["volblocksize"] == "16K"
    assert props["tank/rs4k"]["sync"] == "always"
    assert props["tank/enc"]["encryption"] == "aes-256-gcm"
    assert "NAME" not in props
    usage = parse_zfs_get(fixture("tank-zfs-usage.txt"))
    assert usage["tank/rs1m"] == {
        "compressratio": "1.93",
        "used": "138534912",
        "logicalused": "268490752",
        "encryption": "off",
        "keystatus": "-",
    }
    assert zfs_get_sources(fixture("tank-zfs-usage.txt")) == {}


def test_parse_zfs_get_value_with_spaces_and_empty():
    text = "tank/a\tcomment:note\tfast pool, do not touch\tlocal\ntank/a\tkeylocation\t\tdefault\n"
    props = parse_zfs_get(text)
    assert props["tank/a"] == {"comment:note": "fast pool, do not touch", "keylocation": ""}
    assert parse_zfs_get("") == {}


# ------------------------------------------------------------------ zpool status
def test_parse_zpool_status_real():
    st = parse_zpool_status(fixture("tank-zpool-status.txt"))
    assert st["pool"] == "tank" and st["state"] == "ONLINE"
    assert st["scan_active"] is None
    assert st["data"] == ["virtio-zdata"]
    assert st["logs"] == ["virtio-zlog"]  # the real "logs" row carries a trailing tab
    assert st["cache"] == ["virtio-zcache"]
    assert st["spares"] == [] and st["special"] == []
    assert st["errors"] == "No known data errors"


def test_parse_zpool_status_mirror_leaves_and_paths():
    st = parse_zpool_status(fixture("tbparse-zpool-status-P.txt"))
    assert st["data"] == ["/tmp/tbparse-a.img", "/tmp/tbparse-b.img"]  # mirror-0 is not a device
    assert st["tree"]["data"] == {"mirror-0": ["/tmp/tbparse-a.img", "/tmp/tbparse-b.img"]}
    assert st["logs"] == ["/tmp/tbparse-log.img"] and st["cache"] == ["/tmp/tbparse-cache.img"]


def test_parse_zpool_status_scrub_active_then_finished():
    active = parse_zpool_status(fixture("tbparse-zpool-status-scrub.txt"))
    assert active["scan_active"] == "scrub"
    assert active["data"] == ["/tmp/tbparse-a.img", "/tmp/tbparse-b.img"]  # scan lines do not leak in
    done = parse_zpool_status(fixture("tbparse-zpool-status-scrubbed.txt"))
    assert done["scan_active"] is None


def test_parse_zpool_status_special_section():
    st = parse_zpool_status(fixture("tbparse-zpool-status-special.txt"))
    assert st["special"] == ["/tmp/tbparse-special.img"]
    assert st["logs"] == ["/tmp/tbparse-log.img"]
    assert st["data"] == ["/tmp/tbparse-a.img", "/tmp/tbparse-b.img"]


def test_parse_zpool_status_resilver_and_paused():
    text = fixture("tbparse-zpool-status-scrub.txt")
    resilver = text.replace("scrub in progress", "resilver in progress")
    assert parse_zpool_status(resilver)["scan_active"] == "resilver"
    paused = text.replace("scrub in progress since", "scrub paused since")
    assert parse_zpool_status(paused)["scan_active"] is None


def test_parse_zpool_status_reads_only_first_pool_and_empty():
    two = fixture("tank-zpool-status.txt") + "\n" + fixture("tbparse-zpool-status.txt")
    st = parse_zpool_status(two)
    assert st["pool"] == "tank" and st["data"] == ["virtio-zdata"]
    empty = parse_zpool_status("")
    assert empty["pool"] is None and empty["data"] == [] and empty["scan_active"] is None


# ------------------------------------------------------------------ version
@pytest.mark.parametrize("name,expected", [("zfs-version.txt", (2, 3, 2)), ("sys-module-zfs-version.txt", (2, 3, 2))])
def test_zfs_version_real(name, expected):
    assert zfs_version(fixture(name)) == expected


@pytest.mark.parametrize(
    "text,expected",
    [
        ("zfs-2.3.2-1\nzfs-kmod-2.2.7-1\n", (2, 2, 7)),  # the module decides, not userland
        ("2.1.15-1\n", (2, 1, 15)),
        ("0.8.6-1ubuntu2", (0, 8, 6)),
        ("zfs-2.3.0-rc5\n", (2, 3, 0)),
        ("", None),
        ("cat: /sys/module/zfs/version: No such file or directory", None),
    ],
)
def test_zfs_version_variants(text, expected):
    assert zfs_version(text) == expected


# ------------------------------------------------------------------ txgs
def test_parse_txgs_real():
    rows = parse_txgs(fixture("tbparse-txgs-after.txt"))
    assert [r["txg"] for r in rows] == list(range(5, 14))
    assert rows[-1]["state"] == "O"
    assert rows[6] == {
        "txg": 11,
        "birth": 215685008183,
        "state": "C",
        "ndirty": 5406720,
        "nread": 0,
        "nwritten": 9411584,
        "reads": 0,
        "writes": 198,
        "otime": 2055287937,
        "qtime": 19408,
        "wtime": 92334,
        "stime": 274183393,
    }


def test_txg_summary_real_run():
    before = parse_txgs(fixture("tbparse-txgs-before.txt"))
    assert last_committed_txg(before) == 9  # txg 10 was still open
    s = txg_summary(last_committed_txg(before), parse_txgs(fixture("tbparse-txgs-after.txt")))
    assert s == {
        "zfs.txgs_synced": 3,  # 10, 11, 12 committed; 13 open
        "zfs.txg_ndirty_max_bytes": 5406720,
        "zfs.txg_sync_time_max_s": pytest.approx(0.588626429),
        "zfs.txg_written_bytes": 306176 + 9411584 + 9079808,
    }


def test_txgs_empty_truncated_and_disabled():
    assert parse_txgs("") == []
    assert last_committed_txg([]) == 0
    assert txg_summary(0, []) == {
        "zfs.txgs_synced": 0,
        "zfs.txg_ndirty_max_bytes": 0,
        "zfs.txg_sync_time_max_s": 0,
        "zfs.txg_written_bytes": 0,
    }
    text = fixture("tbparse1-txgs.txt")
    header_only = text.splitlines(keepends=True)[0]  # zfs_txg_history=0 leaves only the header
    assert parse_txgs(header_only) == []
    cut = text[: text.index("80922372515") + 5]  # last row cut mid-line
    rows = parse_txgs(cut)
    assert [r["txg"] for r in rows] == [5, 6, 7, 8, 9, 10]


# ------------------------------------------------------------------ module parameters
def test_parse_module_params_real():
    params = parse_module_params(fixture("zfs-parameters-grep.txt"))
    assert len(params) == 356
    assert params["zfs_txg_timeout"] == "5"
    assert params["zfs_arc_max"] == "0"
    assert params["zfs_dirty_data_max"] == "312139366"
    assert params["zfs_dio_enabled"] == "1"
    assert params["zio_taskq_read"] == "fixed,1,8 null scale null"


def test_lab_pool_full_paths_match_between_status_and_iostat():
    # another engineer's pool on a real virtio disk (read-only commands): -P names agree, ashift is per vdev
    status = parse_zpool_status(fixture("lab-zpool-status-P.txt"))
    assert status["pool"] == "tbzvolissues"
    assert status["data"] == ["/dev/disk/by-id/virtio-tbdata0-part1"] and status["logs"] == []
    intervals = parse_zpool_iostat(fixture("lab-zpool-iostat-HpvP-y.txt"), status)
    assert [i["pool"]["read_ops"] for i in intervals] == [32, 0]
    assert intervals[1]["vdevs"]["/dev/disk/by-id/virtio-tbdata0-part1"]["write_bw"] == 325240
    s = summarize_iostat(intervals)
    assert s["zpool.write_ops_per_s"] == 35 and s["zpool.log_write_ops_per_s"] == 0
    assert s["zpool.avg_write_io_bytes"] == pytest.approx(325246 / 70)
    # the vdev property listing uses short names even so, and the pool property says 0
    assert pool_ashift(parse_zfs_get(fixture("lab-zpool-get-ashift-all-vdevs.txt"))) == 12
