"""Resume a campaign after a local reboot (issue 18 item 2): `tankbench run CAMPAIGN --resume-at-boot`.

A campaign that runs on the ZFS host itself dies with its kernel. With --resume-at-boot, `run` installs a systemd
unit of its own for this campaign (/etc/systemd/system/tankbench-resume-<id>.service: tagged by a comment line,
named by tankbench) that starts the same command again at boot, and removes it when the campaign ends in any way
the process sees (done, failed, Ctrl-C, bad input, SIGTERM outside a shutdown). A crash or a shutdown of the
machine leaves it in place: that is what it is for. A unit tankbench did not write is never touched.
See docs/unattended.md.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from types import FrameType

from tankbench.errors import UserError

UNIT_DIR = Path("/etc/systemd/system")
#: the first line of every unit tankbench writes; with the campaign's id on the next line, what makes it ours
MARK = "# Written by tankbench (tankbench run --resume-at-boot): it resumes one campaign at boot."
#: set in the unit's environment: the run it starts knows it was resumed at boot
RESUMED_ENV = "TANKBENCH_RESUMED_BY"
#: environment variables the unit passes on (the run found its Python packages, cache and settings with them)
KEEP_ENV = ("PATH", "PYTHONPATH", "HOME", "LANG", "LC_ALL", "XDG_CACHE_HOME", "VIRTUAL_ENV", "NO_COLOR")
#: at most this many restarts of a run that died of a signal (not an exit status) within START_LIMIT_S
START_LIMIT_BURST = 3
START_LIMIT_S = 3600

Systemctl = Callable[[Sequence[str]], "subprocess.CompletedProcess[str]"]


def unit_name(campaign_id: str) -> str:
    """The unit of one campaign: tankbench-resume-<first 12 of its id>.service."""
    return f"tankbench-resume-{re.sub(r'[^A-Za-z0-9]', '', campaign_id)[:12]}.service"


@dataclass(frozen=True)
class ResumeUnit:
    """What the unit starts: the exact command (absolute paths), where, with which environment."""

    campaign_id: str
    campaign_name: str
    argv: tuple[str, ...]
    cwd: str
    env: tuple[tuple[str, str], ...]
    log: str
    campaign_file: str = ""

    @property
    def name(self) -> str:
        return unit_name(self.campaign_id)


def _quote(arg: str) -> str:
    """One word of ExecStart= or a value of Environment=, quoted for systemd (specifiers and variables off)."""
    esc = arg.replace("\\", "\\\\").replace('"', '\\"').replace("%", "%%").replace("$", "$$")
    return f'"{esc}"'


def _path(path: str) -> str:
    """A path as a unit setting's value (not quoted: systemd takes the rest of the line; specifiers off)."""
    return path.replace("%", "%%")


def unit_text(u: ResumeUnit) -> str:
    """The unit file (pure). Ordered after local filesystems, the ZFS import and mount and the network; a run that
    exits is not restarted (the next boot starts it again), one killed by a signal at most START_LIMIT_BURST
    times an hour: no start loop."""
    env = "\n".join(f"Environment={_quote(f'{k}={v}')}" for k, v in (*u.env, (RESUMED_ENV, u.name)))
    cond = f"ConditionPathExists={_path(u.campaign_file)}\n" if u.campaign_file else ""
    return (
        f"{MARK}\n"
        f"# tankbench-campaign={u.campaign_id}\n"
        "# Removed by tankbench when the campaign ends; to stop it resuming: "
        f"tankbench run {u.campaign_file or u.campaign_name} --no-resume-at-boot\n"
        "[Unit]\n"
        f"Description=tankbench: resume campaign {u.campaign_name} after a reboot\n"
        "After=local-fs.target zfs-import.target zfs-mount.service network-online.target\n"
        "Wants=network-online.target\n"
        f"{cond}"
        f"StartLimitIntervalSec={START_LIMIT_S}\n"
        f"StartLimitBurst={START_LIMIT_BURST}\n"
        "\n[Service]\n"
        "Type=exec\n"
        f"ExecStart={' '.join(_quote(a) for a in u.argv)}\n"
        f"WorkingDirectory={_path(u.cwd)}\n"
        f"{env}\n"
        f"StandardOutput=append:{_path(u.log)}\n"
        f"StandardError=append:{_path(u.log)}\n"
        "Restart=on-abnormal\n"
        "RestartSec=60\n"
        "KillMode=mixed\n"
        "TimeoutStopSec=90\n"
        "\n[Install]\n"
        "WantedBy=multi-user.target\n"
    )


