"""`kind = "raw"`: a whole block device, the baseline. Refused unless the campaign confirms it (safety.py)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from tankbench.fio.layout import layout_of, layout_request
from tankbench.keys import Keys
from tankbench.model import Target, Test
from tankbench.safety import check_raw_target
from tankbench.targets.base import TargetKind, parse_path_table, rw_and_bs


class RawKind(TargetKind):
    """fio opens the device itself; a `size` limits fio to a region, laid out once with incompressible data."""

    kind = "raw"
    block_device = True
    table_keys = ("path", "size", "confirm")

    @classmethod
    def parse_table(cls, keys: Keys, table: Mapping[str, Any], prefix: str, name: str) -> Target:
        return parse_path_table(keys, table, prefix, name, cls, size_required=False)

    @classmethod
    def fio_filename(cls, test: Test) -> str:
        return test.target.path

    @classmethod
    def name_stem(cls, target: Target, params: Mapping[str, Any], varying: set[str], several: bool) -> list[str]:
        rw, bs = rw_and_bs(params)
        return [f"baseline-{target.name}-{rw}-{bs}-raw-disk" if several else f"baseline-{rw}-{bs}-raw-disk"]

    @classmethod
    def script_lines(cls, test: Test, campaign_id: str) -> list[str]:
        return [f"# WARNING: writes to the block device {test.target.path} if the job writes."]

    def __init__(self, ws: Any) -> None:
        super().__init__(ws)
        self._laid_out: dict[str, dict[str, Any]] = {}  # target name -> checks of its one layout

    def probe_paths(self, target: Target) -> tuple[list[str], list[str]]:
        return [], [target.path]

    def check(self, target: Target, probe: Mapping[str, Any]) -> None:
        check_raw_target(target, probe["block_devices"][target.path], self.ws.spec.path)

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
