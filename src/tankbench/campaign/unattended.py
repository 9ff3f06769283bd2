"""Campaign keys for running unattended (issue 18): the progress watchdog, crash retries, waiting for a host
that went down, and the event hook. Parsed from [campaign] by parse.py, used by the runner."""

from __future__ import annotations

import shlex
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from tankbench.keys import Keys

#: the keys this module reads from [campaign]
UNATTENDED_KEYS = ("hung_after", "late_max", "crash_retries", "host_wait", "hook", "resume_at_boot", "on_hang")
#: what happens when an ssh host's I/O hangs (a lab, tankbench's own, is always rebooted): `stop` reports it, calls
#: the hooks and stops the campaign (exit 3); `reboot` reboots it over ssh, waits for it and goes on
ON_HANG = ("stop", "reboot")


@dataclass(frozen=True)
class Unattended:
    """How a campaign behaves without a person watching it."""

    #: a run whose fio made no I/O progress (and no drain went on) for this long is hung: ended, status timeout
    hung_after_s: float = 300.0
    #: a run still making progress this long past its expected end is ended anyway (status timeout)
    late_max_s: float = 86400.0
    #: how many times a test that crashed the host is tried again before it is skipped
    crash_retries: int = 1
    #: how long to wait for a host that stopped answering before the campaign stops (exit status 3)
    host_wait_s: float = 1800.0
    #: a command run on campaign events (argv; empty: none)
    hook: tuple[str, ...] = ()
    #: run on the ZFS host itself: a systemd unit resumes the campaign after a reboot (resumeboot.py)
    resume_at_boot: bool = False
    #: the campaign still names the retired deadline_grace (read, ignored, warned about at run time)
    legacy_grace: bool = False
    #: an ssh host whose I/O hangs: "stop" (report, hooks, exit 3) or "reboot" (over ssh, wait, go on); ON_HANG
    on_hang: str = "stop"


def parse_unattended(keys: Keys, camp: Mapping[str, Any]) -> Unattended:
    """The unattended keys of [campaign], validated."""
    hook = camp.get("hook", [])
    if isinstance(hook, str):
        try:
            hook = shlex.split(hook)
        except ValueError as e:
            raise keys.err("campaign.hook", hook, f"not a command line ({e})", "check its quotes") from None
    if not isinstance(hook, list) or not all(isinstance(a, str) and a for a in hook):
        raise keys.err(
            "campaign.hook", hook, "must be a command", 'e.g. hook = "/usr/local/bin/notify" or ["notify", "--mail"]'
        )
    hung = keys.duration("campaign.hung_after", camp.get("hung_after", "5m"), positive=True)
    late = keys.duration("campaign.late_max", camp.get("late_max", "24h"), positive=True)
    if late < hung:
        raise keys.err(
            "campaign.late_max",
            camp.get("late_max"),
            f"is shorter than hung_after ({hung:g} s)",
            "late_max is the generous cap for late runs that still make progress: make it hours, not seconds",
        )
    return Unattended(
        hung_after_s=hung,
        late_max_s=late,
        crash_retries=keys.integer("campaign.crash_retries", camp.get("crash_retries", 1), 0, 1000),
        host_wait_s=keys.duration("campaign.host_wait", camp.get("host_wait", "30m")),
        hook=tuple(hook),
        resume_at_boot=keys.boolean("campaign.resume_at_boot", camp.get("resume_at_boot", False)),
        legacy_grace="deadline_grace" in camp,
        on_hang=keys.choice("campaign.on_hang", camp.get("on_hang", "stop"), ON_HANG),
    )


def on_hang_note(u: Unattended, host_kind: str) -> str:
    """What the campaign will do if its ssh host's I/O hangs, said when it starts ("" for a lab, always rebooted, and
    for this machine, which tankbench cannot reboot under itself: the campaign stops and says so)."""
    if host_kind != "ssh":
        return ""
    if u.on_hang == "reboot":
        return (
            "campaign.on_hang = reboot: if the host's I/O hangs (no I/O completes, fio stuck in the kernel), tankbench "
            "reboots it over ssh (sysrq), waits for it and goes on"
        )
    return (
        'if the host\'s I/O hangs, tankbench reports it, calls the hooks and stops (campaign.on_hang = "reboot" '
        "would reboot it over ssh and go on)"
    )


def legacy_grace_note(u: Unattended) -> str:
    """The warning for a campaign that still sets deadline_grace ("" when it does not)."""
    if not u.legacy_grace:
        return ""
    return (
        "warning: campaign.deadline_grace is no longer used: the watchdog ends a run only when it makes no "
        f"progress for campaign.hung_after ({u.hung_after_s:g} s), or at campaign.late_max "
        f"({u.late_max_s:g} s) past its expected end; remove deadline_grace (see docs/unattended.md)"
    )
