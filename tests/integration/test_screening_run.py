"""A screening and its refine on a matrix of another shape than zvol-issues (issue 29): real fio, local file
targets on a loop device's ext4 and on the test's own directory, storage factors target x layout x size (one
combination excluded), the fio factor iodepth, two workloads. plan prints both steps, run journals the screening's
choice and measures only it, refine measures the top factors in full in the same journal, the report has the
factor section, and a refine run again resumes (adds nothing)."""

from __future__ import annotations

import json
import sqlite3
import subprocess
from pathlib import Path

import pytest

from tests.conftest import sh, tankbench

CAMPAIGN = """
[campaign]
name = "screen-itest"
host = "local"
runtime = "1s"
ramp = "0s"
warmup = "none"
repeats = 1
design = "screening"

[[target]]
name = "ext4"
kind = "file"
path = "{mnt}/f"
size = "8M"

[[target]]
name = "tmp"
kind = "file"
path = "{tmp}/f"
size = "8M"

[matrix]
rw = ["randread", "write"]
bs = ["4k"]
layout = ["random", "zero"]
size = ["4M", "8M"]
iodepth = [1, 4]
io = ["buffered"]

[[exclude]]
target = "tmp"
layout = "zero"
size = "8M"
"""


def rows(journal: Path, sql: str) -> list[tuple]:  # type: ignore[type-arg]
    conn = sqlite3.connect(journal)
    try:
        return conn.execute(sql).fetchall()
    finally:
        conn.close()


@pytest.mark.root
def test_screening_then_refine_on_file_targets(tmp_path: Path, loopdev: str) -> None:
    mnt = tmp_path / "mnt"
    mnt.mkdir()
    sh("mkfs.ext4", "-q", loopdev)
    sh("mount", loopdev, str(mnt))
    try:
        _screen_and_refine(tmp_path, mnt)
    finally:
        subprocess.run(["umount", str(mnt)], capture_output=True)


def _screen_and_refine(tmp_path: Path, mnt: Path) -> None:
    (tmp_path / "scratch").mkdir()
    c = tmp_path / "c.toml"
    c.write_text(CAMPAIGN.format(mnt=mnt, tmp=tmp_path / "scratch"))
    j = tmp_path / "j.sqlite"
    plan = tankbench("plan", str(c), "--journal", str(j), cwd=tmp_path)
    assert plan.returncode == 0, plan.stderr
    # 2 x 4 configurations less the excluded one = 7 storage states x 2 iodepths = 14 tests per workload
    assert "Design: screening," in plan.stdout and "of the matrix's 28 tests (2 workloads)" in plan.stdout, plan.stdout
    assert "Step 2, refine" in plan.stdout and "Both steps, likely" in plan.stdout
    assert not j.exists()  # plan writes nothing

    run = tankbench("run", str(c), "--journal", str(j), "--no-report", cwd=tmp_path)
    assert run.returncode == 0, run.stderr + run.stdout
    assert f"next: tankbench refine {j}" in run.stdout
    steps = rows(j, "SELECT step, data FROM design_steps")
    assert [s for s, _ in steps] == ["screening"]
    screen = json.loads(steps[0][1])
    chosen = {i for w in screen["workloads"] for i in w["chosen"]}
    factors = {f["name"]: f["storage"] for f in screen["workloads"][0]["factors"]}
    assert factors == {"target": True, "layout": True, "size": True, "iodepth": False}
    measured = {r[0] for r in rows(j, "SELECT test_id FROM runs WHERE warmup = 0 AND status = 'done'")}
    assert measured == chosen and 2 * 5 <= len(chosen) < 28  # only the design's tests ran, once each
    assert rows(j, "SELECT max(run_no) FROM runs")[0][0] == 1
    excluded = {c["name"] for w in screen["workloads"] for c in w["candidates"]}
    assert not any(n.startswith("file-tmp") and "zero" in n and "size8M" in n for n in excluded)

    again = tankbench("refine", str(j), "--plan", "--json", cwd=tmp_path)
    assert again.returncode == 0, again.stderr
    proposal = json.loads(again.stdout)
    assert not proposal["resumed"] and all(len(w["top"]) == 3 for w in proposal["workloads"])
    ref = tankbench("refine", str(j), "--no-report", cwd=tmp_path)
    assert ref.returncode == 0, ref.stderr + ref.stdout
    steps = rows(j, "SELECT step, data FROM design_steps")
    assert [s for s, _ in steps] == ["screening", "refine"]
    refine = json.loads(steps[1][1])
    assert refine["workloads"] == proposal["workloads"]  # --plan showed what ran
    picked = {i for w in refine["workloads"] for i in w["chosen"]}
    measured = {r[0] for r in rows(j, "SELECT test_id FROM runs WHERE warmup = 0 AND status = 'done'")}
    assert picked <= measured and measured == chosen | picked
    for w in refine["workloads"]:  # the rest fixed at one level: every chosen test shares them
        assert set(w["fixed"]) | set(w["top"]) == set(factors)

    n_runs = rows(j, "SELECT count(*) FROM runs")[0][0]
    resumed = tankbench("refine", str(j), "--no-report", cwd=tmp_path)
    assert resumed.returncode == 0, resumed.stderr
    assert rows(j, "SELECT count(*) FROM runs")[0][0] == n_runs  # the recorded refine, nothing left to run

    report = tankbench("report", "--journal", str(j), "--out", str(tmp_path / "report"), cwd=tmp_path)
    assert report.returncode == 0, report.stderr
