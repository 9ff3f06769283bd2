"""Waiting for a host that went down mid-campaign, and bringing it back (issue 18 item 1).

When a host stops answering, the runner journals the run (or the layout, provisioning, … step) as crashed and
calls `HostWaiter.wait`: it polls the host's boot id with a backoff until it answers or `campaign.host_wait`
has passed (then HostError: the campaign stops, exit status 3). A machine tankbench runs is booted again when it
died (`Host.revive`: a lab whose qemu is gone — its kernel panicked: panic=-1 and -no-reboot make qemu exit — or
whose console shows a panic is booted again on the disks it had). A
new boot id is a reboot (the kernel's log of the crash is kept: the lab's console log, `journalctl -k -b -1` on
a real host); the same boot id a network blip. See docs/unattended.md.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from tankbench.errors import HostError
from tankbench.hosts.base import Host
from tankbench.journal.db import Journal
from tankbench.units import fmt_duration

BOOT_ID = "/proc/sys/kernel/random/boot_id"
#: the first wait between two tries, doubled after each up to MAX_DELAY_S
FIRST_DELAY_S = 2.0
MAX_DELAY_S = 60.0
#: how much of a crashed kernel's log is kept in the crashed run's row
TAIL_LINES = 60
TAIL_CHARS = 6000
PANIC_MARKS = ("Kernel panic", "sysrq: Trigger a crash", "Oops:", "BUG:", "general protection fault")


@dataclass
class Back:
    """How a host came back: its boot id before and now, how long it was gone, what its kernel said."""

    boot_id_before: str
    boot_id: str
    down_s: float
    relaunched: bool = False  # tankbench booted the lab again
    kernel_log: str = ""  # the crashed kernel's last lines (lab console, journalctl -k -b -1)
    tries: int = 0
    notes: list[str] = field(default_factory=list)

    @property
    def rebooted(self) -> bool:
        return self.boot_id != self.boot_id_before or self.relaunched

    def checks(self) -> dict[str, Any]:
        """`recovery.*` checks for the crashed run's row."""
        out: dict[str, Any] = {
            "recovery.rebooted": self.rebooted,
            "recovery.down_s": round(self.down_s, 1),
            "recovery.boot_id_before": self.boot_id_before,
            "recovery.boot_id_after": self.boot_id,
            "recovery.lab_rebooted_by_tankbench": self.relaunched,
            "recovery.tries": self.tries,
        }
        if self.kernel_log:
            out["crash.kernel_log"] = self.kernel_log
        return out

    def panic_line(self) -> str:
        """The line of the kernel log that says what happened ("" when none does)."""
        lines = [ln.strip() for ln in self.kernel_log.splitlines() if any(m in ln for m in PANIC_MARKS)]
        return lines[-1][:300] if lines else ""


#: what a HostError says when the connection (not a command) failed: ssh's own exit status, an agent cut off
LOST = ("exited 255", "exit 255", "ended without a result", "did not finish in", "Connection", "connection")


def connection_lost(message: str) -> bool:
    """Whether a HostError's message says the connection to the host was lost (not a command that failed)."""
    return any(m in message for m in LOST)


def tail(text: str) -> str:
    """The last TAIL_LINES lines (at most TAIL_CHARS) of a kernel log."""
    return "\n".join(text.rstrip().splitlines()[-TAIL_LINES:])[-TAIL_CHARS:]


