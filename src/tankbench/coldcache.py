"""Cache state before a run, host-wide whatever the target: empty the ARC and the page cache for a `cache = cold`
test and prove they emptied."""

from __future__ import annotations

import time
from typing import Any

from tankbench.hosts.base import Host
from tankbench.model import Test

ARC_KEYS = ("size", "data_size", "hits", "misses", "mru_hits", "mfu_hits", "l2_size")


def _arc_and_cache(host: Host) -> dict[str, int]:
    text = host.run(
        ["sh", "-c", "cat /proc/spl/kstat/zfs/arcstats 2>/dev/null; grep -E '^Cached:' /proc/meminfo"], timeout=60
    ).stdout
    out: dict[str, int] = {}
    for line in text.splitlines():
        p = line.split()
        if len(p) == 3 and p[0] in ARC_KEYS and p[2].isdigit():
            out[p[0]] = int(p[2])
        elif p and p[0] == "Cached:":
            out["page_cache"] = int(p[1]) * 1024
    return out


def make_cold(host: Host, pool: str | None) -> dict[str, Any]:
    """Empty the caches before a `cache = cold` run and prove it: for a pool tankbench created, export and
    import it (the ARC drops every buffer of an exported pool), then drop the page cache; measure ARC size,
    data size and page cache before and after. Returns the run's `cache.*` checks.

    A persistent L2ARC (OpenZFS >= 2.0, l2arc_rebuild_enabled=1) is rebuilt on import: `cache.l2_size_after`
    shows how much of it came back warm."""
    before = _arc_and_cache(host)
    t0 = time.monotonic()
    method = "drop_caches"
    if pool:
        host.run(["zpool", "export", pool], check=True, timeout=600)
        host.run(["zpool", "import", "-l", "-d", "/dev/disk/by-id", pool], check=True, timeout=600)
        host.run(["udevadm", "settle", "-t", "30"], timeout=60)
        method = "zpool export + import, drop_caches"
    host.run(["sh", "-c", "sync; echo 3 > /proc/sys/vm/drop_caches"], check=True, timeout=600)
    after = _arc_and_cache(host)
    checks: dict[str, Any] = {
        "cache.state": "cold",
        "cache.method": method,
        "cache.seconds": round(time.monotonic() - t0, 3),
    }
    for k in ("size", "data_size", "l2_size", "page_cache"):
        if k in before:
            checks[f"cache.{'arc_' if k in ('size', 'data_size') else ''}{k}_before"] = before[k]
            checks[f"cache.{'arc_' if k in ('size', 'data_size') else ''}{k}_after"] = after.get(k)
    data_before, data_after = before.get("data_size", 0), after.get("data_size", 0)
    page_before, page_after = before.get("page_cache", 0), after.get("page_cache", 0)
    arc_ok = not pool or data_after <= max(32 << 20, data_before // 2)
    checks["cache.cold_verified"] = bool(arc_ok and page_after <= max(64 << 20, page_before))
    return checks


def prepare_cache(host: Host, test: Test, pool: str | None) -> dict[str, Any]:
    """The cache state a test asks for, right before its run: `cold` empties caches (make_cold), `warm` and
        no cache axis leave them as the previous run left them. `pool`: the pool to export and import for a cold
    run (None: the target does not live on a pool tankbench created). Returns the run's `cache.*` checks."""
    state = test.params.get("cache")
    if state == "cold":
        return make_cold(host, pool)
    return {"cache.state": "warm"} if state == "warm" else {}
