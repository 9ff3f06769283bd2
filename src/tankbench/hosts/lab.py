"""The lab VM as a Host: an ssh host that owns its lab name and fingerprints how it emulates hardware.

What the lab is (its state, where it lives, how it emulates hardware) is the lab package's: lab/vm.py hands
those facts in, so this module stays below `lab` in the layer order.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Mapping
from pathlib import Path

from tankbench.hosts.ssh import SshHost, control_path


class LabHost(SshHost):
    """root@127.0.0.1:<forwarded port> with the lab's own key and known_hosts.

    `started_here` says whether this process booted the lab (then `run` stops it when it ends, unless
    asked to keep it); a lab that was already up is left as it was.
    """

    def __init__(
        self,
        lab_name: str,
        *,
        ssh_port: int,
        lab_dir: Path,
        accelerator: str,
        facts: Mapping[str, object],
        started_here: bool = False,
    ) -> None:
        super().__init__(
            "127.0.0.1",
            user="root",
            port=ssh_port,
            identity=str(lab_dir / "id_ed25519"),
            known_hosts=str(lab_dir / "known_hosts"),
            strict_host_keys=True,
            connect_timeout=10,
            control_dir=lab_dir,
            name=lab_host_name(lab_name),
            accelerator=accelerator,
            extra_options=["-o", "HostKeyAlias=tankbench-lab"],
        )
        self.lab_name = lab_name
        self.lab_dir = lab_dir
        self.facts = dict(facts)
        self.started_here = started_here

    def rebind(self, ssh_port: int, facts: Mapping[str, object]) -> None:
        """The lab was booted again (after a crash): its new ssh port; nothing cached from the old boot stays."""
        self.close()
        self.port = ssh_port
        self.control = control_path(self.target, ssh_port, self.lab_dir)
        self.facts = dict(facts)
        self.__dict__.pop("_private_dirs", None)

    def emulator_threads(self) -> ThreadTimes:
        """The lab's qemu threads' CPU and wait times now (its pid from the lab's state.json; {} when unknown)."""
        try:
            pid = int(json.loads((self.lab_dir / "state.json").read_text())["pid"])
        except (OSError, ValueError, KeyError, TypeError):
            return {}
        return qemu_threads(pid)

    def fingerprint_extra(self) -> dict[str, object]:
        """How the lab emulates hardware, for honest labelling of every run measured in it."""
        return dict(self.facts)


def lab_host_name(lab: str) -> str:
    """How runs on a lab name their host: `lab` for the default lab, `lab:<name>` for others."""
    return "lab" if lab == "default" else f"lab:{lab}"


#: one thread's CPU time and time waiting for a CPU so far (ns), from /proc/<pid>/task/<tid>/schedstat
ThreadTimes = dict[int, tuple[int, int]]


def qemu_threads(pid: int, proc: str = "/proc") -> ThreadTimes:
    """{thread id: (ns run on a CPU, ns waited runnable)} of a process's threads; {} when it is gone."""
    out: ThreadTimes = {}
    try:
        tids = os.listdir(f"{proc}/{pid}/task")
    except OSError:
        return out
    for tid in tids:
        try:
            with open(f"{proc}/{pid}/task/{tid}/schedstat") as f:
                run, wait = f.read().split()[:2]
            out[int(tid)] = (int(run), int(wait))
        except (OSError, ValueError):
            continue
    return out


def emulator_figures(a: ThreadTimes, b: ThreadTimes, seconds: float) -> dict[str, float]:
    """The emulator's share over `seconds`: cpu.emulator_pct (CPU of all its threads, % of one CPU) and
    cpu.emulator_busy_pct (its busiest thread's CPU plus its time waiting for a CPU, % of the time: single-threaded
    TCG emulates every virtual CPU on one thread, so 100 % there is the emulator's limit, whether it ran or waited
    for a core the machine's other work held)."""
    if not a or not b or seconds <= 0:
        return {}
    run = busiest = 0.0
    for tid, (r1, w1) in b.items():
        r0, w0 = a.get(tid, (0, 0))
        run += r1 - r0
        busiest = max(busiest, (r1 - r0) + (w1 - w0))
    ns = seconds * 1e9
    return {
        "cpu.emulator_pct": round(100.0 * run / ns, 1),
        "cpu.emulator_busy_pct": round(min(100.0, 100.0 * busiest / ns), 1),
    }


def emulator_mark(host: object) -> tuple[ThreadTimes, float] | None:
    """Where the emulator's CPU stands before a run (None: the host is not an emulated lab)."""
    if not isinstance(host, LabHost):
        return None
    return host.emulator_threads(), time.monotonic()


def emulator_metrics(host: object, mark: tuple[ThreadTimes, float] | None) -> dict[str, float]:
    """cpu.emulator_pct and cpu.emulator_busy_pct since `mark` (emulator_figures), {} without a mark."""
    if mark is None or not isinstance(host, LabHost):
        return {}
    return emulator_figures(mark[0], host.emulator_threads(), time.monotonic() - mark[1])
