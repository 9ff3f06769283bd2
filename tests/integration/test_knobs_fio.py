"""The fio jobs of issue 10's keys run with real fio: exported scripts lay out each layout and each job's file,
size-based jobs end after their size, and fio's buffer options reach fio."""

from __future__ import annotations

import json
import subprocess
import zlib
from pathlib import Path

from tests.conftest import tankbench

CAMPAIGN = """
[campaign]
name = "knobs-fio"
mode = "size"
min_throughput = "1M"

[[target]]
name = "scratch"
kind = "file"
path = "{path}"
size = "4M"

[matrix]
layout = ["unwritten", "compressible:50%"]
rw = ["read", "randwrite"]
bs = ["4k"]
numjobs = [3]
ioengine = ["psync"]
io = ["buffered"]
refill_buffers = [true]

[fio]
end_fsync = 1
"""


def export(tmp_path: Path) -> Path:
    campaign = tmp_path / "c.toml"
    campaign.write_text(CAMPAIGN.format(path=tmp_path / "scratch"))
    out = tmp_path / "export"
    res = tankbench("plan", str(campaign), "--export", str(out))
    assert res.returncode == 0, res.stderr
    return out


def run_script(script: Path) -> dict:
    run = subprocess.run(
        ["sh", str(script)], capture_output=True, text=True, timeout=300, env={"PATH": "/usr/bin:/bin:/usr/sbin:/sbin"}
    )
    assert run.returncode == 0, run.stderr
    return json.loads(run.stdout[run.stdout.index("{") :])


def test_size_based_per_job_reads_of_an_unwritten_layout(tmp_path: Path):
    out = export(tmp_path)
    names = (out / "tests.tsv").read_text()
    assert "file-scratch-read-4k-unwritten" in names and "file-scratch-randwrite-4k-comp50" in names
    doc = run_script(out / "0001-job.sh")  # read, unwritten
    # (the file kind's own script lines also lay out its default random file: the per-job files are these)
    files = sorted(f for f in (tmp_path / "scratch").iterdir() if ".unwritten." in f.name)
    assert [f.name for f in files] == [f"tankbench-scratch.unwritten.{j}.fiodata" for j in range(3)]
    assert all(f.stat().st_size == 4 << 20 and f.stat().st_blocks == 0 for f in files), (
        "each job's file is never written: fio read holes"
    )
    job = doc["jobs"][0]
    assert job["read"]["io_bytes"] == 3 * (4 << 20), "size based: each of the 3 jobs read its 4M, then fio ended"
    assert "runtime" not in doc["global options"] and "time_based" not in doc["global options"]


def test_compressible_layout_and_refilled_buffers(tmp_path: Path):
    out = export(tmp_path)
    lines = (out / "0004-job.fio").read_text().splitlines()
    assert "refill_buffers=1" in lines and "filename_format=tankbench-scratch.comp50.$jobnum.fiodata" in lines
    run_script(out / "0003-job.sh")  # read, compressible:50%: the script lays each job's file out
    laid = (tmp_path / "scratch" / "tankbench-scratch.comp50.2.fiodata").read_bytes()
    assert len(laid) == 4 << 20 and 0.4 < len(zlib.compress(laid, 1)) / len(laid) < 0.6
    doc = run_script(out / "0004-job.sh")  # randwrite, compressible:50%
    assert doc["jobs"][0]["write"]["io_bytes"] == 3 * (4 << 20)
    assert doc["global options"].get("end_fsync") == "1"
    for j in range(3):
        data = (tmp_path / "scratch" / f"tankbench-scratch.comp50.{j}.fiodata").read_bytes()
        assert len(data) == 4 << 20
        # fio overwrote the laid-out blocks with refilled (incompressible) buffers
        assert len(zlib.compress(data, 1)) / len(data) > 0.9
