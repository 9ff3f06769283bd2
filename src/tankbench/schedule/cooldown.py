"""The agent's `cooldown` request for a campaign's [cooldown], and its result as run checks."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from tankbench.spec.parse import Cooldown


def cooldown_request(c: Cooldown, devices: Sequence[str], pool: str, preflight_load1: float) -> dict[str, Any]:
    """The agent's `cooldown` request for this campaign's cooldown (auto mode: txg, disks, dirty, load)."""
    load1 = c.load1
    if c.load1_auto:
        load1 = max(1.0, preflight_load1 + 1.0)
    req: dict[str, Any] = {
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
    return req


def cooldown_checks(result: Mapping[str, Any]) -> dict[str, Any]:
    """The agent's cooldown result as run checks: cooldown.waited_s and cooldown.ended_by (plus what it saw)."""
    out: dict[str, Any] = {
        "cooldown.waited_s": round(float(result.get("waited_s", 0.0)), 3),
        "cooldown.ended_by": str(result.get("ended_by", "fixed")),
    }
    for key in ("unmet", "load1", "dirty_bytes", "dev_iops", "txg_pending"):
        if key in result:
            out[f"cooldown.{key}"] = result[key]
    return out
