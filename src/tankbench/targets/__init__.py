"""Target kinds: one declaration module each, found here by name (a new kind is a new module, not a new branch).

Everything outside this package asks the registry about a kind (its declaration, its traits, its axes) and never
compares kind names. The registry loads declarations only (pure); a kind's run-time code is its driver
(drivers/, loaded by the runner).
"""

from __future__ import annotations

import importlib
import pkgutil
from collections.abc import Iterable
from dataclasses import replace
from functools import cache

from tankbench.model import Target
from tankbench.targets.base import KindTraits, TargetKind

__all__ = [
    "KindTraits",
    "TargetKind",
    "kind_axes",
    "kind_names",
    "kind_of",
    "kinds",
    "traits",
    "traits_of",
]


@cache
def kinds() -> dict[str, type[TargetKind]]:
    """Every target kind in this package, by name (each declaration module defines one concrete TargetKind)."""
    found: dict[str, type[TargetKind]] = {}
    for mod in pkgutil.iter_modules(__path__):
        module = importlib.import_module(f"{__name__}.{mod.name}")
        for value in vars(module).values():
            if (
                isinstance(value, type)
                and issubclass(value, TargetKind)
                and value.kind
                and value.__module__ == module.__name__
            ):
                found[value.kind] = value
    return found


def kind_names() -> tuple[str, ...]:
    """Target kind names in a stable order (the order campaign files document them)."""
    order = ("raw", "file", "dataset", "zvol")
    names = kinds()
    return tuple(k for k in order if k in names) + tuple(sorted(k for k in names if k not in order))


def kind_of(target: Target) -> type[TargetKind]:
    """The TargetKind class of a target."""
    return kinds()[target.kind]


@cache
def traits() -> dict[str, KindTraits]:
    """Every kind's traits by name: what campaign/, analysis/ and reports/ ask instead of comparing names."""
    return {name: replace(kinds()[name].traits, name=name) for name in kind_names()}


def traits_of(kind: str) -> KindTraits:
    """The traits of a kind by name; a kind tankbench does not know (an old journal's) has every trait off."""
    return traits().get(kind, KindTraits(name=kind))


@cache
def kind_axes() -> tuple[tuple[str, ...], tuple[str, ...]]:
    """(outer, inner): every kind's own axes in expansion order, outer ones before the host-wide axes and inner
    ones after; merged so that each kind's declared order holds."""
    ordered = [kinds()[k] for k in kind_names()]
    return _merge(k.axes for k in ordered), _merge(k.inner_axes for k in ordered)


def _merge(orders: Iterable[tuple[str, ...]]) -> tuple[str, ...]:
    """One order in which every given sequence keeps its own order (a stable topological sort; ties go to
    the name that was declared first)."""
    seqs = [list(s) for s in orders if s]
    first: dict[str, int] = {}
    for s in seqs:
        for a in s:
            first.setdefault(a, len(first))
    out: list[str] = []
    while any(seqs):
        heads = {s[0] for s in seqs if s}
        free = [a for a in heads if not any(a in s[1:] for s in seqs)]
        if not free:
            raise ValueError(f"target kinds declare their axes in contradicting orders: {sorted(heads)}")
        pick = min(free, key=first.__getitem__)
        out.append(pick)
        seqs = [s[1:] if s and s[0] == pick else s for s in seqs]
    return tuple(out)
