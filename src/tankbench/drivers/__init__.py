"""Target kinds' drivers: the run-time side of each kind, one module per kind, found by the kind's declaration.

Only the runner loads drivers (`drivers_for`): the parser, the plan and the analysis import the declarations
(targets/) and never run-time code. A kind's driver is the module of the same name as its declaration's module
here, and its class the subclass of that declaration there.
"""

from __future__ import annotations

import importlib
from functools import cache

from tankbench.drivers.base import TargetDriver, Workspace
from tankbench.model import Target
from tankbench.targets import kinds

__all__ = ["TargetDriver", "Workspace", "driver_of", "drivers_for"]


@cache
def driver_of(kind: str) -> type[TargetDriver]:
    """The driver class of a kind (its declaration's module name in this package)."""
    declaration = kinds()[kind]
    module = importlib.import_module(f"{__name__}.{declaration.__module__.rsplit('.', 1)[-1]}")
    for value in vars(module).values():
        if isinstance(value, type) and issubclass(value, TargetDriver) and value.__module__ == module.__name__:
            if value.kind == kind:
                return value
    raise LookupError(f"target kind {kind!r} has no driver in {module.__name__}")


def drivers_for(ws: Workspace, targets: tuple[Target, ...] | list[Target]) -> dict[str, TargetDriver]:
    """One driver of each kind the targets use, sharing the workspace."""
    return {t.kind: driver_of(t.kind)(ws) for t in targets if t.kind}
