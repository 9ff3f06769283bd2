"""The ZFS properties tankbench sets on a test's dataset or zvol: their names and valid values, in one place.

Pure vocabulary below the target kinds (drivers/zfs.py provisions with them, targets/zfsbase.py parses a
target's `props` and the ZFS axes with them, drivers/zfs_metrics.py compares what `zfs get` reports against
them), and the ZFS kinds' own settings of a target (`ZfsOptions`: its props and the pool root it lives under).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from tankbench.keys import Keys
from tankbench.model import Target, TargetOptions, frozen_map
from tankbench.units import fmt_size

#: params that are ZFS properties of the dataset/zvol (the `slog` axis is a pool change, not a property)
PROPERTY_AXES = (
    "encryption",
    "recordsize",
    "volblocksize",
    "compression",
    "sync",
    "logbias",
    "primarycache",
    "atime",
    "direct",
)
#: properties a target may fix in its `props` table (besides the axes above)
SETTABLE = (
    "recordsize",
    "volblocksize",
    "compression",
    "encryption",
    "sync",
    "logbias",
    "primarycache",
    "secondarycache",
    "atime",
    "direct",
    "checksum",
    "dedup",
    "copies",
    "redundant_metadata",
    "xattr",
    "dnodesize",
    "special_small_blocks",
)
#: settable properties whose values are sizes: `zfs get -p` prints them in bytes ("16k" is 16384)
SIZE_PROPS = ("recordsize", "volblocksize", "special_small_blocks")
#: what a run records of `zfs get` on its dataset/zvol (checks zfs.props): the property axes, every property a
#: target may set (a run that says a property did not take shows what the dataset had), and the space it reports
REPORTED = (
    *PROPERTY_AXES,
    *(p for p in SETTABLE if p not in PROPERTY_AXES),
    "compressratio",
    "used",
    "logicalused",
    "referenced",
    "logicalreferenced",
    "volsize",
)
#: the property that is the block size: a filesystem's, a volume's
BLOCK_SIZES = ("recordsize", "volblocksize")
CHOICES = {
    "encryption": ("off", "aes-128-ccm", "aes-192-ccm", "aes-256-ccm", "aes-128-gcm", "aes-192-gcm", "aes-256-gcm"),
    "sync": ("standard", "always", "disabled"),
    "logbias": ("latency", "throughput"),
    "primarycache": ("all", "metadata", "none"),
    "atime": ("on", "off"),
    "direct": ("standard", "always", "disabled"),
}
COMPRESSION_RE = re.compile(r"^(on|off|lz4|lzjb|zle|gzip(-[1-9])?|zstd(-fast)?(-[0-9]+)?)\Z")  # \Z: not "lz4\n"


def property_value(keys: Keys, key: str, name: str, v: object) -> str:
    """Validate and normalise one value of a property axis (`key` names it in errors)."""
    if name in BLOCK_SIZES:
        if v in ("default", "def"):
            return "default"
        n = keys.size(key, v)
        if n < 512 or n > 16 << 20 or n & (n - 1):
            raise keys.err(key, v, "must be a power of two from 512 to 16M", 'e.g. "4k", "128k", "1M" or "default"')
        return fmt_size(n)
    if name == "compression":
        s_ = keys.string(key, v)
        if not COMPRESSION_RE.match(s_):
            raise keys.err(key, v, "not a ZFS compression value", 'e.g. "off", "lz4", "zstd", "gzip-6"')
        return s_
    return keys.choice(key, v, CHOICES[name])


@dataclass(frozen=True)
class ZfsOptions(TargetOptions):
    """The settings of a target tankbench creates on the campaign's pool: ZFS properties fixed for all its tests,
    and the campaign's root dataset it lives under (set by the plan)."""

    props: Mapping[str, str] = field(default_factory=frozen_map)
    pool: str = ""

    def __post_init__(self) -> None:
        object.__setattr__(self, "props", frozen_map(self.props))

    def canonical(self) -> dict[str, Any]:
        d: dict[str, Any] = {}
        if self.props:
            d["props"] = dict(self.props)
        if self.pool:
            d["pool"] = self.pool
        return d


def zfs_options(target: Target) -> ZfsOptions:
    """A target's ZFS settings (empty for a kind that has none)."""
    o = target.options
    return o if isinstance(o, ZfsOptions) else ZfsOptions()
