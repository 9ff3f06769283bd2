"""Noise checks before each run: scrub/resilver, other I/O on the target's disks, swap traffic, load.

The agent's `noise` op measures (facts); small check objects judge them (`available`/`noisy`/`show`/`fix`,
after pyperf's `_system.py`); `decide` is the pure decision (run, wait or refuse) from the facts, the
campaign's policy and the time already waited; `before_run` is the waiting loop the runner calls.

Campaign table (all keys optional; actions are "wait", "refuse", "warn" or "off"):

    [preflight]
    scrub = "wait"        # a scrub or resilver runs on the pool
    disk_io = "warn"      # other I/O on the target's disks during a short window
    swap = "warn"         # the host swaps pages in or out
    load = "warn"         # load1 above `load_per_cpu` x CPUs
    max_wait = "30m"      # "wait" gives up after this and runs with a warning
    poll = "10s"          # how long to wait between two measurements
    window = "1s"         # how long each measurement watches disk and swap counters
    disk_iops = 10        # disk_io thresholds: I/Os per second and bytes per second
    disk_bw = "1M"
    load_per_cpu = 1.0
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

from tankbench.errors import SpecError
from tankbench.keys import MAX_DURATION_S
from tankbench.units import MAX_SIZE, fmt_duration, parse_duration, parse_size

if TYPE_CHECKING:  # the campaign parser reads the policies here without loading hosts
    from tankbench.hosts.base import Host
from tankbench.zfs.parse import parse_zpool_status

if TYPE_CHECKING:
    from tankbench.agent import NoiseRequest

ACTIONS = ("wait", "refuse", "warn", "off")


@dataclass(frozen=True)
class PreflightPolicy:
    """What the campaign wants done about each kind of noise, and the thresholds that define noise."""

    scrub: str = "wait"
    disk_io: str = "warn"
    swap: str = "warn"
    load: str = "warn"
    max_wait_s: float = 1800.0
    poll_s: float = 10.0
    window_s: float = 1.0
    disk_iops: float = 10.0
    disk_bw_bytes: float = float(1 << 20)
    load_per_cpu: float = 1.0

    def action(self, check: str) -> str:
        """The action for a check by name ("scrub", "disk_io", "swap", "load")."""
        return str(getattr(self, check))


_ACTION_KEYS = ("scrub", "disk_io", "swap", "load")
_DURATION_KEYS = {"max_wait": "max_wait_s", "poll": "poll_s", "window": "window_s"}
_NUMBER_KEYS = {"disk_iops": "disk_iops", "load_per_cpu": "load_per_cpu"}
#: every key of a campaign's [preflight] table
PREFLIGHT_KEYS = (*_ACTION_KEYS, *_DURATION_KEYS, *_NUMBER_KEYS, "disk_bw")


def policy_from_table(table: Mapping[str, Any], source: str = "") -> PreflightPolicy:
    """A PreflightPolicy from a campaign's [preflight] table; bad keys or values raise SpecError (exit 2)."""
    policy = PreflightPolicy()
    changes: dict[str, Any] = {}
    for key, value in table.items():
        where = f"preflight.{key}"
        if key in _ACTION_KEYS:
            if value not in ACTIONS:
                raise SpecError(source, where, value, "not a preflight action", f"use one of {', '.join(ACTIONS)}")
            changes[key] = value
        elif key in _DURATION_KEYS:
            seconds = _parsed(parse_duration, value, source, where, 'a duration like "30m"')
            if seconds > MAX_DURATION_S:  # as Keys.duration: beyond a year a value is a typo
                raise SpecError(source, where, value, "is longer than a year", 'use a duration like "30m"')
            changes[_DURATION_KEYS[key]] = seconds
        elif key == "disk_bw":
            changes["disk_bw_bytes"] = float(_parsed(parse_size, value, source, where, 'a size per second like "1M"'))
            if changes["disk_bw_bytes"] > MAX_SIZE:
                raise SpecError(source, where, value, "is larger than 1 EiB per second", 'use a size like "1M"')
        elif key in _NUMBER_KEYS:
            if isinstance(value, bool) or not isinstance(value, int | float) or not 0 <= value < math.inf:
                raise SpecError(source, where, value, "not a number >= 0", f"e.g. {key} = 10")
            changes[_NUMBER_KEYS[key]] = float(value)
        else:
            known = sorted(PREFLIGHT_KEYS)
            raise SpecError(source, where, value, "unknown key", f"known keys: {', '.join(known)}")
    if changes.get("window_s", policy.window_s) <= 0:
        raise SpecError(source, "preflight.window", table.get("window"), "must be longer than 0 s", 'e.g. "1s"')
    if changes.get("poll_s", policy.poll_s) <= 0:  # the wait would poll without pausing
        raise SpecError(source, "preflight.poll", table.get("poll"), "must be longer than 0 s", 'e.g. "10s"')
    return replace(policy, **changes)


