"""`clean`'s wait for a zvol's holders (drivers/release.py): udev probing a zvol after fio's last close (seen in
the lab: systemd-udevd in D state with fd 11 on /dev/zd0 while the pool drained) is waited out, not reported as
someone else's; anything else still is. The host is a FAKE (a scripted agent): the real case runs in
tests/lab/test_zfs_campaign.py."""

from __future__ import annotations

from typing import Any

import pytest

from tankbench.drivers import release
from tankbench.errors import UserError

UDEV = {
    "pid": 238,
    "comm": "systemd-udevd",
    "state": "D",
    "cmdline": "/usr/lib/systemd/systemd-udevd --daemon",
    "uses": ["fd 11: /dev/zd0"],
    "ours": False,
}
WORKER = dict(UDEV, comm="(udev-worker)", cmdline="(udev-worker)")
VM = {
    "pid": 900,
    "comm": "qemu-system-x86",
    "state": "S",
    "cmdline": "qemu-system-x86_64 -drive file=/dev/zd0",
    "uses": ["fd 20: /dev/zd0"],
    "ours": False,
}


class FakeHost:
    """A FAKE host: `holders` answers from a script, one answer per call; commands are recorded."""

    name = "fake"

    def __init__(self, answers: list[list[dict[str, Any]]]) -> None:
        self.answers = answers
        self.commands: list[list[str]] = []
        self.ended: list[list[tuple[int, str]]] = []

    def call_agent(self, req: dict[str, Any], timeout: float = 0) -> dict[str, Any]:
        if req["op"] == "end_pids":
            self.ended.append(req["pids"])
            return {"event": "result", "ended": [p for p, _ in req["pids"]]}
        assert req["op"] == "holders"
        return {"holders": self.answers.pop(0) if len(self.answers) > 1 else self.answers[0], "kernel": []}

    def run(self, argv: list[str], timeout: float = 0) -> None:
        self.commands.append(list(argv))


def test_udev_is_recognised_by_its_name_or_command() -> None:
    assert release.is_udev(UDEV) and release.is_udev(WORKER)
    assert release.is_udev(dict(UDEV, comm="udevd", cmdline="/sbin/udevd --daemon"))
    assert not release.is_udev(VM) and not release.is_udev(dict(VM, cmdline="/usr/bin/udevadm-wrapper"))


def test_udev_probing_the_zvol_is_waited_out_with_a_settle(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(release.time, "sleep", lambda s: None)
    host = FakeHost([[UDEV], [WORKER], []])
    notes: list[str] = []
    release.release(host, "tank/tb/vol", True, "/work/tb", notes.append)
    assert host.commands == [["udevadm", "settle", "-t", "30"]] * 2
    assert len(notes) == 1 and "udev is probing it (pid 238 (systemd-udevd" in notes[0], notes


def test_anything_else_beside_udev_is_named_and_left(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(release.time, "sleep", lambda s: None)
    host = FakeHost([[UDEV, VM]])
    with pytest.raises(UserError) as e:
        release.release(host, "tank/tb/vol", True, "/work/tb", lambda s: None)
    assert "pid 900 (qemu-system-x86" in str(e.value) and "systemd-udevd" not in str(e.value)
    assert host.commands == []


def test_udev_that_never_lets_go_ends_at_the_deadline(monkeypatch: pytest.MonkeyPatch) -> None:
    clock = iter(range(0, 10_000, 100))
    monkeypatch.setattr(release.time, "monotonic", lambda: float(next(clock)))
    monkeypatch.setattr(release.time, "sleep", lambda s: None)
    with pytest.raises(UserError) as e:
        release.release(FakeHost([[UDEV]]), "tank/tb/vol", True, "/w", lambda s: None)
    assert "still held after 600 s: pid 238 (systemd-udevd" in str(e.value)


OURS = {
    "pid": 777,
    "comm": "fio",
    "state": "D",
    "cmdline": "fio /work/tb/3f2a/vol/job.fio --output-format=json",
    "uses": ["fd 5: /dev/zd0"],
    "ours": True,
}


def test_our_interrupted_fio_is_ended_by_pid_and_waited_for(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(release.time, "sleep", lambda s: None)
    host = FakeHost([[OURS], [OURS], [OURS, UDEV], []])  # flushing, then udev probes the closed zvol, then free
    notes: list[str] = []
    release.release(host, "tank/tb/vol", True, "/work/tb", notes.append)
    assert host.ended == [[(777, "/work/tb")]], "ended once, by pid, with the marker the agent checks again"
    assert "still held by tankbench's own fio from an interrupted run (pid 777 (fio, state D" in notes[0], notes
    assert "udev is probing it" in notes[1] and len(notes) == 2, notes
    assert host.commands == [], "no settle while our fio still held it"
