"""The raw kind's driver: the disk checked (safety.py, and against the other raw targets and the pool's disks),
its region laid out once."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from tankbench.drivers.base import TargetDriver, Workspace
from tankbench.errors import UserError
from tankbench.fio.layout import layout_of, layout_request
from tankbench.model import Target, Test
from tankbench.safety import check_raw_target
from tankbench.targets.raw import RawKind, raw_confirmation


def _claims(info: Mapping[str, Any]) -> set[str]:
    """The kernel block devices a probed path stands for: the device and its partitions (empty if not a block
    device): two paths that share one are the same disk, whatever they are called."""
    if not info.get("is_block") or not info.get("name"):
        return set()
    return {str(info["name"]), *(str(p) for p in info.get("partitions", []))}


class RawDriver(RawKind, TargetDriver):
    """A raw disk on the host."""

    def __init__(self, ws: Workspace) -> None:
        super().__init__(ws)
        self._laid_out: dict[str, dict[str, Any]] = {}  # target name -> checks of its one layout

    def _pool_devices(self) -> list[str]:
        pool = self.ws.spec.pool
        if pool is None or not pool.creates:
            return []
        return list(dict.fromkeys([*pool.vdevs, *pool.log, *pool.cache, *pool.special]))

    def probe_paths(self, target: Target) -> tuple[list[str], list[str]]:
        # the pool's devices too: a raw target may name one of them by another name (/dev/sdb vs its by-id link),
        # which plan, comparing paths as written, cannot see
        return [], [target.path, *self._pool_devices()]

    def check(self, target: Target, probe: Mapping[str, Any]) -> None:
        devices = probe["block_devices"]
        check_raw_target(target.name, target.path, raw_confirmation(target), devices[target.path], self.ws.spec.path)
        mine = _claims(devices[target.path])
        where = f"{self.ws.spec.path}: target {target.name!r} path = {target.path!r}"
        for other in self.ws.spec.targets:
            if other is target or other.kind != self.kind or not other.path or other.path not in devices:
                continue
            if shared := mine & _claims(devices[other.path]):
                raise UserError(
                    f"{where}: is the same device as target {other.name!r} ({other.path}; both are "
                    f"{', '.join(sorted(shared))} on {self.host.name})",
                    "give each raw target its own disk",
                )
        for dev in self._pool_devices():
            if dev in devices and (shared := mine & _claims(devices[dev])):
                raise UserError(
                    f"{where}: is a device of the [pool] this campaign creates ({dev}; both are "
                    f"{', '.join(sorted(shared))} on {self.host.name})",
                    "a raw baseline needs a disk of its own, outside the pool",
                )

    def lay_out(self, test: Test) -> dict[str, Any]:
        t = test.target
        if not t.size:
            return {
                "layout.verified": False,
                "layout.note": "raw device without a size: tankbench does not lay out a whole device; reads of "
                "never-written blocks may not reach the medium",
            }
        key = f"{t.name}/{layout_of(test)}"
        if key not in self._laid_out or layout_of(test) != "random":  # a write test changes any other layout
            res = self.host.call_agent(layout_request(test, self), timeout=max(600.0, t.size / (5 << 20)))
            self._laid_out[key] = dict(res["checks"])
        return dict(self._laid_out[key])
