"""A preset on the user's disks and sizes without editing it: --set, --disks/--log/--cache/--confirm, --host,
sizes relative to the host (campaign/overrides.py and its command-line options)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tankbench.campaign import expand, load_spec
from tankbench.campaign.overrides import Overrides, relative_sizes, toml_value
from tankbench.cli.presets import resolve_campaign
from tankbench.doctor.facts import meminfo_total, pool_capacity
from tankbench.errors import UserError
from tankbench.safety import check_raw_target
from tankbench.targets.raw import raw_confirmation
from tests.conftest import tankbench

ID = "/dev/disk/by-id/"
A, B, C, L, X = (f"{ID}ata-{n}" for n in ("A", "B", "C", "LOG", "CACHE"))


def stub_facts(host, doc, bases):  # a stand-in for the host (the real provider is tested in the lab)
    return {"arc": (4 << 30, "stub arcstats"), "ram": (16 << 30, "stub meminfo"), "free": (100 << 30, "stub zfs")}


def tm(**kw) -> object:
    return load_spec(resolve_campaign("tuning-matrix"), "quick", Overrides(facts=stub_facts, **kw))


def test_disks_take_the_places_of_the_presets_and_are_confirmed_blank_only():
    spec = tm(disks=(A, B, C), log=(L,), cache=(X,), confirm=(B,))
    assert spec.pool.vdevs == ("raidz1", A, B, C) and spec.pool.log == (L,) and spec.pool.cache == (X,)
    assert set(spec.pool.confirm) == {f"blank:{A}", B, f"blank:{C}", f"blank:{L}", f"blank:{X}"}
    assert "virtio-tb" not in " ".join(spec.pool.devices + spec.pool.confirm)
    assert "# --disks " + ",".join((A, B, C)) in spec.text, "what the command line changed is journalled"


def test_more_disks_widen_a_single_group_and_fewer_are_refused():
    spec = tm(disks=(A, B, C, f"{ID}ata-D"), log=(L,), cache=(X,))
    assert spec.pool.layout.startswith("raidz1(4)")
    with pytest.raises(UserError, match=r"needs 3 data disks \(pool vdevs: raidz1 of 3\); --disks names 2"):
        tm(disks=(A, B))


def test_raw_target_takes_the_disk_after_the_pool():
    spec = load_spec(resolve_campaign("zvol-issues"), "quick", Overrides(disks=(A, B), log=(L,)))
    raw = [t for t in spec.targets if t.kind == "raw"]
    assert raw and raw[0].path == B and raw_confirmation(raw[0]) == f"blank:{B}"


@pytest.mark.parametrize(
    "kw,message",
    [
        ({"disks": ("/dev/sdb", B, C)}, "disk '/dev/sdb': disks are named by stable id"),
        ({"disks": (A, A, C)}, "is named twice"),
        ({"disks": (A, B, C), "confirm": (L,)}, "not one of the disks named"),
        ({"log": (L, X)}, "pool.log has 1 device(s) (single); --log names 2"),
        ({"sets": (("nope.x", 1),)}, "unknown table 'nope'"),
        ({"sets": (("target.nofs.size", "8G"),)}, "no element 'nofs' in target"),
        ({"sets": (("target.size", "8G"),)}, "target is an array"),
    ],
)
def test_bad_overrides_are_user_errors(kw, message):
    with pytest.raises(UserError, match=message.replace("(", r"\(").replace(")", r"\)")):
        tm(**kw)


def test_set_reaches_any_key_and_goes_through_the_same_validation():
    spec = tm(sets=(("campaign.runtime", "3s"), ("target.fs.size", "64M"), ("matrix.bs", ["4k"])))
    assert spec.runtime == 3 and spec.targets[0].size == 64 << 20 and spec.matrix["bs"] == ("4k",)
    with pytest.raises(UserError, match="campaign.runtime = 'soon': not a duration"):
        tm(sets=(("campaign.runtime", "soon"),))


def test_relative_sizes_are_resolved_rounded_and_recorded():
    spec = tm(sets=(("target.fs.size", "2.5x arc"), ("matrix.size", ["10% free"])))
    assert spec.targets[0].size == 10 << 30
    assert {t.params["size"] for t in expand(spec)} == {"10G"}
    lines = spec.extras["resolved_sizes"]
    assert lines[0] == "target[0].size = '2.5x arc' -> 10G (arc = 4 GiB from stub arcstats)"
    assert "resolved target[0].size" in spec.text


def test_relative_size_without_a_host_to_ask_is_a_clear_error():
    with pytest.raises(UserError, match="a size relative to the host is resolved by `plan` and `run`"):
        load_spec(resolve_campaign("tuning-matrix"), "quick", Overrides(sets=(("target.fs.size", "2x arc"),)))


def test_pure_helpers():
    assert toml_value("30") == 30 and toml_value("8G") == "8G" and toml_value('["4k","1M"]') == ["4k", "1M"]
    assert relative_sizes({"target": [{"size": "50% free"}], "scale": {"q": {"x": "2x arc"}}}) == [
        ("target[0].size", "50% free")
    ]
    g = 1 << 30
    # a raidz group is sized by its smallest disk: the 12 GiB one counts as 10
    raidz = pool_capacity(["raidz1", "a", "b", "c"], {"a": 10 * g, "b": 12 * g, "c": 10 * g})
    assert raidz == pool_capacity(["raidz1", "a", "b", "c"], dict.fromkeys("abc", 10 * g)) < 20 * g
    two = pool_capacity(["mirror", "a", "b", "mirror", "c", "d"], dict.fromkeys("abcd", g))
    assert two == pool_capacity(["a", "b"], dict.fromkeys("ab", g)) < 2 * g  # two mirrors hold what two disks do
    assert meminfo_total("MemTotal:       16384 kB\nMemFree: 1 kB\n") == 16 << 20


def test_blank_confirmation_refuses_a_disk_with_data_and_names_the_fix():
    blank = f"blank:{A}"
    check_raw_target("disk", A, blank, {"exists": True, "is_block": True, "signatures": []}, "c.toml")  # accepted
    with pytest.raises(UserError) as e:
        check_raw_target("disk", A, blank, {"exists": True, "is_block": True, "signatures": ["zfs_member"]}, "c.toml")
    assert "accepts only a blank disk" in e.value.message and e.value.hint.endswith(f"--confirm {A}")


def test_presets_show_prints_the_file(tmp_path: Path):
    res = tankbench("presets", "show", "tuning-matrix", cwd=tmp_path)
    assert res.returncode == 0 and res.stdout == Path(resolve_campaign("tuning-matrix")).read_text()
    res = tankbench("presets", "show", "tuning-matrixx", cwd=tmp_path)
    assert res.returncode == 2 and "did you mean 'tuning-matrix'?" in res.stderr


def test_plan_on_named_disks_from_the_command_line_and_a_host_file(tmp_path: Path):
    host = tmp_path / "myhost.toml"
    host.write_text(
        f'disks = ["{A}", "{B}", "{C}"]\nlog = ["{L}"]\ncache = ["{X}"]\n'
        '[host]\nkind = "ssh"\naddress = "bench.example.org"\n[set]\n"campaign.runtime" = "3s"\n'
    )
    res = tankbench("plan", "tuning-matrix", "--scale", "quick", "--host", str(host), "--json", cwd=tmp_path)
    assert res.returncode == 0, res.stderr
    assert json.loads(res.stdout)["tests"]
    res = tankbench("plan", "tuning-matrix", "--scale", "quick", "--disks", f"{A},{B}", cwd=tmp_path)
    assert res.returncode == 2 and res.stderr.startswith("Error: ") and "--disks names 2" in res.stderr
    res = tankbench("plan", "tuning-matrix", "--host", "ssh://root@bench.invalid:2", "--set", "target.fs.size=2x arc")
    assert res.returncode == 2 and "cannot read them on" in res.stderr and "Traceback" not in res.stderr


@pytest.mark.parametrize("depth", [40, 3000])
def test_a_set_value_nested_too_deep_is_an_error_not_a_recursion(depth: int):
    """QA finding 3: `--set 'matrix.bs=[[[…]]]'` 3000 deep raised RecursionError in tomllib (a traceback)."""
    with pytest.raises(UserError, match="nested more than 32 deep"):
        toml_value("[" * depth + "]" * depth)
    assert toml_value('["4k", ["1M"]]') == ["4k", ["1M"]]


def test_a_host_files_set_value_nested_too_deep_names_the_key():
    deep: list[object] = []
    for _ in range(40):
        deep = [deep]
    with pytest.raises(UserError, match=r"host\.toml: --set matrix\.bs: arrays or tables nested more than 32 deep"):
        tm(sets=(("matrix.bs", deep),), source="host.toml")


def test_report_settings_of_a_text_nested_beyond_toml():
    from tankbench.campaign.report import parse_settings
    from tankbench.errors import SpecError

    with pytest.raises(SpecError, match=r"j\.sqlite \(campaign\): \(file\): arrays or tables nested too deep"):
        parse_settings("x = " + "[" * 3000 + "]" * 3000, "j.sqlite (campaign)")


@pytest.mark.parametrize(
    "key,value,message",
    [
        ("campaign.runtime", float("nan"), "--set campaign.runtime = nan: not a duration"),
        ("target.scratch.size", "8Q", "--set target.scratch.size = '8Q': not a size"),
        ("target.0.size", "8Q", "--set target.0.size = '8Q': not a size"),
        ("campaign.cooldown", {"auto": True, "load1": -1}, "--set campaign.cooldown.load1 = -1: must be a finite"),
    ],
)
def test_an_error_in_a_set_value_names_the_set_item(tmp_path: Path, key: str, value: object, message: str):
    """QA finding 14: the message named the file's key (campaign.runtime) for a value the file did not have."""
    campaign = tmp_path / "c.toml"
    campaign.write_text(
        '[campaign]\nname = "c"\nruntime = "2s"\nhost = "local"\n[[target]]\nname = "scratch"\nkind = "file"\n'
        f'path = "{tmp_path}"\nsize = "8M"\n[matrix]\nrw = ["read"]\nbs = ["4k"]\n[scale.quick.campaign]\nruntime = "1s"\n'
    )
    with pytest.raises(UserError) as e:
        load_spec(str(campaign), overrides=Overrides(sets=((key, value),)))
    assert str(e.value) == f"{campaign}: {message}" or str(e.value).startswith(f"{campaign}: {message}"), str(e.value)
    with pytest.raises(UserError, match="--set campaign.runtime = nan"):  # at a scale too
        load_spec(str(campaign), "quick", Overrides(sets=(("campaign.runtime", float("nan")),)))
