"""`clean` on a host without ZFS says so as `run` does (QA F7): before, it tried `zfs` and failed as a host error
(exit 3, "check that it is reachable and has fio")."""

from __future__ import annotations

from typing import Any

import pytest

from tankbench.cli import clean, main


class NoZfsHost:
    """A host whose agent probe finds no ZFS module; anything else it is asked is a failure of the test."""

    name = "local"

    def __init__(self) -> None:
        self.asked: list[dict[str, Any]] = []

    def call_agent(self, request: dict[str, Any], **kw: Any) -> dict[str, Any]:
        self.asked.append(request)
        return {"fingerprint": {"fio_version": "fio-3.33", "zfs_version": ""}}

    def run(self, *a: Any, **kw: Any) -> None:
        raise AssertionError(f"clean ran {a} on a host without ZFS")


def test_clean_on_a_host_without_zfs_is_refused_with_a_hint(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    host = NoZfsHost()
    monkeypatch.setattr(clean, "open_host", lambda spec, note: host)
    monkeypatch.setattr(clean, "leave_host", lambda h, keep, note: None)
    assert main(["clean", "zvol-issues", "--host", "local"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("Error: ") and "zvol-issues.toml: clean needs ZFS, and local has no ZFS module" in err, err
    assert "Hint: clean on the host the campaign ran on" in err
    assert host.asked and host.asked[0]["op"] == "probe"
