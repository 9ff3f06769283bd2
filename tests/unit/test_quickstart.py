"""The quick start shows ZFS: it runs in the lab on modelled disks (also where the local kernel has ZFS, saying how
to measure the local pool instead), on a pool and a compressed dataset, unwritten vs written file (seed 002)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tankbench import runner
from tankbench.campaign import expand, load_spec
from tankbench.cli.run import lab_note

ROOT = Path(__file__).resolve().parents[2]
QUICKSTART = ROOT / "examples" / "quickstart.toml"


def test_the_example_and_its_package_copy_are_one_file() -> None:
    assert QUICKSTART.read_bytes() == (ROOT / "src" / "tankbench" / "examples" / "quickstart.toml").read_bytes()


def test_the_quick_start_is_a_zfs_campaign_in_the_lab_on_modelled_disks() -> None:
    spec = load_spec(str(QUICKSTART))
    assert spec.host.kind == "lab" and spec.host.lab_machine.disk_model == "hdd" and spec.host.lab_machine.arc_max > 0
    assert spec.pool is not None and {t.kind for t in spec.targets} == {"dataset"}
    tests = expand(spec)
    assert {t.params["layout"] for t in tests} == {"unwritten", "compressible:50%"}


def test_on_a_host_with_zfs_it_says_how_to_run_locally(monkeypatch: pytest.MonkeyPatch) -> None:
    spec = load_spec(str(QUICKSTART))
    monkeypatch.setattr(runner, "local_has_zfs", lambda: True)
    assert "--host local" in lab_note(spec)
    monkeypatch.setattr(runner, "local_has_zfs", lambda: False)
    assert lab_note(spec) == ""
