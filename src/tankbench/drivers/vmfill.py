"""Runs the pool-full experiment (`workload = "fill"`) of a vm-disk target in its test guest.

The steps (guestconf/fill.py has the pure parts and the why): a fresh thin backing is attached; a tagged ballast
dataset's refreservation takes all of the pool's `available` but the room; the guest writes until the pool
is full, while the controller releases the ballast and resumes the VM whenever qemu pauses it on ENOSPC; a
verify pass reads back what was written. Whatever happens, the ballast and the filled backing are destroyed
afterwards, so the campaign's later tests find a normal pool.
"""

from __future__ import annotations

import json
import shlex
import time
from typing import TYPE_CHECKING, Any, Protocol

import tankbench.targets.zfsplan as zfs
from tankbench.drivers.base import Workspace
from tankbench.errors import HostError, UserError
from tankbench.guest.records import GuestRun, OnPause
from tankbench.guestconf.fill import (
    FillOutcome,
    ballast_bytes,
    fill_checks,
    fill_job,
    fill_metrics,
    fill_size,
    fio_pass,
    verifiable_bytes,
    verify_job,
)
from tankbench.hosts.base import Host
from tankbench.model import Test
from tankbench.targets.vmdisk import BALLAST
from tankbench.units import fmt_size, parse_size

if TYPE_CHECKING:
    from tankbench.agent import FioRunRequest


class GuestDisks(Protocol):
    """What a fill needs of the vm-disk driver (drivers/vmdisk.py), which owns the guest and its attached disk."""

    guest: Any
    attached: tuple[str, str] | None
    host: Host
    ws: Workspace

    def provision(self, test: Test) -> None: ...
    def release_disk(self) -> None: ...
    def allocated_bytes(self, test: Test) -> int | None: ...
    @classmethod
    def backing_path(cls, test: Test) -> str: ...


