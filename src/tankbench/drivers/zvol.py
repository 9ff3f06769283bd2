"""The zvol kind's driver: the test's zvol filled with incompressible data (a new zvol reads zeros)."""

from __future__ import annotations

from typing import Any

from tankbench.drivers.zfsbase import ZfsDriver
from tankbench.fio.layout import layout_request
from tankbench.model import Test
from tankbench.targets.zvol import ZvolKind


class ZvolDriver(ZvolKind, ZfsDriver):
    """A tagged zvol with the test's properties."""

    def lay_out(self, test: Test) -> dict[str, Any]:
        t = test.target
        res = self.host.call_agent(
            layout_request(test, self, self.fio_filename(test)), timeout=max(600.0, t.size / (2 << 20))
        )
        return dict(res["checks"])
