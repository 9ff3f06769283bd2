"""ZFS honesty checks, fed with values read from real OpenZFS 2.3.2 outputs where they exist."""

from __future__ import annotations

import pytest

from tankbench.zfs.checks import (
    FINGERPRINT_TUNABLES,
    alignment_check,
    direct_io_check,
    tunables,
    txg_check,
    working_set_check,
)
from tankbench.zfs.parse import parse_arcstats, parse_module_params, parse_zfs_get, pool_ashift, zfs_version
from tests.conftest import zfs_fixture as fixture


# ------------------------------------------------------------------ direct I/O
def test_direct_honoured_on_real_2_3_dataset():
    version = zfs_version(fixture("sys-module-zfs-version.txt"))
    direct = parse_zfs_get(fixture("tbparse-zfs-get-all.txt"))["tbparse/ds"]["direct"]
    out = direct_io_check(version, "filesystem", "direct", direct, dio_enabled="1\n")
    assert out["zfs.direct_ignored"] is False
    assert "direct=standard" in out["zfs.direct_note"]


@pytest.mark.parametrize("version", [(2, 2, 7), (2, 1, 15), (0, 8, 6)])
def test_direct_ignored_on_datasets_before_2_3(version):
    out = direct_io_check(version, "filesystem", "direct", None)
    assert out["zfs.direct_ignored"] is True
    assert "< 2.3" in out["zfs.direct_note"] and "ARC" in out["zfs.direct_note"]


def test_direct_ignored_when_disabled_or_version_unknown():
    assert direct_io_check((2, 3, 2), "filesystem", "direct", "disabled")["zfs.direct_ignored"] is True
    off = direct_io_check((2, 3, 2), "filesystem", "direct", "standard", dio_enabled="0")
    assert off["zfs.direct_ignored"] is True and "zfs_dio_enabled=0" in off["zfs.direct_note"]
    unknown = direct_io_check(None, "filesystem", "direct", None)
    assert unknown["zfs.direct_ignored"] is True and "unknown" in unknown["zfs.direct_note"]
    assert direct_io_check((2, 3, 0), "filesystem", "direct", "always")["zfs.direct_ignored"] is False


def test_direct_on_zvol_still_goes_through_arc():
    # the real zvol has no `direct` property ("-")
    direct = parse_zfs_get(fixture("tbparse-zfs-get-vol.txt"))["tbparse/vol"]["direct"]
    out = direct_io_check((2, 3, 2), "volume", "direct", direct)
    assert out["zfs.direct_ignored"] is True
    assert "page cache" in out["zfs.direct_note"] and "ARC" in out["zfs.direct_note"]


def test_direct_check_only_for_direct_io_on_zfs():
    assert direct_io_check((2, 3, 2), "filesystem", "buffered", "standard") == {}
    assert direct_io_check((2, 2, 0), "filesystem", "buffered", "always") == {}  # no such property before 2.3
    assert direct_io_check((2, 3, 2), "", "direct", None) == {}
    assert direct_io_check((2, 3, 2), "volume", "buffered", None) == {}


def test_direct_always_forces_buffered_io_direct():
    out = direct_io_check((2, 3, 2), "filesystem", "buffered", "always")
    assert out["zfs.direct_forced"] is True and "direct=always" in out["zfs.direct_note"]


# ------------------------------------------------------------------ alignment
def test_alignment_real_pool_and_dataset():
    ashift = pool_ashift(parse_zfs_get(fixture("tbparse-zpool-get-ashift-all-vdevs.txt")))
    assert ashift == 9
    rs = int(parse_zfs_get(fixture("tbparse-zfs-get-all.txt"))["tbparse/ds"]["recordsize"])
    out = alignment_check(ashift, rs, None, 4096)
    assert out["zfs.ashift"] == 9 and out["zfs.block_bytes"] == 16384
    assert out["zfs.misaligned"] is False
    assert out["zfs.partial_record_writes"] is True
    assert "read-modify-write" in out["zfs.alignment_note"]


def test_alignment_zvol_volblocksize_wins():
    vbs = int(parse_zfs_get(fixture("tbparse-zfs-get-vol.txt"))["tbparse/vol"]["volblocksize"])
    out = alignment_check(12, None, vbs, 16384)
    assert out["zfs.block_bytes"] == 16384
    assert out["zfs.misaligned"] is False and out["zfs.partial_record_writes"] is False
    assert out["zfs.alignment_note"] == ""
    assert alignment_check(12, 131072, 16384, 16384)["zfs.block_bytes"] == 16384


