"""Claims: testable findings a campaign states about its matrix, and goals, the same thing against a constant.

    [[claim]]
    name = "a log device speeds up sync writes"
    compare = { slog = [true, false] }   # an axis and the two levels compared (first against second)
    where = { sync_mode = "sync" }       # the tests it covers (optional; a list means any of its values)
    metric = "iops"                      # any metric of the registry (tankbench.metrics)
    expect = ">= 3x"                     # "<= 0.5x", "> 1x", "+20%" (at least 20 % more), "-20%", "within 10%"

A claim without `compare` states a value every configuration is measured against (`expect = ">= 117"`, in the
metric's unit): it holds when some covered test meets it, as a `[[goal]]` of an older campaign file does (a goal
is read as such a claim on its test case). Parsing here checks the keys, the metric and the expectation; which
tests a claim covers (`covers`, `pairs`) is decided on the expanded tests, so `check_claims` runs in `expand`,
before anything is run. The verdicts are analysis/claims.py's.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from tankbench.errors import SpecError
from tankbench.metrics import COPY, FIO, METRICS, resolve
from tankbench.model import COPY_WORKLOADS

CLAIM_KEYS = ("name", "compare", "where", "metric", "expect")
#: a goal's metric names (older campaign files): the registry key each stands for
GOAL_METRICS = {"MiB/s": "mibs", "durable MiB/s": "durable_mibs", "IOPS": "iops", "p99_ms": "p99_ms"}
OPS = (">=", ">", "<=", "<")
#: axes every test has, whatever the matrix says (a test's target name and its kind)
IDENTITY_AXES = ("target", "kind")
EXPECT_HINT = 'write e.g. ">= 3x", "<= 0.5x", "> 1x", "+20%", "-20%" or "within 10%"'
_EXPECT_RE = re.compile(
    r"^\s*(?P<op>>=|<=|>|<|≥|≤)?\s*(?P<num>[+-]?(?:\d+(?:\.\d*)?|\.\d+)(?:e[+-]?\d+)?)\s*(?P<unit>x|×|%)?\s*(?P<rest>.*?)\s*$",
    re.IGNORECASE,
)
_WITHIN_RE = re.compile(r"^\s*within\s+(?P<num>\d+(?:\.\d*)?|\.\d+)\s*%\s*$", re.IGNORECASE)


@dataclass(frozen=True)
class Expect:
    """What a claim expects: `op` (>=, >, <=, < or "within") and `value`, a ratio of the first level to the second
    (relative) or a value in the metric's unit (absolute); for "within", `value` is the fraction either side of 1."""

    op: str
    value: float
    relative: bool
    text: str

    def bounds(self) -> tuple[float, float]:
        """The band a "within" claim's interval must lie in."""
        return 1.0 - self.value, 1.0 + self.value


def parse_expect(text: object, relative: bool, unit: str, err: Any) -> Expect:
    """`expect` as written -> Expect; `err(problem, hint)` builds the SpecError naming the claim's key."""
    if not isinstance(text, str) or not text.strip():
        raise err("must be a string", EXPECT_HINT)
    within = _WITHIN_RE.match(text)
    if within:
        if not relative:
            raise err("a claim without `compare` states a value", 'e.g. expect = ">= 117" (in the metric\'s unit)')
        frac = float(within["num"]) / 100.0
        if not 0 < frac < 1:
            raise err("within needs a percentage between 0 and 100", 'e.g. "within 10%"')
        return Expect("within", frac, True, text.strip())
    m = _EXPECT_RE.match(text)
    if not m:
        raise err("does not parse", EXPECT_HINT)
    op = {"≥": ">=", "≤": "<="}.get(m["op"] or "", m["op"] or "")
    num, suffix, rest = float(m["num"]), (m["unit"] or "").lower(), m["rest"]
    if not math.isfinite(num):
        raise err("is not a finite number", EXPECT_HINT)
    if suffix in ("x", "×"):
        if rest or not op:
            raise err("does not parse" if rest else "needs a comparison before the ratio", EXPECT_HINT)
        if num <= 0:
            raise err("a ratio must be larger than 0", 'e.g. ">= 3x" or "<= 0.5x"')
        value = num
    elif suffix == "%":
        if rest or m["num"][0] not in "+-":
            raise err("a percentage needs its sign: + for more, - for less", 'e.g. "+20%" or "-20%"')
        value = 1.0 + num / 100.0
        op = op or (">=" if num >= 0 else "<=")
        if value <= 0:
            raise err("a change of -100 % or less leaves nothing to compare", 'e.g. "-50%"')
    else:
        if relative:
            raise err("a comparison expects a ratio", EXPECT_HINT)
        if not op:
            raise err("needs a comparison", 'e.g. ">= 117"')
        if rest and rest.lower() != unit.lower():
            raise err(f"the unit {rest!r} is not the metric's ({unit or 'none'})", f'e.g. ">= {num:g}"')
        return Expect(op, num, False, text.strip())
    if not relative:
        raise err("a claim without `compare` states a value, not a ratio", 'e.g. expect = ">= 117"')
    return Expect(op, value, True, text.strip())


