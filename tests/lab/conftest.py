"""The session's lab: booted once (building the image first if the cache has none), shut down at the end."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tankbench.hosts.ssh import SshHost
from tankbench.lab import vm

LAB = "pytest"


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if "tests/lab/" in str(item.fspath):
            item.add_marker(pytest.mark.lab)


@pytest.fixture(scope="session")
def lab() -> Iterator[SshHost]:
    """A running lab named 'pytest' (2 data disks + a log disk), its SshHost; powered off afterwards."""
    host = vm.lab_host(LAB, disks=2, slog=True)
    pid = vm.require_up(LAB).pid
    try:
        yield host
    finally:
        host.close()
        if vm.read_state(LAB) is not None:
            vm.down(LAB)
        # `lab down` leaves no qemu behind
        assert not vm.is_our_qemu(pid, LAB), f"qemu {pid} of lab {LAB} still running after lab down"
