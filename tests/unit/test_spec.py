"""Campaign parsing and matrix expansion: pure functions, stable order and ids."""

import pytest

from tankbench.campaign import expand, parse_spec
from tankbench.errors import SpecError, UserError
from tankbench.fio.jobs import job_text

DEMO = """
[campaign]
name = "demo"
runtime = "2s"
ramp = "0s"
warmup = false
repeats = 1
cooldown = "0s"

[[target]]
name = "scratch"
kind = "file"
path = "/tmp/tb-scratch"
size = "64M"

[matrix]
rw = ["read", "randwrite"]
bs = ["4k"]
iodepth = [1]
io = ["direct"]
"""


def test_issue_demo_is_accepted_as_written():
    spec = parse_spec(DEMO, "demo.toml")
    assert spec.name == "demo" and spec.runtime == 2.0 and spec.repeats == 1 and spec.host.kind == "auto"
    tests = expand(spec)
    assert [t.number for t in tests] == [1, 2]
    assert [t.name for t in tests] == ["file-scratch-read-4k", "file-scratch-randwrite-4k"]
    assert [t.test_case for t in tests] == ["read seq 4k", "write random 4k"]


def test_ids_are_stable_and_independent_of_order_and_numbering():
    a = expand(parse_spec(DEMO, "a.toml"))
    reordered = DEMO.replace('rw = ["read", "randwrite"]', 'rw = ["randwrite", "read"]')
    b = expand(parse_spec(reordered, "b.toml"))
    assert {t.id for t in a} == {t.id for t in b}
    assert a[0].id == b[1].id and a[0].number == 1 and b[1].number == 2
    changed = expand(parse_spec(DEMO.replace('runtime = "2s"', 'runtime = "3s"'), "c.toml"))
    assert not ({t.id for t in a} & {t.id for t in changed}), "runtime changes what is measured, so the id"


def test_repeats_and_cooldown_do_not_change_ids():
    a = expand(parse_spec(DEMO, "a.toml"))
    b = expand(
        parse_spec(DEMO.replace("repeats = 1", "repeats = 5").replace('cooldown = "0s"', 'cooldown = "9s"'), "b")
    )
    assert [t.id for t in a] == [t.id for t in b]


SEED = """
[campaign]
name = "seed000"
runtime = "180s"
ramp = "10s"

[[target]]
name = "hdd"
kind = "raw"
path = "/dev/disk/by-id/ata-ST5000LM000-2AN170_WCXXXXGQ"
confirm = "/dev/disk/by-id/ata-ST5000LM000-2AN170_WCXXXXGQ"

[matrix]
rw = ["read", "write", "randread", "randwrite"]
bs = ["4k", "1M"]
iodepth = [1, 4, 24]
io = ["buffered", "direct"]
sync_mode = ["async", "fsync"]

[[exclude]]
rw = ["read", "randread"]
sync_mode = "fsync"

[[include]]
rw = "write"
bs = "64k"
"""


def test_matrix_order_exclude_include_and_seed_names():
    tests = expand(parse_spec(SEED, "seed.toml"))
    # 4 rw x 2 bs x 3 qd x 2 io x 2 sync = 96, minus reads with fsync (2 x 2 x 3 x 2 = 24), plus 1 include
    assert len(tests) == 96 - 24 + 1
    assert tests[0].name == "baseline-read-4k-raw-disk-qd1-buffered-async"
    assert tests[-1].params["bs"] == "64k" and tests[-1].params["iodepth"] == 1
    assert all(not (t.params["rw"] in ("read", "randread") and t.params["sync_mode"] == "fsync") for t in tests)
    assert len({t.name for t in tests}) == len(tests)
    assert [t.number for t in tests] == list(range(1, len(tests) + 1))


def test_job_text_maps_axes_to_fio_options():
    tests = expand(parse_spec(SEED, "seed.toml"))
    t = next(
        t
        for t in tests
        if t.params == {"rw": "write", "bs": "1M", "iodepth": 24, "numjobs": 1, "io": "buffered", "sync_mode": "fsync"}
    )
    text = job_text(t)
    for line in (
        "direct=0",
        "fsync=1",
        "iodepth=24",
        "bs=1M",
        "rw=write",
        "runtime=180",
        "ramp_time=10",
        "time_based=1",
        "filename=/dev/disk/by-id/ata-ST5000LM000-2AN170_WCXXXXGQ",
    ):
        assert line in text.splitlines()


def test_size_cap_is_a_clear_error():
    with pytest.raises(UserError) as e:
        expand(parse_spec(SEED.replace('ramp = "10s"', 'ramp = "10s"\nmax_tests = 10'), "seed.toml"))
    assert "expands to 73 tests, more than campaign.max_tests = 10" in e.value.message


def test_spec_error_names_file_key_value_and_hint():
    with pytest.raises(SpecError) as e:
        parse_spec(DEMO.replace("iodepth = [1]", "iodepth = [0]"), "demo.toml")
    assert str(e.value) == "demo.toml: matrix.iodepth = 0: must be between 1 and 65536"
    assert e.value.hint


def test_copy_workloads_drop_fio_axes_and_skip_rsync_on_block_devices():
    text = SEED.replace(
        'sync_mode = ["async", "fsync"]', 'sync_mode = ["async", "fsync"]\nworkload = ["fio", "cp", "rsync", "dd"]'
    )
    tests = expand(parse_spec(text + '\n[[target]]\nname = "f"\nkind = "file"\npath = "/tmp/x"\nsize = "8M"\n', "s"))
    copies = [t for t in tests if t.is_copy]
    assert sorted(t.name for t in copies) == [
        "baseline-copy-cp-256M-raw-disk",
        "baseline-copy-dd-256M-raw-disk",
        "file-f-copy-cp-256M",
        "file-f-copy-dd-256M",
        "file-f-copy-rsync-256M",
    ]
    assert {t.test_case for t in copies} == {"copy cp 256M", "copy dd 256M", "copy rsync 256M"}
    fio_ids = {t.id for t in expand(parse_spec(SEED, "s")) if t.target.kind == "raw"}
    assert fio_ids <= {t.id for t in tests}, "adding the workload axis keeps the ids of the fio tests"


def test_an_include_may_set_an_axis_the_matrix_does_not_have():
    """[[include]] with an axis missing from the matrix: the extra test has it (it used to crash with KeyError
    when naming tests, and the value was dropped), and its name shows it."""
    spec = parse_spec(
        DEMO.replace('rw = ["read", "randwrite"]', 'rw = ["read"]') + '[[include]]\nsize = "32M"\n', "d.toml"
    )
    tests = expand(spec)
    assert [t.name for t in tests] == ["file-scratch-read-4k", "file-scratch-read-4k-size32M"]
    assert "size" not in tests[0].params and tests[1].params["size"] == "32M"
    assert "size=32M" in job_text(tests[1])
