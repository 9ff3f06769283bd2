"""What the parts of one host's runner share (the loop, one run, failure handling): the campaign, the host, its
journal and progress, what the host said before anything was written, the target kinds, the fingerprint the
runs are journalled under and the outcome so far; and the typed step a host failure is attributed to."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from enum import Enum
from typing import Any, Protocol

from tankbench import __version__
from tankbench.campaign import Spec
from tankbench.drivers import Workspace
from tankbench.errors import HostError
from tankbench.hooks import call_hook
from tankbench.hosts.base import Host, agent_sha256, work_root
from tankbench.journal import Journal
from tankbench.model import Fingerprint, Run
from tankbench.progress import Progress
from tankbench.runner.outcome import Outcome
from tankbench.runner.probe import Preflight, target_kinds
from tankbench.tunables import Tunables


class Step(Enum):
    """What the runner is doing for the test in hand: a host failure is journalled against it (`crash.step`)."""

    TUNABLES = "tunables"
    PROVISIONING = "provisioning"
    LAYOUT = "layout"
    PREPARE = "provisioning and layout"  # a kind that provisions and lays out in one step
    CACHE = "cache"
    COOLDOWN = "cooldown"
    NOISE = "noise check"
    RUN = "run"


@dataclass(frozen=True)
class Attempt:
    """Which run of a test the scheduler asked for."""

    run_no: int
    warmup: bool
    attempt: int


@dataclass(frozen=True)
class CrashedRow:
    """The row journalled `crashed` for a failure, its Run, and the pid of its fio (when fio had started)."""

    row: int
    run: Run
    pid: int | None = None


class StepFailed(Exception):
    """The host failed (HostError) during one step of a test: what failure handling starts from."""

    def __init__(self, step: Step, error: HostError, crashed: CrashedRow | None = None) -> None:
        super().__init__(str(error))
        self.step = step
        self.error = error
        self.crashed = crashed


@contextmanager
def during(step: Step) -> Iterator[None]:
    """A HostError inside the block is a StepFailed of `step` (a StepFailed of an inner step passes through)."""
    try:
        yield
    except HostError as e:
        raise StepFailed(step, e) from e


def campaign_tunables(host: Host, spec: Spec) -> Tunables | None:
    """The module parameters the campaign sets on the host ([tunables], matrix.tunables), None if it sets none."""
    return Tunables(host, spec.campaign_id, spec.path) if spec.tunables or "tunables" in spec.matrix else None


class _HookParty(Protocol):
    spec: Spec
    host: Host
    journal: Journal
    progress: Progress


def tell_hook(on: _HookParty, event: str, message: str, test: str = "", exit_status: int | None = None) -> None:
    """Tell the campaign's hook command (campaign.hook) about an event on a host (a HostRun's or a Session's)."""
    call_hook(
        on.spec.unattended.hook,
        event,
        on.progress.note,
        campaign=on.spec.name,
        journal=on.journal.path,
        host=on.host.name,
        message=message,
        test=test,
        exit_status=exit_status,
    )


class HostRun:
    """One host's share of a campaign run, as the runner's parts see it."""

    def __init__(
        self,
        spec: Spec,
        host: Host,
        journal: Journal,
        progress: Progress,
        pre: Preflight,
        extra_fingerprint: dict[str, Any] | None = None,
    ) -> None:
        self.spec = spec
        self.host = host
        self.journal = journal
        self.progress = progress
        self.pre = pre
        self.ws = Workspace(
            host,
            spec,
            progress.note,
            f"{work_root(host)}/{spec.campaign_id}",
            zfs_params=dict(pre.zfs_params),
            zfs_version=str(pre.fingerprint.get("zfs_version", "")),
        )
        self.kinds = target_kinds(self.ws)
        #: module parameters the campaign sets ([tunables], matrix.tunables); restored by the session
        self.tunables = campaign_tunables(host, spec)
        self.extra_fingerprint = dict(extra_fingerprint or {})
        self.fingerprint = self.make_fingerprint()
        self.outcome = Outcome()

    @property
    def workdir(self) -> str:
        """The campaign's directory on the host (it moves when a reboot took the host's private dirs)."""
        return self.ws.workdir

    def make_fingerprint(self) -> Fingerprint:
        """The host's facts, each target kind's (after setup: e.g. how a test guest is emulated) and the extras."""
        fp = dict(self.pre.fingerprint)
        fp["accelerator"] = self.host.accelerator
        fp["host"] = self.host.name
        fp.update(tankbench_version=__version__, agent_sha256=agent_sha256())  # what produced the run (pyperf)
        for kind in self.kinds.values():
            fp.update(kind.fingerprint())
        fp.update(self.extra_fingerprint)
        return Fingerprint(fp)

    def hook(self, event: str, message: str, test: str = "", exit_status: int | None = None) -> None:
        """Tell the campaign's hook command (campaign.hook) about an event."""
        tell_hook(self, event, message, test, exit_status)
