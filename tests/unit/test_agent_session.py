"""Issue 19, fixed cost: one agent process for a campaign's runs (Host.agent_session, agent op `session`), and
a run's layout check that reuses its content samples only while the file is provably unchanged. Real agent
processes on the local host."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tankbench import agent
from tankbench.errors import HostError
from tankbench.hosts.base import AgentSession, SessionSlot
from tankbench.hosts.local import LocalHost


def session_of(host: LocalHost) -> AgentSession:
    slot = host.__dict__["_agent_slot"]
    assert isinstance(slot, SessionSlot) and slot.session is not None
    return slot.session


def test_calls_in_a_session_share_one_agent_process_which_ends_on_leaving() -> None:
    host = LocalHost()
    with host.agent_session():
        host.call_agent({"op": "cooldown"})
        first = session_of(host).proc
        for _ in range(3):
            assert host.call_agent({"op": "cooldown"})["event"] == "result"
        assert session_of(host).proc is first and first.poll() is None
    assert first.wait(timeout=10) == 75  # stdin closed (EOF): the agent ended, as it does when tankbench goes
    assert "_agent_slot" not in host.__dict__


def test_an_error_ends_that_request_not_the_session() -> None:
    host = LocalHost()
    with host.agent_session():
        host.call_agent({"op": "cooldown"})
        proc = session_of(host).proc
        with pytest.raises(HostError, match="unknown op"):
            host.call_agent({"op": "no-such-op"})
        with pytest.raises(HostError, match="end_pids"):
            host.call_agent({"op": "end_pids", "pids": [["not a pid", "x"]]})
        assert host.call_agent({"op": "cooldown"})["event"] == "result"
        assert session_of(host).proc is proc


def test_a_session_that_died_or_timed_out_is_replaced_by_a_fresh_agent() -> None:
    host = LocalHost()
    with host.agent_session():
        host.call_agent({"op": "cooldown"})
        dead = session_of(host).proc
        dead.kill()
        dead.wait()
        assert host.call_agent({"op": "cooldown"})["event"] == "result"  # a one-shot agent answered
        assert host.call_agent({"op": "cooldown"})["event"] == "result"
        assert session_of(host).proc is not dead
        slow = session_of(host).proc
        with pytest.raises(HostError, match="without a result"):  # killed by its timeout mid-request
            host.call_agent({"op": "cooldown", "fixed_s": 5, "max_s": 5}, timeout=0.5)
        assert slow.wait(timeout=10) != 0
        host.drop_agent_session()
        assert host.call_agent({"op": "cooldown"})["event"] == "result"


def test_the_layout_samples_stand_only_while_the_file_is_unchanged(tmp_path: Path) -> None:
    path = tmp_path / "tankbench-0.fiodata"
    path.write_bytes(os.urandom(1 << 20))
    first, reused = agent._measure_reusing(str(path), reuse=True)
    assert not reused and abs(first["ratio"] - 1.0) < 0.1
    with open(path, "rb") as f:  # a run that only reads the file
        f.read()
    again, reused = agent._measure_reusing(str(path), reuse=True)
    assert reused and again == first
    with open(path, "r+b") as f:  # a run that writes it: same size, same blocks, compressible content now
        f.write(bytes(1 << 20))
    after, reused = agent._measure_reusing(str(path), reuse=True)
    assert not reused and after["ratio"] < 0.1 and after["zeros"] == 1.0
    assert not agent._measure_reusing(str(path))[1]  # without reuse (prepare_file) it always samples
