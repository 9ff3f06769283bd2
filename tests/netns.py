"""Real ssh hosts on this one machine: a network namespace each, joined to it by a veth pair, with its own sshd.

Each namespace host is a real host for tankbench: an sshd with its own config, host key and authorized key
(user root), reached at its own address. The namespaces share this machine's kernel and filesystem, so each
host gets private mounts (inside the namespace only) over two paths:

- `TARGET_DIR`-style `target` path (one path, the same on every host, for a campaign's file targets): each
  host sees its own directory there, as separate machines would;
- root's home (/root): a login runs no shell start-up file of this machine's root (here ~/.bashrc runs
  `pyenv rehash`, which takes a lock file in /root/.pyenv; a test that kills a host's processes mid-login left
  that lock behind, and every later ssh login on the machine waited 60 s for it);
- tankbench's work root (~/.cache/tankbench/work of root, inside that home): job files of one host never meet
  another's.

Their fingerprints are those of this machine (same CPU, memory, kernel, disks): alike by construction, which
is what `split` wants; they also compete for the same two cores and disk, so a test that wants parallel hosts
to finish sooner must be wall-clock bound (fio with a rate limit), not CPU or disk bound.

Everything created is removed by name and pid (sshd by its pid, processes left in a namespace by
`ip netns pids`, links and namespaces by name), even when the test failed.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

#: where tankbench's agent keeps job files of root (see agent.state_root): mounted privately per host
WORK_ROOT = "/root/.cache/tankbench/work"


@dataclass
class NetnsHost:
    """One namespace host: its names, address, keys and private directories (all under `base`)."""

    index: int
    netns: str
    veth: str
    address: str
    base: Path
    identity: str = ""
    known_hosts: str = ""
    host_key_pub: str = ""
    sshd: subprocess.Popen[bytes] | None = None
    log: list[str] = field(default_factory=list)

    @property
    def name(self) -> str:
        return f"ssh:root@{self.address}"

    def table(self) -> str:
        """The host as an inline TOML table for a campaign's `hosts` list."""
        return f'{{ address = "{self.address}", identity = "{self.identity}", known_hosts = "{self.known_hosts}" }}'

    def ssh_argv(self, *argv: str) -> list[str]:
        """ssh to this host with its key and known_hosts (BatchMode: never a prompt)."""
        return [
            "ssh",
            "-i",
            self.identity,
            "-o",
            "IdentitiesOnly=yes",
            "-o",
            "BatchMode=yes",
            "-o",
            f"UserKnownHostsFile={self.known_hosts}",
            "-o",
            "GlobalKnownHostsFile=/dev/null",
            "-o",
            "ConnectTimeout=5",
            f"root@{self.address}",
            "--",
            *argv,
        ]


def _ip(*args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["ip", *args], capture_output=True, text=True, check=check)


def _sshd_config(h: NetnsHost) -> str:
    d = h.base
    return "\n".join(
        [
            "Port 22",
            f"ListenAddress {h.address}",
            f"HostKey {d / 'host_ed25519'}",
            f"AuthorizedKeysFile {d / 'authorized_keys'}",
            "PermitRootLogin prohibit-password",
            "PasswordAuthentication no",
            "KbdInteractiveAuthentication no",
            "UsePAM no",
            "StrictModes no",
            f"PidFile {d / 'sshd.pid'}",
            "MaxSessions 64",
            "MaxStartups 64",
            "",
        ]
    )


