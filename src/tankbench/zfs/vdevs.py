"""The group keywords of `zpool create`'s grammar (mirror, raidzN, dRAID with its geometry) and what each
implies: how many devices it takes, its redundancy, and the space it leaves (pure)."""

from __future__ import annotations

import re
from collections.abc import Sequence
from fractions import Fraction
from typing import NamedTuple

#: group keywords and the fewest devices each takes (as zpool create enforces); dRAID's are spelled with their
#: geometry (`draid2:4d:1s`): see vdev_group
VDEV_GROUPS = {"mirror": 2, "raidz": 2, "raidz1": 2, "raidz2": 3, "raidz3": 4}

_DRAID = re.compile(r"draid([1-3]?)((?::[0-9]+[cdsCDS])*)")


class VdevGroup(NamedTuple):
    """A group keyword of zpool create's grammar: its redundancy (parity, or a mirror's copies less one: -1 for
    "all but one"), the fewest devices it takes, and for dRAID its data disks per redundancy group (0: zpool's
    default, up to 8), distributed spares and the exact child count its `:Nc` names (0: any)."""

    word: str
    parity: int
    fewest: int
    data: int = 0
    spares: int = 0
    children: int = 0


def vdev_group(word: str) -> VdevGroup | None:
    """The group a keyword opens (mirror, raidzN, draid[N][:Nd][:Ns][:Nc] in any order, as zpool reads it), None
    for a device or a misspelt keyword. dRAID takes parity + data + spares children at least (data 1 unless
    given: zpool's default is min(8, what is left)); a data count of 0 is not a group."""
    if word in VDEV_GROUPS:
        return VdevGroup(word, -1 if word == "mirror" else int(word[5:] or 1), VDEV_GROUPS[word])
    m = _DRAID.fullmatch(word)
    if m is None:
        return None
    fields = {f[-1].lower(): int(f[:-1]) for f in m[2].split(":")[1:]}
    parity, data, spares = int(m[1] or 1), fields.get("d", 0), fields.get("s", 0)
    if "d" in fields and data == 0:
        return None
    fewest = max(parity + max(data, 1) + spares, fields.get("c", 0))
    return VdevGroup(word, parity, fewest, data, spares, fields.get("c", 0))


def grouped(vdevs: Sequence[str]) -> tuple[list[str], list[tuple[VdevGroup, list[str]]]]:
    """A vdev list in zpool grammar split: the devices before any keyword (a stripe), and each group with the
    devices that follow its keyword."""
    plain: list[str] = []
    groups: list[tuple[VdevGroup, list[str]]] = []
    for v in vdevs:
        g = vdev_group(v)
        if g is not None:
            groups.append((g, []))
        elif groups:
            groups[-1][1].append(v)
        else:
            plain.append(v)
    return plain, groups


def data_fraction(group: VdevGroup, n: int) -> Fraction:
    """The share of a group of n equal devices that holds data, exactly: a mirror 1/n, raidzN (n - N)/n, dRAID
    its data / (data + parity) of the devices that are not distributed spares (zpool's default data count: what
    is left, up to 8)."""
    if n <= 0:
        return Fraction(0)
    if group.parity < 0:
        return Fraction(1, n)
    if not group.word.startswith("draid"):
        return Fraction(max(n - group.parity, 0), n)
    usable = n - group.spares
    data = group.data or min(usable - group.parity, 8)
    return Fraction(usable, n) * Fraction(data, data + group.parity) if data > 0 and usable > 0 else Fraction(0)


def leaves(vdevs: Sequence[str]) -> list[str]:
    """The devices of a vdev list in zpool grammar, without its group keywords."""
    return [v for v in vdevs if vdev_group(v) is None]
