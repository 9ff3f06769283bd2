"""campaign.hook (issue 18 item 6): a real local campaign calls the user's command on its end, with the event
as the last argument and its facts in TANKBENCH_* variables; deadline_grace is read, ignored and warned about."""

from __future__ import annotations

import stat
from pathlib import Path

from tests.conftest import tankbench
from tests.integration.test_run_local import write_campaign

HOOK = """#!/bin/sh
echo "$1|$TANKBENCH_EVENT|$TANKBENCH_CAMPAIGN|$TANKBENCH_HOST|$TANKBENCH_EXIT_STATUS|$TANKBENCH_MESSAGE" >> {log}
exit {rc}
"""


def test_the_hook_is_called_on_campaign_end_and_a_failing_hook_stops_nothing(tmp_path: Path) -> None:
    log = tmp_path / "events.log"
    hook = tmp_path / "notify.sh"
    hook.write_text(HOOK.format(log=log, rc=0))
    hook.chmod(hook.stat().st_mode | stat.S_IXUSR)
    c = write_campaign(tmp_path, rw='["read"]')
    text = c.read_text().replace('host = "local"', f'host = "local"\nhook = "{hook}"\ndeadline_grace = "60s"')
    c.write_text(text)
    j = tmp_path / "j.sqlite"
    res = tankbench("run", str(c), "--journal", str(j), "--no-report", cwd=tmp_path)
    assert res.returncode == 0, res.stderr
    assert "campaign.deadline_grace is no longer used" in res.stdout + res.stderr
    events = log.read_text().splitlines()
    assert len(events) == 1, events
    arg, event, campaign, host, status, message = events[0].split("|", 5)
    assert (arg, event, campaign, status) == ("end", "end", "itest", "0") and host
    assert "2 run(s) done" in message
    # a hook that fails is a warning, never the campaign's failure
    hook.write_text(HOOK.format(log=log, rc=7))
    j2 = tmp_path / "j2.sqlite"
    res = tankbench("run", str(c), "--journal", str(j2), "--no-report", cwd=tmp_path)
    assert res.returncode == 0, res.stderr
    assert "exited 7" in res.stdout + res.stderr


def test_show_from_another_shell_during_a_run(tmp_path: Path) -> None:
    """`tankbench show` works while `tankbench run` holds the journal (issue 18 item 6: know without watching)."""
    import json
    import subprocess
    import sys

    c = write_campaign(tmp_path, runtime="3s", rw='["read"]')
    j = tmp_path / "j.sqlite"
    proc = subprocess.Popen(
        [sys.executable, "-m", "tankbench", "run", str(c), "--journal", str(j), "--no-report"],
        cwd=tmp_path,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        seen = None
        while proc.poll() is None:
            if j.exists():
                res = tankbench("show", "--journal", str(j), "--json", cwd=tmp_path)
                assert res.returncode == 0, res.stderr
                states = {t["state"] for t in json.loads(res.stdout)} if res.stdout.strip() else set()
                if "running" in states:
                    seen = states
                    break
        assert seen, "show never saw the run in flight"
    finally:
        assert proc.wait(timeout=300) == 0
