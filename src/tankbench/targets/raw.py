"""`kind = "raw"`: a whole block device, the baseline. Refused unless the campaign confirms it (safety.py)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from tankbench.keys import Keys
from tankbench.model import Target, TargetOptions, Test
from tankbench.targets.base import KindTraits, TargetKind, parse_path_table, rw_and_bs


@dataclass(frozen=True)
class RawOptions(TargetOptions):
    """A raw disk's settings: the campaign's consent to overwrite it (its id again, or `blank:<id>` for a disk
    named with --disks: only while it is blank). A permission, not a setting: not part of the test id."""

    confirm: str = ""


def raw_confirmation(target: Target) -> str:
    """The campaign's confirmation of a raw target ("" for a kind without one)."""
    return target.options.confirm if isinstance(target.options, RawOptions) else ""


class RawKind(TargetKind):
    """fio opens the device itself; a `size` limits fio to a region, laid out once with incompressible data."""

    kind = "raw"
    traits = KindTraits(block_device=True)
    options = RawOptions
    table_keys = ("path", "size", "confirm")

    @classmethod
    def parse_table(cls, keys: Keys, table: Mapping[str, Any], prefix: str, name: str) -> Target:
        path, size, confirm = parse_path_table(keys, table, prefix, name, cls, size_required=False)
        return Target(name=name, kind=cls.kind, path=path, size=size, options=RawOptions(confirm))

    @classmethod
    def fio_filename(cls, test: Test) -> str:
        return test.target.path

    @classmethod
    def name_stem(cls, target: Target, params: Mapping[str, Any], varying: set[str], several: bool) -> list[str]:
        rw, bs = rw_and_bs(params)
        return [f"baseline-{target.name}-{rw}-{bs}-raw-disk" if several else f"baseline-{rw}-{bs}-raw-disk"]

    @classmethod
    def script_lines(cls, test: Test, campaign_id: str) -> list[str]:
        return [f"# WARNING: writes to the block device {test.target.path} if the job writes."]
