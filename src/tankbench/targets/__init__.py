"""Target kinds: one module each, found here by name (a new kind is a new module, not a new branch)."""

from __future__ import annotations

import importlib
import pkgutil
from functools import cache

from tankbench.model import Target
from tankbench.targets.base import TargetKind, Workspace

__all__ = ["TargetKind", "Workspace", "kind_names", "kind_of", "kinds"]


@cache
def kinds() -> dict[str, type[TargetKind]]:
    """Every target kind in this package, by name (each module defines one concrete TargetKind)."""
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
