"""The agent reaches a host only through stdin, verified by its sha256: nothing planted on the host runs.

Issue 9 item 1: tankbench used to execute /var/tmp/tankbench-agent-<digest>.py, usually as root, without
checking its owner or content, and kept job files and keys under the world-writable /var/tmp/tankbench/.
"""

from __future__ import annotations

import json
import os
import stat
import subprocess
import time
from pathlib import Path

import pytest

from tankbench import secrets
from tankbench.campaign import load_spec
from tankbench.errors import HostError
from tankbench.hosts.base import agent_argv, agent_digest, agent_source, work_root
from tankbench.hosts.local import LocalHost
from tests.conftest import proc_cmdline, tankbench, wait_until
from tests.integration.test_run_local import rows, write_campaign

PLANT = """import os, sys
open({marker!r}, "w").write("planted code ran as uid %d" % os.getuid())
"""


def test_a_planted_agent_at_the_old_path_is_never_executed(tmp_path: Path) -> None:
    """A real `tankbench run` of a tiny local campaign never runs a file planted where the agent used to be."""
    old = Path(f"/var/tmp/tankbench-agent-{agent_digest()}.py")  # exactly what tankbench used to execute
    marker = tmp_path / "planted-ran"
    old.write_text(PLANT.format(marker=str(marker)))
    try:
        c = write_campaign(tmp_path, rw='["read"]')
        j = tmp_path / "j.sqlite"
        res = tankbench("run", str(c), "--journal", str(j), "--no-report", cwd=tmp_path)
        assert res.returncode == 0, res.stderr
        assert rows(j, "SELECT count(*) FROM runs WHERE status = 'done'")[0][0] == 2
    finally:
        old.unlink()
    assert not marker.exists(), marker.read_text()


def test_a_job_directory_another_user_prepared_is_never_written(tmp_path: Path) -> None:
    """Another user creates the campaign's job directory under /var/tmp/tankbench first (to swap job.fio, which
    can run commands as root). tankbench refuses it, or (with the runner on work_root) never uses it."""
    c = write_campaign(tmp_path, rw='["read"]')
    c.write_text(c.read_text().replace('name = "itest"', f'name = "itest-planted-{os.getpid()}-{time.time_ns()}"'))
    cid = load_spec(str(c)).campaign_id
    planted = Path("/var/tmp/tankbench") / cid
    planted.parent.mkdir(exist_ok=True)
    planted.mkdir()
    try:
        os.chown(planted, 65534, 65534)
        res = tankbench("run", str(c), "--journal", str(tmp_path / "j.sqlite"), "--no-report", cwd=tmp_path)
        assert res.returncode == 0 or f"UnsafePath: {planted} is owned by uid 65534" in res.stderr, res.stderr
        assert res.returncode != 0 or "/var/tmp" not in res.stderr
        assert list(planted.iterdir()) == [], "root wrote into a directory another user owns"
    finally:
        subprocess.run(["rm", "-rf", "--", str(planted)], check=True)


