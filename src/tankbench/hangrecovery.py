"""A host whose I/O hangs is rebooted (issue 34 item 1): the lab always (it is tankbench's own), an ssh host only when
the campaign allows it (`campaign.on_hang = "reboot"`); the local machine never (tankbench runs on it).

A hang is no crash: the kernel is up, ssh answers, but the pool's I/O completes nothing and the processes waiting for
it (fio, `zfs`, `sync`) are in D state, where no signal acts: only a reboot ends it. A lab's qemu is stopped and the
lab booted again on its disks (its console log of the hung boot kept, the last lines in the crashed row); an ssh host
is rebooted with sysrq `b` (an immediate reboot: a clean one would wait for the hung I/O forever, and `s`ync too),
and waited for until it answers with a new boot id.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable

from tankbench.errors import HostError
from tankbench.hosts.base import Host
from tankbench.hosts.lab import LabHost
from tankbench.recovery import FIRST_DELAY_S, MAX_DELAY_S, Back, HostWaiter, tail
from tankbench.units import fmt_duration


def reboot_lab(host: LabHost, before: str, note: Callable[[str], None]) -> Back:
    """Stop the hung lab's qemu and boot it again on its disks; the Back of a reboot by tankbench."""
    from tankbench.lab import vm
    from tankbench.lab.state import console, lab_fingerprint

    t0 = time.monotonic()
    log = tail(console(host.lab_dir))
    note(f"lab {host.lab_name}: its I/O hangs; stopping it and booting it again on its disks")
    new = vm.reboot(host.lab_name, note)
    host.rebind(new.ssh_port, lab_fingerprint(new))
    waiter = HostWaiter(host, 600.0, note)
    boot = waiter.boot_id(timeout=60) or ""
    return Back(before, boot, time.monotonic() - t0, relaunched=True, kernel_log=log, tries=1)


def reboot_over_ssh(host: Host, note: Callable[[str], None]) -> None:
    """Reboot a hung host at once (sysrq `b`: no sync, no unmount; both would wait for the hung I/O)."""
    note(f"{host.name}: its I/O hangs; rebooting it over ssh (campaign.on_hang = reboot: sysrq b)")
    try:  # the connection dies with the kernel: no answer is the expected one
        host.run(["sh", "-c", "echo 1 > /proc/sys/kernel/sysrq; echo b > /proc/sysrq-trigger"], timeout=20)
    except HostError:
        pass


def wait_new_boot(waiter: HostWaiter, before: str, host_wait_s: float, note: Callable[[str], None]) -> Back:
    """Until the host answers with a boot id other than `before` (it rebooted); HostError after host_wait."""
    t0 = time.monotonic()
    delay, tries = FIRST_DELAY_S, 0
    while True:
        tries += 1
        boot = waiter.boot_id(timeout=20)
        if boot is not None and boot != before:
            log = waiter.previous_boot_log()
            return Back(before, boot, time.monotonic() - t0, kernel_log=log, tries=tries)
        left = host_wait_s - (time.monotonic() - t0)
        if left <= 0:
            raise HostError(
                f"{waiter.host.name} did not come back after its reboot within campaign.host_wait "
                f"({fmt_duration(host_wait_s)}; {'it still runs its hung boot' if boot else 'no answer'}); the "
                "campaign stops here, and `tankbench run` again resumes it"
            )
        note(
            f"waiting for {waiter.host.name} to come back after its reboot: {fmt_duration(time.monotonic() - t0)}, "
            f"gives up in {fmt_duration(left)} (campaign.host_wait)"
        )
        time.sleep(min(delay, left))
        delay = min(delay * 2, MAX_DELAY_S)


#: the kernel's hung-task detector: "INFO: task zpool:812 blocked for more than 120 seconds."
HUNG_TASK = re.compile(r"^\[\s*(\d+\.\d+)\].*blocked for more than \d+ seconds.*$", re.M)
#: hung-task lines older than this (guest uptime) belong to a stall that is over
RECENT_S = 600.0


def lab_hang(host: LabHost) -> str:
    """The lab's console lines that say its I/O hangs now: the kernel's hung-task lines of the running boot from the
    last RECENT_S seconds of its uptime ("" when there are none). Read when a command did not finish on a lab that
    still answers: what CI's lab hangs looked like (docs/unattended.md)."""
    from tankbench.lab.state import console

    text = console(host.lab_dir)
    found = [(float(m.group(1)), m.group(0).strip()) for m in HUNG_TASK.finditer(text)]
    if not found:
        return ""
    try:
        res = host.run(["cat", "/proc/uptime"], timeout=20)
        uptime = float(res.stdout.split()[0]) if res.returncode == 0 else None
    except (HostError, ValueError, IndexError):
        uptime = None
    recent = [line for t, line in found if uptime is None or t >= uptime - RECENT_S]
    return "; ".join(f"kernel: {line[-160:]}" for line in recent[-3:])