class HostWaiter:
    """Waits for one campaign's host (see the module docstring); `note` gets each progress line."""

    def __init__(self, host: Host, host_wait_s: float, note: Callable[[str], None]) -> None:
        self.host = host
        self.host_wait_s = host_wait_s
        self.note = note

    def boot_id(self, timeout: float = 30.0) -> str | None:
        """The host's boot id, or None when it does not answer."""
        try:
            res = self.host.run(["cat", BOOT_ID], timeout=timeout)
        except HostError:
            return None
        return res.stdout.strip() if res.returncode == 0 and res.stdout.strip() else None

    def wait(self, boot_id_before: str, since: float | None = None) -> Back:
        """Until the host answers again (a dead lab booted again); HostError once host_wait has passed, counted
        from `since` (time.monotonic() when it failed; default: now)."""
        t0 = time.monotonic() if since is None else since
        deadline = t0 + self.host_wait_s
        back = Back(boot_id_before, "", 0.0)
        delay = FIRST_DELAY_S
        while True:
            back.tries += 1
            self.revive(back)
            boot = self.boot_id()
            if boot is not None:
                back.boot_id, back.down_s = boot, time.monotonic() - t0
                break
            if back.tries == 1:
                self.note(
                    f"{self.host.name} does not answer: waiting for it to come back, at most "
                    f"{fmt_duration(self.host_wait_s)} (campaign.host_wait)"
                )
            left = deadline - time.monotonic()
            if left <= 0:
                raise HostError(
                    f"{self.host.name} did not come back within campaign.host_wait "
                    f"({fmt_duration(self.host_wait_s)}; tried {back.tries} times); the campaign stops here, "
                    "and `tankbench run` again resumes it"
                )
            wait = min(delay, left)
            self.note(
                f"waiting for {self.host.name} to answer again: down {fmt_duration(time.monotonic() - t0)}, "
                f"gives up in {fmt_duration(left)} (campaign.host_wait); next try in {fmt_duration(wait)}"
            )
            time.sleep(wait)
            delay = min(delay * 2, MAX_DELAY_S)
        if back.rebooted and not back.kernel_log and not self.host.managed:
            back.kernel_log = self.previous_boot_log()
        return back

    def revive(self, back: Back) -> None:
        """A machine tankbench runs that died is booted again (Host.revive); its console's tail is the kernel log."""
        crashed = self.host.revive(self.note)
        if crashed is not None:
            back.kernel_log = tail(crashed)
            back.relaunched = True

    def previous_boot_log(self) -> str:
        """A real host's kernel log of the boot that crashed (kept only if its journal is persistent)."""
        try:
            res = self.host.run(["journalctl", "-k", "-b", "-1", "-n", str(TAIL_LINES), "--no-pager", "-q"], timeout=60)
        except HostError:
            return ""
        return tail(res.stdout) if res.returncode == 0 else ""


def crashes_found(
    journal: Journal,
    host: Host,
    stale: list[tuple[int, str, int | None, str]],
    boot_id: str,
    test_names: dict[str, str],
    hook: Callable[..., None],
    note: Callable[[str], None],
    resumed_by: str = "",
) -> int:
    """Runs found `running` on start whose host rebooted since (the machine went down under them, e.g. a local
    campaign resumed at boot): each `crashed` row gets the boot ids and the crashed boot's kernel log
    (`journalctl -k -b -1`, if the journal is persistent), and the `crash` and `host-back` hooks are called as
    for a host that went down during the campaign. Returns how many."""
    waiter = HostWaiter(host, 0.0, note)
    log: str | None = None
    count = 0
    for row, test_id, _pid, host_name in stale:
        status, before, old_note = journal.stale_run(row)
        if status != "crashed" or host_name != host.name:
            continue
        if log is None:
            log = waiter.previous_boot_log()
        back = Back(before, boot_id, 0.0, kernel_log=log)
        checks = {**back.checks(), "crash.step": "run", "recovery.found_on_resume": True}
        for unknown in ("recovery.down_s", "recovery.tries", "recovery.lab_rebooted_by_tankbench"):
            del checks[unknown]  # nobody watched the host go down and come back
        if resumed_by:
            checks["recovery.resumed_by"] = resumed_by
        journal.merge_run_checks(row, checks)
        if back.panic_line():
            journal.set_run_note(row, f"{old_note}; kernel: {back.panic_line()}")
        name = test_names.get(test_id, test_id)
        message = f"{host.name} went down during the run of {name} (boot id {before or 'unknown'} -> {boot_id})"
        note(message)
        hook("crash", message, test=name)
        hook("host-back", f"{host.name} is back (rebooted); the campaign goes on with {name}", test=name)
        count += 1
    return count
