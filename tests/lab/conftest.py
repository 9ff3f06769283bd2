"""The session's lab: booted once (building the image first if the cache has none), shut down at the end."""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest

from tankbench.hosts.lab import LabHost
from tankbench.lab import control, vm

#: this test session's own lab (parallel sessions and CI on one machine must not stop each other's lab);
#: TANKBENCH_TEST_LAB names it explicitly, e.g. to keep one booted lab across pytest invocations
LAB = os.environ.get("TANKBENCH_TEST_LAB") or f"pytest-{os.getpid()}"
#: a second lab some tests boot beside the first
LAB_B = f"{LAB[:29]}-b"


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if "tests/lab/" in str(item.fspath):
            item.add_marker(pytest.mark.lab)


@pytest.fixture(scope="session")
def lab() -> Iterator[LabHost]:
    """This session's running lab (2 data disks + a log disk), its SshHost; powered off afterwards."""
    host = control.lab_host(LAB, disks=2, slog=True)
    pid = vm.require_up(LAB).pid
    try:
        yield host
    finally:
        host.close()
        if vm.read_state(LAB) is not None:
            vm.down(LAB)
        # `lab down` leaves no qemu behind
        assert not vm.is_our_qemu(pid, LAB), f"qemu {pid} of lab {LAB} still running after lab down"