@dataclass(frozen=True)
class Claim:
    """One testable statement: the first level of `axis` against the second on `metric` (or, without an axis, every
    covered test against a constant), over the tests `where` and `case` select."""

    name: str
    metric: str
    expect: Expect
    axis: str = ""
    levels: tuple[Any, ...] = ()
    where: tuple[tuple[str, tuple[Any, ...]], ...] = ()
    case: str = ""  # a test case name (a goal's `case`)
    source: str = "claim"  # "claim" or "goal": the table it was written in
    index: int = 0

    @property
    def key(self) -> str:
        """How an error names it: claim[0] ("its name")."""
        return f'{self.source}[{self.index}] ("{self.name}")'

    @property
    def relative(self) -> bool:
        return bool(self.axis)

    @property
    def text(self) -> str:
        """The claim in one line, e.g. `slog true vs false, iops >= 3x where sync_mode=sync`."""
        what = f"{self.axis} {level_text(self.levels[0])} vs {level_text(self.levels[1])}, " if self.axis else ""
        scope = [f"{k}={'|'.join(level_text(v) for v in vs)}" for k, vs in self.where]
        if self.case:
            scope.insert(0, f"test case {self.case}")
        return f"{what}{METRICS[self.metric].name} {self.expect.text}" + (f" where {', '.join(scope)}" if scope else "")


def level_text(v: Any) -> str:
    """An axis value as the tests hold it, as text (true/false for booleans), for matching and for people."""
    if type(v) is str:  # most values, and every one once as_text has run: the fast path
        return v
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, float) and v.is_integer():
        return str(int(v))
    return str(v)


def _metric(value: object, err: Any) -> str:
    key = GOAL_METRICS.get(value, value) if isinstance(value, str) else None
    key = resolve(key) if isinstance(key, str) else None
    if key is None:
        raise err("unknown metric", "use a registry key, e.g. iops, mibs, durable_mibs, p99_ms (docs/metrics.md)")
    return key


def _levels(value: object, err: Any) -> tuple[str, tuple[Any, ...]]:
    if not isinstance(value, dict) or len(value) != 1:
        raise err("must name one axis and its two levels", "e.g. compare = { slog = [true, false] }")
    ((axis, levels),) = value.items()
    if not isinstance(levels, list) or len(levels) != 2 or any(isinstance(v, dict | list) for v in levels):
        raise err(f"{axis} needs a list of two levels, first compared against second", f"e.g. {{ {axis} = [a, b] }}")
    if level_text(levels[0]) == level_text(levels[1]):
        raise err("compares a level with itself", "name two different levels of the axis")
    return str(axis), tuple(levels)


def _where(value: object, err: Any) -> tuple[tuple[str, tuple[Any, ...]], ...]:
    if not isinstance(value, dict):
        raise err("must be a table of axis = level (or a list of levels)", 'e.g. where = { sync_mode = "sync" }')
    out = []
    for k, v in value.items():
        vs = tuple(v) if isinstance(v, list) else (v,)
        if not vs or any(isinstance(x, dict | list) for x in vs):
            raise err(f"{k} must be a level or a list of levels", f'e.g. where = {{ {k} = "…" }}')
        out.append((str(k), vs))
    return tuple(out)


def parse_claim(path: str, i: int, table: object, strict: bool = True) -> Claim:
    """One [[claim]] table -> Claim (SpecError naming the claim and the key)."""
    if not isinstance(table, dict):
        raise SpecError(path, f"claim[{i}]", table, "must be a table", "write [[claim]] with name, metric, expect")
    name = table.get("name")
    label = f'claim[{i}] ("{name}")' if isinstance(name, str) and name else f"claim[{i}]"

    def err_for(key: str) -> Any:
        return lambda problem, hint="": SpecError(path, f"{label}.{key}", table.get(key), problem, hint)

    if strict:
        for k in table:
            if k not in CLAIM_KEYS:
                raise SpecError(path, f"{label}.{k}", None, "unknown key", f"known keys: {', '.join(CLAIM_KEYS)}")
    if not isinstance(name, str) or not name.strip():
        raise err_for("name")("must be a non-empty string", 'name = "a log device speeds up sync writes"')
    for k in ("metric", "expect"):
        if k not in table:
            raise err_for(k)("missing", "a claim needs name, metric and expect (compare and where are optional)")
    metric = _metric(table["metric"], err_for("metric"))
    axis, levels = _levels(table["compare"], err_for("compare")) if "compare" in table else ("", ())
    where = _where(table["where"], err_for("where")) if "where" in table else ()
    expect = parse_expect(table["expect"], bool(axis), METRICS[metric].unit, err_for("expect"))
    return Claim(name.strip(), metric, expect, axis, levels, where, index=i)


