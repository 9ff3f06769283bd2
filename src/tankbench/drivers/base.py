"""A target kind's driver: what it does on a host during a campaign run (set up, provision, lay out, run fio,
capture, recover, finish). One module per kind in this package, each a subclass of the kind's declaration
(targets/<kind>.py) and of `TargetDriver`; the runner asks `driver_of` (drivers/__init__.py) and nothing else
loads them, so the parser, the plan and the analysis never import run-time code."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from tankbench.errors import UserError
from tankbench.hosts.base import Host
from tankbench.model import Target, Test
from tankbench.targets.base import Campaign, TargetKind
from tankbench.units import fmt_size

if TYPE_CHECKING:
    from tankbench.agent import FioRunExtras, FioRunRequest
    from tankbench.drivers.zfs import ZfsProvisioner


#: (metrics, checks, samples) a kind adds to a run from what the agent captured for it
Capture = tuple[dict[str, float], dict[str, Any], dict[str, list[float]]]


@dataclass
class Workspace:
    """What a campaign's target kinds share on one host: the host, the campaign, where to say things, and
    campaign-wide resources (the ZFS pool)."""

    host: Host
    spec: Campaign
    note: Callable[[str], None] = lambda _msg: None
    workdir: str = ""
    zfs_params: Mapping[str, str] = field(default_factory=dict)
    zfs_version: str = ""
    zfs_ready: bool = False
    #: runs begun in this campaign run (the runner counts): what a kind learned at the end of run N holds for
    #: the next run only while this is still N (no other run, of any kind, came in between)
    run_seq: int = 0
    #: the pool was brought back after the host came back (reset by the runner before each recovery)
    zfs_recovered: bool = False
    _zfs: ZfsProvisioner | None = None

    @property
    def zfs(self) -> ZfsProvisioner:
        """The campaign's pool provisioner (created on first use; the campaign must have a [pool])."""
        if self._zfs is None:
            from tankbench.drivers.zfs import ZfsProvisioner

            assert self.spec.pool is not None, "a ZFS target kind without a [pool] (spec validation missed it)"
            self._zfs = ZfsProvisioner(self.host, self.spec, self.note)
        return self._zfs


class TargetDriver(TargetKind):
    """The run-time side of a target kind: an instance lives for one campaign run on one host, shares a
    `Workspace` with the campaign's other drivers, and inherits its declaration (a driver class is
    `class RawDriver(RawKind, TargetDriver)`)."""

    def __init__(self, ws: Workspace) -> None:
        self.ws = ws
        self.host = ws.host

    def probe_paths(self, target: Target) -> tuple[list[str], list[str]]:
        """(directories, block devices) the read-only probe before the campaign should look at."""
        return [], []

    def check(self, target: Target, probe: Mapping[str, Any]) -> None:
        """Raise UserError if the campaign may not use this target (read-only; before anything is written)."""

    def setup(self) -> None:
        """Once per campaign run, before the first run on a target of this kind (e.g. create the pool)."""

    def provision(self, test: Test) -> None:
        """Make the test's target exist in the configuration the test asks for."""

    def lay_out(self, test: Test) -> dict[str, Any]:
        """Lay out the data fio reads and return the checks that prove it (verified, not assumed)."""
        raise NotImplementedError

    def prepare(self, test: Test) -> dict[str, Any]:
        """Provision, then lay out (a copy test writes its own data: no layout)."""
        self.provision(test)
        if test.is_copy:
            return {"copy.source_bytes": self.ws.spec.copy_size}
        return self.lay_out(test)

    def run_fio(
        self, test: Test, request: FioRunRequest, on_event: Callable[[dict[str, Any]], None], timeout: float
    ) -> dict[str, Any]:
        """Run the job (the agent's `fio_run` request) and return the agent's result (fio runs on the host)."""
        return self.host.call_agent(request, on_event=on_event, timeout=timeout)

    def finish(self) -> None:
        """Once at the end of a campaign run, whatever happened (e.g. power off a test guest)."""

    def recover(self, rebooted: bool) -> dict[str, Any]:
        """After the host came back (recovery.py): bring it back to the campaign's state; `rebooted` when it booted
        again (else a network blip). By default a rebooted host is set up again (e.g. a test guest booted);
        returns `recovery.*` checks for the crashed run's row."""
        if rebooted:
            self.finish()
            self.setup()
        return {}

    def crashed_guest(self) -> str:
        """Why this kind's test guest died while the host did not ("" without a guest, or while it runs)."""
        return ""

    def restart_guest(self) -> None:
        """Boot this kind's test guest again after it crashed (crashed_guest); the host's state stays."""

    def device_paths(self, test: Test) -> list[str]:
        """Paths whose physical disks are sampled from /proc/diskstats during a run."""
        return [test.target.path]

    def capture(self, test: Test) -> FioRunExtras:
        """Extra agent request fields for a run on this kind (files read around fio, commands during it)."""
        return {}

    def after_run(self, test: Test, res: Mapping[str, Any], metrics: Mapping[str, float]) -> Capture:
        """Metrics, checks and sample series made from what `capture` asked the agent for."""
        return {}, {}, {}

    def fingerprint(self) -> dict[str, Any]:
        """Facts for the campaign's fingerprint that this kind knows (e.g. the pool layout)."""
        return {}


def check_directory(where: str, probe: Mapping[str, Any], path: str, host: str) -> None:
    """UserError unless the agent's probe of `path` on `host` shows a directory tankbench can use (or create)."""
    info = probe["paths"][path]
    if info["exists"] and not info["is_dir"]:
        raise UserError(
            f"{where}: exists on {host} and is not a directory",
            "a file target names the directory tankbench puts its test file in",
        )
    if not info["exists"] and not info["parent_is_dir"]:
        raise UserError(
            f"{where}: neither it nor its parent directory exists on {host}",
            "create the parent directory, or fix the path",
        )
    if not info["writable"]:
        raise UserError(f"{where}: not writable on {host}", "pick a directory you can write to")
    odd = info.get("not_regular") or []
    if odd:
        raise UserError(
            f"{where}: {', '.join(odd)} there is a symlink or not a regular file on {host}",
            "tankbench would write through it; remove it (tankbench makes its test files itself)",
        )


def check_room(where: str, info: Mapping[str, Any], size: int, host: str) -> None:
    """UserError when a test file of `size` bytes cannot fit in the directory's filesystem on `host` (the room
    tankbench's own test files there hold counts: they are laid out again in place)."""
    free = int(info.get("free_bytes", -1))
    if free < 0:
        return  # an older probe, or statvfs failed: the agent checks again before it writes
    room = free + int(info.get("test_file_bytes", 0))
    if size > room:
        raise UserError(
            f"{where}: size {fmt_size(size)} does not fit: {room / 2**30:.2f} GiB ({room} bytes) free there on {host}",
            "lower the target's size, or free room there: tankbench lays out the whole test file before a run",
        )