@pytest.mark.parametrize(
    "ashift,block,misaligned",
    [(12, 2048, True), (12, 4096, False), (12, 12288, False), (13, 12288, True), (9, 512, False), (12, 6144, True)],
)
def test_alignment_block_vs_sector(ashift, block, misaligned):
    out = alignment_check(ashift, block, None, 1 << 20)
    assert out["zfs.misaligned"] is misaligned
    assert ("sector" in out["zfs.alignment_note"]) is misaligned


@pytest.mark.parametrize("bs,partial", [(4096, True), (131072, False), (1 << 20, False), (196608, True)])
def test_alignment_partial_records(bs, partial):
    assert alignment_check(12, 131072, None, bs)["zfs.partial_record_writes"] is partial


def test_alignment_without_block_and_tiny_bs():
    assert alignment_check(12, None, None, 4096) == {"zfs.ashift": 12}
    out = alignment_check(12, 4096, None, 512)
    assert out["zfs.partial_record_writes"] is True and "512 B is smaller" in out["zfs.alignment_note"]


# ------------------------------------------------------------------ working set
def test_working_set_real_arc():
    c_max = parse_arcstats(fixture("tank-arcstats.txt"))["c_max"]
    assert c_max == 2047639552
    fits = working_set_check(128 << 20, c_max)  # the lab's 128 MiB test files
    assert fits == {
        "zfs.working_set_bytes": 128 << 20,
        "zfs.arc_c_max": c_max,
        "zfs.working_set_fits_arc": True,
        "zfs.working_set_note": fits["zfs.working_set_note"],
    }
    assert "cache" in fits["zfs.working_set_note"]
    big = working_set_check(4 << 30, c_max)
    assert big["zfs.working_set_fits_arc"] is False and big["zfs.working_set_note"] == ""
    assert working_set_check(c_max, c_max)["zfs.working_set_fits_arc"] is True


def test_working_set_unknown_arc():
    # zfs_arc_max is 0 on the real lab ("default"): passing it by mistake must not claim anything
    arc_max_param = int(parse_module_params(fixture("zfs-parameters-grep.txt"))["zfs_arc_max"])
    out = working_set_check(1 << 30, arc_max_param)
    assert "zfs.working_set_fits_arc" not in out and "unknown" in out["zfs.working_set_note"]


# ------------------------------------------------------------------ txg
def test_txg_check_real_timeout():
    timeout = float(parse_module_params(fixture("zfs-parameters-grep.txt"))["zfs_txg_timeout"])
    short = txg_check(5.0, timeout)  # the lab fixtures' 5 s fio runs
    assert short["zfs.txg_timeout"] == 5.0 and short["zfs.runtime_vs_txg"] == 1.0
    assert short["zfs.runtime_near_txg"] is True and "txg" in short["zfs.txg_note"]
    long = txg_check(60.0, timeout)
    assert long["zfs.runtime_vs_txg"] == 12.0 and long["zfs.runtime_near_txg"] is False
    assert long["zfs.txg_note"] == ""
    assert txg_check(15.0, 5.0)["zfs.runtime_near_txg"] is False  # exactly 3 intervals is enough


def test_txg_check_zero_timeout():
    out = txg_check(10.0, 0.0)
    assert out["zfs.runtime_vs_txg"] == 0.0 and out["zfs.runtime_near_txg"] is False


# ------------------------------------------------------------------ tunables
def test_tunables_real_parameters():
    params = parse_module_params(fixture("zfs-parameters-grep.txt"))
    t = tunables(params)
    assert t["zfs_arc_max"] == "0"
    assert t["zfs_txg_timeout"] == "5"
    assert t["zfs_dirty_data_max"] == "312139366"
    assert t["zfs_dirty_data_max_percent"] == "10"
    assert t["zfs_vdev_async_write_max_active"] == "10"
    assert t["zfs_vdev_sync_read_max_active"] == "10"
    assert t["zfs_prefetch_disable"] == "0"
    assert t["zfs_compressed_arc_enabled"] == "1"
    assert t["zfs_abd_scatter_enabled"] == "1"
    assert t["zfs_dio_enabled"] == "1"
    assert t["zvol_threads"] == "0" and t["zvol_request_sync"] == "0"
    assert "zfs_vdev_scheduler" not in t  # still listed in 2.3 but its value is "unused"
    assert "brt_zap_default_bs" not in t
    assert set(t) <= set(FINGERPRINT_TUNABLES)


def test_tunables_strips_and_handles_empty():
    assert tunables({"zfs_txg_timeout": "5\n", "zfs_unrelated": "1"}) == {"zfs_txg_timeout": "5"}
    assert tunables({}) == {}
