"""A test guest's disk layers at run time: `GuestLayers` makes, lays out and closes one configuration's LUKS2
and filesystem in a running TestGuest (the pure parts, sizes and scripts, are guestconf/layers.py)."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

from tankbench.errors import HostError
from tankbench.guestconf import machine
from tankbench.guestconf.layers import (
    MARKER_MAX_BYTES,
    MIB,
    Layers,
    backing_test,
    data_path,
    evidence,
    job_files,
    layers_verified,
    layout_script,
    marker_script,
    new_marker,
    payload_bytes,
    sections,
    setup_script,
    teardown_script,
)
from tankbench.model import Test
from tankbench.units import fmt_size


class Guest(Protocol):
    """What GuestLayers needs of a TestGuest."""

    def exec(self, script: str, timeout: float = ...) -> Any: ...


@dataclass
class Active:
    """The layers open on the attached disk."""

    layers: Layers
    device: str
    disk_id: str
    checks: dict[str, Any]


class GuestLayers:
    """Makes, lays out and closes one configuration's layers in a running test guest."""

    def __init__(self, guest: Guest, note: Callable[[str], None] = lambda _m: None) -> None:
        self.guest = guest
        self.note = note
        self.active: Active | None = None
        self._cpu: dict[str, Any] | None = None

    @property
    def path(self) -> str | None:
        """What fio (or a copy) writes in the guest: the file or dm-crypt device; None without layers."""
        return data_path(self.active.layers, self.active.disk_id) if self.active else None

    def cpu_facts(self) -> dict[str, Any]:
        """guest.cpu_aes (AES-NI in the guest's /proc/cpuinfo), the CPU model and guest.nproc (online vCPUs),
        read once per boot (guestconf/machine.py)."""
        if self._cpu is None:
            self._cpu = machine.parse_readback(self.guest.exec(machine.readback_script()).stdout)
        return dict(self._cpu)

    def open(self, test: Test, device: str, disk_id: str) -> dict[str, Any]:
        """Make the test's layers on the guest device; the checks every run of the configuration carries."""
        layers = Layers.of(test.params)
        self.active = None
        if not layers.any:
            return {}
        self.note(f"guest: {layers.describe()} on {device}")
        t0 = time.monotonic()
        run = self.guest.exec(setup_script(layers, device, disk_id), timeout=3600)
        sec = sections(run.stdout)
        failed = [k for k in sec if k.startswith("failed ")]
        if run.rc != 0 or failed:
            raise HostError(
                f"guest: making {layers.describe()} on {device} failed "
                f"({failed[0] if failed else f'rc {run.rc}'}): {(run.stdout + run.stderr)[-1500:]}"
            )
        checks = evidence(layers, device, disk_id, run.stdout)
        checks["layers.setup_s"] = round(time.monotonic() - t0, 2)
        checks["layers.payload_bytes"] = payload_bytes(test)
        checks["layers.path"] = data_path(layers, disk_id)  # what fio (or a copy) writes in the guest
        wrong = layers_verified(layers, checks, device, disk_id)
        checks["layers.verified"] = not wrong
        if wrong:
            checks["layers.problems"] = wrong
        self.active = Active(layers, device, disk_id, checks)
        return dict(checks)

    def close(self) -> None:
        """Unmount and close the open layers (before the disk is unplugged)."""
        if self.active is None:
            return
        active, self.active = self.active, None
        run = self.guest.exec(teardown_script(active.layers, active.disk_id), timeout=600)
        if run.rc != 0:
            raise HostError(f"guest: closing {active.layers.describe()} failed: {(run.stdout + run.stderr)[-800:]}")

    def lay_out(
        self,
        test: Test,
        allocated: Callable[[], int | None],
        backing: str,
        find: Callable[[str], bool | None],
    ) -> dict[str, Any]:
        """Fill the file (or dm-crypt device) with random data through the layers; check on the host that the
        backing holds it (`allocated` bytes), and whether a marker written in the guest reaches the backing in
        plaintext (`find`): it must without LUKS, and must not with it."""
        assert self.active is not None and self.path is not None
        payload = payload_bytes(test)
        files = job_files(test, self.path)
        before = allocated()
        t0 = time.monotonic()
        each = payload if len(files) == 1 else max(MIB, payload // len(files) // MIB * MIB)  # within the fs
        run = self.guest.exec("".join(layout_script(f, each) for f in files), timeout=3600)
        checks: dict[str, Any] = {
            "layout.mode": "random",
            "layout.seconds": round(time.monotonic() - t0, 2),
            "layout.guest_path": self.path if len(files) == 1 else files,
            "layout.guest_device": self.active.device,
            "guest.backing": backing,
            "layers.allocated_before_layout_bytes": before,
        }
        after = allocated()
        checks["layout.allocated_bytes"] = after
        checks["layout.verified"] = run.rc == 0 and after is not None and after >= payload * 0.9
        if run.rc != 0:
            checks["layout.note"] = f"dd in the guest exited {run.rc}: {run.stdout[-300:]}"
        checks.update(self.marker_check(backing_test(test).target.size, find))
        return checks

    def marker_check(self, disk: int, find: Callable[[str], bool | None]) -> dict[str, Any]:
        """Write a marker through the layers and look for it in the backing on the host (small disks only)."""
        assert self.active is not None and self.path is not None
        if disk > MARKER_MAX_BYTES:
            return {
                "layers.marker": f"not checked: the backing ({fmt_size(disk)}) is larger than "
                f"{fmt_size(MARKER_MAX_BYTES)}, and reading it all would evict the ARC"
            }
        marker = new_marker()
        run = self.guest.exec(marker_script(self.path, marker), timeout=600)
        found = find(marker) if run.rc == 0 else None
        expect = not self.active.layers.luks
        return {
            "layers.marker": marker,
            "layers.marker_on_host": found,
            # LUKS: the guest's plaintext must not reach the host; without it, the guest's data must
            "layers.marker_as_expected": found is expect,
        }