def _start(h: NetnsHost, target: Path) -> None:
    """Namespace, veth pair, addresses, private mounts and sshd for one host."""
    host_side, peer = h.veth, h.veth + "p"
    o = h.address.split(".")
    local = ".".join(o[:3] + [str(int(o[3]) - 1)])
    _ip("netns", "add", h.netns)
    _ip("link", "add", host_side, "type", "veth", "peer", "name", peer)
    _ip("link", "set", peer, "netns", h.netns)
    _ip("addr", "add", f"{local}/30", "dev", host_side)
    _ip("link", "set", host_side, "up")
    _ip("-n", h.netns, "addr", "add", f"{h.address}/30", "dev", peer)
    _ip("-n", h.netns, "link", "set", peer, "up")
    _ip("-n", h.netns, "link", "set", "lo", "up")
    d = h.base
    for sub in ("target", "work", "home"):
        (d / sub).mkdir(mode=0o700, parents=True, exist_ok=True)
    for key in ("host_ed25519", "id_ed25519"):
        subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", h.netns, "-f", str(d / key)], check=True)
    h.identity = str(d / "id_ed25519")
    h.host_key_pub = (d / "host_ed25519.pub").read_text().strip()
    shutil.copy(d / "id_ed25519.pub", d / "authorized_keys")
    # the test made this key itself: writing it to known_hosts is knowing it, not accepting it blindly
    (d / "known_hosts").write_text(f"{h.address} {' '.join(h.host_key_pub.split()[:2])}\n")
    h.known_hosts = str(d / "known_hosts")
    (d / "sshd_config").write_text(_sshd_config(h))
    Path("/run/sshd").mkdir(exist_ok=True)  # sshd's privilege-separation directory
    Path(WORK_ROOT).mkdir(mode=0o700, parents=True, exist_ok=True)
    # `ip netns exec` gives the command its own mount namespace (slave of ours): these mounts stay inside it;
    # its own UTS namespace gives it its own hostname (fio's client output and fingerprints name it)
    script = (
        f"hostname {h.netns} && mount --bind {d / 'target'} {target} && mount --bind {d / 'home'} /root && "
        f"mkdir -p {WORK_ROOT} && mount --bind {d / 'work'} {WORK_ROOT} && "
        f"exec /usr/sbin/sshd -D -e -f {d / 'sshd_config'}"
    )
    h.sshd = subprocess.Popen(
        ["ip", "netns", "exec", h.netns, "unshare", "--uts", "sh", "-c", script],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        start_new_session=True,
    )
    _wait_listening(h)


def _wait_listening(h: NetnsHost, timeout: float = 30.0) -> None:
    """Until sshd prints that it listens (no fixed sleep); fail with its log if it exits first."""
    assert h.sshd is not None and h.sshd.stderr is not None
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        line = h.sshd.stderr.readline().decode(errors="replace")
        if not line:
            raise RuntimeError(f"sshd in {h.netns} exited: {''.join(h.log)}")
        h.log.append(line)
        if "Server listening on" in line:
            # keep draining its log so sshd never blocks on a full pipe
            os.set_blocking(h.sshd.stderr.fileno(), False)
            return
    raise RuntimeError(f"sshd in {h.netns} did not start in {timeout} s: {''.join(h.log)}")


def _remove(h: NetnsHost) -> None:
    """End what runs in the namespace (by pid), then remove the link and namespace (by name)."""
    if h.sshd is not None and h.sshd.poll() is None:
        with contextlib.suppress(ProcessLookupError):
            os.kill(h.sshd.pid, signal.SIGTERM)
        try:
            h.sshd.wait(timeout=10)
        except subprocess.TimeoutExpired:
            h.sshd.kill()
            h.sshd.wait()
    pids = _ip("netns", "pids", h.netns, check=False).stdout.split()
    for pid in pids:  # sessions sshd left (an agent, a fio): they live in our namespace, so they are ours
        with contextlib.suppress(ProcessLookupError, ValueError):
            os.kill(int(pid), signal.SIGKILL)
    _ip("link", "del", h.veth, check=False)
    _ip("netns", "del", h.netns, check=False)


@contextlib.contextmanager
def namespace_hosts(n: int, base: Path) -> Iterator[tuple[list[NetnsHost], Path]]:
    """N namespace hosts under `base`; yields (hosts, target path). Everything is removed on exit."""
    tag = os.getpid() % 100000
    subnet = 1 + os.getpid() % 250
    target = base / "target"
    target.mkdir(parents=True, exist_ok=True)
    hosts = [
        NetnsHost(
            index=i,
            netns=f"tbfleet-{tag}-{i}",
            veth=f"tbf{tag}h{i}",
            address=f"10.231.{subnet}.{4 * i + 2}",
            base=base / f"h{i}",
        )
        for i in range(n)
    ]
    try:
        for h in hosts:
            _start(h, target)
        yield hosts, target
    finally:
        for h in hosts:
            _remove(h)