def is_ours(path: Path, campaign_id: str | None = None) -> bool:
    """Whether a unit file was written by tankbench (for this campaign, when given)."""
    try:
        lines = path.read_text(encoding="utf-8", errors="replace").splitlines()[:2]
    except OSError:
        return False
    if len(lines) < 2 or lines[0] != MARK or not lines[1].startswith("# tankbench-campaign="):
        return False
    return campaign_id is None or lines[1] == f"# tankbench-campaign={campaign_id}"


def refusal(host_kind: str, fleet: bool, euid: int, systemd_pid1: bool) -> tuple[str, str] | None:
    """Why resuming at boot cannot be honoured here: (problem, hint), or None (pure)."""
    if fleet:
        return (
            "is for a campaign on one local host, not campaign.hosts",
            'run it on the ZFS host itself with [host] kind = "local" (or --host local)',
        )
    if host_kind != "local":
        return (
            f"needs the campaign to run on this machine (host kind {host_kind!r})",
            "over ssh or in the lab, `tankbench run` already waits for a host that reboots (campaign.host_wait); "
            "resuming at boot is for a campaign run on the ZFS host itself (--host local)",
        )
    if euid != 0:
        return ("installs a systemd unit: it needs root", "run it as root (e.g. with sudo)")
    if not systemd_pid1:
        return (
            "needs systemd as PID 1 (/run/systemd/system does not exist here)",
            "on a machine without systemd, start `tankbench run` again after a reboot (it resumes the campaign)",
        )
    return None


def systemd_is_pid1() -> bool:
    """systemd's own test (sd_booted): /run/systemd/system exists only when systemd is the init."""
    return os.path.isdir("/run/systemd/system")


def check(campaign: str, asked_by: str, host_kind: str, fleet: bool) -> None:
    """UserError (naming the campaign file and what asked: the flag or the key) when resuming at boot cannot be
    honoured on this machine; called before anything is written."""
    why = refusal(host_kind, fleet, os.geteuid(), systemd_is_pid1())
    if why is not None:
        raise UserError(f"{campaign}: {asked_by} {why[0]}", why[1])


def _systemctl(args: Sequence[str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["systemctl", *args], capture_output=True, text=True, timeout=120)


def _check(res: subprocess.CompletedProcess[str], what: str) -> None:
    if res.returncode != 0:
        raise UserError(
            f"systemctl {what} failed (exit {res.returncode}): {(res.stderr or res.stdout).strip()[:300]}",
            "see `systemctl status` and the journal; tankbench did not start the campaign",
        )


def install(
    u: ResumeUnit, note: Callable[[str], None], *, unit_dir: Path = UNIT_DIR, systemctl: Systemctl = _systemctl
) -> Path:
    """Write the unit (atomically), reload systemd, enable it; refuses to overwrite a file that is not ours."""
    path = unit_dir / u.name
    if path.exists() and not is_ours(path, u.campaign_id):
        raise UserError(
            f"{path} exists and was not written by tankbench for this campaign",
            "tankbench never touches a unit it did not write: move it away, or run without --resume-at-boot",
        )
    text = unit_text(u)
    tmp = path.with_name(f".{u.name}.tmp")
    with open(tmp, "w", encoding="utf-8") as f:
        f.write(text)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)
    try:
        _check(systemctl(["daemon-reload"]), "daemon-reload")
        _check(systemctl(["enable", u.name]), f"enable {u.name}")
        os.sync()  # the unit and its symlink must survive the very crash they are for
    except BaseException:
        remove(u.campaign_id, lambda _m: None, unit_dir=unit_dir, systemctl=systemctl)
        raise
    note(
        f"resume at boot: installed and enabled {path}: after a reboot systemd runs this campaign again "
        f"(progress in {u.log}); it is removed when the campaign ends. To undo: "
        f"`tankbench run {u.campaign_file or u.campaign_name} --no-resume-at-boot`"
    )
    return path