def _parsed(parse: Callable[[Any], float], value: Any, source: str, where: str, hint: str) -> float:
    try:
        out = float(parse(value))
    except (ValueError, TypeError) as e:
        raise SpecError(source, where, value, str(e) or "not understood", f"use {hint}") from None
    if out < 0:
        raise SpecError(source, where, value, "must not be negative", f"use {hint}")
    return out


@dataclass(frozen=True)
class NoiseFacts:
    """What the agent's `noise` op measured on the host just before a run."""

    pool: str | None = None
    pool_state: str = ""
    scan: str | None = None  # "scrub" | "resilver" | None
    zpool_error: str = ""
    devices: tuple[str, ...] = ()
    disk_iops: float = 0.0
    disk_bw_bytes: float = 0.0
    swap_in_pages: int = 0
    swap_out_pages: int = 0
    window_s: float = 0.0
    window_from: str = "wait"  # "wait": the op watched for window_s; else where a borrowed window began
    load1: float = 0.0
    cpu_count: int = 1
    dirty_bytes: int = 0


def facts_from_agent(res: Mapping[str, Any], pool: str | None = None) -> NoiseFacts:
    """NoiseFacts from the agent's `noise` result (pure)."""
    status = res.get("zpool_status") or {}
    parsed: dict[str, Any] = {}
    error = ""
    if pool:
        if status.get("rc") == 0:
            parsed = parse_zpool_status(str(status.get("stdout", "")))
        else:
            error = str(status.get("stderr", "")).strip()[-300:] or f"zpool status exited {status.get('rc')}"
    disk = res.get("disk") or {}
    return NoiseFacts(
        pool=pool,
        pool_state=str(parsed.get("state") or ""),
        scan=parsed.get("scan_active"),
        zpool_error=error,
        devices=tuple(res.get("devices_seen") or ()),
        disk_iops=float(disk.get("iops", 0.0)),
        disk_bw_bytes=float(disk.get("bw_bytes", 0.0)),
        swap_in_pages=int(res.get("swap_in_pages", 0)),
        swap_out_pages=int(res.get("swap_out_pages", 0)),
        window_s=float(res.get("window_s", 0.0)),
        window_from=str(res.get("window_from", "wait")),
        load1=float(res.get("load1", 0.0)),
        cpu_count=max(1, int(res.get("cpu_count") or 1)),
        dirty_bytes=int(res.get("dirty_bytes", 0)),
    )


# ---------------------------------------------------------------- checks
class Check:
    """One kind of noise: whether it can be judged here, whether it is present, what was seen, the fix."""

    name = ""

    def available(self, facts: NoiseFacts) -> bool:
        """Whether the facts can say anything about this noise (e.g. no pool: no scrub check)."""
        return True

    def noisy(self, facts: NoiseFacts, policy: PreflightPolicy) -> bool:
        """Whether this noise is present now."""
        raise NotImplementedError

    def show(self, facts: NoiseFacts) -> str:
        """What was measured, in words."""
        raise NotImplementedError

    def fix(self, facts: NoiseFacts) -> str:
        """What the user can do about it."""
        raise NotImplementedError


class ScanCheck(Check):
    name = "scrub"

    def available(self, facts: NoiseFacts) -> bool:
        return bool(facts.pool) and not facts.zpool_error

    def noisy(self, facts: NoiseFacts, policy: PreflightPolicy) -> bool:
        return facts.scan is not None

    def show(self, facts: NoiseFacts) -> str:
        return f"a {facts.scan} is running on pool {facts.pool} (state {facts.pool_state or '?'})"

    def fix(self, facts: NoiseFacts) -> str:
        verb = "zpool scrub -p" if facts.scan == "scrub" else "wait for the resilver to finish, or"
        return f'{verb} {facts.pool} (pause it) before benchmarking, or set preflight.scrub = "wait"'


