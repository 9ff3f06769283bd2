"""ZFS module tunables as one canonical string in a test's params (pure; shared by spec and targets)."""

from __future__ import annotations

from collections.abc import Mapping


def canonical_tunables(values: Mapping[str, str]) -> str:
    """`zfs_arc_max=1073741824,zfs_txg_timeout=10` (sorted); `default` for the host's own values."""
    return ",".join(f"{k}={values[k]}" for k in sorted(values)) or "default"


def parse_tunables(text: str) -> dict[str, str]:
    """The inverse of canonical_tunables."""
    if not text or text == "default":
        return {}
    return dict(item.split("=", 1) for item in text.split(","))
