"""The agent's drain: how it makes a run's writes durable before it measures how long that took."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

from tankbench import agent


def test_a_target_with_its_own_sync_command_is_drained_by_it_alone(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # ZFS names `zpool sync POOL`: sync(2) before it would commit every dataset's ZIL, writing the dirty data a second
    # way (seed 000's dataset: 70 MiB of log blocks for 66 MiB written). The real sync(2), spied on, never runs.
    calls: list[str] = []
    real = os.sync
    monkeypatch.setattr(os, "sync", lambda: (calls.append("sync"), real())[1])
    mark = tmp_path / "synced"
    seconds, _, _ = agent.drain(30.0, 1 << 40, [sys.executable, "-c", f"open({str(mark)!r}, 'w').close()"])
    assert mark.exists() and calls == [] and 0 <= seconds < 30
    # without one (a file on ext4, a raw device): sync(2)
    agent.drain(30.0, 1 << 40, None)
    assert calls == ["sync"]
    agent.drain(30.0, 1 << 40, ["sync"])
    assert calls == ["sync", "sync"]
