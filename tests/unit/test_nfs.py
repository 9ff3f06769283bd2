"""The network-share kind (`kind = "nfs"`): its keys, its test ids, the export it writes (never to the world),
the network counters and the judgement of what limited a run (pure parts; the lab test runs it for real)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tankbench.campaign import expand
from tankbench.campaign.parse import parse_spec
from tankbench.drivers.clients import refuse_server_as_client
from tankbench.errors import HostError, UserError
from tankbench.fio.jobs import run_job_text
from tankbench.hosts.lab import LabHost
from tankbench.model import ClientHost
from tankbench.targets import netcount, traits_of
from tankbench.targets.nfs import export_line, mount_argv, nfs_options

CAMPAIGN = """
[campaign]
name = "n"
runtime = "1s"
host = "local"

[pool]
parent = "tank/bench"

[[target]]
name = "share"
kind = "nfs"
size = "8M"
clients = ["root@10.0.0.2", "root@10.0.0.3"]
{extra}

[matrix]
rw = ["write"]
bs = ["1M"]
compression = ["off", "lz4"]
"""


def spec(extra: str = ""):
    return parse_spec(CAMPAIGN.format(extra=extra), "n.toml")


def test_defaults_and_keys():
    t = spec().targets[0]
    assert t.path == "/mnt/tankbench-nfs-share"
    assert dict(nfs_options(t).share) == {"nfs_version": "4.2", "export": "sync", "mount_options": ""}
    t = spec('nfs_version = 3\nexport = "async"\nmount_options = "rsize=65536, wsize=65536"\nserver_address = "nfs1"')
    assert dict(nfs_options(t.targets[0]).share) == {
        "nfs_version": "3",
        "export": "async",
        "mount_options": "rsize=65536,wsize=65536",
        "server_address": "nfs1",
    }
    assert traits_of("nfs").needs_pool and traits_of("nfs").test_file


def test_share_settings_are_part_of_the_test_id_and_zfs_properties_are_axes():
    a = expand(spec())
    b = expand(spec('export = "async"'))
    assert len(a) == 2 and {t.params["compression"] for t in a} == {"off", "lz4"}
    assert {t.id for t in a}.isdisjoint({t.id for t in b})
    assert a[0].name.startswith("zfs-nfs-write-1M")


def test_the_job_opens_the_clients_mount():
    test = expand(spec())[0]
    assert "filename=/mnt/tankbench-nfs-share/tankbench-share.fiodata" in run_job_text(test)


@pytest.mark.parametrize("addresses", [["*"], [], ["10.0.0.2", ""], ["10.0.0.0/8 *"]])
def test_an_export_is_never_open_to_the_world(addresses: list[str]):
    with pytest.raises(HostError, match="only named client addresses"):
        export_line("/tankbench/tb-1/share-2", addresses, "sync", False)


def test_export_line_and_mount():
    line = export_line("/tankbench/tb-1/share-2", ["10.0.0.2", "10.0.0.3"], "async", True)
    assert line == (
        '"/tankbench/tb-1/share-2" 10.0.0.2(rw,async,no_subtree_check,no_root_squash,insecure) '
        "10.0.0.3(rw,async,no_subtree_check,no_root_squash,insecure)\n"
    )
    assert mount_argv("10.0.2.2:/d/c0", "/mnt/x", "4.2", 40000, "rsize=65536") == [
        "mount",
        "-t",
        "nfs",
        "-o",
        "vers=4.2,port=40000,rsize=65536",
        "10.0.2.2:/d/c0",
        "/mnt/x",
    ]


def test_a_client_that_is_the_lab_server_itself_is_refused(tmp_path: Path):
    lab = LabHost("srv", ssh_port=40022, lab_dir=tmp_path, accelerator="tcg", facts={})
    with pytest.raises(UserError, match="is the campaign's host"):
        refuse_server_as_client(lambda j: f"target[0].clients[{j}]", lab, (ClientHost("127.0.0.1", port=40022),))
    refuse_server_as_client(lambda j: "x", lab, (ClientHost("127.0.0.1", port=40023),))  # another lab


NET_BEFORE = """Inter-|   Receive                                                |  Transmit
 face |bytes    packets errs drop fifo frame compressed multicast|bytes    packets errs drop fifo colls carrier compressed
    lo:    1000      10    0    0    0     0          0         0     1000      10    0    0    0     0       0          0
  eth0:  100000     100    0    0    0     0          0         0     5000      50    0    0    0     0       0          0
  eth1:      10       1    0    0    0     0          0         0       10       1    0    0    0     0       0          0
