"""Issue 10's campaign keys: pools in zpool grammar, tunables, layout/cache/buffer axes, size-based runs; how
they expand into tests and fio jobs."""

from __future__ import annotations

import pytest

from tankbench.campaign import expand, parse_spec
from tankbench.errors import SpecError
from tankbench.fio import jobs
from tankbench.fio.jobs import deadline_s, job_script, job_text, layout_request
from tankbench.targets.zfsplan import buffer_check, create_pool_argv
from tankbench.tunables import canonical_tunables, parse_tunables

ID = "/dev/disk/by-id/virtio-tbdata"

HEAD = """
[campaign]
name = "knobs"
runtime = "2s"
"""

FILE_TARGET = """
[[target]]
name = "scratch"
kind = "file"
path = "/srv/tb"
size = "64M"
"""

POOL = f"""
[pool]
name = "tbpool"
vdevs = ["raidz1", "{ID}0", "{ID}1", "{ID}2"]
log = ["/dev/disk/by-id/virtio-tblog0"]
cache = ["{ID}3"]
confirm = ["{ID}0", "{ID}1", "{ID}2", "{ID}3", "/dev/disk/by-id/virtio-tblog0"]

[[target]]
name = "fs"
kind = "dataset"
size = "64M"
props = {{ compression = "lz4" }}
"""


def spec(body: str, head: str = HEAD):
    return parse_spec(head + body, "k.toml")


def test_raidz1_log_cache_pool_in_zpool_grammar():
    s = spec(POOL + '[matrix]\nrw = ["write"]\nbs = ["4k"]\n')
    assert s.pool is not None
    assert s.pool.data_devices == (f"{ID}0", f"{ID}1", f"{ID}2")
    assert s.pool.devices == (f"{ID}0", f"{ID}1", f"{ID}2", "/dev/disk/by-id/virtio-tblog0", f"{ID}3")
    assert s.pool.layout == "raidz1(3) + log 1 disk + cache 1 disk"
    argv = create_pool_argv(s.pool, "cid")
    assert argv[argv.index("tbpool") :] == [
        "tbpool",
        "raidz1",
        f"{ID}0",
        f"{ID}1",
        f"{ID}2",
        "log",
        "/dev/disk/by-id/virtio-tblog0",
        "cache",
        f"{ID}3",
    ]
    assert "tankbench:campaign=cid" in argv
    # the slog axis adds the log per test: not at creation
    assert "log" not in create_pool_argv(s.pool, "cid", with_log=False)


def test_mirrors_and_a_special_mirror():
    text = f"""
[pool]
name = "tbpool"
vdevs = ["mirror", "{ID}0", "{ID}1", "mirror", "{ID}2", "{ID}3"]
special = ["mirror", "{ID}4", "{ID}5"]
confirm = ["{ID}0", "{ID}1", "{ID}2", "{ID}3", "{ID}4", "{ID}5"]
[[target]]
name = "fs"
kind = "dataset"
size = "64M"
[matrix]
rw = ["write"]
bs = ["4k"]
"""
    s = spec(text)
    assert s.pool is not None and s.pool.layout == "mirror(2) mirror(2) + special mirror(2)"
    argv = create_pool_argv(s.pool, "c")
    assert argv[argv.index("tbpool") :] == [
        "tbpool",
        "mirror",
        f"{ID}0",
        f"{ID}1",
        "mirror",
        f"{ID}2",
        f"{ID}3",
        "special",
        "mirror",
        f"{ID}4",
        f"{ID}5",
    ]


@pytest.mark.parametrize(
    "change,message",
    [
        (('"raidz1", ', '"raidz1", "raidz1", '), "a raidz1 group needs at least 2 devices (has 0)"),
        ((f'"{ID}0", "{ID}1", "{ID}2"]', f'"{ID}0"]'), "a raidz1 group needs at least 2 devices (has 1)"),
        (('"raidz1", ', '"raidz4", '), "vdevs are named by stable id"),
        ((f'cache = ["{ID}3"]', f'cache = ["mirror", "{ID}3", "{ID}4"]'), "cache devices cannot be grouped"),
        ((f'cache = ["{ID}3"]', f'cache = ["{ID}2"]'), "is already listed in pool.vdevs"),
        ((f', "{ID}3", "/dev', ', "/dev'), f"does not confirm {ID}3"),
        (('log = ["/dev', 'log = ["raidz1", "/dev'), "a log vdev is a disk or a mirror"),
    ],
)
def test_bad_pool_layouts_name_the_key(change, message):
    with pytest.raises(SpecError) as e:
        spec(POOL.replace(*change) + '[matrix]\nrw = ["write"]\nbs = ["4k"]\n')
    assert message in str(e.value) and str(e.value).startswith("k.toml: pool.") and e.value.hint