class FillRun:
    """The fill experiment of one campaign run, on the vm-disk kind's guest and pool."""

    def __init__(self, vm: GuestDisks) -> None:
        self.vm = vm
        self.host = vm.host
        self.ws = vm.ws

    @property
    def ballast(self) -> str:
        return f"{self.ws.zfs.root}/{BALLAST}"

    # -- before and after ------------------------------------------------------------------------------
    def release_ballast(self) -> bool:
        """Destroy the ballast if it exists and is this campaign's; True if one was there. A refreservation
        dropped first, so that even a failed destroy leaves the pool its space."""
        if not self.ws.zfs.exists(self.ballast) or self.ws.zfs.tag_of(self.ballast) != self.ws.spec.campaign_id:
            return False
        self.host.run(["zfs", "set", "refreservation=none", self.ballast], timeout=300)
        self.ws.zfs.destroy(self.ballast)
        return True

    def prepare(self, test: Test) -> dict[str, Any]:
        """A fresh, thin backing for the test, attached: a sparse zvol (no refreservation) or a new sparse image."""
        if self.release_ballast():  # a run killed mid-fill left it: the pool must not stay full
            self.ws.note(f"destroyed {self.ballast}, left by an interrupted fill test")
        self.room_or_refuse(parse_size(str(test.params["fill_room"])))  # before the run's journal row exists
        self.vm.release_disk()
        if zfs.is_volume(test):
            self.destroy_backing(test)  # the fill starts from nothing written, not from a laid-out zvol
        self.vm.provision(test)
        checks: dict[str, Any] = {"fill.backing": self.vm.backing_path(test), "fill.disk_bytes": test.target.size}
        if zfs.is_volume(test):
            ds = zfs.dataset_name(test)
            self.host.run(["zfs", "set", "refreservation=none", ds], check=True, timeout=300)
            checks["fill.refreservation"] = self.zfs_value(ds, "refreservation")
            checks["fill.thin"] = checks["fill.refreservation"] == 0
        else:
            checks["fill.thin"] = (self.vm.allocated_bytes(test) or 0) < test.target.size // 2
        return checks

    def destroy_backing(self, test: Test) -> None:
        """The test's zvol or image, destroyed (a zvol only after reading back this campaign's tag)."""
        if not zfs.is_volume(test):
            self.host.run(["rm", "-f", "--", self.vm.backing_path(test)], check=True, timeout=120)
            return
        ds = zfs.dataset_name(test)
        for attempt in range(5):  # udev may still hold the zvol's device node right after qemu released it
            try:
                self.ws.zfs.destroy(ds)
                return
            except HostError:
                if attempt == 4:
                    raise
                self.host.run(["udevadm", "settle", "-t", "30"], timeout=60)
                time.sleep(2)

    # -- ZFS's view -----------------------------------------------------------------------------------------
    def zfs_value(self, name: str, prop: str) -> int:
        out = self.host.run(["zfs", "get", "-Hp", "-o", "value", prop, name], check=True, timeout=120).stdout
        return int(out.strip()) if out.strip().isdigit() else 0

    def available(self) -> int:
        """Bytes the campaign's datasets may still write (`available` of its root), after the txg synced."""
        pool = self.ws.spec.pool
        assert pool is not None
        self.host.run(["zpool", "sync", pool.pool_name], check=True, timeout=600)
        return self.zfs_value(self.ws.zfs.root, "available")

    def room_or_refuse(self, room: int) -> int:
        """The ballast's size for `room`; UserError when the pool has no more than the room available."""
        before = self.available()
        size = ballast_bytes(before, room)
        if size == 0:
            raise UserError(
                f"{self.ws.spec.path}: the pool has only {fmt_size(before)} available, no more than "
                f"campaign.fill_room = {fmt_size(room)}",
                "lower campaign.fill_room, or use larger pool disks",
            )
        return size

    def make_ballast(self, room: int) -> tuple[int, int]:
        """The ballast dataset whose refreservation leaves `room` bytes: (its bytes, the room ZFS reports)."""
        size = self.room_or_refuse(room)
        self.host.run(
            [
                "zfs",
                "create",
                "-o",
                "canmount=off",
                "-o",
                f"refreservation={size}",
                "-o",
                f"{zfs.TAG}={self.ws.spec.campaign_id}",
                self.ballast,
            ],
            check=True,
            timeout=300,
        )
        return size, self.available()

    # -- the run --------------------------------------------------------------------------------------------
    def run(self, test: Test, request: FioRunRequest) -> dict[str, Any]:
        """Ballast, fill, verify, clean up; the run's result (metrics and checks: see guestconf/fill.py)."""
        assert self.vm.attached is not None
        node = self.vm.attached[1]
        guest = self.vm.guest
        dev = guest.device(node)
        deadline = float(request["deadline_s"])
        room = parse_size(str(test.params["fill_room"]))
        size = fill_size(test.target.size, room)
        m: dict[str, float] = {
            "fill.disk_bytes": float(test.target.size),
            "fill.room_asked": float(room),
            "fill.write_bytes": float(size),
        }
        c: dict[str, Any] = {"guest.device": dev, "fill.ballast": self.ballast, "guest.accelerator": guest.accel_used}
        fill: GuestRun | None = None
        verify: GuestRun | None = None
        try:
            m["fill.pool_available_before"] = float(self.available())
            ballast, room_seen = self.make_ballast(room)
            m.update({"fill.ballast_bytes": float(ballast), "fill.room_bytes": float(room_seen)})
            free = OnPause(argv=("zfs", "set", "refreservation=none", self.ballast), max_pauses=3)
            fill = guest.run_fio(fill_job(dev, size), timeout=deadline, on_pause=free)
            m["fill.pool_available_end"] = float(self.available())
            nbytes = verifiable_bytes(fio_pass(fill.rc, fill.fio, fill.stderr).write_bytes)
            if nbytes:
                verify = guest.run_fio(verify_job(dev, nbytes), timeout=deadline)
            c["fill.verify_asked_bytes"] = nbytes
            werror = str(guest.qmp("qom-get", path=f"/machine/peripheral/dev-{node}", property="werror"))
        finally:
            cleaned, after = self.clean_up(test)
            c.update(cleaned)
            m["fill.pool_available_after"] = float(after)
        outcome = FillOutcome(
            fill=fio_pass(fill.rc, fill.fio, fill.stderr),
            verify=fio_pass(verify.rc, verify.fio, verify.stderr) if verify is not None else None,
            verified_bytes=int(c["fill.verify_asked_bytes"]),
            pauses=fill.pauses,
            io_errors=fill.io_errors,
            node=node,
            werror_property=werror,
            watch_error=fill.watch_error,
        )
        m.update(fill_metrics(outcome))
        m["fill.seconds"] = fill.host_wall_s
        m["fill.verify_seconds"] = verify.host_wall_s if verify is not None else 0.0
        c.update(fill_checks(outcome))
        return {
            "wall_s": fill.host_wall_s,
            "drain_s": 0.0,
            "exit_status": fill.rc,
            "stderr_tail": (fill.stderr + (verify.stderr if verify else ""))[-4000:],
            "fio_json": json.dumps(fill.fio) if fill.fio else "",
            "timed_out": fill.rc == 124,
            "metrics": m,
            "checks": c,
        }

    def clean_up(self, test: Test) -> tuple[dict[str, Any], int]:
        """Free everything the fill took, each step tried whatever failed before it: the ballast first (the
        pool must not stay full), then the VM resumed if qemu left it paused, the disk detached and the filled
        backing destroyed. (checks, the pool's available bytes after); HostError if the ballast stays."""
        errors: list[str] = []
        ballast_gone = False
        try:
            self.release_ballast()
            ballast_gone = not self.ws.zfs.exists(self.ballast)
        except (HostError, UserError) as e:
            errors.append(f"ballast: {e}")
        for what, step in (
            ("resume", self.resume_if_paused),
            ("detach", self.vm.release_disk),
            ("backing", lambda: self.destroy_backing(test)),
        ):
            try:
                step()
            except (HostError, UserError) as e:
                errors.append(f"{what}: {e}")
        out: dict[str, Any] = {"fill.cleaned": not errors, "fill.ballast_destroyed": ballast_gone}
        if errors:
            out["fill.cleanup_errors"] = errors
        if not ballast_gone:
            raise HostError(
                f"{self.host.name}: could not destroy the fill ballast {self.ballast}; the pool stays full until "
                f"`zfs destroy {shlex.quote(self.ballast)}` (or `tankbench clean`): {'; '.join(errors)}"
            )
        return out, self.available()

    def resume_if_paused(self) -> None:
        """`cont` a VM that qemu left stopped on an I/O error (the controller gave up resuming it)."""
        guest = self.vm.guest
        if guest is not None and guest.qmp("query-status").get("status") in ("io-error", "paused"):
            guest.qmp("cont")
