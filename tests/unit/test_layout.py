"""The agent's layouts on real files and a real loop device: each layout laid out, measured (apparent vs
allocated vs data bytes: holes told from compression) and verified; laid out again when a run changed it."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from tankbench import agent
from tankbench.campaign import expand, parse_spec
from tankbench.errors import HostError
from tankbench.fio.jobs import layout_request
from tankbench.hosts.local import LocalHost

SIZE = 8 << 20


def prepare(path: Path, layout: str, **extra: object) -> dict:
    req = {"op": "prepare_file", "path": str(path), "size": SIZE, "layout": layout, **extra}
    return LocalHost().call_agent(req, timeout=120)["checks"]


@pytest.mark.parametrize(
    "layout,ratio,sparse",
    [
        ("random", 1.0, False),
        ("zero", 0.0, False),
        ("unwritten", 0.0, True),
        ("compressible:50%", 0.5, False),
        ("compressible:75%", 0.25, False),
    ],
)
def test_each_layout_is_laid_out_measured_and_verified(tmp_path: Path, layout: str, ratio: float, sparse: bool):
    f = tmp_path / "t.fiodata"
    c = prepare(f, layout)
    assert c["layout.mode"] == layout and c["layout.verified"] is True, c
    assert c["layout.laid_out_now"] is True and c["layout.apparent_bytes"] == SIZE == f.stat().st_size
    assert c["layout.sample_compress_ratio"] == pytest.approx(ratio, abs=0.08)
    assert c["layout.sparse"] is sparse and c["layout.hole_bytes"] == (SIZE if sparse else 0)
    assert c["layout.allocated_bytes"] == f.stat().st_blocks * 512
    assert c["layout.compressed"] is False, "ext4 does not compress: nothing is mistaken for holes either"
    again = prepare(f, layout)
    assert again["layout.laid_out_now"] is False and again["layout.verified"] is True, "a correct file is kept"


def test_a_run_that_wrote_into_an_unwritten_file_gets_it_laid_out_again(tmp_path: Path):
    f = tmp_path / "u.fiodata"
    prepare(f, "unwritten")
    with open(f, "r+b") as fh:
        fh.seek(1 << 20)
        fh.write(os.urandom(1 << 20))
    c = prepare(f, "unwritten")
    assert c["layout.laid_out_now"] is True and c["layout.data_bytes"] == 0 and c["layout.verified"] is True


def test_a_short_file_from_a_killed_layout_is_laid_out_again_without_waiting(tmp_path: Path):
    f = tmp_path / "short.fiodata"
    f.write_bytes(os.urandom(SIZE // 3))
    t0 = time.monotonic()
    c = prepare(f, "random")
    assert time.monotonic() - t0 < 20, "no polling for an allocation that can never come"
    assert c["layout.laid_out_now"] is True and c["layout.verified"] is True and f.stat().st_size == SIZE


def test_random_data_over_a_zero_file_is_seen_and_replaced(tmp_path: Path):
    f = tmp_path / "z.fiodata"
    prepare(f, "random")
    f.write_bytes(bytes(SIZE))
    c = prepare(f, "random")
    assert c["layout.laid_out_now"] is True and c["layout.sample_compress_ratio"] > 0.9


def test_holes_are_told_from_data():
    assert agent.expected_ratio("compressible:30%") == (0.7, 0.1)
    checks = agent.layout_checks(
        "random", [{"apparent": 100, "allocated": 40, "data": 100, "ratio": 1.0, "zeros": 0.0}], False, 0.1
    )
    assert checks["layout.sparse"] is False and checks["layout.compressed"] is True, (
        "41.8M allocated of 64M on lz4 is compression, not a sparse file"
    )
    holes = agent.layout_checks(
        "random",
        [{"apparent": 100, "allocated": 40, "data": 40, "ratio": 1.0, "zeros": 0.0}],
        False,
        0.1,
        notes=["x: holes"],
    )
    assert holes["layout.sparse"] is True and holes["layout.compressed"] is False
    assert holes["layout.verified"] is False and holes["layout.note"] == "x: holes"


def test_per_job_files_are_all_laid_out(tmp_path: Path):
    text = f"""
[campaign]
name = "jobs"
mode = "size"
[[target]]
name = "scratch"
kind = "file"
path = "{tmp_path}"
size = "4M"
[matrix]
rw = ["randwrite"]
bs = ["4k"]
numjobs = [3]
layout = ["compressible:50%"]
"""
    (test,) = expand(parse_spec(text, "j.toml"))
    req = layout_request(test)
    c = LocalHost().call_agent(req, timeout=120)["checks"]
    assert c["layout.files"] == 3 and c["layout.verified"] is True and c["layout.apparent_bytes"] == 3 * (4 << 20)
    assert sorted(p.name for p in tmp_path.iterdir()) == [f"tankbench-scratch.comp50.{j}.fiodata" for j in range(3)]


@pytest.mark.root
def test_raw_device_layouts_are_measured_not_assumed(loopdev: str):
    host = LocalHost()
    c = host.call_agent({"op": "prepare_raw", "path": loopdev, "size": 16 << 20, "layout": "zero"}, timeout=120)
    checks = c["checks"]
    assert checks["layout.device_bytes"] == 64 << 20 and checks["layout.apparent_bytes"] == 16 << 20
    assert checks["layout.verified"] is True and checks["layout.zero_fraction"] == 1.0
    assert "layout.sparse" not in checks and "layout.allocated_bytes" not in checks, (
        "a plain device cannot say what is allocated: left empty, not claimed"
    )
    rnd = host.call_agent({"op": "prepare_raw", "path": loopdev, "size": 16 << 20}, timeout=120)["checks"]
    assert rnd["layout.mode"] == "random" and rnd["layout.laid_out_now"] is True and rnd["layout.verified"] is True
    with pytest.raises(HostError, match="layout unwritten needs a zvol"):
        host.call_agent({"op": "prepare_raw", "path": loopdev, "size": 16 << 20, "layout": "unwritten"}, timeout=60)
