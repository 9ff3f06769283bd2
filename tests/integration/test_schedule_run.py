"""`run` with the adaptive schedule, real fio on local files: warm-up per configuration, rounds, CI stopping,
racing, automatic cooldown and fio steady state all end up in the journal; a resume adds nothing."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

from tests.conftest import tankbench

CAMPAIGN = """
[campaign]
name = "sched-itest"
host = "local"
runtime = "4s"
ramp = "0s"
ss = "iops:50%"
ss_dur = "2s"
warmup = "per-config"
repeats = {{ min = 2, max = 4, ci = "5%" }}
racing = {{ margin = "5%" }}
order = "round-robin"
cooldown = {{ auto = true, max = "5s", load1 = false, idle_for = "1s", idle_iops = 100000 }}

[[target]]
name = "a"
kind = "file"
path = "{dir}/a"
size = "16M"

[[target]]
name = "b"
kind = "file"
path = "{dir}/b"
size = "16M"

[matrix]
rw = ["randread", "write"]
bs = ["4k"]
iodepth = [1]
io = ["buffered"]
"""


def runs_of(journal: Path) -> list[dict]:  # type: ignore[type-arg]
    conn = sqlite3.connect(journal)
    conn.row_factory = sqlite3.Row
    try:
        return [
            dict(r)
            for r in conn.execute(
                "SELECT r.id, t.name, t.target, r.run_no, r.warmup, r.status, r.wall_s, r.checks, r.metrics FROM runs r "
                "JOIN tests t ON t.id = r.test_id ORDER BY r.id"
            )
        ]
    finally:
        conn.close()


def test_adaptive_schedule_journals_every_decision(tmp_path: Path) -> None:
    c = tmp_path / "c.toml"
    (tmp_path / "scratch").mkdir()
    c.write_text(CAMPAIGN.format(dir=tmp_path / "scratch"))
    j = tmp_path / "j.sqlite"
    plan = tankbench("plan", str(c), "--journal", str(j), cwd=tmp_path)
    assert plan.returncode == 0 and "Runs left: 8–16 measured + 2 warm-up(s)" in plan.stdout, plan.stdout
    res = tankbench("run", str(c), "--journal", str(j), cwd=tmp_path)
    assert res.returncode == 0, res.stderr
    runs = runs_of(j)
    checks = [json.loads(r["checks"]) for r in runs]
    # one warm-up per configuration (target), before that configuration's first measured run
    warm = [r for r in runs if r["warmup"]]
    assert [r["target"] for r in warm] == ["a", "b"]
    assert runs[0]["warmup"] and [r["warmup"] for r in runs if r["target"] == "a"][0] == 1
    # round-robin inside a configuration: both tests of `a` get run 1 before either gets run 2
    a = [(r["name"], r["run_no"]) for r in runs if r["target"] == "a" and not r["warmup"]]
    assert [n for _, n in a[:4]] == [1, 1, 2, 2]
    # every measured test ends with a journalled decision that carries its evidence
    last: dict[str, dict] = {}  # type: ignore[type-arg]
    for r, ch in zip(runs, checks):
        if not r["warmup"]:
            last[r["name"]] = ch
    assert len(last) == 4
    for name, ch in last.items():
        assert ch["schedule.decision"] in ("stop", "max", "drop"), (name, ch)
        assert ch["schedule.reason"] and ch["schedule.after_runs"] >= 2
        if ch["schedule.decision"] == "drop":
            assert ch["schedule.ci_high"] < ch["schedule.leader_ci_low"]
        else:
            assert "schedule.ci_half_width" in ch
    # the automatic cooldown before every run (after its layout and checks) says how long and why
    for ch in checks:
        assert ch["cooldown.ended_by"] in ("dirty", "disks", "quiet", "max") and ch["cooldown.waited_s"] <= 10
        assert ch["cooldown.idle_from"] in ("fio-exit", "run-end", "fio-exit+run-end", "wait")
    # the disks' idle window starts where the previous run's own I/O ended, not with the wait (counters the
    # agent returned with that run): the very first run has no mark yet
    assert checks[0]["cooldown.idle_from"] == "wait"
    assert any(ch["cooldown.idle_from"] != "wait" for ch in checks[1:]), [ch["cooldown.idle_from"] for ch in checks]
    # fio's steady state: recorded per run, and a run that reached it ended before its 4 s runtime (fio's own
    # runtime: the process's wall time also counts fio's start-up, seconds on a loaded machine)
    for r, ch in zip(runs, checks):
        assert ch["steadystate.criterion"].startswith("iops:50")
        if ch["steadystate.attained"]:
            assert json.loads(r["metrics"])["fio.runtime_s"] < 4.0, r
    assert "stop:" in res.stderr or "max:" in res.stderr or "drop:" in res.stderr
    report = json.loads((tmp_path / "report" / "results.json").read_text())
    codes = {w["code"]: w for w in report["warnings"]}
    decided = {ch["schedule.decision"] for ch in last.values()}
    for kind in decided:
        assert f"schedule-{kind}" in codes, (kind, sorted(codes))
        assert "#" in codes[f"schedule-{kind}"]["message"], "the report names the tests and the evidence"
    again = tankbench("run", str(c), "--journal", str(j), cwd=tmp_path)
    assert again.returncode == 0 and len(runs_of(j)) == len(runs), "a resume after the end adds no run"
    plan = tankbench("plan", str(c), "--journal", str(j), cwd=tmp_path)
    assert "Runs left: 0 measured + 0 warm-up(s)" in plan.stdout and "learned from the journal" in plan.stdout
