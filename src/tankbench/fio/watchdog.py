"""A watchdog on this machine that ends what tankbench started here when tankbench dies (issue 34 item 2).

fio's client/server mode runs processes beside tankbench (the ssh connections that carry the servers and the
local `fio --client`) and keeps files (forwarded sockets, job files) in a private directory. A `kill -9` of
tankbench runs no `finally`: the watchdog, a small process of its own session started with a pipe from tankbench
as its stdin, sees that pipe end (the kernel closes it whatever way tankbench ends), ends every process it was
told about (by pid, and only while that pid still is the process it was told about: same start time), waits at
most `GRACE_S` for them, kills what is left and removes the directory. On a normal stop tankbench ends them itself
and closes the pipe; the watchdog then finds nothing to end and removes the directory.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys

#: how long the processes get to end on SIGTERM before SIGKILL
GRACE_S = 2.0

#: the watchdog itself: `python3 -I -c WATCHDOG DIR`; reads "+ PID START" / "- PID" lines until EOF
WATCHDOG = r"""
import os, shutil, signal, sys, time
directory, grace = sys.argv[1], float(sys.argv[2])
pids = {}
def start(pid):
    try:
        with open("/proc/%d/stat" % pid) as f:
            fields = f.read().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return None
    return None if fields[0] == "Z" else fields[19]  # a zombie has ended: nothing to wait for
for line in sys.stdin:
    op, _, rest = line.strip().partition(" ")
    pid, _, when = rest.partition(" ")
    if op == "+" and pid.isdigit():
        pids[int(pid)] = when
    elif op == "-" and pid.isdigit():
        pids.pop(int(pid), None)
def ours():
    return [p for p, when in pids.items() if start(p) == when]
for sig, wait in ((signal.SIGTERM, grace), (signal.SIGKILL, 0.0)):
    for p in ours():
        try:
            os.kill(p, sig)
        except OSError:
            pass
    end = time.monotonic() + wait
    while ours() and time.monotonic() < end:
        time.sleep(0.05)
shutil.rmtree(directory, ignore_errors=True)
"""


def start_time(pid: int) -> str:
    """A process's start time in clock ticks since boot (field 22 of /proc/PID/stat): with its pid, its identity."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[19]
    except (OSError, IndexError):
        return ""


class Watchdog:
    """`Watchdog(directory)`: from now on, `directory` is removed and every `watch`ed process ended once this
    object is closed or tankbench dies, whichever comes first."""

    def __init__(self, directory: str) -> None:
        self.directory = directory
        self.proc = subprocess.Popen(
            [sys.executable, "-I", "-c", WATCHDOG, directory, str(GRACE_S)],
            stdin=subprocess.PIPE,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,  # a terminal's Ctrl-C is ours to handle: the watchdog waits for our pipe
            text=True,
        )

    def _say(self, line: str) -> None:
        assert self.proc.stdin is not None
        try:
            self.proc.stdin.write(line + "\n")
            self.proc.stdin.flush()
        except (BrokenPipeError, ValueError):
            pass  # the watchdog is gone (closed): nothing to tell it

    def watch(self, pid: int) -> None:
        """End this process (if it still runs) when tankbench dies."""
        self._say(f"+ {pid} {start_time(pid)}")

    def forget(self, pid: int) -> None:
        """This process ended (or was ended) by tankbench itself: no longer the watchdog's."""
        self._say(f"- {pid}")

    def close(self, timeout: float = 30.0) -> None:
        """End what is still watched, remove the directory, and wait for the watchdog to finish."""
        if self.proc.stdin is not None and not self.proc.stdin.closed:
            try:
                self.proc.stdin.close()
            except BrokenPipeError:
                pass
        try:
            self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        if os.path.isdir(self.directory):  # it could not (it was killed): ours to remove
            shutil.rmtree(self.directory, ignore_errors=True)