class DiskIoCheck(Check):
    name = "disk_io"

    def available(self, facts: NoiseFacts) -> bool:
        return bool(facts.devices) and facts.window_s > 0

    def noisy(self, facts: NoiseFacts, policy: PreflightPolicy) -> bool:
        return facts.disk_iops > policy.disk_iops or facts.disk_bw_bytes > policy.disk_bw_bytes

    def show(self, facts: NoiseFacts) -> str:
        return (
            f"other I/O on {', '.join(facts.devices)}: {facts.disk_iops:.0f} IOPS, "
            f"{facts.disk_bw_bytes / 1048576:.1f} MiB/s over {facts.window_s:.1f} s before the run"
        )

    def fix(self, facts: NoiseFacts) -> str:
        return "stop other workloads on these disks (VMs, backups, indexing) or raise preflight.disk_iops/disk_bw"


class SwapCheck(Check):
    name = "swap"

    def noisy(self, facts: NoiseFacts, policy: PreflightPolicy) -> bool:
        return facts.swap_in_pages + facts.swap_out_pages > 0

    def show(self, facts: NoiseFacts) -> str:
        return (
            f"the host swapped {facts.swap_in_pages} page(s) in and {facts.swap_out_pages} out "
            f"in {facts.window_s:.1f} s"
        )

    def fix(self, facts: NoiseFacts) -> str:
        return "free memory (fewer VMs, a smaller zfs_arc_max) so the benchmark does not compete with swapping"


class LoadCheck(Check):
    name = "load"

    def noisy(self, facts: NoiseFacts, policy: PreflightPolicy) -> bool:
        return facts.load1 > policy.load_per_cpu * facts.cpu_count

    def show(self, facts: NoiseFacts) -> str:
        return f"load1 is {facts.load1:.2f} on {facts.cpu_count} CPU(s)"

    def fix(self, facts: NoiseFacts) -> str:
        return "stop other work on the host, or add a [cooldown] with load1 so runs start on a quiet host"


CHECKS: tuple[Check, ...] = (ScanCheck(), DiskIoCheck(), SwapCheck(), LoadCheck())


# ---------------------------------------------------------------- the decision
@dataclass(frozen=True)
class Finding:
    """Noise one check found, with the campaign's action for it."""

    check: str
    action: str
    message: str
    fix: str


@dataclass(frozen=True)
class Decision:
    """`run`, `wait` (measure again after policy.poll_s) or `refuse`, and why."""

    action: str
    findings: tuple[Finding, ...] = ()


def findings(facts: NoiseFacts, policy: PreflightPolicy, checks: Sequence[Check] = CHECKS) -> tuple[Finding, ...]:
    """The noise present now, for every check the policy does not switch off (pure)."""
    out = []
    for c in checks:
        action = policy.action(c.name)
        if action != "off" and c.available(facts) and c.noisy(facts, policy):
            out.append(Finding(c.name, action, c.show(facts), c.fix(facts)))
    return tuple(out)


def decide(facts: NoiseFacts, policy: PreflightPolicy, waited_s: float, checks: Sequence[Check] = CHECKS) -> Decision:
    """Refuse if any noise is set to "refuse"; wait while noise set to "wait" remains and another poll fits in
    max_wait; otherwise run (warnings are the findings). Pure."""
    found = findings(facts, policy, checks)
    if any(f.action == "refuse" for f in found):
        return Decision("refuse", found)
    if any(f.action == "wait" for f in found) and waited_s + policy.poll_s <= policy.max_wait_s:
        return Decision("wait", found)
    return Decision("run", found)


@dataclass(frozen=True)
class PreflightVerdict:
    """What before_run saw and did: the last facts, seconds waited, `run` or `refuse`, warnings to record."""

    facts: NoiseFacts
    waited_s: float
    action: str
    warnings: tuple[str, ...] = ()
    findings: tuple[Finding, ...] = field(default_factory=tuple)

    def checks(self) -> dict[str, Any]:
        """Journal `checks` fields (prefix "preflight.") for the run that follows."""
        f = self.facts
        out: dict[str, Any] = {
            "preflight.waited_s": round(self.waited_s, 3),
            "preflight.action": self.action,
            "preflight.noise": [x.check for x in self.findings],
            "preflight.warnings": list(self.warnings),
            "preflight.load1": f.load1,
            "preflight.swap_pages": f.swap_in_pages + f.swap_out_pages,
            "preflight.dirty_bytes": f.dirty_bytes,
            "preflight.window_s": f.window_s,
            "preflight.window_from": f.window_from,
        }
        if f.devices:
            out["preflight.disk_iops"] = f.disk_iops
            out["preflight.disk_bw_bytes"] = f.disk_bw_bytes
        if f.pool:
            out["preflight.scan"] = f.scan
        return out

    def refusal(self) -> tuple[str, str]:
        """(message, hint) for the UserError the runner raises when action == "refuse"."""
        refused = [x for x in self.findings if x.action == "refuse"] or list(self.findings)
        return (
            "; ".join(f'{x.message} (preflight.{x.check} = "refuse")' for x in refused),
            "; ".join(x.fix for x in refused) + "; then run again: finished runs are kept",
        )


