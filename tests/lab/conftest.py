"""The session's lab: booted once (building the image first if the cache has none), shut down at the end."""

from __future__ import annotations

import os
import time
from collections.abc import Iterator

import pytest

from tankbench.hosts.lab import LabHost
from tankbench.lab import control, vm
from tankbench.lab.qemu import qmp

#: this test session's own lab (parallel sessions and CI on one machine must not stop each other's lab);
#: TANKBENCH_TEST_LAB names it explicitly, e.g. to keep one booted lab across pytest invocations
LAB = os.environ.get("TANKBENCH_TEST_LAB") or f"pytest-{os.getpid()}"
#: a second lab some tests boot beside the first
LAB_B = f"{LAB[:29]}-b"


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if "tests/lab/" in str(item.fspath):
            item.add_marker(pytest.mark.lab)


#: this worker's session lab while it is paused (QMP `stop`), else None
_PAUSED: dict[str, LabHost | None] = {"host": None}
#: the session lab's host once booted (to resume it and set its clock)
_SESSION: dict[str, LabHost | None] = {"host": None}


@pytest.fixture(scope="session")
def lab() -> Iterator[LabHost]:
    """This session's running lab (2 data disks + a log disk), its SshHost; powered off afterwards."""
    host = control.lab_host(LAB, disks=2, slog=True)
    pid = vm.require_up(LAB).pid
    _SESSION["host"] = host
    try:
        yield host
    finally:
        _resume()
        _SESSION["host"] = None
        host.close()
        if vm.read_state(LAB) is not None:
            vm.down(LAB)
        # `lab down` leaves no qemu behind
        assert not vm.is_our_qemu(pid, LAB), f"qemu {pid} of lab {LAB} still running after lab down"


def _resume() -> None:
    """Run the paused session lab again, with the host's time: a stopped TCG guest's clock stood still (it was
    88 s behind after a 90 s pause), and its ssh master had given up (the next command opens a new one)."""
    host = _PAUSED["host"]
    if host is None:
        return
    _PAUSED["host"] = None
    qmp(vm.labs_dir() / LAB, "cont")
    res = host.run(["sh", "-c", f"date -s @{time.time():.3f} >/dev/null && date +%s.%N"], timeout=120, check=True)
    skew = float(res.stdout) - time.time()
    assert abs(skew) < 5, f"lab {LAB}: its clock is {skew:+.1f} s off the host's after it was resumed"


@pytest.hookimpl
def pytest_runtest_setup(item: pytest.Item) -> None:
    """While this worker runs lab files that do not use its session lab (the presets' and seeds' own labs, the
    crash and resume-at-boot labs: ~30 minutes of a run), the session lab is paused: idle, a TCG guest still took
    15 % of a core beside the others, paused 0.1 %. It runs again before a test that uses it: after the machine
    lock (tests/conftest.py, tryfirst) and before the test's fixtures."""
    if "lab" in getattr(item, "fixturenames", ()):
        _resume()
        return
    host = _SESSION["host"]
    if host is None or _PAUSED["host"] is not None:
        return
    state = vm.read_state(LAB)
    if state is None or not vm.is_our_qemu(state.pid, LAB):
        return
    qmp(vm.labs_dir() / LAB, "stop")
    _PAUSED["host"] = host


@pytest.hookimpl(trylast=True)
def pytest_runtest_teardown(item: pytest.Item, nextitem: pytest.Item | None) -> None:
    """After the last test of a module that used the session lab: no pool may be left on it. One left (seen: the
    quick start's mirror on tbdata0 and tbdata1) made every later module on this lab fail at its `zpool create`
    with "is in use", far from its cause; it is named here, on the module that left it, and destroyed (the
    session's own lab: every pool on it was made by a test) so that the next modules start clean."""
    # trylast: after the module's own fixtures were torn down (test_lab's pool fixture destroys its pool there);
    # after the session's last test the lab itself is down and nothing follows
    if "lab" not in getattr(item, "fixturenames", ()) or nextitem is None or nextitem.path == item.path:
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
        pytest.fail(f"{item.path.name} left pool(s) {', '.join(left)} on the session lab {LAB} (destroyed now)")
