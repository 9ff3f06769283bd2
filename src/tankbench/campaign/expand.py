"""Matrix expansion: a pure function from Spec to numbered Tests in a stable order."""

from __future__ import annotations

import itertools
from collections.abc import Mapping
from typing import Any

from tankbench.campaign.claims import check_claims
from tankbench.campaign.report import check_names
from tankbench.campaign.schema import Spec
from tankbench.campaign.vocab import AXES, DATA_AXES, FIO_AXES, HOST_AXES, axes_of
from tankbench.errors import UserError
from tankbench.model import FILL, Target, Test
from tankbench.targets import kind_of
from tankbench.tunables import canonical_tunables, parse_tunables
from tankbench.units import fmt_size


def _matches(rule: Mapping[str, tuple[Any, ...]], target: Target, params: Mapping[str, Any]) -> bool:
    for axis, values in rule.items():
        if axis == "target":
            actual: Any = target.name
        elif axis == "kind":
            actual = target.kind
        elif axis == "tunables":  # a rule names some parameters: it matches tests that set them so
            have = parse_tunables(str(params.get("tunables", "default")))
            if not any(_tunables_match(parse_tunables(str(v)), have) for v in values):
                return False
            continue
        else:
            actual = params.get(axis)
        if actual not in values:
            return False
    return True


def _tunables_match(rule: Mapping[str, str], have: Mapping[str, str]) -> bool:
    """`default` matches tests that set nothing; otherwise every parameter the rule names, at its value."""
    return have == {} if not rule else all(have.get(k) == v for k, v in rule.items())


def test_name(target: Target, params: Mapping[str, Any], varying: set[str], several: bool) -> str:
    """Seed 000's style: `baseline-write-1M-raw-disk`, `zfs-fs-write-4k-def-sync-disabled`, then the fio
    axes that vary (`-qd4-buffered-fsync`)."""
    parts = kind_of(target).name_stem(target, params, varying, several)
    if "iodepth" in varying and "iodepth" in params:
        parts.append(f"qd{params['iodepth']}")
    if "numjobs" in varying and "numjobs" in params:
        parts.append(f"jobs{params['numjobs']}")
    if "size" in varying and "size" in params:
        parts.append(f"size{params['size']}")
    if "rwmixread" in varying and "rwmixread" in params:
        parts.append(f"mix{params['rwmixread']}")
    if "ioengine" in varying and "ioengine" in params:
        parts.append(str(params["ioengine"]))
    if "io" in varying and "io" in params:
        parts.append(str(params["io"]))
    if "sync_mode" in varying and "sync_mode" in params:
        parts.append(str(params["sync_mode"]))
    return "-".join(parts + _data_name_parts(params, varying))


def _data_name_parts(params: Mapping[str, Any], varying: set[str]) -> list[str]:
    """Name parts of the layout, buffer, cache and tunables axes that vary: `unwritten`, `comp50`, `cold`,
    `refill`, `bufcomp50`, `txg_timeout10`."""
    parts = []
    if "layout" in varying and "layout" in params:
        layout = str(params["layout"])
        parts.append(f"comp{layout.split(':')[1].rstrip('%')}" if layout.startswith("compressible:") else layout)
    if "buffer_compress_percentage" in varying and "buffer_compress_percentage" in params:
        parts.append(f"bufcomp{params['buffer_compress_percentage']}")
    if "refill_buffers" in varying and "refill_buffers" in params:
        parts.append("refill" if params["refill_buffers"] else "norefill")
    if "cache" in varying and "cache" in params:
        parts.append(str(params["cache"]))
    if "tunables" in varying and "tunables" in params:
        values = parse_tunables(str(params["tunables"]))
        parts.append("-".join(f"{k.removeprefix('zfs_')}{v}" for k, v in values.items()) or "defaults")
    return parts


def copy_params(params: dict[str, Any], spec: Spec) -> dict[str, Any]:
    """A copy test has no fio axes (they would only duplicate it): keep the ZFS axes, the command, the size."""
    if params.get("workload", "fio") == "fio":
        params.pop("workload", None)  # the default: ids of fio tests stay as they were before the axis existed
        return params
    out = {k: v for k, v in params.items() if k not in FIO_AXES and k not in DATA_AXES}
    out["workload"] = params["workload"]
    if params["workload"] == FILL:  # writes until the pool is full: the room it leaves, not a copy size
        out["fill_room"] = fmt_size(spec.fill_room)
    else:
        out["copy_size"] = fmt_size(spec.copy_size)
    return out


def axes_for(target: Target, axes: list[str]) -> list[str]:
    """The axes that apply to a target: fio axes always, ZFS axes only where they mean something."""
    return [a for a in axes if a in FIO_AXES or a in DATA_AXES or a in HOST_AXES or a in axes_of(target.kind)]


def run_settings(params: dict[str, Any], spec: Spec) -> dict[str, Any]:
    """Campaign-wide settings that change what a test measures, in its params (and so its id): the fixed
    [tunables] under the matrix's, and `mode = "size"` for size-based runs (absent: the defaults)."""
    if spec.tunables:
        merged = dict(spec.tunables)
        merged.update(parse_tunables(str(params.get("tunables", "default"))))
        params["tunables"] = canonical_tunables(merged)
    if spec.size_based and params.get("workload", "fio") == "fio":
        params["mode"] = "size"
    return params


def expand(spec: Spec) -> list[Test]:
    """The tests this step of the campaign runs: every test of the matrix (`expand_matrix`), or the fraction its
    `campaign.design` chooses (schedule/design.py), keeping each test's number in the matrix."""
    from tankbench.schedule.design import select

    tests = select(spec, expand_matrix(spec), include_ids(spec))
    return [t for t in tests if t.id in spec.only] if spec.only else tests  # `check`: the claims' tests only


