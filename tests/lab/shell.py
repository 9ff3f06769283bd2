"""A shell command on a lab host that must succeed: its output, or a failure that shows script, status and output."""

from __future__ import annotations

from tankbench.hosts.base import Host


def sh(host: Host, script: str, timeout: float = 300) -> str:
    res = host.run(["sh", "-c", script], timeout=timeout)
    assert res.returncode == 0, f"{script}\nexit {res.returncode}\n{res.stdout}\n{res.stderr}"
    return res.stdout