def remove(
    campaign_id: str, note: Callable[[str], None], *, unit_dir: Path = UNIT_DIR, systemctl: Systemctl = _systemctl
) -> bool:
    """Disable and delete this campaign's unit if tankbench wrote it; False when there is none of ours."""
    name = unit_name(campaign_id)
    path = unit_dir / name
    if not is_ours(path, campaign_id):
        return False
    systemctl(["disable", name])  # its symlink goes; a unit running this very process keeps running
    path.unlink(missing_ok=True)
    systemctl(["daemon-reload"])
    note(f"resume at boot: removed {path} (disabled)")
    return True


def plan(
    campaign_id: str,
    campaign_name: str,
    campaign: str,
    journal: str,
    options: Sequence[str],
    env: Mapping[str, str],
) -> ResumeUnit:
    """The unit for `run`: this Python, `-m tankbench run <campaign> --journal <journal>` (absolute), the options
    given (confirmations included), the environment it needs; progress appended beside the journal."""
    journal = os.path.abspath(journal)
    campaign_file = os.path.abspath(campaign) if os.path.isfile(campaign) else ""
    argv = (
        os.path.abspath(sys.executable),
        "-m",
        "tankbench",
        "run",
        campaign_file or campaign,
        "--journal",
        journal,
        "--resume-at-boot",
        *options,
    )
    keep = tuple((k, env[k]) for k in sorted(env) if (k in KEEP_ENV or k.startswith("TANKBENCH_")) and k != RESUMED_ENV)
    log = os.path.join(os.path.dirname(journal), "resume-at-boot.log")
    for what, value in (("the campaign file", campaign_file), ("the journal", journal), ("the directory", os.getcwd())):
        if "\n" in value or not value.isprintable():
            raise UserError(
                f"{what} {value!r} has a line break or control character: a systemd unit cannot name it",
                "rename it (or run from another directory) to use --resume-at-boot",
            )
    return ResumeUnit(campaign_id, campaign_name, argv, os.getcwd(), keep, log, campaign_file)


def resumed_by() -> str:
    """The unit that started this run at boot ("" when a person did)."""
    return os.environ.get(RESUMED_ENV, "")


def system_stopping(systemctl: Systemctl = _systemctl) -> bool:
    """The machine is shutting down or rebooting (`systemctl is-system-running` says stopping)."""
    try:
        return systemctl(["is-system-running"]).stdout.strip() == "stopping"
    except (OSError, subprocess.SubprocessError):
        return False


@contextmanager
def kept_until_end(u: ResumeUnit, note: Callable[[str], None]) -> Iterator[None]:
    """Install the unit for the campaign's lifetime: removed however it ends, except a crash or a shutdown of
    the machine. SIGTERM during a shutdown ends the run and keeps the unit (the next boot resumes); any other
    SIGTERM (`kill`, `systemctl stop`) stops the campaign as Ctrl-C does, and the unit goes."""
    install(u, note)
    shutdown = False

    def on_term(signum: int, frame: FrameType | None) -> None:
        nonlocal shutdown
        if system_stopping():
            shutdown = True
            note("resume at boot: the machine is shutting down; the campaign resumes after the reboot")
        raise KeyboardInterrupt

    old = signal.signal(signal.SIGTERM, on_term)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, old)
        if not shutdown:
            remove(u.campaign_id, note)
