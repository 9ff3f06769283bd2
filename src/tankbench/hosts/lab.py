"""The lab VM as a Host: an ssh host that owns its lab name, fingerprints how it emulates hardware, and offers
what only a machine tankbench runs can do (Host.revive, after_reboot, forward_port, leave).

What the lab is (its state, where it lives, how it emulates hardware) and how it is driven (qemu, QMP) are the
lab package's: lab/vm.py hands the facts in and lab/control.py the controls (`LabControl`), so this module stays
below `lab` in the layer order.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Protocol

from tankbench.hosts.ssh import SshHost, control_path

#: slirp's gateway: where a lab sees every connection from this machine come from, and where a guest behind slirp
#: reaches this machine (and so another lab's forwarded port)
SLIRP_HOST = "10.0.2.2"


class LabControl(Protocol):
    """What lab/control.py does to a running lab on its LabHost's behalf."""

    def revive(self, host: LabHost, note: Callable[[str], None]) -> str | None: ...
    def apply_machine(self, host: LabHost, note: Callable[[str], None]) -> None: ...
    def forward(self, host: LabHost, port: int) -> tuple[int, str]: ...
    def unforward(self, host: LabHost, rule: str) -> None: ...
    def down(self, host: LabHost, note: Callable[[str], None]) -> None: ...
    def unmodel(self, host: LabHost, note: Callable[[str], None]) -> None: ...


class LabHost(SshHost):
    """root@127.0.0.1:<forwarded port> with the lab's own key and known_hosts.

    `started_here` says whether this process booted the lab (then `run` stops it when it ends, unless
    asked to keep it); a lab that was already up is left as it was. `lab_control` (lab/control.py) drives it: without
    one (a lab host for reading only) it is not booted again, forwarded to, or shut down.
    """

    managed = True
    nat_address = SLIRP_HOST

    def __init__(
        self,
        lab_name: str,
        *,
        ssh_port: int,
        lab_dir: Path,
        accelerator: str,
        facts: Mapping[str, object],
        started_here: bool = False,
        lab_control: LabControl | None = None,
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
        self.lab_control = lab_control

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

    def revive(self, note: Callable[[str], None]) -> str | None:
        return self.lab_control.revive(self, note) if self.lab_control is not None else None

    def after_reboot(self, note: Callable[[str], None]) -> None:
        if self.lab_control is not None:
            self.lab_control.apply_machine(self, note)

    def forward_port(self, port: int) -> tuple[int, str]:
        if self.lab_control is None:
            return super().forward_port(port)
        return self.lab_control.forward(self, port)

    def unforward(self, rule: str) -> None:
        if self.lab_control is not None:
            self.lab_control.unforward(self, rule)

    def leave(self, keep: bool, note: Callable[[str], None]) -> None:
        """Shut down a lab this run booted (unless asked to keep it); say so when a lab stays up (~3 GB resident)."""
        name = self.lab_name
        how = "tankbench lab down" + ("" if name == "default" else f" --name {name}")
        if self.started_here and not keep:
            if self.lab_control is not None:
                self.lab_control.down(self, note)
            return
        if self.lab_control is not None:
            self.lab_control.unmodel(self, note)
        if self.started_here:
            note(f"lab {name} is still up (--keep-lab): stop it with `{how}`")
        else:
            note(f"lab {name} was up before this run and is still up: stop it with `{how}`")


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
