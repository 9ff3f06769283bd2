"""The [campaign] table: name, durations, repeats and schedule, cooldown, copy and fill sizes, run mode."""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from tankbench.campaign.designkey import parse_design
from tankbench.campaign.schema import Cooldown, Schedule
from tankbench.campaign.unattended import parse_unattended
from tankbench.campaign.vocab import (
    COOLDOWN_KEYS,
    NAME_RE,
    ORDERS,
    RACING_KEYS,
    REPEATS_KEYS,
    RUN_MODES,
    SS_RE,
    WARMUP_MODES,
)
from tankbench.keys import Keys
from tankbench.model import short_hash
from tankbench.units import parse_threshold


def parse_campaign(keys: Keys, camp: Mapping[str, Any]) -> dict[str, Any]:
    """The [campaign] table's settings, as Spec's fields (unknown keys are refused by the caller)."""
    name = keys.string("campaign.name", camp.get("name", ""))
    if not NAME_RE.match(name):
        raise keys.err(
            "campaign.name", name, "must be 1-64 letters, digits, '.', '_' or '-'", 'e.g. name = "zvol-vs-dataset"'
        )
    mode, min_throughput = _run_mode(keys, camp)
    runtime = 0.0 if mode == "size" else keys.duration("campaign.runtime", camp.get("runtime", "60s"), positive=True)
    ramp = keys.duration("campaign.ramp", camp.get("ramp", "0s"))
    schedule = _schedule(keys, camp, runtime, name)
    return {
        "name": name,
        "description": keys.string("campaign.description", camp.get("description", "")),
        "runtime": runtime,
        "ramp": ramp,
        "warmup": schedule.warmup != "none",
        "repeats": schedule.repeats_max,
        "schedule": schedule,
        # retired by hung_after / late_max: still read (old campaigns stay valid), ignored, warned about on run
        "deadline_grace": keys.duration("campaign.deadline_grace", camp.get("deadline_grace", "60s")),
        "timing_threshold": _threshold(keys, camp.get("timing_threshold", "10%")),
        "max_tests": keys.integer("campaign.max_tests", camp.get("max_tests", 5000), 1, 1_000_000),
        "drain_max": keys.duration("campaign.drain_max", camp.get("drain_max", "10m"), positive=True),
        "sample_interval": keys.duration("campaign.sample_interval", camp.get("sample_interval", "1s"), positive=True),
        "cooldown": _cooldown(keys, camp.get("cooldown", "0s")),
        "copy_size": keys.size("campaign.copy_size", camp.get("copy_size", "256M")),
        "fill_room": keys.size("campaign.fill_room", camp.get("fill_room", "64M")),
        "mode": mode,
        "min_throughput": min_throughput,
        "unattended": parse_unattended(keys, camp),  # hung_after, late_max, crash_retries, host_wait, hook
        "design": parse_design(keys, camp.get("design", "exhaustive")),  # which tests a run measures (issue 29)
    }


def _run_mode(keys: Keys, camp: Mapping[str, Any]) -> tuple[str, int]:
    """campaign.mode: "time" (runtime) or "size" (fio ends when each job has moved its size)."""
    mode = keys.choice("campaign.mode", camp.get("mode", "time"), RUN_MODES)
    if mode == "size" and "runtime" in camp:
        raise keys.err(
            "campaign.runtime",
            camp["runtime"],
            'has no meaning with mode = "size"',
            "remove runtime: each job ends after its size; campaign.min_throughput bounds the watchdog",
        )
    if mode == "time" and "min_throughput" in camp:
        raise keys.err(
            "campaign.min_throughput",
            camp["min_throughput"],
            'applies only to mode = "size"',
            'remove it, or set mode = "size"',
        )
    floor = keys.size("campaign.min_throughput", camp.get("min_throughput", "1M"))
    return mode, floor


def _threshold(keys: Keys, value: object) -> float:
    """campaign.timing_threshold in units.parse_threshold's grammar; a fraction of the expected time only (the
    runner's verdict has no seconds form; [report] timing_threshold takes "30s")."""
    key = "campaign.timing_threshold"
    try:
        fraction, seconds = parse_threshold(value)
    except ValueError:
        fraction, seconds = -1.0, 0.0
    if isinstance(value, str) and value.strip().endswith("s"):
        raise keys.err(
            key,
            value,
            "must be a percentage (seconds apply only to [report] timing_threshold)",
            'e.g. "10%" (wall time allowed beyond ramp + runtime)',
        )
    if fraction < 0 or seconds:
        raise keys.err(key, value, "must be a percentage", 'e.g. "10%" (wall time allowed beyond ramp + runtime)')
    return fraction


