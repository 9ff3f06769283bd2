"""One interface per target kind: everything plan, export and run need to know about what fio hits.

A target kind is one module in this package defining one `TargetKind` subclass; the registry
(`tankbench.targets.kind_of`) finds it by its `kind` name, so the runner, the job writer and the matrix
expansion never compare kind strings. Class methods are pure (plan time); instances live for one campaign
run on one host (run time) and share a `Workspace`.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, ClassVar, Protocol

from tankbench.errors import UserError
from tankbench.hosts.base import Host
from tankbench.keys import Keys
from tankbench.model import Target, Test
from tankbench.units import fmt_size

if TYPE_CHECKING:
    from tankbench.targets.zfs import ZfsProvisioner


class Campaign(Protocol):
    """What target kinds read of a campaign (spec.Spec; a protocol, so targets sit below spec)."""

    @property
    def path(self) -> str: ...
    @property
    def campaign_id(self) -> str: ...
    @property
    def copy_size(self) -> int: ...
    @property
    def targets(self) -> tuple[Target, ...]: ...
    @property
    def pool(self) -> Any: ...
    @property
    def matrix(self) -> Mapping[str, tuple[Any, ...]]: ...
    @property
    def includes(self) -> tuple[Mapping[str, Any], ...]: ...


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
            from tankbench.targets.zfs import ZfsProvisioner

            assert self.spec.pool is not None, "a ZFS target kind without a [pool] (spec validation missed it)"
            self._zfs = ZfsProvisioner(self.host, self.spec, self.note)
        return self._zfs


@dataclass(frozen=True)
class KindTraits:
    """What the rest of tankbench may ask about a target kind instead of comparing its name (campaign/, analysis/,
    reports/ read these; an unknown kind, e.g. from an old journal, has every trait off)."""

    name: str
    #: fio opens a block device (no file to lay out; a copy test cannot rsync into it)
    block_device: bool = False
    #: the kind needs the campaign's [pool]
    needs_pool: bool = False
    #: fio's data lives on ZFS (a dataset, a zvol, or a guest disk backed by either)
    zfs: bool = False
    #: the ZFS object fio opens on the host: "filesystem" (a dataset), "volume" (a zvol), "" (none)
    zfs_object: str = ""
    #: fio runs inside a test guest, not on the host (an exported script cannot exec it on the host)
    runs_in_guest: bool = False
    #: fio works on a test file tankbench lays out and verifies (not a device)
    test_file: bool = False

    @property
    def volume(self) -> bool:
        """fio opens a ZFS volume on the host (reports set zvols apart: O_DIRECT still goes through the ARC)."""
        return self.zfs_object == "volume"

    @property
    def host_zfs(self) -> bool:
        """fio opens a ZFS dataset's file or a zvol on the host itself (not through a guest)."""
        return bool(self.zfs_object)