def test_mixed_single_disks_and_groups_are_refused():
    text = POOL.replace('"raidz1", ', "").replace(f'"{ID}2"]', f'"{ID}2", "mirror", "{ID}4", "{ID}5"]')
    with pytest.raises(SpecError, match="mixes single disks with mirror/raidz groups"):
        spec(text + '[matrix]\nrw = ["write"]\nbs = ["4k"]\n')


def test_tunables_fixed_and_as_an_axis_merge_into_test_params():
    text = (
        POOL
        + """
[tunables]
zfs_arc_max = 1073741824

[matrix]
rw = ["write"]
bs = ["4k"]
tunables = [{}, { zfs_txg_timeout = 10 }, { zfs_txg_timeout = 10, zfs_arc_max = 536870912 }]
"""
    )
    tests = expand(spec(text))
    assert [t.params["tunables"] for t in tests] == [
        "zfs_arc_max=1073741824",
        "zfs_arc_max=1073741824,zfs_txg_timeout=10",
        "zfs_arc_max=536870912,zfs_txg_timeout=10",
    ]
    assert [t.name for t in tests] == [
        "zfs-fs-write-4k-def-arc_max1073741824",
        "zfs-fs-write-4k-def-arc_max1073741824-txg_timeout10",
        "zfs-fs-write-4k-def-arc_max536870912-txg_timeout10",
    ]
    assert len({t.id for t in tests}) == 3
    assert parse_tunables(canonical_tunables({"b": "2", "a": "1"})) == {"a": "1", "b": "2"}
    assert parse_tunables("default") == {}


def test_no_tunables_keeps_ids_as_before():
    base = expand(spec(FILE_TARGET + '[matrix]\nrw = ["read"]\nbs = ["4k"]\n'))
    assert "tunables" not in base[0].params and "layout" not in base[0].params and "mode" not in base[0].params


@pytest.mark.parametrize(
    "bad,message",
    [
        ('tunables = [{ "zfs txg" = 1 }]', "is not a module parameter name"),
        ("tunables = [{ zfs_txg_timeout = true }]", "must be a whole number or a short word"),
        ("tunables = [5]", "must be a table of module parameters"),
        ('layout = ["sparse"]', "must be one of random, zero, unwritten or compressible:<N>%"),
        ('layout = ["compressible:0%"]', "needs a percentage from 1 to 99"),
        ('layout = ["compressible:50"]', "needs a percentage from 1 to 99"),
        ('cache = ["hot"]', "must be one of warm, cold"),
        ("buffer_compress_percentage = [101]", "must be between 0 and 100"),
        ('refill_buffers = ["yes"]', "must be true or false"),
    ],
)
def test_bad_axis_values(bad, message):
    with pytest.raises(SpecError) as e:
        spec(POOL + f'[matrix]\nrw = ["write"]\nbs = ["4k"]\n{bad}\n')
    assert message in str(e.value) and e.value.hint


def test_layout_axis_names_files_and_requests():
    text = (
        FILE_TARGET + '[matrix]\nrw = ["read"]\nbs = ["128k"]\nlayout = ["unwritten", "random", "compressible:40%"]\n'
    )
    tests = expand(spec(text))
    assert [t.name for t in tests] == [
        "file-scratch-read-128k-unwritten",
        "file-scratch-read-128k-random",
        "file-scratch-read-128k-comp40",
    ]
    assert [jobs.test_file_paths(t) for t in tests] == [
        ["/srv/tb/tankbench-scratch.unwritten.fiodata"],
        ["/srv/tb/tankbench-scratch.fiodata"],
        ["/srv/tb/tankbench-scratch.comp40.fiodata"],
    ]
    req = layout_request(tests[0])
    assert req == {
        "op": "prepare_file",
        "path": "/srv/tb/tankbench-scratch.unwritten.fiodata",
        "paths": ["/srv/tb/tankbench-scratch.unwritten.fiodata"],
        "size": 64 << 20,
        "layout": "unwritten",
    }
    script = job_script(tests[0], "0001.fio")
    assert 'truncate -s 67108864 "$f"' in script
    assert "--buffer_compress_percentage=40" in job_script(tests[2], "0003.fio")