def _cooldown(keys: Keys, value: object) -> Cooldown:
    if value == "auto":
        value = {"auto": True}
    if not isinstance(value, dict):
        return Cooldown(fixed_s=keys.duration("campaign.cooldown", value))
    keys.unknown_keys(value, COOLDOWN_KEYS, "campaign.cooldown.")
    auto = keys.boolean("campaign.cooldown.auto", value.get("auto", False))
    fixed = keys.duration("campaign.cooldown.fixed", value.get("fixed", "0s"))
    max_s = keys.duration("campaign.cooldown.max", value.get("max", "5m"), positive=True)
    load1 = value.get("load1", "auto" if auto else None)
    load1_auto = auto and load1 == "auto"
    if load1_auto or load1 is False:
        load1 = None
    elif load1 is not None and (isinstance(load1, bool) or not isinstance(load1, (int, float)) or not _finite(load1)):
        raise keys.err(
            "campaign.cooldown.load1",
            load1,
            "must be a finite non-negative number",
            'e.g. load1 = 0.5; with auto = true also "auto" (preflight load1 + 1.0) or false (not checked)',
        )
    dirty = (
        keys.size("campaign.cooldown.dirty", value.get("dirty", "4M" if auto else 0), positive=False)
        if auto or "dirty" in value
        else None
    )
    if not auto:
        for key in ("idle_iops", "idle_for"):
            if key in value:
                raise keys.err(
                    f"campaign.cooldown.{key}",
                    value[key],
                    "only applies to an automatic cooldown",
                    'add auto = true, or write cooldown = "auto"',
                )
    idle = value.get("idle_iops", 5.0)
    if isinstance(idle, bool) or not isinstance(idle, (int, float)) or not _finite(idle):
        raise keys.err(
            "campaign.cooldown.idle_iops",
            idle,
            "must be a finite non-negative number",
            "e.g. idle_iops = 5 (disk operations per second that still count as idle)",
        )
    idle_s = keys.duration("campaign.cooldown.idle_for", value.get("idle_for", "3s"))
    return Cooldown(
        fixed_s=fixed,
        max_s=max_s,
        load1=float(load1) if load1 is not None else None,
        dirty_bytes=dirty,
        auto=auto,
        idle_iops=float(idle),
        idle_s=idle_s,
        load1_auto=load1_auto,
    )


def _finite(x: float) -> bool:
    """0 <= x < inf (TOML has nan and inf; neither is a load or a rate to wait for)."""
    return 0 <= x < math.inf


def _fraction(keys: Keys, key: str, value: object, hint: str) -> float:
    """ "5%" or 0.05 -> 0.05 (a positive fraction below 1)."""
    frac = -1.0
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        frac = float(value)
    elif isinstance(value, str) and value.endswith("%"):
        try:
            frac = float(value[:-1]) / 100.0
        except ValueError:
            pass
    if not 0 < frac < 1:
        raise keys.err(key, value, "must be a percentage between 0 and 100", hint)
    return frac


def _schedule(keys: Keys, camp: Mapping[str, Any], runtime: float, name: str) -> Schedule:
    """warmup, repeats, order, racing and steady state (issue 11: time to answer)."""
    warm = camp.get("warmup", False)
    if isinstance(warm, bool):
        mode = "per-test" if warm else "none"  # `true` keeps its old meaning: every test gets a run 0
    else:
        if warm not in WARMUP_MODES:
            raise keys.err(
                "campaign.warmup",
                warm,
                'must be true or false, or one of "per-test", "per-config", "none"',
                'warmup = "per-config": one warm-up run per provisioned configuration (docs/schedule.md)',
            )
        mode = str(warm)
    rmin, rmax, ci = _repeats(keys, camp.get("repeats", 1))
    order = keys.choice("campaign.order", camp.get("order", "sequential"), ORDERS)
    seed = camp.get("shuffle_seed", int(short_hash({"campaign": name}, 8), 16))
    seed = keys.integer("campaign.shuffle_seed", seed, 0, 2**32 - 1)
    racing, margin, race_min = _racing(keys, camp.get("racing", False), rmin)
    ss = keys.string("campaign.ss", camp.get("ss", ""))
    if ss and not SS_RE.match(ss):
        raise keys.err(
            "campaign.ss",
            ss,
            "not an fio steady-state criterion",
            'e.g. "iops:5%" (IOPS within 5 % of their mean) or "bw_slope:0.5%"',
        )
    for key in ("ss_dur", "ss_ramp"):
        if key in camp and "ss" not in camp:  # ss = "" (e.g. in a quick scale) turns it off with them
            raise keys.err(f"campaign.{key}", camp[key], "needs campaign.ss", 'add e.g. ss = "iops:5%"')
    dur = keys.duration("campaign.ss_dur", camp.get("ss_dur", "30s"), positive=True) if ss else 0.0
    ss_ramp = keys.duration("campaign.ss_ramp", camp.get("ss_ramp", "0s")) if ss else 0.0
    if ss and ss_ramp + dur > runtime:
        raise keys.err(
            "campaign.ss_dur",
            camp.get("ss_dur", "30s"),
            "ss_ramp + ss_dur is longer than the runtime",
            "fio could never see steady state: lengthen campaign.runtime (the longest a run may take)",
        )
    return Schedule(
        warmup=mode,
        repeats_min=rmin,
        repeats_max=rmax,
        ci=ci,
        order=order,
        shuffle_seed=seed,
        racing=racing,
        racing_margin=margin,
        racing_min=race_min,
        settle=_settle(keys, camp.get("repeats")),
        decide=_decide(keys, camp.get("repeats")),
        ss=ss,
        ss_dur_s=dur,
        ss_ramp_s=ss_ramp,
    )


