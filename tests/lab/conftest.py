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


@pytest.hookimpl(trylast=True)
def pytest_runtest_teardown(item: pytest.Item, nextitem: pytest.Item | None) -> None:
    """After the last test of a module that used the session lab: no pool may be left on it. One left (seen: the
    quick start's mirror on tbdata0 and tbdata1) made every later module on this lab fail at its `zpool create`
    with "is in use", far from its cause; it is named here, on the module that left it, and destroyed (the
    session's own lab: every pool on it was made by a test) so that the next modules start clean."""
    # trylast: after the module's own fixtures were torn down (test_lab's pool fixture destroys its pool there);
    # after the session's last test the lab itself is down and nothing follows
    if "lab" not in getattr(item, "fixturenames", ()) or nextitem is None or nextitem.module is item.module:
        return
    host = getattr(item, "funcargs", {}).get("lab")
    if not isinstance(host, LabHost):
        return
    try:
        res = host.run(["zpool", "list", "-H", "-o", "name"], timeout=120)
    except Exception:  # the lab is down or unreachable: the module's own tests said so
        return
    left = res.stdout.split() if res.returncode == 0 else []
    if left:
        host.run(["sh", "-c", "".join(f"zpool destroy -f {p}; " for p in left) + "udevadm settle"], timeout=300)
        pytest.fail(f"{item.module.__name__} left pool(s) {', '.join(left)} on the session lab {LAB} (destroyed now)")
