"""A host reached over ssh, with the system OpenSSH client and a ControlMaster per host.

Why the system client rather than a library (paramiko, asyncssh): it is already on every machine that has
fio and ssh, it honours the user's ~/.ssh/config, agent and ProxyJump, and a ControlMaster makes each
command cost one channel on an open connection (milliseconds) instead of a handshake.
"""

from __future__ import annotations

import hashlib
import os
import shlex
import stat
import subprocess
import tempfile
from collections.abc import Sequence
from pathlib import Path

from tankbench.errors import HostError
from tankbench.hosts import hostkeys
from tankbench.hosts.base import Host

#: sockets live here when the caller's directory would make the path too long for a unix socket
_SHORT_DIR = Path(tempfile.gettempdir()) / f"tankbench-ssh-{os.getuid()}"
#: sun_path is 108 bytes; ssh appends a random suffix while it sets up the master
_MAX_SOCKET = 90


def control_path(target: str, port: int, control_dir: Path | None = None) -> str:
    """A short, per-(user@host:port) socket path for ssh's ControlPath (pure apart from mkdir)."""
    digest = hashlib.sha256(f"{target}:{port}".encode()).hexdigest()[:16]
    d = control_dir if control_dir is not None else _SHORT_DIR
    path = d / f"cm-{digest}"
    if len(str(path)) > _MAX_SOCKET:
        d = _SHORT_DIR
        path = d / f"cm-{digest}"
    d.mkdir(mode=0o700, parents=True, exist_ok=True)
    _require_private(d)
    return str(path)


def _require_private(d: Path) -> None:
    """The socket directory must be ours alone: in a shared /tmp another user could create it first and put
    a fake control socket in it, which ssh would then talk to instead of the host."""
    st = os.lstat(d)
    if stat.S_ISLNK(st.st_mode) or not stat.S_ISDIR(st.st_mode) or st.st_uid != os.getuid():
        raise HostError(
            f"ssh control directory {d} is not a directory of uid {os.getuid()} "
            f"(owner uid {st.st_uid}); remove it (another user may have created it)"
        )
    if stat.S_IMODE(st.st_mode) & 0o077:
        os.chmod(d, 0o700)


class SshHost(Host):
    """Commands run on `user@address` through ssh; argv is quoted for the remote shell with shlex.join."""

    def __init__(
        self,
        address: str,
        *,
        user: str = "root",
        port: int = 22,
        identity: str | None = None,
        known_hosts: str | None = None,
        strict_host_keys: bool = True,
        connect_timeout: int = 10,
        control_dir: Path | None = None,
        name: str | None = None,
        accelerator: str = "",
        python: str = "python3",
        extra_options: Sequence[str] = (),
    ) -> None:
        self.address = address
        self.user = user
        self.port = port
        self.identity = identity
        self.known_hosts = known_hosts
        self.strict_host_keys = strict_host_keys
        self.connect_timeout = connect_timeout
        self.name = name or (f"ssh:{user}@{address}" + (f":{port}" if port != 22 else ""))
        self.accelerator = accelerator
        self.python = python
        self.extra_options = list(extra_options)
        self.control = control_path(self.target, port, control_dir)

    @property
    def target(self) -> str:
        return f"{self.user}@{self.address}" if self.user else self.address

    def ssh_options(self) -> list[str]:
        """The -o options every ssh invocation to this host uses."""
        opts = [
            "-o",
            "BatchMode=yes",
            "-o",
            f"ConnectTimeout={self.connect_timeout}",
            "-o",
            "ControlMaster=auto",
            "-o",
            f"ControlPath={self.control}",
            "-o",
            "ControlPersist=300",
            "-o",
            "ServerAliveInterval=15",
            "-o",
            "ServerAliveCountMax=4",
            "-o",
            "LogLevel=ERROR",
        ]
        if self.port != 22:
            opts += ["-p", str(self.port)]
        if self.identity:
            opts += ["-i", self.identity, "-o", "IdentitiesOnly=yes"]
        if self.known_hosts:
            # Our own known_hosts file (e.g. the lab's): never the user's, and never written by guesswork.
            opts += ["-o", f"UserKnownHostsFile={self.known_hosts}", "-o", "GlobalKnownHostsFile=/dev/null"]
        if not self.strict_host_keys:
            opts += ["-o", "StrictHostKeyChecking=no"]
        return opts + self.extra_options

    def command(self, argv: Sequence[str]) -> list[str]:
        """ssh … -- target '<argv quoted for the remote shell>'. The `--` comes before the target: a user or address
        beginning with `-` is then a host name to ssh, never one of its options (`-oProxyCommand=…` runs a command)."""
        if not argv:
            raise ValueError("empty argv")
        return ["ssh", *self.ssh_options(), "--", self.target, shlex.join(argv)]

    def shell_command(self, script: str) -> list[str]:
        """The local argv running a shell script on the host (for pipelines the caller wrote)."""
        return self.command(["sh", "-c", script])

    def interactive_command(self, argv: Sequence[str] = ()) -> list[str]:
        """argv for a terminal session (`-t`), or a command with a terminal if argv is given."""
        base = ["ssh", "-t", *self.ssh_options(), "--", self.target]
        return base + ([shlex.join(argv)] if argv else [])

    def check_connection(self, timeout: float = 60.0) -> None:
        """Log in once (this also starts the control master). On failure a UserError that says what to do:
        an unknown or changed host key shows its fingerprint and the command accepting exactly that key."""
        try:
            cp = subprocess.run(self.command(["true"]), capture_output=True, timeout=timeout)
        except subprocess.TimeoutExpired:
            cp = subprocess.CompletedProcess([], 255, b"", f"Connection timed out after {timeout:.0f} s".encode())
        if cp.returncode != 0:
            raise hostkeys.connect_error(
                self.name,
                self.address,
                self.port,
                self.user,
                cp.stderr.decode(errors="replace"),
                self.known_hosts,
                self.identity,
            )

    def close(self) -> None:
        """End the agent session, stop the control master, if one is running."""
        super().close()
        if os.path.exists(self.control):
            subprocess.run(
                ["ssh", *self.ssh_options(), "-O", "exit", "--", self.target], capture_output=True, timeout=15
            )
