"""`workload = "fill"` at plan time: which tests a campaign gets, their names, params and jobs, and which
campaigns are accepted (the refusals are in the bad-input corpus, tests/fixtures/bad/fill-*.toml)."""

from __future__ import annotations

from tankbench import model
from tankbench.campaign import expand, parse_spec
from tankbench.fio.jobs import deadline_s, job_text, size_based
from tankbench.targets.vmdisk import VmDiskKind, config_key, disk_settings

CAMPAIGN = """
[campaign]
name = "pool-full"
fill_room = "48M"
{camp}

[pool]
name = "tbfill"
vdevs = ["/dev/disk/by-id/virtio-tbdata0"]
confirm = ["/dev/disk/by-id/virtio-tbdata0"]

[[target]]
name = "guest"
kind = "vm-disk"
size = "128M"
{more}
[matrix]
{matrix}
rw = ["write", "randwrite"]
bs = ["4k", "1M"]
{rest}
"""


def _tests(matrix: str, more: str = "", rest: str = "", camp: str = "") -> list[model.Test]:
    text = CAMPAIGN.format(matrix=matrix, more=more, rest=rest, camp=camp)
    return expand(parse_spec(text, "fill.toml"))


def test_one_fill_test_per_backing_without_fio_axes() -> None:
    tests = _tests('workload = ["fill"]\nbacking = ["zvol", "qcow2", "raw"]\niodepth = [1, 8]')
    assert [t.name for t in tests] == ["zfs-vm-zvol-fill-128M", "zfs-vm-qcow2-fill-128M", "zfs-vm-raw-fill-128M"]
    for t in tests:
        assert t.is_fill and not t.is_copy and t.test_case == "pool full"
        assert dict(t.params) == {"backing": t.params["backing"], "workload": "fill", "fill_room": "48M"}
        assert size_based(t)  # ends when the disk is written or the pool is full, not after a runtime
        # it writes twice the room (96 MiB of the 128 MiB disk): at the 1 MiB/s floor, plus the grace
        assert deadline_s(t, 60.0, 1 << 20) == 96 + 60.0
        job = job_text(t)
        assert f"size={96 << 20}" in job and "verify=crc32c" in job and "[fill]" in job
        assert f"filename={VmDiskKind.fio_filename(t)}" in job.splitlines()  # the run rewrites it to the guest's


def test_fill_beside_fio_tests_and_a_host_target_excluded_from_it() -> None:
    more = '[[target]]\nname = "host"\nkind = "zvol"\nsize = "128M"\n'
    rest = '[[exclude]]\ntarget = "host"\nworkload = "fill"\n'
    tests = _tests('workload = ["fio", "fill"]\nbacking = ["raw"]', more, rest)
    fills = [t for t in tests if t.is_fill]
    assert [t.name for t in fills] == ["zfs-vm-raw-fill-128M"]
    assert all(t.target.kind == "vm-disk" for t in fills)
    assert sum(1 for t in tests if not t.is_fill) == 8  # 2 targets x 2 rw x 2 bs


def test_fill_by_include_for_one_target() -> None:
    more = '[[target]]\nname = "host"\nkind = "zvol"\nsize = "128M"\n'
    rest = '[[include]]\ntarget = "guest"\nworkload = "fill"\nbacking = "qcow2"\n'
    tests = _tests('backing = ["zvol", "qcow2"]', more, rest)
    fills = [t for t in tests if t.is_fill]
    assert len(fills) == 1 and fills[0].params["backing"] == "qcow2" and fills[0].target.name == "guest"


def test_werror_axis_reaches_the_disk_and_its_name() -> None:
    tests = _tests('workload = ["fill"]\nbacking = ["raw"]\nwerror = ["enospc", "report"]')
    assert [t.name for t in tests] == ["zfs-vm-raw-fill-128M-werror-enospc", "zfs-vm-raw-fill-128M-werror-report"]
    assert [disk_settings(t)["werror"] for t in tests] == ["enospc", "report"]
    assert config_key(tests[0]) != config_key(tests[1])  # each policy is its own hot-plugged disk


def test_without_werror_the_disk_keeps_qemus_default_and_its_old_identity() -> None:
    (t,) = [t for t in _tests('backing = ["raw"]') if t.params["rw"] == "write" and t.params["bs"] == "4k"]
    assert "werror" not in disk_settings(t)  # not passed to qemu: its own default (enospc) applies
    assert '"werror"' not in config_key(t)  # disk ids of existing campaigns do not change


def test_fill_room_is_part_of_the_test() -> None:
    a = _tests('workload = ["fill"]\nbacking = ["raw"]')[0]
    b = expand(
        parse_spec(
            CAMPAIGN.format(matrix='workload = ["fill"]\nbacking = ["raw"]', more="", rest="", camp="").replace(
                'fill_room = "48M"', 'fill_room = "32M"'
            ),
            "fill.toml",
        )
    )[0]
    assert a.params["fill_room"] == "48M" and b.params["fill_room"] == "32M" and a.id != b.id


def test_a_guest_zvol_and_the_filesystem_of_its_images_have_different_names() -> None:
    from tankbench.targets.zfsplan import dataset_name

    zvol, qcow2 = _tests('workload = ["fill"]\nbacking = ["zvol", "qcow2"]')
    assert dataset_name(zvol) != dataset_name(qcow2)
