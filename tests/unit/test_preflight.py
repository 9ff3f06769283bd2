"""Preflight noise checks: facts from the agent, the pure decision, the waiting loop and the [preflight] table."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import replace
from typing import Any

import pytest

from tankbench import preflight as pf
from tankbench.errors import SpecError
from tankbench.hosts.base import Host
from tankbench.hosts.local import LocalHost
from tests.conftest import zfs_fixture

QUIET = pf.NoiseFacts(pool="tank", pool_state="ONLINE", devices=("vdb", "vdc"), window_s=1.0, load1=0.2, cpu_count=2)


def agent_result(status_file: str | None = "tbparse-zpool-status.txt", **over: Any) -> dict[str, Any]:
    res: dict[str, Any] = {
        "zpool_status": {"rc": 0, "stdout": zfs_fixture(status_file), "stderr": ""} if status_file else None,
        "window_s": 1.0,
        "disk": {"iops": 0.0, "bw_bytes": 0.0},
        "devices_seen": ["vdb", "vdc"],
        "swap_in_pages": 0,
        "swap_out_pages": 0,
        "load1": 0.3,
        "cpu_count": 2,
        "dirty_bytes": 4096,
    }
    res.update(over)
    return res


def test_facts_from_a_real_zpool_status_with_a_scrub_running() -> None:
    facts = pf.facts_from_agent(agent_result("tbparse-zpool-status-scrub.txt"), "tbparse")
    assert facts.scan == "scrub" and facts.pool_state == "ONLINE" and facts.devices == ("vdb", "vdc")
    done = pf.facts_from_agent(agent_result("tbparse-zpool-status-scrubbed.txt"), "tbparse")
    assert done.scan is None, "a finished scrub is not noise"


def test_a_failed_zpool_status_makes_the_scrub_check_unavailable_not_clean() -> None:
    res = agent_result(None, zpool_status={"rc": 1, "stdout": "", "stderr": "cannot open 'tank': no such pool"})
    facts = pf.facts_from_agent(res, "tank")
    assert facts.zpool_error.startswith("cannot open") and not pf.ScanCheck().available(facts)


def test_quiet_host_runs_without_warnings() -> None:
    assert pf.decide(QUIET, pf.PreflightPolicy(), 0.0) == pf.Decision("run", ())


def test_scrub_waits_then_runs_with_a_warning_once_max_wait_is_used_up() -> None:
    facts = replace(QUIET, scan="scrub")
    policy = pf.PreflightPolicy(max_wait_s=60, poll_s=10)
    first = pf.decide(facts, policy, 0.0)
    assert (
        first.action == "wait" and first.findings[0].check == "scrub" and "zpool scrub -p tank" in first.findings[0].fix
    )
    assert pf.decide(facts, policy, 50.0).action == "wait"
    assert pf.decide(facts, policy, 51.0).action == "run", "no poll fits in max_wait any more"


def test_refuse_wins_over_wait_and_off_switches_a_check_off() -> None:
    facts = replace(QUIET, scan="resilver", swap_out_pages=5)
    policy = pf.PreflightPolicy(scrub="wait", swap="refuse")
    d = pf.decide(facts, policy, 0.0)
    assert d.action == "refuse" and [f.check for f in d.findings] == ["scrub", "swap"]
    assert pf.decide(facts, replace(policy, scrub="off", swap="off"), 0.0) == pf.Decision("run", ())


@pytest.mark.parametrize(
    "over,noisy",
    [
        ({"disk_iops": 10.0}, False),
        ({"disk_iops": 10.5}, True),
        ({"disk_bw_bytes": 2.0 * (1 << 20)}, True),
        ({"load1": 2.0}, False),
        ({"load1": 2.01}, True),
        ({"swap_in_pages": 1}, True),
    ],
)
def test_thresholds(over: dict[str, Any], noisy: bool) -> None:
    facts = replace(QUIET, **over)
    found = pf.findings(facts, pf.PreflightPolicy())
    assert bool(found) is noisy and all(f.action == "warn" for f in found)


def test_checks_that_cannot_judge_stay_silent() -> None:
    """No pool (raw/file target): no scrub check; no devices (tmpfs): no disk I/O check."""
    facts = replace(QUIET, pool=None, scan=None, devices=(), disk_iops=500.0)
    assert pf.findings(facts, pf.PreflightPolicy()) == ()


class ScriptedHost(Host):
    """A host whose agent answers `noise` from a script (the loop's logic, without a real scrub)."""

    name = "scripted"

    def __init__(self, results: list[dict[str, Any]]) -> None:
        self.results: Iterator[dict[str, Any]] = iter(results)
        self.requests: list[dict[str, Any]] = []

    def command(self, argv: Any) -> list[str]:
        raise AssertionError("not used")

    def call_agent(self, request: dict[str, Any], on_event: Any = None, timeout: float | None = None) -> dict[str, Any]:
        self.requests.append(request)
        return next(self.results)


def test_before_run_waits_while_the_scrub_runs_then_runs_clean() -> None:
    host = ScriptedHost([agent_result("tbparse-zpool-status-scrub.txt")] * 2 + [agent_result()])
    now = [0.0]
    slept: list[float] = []

    def sleep(s: float) -> None:
        slept.append(s)
        now[0] += s

    notes: list[str] = []
    v = pf.before_run(
        host,
        "tbparse",
        ["vdb", "vdc"],
        pf.PreflightPolicy(poll_s=30),
        note=notes.append,
        sleep=sleep,
        clock=lambda: now[0],
    )
    assert v.action == "run" and v.waited_s == 60.0 and v.warnings == () and slept == [30, 30]
    assert host.requests[0] == {"op": "noise", "pool": "tbparse", "devices": ["vdb", "vdc"], "window_s": 1.0}
    assert len(notes) == 2 and "scrub is running on pool tbparse" in notes[0]
    checks = v.checks()
    assert checks["preflight.waited_s"] == 60.0 and checks["preflight.scan"] is None
    assert checks["preflight.noise"] == [] and checks["preflight.disk_iops"] == 0.0


def test_before_run_gives_up_waiting_and_records_a_warning() -> None:
    host = ScriptedHost([agent_result("tbparse-zpool-status-scrub.txt")] * 10)
    now = [0.0]
    v = pf.before_run(
        host,
        "tbparse",
        [],
        pf.PreflightPolicy(poll_s=20, max_wait_s=50),
        sleep=lambda s: now.__setitem__(0, now[0] + s),
        clock=lambda: now[0],
    )
    assert v.action == "run" and v.waited_s == 40.0 and len(host.requests) == 3
    assert "still after waiting" in v.warnings[0] and v.checks()["preflight.scan"] == "scrub"


def test_before_run_refusal_names_the_check_and_its_fix() -> None:
    host = ScriptedHost([agent_result("tbparse-zpool-status-scrub.txt")])
    v = pf.before_run(host, "tbparse", [], pf.PreflightPolicy(scrub="refuse"), sleep=lambda s: None)
    message, hint = v.refusal()
    assert v.action == "refuse" and 'preflight.scrub = "refuse"' in message and "zpool scrub -p tbparse" in hint


def test_before_run_on_the_real_local_host() -> None:
    """The real agent `noise` op: no pool, the disk under /, real /proc counters."""
    probe = LocalHost().call_agent({"op": "probe", "paths": ["/"]}, timeout=60)
    disks = probe["paths"]["/"]["devices"]
    v = pf.before_run(LocalHost(), None, disks, pf.PreflightPolicy(load="off", swap="off", disk_io="off", window_s=0.2))
    assert v.action == "run" and v.facts.devices == tuple(disks) and v.facts.cpu_count >= 1
    assert 0.15 < v.facts.window_s < 5 and "preflight.scan" not in v.checks()


def test_policy_from_table() -> None:
    p = pf.policy_from_table(
        {
            "scrub": "refuse",
            "load": "off",
            "max_wait": "5m",
            "disk_bw": "4M",
            "disk_iops": 50,
            "load_per_cpu": 0.5,
            "window": "500ms",
        },
        "c.toml",
    )
    assert (p.scrub, p.load, p.max_wait_s, p.disk_bw_bytes, p.disk_iops, p.window_s) == (
        "refuse",
        "off",
        300.0,
        4 << 20,
        50.0,
        0.5,
    )
    assert pf.policy_from_table({}) == pf.PreflightPolicy()


@pytest.mark.parametrize(
    "table,text",
    [
        ({"scrub": "pause"}, "c.toml: preflight.scrub = 'pause': not a preflight action"),
        ({"max_wait": "soon"}, "c.toml: preflight.max_wait = 'soon': not a duration"),
        ({"disk_iops": "many"}, "c.toml: preflight.disk_iops = 'many': not a number >= 0"),
        ({"window": 0}, "c.toml: preflight.window = 0: must be longer than 0 s"),
        ({"scrubs": "wait"}, "c.toml: preflight.scrubs = 'wait': unknown key"),
    ],
)
def test_bad_policy_names_file_key_and_value(table: dict[str, Any], text: str) -> None:
    with pytest.raises(SpecError) as e:
        pf.policy_from_table(table, "c.toml")
    assert str(e.value).startswith(text) and e.value.hint


def test_a_borrowed_window_is_asked_for_with_the_thresholds_that_make_the_agent_confirm_it() -> None:
    since = {"t": 1.0, "boot_id": "b", "disk": {}, "vm": {}, "from": "previous run"}
    host = ScriptedHost([agent_result(window_s=0.05, window_from="previous run")])
    v = pf.before_run(host, "tbparse", ["vdb"], pf.PreflightPolicy(swap="off"), sleep=lambda s: None, since=since)
    req = host.requests[0]
    assert req["op"] == "noise" and req["since"] == since and req["since_from"] == "previous run"
    assert req["confirm"] == {"disk_iops": 10.0, "disk_bw_bytes": float(1 << 20)}  # swap is off: not confirmed
    assert v.checks()["preflight.window_from"] == "previous run" and v.checks()["preflight.window_s"] == 0.05


def test_a_noise_check_that_cannot_hold_or_stop_the_run_rides_along_with_it() -> None:
    assert pf.deferrable(pf.PreflightPolicy(), None)  # no pool: no scrub check; the rest warns
    assert not pf.deferrable(pf.PreflightPolicy(), "tank")  # scrub = "wait" must be decided before the run
    assert pf.deferrable(pf.PreflightPolicy(scrub="warn"), "tank")
    assert not pf.deferrable(pf.PreflightPolicy(load="refuse"), None)
    v = pf.verdict_of(agent_result(None, load1=9.0), None, pf.PreflightPolicy())
    assert v.action == "run" and v.checks()["preflight.noise"] == ["load"] and "load1 is 9.00" in v.warnings[0]


def test_the_real_agent_starts_a_noise_window_at_earlier_counters_and_confirms_noise_seen_in_it() -> None:
    """The agent's counters (as a fio run or a cooldown returns them) start the next noise window: no wait."""
    host = LocalHost()
    disks = host.call_agent({"op": "probe", "paths": ["/"]}, timeout=60)["paths"]["/"]["devices"]
    since = host.call_agent({"op": "cooldown", "fixed_s": 0, "max_s": 0, "counters_devices": disks}, timeout=60)
    policy = pf.PreflightPolicy(load="off", swap="off", disk_io="off", window_s=30)
    v = pf.before_run(host, None, disks, policy, since=dict(since["counters"], **{"from": "cooldown"}))
    assert v.facts.window_from == "cooldown" and v.facts.devices == tuple(disks)
    # counters from another boot (or naming other disks) cannot start a window: the agent watches its own
    stale = dict(since["counters"], boot_id="another boot")
    res = host.call_agent({"op": "noise", "devices": disks, "window_s": 0.01, "since": stale}, timeout=60)
    assert res["window_from"] == "wait"
    # I/O in a borrowed window (it may be tankbench's own layout) is watched again before it counts
    busy = dict(since["counters"], disk={d: [0, 0, 0, 0] for d in disks})  # as if every I/O since boot was now
    req = {"op": "noise", "devices": disks, "window_s": 0.01, "since": busy, "confirm": {"disk_iops": 0}}
    assert host.call_agent(req, timeout=60)["window_from"] == "wait (confirming)"
