"""One declaration per target kind: everything the campaign parser, the plan, export and the analysis need to
know about what fio hits, pure.

A target kind is one module in this package defining one `TargetKind` subclass (its declaration: name, traits,
typed options, campaign keys, axes, test names, export lines); the registry (`tankbench.targets.kind_of`) finds it
by its `kind` name, so the runner, the job writer and the matrix expansion never compare kind strings. What the
kind does on a host (provision, lay out, run, recover) is its driver, drivers/<kind>.py, loaded only by the runner.
"""

from __future__ import annotations

import posixpath
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, ClassVar, Protocol

from tankbench.keys import Keys
from tankbench.model import Target, TargetOptions, Test


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


@dataclass(frozen=True)
class KindTraits:
    """What the rest of tankbench may ask about a target kind instead of comparing its name (campaign/, analysis/,
    reports/, the runner read these; an unknown kind, e.g. from an old journal, has every trait off): the one list
    of a kind's flags, which each kind declares (`TargetKind.traits`)."""

    #: the kind's name (the registry fills it in from `TargetKind.kind`)
    name: str = ""
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
    #: a cold-cache run exports and imports the pool the target lives on (when tankbench created it)
    cold_cache_cycles_pool: bool = False

    @property
    def volume(self) -> bool:
        """fio opens a ZFS volume on the host (reports set zvols apart: O_DIRECT still goes through the ARC)."""
        return self.zfs_object == "volume"

    @property
    def host_zfs(self) -> bool:
        """fio opens a ZFS dataset's file or a zvol on the host itself (not through a guest)."""
        return bool(self.zfs_object)


class TargetKind:
    """A target kind's declaration: raw, file, dataset, zvol, … Subclasses set `kind`, `traits` and `options`
    and implement the abstract class methods; all of it is pure (the parser, the plan and the analysis import it).
    What a kind does on a host is its driver (drivers/<kind>.py, loaded by the runner only).

    A kind owns its campaign keys: the keys of its [[target]] table (`table_keys`, parsed by `parse_table` into
    a Target whose `options` are the kind's own typed settings), the matrix axes that apply to it (`axes`,
    outermost first; `inner_axes` go inside the host-wide axes), how a value of an axis it defines is validated
    (`axis_value`) and the cross-axis rules (`check_matrix`)."""

    kind: ClassVar[str] = ""
    #: what the rest of tankbench may ask about the kind (KindTraits: the one list of flags)
    traits: ClassVar[KindTraits] = KindTraits()
    #: the type of the kind's own settings of a target (Target.options)
    options: ClassVar[type[TargetOptions]] = TargetOptions
    #: keys of the kind's [[target]] table besides name and kind
    table_keys: ClassVar[tuple[str, ...]] = ()
    #: matrix axes that apply to targets of this kind (besides the fio, data and host-wide axes), expanded
    #: outside the host-wide axes (tunables), outermost first
    axes: ClassVar[tuple[str, ...]] = ()
    #: axes expanded inside the host-wide axes (e.g. a test guest's disk settings)
    inner_axes: ClassVar[tuple[str, ...]] = ()

    # -- campaign file: pure ---------------------------------------------------------------------
    @classmethod
    def parse_table(cls, keys: Keys, table: Mapping[str, Any], prefix: str, name: str) -> Target:
        """A validated Target from this kind's [[target]] table (`prefix` is `target[i].`; name and kind are
        checked already); errors name the file, key and value."""
        raise NotImplementedError

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
    def fio_filename(cls, test: Test) -> str:
        """The file or device fio opens (copy tests write to it)."""
        raise NotImplementedError

    @classmethod
    def name_stem(cls, target: Target, params: Mapping[str, Any], varying: set[str], several: bool) -> list[str]:
        """The leading parts of a test name, seed 000 style (`baseline-write-1M-raw-disk`, `zfs-fs-…`)."""
        raise NotImplementedError

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
        return not (cls.traits.block_device and params.get("workload") == "rsync")

    @classmethod
    def on_pool(cls, target: Target, root: str) -> Target:
        """The target placed under the campaign's pool root `root` (a kind that needs the pool keeps it in its
        options); the target itself for a kind that does not."""
        return target

    @classmethod
    def properties(cls, target: Target) -> Mapping[str, str]:
        """The ZFS properties the target fixes for all its tests ({} for a kind that sets none)."""
        return {}

    @classmethod
    def load_from_clients(cls, target: Target) -> bool:
        """Whether the target's load comes from client hosts (fio client/server), not from the campaign's host."""
        return False


def parse_path_table(
    keys: Keys, table: Mapping[str, Any], prefix: str, name: str, kind: type[TargetKind], size_required: bool
) -> tuple[str, int, str]:
    """(path, size, confirm) of a target tankbench finds at a host `path` (a device for block-device kinds, else a
    directory); only a kind with `confirm` among its keys takes it (a raw disk: the campaign's consent to overwrite
    it, checked by safety.py)."""
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
    if kind.traits.block_device and not path_.startswith("/dev/"):
        raise keys.err(
            prefix + "path",
            path_,
            f"a {kind.kind} target must be a block device under /dev",
            'name it by a stable id, e.g. "/dev/disk/by-id/virtio-tbdata0"',
        )
    if kind.traits.block_device and posixpath.normpath(path_) != path_:  # /dev/../tmp/x is not under /dev
        raise keys.err(
            prefix + "path",
            path_,
            "not a normalised path (no '..', '.', '//' or trailing '/')",
            'name the device by its own path, e.g. "/dev/disk/by-id/virtio-tbdata0"',
        )
    if size_required and "size" not in table:
        raise keys.err(
            prefix + "size", None, f"is required for a {kind.kind} target", 'e.g. size = "1G" (larger than the cache)'
        )
    size = keys.size(prefix + "size", table["size"]) if "size" in table else 0
    confirm = keys.string(prefix + "confirm", table.get("confirm", ""))
    if confirm and "confirm" not in kind.table_keys:
        raise keys.err(prefix + "confirm", confirm, "only raw targets take a confirmation", "remove it")
    return path_.rstrip("/") or "/", size, confirm


def rw_and_bs(params: Mapping[str, Any]) -> tuple[str, str]:
    """The (rw, bs) parts of a test name; a copy test names its command and size instead."""
    if params.get("workload", "fio") != "fio":
        return f"copy-{params['workload']}", str(params["copy_size"])
    return str(params["rw"]), str(params["bs"])
