"""Pure parts of campaigns over several hosts: the hosts key, alike fingerprints, the case queue, the hosts table (schema 4)."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from tankbench import model
from tankbench.campaign.hosts import FleetHost, parse_fleet
from tankbench.errors import SpecError, UserError
from tankbench.fleet import CaseQueue, check_alike, differences
from tankbench.hosts.hostkeys import ScannedKey, accept_command, classify, known_hosts_name
from tankbench.journal.db import Journal
from tankbench.journal.hostview import HostJournal, fleet_mode, journal_hosts
from tankbench.journal.migrations import SCHEMA_VERSION
from tests.conftest import FIXTURES


def test_host_entries_strings_and_tables():
    f = parse_fleet(
        "c.toml",
        {
            "hosts": ["local", "lab", "lab:b2", "10.0.0.2", "bench@h.example:2222", {"address": "::1", "port": 22}],
            "hosts_mode": "each",
        },
        False,
    )
    assert f is not None and f.mode == "each"
    assert [h.name for h in f.hosts] == [
        "local",
        "lab",
        "lab:b2",
        "ssh:root@10.0.0.2",
        "ssh:bench@h.example:2222",
        "ssh:root@::1",
    ]
    assert f.hosts[4] == FleetHost("ssh", address="h.example", user="bench", port=2222)


def test_no_hosts_is_one_host():
    assert parse_fleet("c.toml", {"name": "x"}, True) is None


@pytest.mark.parametrize(
    "camp,single,key",
    [
        ({"hosts": []}, False, "campaign.hosts"),
        ({"hosts": ["local"], "hosts_mode": "both"}, False, "campaign.hosts_mode"),
        ({"hosts_mode": "split"}, False, "campaign.hosts_mode"),
        ({"hosts": ["local"], "hosts_mode": "split"}, True, "campaign.hosts"),
        ({"hosts": ["lab:bad name"], "hosts_mode": "split"}, False, "campaign.hosts[0]"),
        ({"hosts": [{"kind": "ssh"}], "hosts_mode": "split"}, False, "campaign.hosts[0].address"),
        ({"hosts": [3], "hosts_mode": "split"}, False, "campaign.hosts[0]"),
        ({"hosts": ["local", "local"], "hosts_mode": "split"}, False, "campaign.hosts[1]"),
    ],
)
def test_bad_hosts(camp, single, key):
    with pytest.raises(SpecError) as e:
        parse_fleet("c.toml", camp, single)
    assert e.value.key == key and e.value.hint


FP = {
    "kernel": "6.1.0",
    "zfs_version": "2.2.2",
    "cpu_model": "EPYC",
    "cpu_count": 8,
    "mem_bytes": 64 << 30,
    "device_models": ["WD"],
    "fio_version": "fio-3.33",
    "accelerator": "",
    "hostname": "a",
}


def test_alike_hosts_may_differ_in_name_and_a_little_memory():
    other = dict(FP, hostname="b", mem_bytes=int(63.5 * 2**30))
    assert differences(FP, other) == []
    check_alike(["a", "b"], [FP, other])


def test_unlike_hosts_are_refused_with_every_difference_and_why():
    other = dict(FP, kernel="6.12.0", mem_bytes=32 << 30, device_models=["Samsung"])
    d = differences(FP, other)
    assert [x.split(":")[0] for x in d] == ["kernel", "device_models", "mem_bytes"]
    assert "the disks are what is measured" in d[1]
    with pytest.raises(UserError) as e:
        check_alike(["a", "b"], [FP, other])
    assert "b vs a: kernel" in e.value.message and 'hosts_mode = "each"' in e.value.hint


def test_the_refusal_names_each_hosts_version_under_its_own_name():
    """Issue 34: "b vs a: fio_version: 'fio-3.33' vs 'fio-3.36'" gave a's version first, under b's name."""
    other = dict(FP, fio_version="fio-3.36", hostname="b")
    with pytest.raises(UserError) as e:
        check_alike(["ssh:root@a", "ssh:root@b"], [FP, other])
    assert "ssh:root@b vs ssh:root@a: fio_version: 'fio-3.36' vs 'fio-3.33'" in e.value.message, e.value.message
    assert "64.0 GiB vs 32.0 GiB" not in e.value.message
    bigger = dict(FP, mem_bytes=128 << 30)
    with pytest.raises(UserError) as e:
        check_alike(["a", "b"], [FP, bigger])
    assert "b vs a: mem_bytes: 128.0 GiB vs 64.0 GiB" in e.value.message, e.value.message


def _tests(n: int) -> list[list[model.Test]]:
    t = model.Target(name="s", kind="file", path="/tmp/x", size=1 << 20)
    return [
        [model.Test(i + 1, f"t{i}", t, {"rw": "read", "bs": f"{4 << i}k"}, {}, runtime=1.0, ramp=0.0)] for i in range(n)
    ]


def test_queue_keeps_a_case_with_runs_on_its_host_and_moves_unstarted_ones():
    q = CaseQueue(_tests(3), {2: "b"})
    assert q.take("a")[0] == 0
    assert q.take("b")[0] == 2  # b's own case first
    assert q.take("b")[0] == 1
    q.give_back(1, "b", started=False)  # b failed before any run of case 1 finished: it moves
    q.done(0)
    assert q.take("a")[0] == 1
    q.give_back(1, "a", started=True)  # a failed after a run finished: the case waits for a
    q.done(2)
    assert q.take("b") is None
    assert [(h, len(g)) for h, g in q.waiting()] == [("a", 1)]


def test_old_journal_reads_and_migrates(tmp_path: Path):
    src = FIXTURES / "journal-local-file.sqlite"
    with Journal.open_readonly(str(src)) as j:
        hosts = journal_hosts(j)
        assert hosts == ["local"] and fleet_mode(j) == ""
    copy = tmp_path / "j.sqlite"
    shutil.copy(src, copy)
    with Journal(str(copy)) as j:
        assert j.conn.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION
        j.set_hosts("each", [("local", "local", ""), ("ssh:root@h", "ssh", "h")])
        assert journal_hosts(j) == ["local", "ssh:root@h"] and fleet_mode(j) == "each"
    with HostJournal.for_host(str(copy), "ssh:root@h", readonly=True) as hj:
        assert hj.runs() == [] and hj.fingerprints() == {}
    with HostJournal.for_host(str(copy), "local", readonly=True) as hj:
        assert hj.runs() and all(r.host == "local" for r in hj.runs())


def test_host_key_messages():
    assert classify("Host key verification failed.\r\n") == "unknown"
    assert classify("@ WARNING: REMOTE HOST IDENTIFICATION HAS CHANGED! @\nHost key verification failed.") == "changed"
    assert classify("ssh: connect to host x port 22: Connection refused") == "unreachable"
    assert classify("root@x: Permission denied (publickey).") == "auth"
    assert known_hosts_name("h", 22) == "h" and known_hosts_name("h", 2222) == "[h]:2222"
    key = ScannedKey("[h]:2222 ssh-ed25519 AAAAC3", "ssh-ed25519", "SHA256:x")
    assert accept_command(key, "/tmp/kh") == "printf '%s\\n' '[h]:2222 ssh-ed25519 AAAAC3' >> /tmp/kh"


def test_mismatched_fio_versions_are_named():
    from tankbench.fio.clientserver import check_versions

    check_versions("fio-3.33", {"a": "fio-3.33", "b": "fio-3.33"})
    with pytest.raises(UserError) as e:
        check_versions("fio-3.33", {"a": "fio-3.33", "b": "fio-3.36", "c": ""})
    assert "b: fio-3.36" in e.value.message and "c: no fio" in e.value.message and "a:" not in e.value.message
