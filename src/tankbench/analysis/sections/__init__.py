"""The report's sections: every module of this package declares one (`SECTION`, an analysis.result.SectionSpec),
found here at call time; the analysis computes each one's data and every exporter renders them in `order`."""

from __future__ import annotations

import importlib
import pkgutil
from functools import cache
from typing import Any

from tankbench.analysis.result import SectionSpec


@cache
def registry() -> tuple[SectionSpec[Any], ...]:
    """Every section, in report order (a module without SECTION is a helper)."""
    specs = []
    for m in pkgutil.iter_modules(__path__):
        spec = getattr(importlib.import_module(f"{__name__}.{m.name}"), "SECTION", None)
        if isinstance(spec, SectionSpec):
            specs.append(spec)
    names = [s.name for s in specs]
    dup = sorted({n for n in names if names.count(n) > 1})
    assert not dup, f"two report sections share a name: {dup}"
    return tuple(sorted(specs, key=lambda s: (s.order, s.name)))