def _warnings(found: Sequence[Finding], waited_s: float) -> tuple[str, ...]:
    out = []
    for f in found:
        if f.action == "wait":
            out.append(f"{f.message}, still after waiting {fmt_duration(waited_s)} (preflight.max_wait): {f.fix}")
        else:
            out.append(f"{f.message}: {f.fix}")
    return tuple(out)


def measure(
    host: Host,
    pool: str | None,
    devices: Sequence[str],
    policy: PreflightPolicy,
    since: Mapping[str, Any] | None = None,
) -> NoiseFacts:
    """One `noise` measurement on the host: over policy.window_s, or with no wait over the time since `since`
    (the agent's counters at the previous run's end or the cooldown's start; `since["from"]` names which)."""
    req = noise_request(pool, devices, policy, since)
    req["op"] = "noise"
    return facts_from_agent(host.call_agent(req, timeout=policy.window_s + 120), pool)


def noise_request(
    pool: str | None, devices: Sequence[str], policy: PreflightPolicy, since: Mapping[str, Any] | None = None
) -> NoiseRequest:
    """What the agent's noise measurement needs (the `noise` op, or the `noise` field of a `fio_run`). With
    `since` the window starts there (no wait); disk or swap noise seen in such a borrowed window (it may hold
    tankbench's own layout I/O) is watched again over a fresh window before it counts (`confirm`)."""
    req: NoiseRequest = {"pool": pool, "devices": list(devices), "window_s": policy.window_s}
    if since:
        req["since"] = dict(since)
        req["since_from"] = str(since.get("from", "earlier"))
        confirm: dict[str, Any] = {}
        if policy.disk_io != "off":
            confirm.update(disk_iops=policy.disk_iops, disk_bw_bytes=policy.disk_bw_bytes)
        if policy.swap != "off":
            confirm["swap"] = True
        req["confirm"] = confirm
    return req


def deferrable(policy: PreflightPolicy, pool: str | None) -> bool:
    """Whether the noise check can be measured by the run's own agent request, just before fio starts (one
    round trip less per run): true when no check that applies here can hold or stop the run (all "warn"/"off")."""
    checks = ["disk_io", "swap", "load"] + (["scrub"] if pool else [])
    return all(policy.action(c) in ("warn", "off") for c in checks)


def verdict_of(res: Mapping[str, Any], pool: str | None, policy: PreflightPolicy) -> PreflightVerdict:
    """The verdict on a noise measurement a run's own request made (see deferrable): `run`, with warnings."""
    facts = facts_from_agent(res, pool)
    decision = decide(facts, policy, 0.0)
    return PreflightVerdict(
        facts=facts, waited_s=0.0, action="run", warnings=_warnings(decision.findings, 0.0), findings=decision.findings
    )


def before_run(
    host: Host,
    pool: str | None,
    devices: Sequence[str],
    policy: PreflightPolicy,
    *,
    note: Callable[[str], None] | None = None,
    sleep: Callable[[float], None] = time.sleep,
    clock: Callable[[], float] = time.monotonic,
    since: Mapping[str, Any] | None = None,
) -> PreflightVerdict:
    """Measure noise, and wait (polling) while the policy says wait; return the verdict for the next run.

    `pool` is the ZFS pool under the target (None for raw/file targets), `devices` the physical disks the
    run will sample (names as in /proc/diskstats). With `since` the first window is the time since those
    counters (no wait; see noise_request). Never acts on the pool itself (no scrub is paused)."""
    t0 = clock()
    while True:
        facts = measure(host, pool, devices, policy, since)
        since = None
        waited = clock() - t0
        decision = decide(facts, policy, waited)
        if decision.action != "wait":
            break
        if note:
            note(f"preflight: waiting: {'; '.join(f.message for f in decision.findings)}")
        sleep(policy.poll_s)
    warnings = _warnings(decision.findings, waited) if decision.action == "run" else ()
    return PreflightVerdict(
        facts=facts, waited_s=waited, action=decision.action, warnings=warnings, findings=decision.findings
    )
