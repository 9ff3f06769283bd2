"""First contact with a real sshd (a namespace host): the fingerprint, the exact command, never a silent accept."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from tankbench.errors import UserError
from tankbench.hosts.ssh import SshHost
from tests.netns import NetnsHost, namespace_hosts


@pytest.fixture
def one_host(tmp_path: Path):
    with namespace_hosts(1, tmp_path / "ns") as (hosts, _):
        yield hosts[0]


def _host(h: NetnsHost, known_hosts: str, tmp_path: Path, identity: str | None = None) -> SshHost:
    return SshHost(h.address, identity=identity or h.identity, known_hosts=known_hosts, control_dir=tmp_path / "cm")


def _fingerprint(pub: str) -> str:
    return subprocess.run(["ssh-keygen", "-lf", pub], capture_output=True, text=True, check=True).stdout.split()[1]


def test_unknown_key_shows_fingerprint_and_the_command_that_accepts_it(one_host: NetnsHost, tmp_path: Path):
    kh = tmp_path / "known_hosts"
    kh.write_text("")
    host = _host(one_host, str(kh), tmp_path)
    with pytest.raises(UserError) as e:
        host.check_connection()
    assert "is not known yet (first contact)" in e.value.message
    assert _fingerprint(str(one_host.base / "host_ed25519.pub")) in e.value.message
    assert kh.read_text() == "", "nothing is accepted silently"
    command = e.value.hint.split("accept exactly that key with: ")[1].split(" (tankbench never")[0]
    subprocess.run(["sh", "-c", command], check=True)  # what the user would paste
    host.check_connection()  # now it connects
    assert host.run(["echo", "hello"], check=True).stdout == "hello\n"
    host.close()


def test_changed_key_is_refused_with_both_steps(one_host: NetnsHost, tmp_path: Path):
    other = tmp_path / "other"
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(other)], check=True)
    kh = tmp_path / "known_hosts"
    kh.write_text(f"{one_host.address} {' '.join(Path(str(other) + '.pub').read_text().split()[:2])}\n")
    before = kh.read_text()
    with pytest.raises(UserError) as e:
        _host(one_host, str(kh), tmp_path).check_connection()
    assert "has CHANGED" in e.value.message
    assert _fingerprint(str(one_host.base / "host_ed25519.pub")) in e.value.message
    assert "ssh-keygen -R" in e.value.hint
    assert kh.read_text() == before


def test_unreachable_and_refused_login(one_host: NetnsHost, tmp_path: Path):
    local_side = one_host.address.rsplit(".", 1)[0] + "." + str(int(one_host.address.rsplit(".", 1)[1]) - 1)
    with pytest.raises(UserError) as e:
        SshHost(local_side, port=9, known_hosts=one_host.known_hosts, control_dir=tmp_path / "cm").check_connection()
    assert "cannot reach" in e.value.message and "Connection refused" in e.value.message
    stranger = tmp_path / "stranger"
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(stranger)], check=True)
    with pytest.raises(UserError) as e:
        _host(one_host, one_host.known_hosts, tmp_path, identity=str(stranger)).check_connection()
    assert "refused the login" in e.value.message and "authorized_keys" in e.value.hint


def test_a_namespace_host_has_a_home_of_its_own(one_host: NetnsHost):
    """A login on a test host runs none of this machine's root start-up files (whose `pyenv rehash` lock, left
    by a killed login, made every later login wait 60 s), and its tankbench work root is private to it."""
    res = subprocess.run(
        one_host.ssh_argv('echo "$HOME"; ls -A /root; ls -d /root/.cache/tankbench/work'),  # one remote shell line
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert res.returncode == 0, res.stderr
    lines = res.stdout.splitlines()
    assert lines[0] == "/root"
    assert ".bashrc" not in lines and ".pyenv" not in lines, lines
    assert lines[-1] == "/root/.cache/tankbench/work"
    assert "pyenv" not in res.stderr, res.stderr
