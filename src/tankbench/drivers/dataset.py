"""The dataset kind's driver: the test file on the test's dataset, laid out once the txg that holds it synced."""

from __future__ import annotations

from typing import Any

from tankbench.drivers.file import lay_out_file
from tankbench.drivers.zfsbase import ZfsDriver
from tankbench.model import Test
from tankbench.targets.dataset import DatasetKind


class DatasetDriver(DatasetKind, ZfsDriver):
    """A tagged dataset with the test's properties, and a test file on it."""

    def lay_out(self, test: Test) -> dict[str, Any]:
        pool = self.ws.spec.pool
        assert pool is not None
        # the layout is verified after the txg that holds it has synced (allocated sizes settle then)
        return lay_out_file(self.ws, test, self, ["zpool", "sync", pool.pool_name])