def claim_of_goal(i: int, name: str, case: str, metric: str, op: str, value: float) -> Claim:
    """A [[goal]] as the claim it is: every test of its case against a constant, met by some configuration."""
    key = GOAL_METRICS.get(metric, metric)
    text = f"{op} {value:g}"
    return Claim(name, key, Expect(op, value, False, text), case=case, source="goal", index=i)


def parse_claims(path: str, doc: Mapping[str, Any], strict: bool = True) -> tuple[Claim, ...]:
    """Every [[claim]] of a campaign document."""
    tables = doc.get("claim", [])
    if not isinstance(tables, list):
        raise SpecError(path, "claim", tables, "must be an array of tables", "write [[claim]]")
    claims = tuple(parse_claim(path, i, t, strict) for i, t in enumerate(tables))
    seen: dict[str, int] = {}
    for c in claims:
        if c.name in seen:
            raise SpecError(path, f"{c.key}.name", c.name, f"is also claim[{seen[c.name]}]'s name", "name each once")
        seen[c.name] = c.index
    return claims


# -- which tests a claim covers ----------------------------------------------------------------------------------


def _where_hits(claim: Claim, axes: Mapping[str, Any]) -> dict[str, bool | None]:
    """Per `where` key: True (the test has the axis at a listed level), False (at another), None (no such axis)."""
    return {k: (level_text(axes[k]) in {level_text(v) for v in vs}) if k in axes else None for k, vs in claim.where}


def matches(claim: Claim, axes: Mapping[str, Any], case: str) -> bool:
    """A test (its axes by name, its test case) is in a constant claim's scope: its `case`, and every `where` key
    at a listed level."""
    if claim.case and case != claim.case:
        return False
    return all(_where_hits(claim, axes).values())


def _pair_in_scope(claim: Claim, a: Mapping[str, Any], b: Mapping[str, Any]) -> bool:
    """A pair is in a claim's scope when, for each `where` key, whichever of the two has that axis has it at a
    listed level, and one of them has it: a level's own axis (a dataset's recordsize beside a zvol, a qcow2 image's
    cluster size beside a zvol) narrows the pair without dropping its partner, which has no such axis."""
    ha, hb = _where_hits(claim, a), _where_hits(claim, b)
    return all(ha[k] is not False and hb[k] is not False and (ha[k] or hb[k]) for k in ha)


def side(claim: Claim, axes: Mapping[str, Any]) -> int:
    """0 for the claim's first level, 1 for its second, -1 for neither (or no such axis)."""
    if claim.axis not in axes:
        return -1
    v = level_text(axes[claim.axis])
    return next((i for i, lv in enumerate(claim.levels) if level_text(lv) == v), -1)


def _ignored(axis: str) -> set[str]:
    """Axes a pair may differ in besides the compared one: comparing a target (or kind) changes the other too."""
    return {axis, *IDENTITY_AXES} if axis in IDENTITY_AXES else {axis}


def same_but_axis(axis: str, a: Mapping[str, Any], b: Mapping[str, Any]) -> bool:
    """Two tests differ in nothing both have but the compared axis (a level's own axes, e.g. a zvol's
    volblocksize against a dataset's recordsize, do not count)."""
    skip = _ignored(axis)
    return all(level_text(a[k]) == level_text(b[k]) for k in a.keys() & b.keys() if k not in skip)


def measures(claim: Claim, axes: Mapping[str, Any]) -> bool:
    """Whether the claim's metric is measured by a test with these axes: a copy test (`workload = "cp"`) has no
    IOPS, an fio test no copy figure. A test that cannot measure it is in no claim's scope: more runs of it would
    never decide the claim (a check ran copy tests three times for an IOPS claim)."""
    kind = COPY if str(axes.get("workload", "fio")) in COPY_WORKLOADS else FIO
    return kind in METRICS[claim.metric].kinds


