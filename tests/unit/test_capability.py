"""What a disk can do (issue 32): the read-only probe's job, reading fio's answer, reusing an earlier
fingerprint's figures, and what a failed probe leaves. The host is a fake at the boundary (FakeHost answers the two
commands the probe runs); tests/lab/test_seeds.py checks the probe against the lab's disk models."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tankbench import capability
from tankbench.errors import HostError
from tankbench.hosts.base import Result

B = "/dev/disk/by-id/"
IDS = f"vdb {B}virtio-tbdata0\nvdb1 {B}virtio-tbdata0-part1\nvdc {B}virtio-tblog0\nsda {B}wwn-0x5000\nsda {B}ata-DISK_123\n"


class FakeHost:
    """A host that lists by-id names and answers fio with fixed figures per probe (reads only)."""

    name = "fake"

    def __init__(self, fio_rc: int = 0) -> None:
        self.jobs: list[str] = []
        self.fio_rc = fio_rc

    def run(self, argv: list[str], *, input: bytes | None = None, timeout: float | None = None) -> Result:
        if input is None:
            return Result(tuple(argv), 0, IDS, "")
        job = input.decode()
        assert "fio --readonly " in argv[-1]  # fio refuses any write the job would do
        self.jobs.append(job)
        if self.fio_rc:
            return Result(tuple(argv), self.fio_rc, "", "fio: failed to open /dev/vdb: Permission denied")
        names = [line[1:-1] for line in job.splitlines() if line.startswith("[") and line != "[global]"]
        deep = "iodepth=32" in job
        doc = {
            "jobs": [
                {
                    "jobname": n,
                    "read": {
                        "iops": 40.2 if n == "vdb" else (1001.0 if deep else 990.0),
                        "bw_bytes": 16 * 2**20 if n == "vdb" else 128 * 2**20,
                    },
                }
                for n in names
            ]
        }
        return Result(tuple(argv), 0, "fio-3.33\n" + json.dumps(doc), "")


def test_the_probe_only_reads_every_disk_at_once() -> None:
    job = capability.probe_job(["vdb", "vdc"], "randread", 4096, "psync", 1)
    assert "direct=1\n" in job and "rw=randread\n" in job
    assert "[vdb]\nfilename=/dev/vdb\n" in job and "[vdc]\nfilename=/dev/vdc\n" in job
    assert "write" not in job


def test_capabilities_by_stable_id() -> None:
    host = FakeHost()
    caps = {c["disk"]: c for c in capability.capabilities(host, ["vdb", "vdc"], {})}
    assert set(caps) == {f"{B}virtio-tbdata0", f"{B}virtio-tblog0"}
    assert caps[f"{B}virtio-tbdata0"]["read_iops_qd1"] == 40.2 and caps[f"{B}virtio-tbdata0"]["read_mibs_seq"] == 16.0
    assert caps[f"{B}virtio-tblog0"]["read_iops_deep"] == 1001.0 and caps[f"{B}virtio-tblog0"]["name"] == "vdc"
    assert len(host.jobs) == 3
    assert capability.disk_ids(host, ["sda", "loop3"]) == {"sda": f"{B}wwn-0x5000", "loop3": "loop3"}


def test_an_earlier_fingerprint_with_the_same_facts_is_reused(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    mine = {"disk": f"{B}virtio-tbdata0", "read_iops_qd1": 39.0}
    old = {"kernel": "6.12", "lab_disk_models": {"tbdata0": "hdd"}, "device_capability": [mine]}
    ssd = {"disk": f"{B}virtio-tbdata0", "read_iops_qd1": 250.0}
    other = {"kernel": "6.12", "lab_disk_models": {"tbdata0": "ssd"}, "device_capability": [ssd]}
    comparable = {"kernel": "6.12", "lab_disk_models": {"tbdata0": "hdd"}}
    known = capability.reuse([other, old], comparable, [f"{B}virtio-tbdata0", f"{B}virtio-tblog0"])
    assert known == {f"{B}virtio-tbdata0": mine}
    host = FakeHost()
    notes: list[str] = []
    caps = {c["disk"]: c for c in capability.for_campaign(host, ["vdb", "vdc"], [old], comparable, notes.append)}
    assert caps[f"{B}virtio-tbdata0"]["read_iops_qd1"] == 39.0  # not probed again
    assert caps[f"{B}virtio-tblog0"]["read_iops_qd1"] == 990.0
    assert notes == ["what each disk can do: a read-only fio probe of vdc (3 × 2 s)"]


def test_a_probe_fio_refuses_is_an_error_entry_and_a_host_failure_a_note(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    (cap,) = capability.capabilities(FakeHost(fio_rc=1), ["vdb"], {})
    assert cap["error"] == "the read-only probe failed: fio: failed to open /dev/vdb: Permission denied"

    class Down(FakeHost):
        def run(self, argv: list[str], **kw: Any) -> Result:
            raise HostError("fake: connection lost")

    notes: list[str] = []
    assert capability.for_campaign(Down(), ["vdb"], [], {}, notes.append) == []
    assert "capability probe failed" in notes[0]


def test_this_machine_remembers_a_hosts_capabilities_for_the_same_facts(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Measure once per disk and fingerprint, whatever journal the campaign writes (integration tests, CI)."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    facts = {"kernel": "6.12", "lab_disk_models": {"tbdata0": "hdd"}}
    first = FakeHost()
    caps = capability.for_campaign(first, ["vdb"], [], facts, lambda m: None)
    assert len(first.jobs) == 3 and (tmp_path / "tankbench" / "capability.json").exists()
    again = FakeHost()
    assert capability.for_campaign(again, ["vdb"], [], facts, lambda m: None) == caps and again.jobs == []
    other = FakeHost()  # another disk model: measured again
    capability.for_campaign(other, ["vdb"], [], {**facts, "lab_disk_models": {"tbdata0": "ssd"}}, lambda m: None)
    assert len(other.jobs) == 3


def test_a_disk_fio_could_not_open_is_an_error_never_zero_figures(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """QA F5: as a user, fio's job for the disk says "error": 13 with zero figures, and fio may leave a disk out;
    neither is what the disk can do, so neither is cached nor shown as figures."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))

    class Denied(FakeHost):
        def run(self, argv: list[str], *, input: bytes | None = None, timeout: float | None = None) -> Result:
            res = super().run(argv, input=input, timeout=timeout)
            if input is None:
                return res
            doc = json.loads(res.stdout[res.stdout.index("{") :])
            for j in doc["jobs"]:
                if j["jobname"] == "vdb":
                    j.update(error=13, read={"iops": 0.0, "bw_bytes": 0})
            doc["jobs"] = [j for j in doc["jobs"] if j["jobname"] != "sda"]  # fio left it out
            return Result(res.argv, 1, json.dumps(doc), "")

    facts = {"kernel": "6.12"}
    caps = {c["name"]: c for c in capability.for_campaign(Denied(), ["vdb", "vdc", "sda"], [], facts, print)}
    assert caps["vdb"]["error"] == "the read-only probe of /dev/vdb failed: fio reported error 13 (permission denied)"
    assert "read_iops_qd1" not in caps["vdb"] and "read_iops_qd1" not in caps["sda"]
    assert "no job for it" in caps["sda"]["error"] and caps["vdc"]["read_iops_qd1"] == 990.0
    cached = capability.cached(capability.cache_key(Denied(), facts))
    assert set(cached) == {f"{B}virtio-tblog0"}  # only the disk that was measured
