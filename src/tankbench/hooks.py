"""The campaign's event hook (campaign.hook, issue 18 item 6): a command tankbench runs on campaign events,
so a user wires mail or chat notifications with tools they already have. See docs/unattended.md."""

from __future__ import annotations

import os
import subprocess
from collections.abc import Callable, Sequence

#: what the hook is called for
EVENTS = ("crash", "host-down", "host-back", "end")
HOOK_TIMEOUT_S = 60.0


def call_hook(
    argv: Sequence[str],
    event: str,
    note: Callable[[str], None],
    *,
    campaign: str,
    journal: str,
    host: str,
    message: str,
    test: str = "",
    exit_status: int | None = None,
) -> None:
    """Run `argv + [event]` with the event's facts in TANKBENCH_* environment variables. A hook that fails,
    hangs (ended after 60 s) or is missing is reported in the progress and never stops the campaign."""
    if not argv:
        return
    env = dict(
        os.environ,
        TANKBENCH_EVENT=event,
        TANKBENCH_CAMPAIGN=campaign,
        TANKBENCH_JOURNAL=os.path.abspath(journal),
        TANKBENCH_HOST=host,
        TANKBENCH_TEST=test,
        TANKBENCH_MESSAGE=message,
        TANKBENCH_EXIT_STATUS="" if exit_status is None else str(exit_status),
    )
    try:
        cp = subprocess.run(
            [*argv, event],
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            timeout=HOOK_TIMEOUT_S,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired) as e:
        note(f"warning: campaign.hook {argv[0]} ({event}) failed: {e}")
        return
    if cp.returncode:
        tail = cp.stderr.decode(errors="replace").strip()[-300:]
        note(f"warning: campaign.hook {argv[0]} ({event}) exited {cp.returncode}" + (f": {tail}" if tail else ""))