def test_the_agent_imports_nothing_from_the_current_directory_or_pythonpath(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`python3 -I`: a json.py planted in the directory tankbench runs from, or on PYTHONPATH, is not imported
    by the agent (which often runs as root)."""
    planted = tmp_path / "planted"
    planted.mkdir()
    marker = tmp_path / "planted-ran"
    (planted / "json.py").write_text(PLANT.format(marker=str(marker)) + "raise SystemExit(9)\n")
    monkeypatch.chdir(planted)
    monkeypatch.setenv("PYTHONPATH", str(planted))
    res = LocalHost().call_agent({"op": "cooldown"}, timeout=60)
    assert res["event"] == "result" and not marker.exists()


def test_a_source_that_does_not_match_its_sha256_is_not_run(tmp_path: Path) -> None:
    marker = tmp_path / "tampered-ran"
    tampered = PLANT.format(marker=str(marker)).encode().ljust(len(agent_source()), b"#")
    cp = subprocess.run(
        agent_argv(LocalHost.python), input=tampered + b'{"op": "cooldown"}\n', capture_output=True, timeout=60
    )
    assert cp.returncode == 3 and b"does not match its sha256" in cp.stderr
    assert not marker.exists()


def test_the_agent_still_ends_fio_when_tankbench_goes_away(tmp_path: Path) -> None:
    """The source comes through stdin first; EOF on the same stdin must still end fio (kill -9 of tankbench)."""
    job = f"[j]\nfilename={tmp_path / 'f'}\nsize=4M\nrw=read\ntime_based=1\nruntime=120\nioengine=psync\n"
    session = LocalHost().start_agent(
        {"op": "fio_run", "job_text": job, "deadline_s": 300, "workdir": str(tmp_path / "w")}
    )
    pid = None
    for ev in session.events():
        if ev.get("event") == "started":
            pid = int(ev["pid"])
            break
    assert pid is not None, session.stderr_text()
    assert session.proc.stdin is not None
    session.proc.stdin.close()  # what the kernel does to our end of the pipe when tankbench is killed
    session.proc.wait(timeout=30)  # 75 from the watcher, or 0 when fio's end wins the race to exit: both fine
    wait_until(lambda: proc_cmdline(pid) is None, 10, f"fio {pid} still runs after the agent's stdin closed")


def _mode(path: str) -> tuple[int, int]:
    st = os.lstat(path)
    return st.st_uid, stat.S_IMODE(st.st_mode)


def test_work_root_and_key_files_are_private_on_the_local_host() -> None:
    host = LocalHost()
    work = work_root(host)
    assert work == str(Path(os.path.expanduser("~")).resolve() / ".cache" / "tankbench" / "work")
    assert _mode(work) == (os.geteuid(), 0o700)
    root = f"pytest-{os.getpid()}/bench"
    key = secrets.ensure_key(host, root)
    try:
        assert Path(key).parent == Path(secrets.key_dir(host)) and Path(key).name == f"pytest-{os.getpid()}_bench.key"
        assert _mode(str(Path(key).parent)) == (os.geteuid(), 0o700)
        assert _mode(key) == (os.geteuid(), 0o600) and Path(key).stat().st_size == 32
        first = Path(key).read_bytes()
        assert secrets.ensure_key(host, root) == key and Path(key).read_bytes() == first, "an existing key is kept"
    finally:
        assert secrets.remove_key(host, root) is True
    assert not Path(key).exists() and secrets.remove_key(host, root) is False


def test_a_planted_key_symlink_is_refused(tmp_path: Path) -> None:
    """Another user's symlink where the key goes would make root write the key through it: refused."""
    host = LocalHost()
    root = f"pytest-{os.getpid()}/planted"
    link = Path(secrets.key_dir(host)) / secrets.key_file_name(root)
    target = tmp_path / "victim"
    target.write_text("x")
    link.symlink_to(target)
    try:
        with pytest.raises(HostError, match="not a 32-byte key file of ours"):
            secrets.ensure_key(host, root)
    finally:
        link.unlink()
    assert target.read_text() == "x"


def test_job_files_of_a_run_can_live_in_the_work_root(tmp_path: Path) -> None:
    """The runner's workdir moves under work_root(host): the agent writes job.fio and fio.json there."""
    host = LocalHost()
    workdir = f"{work_root(host)}/pytest-{os.getpid()}/t1"
    job = f"[j]\nfilename={tmp_path / 'f'}\nsize=1M\nrw=write\nbs=64k\nioengine=psync\n"
    try:
        res = host.call_agent({"op": "fio_run", "job_text": job, "deadline_s": 60, "workdir": workdir}, timeout=120)
        assert res["exit_status"] == 0 and json.loads(res["fio_json"])["jobs"]
        assert Path(workdir, "job.fio").read_text() == job
    finally:
        subprocess.run(["rm", "-rf", "--", str(Path(workdir).parent)], check=True)
