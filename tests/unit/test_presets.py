"""Presets are package data: listed from a checkout and from a built wheel, each one valid at every scale."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from tankbench.campaign import expand, load_spec
from tankbench.cli.presets import list_presets, preset_path, resolve_campaign
from tests.conftest import tankbench

ROOT = Path(__file__).resolve().parents[2]
PRESETS = ("compression-cache", "recordsize-mix", "tuning-matrix", "zvol-issues", "zvol-vs-qcow2")


def test_presets_lists_one_per_seed_with_quick_forms():
    res = tankbench("presets", "--json")
    assert res.returncode == 0, res.stderr
    rows = json.loads(res.stdout)
    assert tuple(r["name"] for r in rows) == PRESETS
    assert all("quick" in r["scales"] and r["description"].startswith("seed 00") for r in rows)
    assert all("/tankbench/presets/" in r["path"] for r in rows), "inside the package, not the checkout root"


@pytest.mark.parametrize("name", PRESETS)
@pytest.mark.parametrize("scale", ["", "quick"])
def test_every_preset_parses_and_expands(name: str, scale: str):
    spec = load_spec(resolve_campaign(name), scale)
    tests = expand(spec)
    assert spec.name == name and tests
    if scale == "quick" and name == "zvol-vs-qcow2":
        # a nested test guest (~2-4 min to boot in the lab), ~40 s per guest run, three fills: about 13 minutes
        assert len(tests) * spec.repeats <= 16, len(tests) * spec.repeats
    elif scale == "quick" and name != "zvol-issues":
        # each quick form must run in the lab in about three minutes (~20 s per run under TCG)
        assert len(tests) * spec.repeats <= 8, len(tests) * spec.repeats


def test_new_presets_use_the_issue_10_knobs():
    tm = load_spec(resolve_campaign("tuning-matrix"), "quick")
    assert tm.pool is not None and tm.pool.layout == "raidz1(3) + log 1 disk + cache 1 disk"
    assert {t.params["tunables"] for t in expand(tm)} == {"default", "l2arc_write_max=1048576000"}
    cc = expand(load_spec(resolve_campaign("compression-cache"), "quick"))
    assert {t.params["layout"] for t in cc} == {"unwritten", "compressible:50%"}
    full = expand(load_spec(resolve_campaign("compression-cache")))
    assert {t.params["cache"] for t in full} == {"warm", "cold"}
    rm = expand(load_spec(resolve_campaign("recordsize-mix")))
    assert {t.params["recordsize"] for t in rm} == {"4k", "32k", "default", "256k", "1M"}
    assert {t.test_case for t in rm} == {"read seq 1M", "write seq 1M", "read random 4k", "write random 4k"}


def test_a_file_here_wins_over_a_preset_of_the_same_name(tmp_path: Path):
    (tmp_path / "tuning-matrix").write_text("x")
    cwd = os.getcwd()
    os.chdir(tmp_path)
    try:
        assert resolve_campaign("tuning-matrix") == "tuning-matrix"
    finally:
        os.chdir(cwd)
    assert preset_path("tuning-matrix.toml") == preset_path("tuning-matrix") and preset_path("nope") is None
    assert [r["name"] for r in list_presets()] == list(PRESETS)


def test_a_built_wheel_ships_and_lists_the_presets(tmp_path: Path):
    """What `pipx install` gives: the presets come with the package, not with a checkout."""
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", str(tmp_path / "whl"), str(ROOT)],
        check=True,
        capture_output=True,
        timeout=600,
    )
    (wheel,) = (tmp_path / "whl").glob("tankbench-*.whl")
    names = zipfile.ZipFile(wheel).namelist()
    assert sorted(n for n in names if n.startswith("tankbench/presets/")) == [
        f"tankbench/presets/{p}.toml" for p in PRESETS
    ]
    subprocess.run(
        [sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--target", str(tmp_path / "site"), str(wheel)],
        check=True,
        capture_output=True,
        timeout=600,
    )
    env = dict(os.environ, PYTHONPATH=str(tmp_path / "site"))
    where = subprocess.run(
        [sys.executable, "-c", "import tankbench; print(tankbench.__file__)"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    assert where.startswith(str(tmp_path / "site")), "the wheel's package is the one imported"
    out = subprocess.run(
        [sys.executable, "-m", "tankbench", "presets"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert out.returncode == 0, out.stderr
    assert [line.split()[0] for line in out.stdout.splitlines()] == list(PRESETS)
    plan = subprocess.run(
        [sys.executable, "-m", "tankbench", "plan", "tuning-matrix", "--scale", "quick"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert plan.returncode == 0 and "8 tests" in plan.stdout, plan.stdout + plan.stderr


def test_zvol_vs_qcow2s_ci_form_keeps_every_path_of_the_quick_form_in_fewer_runs():
    """Issue 23: CI runs the smallest form that still covers what the quick form covers (every backing, a qcow2
    cluster size set, the host twin, a fill per backing); users keep the quick form."""
    quick = expand(load_spec(resolve_campaign("zvol-vs-qcow2"), "quick"))
    ci = expand(load_spec(resolve_campaign("zvol-vs-qcow2"), "ci"))

    def paths(tests: list) -> set[tuple[str, str, str]]:  # type: ignore[type-arg]
        return {(t.target.name, t.params.get("backing", ""), t.params.get("workload", "fio")) for t in tests}

    assert paths(ci) == paths(quick)
    assert {t.params.get("qcow2_cluster") for t in ci if t.params.get("backing") == "qcow2"} == {"8k"}
    assert len(ci) < len(quick) and len(ci) == 7
