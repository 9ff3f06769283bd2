"""A file target's layout verified where the previous run left it (fio_run's `layout_after`): the next run on the
same files needs no prepare round trip of its own; anything else (another run between, other files, a failed
verification) still gets one. Real fio and the real agent on a local file target."""

from __future__ import annotations

import os
from pathlib import Path

from tankbench import agent
from tankbench.campaign import expand, load_spec
from tankbench.drivers.file import _layout_key
from tankbench.fio.jobs import job_text
from tankbench.hosts.local import LocalHost
from tankbench.journal import Journal
from tankbench.progress import Progress
from tankbench.runner import CampaignRunner, preflight

CAMPAIGN = """
[campaign]
name = "layout-reuse"
runtime = "1s"
ramp = "0s"
warmup = false
repeats = 3
order = "sequential"
host = "local"

[[target]]
name = "scratch"
kind = "file"
path = "{dir}"
size = "4M"

[matrix]
rw = ["randread", "read"]
bs = ["4k"]
iodepth = [1]
io = ["buffered"]
"""


def test_the_next_run_on_the_same_files_reuses_the_check_made_after_the_previous_one(tmp_path: Path) -> None:
    campaign = tmp_path / "c.toml"
    campaign.write_text(CAMPAIGN.format(dir=tmp_path / "scratch"))
    spec = load_spec(str(campaign))
    tests = expand(spec)
    host = LocalHost()
    try:
        with Journal(str(tmp_path / "j.sqlite")) as journal:
            journal.add_campaign(spec.campaign_id, spec.name, str(campaign), spec.text)
            journal.add_tests(spec.campaign_id, tests, {t.id: job_text(t) for t in tests})
            runner = CampaignRunner(spec, host, journal, Progress(0, quiet=True), preflight(host, spec))
            assert runner.run(tests).runs_done == 6
            runs = journal.runs(with_samples=False)
            kind = runner.kinds["file"]
            ws = runner.ws
            # the kind's own state: a failed verification or another run in between means a real prepare
            test = tests[0]
            kind._after = (ws.run_seq, "other files", {"layout.verified": True})  # type: ignore[attr-defined]
            assert "layout.checked" not in kind.prepare(test)
            kind._after = (ws.run_seq - 1, _layout_key(test, kind), {"layout.verified": True})  # type: ignore[attr-defined]
            assert "layout.checked" not in kind.prepare(test), "another run came in between"
            kind._after = (ws.run_seq, _layout_key(test, kind), {"layout.verified": False})  # type: ignore[attr-defined]
            fresh = kind.prepare(test)
            assert "layout.checked" not in fresh and fresh["layout.verified"] is True
    finally:
        host.close()
    checked = [r.checks.get("layout.checked") for r in runs]
    # both tests use the same file (one per target and layout): only the very first run lays it out and checks
    # it by a prepare call; every later run is checked where the run before it left it
    assert checked == [None] + ["after the previous run"] * 5, checked
    assert runs[0].checks["layout.laid_out_now"] is True
    for r in runs:
        assert r.checks["layout.verified"] is True and r.checks["layout.sparse"] is False, r.checks
        assert r.checks["layout.apparent_bytes"] == 4 << 20
        assert r.checks["harness.prepare_s"] >= 0
    reused = runs[1].checks
    assert reused["layout.laid_out_now"] is False
    # the same figures a prepare call measures (both measure the file as it is)
    for k in ("layout.apparent_bytes", "layout.allocated_bytes", "layout.files", "layout.mode", "layout.data_bytes"):
        assert reused[k] == fresh[k], k


def test_layout_state_measures_without_writing(tmp_path: Path) -> None:
    path = tmp_path / "f.fiodata"
    path.write_bytes(os.urandom(1 << 20))
    req = {"op": "prepare_file", "path": str(path), "paths": [str(path)], "size": 1 << 20, "layout": "random"}
    assert agent.layout_state(req)["layout.verified"] is True
    with open(path, "r+b") as f:
        f.truncate(1 << 19)
    state = agent.layout_state(req)
    assert state["layout.verified"] is False and "size 524288" in state["layout.note"]
    assert path.stat().st_size == 1 << 19, "nothing written"
    path.write_bytes(bytes(1 << 20))  # zeros where random data is expected: compresses
    assert agent.layout_state(req)["layout.verified"] is False
    path.unlink()
    assert agent.layout_state(req) == {"layout.verified": False, "layout.note": "a test file is missing"}
    assert not path.exists()


def test_a_host_that_came_back_gets_a_prepare_call(tmp_path: Path) -> None:
    """After a reboot (recovery.py calls each kind's recover) the check made before it is dropped."""
    campaign = tmp_path / "c.toml"
    campaign.write_text(CAMPAIGN.format(dir=tmp_path / "scratch"))
    spec = load_spec(str(campaign))
    test = expand(spec)[0]
    host = LocalHost()
    try:
        with Journal(str(tmp_path / "j.sqlite")) as journal:
            runner = CampaignRunner(spec, host, journal, Progress(0, quiet=True), preflight(host, spec))
            kind = runner.kinds["file"]
            kind._after = (runner.ws.run_seq, _layout_key(test, kind), {"layout.verified": True})  # type: ignore[attr-defined]
            kind.recover(True)
            checks = kind.prepare(test)
            assert "layout.checked" not in checks and checks["layout.verified"] is True
    finally:
        host.close()
