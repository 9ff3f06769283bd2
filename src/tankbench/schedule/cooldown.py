"""The agent's `cooldown` request for a campaign's [cooldown], and its result as run checks."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from tankbench.campaign.parse import Cooldown

if TYPE_CHECKING:
    from tankbench.agent import CooldownRequest


def cooldown_request(
    c: Cooldown,
    devices: Sequence[str],
    pool: str,
    preflight_load1: float,
    marks: Mapping[str, Sequence[Mapping[str, Any]]] | None = None,
) -> CooldownRequest:
    """The agent's `cooldown` request for this campaign's cooldown (auto mode: txg, disks, dirty, load). `marks`
    (see idle_marks): where each disk's idle window can start, so the wait need not watch it again."""
    load1 = c.load1
    if c.load1_auto:
        load1 = max(1.0, preflight_load1 + 1.0)
    req: CooldownRequest = {
        "op": "cooldown",
        "fixed_s": c.fixed_s,
        "max_s": c.max_s,
        "load1": load1,
        "dirty_bytes": c.dirty_bytes,
    }
    if c.auto:
        req.update(
            {"mode": "auto", "devices": list(devices), "pool": pool, "idle_iops": c.idle_iops, "idle_s": c.idle_s}
        )
        known = {d: [dict(m) for m in marks[d]] for d in devices if marks and d in marks}
        if known:
            req["idle_from"] = known
    return req


def idle_marks(result: Mapping[str, Any]) -> dict[str, list[dict[str, Any]]]:
    """Per disk, where a later cooldown's idle window can start, from a run's result: its counters at fio's exit
    (where the run's own I/O ended) and at the run's end (after the drain), earliest first. The agent's clock
    is CLOCK_MONOTONIC, host-wide: marks of one agent stand in another's request on the same boot."""
    out: dict[str, list[dict[str, Any]]] = {}
    for key, name in (("counters_exit", "fio-exit"), ("counters", "run-end")):
        snap = result.get(key)
        if not isinstance(snap, dict) or not isinstance(snap.get("disk"), dict):
            continue
        for dev, c in snap["disk"].items():
            out.setdefault(dev, []).append(
                {"t": snap.get("t"), "boot_id": snap.get("boot_id"), "disk": list(c), "from": name}
            )
    return out


def cooldown_checks(result: Mapping[str, Any]) -> dict[str, Any]:
    """The agent's cooldown result as run checks: cooldown.waited_s and cooldown.ended_by (plus what it saw, and
    where the disks' idle window started: `idle_from` "fio-exit", "run-end" or "wait", `idle_before_s`)."""
    out: dict[str, Any] = {
        "cooldown.waited_s": round(float(result.get("waited_s", 0.0)), 3),
        "cooldown.ended_by": str(result.get("ended_by", "fixed")),
    }
    for key in ("unmet", "load1", "dirty_bytes", "dev_iops", "txg_pending", "idle_from", "idle_before_s"):
        if key in result:
            out[f"cooldown.{key}"] = result[key]
    return out
