"""First contact with an ssh host: say what failed, show the host key's fingerprint and the exact command that
accepts that key (and only that key). tankbench never accepts a host key by itself.

ssh in BatchMode says only "Host key verification failed." for a host it has never seen: the user is left
to guess. Here the key the host presents is read with ssh-keyscan, its SHA256 fingerprint shown (to compare
with `ssh-keygen -lf /etc/ssh/ssh_host_ed25519_key.pub` run on the host itself, over a channel the user
trusts), and the hint is the known_hosts line for exactly that key: if someone in between swapped the key
after the user compared it, the line does not match and ssh still refuses.
"""

from __future__ import annotations

import os
import shlex
import subprocess
from dataclasses import dataclass

from tankbench.errors import UserError

#: what OpenSSH prints (stderr, exit 255) for each way a first connection fails
_UNKNOWN = ("Host key verification failed", "host key is known for", "No matching host key")
_CHANGED = ("REMOTE HOST IDENTIFICATION HAS CHANGED", "POSSIBLE DNS SPOOFING")
_UNREACHABLE = (
    "Connection refused",
    "Connection timed out",
    "No route to host",
    "Could not resolve hostname",
    "Network is unreachable",
    "Name or service not known",
    "Connection closed",
    "Connection reset",
    "Operation timed out",
)
_AUTH = ("Permission denied",)


@dataclass(frozen=True)
class ScannedKey:
    """One host key as ssh-keyscan read it: the known_hosts line and its fingerprint."""

    line: str  # "[addr]:port ssh-ed25519 AAAA…" (or "addr …" on port 22)
    key_type: str
    fingerprint: str  # "SHA256:…"


def known_hosts_name(address: str, port: int) -> str:
    """How known_hosts names a host: the bare address on port 22, else [address]:port."""
    return address if port == 22 else f"[{address}]:{port}"


def classify(stderr: str) -> str:
    """'changed', 'unknown', 'unreachable', 'auth' or 'other' for the stderr of a failed ssh (pure)."""
    for kind, needles in (("changed", _CHANGED), ("unknown", _UNKNOWN), ("unreachable", _UNREACHABLE)):
        if any(n in stderr for n in needles):
            return kind
    return "auth" if any(n in stderr for n in _AUTH) else "other"


def scan(address: str, port: int, timeout: int = 5) -> list[ScannedKey]:
    """The host keys `address:port` presents now (ed25519 first), each with its SHA256 fingerprint."""
    try:
        cp = subprocess.run(
            ["ssh-keyscan", "-T", str(timeout), "-p", str(port), "-t", "ed25519,ecdsa,rsa", address],
            capture_output=True,
            text=True,
            timeout=timeout * 4 + 5,
        )
    except (OSError, subprocess.TimeoutExpired):
        return []
    order = {"ssh-ed25519": 0, "ecdsa-sha2-nistp256": 1, "ssh-rsa": 2}
    keys = []
    for line in cp.stdout.splitlines():
        parts = line.split()
        if len(parts) < 3 or line.startswith("#"):
            continue
        fp = subprocess.run(["ssh-keygen", "-lf", "-"], input=line + "\n", capture_output=True, text=True)
        words = fp.stdout.split()
        if fp.returncode == 0 and len(words) >= 2:
            keys.append(ScannedKey(" ".join(parts[:3]), parts[1], words[1]))
    return sorted(keys, key=lambda k: order.get(k.key_type, 9))


def known_hosts_path(known_hosts: str | None) -> str:
    """The file ssh reads for this host: the host's own known_hosts, else the user's."""
    return known_hosts or os.path.join(os.path.expanduser("~"), ".ssh", "known_hosts")


def accept_command(key: ScannedKey, known_hosts: str | None) -> str:
    """The shell command that adds exactly this key to the known_hosts file ssh reads for the host."""
    path = known_hosts_path(known_hosts)
    mk = "" if known_hosts else "mkdir -p ~/.ssh && chmod 700 ~/.ssh && "
    return f"{mk}printf '%s\\n' {shlex.quote(key.line)} >> {shlex.quote(path)}"


def connect_error(
    name: str, address: str, port: int, user: str, stderr: str, known_hosts: str | None, identity: str | None
) -> UserError:
    """The UserError for a failed first connection: unknown or changed host key (with its fingerprint and the
    command to accept it), unreachable, or refused login; each with what to do."""
    kind = classify(stderr)
    last = (stderr.strip().splitlines() or ["(no message)"])[-1]
    where = f"{address}:{port}"
    if kind in ("unknown", "changed"):
        keys = scan(address, port)
        shown = "; ".join(f"{k.key_type} {k.fingerprint}" for k in keys) or "(ssh-keyscan read no key)"
        check = (
            "compare it with `ssh-keygen -lf /etc/ssh/ssh_host_ed25519_key.pub` run on the host itself "
            "(its console, or a connection you already trust)"
        )
        if kind == "unknown":
            msg = f"{name}: the ssh host key of {where} is not known yet (first contact); it presents {shown}"
            accept = accept_command(keys[0], known_hosts) if keys else "ssh-keyscan found no key to accept"
            hint = (
                f"{check}; if it matches, accept exactly that key with: {accept} (tankbench never accepts a key itself)"
            )
        else:
            msg = (
                f"{name}: the ssh host key of {where} has CHANGED since it was accepted; it presents {shown}: "
                "either the host was reinstalled or someone is between you and it"
            )
            remove = (
                f"ssh-keygen -R {shlex.quote(known_hosts_name(address, port))} -f "
                f"{shlex.quote(known_hosts_path(known_hosts))}"
            )
            accept = accept_command(keys[0], known_hosts) if keys else "(no key read)"
            hint = f"{check}; only if it matches, replace the old key: {remove} && {accept}"
        return UserError(msg, hint)
    if kind == "unreachable":
        return UserError(
            f"{name}: cannot reach {where} over ssh: {last}",
            "check the address and port, that sshd runs there and that no firewall is in the way "
            f"(try: ssh -p {port} {user}@{address} true)",
        )
    if kind == "auth":
        key = f" with the key {identity}" if identity else ""
        return UserError(
            f"{name}: {user}@{where} refused the login{key}: {last}",
            f"tankbench logs in without a password prompt (BatchMode): add your public key to "
            f"~{user}/.ssh/authorized_keys on the host, or name the key with `identity`",
        )
    return UserError(f"{name}: ssh to {where} failed: {last}", f"try it by hand: ssh -p {port} {user}@{address} true")
