"""Per-call cost of starting the agent: from a file on the host (the old way) vs through stdin with a sha256
check (`python3 -I -c BOOTSTRAP`, the current way), side by side on the local host; prints medians and ratio.

Each call is a full agent round trip for a trivial op (cooldown with no wait). Rounds alternate the two ways
so drift on a noisy machine hits both alike. With --ssh-lab NAME the same comparison runs against a lab VM
(the old way there also paid a `test -s` round trip to see whether the file was installed).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import tempfile
import time
from collections.abc import Callable

from tankbench.hosts.base import Host, agent_argv, agent_source
from tankbench.hosts.local import LocalHost

REQUEST = json.dumps({"op": "cooldown"}).encode() + b"\n"


def round_trip(argv: list[str], data: bytes) -> None:
    """Start the agent, send `data`, read until its result, then close stdin (as AgentSession does: EOF
    before the result would make the agent stop)."""
    proc = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
    assert proc.stdin is not None and proc.stdout is not None
    proc.stdin.write(data)
    proc.stdin.flush()
    for line in proc.stdout:
        if b'"result"' in line:
            break
    else:
        raise AssertionError("the agent ended without a result")
    proc.stdin.close()
    proc.wait(timeout=60)


def call_from_file(host: Host, path: str, probe: bool) -> None:
    """The old way: (ssh hosts: `test -s` first), then `python3 <path>` with the request on stdin."""
    if probe:
        host.run(["test", "-s", path], timeout=60)
    round_trip(host.command([host.python, path]), REQUEST)


def call_from_stdin(host: Host) -> None:
    """The current way: source then request on stdin, checked against its sha256 before it runs."""
    round_trip(host.command(agent_argv(host.python)), agent_source() + REQUEST)


def timed(fn: Callable[[], None]) -> float:
    t0 = time.perf_counter()
    fn()
    return time.perf_counter() - t0


def compare(host: Host, path: str, rounds: int, probe: bool) -> None:
    old, new = [], []
    for _ in range(rounds):
        old.append(timed(lambda: call_from_file(host, path, probe)))
        new.append(timed(lambda: call_from_stdin(host)))
    mo, mn = statistics.median(old), statistics.median(new)
    print(
        f"{host.name}: {rounds} calls each; median per call: from file {mo * 1000:.1f} ms, "
        f"through stdin {mn * 1000:.1f} ms; stdin/file = {mn / mo:.2f}"
    )


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--rounds", type=int, default=30, help="calls of each kind (default 30)")
    ap.add_argument("--ssh-lab", metavar="NAME", default="", help="also compare on this running lab")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="tb-agent-call-") as tmp:
        path = os.path.join(tmp, "agent.py")
        with open(path, "wb") as f:
            f.write(agent_source())
        compare(LocalHost(), path, args.rounds, probe=False)
    if args.ssh_lab:
        from tankbench.lab.control import lab_host

        host = lab_host(args.ssh_lab)
        try:
            remote = "/root/tb-agent-call-bench.py"
            host.write_file(remote, agent_source(), 0o600)
            compare(host, remote, args.rounds, probe=True)
            host.run(["rm", "-f", remote], timeout=60)
        finally:
            host.close()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