"""
NET_AFTER = NET_BEFORE.replace("100000     100", "125100000   90100").replace(" 5000      50", " 9000      70")


def test_net_dev_delta_leaves_loopback_out():
    d = netcount.delta(NET_BEFORE, NET_AFTER)
    assert d["eth0"] == {"rx_bytes": 125_000_000, "rx_packets": 90_000, "tx_bytes": 4000, "tx_packets": 20}
    assert d["eth1"] == {"rx_bytes": 0, "rx_packets": 0, "tx_bytes": 0, "tx_packets": 0}
    assert "lo" not in d and netcount.busiest(d) == ("eth0", 125_004_000)


def test_the_limit_judged():
    d = netcount.delta(NET_BEFORE, NET_AFTER)  # 125 MB in 1 s: a whole 1 Gb/s link
    net = netcount.judge(seconds=1.0, server=d, speed_mbps=1000, client_mibs=119.0, cpu_pct=30.0)
    assert net["net.limit"] == "network" and net["net.link_busy_pct"] == 100.0
    slow = netcount.judge(seconds=10.0, server=d, speed_mbps=1000, client_mibs=11.9, cpu_pct=30.0)
    assert slow["net.limit"] == "disks" and "10 % of 1000 Mb/s" in slow["net.why"]
    cpu = netcount.judge(seconds=10.0, server=d, speed_mbps=1000, client_mibs=11.9, cpu_pct=95.0)
    assert cpu["net.limit"] == "cpu"
    virtual = netcount.judge(seconds=10.0, server=d, speed_mbps=netcount.link_speed("-1"), client_mibs=1, cpu_pct=None)
    assert virtual["net.limit"] == "unknown" and "link's speed is unknown" in virtual["net.why"]
    assert netcount.link_speed("1000\n") == 1000 and netcount.link_speed("") == 0


def test_the_link_is_judged_over_fios_io_not_the_runs_wall_time():
    """bench/limiter's network class: 8 s of 1M NFS reads on a 24 Mb/s link; fio's start-up and exit made the run's
    wall time longer and moved nothing, so the bytes over the wall time said 83 % of the link: judged over fio's ramp
    and runtime. The wall time when fio printed no runtime, or a runtime longer than the wall."""
    from tankbench.drivers.nfs import io_window_s, network_checks

    res = {"wall_s": 9.7, "files_before": {"/proc/net/dev": NET_BEFORE}, "files_after": {"/proc/net/dev": NET_AFTER}}
    assert io_window_s(res, {"fio.runtime_s": 8.0}, 0.0) == 8.0
    assert io_window_s(res, {"fio.runtime_s": 8.0}, 1.0) == 9.0  # the ramp's bytes are in the counters too
    assert io_window_s(res, {}, 0.0) == 9.7 and io_window_s(res, {"fio.runtime_s": 12.0}, 0.0) == 9.7
    res["files_after"]["/sys/class/net/eth0/speed"] = "140"  # 125 MB in 9.7 s of wall time: 74 % of 140 Mb/s
    checks = network_checks(res, {"fio.runtime_s": 8.0}, 0.0)
    assert checks["net.limit"] == "network" and checks["net.window_s"] == 8.0, checks
    assert checks["net.why"] == "eth0 moved 14.9 MiB/s one way over 8.0 s of I/O: 89 % of its 140 Mb/s link"
    assert network_checks(res, {}, 0.0)["net.limit"] == "disks"


def test_clients_md_shows_what_limited_a_share_run():
    from tankbench.journal.clientruns import ClientRun
    from tests.reportdata import clients_markdown

    d = netcount.delta(NET_BEFORE, NET_AFTER)
    net = netcount.judge(seconds=1.0, server=d, speed_mbps=1000, client_mibs=119.0, cpu_pct=30.0)
    per = {"ssh:root@a": {"write_bw_bytes": 60 << 20}, "ssh:root@b": {"write_bw_bytes": 59 << 20}}
    text = clients_markdown([ClientRun(1, "zfs-nfs-write-1M", 1, "nfs1", per, {}, net)])
    assert "| run | server interface | received MiB/s | sent MiB/s | link | limit | why |" in text
    assert "| 1 | eth0 | 119 | 0.00400 | 1000 Mb/s | network | eth0 moved 119.2 MiB/s" in text
    plain = clients_markdown([ClientRun(1, "file-load", 1, "h", per, {})])
    assert "limit" not in plain