def test_unwritten_is_dropped_for_raw_devices_not_for_zvols():
    raw = f"""
[[target]]
name = "disk"
kind = "raw"
path = "{ID}9"
confirm = "{ID}9"
size = "64M"
[[target]]
name = "vol"
kind = "zvol"
size = "64M"
"""
    tests = expand(spec(POOL + raw + '[matrix]\nrw = ["read"]\nbs = ["4k"]\nlayout = ["unwritten", "zero"]\n'))
    kinds = sorted((t.target.kind, t.params["layout"]) for t in tests)
    assert kinds == [
        ("dataset", "unwritten"),
        ("dataset", "zero"),
        ("raw", "zero"),
        ("zvol", "unwritten"),
        ("zvol", "zero"),
    ]
    vol = next(t for t in tests if t.target.kind == "zvol" and t.params["layout"] == "unwritten")
    assert layout_request(vol, "/dev/zvol/x/y") == {
        "op": "prepare_raw",
        "path": "/dev/zvol/x/y",
        "size": 64 << 20,
        "layout": "unwritten",
    }
    assert "blkdiscard" in job_script(vol, "x.fio")


def test_copy_tests_drop_layout_cache_and_buffer_axes_but_keep_tunables():
    text = (
        POOL
        + """
[matrix]
rw = ["write"]
bs = ["4k"]
layout = ["random", "zero"]
cache = ["warm", "cold"]
refill_buffers = [true]
tunables = [{ zfs_txg_timeout = 5 }]
workload = ["fio", "cp"]
"""
    )
    tests = expand(spec(text))
    copies = [t for t in tests if t.is_copy]
    assert len(copies) == 1 and len(tests) == 5
    assert set(copies[0].params) == {"workload", "copy_size", "tunables"}


def test_buffer_axes_reach_fio_and_conflict_with_fio_table():
    text = (
        FILE_TARGET
        + '[matrix]\nrw = ["write"]\nbs = ["4k"]\nbuffer_compress_percentage = [0, 50]\nrefill_buffers = [true, false]\n'
    )
    tests = expand(spec(text))
    assert len(tests) == 4
    lines = job_text(tests[1]).splitlines()
    assert "buffer_compress_percentage=0" in lines and "refill_buffers=0" in lines
    assert tests[1].name == "file-scratch-write-4k-bufcomp0-norefill"
    with pytest.raises(SpecError, match="fio.refill_buffers = 1: is also an axis"):
        spec(text + "[fio]\nrefill_buffers = 1\n")


def test_cold_cache_needs_a_pool_tankbench_creates():
    parent = """
[pool]
parent = "tank/bench"
[[target]]
name = "fs"
kind = "dataset"
size = "64M"
[matrix]
rw = ["read"]
bs = ["4k"]
cache = ["warm", "cold"]
"""
    with pytest.raises(SpecError, match="cold needs a pool tankbench creates"):
        spec(parent)
    tests = expand(spec(POOL + '[matrix]\nrw = ["read"]\nbs = ["4k"]\ncache = ["warm", "cold"]\n'))
    assert [t.name for t in tests] == ["zfs-fs-read-4k-def-warm", "zfs-fs-read-4k-def-cold"]


SIZE_HEAD = """
[campaign]
name = "seed003"
mode = "size"
min_throughput = "2M"
"""


def test_size_based_runs_with_per_job_files():
    text = (
        FILE_TARGET.replace('"64M"', '"256M"')
        + """
[matrix]
rw = ["randwrite"]
bs = ["4k"]
numjobs = [16]
io = ["buffered"]
[fio]
end_fsync = 1
"""
    )
    s = spec(text, SIZE_HEAD)
    assert s.size_based and s.runtime == 0.0 and s.min_throughput == 2 << 20
    (t,) = expand(s)
    assert t.params["mode"] == "size"
    lines = job_text(t).splitlines()
    assert "time_based=1" not in lines and not any(x.startswith("runtime=") for x in lines)
    assert "directory=/srv/tb" in lines and "filename_format=tankbench-scratch.$jobnum.fiodata" in lines
    assert "size=256M" in lines and "numjobs=16" in lines and "end_fsync=1" in lines
    assert not any(x.startswith("filename=") for x in lines)
    paths = jobs.test_file_paths(t)
    assert len(paths) == 16 and paths[3] == "/srv/tb/tankbench-scratch.3.fiodata"
    assert layout_request(t)["paths"] == paths
    # 16 jobs x 256M at 2 MiB/s, plus the grace
    assert deadline_s(t, 60, s.min_throughput) == pytest.approx(16 * 256 / 2 + 60)


