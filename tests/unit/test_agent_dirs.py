"""The agent's private directories and key files (secure_dir, op_dirs, op_key), and _settled_stat on a
test file cut short by a kill during layout."""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path
from typing import Any

import pytest

from tankbench import agent


def events(capsys: pytest.CaptureFixture[str]) -> list[dict[str, Any]]:
    return [json.loads(line) for line in capsys.readouterr().out.splitlines() if line.startswith("{")]


def mode(path: Path) -> int:
    return stat.S_IMODE(os.lstat(path).st_mode)


def test_secure_dir_creates_0700_and_tightens_our_own_0755(tmp_path: Path) -> None:
    new = tmp_path / "state/work"
    assert agent.secure_dir(str(new)) == str(new) and mode(new) == 0o700
    old = tmp_path / "state/keys"
    old.mkdir(mode=0o755)
    os.chmod(old, 0o755)
    agent.secure_dir(str(old))
    assert mode(old) == 0o700


def test_secure_dir_refuses_a_symlink(tmp_path: Path) -> None:
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir(mode=0o700)
    (tmp_path / "work").symlink_to(elsewhere)
    with pytest.raises(agent.UnsafePath, match="not a directory"):
        agent.secure_dir(str(tmp_path / "work"))


def test_secure_dir_refuses_a_directory_of_another_user(tmp_path: Path) -> None:
    planted = tmp_path / "work"
    planted.mkdir(mode=0o700)
    os.chown(planted, 65534, 65534)
    with pytest.raises(agent.UnsafePath, match="owned by uid 65534"):
        agent.secure_dir(str(planted))


def test_secure_dir_refuses_an_ancestor_others_can_write(tmp_path: Path) -> None:
    shared = tmp_path / "shared"
    shared.mkdir()
    os.chmod(shared, 0o777)  # world-writable, not sticky: anyone may rename our directory away
    with pytest.raises(agent.UnsafePath, match="writable by group or others"):
        agent.secure_dir(str(shared / "work"))
    os.chmod(shared, 0o1777)  # sticky like /tmp: only the owner of an entry may replace it
    assert mode(Path(agent.secure_dir(str(shared / "work")))) == 0o700


def test_op_dirs_reports_an_unsafe_directory_as_an_error_event(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "keys").symlink_to(tmp_path)
    agent.op_dirs({"root": str(tmp_path), "names": ["work", "keys"]})
    ev = events(capsys)[-1]
    assert ev["event"] == "error" and "unsafe directory" in ev["message"] and "keys" in ev["message"]


def test_state_root_is_the_users_home_from_the_password_database(monkeypatch: pytest.MonkeyPatch) -> None:
    """$HOME may be another user's under sudo; the directory follows the user the agent runs as."""
    import pwd

    monkeypatch.setenv("HOME", "/tmp/someone-else")
    assert agent.state_root() == os.path.join(pwd.getpwuid(os.geteuid()).pw_dir, ".cache", "tankbench")


def test_op_key_creates_0600_keeps_and_removes(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    d = str(tmp_path / "keys")
    agent.op_key({"dir": d, "name": "tank_bench.key"})
    first = events(capsys)[-1]
    key = Path(first["path"])
    assert first["created"] is True and mode(key) == 0o600 and len(key.read_bytes()) == 32
    assert mode(Path(d)) == 0o700
    content = key.read_bytes()
    agent.op_key({"dir": d, "name": "tank_bench.key"})
    assert events(capsys)[-1]["created"] is False and key.read_bytes() == content
    agent.op_key({"dir": d, "name": "tank_bench.key", "action": "remove"})
    assert events(capsys)[-1]["removed"] is True and not key.exists()
    with pytest.raises(ValueError, match="bad key file name"):
        agent.op_key({"dir": d, "name": "../escape.key"})


def test_op_key_refuses_a_planted_file(tmp_path: Path) -> None:
    d = tmp_path / "keys"
    d.mkdir(mode=0o700)
    (d / "tank.key").write_bytes(b"attacker-known key, 32 bytes...!"[:31])
    with pytest.raises(agent.UnsafePath, match="not a 32-byte key file"):
        agent.op_key({"dir": str(d), "name": "tank.key"})


def test_a_file_cut_short_is_measured_without_waiting(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A kill during layout leaves a short file; it is measured once (no flush, no polling) and laid out again
    (the 60 s of polling before are gone)."""
    short = tmp_path / "tankbench-x.fiodata"
    short.write_bytes(os.urandom(1 << 20))

    def no_waiting(*_a: object, **_k: object) -> None:
        raise AssertionError("polled or synced for a file of the wrong size")

    monkeypatch.setattr(agent.time, "sleep", no_waiting)
    monkeypatch.setattr(agent.subprocess, "run", no_waiting)
    m = agent._measure_file(str(short))
    assert m["apparent"] == 1 << 20 and not agent._file_ok(m, 4 << 20, "random")[0]


def test_settled_stat_waits_for_stable_blocks_never_for_allocation(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The right size but unallocated (sparse, or compressed on ZFS): after the flush, st_blocks is polled only
    until it stops changing (bounded), then the file is judged; it is never waited on to reach its size."""
    sparse = tmp_path / "sparse.fiodata"
    with open(sparse, "wb") as f:
        f.truncate(4 << 20)
    sleeps: list[float] = []
    monkeypatch.setattr(agent.time, "sleep", sleeps.append)
    st = agent._settled_stat(str(sparse), max_s=60.0)
    assert st.st_blocks * 512 < 4 << 20 and len(sleeps) == 1, "one look to see the blocks are stable, then judged"


def test_fio_run_refuses_a_workdir_another_user_prepared(tmp_path: Path) -> None:
    """Today's runner workdir is /var/tmp/tankbench/<campaign>/<test>: another user who creates it first could
    swap job.fio (fio runs exec_prerun= commands) before root starts fio. The agent refuses it."""
    planted = tmp_path / "tankbench/c1/t1"
    planted.mkdir(parents=True)
    for d in (planted, planted.parent, planted.parent.parent):
        os.chown(d, 65534, 65534)
    with pytest.raises(agent.UnsafePath, match="owned by uid 65534"):
        agent.op_fio_run({"workdir": str(planted), "job_text": "[j]\nexec_prerun=touch /tmp/x\n", "deadline_s": 10})
    assert not (planted / "job.fio").exists()