def _repeats(keys: Keys, value: object) -> tuple[int, int, float | None]:
    """`repeats = 3`, or adaptive `repeats = { min = 2, max = 10, ci = "5%" }`."""
    if not isinstance(value, dict):
        n = keys.integer("campaign.repeats", value, 1, 1000)
        return n, n, None
    keys.unknown_keys(value, REPEATS_KEYS, "campaign.repeats.")
    rmin = keys.integer(
        "campaign.repeats.min", value.get("min", 1 if "settle" in value and "ci" not in value else 2), 1, 1000
    )
    rmax = keys.integer("campaign.repeats.max", value.get("max", max(rmin, 10)), 1, 1000)
    if rmax < rmin:
        raise keys.err("campaign.repeats.max", rmax, f"is smaller than min ({rmin})", f"e.g. max = {max(rmin, 10)}")
    ci = None
    if "ci" in value:
        ci = _fraction(
            keys,
            "campaign.repeats.ci",
            value["ci"],
            'e.g. ci = "5%": stop once the 95 % CI of the mean is within ±5 % of the mean',
        )
        if rmin < 2:
            raise keys.err("campaign.repeats.min", rmin, "a confidence interval needs at least 2 repeats", "min = 2")
    return rmin, rmax, ci


def _settle(keys: Keys, value: object) -> float | None:
    """`repeats = { min = 1, max = 4, settle = "5%" }`: further runs only for tests whose place in their test
    case is in doubt (docs/schedule.md); None without it."""
    if not isinstance(value, dict) or "settle" not in value:
        return None
    if "ci" in value:
        raise keys.err(
            "campaign.repeats.settle",
            value["settle"],
            "cannot be combined with repeats.ci",
            'keep one: settle = "5%" repeats where the order is in doubt, ci = "5%" until every mean is known to ±5 %',
        )
    return _fraction(
        keys,
        "campaign.repeats.settle",
        value["settle"],
        'e.g. settle = "5%": repeat a test while its interval overlaps a neighbour\'s by more than 5 % of the mean',
    )


def _decide(keys: Keys, value: object) -> float | None:
    """`repeats = { min = 2, max = 6, decide = "5%" }`: repeat until every claim and every leaderboard order is
    decided at that error rate (a repeated-confidence-interval test, schedule/decide.py); None without it."""
    if not isinstance(value, dict) or "decide" not in value:
        return None
    for other in ("ci", "settle"):
        if other in value:
            raise keys.err(
                "campaign.repeats.decide",
                value["decide"],
                f"cannot be combined with repeats.{other}",
                'keep one: decide = "5%" repeats until the claims and orders are decided at a 5 % error rate',
            )
    return _fraction(
        keys,
        "campaign.repeats.decide",
        value["decide"],
        'e.g. decide = "5%": stop once every claim and leaderboard order is decided with at most a 5 % error rate',
    )


def _racing(keys: Keys, value: object, rmin: int) -> tuple[bool, float, int]:
    """`racing = true`, or `racing = { margin = "5%", min = 2 }`."""
    if isinstance(value, bool):
        return value, 0.05, max(2, rmin)
    if not isinstance(value, dict):
        raise keys.err(
            "campaign.racing", value, "must be true, false or a table", 'e.g. racing = { margin = "5%", min = 2 }'
        )
    keys.unknown_keys(value, RACING_KEYS, "campaign.racing.")
    margin = _fraction(
        keys,
        "campaign.racing.margin",
        value.get("margin", "5%"),
        'e.g. margin = "5%": drop a test only when it is at least 5 % behind the leader',
    )
    race_min = keys.integer("campaign.racing.min", value.get("min", max(2, rmin)), 2, 1000)
    return True, margin, race_min