def test_time_based_per_job_files_and_block_device_regions():
    text = (
        POOL
        + '[[target]]\nname = "vol"\nkind = "zvol"\nsize = "64M"\n'
        + '[matrix]\nrw = ["randread"]\nbs = ["4k"]\nnumjobs = [4]\n'
    )
    tests = expand(spec(text))
    ds, vol = tests
    assert "filename_format=tankbench-fs.$jobnum.fiodata" in job_text(ds)
    assert "time_based=1" in job_text(ds).splitlines()
    vol_lines = job_text(vol).splitlines()
    assert "size=16M" in vol_lines and "offset_increment=16M" in vol_lines, "each job its own quarter of the zvol"
    assert deadline_s(ds, 60, 1 << 20) == 62


@pytest.mark.parametrize(
    "head,message",
    [
        ('mode = "size"\nruntime = "60s"', "campaign.runtime = '60s': has no meaning with mode = \"size\""),
        ('min_throughput = "1M"', "campaign.min_throughput = '1M': applies only to mode = \"size\""),
        ('mode = "sized"', "campaign.mode = 'sized': must be one of time, size"),
    ],
)
def test_bad_run_modes(head, message):
    with pytest.raises(SpecError) as e:
        spec(FILE_TARGET + '[matrix]\nrw = ["read"]\nbs = ["4k"]\n', f'[campaign]\nname = "x"\n{head}\n')
    assert message in str(e.value)


def test_size_mode_needs_a_size_for_a_whole_raw_device():
    raw = f'[[target]]\nname = "disk"\nkind = "raw"\npath = "{ID}9"\nconfirm = "{ID}9"\n'
    with pytest.raises(SpecError, match=r"target\[0\].size: size-based runs need a size"):
        spec(raw + '[matrix]\nrw = ["read"]\nbs = ["4k"]\n', SIZE_HEAD)


def test_buffer_check_flags_compressing_fio_buffers_only_where_it_means_something():
    (t,) = expand(spec(POOL + '[matrix]\nrw = ["randwrite"]\nbs = ["4k"]\n'))
    hit = buffer_check(t, "lz4", 1.6)
    assert hit["zfs.buffers_compressible"] is True and "refill_buffers" in hit["zfs.buffers_note"]
    assert buffer_check(t, "lz4", 1.02) == {"zfs.buffers_compressible": False}
    assert buffer_check(t, "off", 1.6) == {}
    (r,) = expand(spec(POOL + '[matrix]\nrw = ["randread"]\nbs = ["4k"]\n'))
    assert buffer_check(r, "lz4", 1.6) == {}, "reads write no buffers"


def test_exclude_rules_match_tunables_by_parameter():
    text = (
        POOL
        + """
[tunables]
zfs_arc_max = 1073741824

[matrix]
rw = ["write", "read"]
bs = ["4k"]
tunables = [{}, { zfs_txg_timeout = 10 }]

[[exclude]]
rw = "read"
tunables = { zfs_txg_timeout = 10 }
"""
    )
    tests = expand(spec(text))
    assert sorted((t.params["rw"], t.params["tunables"]) for t in tests) == [
        ("read", "zfs_arc_max=1073741824"),
        ("write", "zfs_arc_max=1073741824"),
        ("write", "zfs_arc_max=1073741824,zfs_txg_timeout=10"),
    ]


def test_writing_tests_refill_buffers_unless_the_campaign_chose_buffer_contents():
    """fio's one reused buffer makes small-block writes compressible: the next run had to lay the file out again."""
    from tankbench.fio.jobs import job_text

    body = FILE_TARGET + '[matrix]\nrw = ["randwrite", "randread", "randrw"]\nbs = ["4k"]\n'
    jobs = {t.params["rw"]: job_text(t).splitlines() for t in expand(spec(body))}
    assert "refill_buffers=1" in jobs["randwrite"] and "refill_buffers=1" in jobs["randrw"]
    assert not any(line.startswith("refill_buffers") for line in jobs["randread"]), "reads write no buffers"
    (t,) = expand(spec(FILE_TARGET + '[matrix]\nrw = ["write"]\nbs = ["4k"]\n[fio]\nzero_buffers = 1\n'))
    assert not any(line.startswith("refill_buffers") for line in job_text(t).splitlines())
