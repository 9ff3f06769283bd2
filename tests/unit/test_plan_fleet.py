"""`plan` of a campaign over several hosts (issue 34 item 6): each host is estimated from its own priors (a lab from
the emulated lab's, an ssh host from a real host's) and its own runs, not the whole campaign as if the lab ran it."""

from __future__ import annotations

from pathlib import Path

import pytest

from tankbench.campaign import expand, parse_spec
from tankbench.cli.plan import estimate_with, fleet_estimate, fleet_lines
from tankbench.model import Run

CAMPAIGN = """
[campaign]
name = "rack"
runtime = "4s"
ramp = "0s"
warmup = false
repeats = 1
hosts = [{hosts}]
hosts_mode = "{mode}"

[[target]]
name = "scratch"
kind = "file"
path = "/srv/bench"
size = "64M"

[matrix]
rw = ["read", "write", "randread", "randwrite"]
bs = ["4k", "64k", "1M"]
iodepth = [1]
"""


def spec_of(tmp_path: Path, hosts: str, mode: str):  # type: ignore[no-untyped-def]
    path = tmp_path / "c.toml"
    path.write_text(CAMPAIGN.format(hosts=hosts, mode=mode))
    return parse_spec(path.read_text(), str(path))


def test_split_over_three_real_hosts_is_a_third_of_one_and_far_below_the_lab(tmp_path: Path) -> None:
    spec = spec_of(tmp_path, '"root@10.0.0.2", "root@10.0.0.3", "root@10.0.0.4"', "split")
    tests = expand(spec)
    total, per, sched = fleet_estimate(spec, tests, [])
    one_real = estimate_with(spec, tests, [], False)[0]
    one_lab = estimate_with(spec, tests, [], True)[0]
    assert sorted(per) == ["ssh:root@10.0.0.2", "ssh:root@10.0.0.3", "ssh:root@10.0.0.4"]
    assert len(sched.states) == len(tests) == 12
    # 12 test cases of equal shape over 3 hosts: 4 each (each case counts its own layout: a little above a third)
    assert one_real.likely / 3 <= total.likely <= one_real.likely / 2, (total, one_real)
    assert all(e.likely == pytest.approx(total.likely, rel=0.05) for e in per.values())
    assert total.likely < one_lab.likely / 4, (total, one_lab)  # the old figure: as if the lab ran them all
    assert "ssh:root@10.0.0.3: " in fleet_lines(spec, per) and "a real host's priors" in fleet_lines(spec, per)


def test_each_takes_its_slowest_host_and_learns_per_host(tmp_path: Path) -> None:
    spec = spec_of(tmp_path, '"root@10.0.0.2", "lab"', "each")
    tests = expand(spec)
    total, per, _ = fleet_estimate(spec, tests, [])
    assert per["lab"].likely > per["ssh:root@10.0.0.2"].likely  # the emulated lab's priors are slower
    assert total.likely == per["lab"].likely
    # the ssh host finished every test: nothing left there, the lab's share unchanged
    done = [
        Run(
            test_id=t.id,
            run_no=1,
            warmup=False,
            attempt=1,
            status="done",
            started=1000.0 + 10 * i,
            ended=1008.0 + 10 * i,
            host="ssh:root@10.0.0.2",
            fingerprint_id="fp",
            expected_s=t.expected_s,
            wall_s=5.0,
            metrics={"total.iops": 100.0, "total.bw_bytes": 1e6},
        )
        for i, t in enumerate(tests)
    ]
    total2, per2, _ = fleet_estimate(spec, tests, done)
    assert per2["ssh:root@10.0.0.2"].likely == 0.0
    assert per2["lab"].likely == pytest.approx(per["lab"].likely, rel=0.01)
    assert total2.likely == per2["lab"].likely