def pairs(
    claim: Claim, tests: Sequence[tuple[Mapping[str, Any], str]], every_kind: bool = False
) -> list[tuple[int, int]]:
    """Matched pairs (index of a first-level test, index of a second-level test) among `tests` (axes, case);
    a test may be in several pairs (one zvol against datasets of three recordsizes). Tests are bucketed by the
    axes they have, and each bucket's partners found by their values on the axes two buckets share: a matrix of
    thousands of tests pairs in one pass, not by comparing every two."""
    skip = _ignored(claim.axis)
    sides: tuple[dict[frozenset[str], list[int]], dict[frozenset[str], list[int]]] = ({}, {})
    for i, (axes, case) in enumerate(tests):
        s = (
            side(claim, axes)
            if (not claim.case or case == claim.case) and (every_kind or measures(claim, axes))
            else -1
        )
        if s >= 0:
            sides[s].setdefault(frozenset(axes.keys() - skip), []).append(i)
    out: list[tuple[int, int]] = []
    for keys_a, firsts in sides[0].items():
        for keys_b, seconds in sides[1].items():
            common = sorted(keys_a & keys_b)
            index: dict[tuple[str, ...], list[int]] = {}
            for j in seconds:
                index.setdefault(tuple(level_text(tests[j][0][k]) for k in common), []).append(j)
            for i in firsts:
                for j in index.get(tuple(level_text(tests[i][0][k]) for k in common), ()):
                    if _pair_in_scope(claim, tests[i][0], tests[j][0]):
                        out.append((i, j))
    return sorted(out)


def covered(claim: Claim, tests: Sequence[tuple[Mapping[str, Any], str]], every_kind: bool = False) -> list[int]:
    """Indexes of the tests a claim is judged on: its pairs' tests, or for a constant claim every test in scope;
    only tests that measure its metric (`every_kind`: any test, for saying why a claim covers none)."""
    if not claim.relative:
        return [
            i
            for i, (axes, case) in enumerate(tests)
            if matches(claim, axes, case) and (every_kind or measures(claim, axes))
        ]
    return sorted({i for p in pairs(claim, tests, every_kind) for i in p})


# -- checked against the expanded tests (expand() calls this: bad claims stop plan, run and check) ---------------


def axes_of_test(test: Any) -> dict[str, str]:
    """Every axis of a model.Test by name, as analysis's TestSummary.axes() gives them (target, kind, the target's
    properties, then the test's params: a matrix axis overrides the target's setting), as level text."""
    out: dict[str, Any] = {"target": test.target.name, "kind": test.target.kind}
    from tankbench.zfs.props import zfs_options

    out.update(zfs_options(test.target).props)
    out.update(test.params)
    return as_text(out)


def as_text(axes: Mapping[str, Any]) -> dict[str, str]:
    """Axis values as level text, once per test (matching compares text; level_text of text is itself)."""
    return {k: level_text(v) for k, v in axes.items()}


def _levels_of(tests: Sequence[Mapping[str, Any]], axis: str) -> list[str]:
    return sorted({level_text(a[axis]) for a in tests if axis in a})


def _check_scope(path: str, claim: Claim, key: str, axis: str, wanted: Sequence[Any], seen: list[str]) -> None:
    shown = {axis: list(wanted)} if key == "compare" or len(wanted) > 1 else {axis: wanted[0]}
    if not seen:
        raise SpecError(
            path,
            f"{claim.key}.{key}",
            shown,
            f"the matrix has no axis {axis!r}",
            "name an axis of the campaign's tests (a [matrix] key, a target property, target or kind)",
        )
    missing = [level_text(v) for v in wanted if level_text(v) not in seen]
    if missing:
        raise SpecError(
            path,
            f"{claim.key}.{key}",
            shown,
            f"the matrix has no {axis} = {', '.join(missing)}",
            f"levels of {axis} in this campaign: {', '.join(seen)}",
        )


def check_claims(path: str, claims: Sequence[Claim], tests: Sequence[Any]) -> None:
    """SpecError for a [[claim]] naming an axis or level the expanded tests lack, or one that no test (no matched
    pair) covers; goals keep their old leniency (a case nobody ran is "not measured")."""
    if not any(c.source == "claim" for c in claims):
        return
    rows = [(axes_of_test(t), t.test_case) for t in tests if not t.is_fill]
    axes = [a for a, _ in rows]
    for c in claims:
        if c.source != "claim":
            continue
        for k, vs in c.where:
            _check_scope(path, c, "where", k, vs, _levels_of(axes, k))
        if c.axis:
            _check_scope(path, c, "compare", c.axis, c.levels, _levels_of(axes, c.axis))
        if not covered(c, rows):
            idx = covered(c, rows, every_kind=True)  # only to say why: thousands of tests pair once otherwise
            what = (
                f"no pair of tests differs only in {c.axis}"
                if c.axis and not idx
                else f"its tests do not measure {c.metric}"
                if idx
                else "no test is in its scope"
            )
            raise SpecError(
                path,
                f"{c.key}.{'compare' if c.axis else 'where'}",
                None,
                f"no test covers this claim: {what}",
                "widen `where`, or compare levels the matrix runs with everything else equal "
                "(`tankbench plan` lists the tests)",
            )
