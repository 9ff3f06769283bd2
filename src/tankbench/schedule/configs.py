"""Configurations (tests sharing one provisioned target state) and which tests get a warm-up run."""

from __future__ import annotations

from collections.abc import Sequence

from tankbench.campaign.parse import FIO_AXES
from tankbench.model import Test, short_hash


def config_key(test: Test) -> str:
    """The provisioned state a test runs on: its target and every non-fio axis (ZFS properties, SLOG, size)."""
    state = {k: v for k, v in test.params.items() if k not in FIO_AXES or k == "size"}
    return short_hash({"target": test.target.canonical(), "state": state})


def config_groups(tests: Sequence[Test]) -> list[list[Test]]:
    """Tests grouped by configuration, groups in order of first appearance, tests in plan order."""
    groups: dict[str, list[Test]] = {}
    for t in tests:
        groups.setdefault(config_key(t), []).append(t)
    return list(groups.values())


def warmup_tests(tests: Sequence[Test], mode: str) -> set[str]:
    """Ids of the tests that get a warm-up run (run 0): all (per-test), the first of each configuration
    (per-config), or none."""
    if mode == "per-test":
        return {t.id for t in tests}
    if mode == "per-config":
        return {g[0].id for g in config_groups(tests)}
    return set()