def include_ids(spec: Spec) -> set[str]:
    """The ids of the [[include]] points' tests (a design always runs them)."""
    out = set()
    for target, params in _include_points(spec):
        if kind_of(target).traits.needs_pool:
            target = kind_of(target).on_pool(target, spec.zfs_root)
        out.add(_test(spec, 0, "", target, params).id)
    return out


def expand_matrix(spec: Spec) -> list[Test]:
    """All tests of a campaign: targets in file order x axes in AXES order x values in declared order,
    minus [[exclude]] matches, plus [[include]] points; numbered from 1; capped at campaign.max_tests."""
    axes = [a for a in AXES if a in spec.matrix]
    total = 0
    for target in spec.targets:
        n = 1
        for a in axes_for(target, axes):
            n *= len(spec.matrix[a])
        total += n
    if total > spec.max_tests * 4 and total > 100_000:
        raise _too_many(spec, total)
    tests = _numbered(spec, _matrix_points(spec, axes) + _include_points(spec), _varying(spec, axes))
    if len(tests) > spec.max_tests:
        raise _too_many(spec, len(tests))
    if not tests:  # nothing to run is a mistake in the file, not a campaign that is done
        raise _none_left(spec, total)
    check_claims(spec.path, spec.report.claims, tests)  # a claim nothing covers stops plan, run and check here
    check_names(
        spec.path, spec.report, tests, spec.targets, bool(spec.scale)
    )  # so does a goal, mix or report name that names none
    return tests


def _matrix_points(spec: Spec, axes: list[str]) -> list[tuple[Target, dict[str, Any]]]:
    """Every target x its axes' values, as its kind means them, minus what it refuses and [[exclude]] drops."""
    points: list[tuple[Target, dict[str, Any]]] = []
    for target in spec.targets:
        kind = kind_of(target)
        t_axes = axes_for(target, axes)
        for combo in itertools.product(*(spec.matrix[a] for a in t_axes)):
            params = kind.adjust(run_settings(copy_params(dict(zip(t_axes, combo)), spec), spec))
            if not kind.accepts(params):
                continue  # e.g. rsync replaces the destination file: it cannot write into a block device
            if params.get("layout") == "unwritten" and kind.traits.block_device and not kind.traits.needs_pool:
                continue  # a user's disk is never discarded: its blocks cannot be un-written
            if not any(_matches(rule, target, params) for rule in spec.excludes):
                points.append((target, params))
    return points


def _include_points(spec: Spec) -> list[tuple[Target, dict[str, Any]]]:
    """One point per [[include]] and target it names (all targets when it names none)."""
    points: list[tuple[Target, dict[str, Any]]] = []
    for inc in spec.includes:
        inc_axes = [a for a in AXES if a in spec.matrix or a in inc]  # an include may set an axis the matrix lacks
        for target in spec.targets:
            if inc.get("target", target.name) == target.name:
                point = {a: inc[a] if a in inc else spec.matrix[a][0] for a in axes_for(target, inc_axes)}
                points.append((target, kind_of(target).adjust(run_settings(copy_params(point, spec), spec))))
    return points


def _varying(spec: Spec, axes: list[str]) -> set[str]:
    """The axes test names show: those with several values, and those an [[include]] sets otherwise."""
    varying = {a for a in axes if len(spec.matrix[a]) > 1}
    return varying | {
        a
        for inc in spec.includes
        for a in inc
        if a != "target" and (a not in spec.matrix or inc[a] != spec.matrix[a][0])
    }


def _numbered(spec: Spec, points: list[tuple[Target, dict[str, Any]]], varying: set[str]) -> list[Test]:
    """Named, numbered tests in point order; a point equal to an earlier one (same id) is that test."""
    tests: list[Test] = []
    seen: set[str] = set()
    several = {k: sum(1 for t in spec.targets if t.kind == k) > 1 for k in {t.kind for t in spec.targets}}
    names: set[str] = set()
    for target, params in points:
        name = test_name(target, params, varying, several.get(target.kind, False))
        if kind_of(target).traits.needs_pool:
            target = kind_of(target).on_pool(target, spec.zfs_root)
        test = _test(spec, 0, name, target, params)
        if test.id in seen:
            continue
        seen.add(test.id)
        if name in names:
            name = f"{name}-{test.id[:6]}"
        names.add(name)
        tests.append(_test(spec, len(tests) + 1, name, target, params))
    return tests


def _test(spec: Spec, number: int, name: str, target: Target, params: dict[str, Any]) -> Test:
    return Test(
        number=number,
        name=name,
        target=target,
        params=params,
        fio_options=spec.fio,
        runtime=spec.runtime,
        ramp=spec.ramp,
    )


def _none_left(spec: Spec, total: int) -> UserError:
    if spec.excludes:
        return UserError(
            f"{spec.path}: [[exclude]]: the rules drop all {total} tests of the matrix, none is left to run",
            "narrow or remove an [[exclude]] rule (a rule drops every test that matches all of its keys)",
        )
    return UserError(
        f"{spec.path}: [matrix]: none of its {total} points is a test its targets can run",
        "check the targets' kinds against the matrix (e.g. copy workloads need a file system, not a raw device)",
    )


def _too_many(spec: Spec, n: int) -> UserError:
    return UserError(
        f"{spec.path}: the matrix expands to {n} tests, more than campaign.max_tests = {spec.max_tests}",
        "add [[exclude]] rules, drop axis values, or raise campaign.max_tests if you mean it",
    )
