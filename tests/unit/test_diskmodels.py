"""The lab's disk models (pure parts): what each model allows, the QMP arguments, the [host] keys."""

from __future__ import annotations

import pytest

from tankbench.diskmodels import MIB, MODELS, LabMachine, fingerprint, parse_host_keys, summary
from tankbench.errors import SpecError
from tankbench.lab import qemu


def err(key: str, value: object, problem: str, hint: str) -> Exception:
    return SpecError("c.toml", key, value, problem, hint)


def test_every_issue_model_exists_and_none_is_unthrottled() -> None:
    assert {"none", "hdd", "ssd", "nvme", "optane"} <= set(MODELS)
    assert set(MODELS["none"].throttle().values()) == {0}


def test_rate_counts_large_requests_by_size_and_bytes() -> None:
    hdd = MODELS["hdd"]
    assert hdd.rate(4096) == (40, 40 * 4096 / MIB)
    assert hdd.rate(MIB)[1] == 16  # the bandwidth limit governs sequential 1M
    ssd = MODELS["ssd"]
    assert ssd.rate(MIB)[0] == pytest.approx(250 / 4)  # 1M counts as four 256k ops
    assert MODELS["none"].rate(4096)[0] == float("inf")


def test_throttle_arguments_are_complete_for_qmp() -> None:
    args = MODELS["hdd"].throttle()
    assert {"bps", "bps_rd", "bps_wr", "iops", "iops_rd", "iops_wr"} <= set(args)
    assert args["iops"] == 40 and args["bps"] == 16 * MIB and args["iops_size"] == MIB


def test_parse_host_keys_defaults_and_values() -> None:
    assert parse_host_keys({}, err) == LabMachine()
    m = parse_host_keys(
        {"disk_model": "hdd", "slog_model": "optane", "l2arc": True, "l2arc_model": "nvme", "arc_max": "256M"}, err
    )
    assert m == LabMachine("hdd", "optane", True, "nvme", 256 * MIB)
    assert m.models(3, True) == {
        "tbdata0": "hdd",
        "tbdata1": "hdd",
        "tbdata2": "hdd",
        "tblog0": "optane",
        "tbcache0": "nvme",
    }
    assert summary(m.models(2, False)) == "tbdata0, tbdata1: hdd; tbcache0: nvme"


@pytest.mark.parametrize(
    "table,key",
    [
        ({"disk_model": "floppy"}, "host.disk_model"),
        ({"slog_model": 3}, "host.slog_model"),
        ({"arc_max": "1M"}, "host.arc_max"),
        ({"arc_max": "x"}, "host.arc_max"),
        ({"l2arc": "yes"}, "host.l2arc"),
        ({"l2arc_model": "ssd"}, "host.l2arc_model"),
    ],
)
def test_parse_host_keys_rejects(table: dict[str, object], key: str) -> None:
    with pytest.raises(SpecError) as e:
        parse_host_keys(table, err)
    assert key in str(e.value)


def test_fingerprint_names_each_disk_and_the_arc() -> None:
    fp = fingerprint({"tbdata0": "hdd"}, 256 * MIB, 256 * MIB)
    assert fp["lab_disk_models"] == {"tbdata0": MODELS["hdd"].describe()} and fp["lab_arc_max"] == 256 * MIB


def test_cache_disk_ids_and_paths() -> None:
    assert qemu.data_disk_ids(1, True, True) == ["tbdata0", "tblog0", "tbcache0"]
    assert qemu.guest_disk_paths(0, False, True) == ["/dev/disk/by-id/virtio-tbcache0"]
