"""Campaign rules of `workload = "fill"` (the pool-full experiment, guestconf/fill.py): pure, called by parse.py.

A fill test fills the campaign's pool on purpose, so it runs only where that harms nobody and means
something: in the guest of a vm-disk target, on a pool tankbench creates, with a guest disk larger than
the room it leaves, on a thin backing.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from tankbench.errors import SpecError
from tankbench.guestconf.fill import WRITE_PER_ROOM
from tankbench.model import FILL, Target
from tankbench.targets import traits, traits_of
from tankbench.units import fmt_size

#: the pool's free space a fill test leaves the guest (campaign.fill_room): small, so the guest writes little
DEFAULT_ROOM = 64 << 20
#: preallocations that allocate the whole image up front: not a thin backing
THICK = ("falloc", "full")

Err = Callable[[str, object, str, str], SpecError]


def excluded(excludes: tuple[Mapping[str, tuple[Any, ...]], ...], point: Mapping[str, Any]) -> bool:
    """Whether an [[exclude]] rule drops every test with these values, whatever the other axes are."""
    return any(rule and set(rule) <= set(point) and all(point[k] in v for k, v in rule.items()) for rule in excludes)


def check_fill(
    err: Err,
    matrix: Mapping[str, tuple[Any, ...]],
    excludes: tuple[Mapping[str, tuple[Any, ...]], ...],
    includes: tuple[Mapping[str, Any], ...],
    pool: Any,
    targets: tuple[Target, ...],
    room: int,
) -> None:
    """SpecError for a fill test the campaign would run where it makes no sense or could harm."""
    in_matrix = FILL in matrix.get("workload", ())
    filled = [i for i, inc in enumerate(includes) if inc.get("workload") == FILL]
    if not in_matrix and not filled:
        return
    key = "matrix.workload" if in_matrix else f"include[{filled[0]}].workload"
    for t in targets:
        by_matrix = in_matrix and not excluded(excludes, {"target": t.name, "kind": t.kind, "workload": FILL})
        by_include = [i for i in filled if includes[i].get("target", t.name) == t.name]
        if (by_matrix or by_include) and not traits_of(t.kind).runs_in_guest:
            guests = " or ".join(k for k, tr in traits().items() if tr.runs_in_guest)
            raise err(
                key if by_matrix else f"include[{by_include[0]}].workload",
                FILL,
                f"runs only on {guests} targets, and target {t.name!r} is a {t.kind}",
                f'add [[exclude]] target = "{t.name}" workload = "fill", or give the fill its own campaign'
                if by_matrix
                else f"name a {guests} target in that [[include]] (target = …)",
            )
        if (by_matrix or by_include) and t.size < WRITE_PER_ROOM * room:
            raise err(
                key,
                FILL,
                f"target {t.name!r} ({fmt_size(t.size)}) must be at least {WRITE_PER_ROOM}x campaign.fill_room "
                f"({fmt_size(room)}), or the guest's writes may never fill the pool",
                "make the target larger or campaign.fill_room smaller",
            )
    if pool is not None and not pool.creates:
        raise err(
            key,
            FILL,
            "fills the pool, and this campaign uses an existing one (pool.parent)",
            "tankbench fills only a pool it creates: use [pool] name + vdevs (other datasets there would "
            "get ENOSPC too)",
        )
    for value in matrix.get("preallocation", ()):
        if in_matrix and value in THICK and not excluded(excludes, {"workload": FILL, "preallocation": value}):
            raise err(
                "matrix.preallocation",
                value,
                "allocates the whole image up front; a fill test needs a thin backing",
                f'add [[exclude]] workload = "fill" preallocation = "{value}", or give the fill its own campaign',
            )