class TargetKind(ABC):
    """A target kind: raw, file, dataset, zvol, … Subclasses set `kind` and implement the abstract methods.

    A kind owns its campaign keys: the keys of its [[target]] table (`table_keys`, parsed by `parse_table`),
    the matrix axes that apply to it (`axes`, outermost first; `inner_axes` go inside the host-wide axes),
    how a value of an axis it defines is validated (`axis_value`) and the cross-axis rules (`check_matrix`)."""

    kind: ClassVar[str] = ""
    #: fio opens a block device (no file to lay out; a copy test cannot rsync into it)
    block_device: ClassVar[bool] = False
    #: the kind needs the campaign's [pool]
    needs_pool: ClassVar[bool] = False
    #: a cold-cache run exports and imports the pool the target lives on (when tankbench created it)
    cold_cache_cycles_pool: ClassVar[bool] = False
    #: fio runs inside a test guest, not on the host (an exported script cannot exec it on the host)
    runs_in_guest: ClassVar[bool] = False
    #: see KindTraits
    zfs: ClassVar[bool] = False
    zfs_object: ClassVar[str] = ""
    test_file: ClassVar[bool] = False
    #: keys of the kind's [[target]] table besides name and kind
    table_keys: ClassVar[tuple[str, ...]] = ()
    #: matrix axes that apply to targets of this kind (besides the fio, data and host-wide axes), expanded
    #: outside the host-wide axes (tunables), outermost first
    axes: ClassVar[tuple[str, ...]] = ()
    #: axes expanded inside the host-wide axes (e.g. a test guest's disk settings)
    inner_axes: ClassVar[tuple[str, ...]] = ()

    @classmethod
    def traits(cls) -> KindTraits:
        """This kind's traits (what campaign/, analysis/ and reports/ ask instead of its name)."""
        return KindTraits(
            name=cls.kind,
            block_device=cls.block_device,
            needs_pool=cls.needs_pool,
            zfs=cls.zfs,
            zfs_object=cls.zfs_object,
            runs_in_guest=cls.runs_in_guest,
            test_file=cls.test_file,
        )

    # -- campaign file: pure ---------------------------------------------------------------------
    @classmethod
    @abstractmethod
    def parse_table(cls, keys: Keys, table: Mapping[str, Any], prefix: str, name: str) -> Target:
        """A validated Target from this kind's [[target]] table (`prefix` is `target[i].`; name and kind are
        checked already); errors name the file, key and value."""

    @classmethod
    def axis_value(cls, keys: Keys, key: str, axis: str, value: object) -> Any:
        """Validate and normalise one value of an axis this kind defines (in `axes` or `inner_axes`)."""
        raise keys.err(key, value, "unknown axis", "")

    @classmethod
    def check_matrix(cls, keys: Keys, matrix: Mapping[str, tuple[Any, ...]]) -> None:
        """Raise for a combination of this kind's axes that cannot mean anything (the campaign has a target of
        this kind)."""

    # -- plan time: pure -------------------------------------------------------------------------
    @classmethod
    @abstractmethod
    def fio_filename(cls, test: Test) -> str:
        """The file or device fio opens (copy tests write to it)."""

    @classmethod
    @abstractmethod
    def name_stem(cls, target: Target, params: Mapping[str, Any], varying: set[str], several: bool) -> list[str]:
        """The leading parts of a test name, seed 000 style (`baseline-write-1M-raw-disk`, `zfs-fs-…`)."""

    @classmethod
    def script_lines(cls, test: Test, campaign_id: str) -> list[str]:
        """Shell lines an exported job script runs before fio: provisioning and layout, as `run` does."""
        return []

    @classmethod
    def adjust(cls, params: Mapping[str, Any]) -> dict[str, Any]:
        """A matrix point's params as this kind means them (e.g. drop axes that do not apply to its backing;
        points that become equal are one test)."""
        return dict(params)

    @classmethod
    def accepts(cls, params: Mapping[str, Any]) -> bool:
        """Whether a matrix point makes sense on this kind (rsync replaces a file: not into a block device)."""
        return not (cls.block_device and params.get("workload") == "rsync")

    # -- run time --------------------------------------------------------------------------------
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

    @abstractmethod
    def lay_out(self, test: Test) -> dict[str, Any]:
        """Lay out the data fio reads and return the checks that prove it (verified, not assumed)."""

    def prepare(self, test: Test) -> dict[str, Any]:
        """Provision, then lay out (a copy test writes its own data: no layout)."""
        self.provision(test)
        if test.is_copy:
            return {"copy.source_bytes": self.ws.spec.copy_size}
        return self.lay_out(test)

    def run_fio(
        self, test: Test, request: dict[str, Any], on_event: Callable[[dict[str, Any]], None], timeout: float
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

    def capture(self, test: Test) -> dict[str, Any]:
        """Extra agent request fields for a run on this kind (files read around fio, commands during it)."""
        return {}

    def after_run(self, test: Test, res: Mapping[str, Any], metrics: Mapping[str, float]) -> Capture:
        """Metrics, checks and sample series made from what `capture` asked the agent for."""
        return {}, {}, {}

    def fingerprint(self) -> dict[str, Any]:
        """Facts for the campaign's fingerprint that this kind knows (e.g. the pool layout)."""
        return {}


def parse_path_table(
    keys: Keys, table: Mapping[str, Any], prefix: str, name: str, kind: type[TargetKind], size_required: bool
) -> Target:
    """A target tankbench finds at a host `path` (a device for block-device kinds, else a directory); only a
    block device takes `confirm` (the campaign's consent to overwrite it, checked by safety.py)."""
    if "props" in table:
        raise keys.err(
            prefix + "props", table["props"], "only dataset and zvol targets take ZFS properties", "remove it"
        )
    path_ = keys.string(prefix + "path", table.get("path", ""))
    if not path_.startswith("/"):
        raise keys.err(
            prefix + "path",
            path_,
            "must be an absolute path",
            'a directory for kind = "file", a /dev/disk/by-id/… path for kind = "raw"',
        )
    if any(c == "$" or ord(c) < 32 or ord(c) == 127 for c in path_):  # fio reads ${VAR} and line ends in job files
        raise keys.err(
            prefix + "path",
            path_,
            "must not contain '$' or control characters (fio expands ${…} in a job file; a newline or tab breaks it)",
            "rename the directory, or name it through a symlink whose path has neither",
        )
    if kind.block_device and not path_.startswith("/dev/"):
        raise keys.err(
            prefix + "path",
            path_,
            f"a {kind.kind} target must be a block device under /dev",
            'name it by a stable id, e.g. "/dev/disk/by-id/virtio-tbdata0"',
        )
    if size_required and "size" not in table:
        raise keys.err(
            prefix + "size", None, f"is required for a {kind.kind} target", 'e.g. size = "1G" (larger than the cache)'
        )
    size = keys.size(prefix + "size", table["size"]) if "size" in table else 0
    confirm = keys.string(prefix + "confirm", table.get("confirm", ""))
    if confirm and "confirm" not in kind.table_keys:
        raise keys.err(prefix + "confirm", confirm, "only raw targets take a confirmation", "remove it")
    return Target(name=name, kind=kind.kind, path=path_.rstrip("/") or "/", size=size, confirm=confirm)


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


def rw_and_bs(params: Mapping[str, Any]) -> tuple[str, str]:
    """The (rw, bs) parts of a test name; a copy test names its command and size instead."""
    if params.get("workload", "fio") != "fio":
        return f"copy-{params['workload']}", str(params["copy_size"])
    return str(params["rw"]), str(params["bs"])
