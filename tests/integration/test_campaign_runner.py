"""CampaignRunner called directly (not through `run`): real fio on a local file target, the journal it fills,
the fingerprint it records, and result_to_run on the agent's result of a real run."""

from __future__ import annotations

import hashlib
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

import tankbench
from tankbench import model
from tankbench.campaign import expand, load_spec
from tankbench.fio.jobs import job_text
from tankbench.hosts.local import LocalHost
from tankbench.journal import Journal
from tankbench.progress import Progress
from tankbench.runner import CampaignRunner, Outcome, preflight

CAMPAIGN = """
[campaign]
name = "runner-direct"
runtime = "1s"
ramp = "0s"
warmup = false
repeats = 1
host = "local"

[[target]]
name = "scratch"
kind = "file"
path = "{dir}"
size = "8M"

[matrix]
rw = ["randread", "write"]
bs = ["4k"]
iodepth = [1]
io = ["direct"]
"""


@dataclass
class Ran:
    runner: CampaignRunner
    outcome: Outcome
    tests: list[model.Test]
    journal: Journal


@pytest.fixture(scope="module")
def ran(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Ran]:
    tmp = tmp_path_factory.mktemp("runner")
    campaign = tmp / "c.toml"
    campaign.write_text(CAMPAIGN.format(dir=tmp / "scratch"))
    spec = load_spec(str(campaign))
    tests = expand(spec)
    host = LocalHost()
    journal = Journal(str(tmp / "j.sqlite"))
    try:
        journal.add_campaign(spec.campaign_id, spec.name, str(campaign), spec.text)
        journal.add_tests(spec.campaign_id, tests, {t.id: job_text(t) for t in tests})
        runner = CampaignRunner(spec, host, journal, Progress(0, quiet=True), preflight(host, spec), {"extra": "x"})
        outcome = runner.run(tests)
        yield Ran(runner, outcome, tests, journal)
    finally:
        journal.close()
        host.close()


def test_runner_runs_every_test_once_and_journals_each_run(ran: Ran) -> None:
    assert (ran.outcome.tests, ran.outcome.runs_done, ran.outcome.runs_failed, ran.outcome.exit_status) == (2, 2, 0, 0)
    runs = ran.journal.runs()
    assert sorted(r.test_id for r in runs) == sorted(t.id for t in ran.tests)
    by_id = {t.id: t for t in ran.tests}
    for r in runs:
        assert r.status == "done" and r.fingerprint_id == ran.runner.fingerprint.id, r.note
        direction = "read" if "read" in by_id[r.test_id].params["rw"] else "write"
        assert r.metrics[f"{direction}.iops"] > 0
        assert r.checks["layout.verified"] is True and r.checks["valid"] is True
        assert r.samples.get("t"), "the agent's 1 Hz samples are kept"


def test_every_run_records_the_tankbench_version_and_the_agent_it_ran(ran: Ran) -> None:
    """pyperf keeps its version in every run: a run says which tankbench and which agent source measured it."""
    shipped = (Path(tankbench.__file__).parent / "agent.py").read_bytes()
    fp = ran.journal.fingerprints()[ran.runner.fingerprint.id].data
    assert fp["tankbench_version"] == tankbench.__version__
    assert fp["agent_sha256"] == hashlib.sha256(shipped).hexdigest()
    assert fp["extra"] == "x" and fp["host"] == "local" and fp["fio_version"]


def test_result_to_run_combines_fio_the_agent_and_the_checks(ran: Ran) -> None:
    """Fed the agent's result of a real run (its fio JSON), result_to_run makes the validated Run: fio's numbers,
    the agent's drain and samples, prepare's checks (not the device list) and the preflight's load."""
    test = ran.tests[0]
    real = next(r for r in ran.journal.runs() if r.test_id == test.id)
    res = {
        "fio_json": real.fio_json,
        "exit_status": 0,
        "wall_s": 1.5,
        "drain_s": 0.25,
        "samples": {"t": [0.0, 1.0], "load1": [0.1, 0.2]},
        "checks": {"drain.verified": True},
        "stderr_tail": "",
    }
    run = ran.runner.result_to_run(test, 7, False, 2, 1000.0, res, {"devices": ["sda"], "layout.verified": True})
    assert (run.test_id, run.run_no, run.warmup, run.attempt, run.status) == (test.id, 7, False, 2, "done")
    assert (run.started, run.wall_s, run.drain_s, run.host) == (1000.0, 1.5, 0.25, "local")
    assert run.fingerprint_id == ran.runner.fingerprint.id and run.fio_json == real.fio_json
    assert run.metrics["read.iops"] == real.metrics["read.iops"] > 0
    assert run.samples["load1"] == [0.1, 0.2]
    assert run.checks["drain.verified"] is True and run.checks["layout.verified"] is True
    assert run.checks["preflight.load1"] == ran.runner.pre.load1 and "devices" not in run.checks
    assert run.checks["valid"] is True and run.note == ""

    failed = ran.runner.result_to_run(test, 8, False, 1, 1000.0, dict(res, exit_status=1), {})
    assert failed.status == "failed" and "fio exited 1" in failed.note
    ended = ran.runner.result_to_run(test, 9, False, 1, 1000.0, dict(res, timed_out=True), {})
    assert ended.status == "timeout" and "the watchdog ended the run" in ended.note
    broken = ran.runner.result_to_run(test, 10, False, 1, 1000.0, dict(res, fio_json="not json"), {})
    assert broken.status == "failed" and broken.note
