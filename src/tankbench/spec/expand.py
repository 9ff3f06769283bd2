"""Matrix expansion: a pure function from Spec to numbered Tests in a stable order."""

from __future__ import annotations

import itertools
from collections.abc import Mapping
from typing import Any

from tankbench.errors import UserError
from tankbench.model import Target, Test
from tankbench.spec.parse import AXES, Spec


def _matches(rule: Mapping[str, tuple[Any, ...]], target: Target, params: Mapping[str, Any]) -> bool:
    for axis, values in rule.items():
        if axis == "target":
            actual: Any = target.name
        elif axis == "kind":
            actual = target.kind
        else:
            actual = params.get(axis)
        if actual not in values:
            return False
    return True


def test_name(target: Target, params: Mapping[str, Any], varying: set[str], several: bool) -> str:
    """Seed 000's style: `baseline-write-1M-raw-disk`, then the axes that vary (`-qd4-buffered-fsync`)."""
    rw, bs = params["rw"], params["bs"]
    if target.kind == "raw":
        stem = f"baseline-{target.name}-{rw}-{bs}-raw-disk" if several else f"baseline-{rw}-{bs}-raw-disk"
    else:
        stem = f"{target.kind}-{target.name}-{rw}-{bs}"
    parts = [stem]
    if "iodepth" in varying:
        parts.append(f"qd{params['iodepth']}")
    if "numjobs" in varying:
        parts.append(f"jobs{params['numjobs']}")
    if "size" in varying:
        parts.append(f"size{params['size']}")
    if "rwmixread" in varying and "rwmixread" in params:
        parts.append(f"mix{params['rwmixread']}")
    if "ioengine" in varying:
        parts.append(str(params["ioengine"]))
    if "io" in varying:
        parts.append(str(params["io"]))
    if "sync_mode" in varying:
        parts.append(str(params["sync_mode"]))
    return "-".join(parts)


def expand(spec: Spec) -> list[Test]:
    """All tests of a campaign: targets in file order x axes in AXES order x values in declared order,
    minus [[exclude]] matches, plus [[include]] points; numbered from 1; capped at campaign.max_tests."""
    axes = [a for a in AXES if a in spec.matrix]
    points: list[tuple[Target, dict[str, Any]]] = []
    total = len(spec.targets)
    for a in axes:
        total *= len(spec.matrix[a])
    if total > spec.max_tests * 4 and total > 100_000:
        raise _too_many(spec, total)
    for target in spec.targets:
        for combo in itertools.product(*(spec.matrix[a] for a in axes)):
            params = dict(zip(axes, combo))
            if not any(_matches(rule, target, params) for rule in spec.excludes):
                points.append((target, params))
    for inc in spec.includes:
        params = {a: inc.get(a, spec.matrix[a][0]) for a in axes}
        for target in spec.targets:
            if inc.get("target", target.name) == target.name:
                points.append((target, params))
    tests: list[Test] = []
    seen: set[str] = set()
    varying = {a for a in axes if len(spec.matrix[a]) > 1}
    varying |= {a for inc in spec.includes for a in inc if a != "target" and inc[a] != spec.matrix[a][0]}
    several = {k: sum(1 for t in spec.targets if t.kind == k) > 1 for k in ("raw", "file")}
    names: set[str] = set()
    for target, params in points:
        name = test_name(target, params, varying, several.get(target.kind, False))
        test = Test(number=0, name=name, target=target, params=params, fio_options=spec.fio,
                    runtime=spec.runtime, ramp=spec.ramp)
        if test.id in seen:
            continue
        seen.add(test.id)
        if name in names:
            name = f"{name}-{test.id[:6]}"
        names.add(name)
        tests.append(Test(number=len(tests) + 1, name=name, target=target, params=params,
                          fio_options=spec.fio, runtime=spec.runtime, ramp=spec.ramp))
    if len(tests) > spec.max_tests:
        raise _too_many(spec, len(tests))
    return tests


def _too_many(spec: Spec, n: int) -> UserError:
    return UserError(
        f"{spec.path}: the matrix expands to {n} tests, more than campaign.max_tests = {spec.max_tests}",
        "add [[exclude]] rules, drop axis values, or raise campaign.max_tests if you mean it")
