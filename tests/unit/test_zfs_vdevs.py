"""Group keywords of zpool create's grammar, dRAID's geometry among them: what each takes and the space it
leaves (the campaign's [pool] and the doctor's capacity figures read them)."""

from __future__ import annotations

from fractions import Fraction

import pytest

from tankbench.doctor.facts import pool_capacity
from tankbench.zfs.vdevs import data_fraction, leaves, vdev_group


@pytest.mark.parametrize(
    "word,parity,fewest,data,spares,children",
    [
        ("mirror", -1, 2, 0, 0, 0),
        ("raidz", 1, 2, 0, 0, 0),
        ("raidz3", 3, 4, 0, 0, 0),
        ("draid", 1, 2, 0, 0, 0),
        ("draid2", 2, 3, 0, 0, 0),
        ("draid2:4d:1s", 2, 7, 4, 1, 0),
        ("draid1:1s:3d:6c", 1, 6, 3, 1, 6),  # zpool reads the fields in any order
        ("draid3:2D:1S", 3, 6, 2, 1, 0),  # and their suffixes in either case
    ],
)
def test_group_keywords(word: str, parity: int, fewest: int, data: int, spares: int, children: int) -> None:
    g = vdev_group(word)
    assert g is not None and (g.parity, g.fewest, g.data, g.spares, g.children) == (
        parity,
        fewest,
        data,
        spares,
        children,
    )


@pytest.mark.parametrize("word", ["raidz4", "draid4", "draid1:0d", "draid1:2x", "draid1:d", "mirror2", "/dev/sda", ""])
def test_what_is_not_a_group_keyword(word: str) -> None:
    assert vdev_group(word) is None


def test_the_share_of_a_group_that_holds_data() -> None:
    g = vdev_group
    assert data_fraction(g("mirror"), 3) == Fraction(1, 3)  # type: ignore[arg-type]
    assert data_fraction(g("raidz2"), 6) == Fraction(4, 6)  # type: ignore[arg-type]
    # 7 children, 1 distributed spare, groups of 4 data + 2 parity: 6/7 of the space in groups, 4/6 of that data
    assert data_fraction(g("draid2:4d:1s"), 7) == Fraction(6, 7) * Fraction(4, 6)  # type: ignore[arg-type]
    # no data count: zpool's default, what is left up to 8 (12 children, parity 1: 8 data per group of 9)
    assert data_fraction(g("draid"), 12) == Fraction(8, 9)  # type: ignore[arg-type]
    assert data_fraction(g("draid1"), 3) == Fraction(2, 3)  # type: ignore[arg-type]
    assert leaves(["draid1:2d", "a", "b", "c", "mirror", "d", "e"]) == ["a", "b", "c", "d", "e"]


def test_pool_capacity_of_a_draid_pool() -> None:
    sizes = {d: 1 << 30 for d in "abcdefg"}
    # 4 children of 1 GiB, a spare, 2 data + 1 parity: 3 GiB in groups, 2/3 of it data = 2 GiB before reserves
    draid = pool_capacity(["draid1:2d:1s", "a", "b", "c", "d"], sizes)
    assert (2 << 30) * 0.85 < draid < 2 << 30
    # raidz2 of 4: 2 GiB of data before padding (32 of 66 sectors of a 128K block) and reserves
    assert (2 << 30) * 0.8 < pool_capacity(["raidz2", "a", "b", "c", "d"], sizes) < draid


def test_pool_capacity_is_never_more_than_the_pool_had() -> None:
    """`size = "100% free"` before the pool exists: the estimate said 992M for a 1 GiB lab disk that gave 831.25 MiB
    (zfs get available, fresh pool) and 15.5 GiB for a raidz2 of four 8 GiB disks that gave 14.7 GiB, so the
    layout found no room. The figures ZFS gave in the lab (OpenZFS 2.3.2) bound the estimate from above."""
    g, m = 1 << 30, 1 << 20
    one = pool_capacity(["a"], {"a": g})
    assert 0.95 * 831.25 * m < one <= 831.25 * m, one / m
    raidz2 = pool_capacity(["raidz2", "a", "b", "c", "d"], dict.fromkeys("abcd", 8 * g))
    assert 0.9 * 14.7 * g < raidz2 <= 14.7 * g, raidz2 / g
