"""The lab's network link model (issue 32): `[host] link_mbps` shapes the lab's NIC with tc and a network share's
run is judged against the shaped rate (a virtio NIC states no speed of its own)."""

from __future__ import annotations

import pytest

from tankbench.diskmodels import LabMachine, fingerprint, link_script, parse_host_keys
from tankbench.targets import netcount


def err(key: str, value: object, problem: str, hint: str) -> Exception:
    return ValueError(f"{key}: {value!r}: {problem}; {hint}")


def test_link_mbps_is_parsed_and_recorded() -> None:
    assert parse_host_keys({"link_mbps": 40}, err) == LabMachine(link_mbps=40)
    assert parse_host_keys({}, err).link_mbps == 0
    for bad in ("40M", -1, 10.5, True, 100_000):
        with pytest.raises(ValueError, match="link_mbps"):
            parse_host_keys({"link_mbps": bad}, err)
    assert fingerprint({}, 0, 1, 40)["lab_link_mbps"] == 40 and "lab_link_mbps" not in fingerprint({}, 0, 1)


def test_the_link_script_shapes_egress_or_removes_it() -> None:
    assert link_script("eth0", 40).startswith("tc qdisc replace dev eth0 root tbf rate 40mbit burst 50kb latency")
    assert link_script("eth0", 0).startswith("tc qdisc del dev eth0 root")


def test_a_shaped_interface_is_limited_to_its_rate() -> None:
    text = (
        "qdisc tbf 8001: dev eth0 root refcnt 2 rate 40Mbit burst 50Kb lat 200ms \n"
        "qdisc noqueue 0: dev lo root refcnt 2 \n"
        "qdisc tbf 8002: dev eth1 root refcnt 2 rate 1Gbit burst 125Kb lat 200ms \n"
    )
    assert netcount.shaped_rate(text, "eth0") == 40
    assert netcount.shaped_rate(text, "eth1") == 1000
    assert netcount.shaped_rate(text, "lo") == 0 and netcount.shaped_rate("", "eth0") == 0
    # at 40 Mb/s, 4.8 MiB/s one way is 100 % of the link: the network is the limit
    mib = 1 << 20
    judged = netcount.judge(
        seconds=10, server={"eth0": {"tx_bytes": 48 * mib, "rx_bytes": mib}}, speed_mbps=40, client_mibs=4.7, cpu_pct=30
    )
    assert judged["net.limit"] == "network" and judged["net.link_busy_pct"] > 95
