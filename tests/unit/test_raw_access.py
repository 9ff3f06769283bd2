"""A raw device this user cannot open is refused, never read as blank (QA F1): blkid exits 2 both for "no
signature" and for "Permission denied", so the agent must tell them apart, and the safety check must say so."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from typing import Any

import pytest

from tankbench import agent
from tankbench.errors import UserError
from tankbench.safety import check_raw_target

ID = "/dev/disk/by-id/ata-A"


def test_a_device_this_user_cannot_open_is_not_blank(loopdev: str) -> None:
    """Root without the capabilities that bypass file modes, on a mode-000 node: what a plain user sees."""
    mode = os.stat(loopdev).st_mode
    os.chmod(loopdev, 0)
    try:
        argv = [
            sys.executable,
            "-c",
            f"import json; from tankbench import agent; print(json.dumps(agent.block_info({loopdev!r})))",
        ]
        if os.geteuid() == 0:
            argv = ["setpriv", "--bounding-set=-dac_override,-dac_read_search", *argv]
        res = subprocess.run(
            argv, capture_output=True, text=True, timeout=120, env=dict(os.environ, PATH="/usr/bin:/bin")
        )
    finally:
        os.chmod(loopdev, mode & 0o7777)
    assert res.returncode == 0, res.stderr
    info = json.loads(res.stdout)
    assert info["is_block"] and info["writable"] is False and info["signatures"] == []
    assert "permission denied" in info["blkid_error"].lower()


def _blkid_says(monkeypatch: pytest.MonkeyPatch, rc: int, stdout: str, stderr: str) -> list[dict[str, Any]]:
    calls: list[dict[str, Any]] = []

    def run(argv: list[str], **kw: Any) -> subprocess.CompletedProcess[str]:
        calls.append({"argv": argv, **kw})
        return subprocess.CompletedProcess(argv, rc, stdout, stderr)

    monkeypatch.setattr(agent.subprocess, "run", run)
    monkeypatch.setattr(agent, "_may", lambda path, mode: True)
    return calls


def test_blkid_permission_denied_is_an_error_not_no_signature(monkeypatch: pytest.MonkeyPatch) -> None:
    _blkid_says(monkeypatch, 2, "", "blkid: error: /dev/loop0: Permission denied\n")
    sigs: list[str] = []
    assert agent._blkid("/dev/loop0", "/dev/loop0", sigs) == "blkid: error: /dev/loop0: Permission denied"
    assert sigs == []


def test_blkid_exit_2_without_a_word_is_a_blank_device(monkeypatch: pytest.MonkeyPatch) -> None:
    calls = _blkid_says(monkeypatch, 2, "", "")
    sigs: list[str] = []
    assert agent._blkid("/dev/loop0", "/dev/loop0", sigs) == "" and sigs == []
    path = calls[0]["env"]["PATH"].split(os.pathsep)  # a user's PATH without sbin still finds blkid
    assert "/usr/sbin" in path and "/sbin" in path


def test_blkid_finds_a_signature(monkeypatch: pytest.MonkeyPatch) -> None:
    _blkid_says(monkeypatch, 0, "DEVNAME=/dev/loop0p1\nTYPE=ext4\n", "")
    sigs: list[str] = []
    assert agent._blkid("/dev/loop0p1", "/dev/loop0", sigs) == "" and sigs == ["/dev/loop0p1:TYPE=ext4"]


def test_the_safety_check_refuses_a_device_it_may_not_write() -> None:
    info = {"exists": True, "is_block": True, "writable": False, "signatures": [], "blkid_error": "permission denied"}
    with pytest.raises(UserError) as e:
        check_raw_target("disk", ID, ID, info, "camp.toml")
    assert e.value.message.startswith(f"camp.toml: target 'disk' path = '{ID}': cannot open it")
    assert "permission denied" in e.value.message and "run as root" in e.value.hint
    check_raw_target("disk", ID, ID, {"exists": True, "is_block": True, "signatures": []}, "c.toml")  # older agent
    with pytest.raises(UserError, match="could not read its signatures"):
        check_raw_target("disk", ID, ID, {**info, "writable": True}, "camp.toml")


def test_a_readable_blank_loop_device_is_blank(loopdev: str) -> None:
    info = agent.block_info(loopdev)
    assert info["writable"] is True and info["signatures"] == [] and "blkid_error" not in info, info
