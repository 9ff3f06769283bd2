"""Report settings, goals and workload mix: the [report], [mix] and [[goal]] tables of a campaign, checked by
parse_spec when the campaign is planned or run, and read again by the report from the campaign text the journal
stored (one parser for both).

Schema (all optional)::

    [report]
    baseline = "raw"              # target kind or target name whose rows are baselines
    test_case = ["rw", "bs"]      # grouping keys of a leaderboard (any params key)
    timing_threshold = "10%"      # wall > (ramp + runtime) * (1 + threshold) is a timing issue; "30s" also works.
                                  # Default: the threshold each run recorded (checks timing.threshold_s), else 10%

    [mix]                         # weights of test cases in your real workload (normalised to 1)
    "read random 4k" = 0.56
    "write random 4k" = 0.24

    [[goal]]
    name = "saturate 1 Gbps"
    case = "write seq 1M"
    metric = "MiB/s"              # or "durable MiB/s", "IOPS", "p99_ms"
    op = ">="                     # >=, >, <=, <
    value = 117
"""

from __future__ import annotations

import difflib
import math
import re
import tomllib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from tankbench import units
from tankbench.campaign.claims import Claim, claim_of_goal, parse_claims
from tankbench.errors import SpecError, UserError
from tankbench.model import case_name

GOAL_METRICS = {"MiB/s": "mibs", "durable MiB/s": "durable_mibs", "IOPS": "iops", "p99_ms": "p99_ms"}
GOAL_OPS = (">=", ">", "<=", "<")


@dataclass(frozen=True)
class Goal:
    """A target a configuration must meet in one test case, e.g. write seq 1M >= 117 MiB/s."""

    name: str
    case: str
    metric: str
    op: str
    value: float

    def met_by(self, x: float) -> bool:
        return {">=": x >= self.value, ">": x > self.value, "<=": x <= self.value, "<": x < self.value}[self.op]

    @property
    def text(self) -> str:
        return f"{self.case}: {self.metric} {self.op} {self.value:g}"


@dataclass(frozen=True)
class Settings:
    """Everything the report reads from the campaign besides the tests."""

    baseline: str = "raw"
    case_keys: tuple[str, ...] = ("rw", "bs")
    timing_fraction: float = 0.10
    timing_seconds: float = 0.0
    timing_explicit: bool = False
    mix: tuple[tuple[str, float], ...] = ()
    goals: tuple[Goal, ...] = field(default_factory=tuple)
    #: the campaign's [[claim]]s, then its [[goal]]s as the claims they are (one mechanism, one verdict)
    claims: tuple[Claim, ...] = field(default_factory=tuple)

    def timing_limit(self, expected_s: float) -> float:
        """Seconds of excess wall time tolerated for a run expected to take expected_s."""
        return self.timing_seconds if self.timing_seconds else expected_s * self.timing_fraction


def parse_threshold(text: Any, path: str = "", key: str = "report.timing_threshold") -> tuple[float, float]:
    """ "10%" -> (0.10, 0); "30s" -> (0, 30); a plain number is a fraction (units.parse_threshold, the grammar
    campaign.timing_threshold shares)."""
    try:
        return units.parse_threshold(text)
    except ValueError:
        raise SpecError(
            path, key, text, "not a percentage or a number of seconds", 'write e.g. "10%" or "30s"'
        ) from None


def parse_mix_text(text: str) -> tuple[tuple[str, float], ...]:
    """`--mix "read random 4k=56,write random 4k=24,read seq 1M=20"` -> normalised weights."""
    items = []
    for part in [p for p in re.split(r"[,;]", text) if p.strip()]:
        name, sep, weight = part.rpartition("=") if "=" in part else part.rpartition(":")
        try:
            w = float(weight.strip().rstrip("%"))
        except ValueError:
            w = -1.0
        if not sep or not name.strip() or not math.isfinite(w) or w <= 0:
            raise UserError(
                f"bad --mix item {part.strip()!r}",
                'write test cases with positive weights: --mix "read random 4k=70,write random 4k=30"',
            )
        items.append((name.strip(), w))
    if not items:
        raise UserError("empty --mix", 'write e.g. --mix "read random 4k=70,write random 4k=30"')
    return _normalise(items)


def _normalise(items: list[tuple[str, float]]) -> tuple[tuple[str, float], ...]:
    total = sum(w for _, w in items)
    if not math.isfinite(total) and items:  # finite weights whose sum overflows (1e308 twice): scale them first
        top = max(w for _, w in items)
        items = [(name, w / top) for name, w in items]
        total = sum(w for _, w in items)
    return tuple((name, w / total) for name, w in items)


REPORT_KEYS = ("baseline", "test_case", "timing_threshold")
GOAL_KEYS = ("name", "case", "metric", "op", "value")


def _unknown(path: str, table: Mapping[str, Any], allowed: tuple[str, ...], prefix: str) -> None:
    for k in table:
        if k not in allowed:
            close = difflib.get_close_matches(k, allowed, n=1)
            hint = f"did you mean `{close[0]}`?" if close else f"known keys: {', '.join(allowed)}"
            raise SpecError(path, f"{prefix}{k}", None, "unknown key", hint)


def _parse_goal(path: str, i: int, g: Any, strict: bool = False) -> Goal:
    key = f"goal[{i}]"
    if not isinstance(g, dict):
        raise SpecError(path, key, g, "must be a table", "write [[goal]] with case, metric, op, value")
    if strict:
        _unknown(path, g, GOAL_KEYS, f"{key}.")
    for k in ("case", "metric", "value"):
        if k not in g:
            raise SpecError(path, f"{key}.{k}", None, "missing", "a goal needs case, metric, op and value")
    if strict and not isinstance(g["case"], str):
        raise SpecError(
            path, f"{key}.case", g["case"], "must be a string", 'a test case, e.g. case = "write random 4k"'
        )
    if not isinstance(g["metric"], str) or g["metric"] not in GOAL_METRICS:
        raise SpecError(path, f"{key}.metric", g["metric"], "unknown metric", f"use one of {', '.join(GOAL_METRICS)}")
    op = g.get("op", "<=" if g["metric"] == "p99_ms" else ">=")
    if op not in GOAL_OPS:
        raise SpecError(path, f"{key}.op", op, "unknown comparison", f"use one of {' '.join(GOAL_OPS)}")
    value = g["value"]
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise SpecError(path, f"{key}.value", value, "not a number", "write a plain number, e.g. value = 117")
    name = str(g.get("name") or f"{g['case']} {g['metric']} {op} {g['value']}")
    return Goal(name, str(g["case"]), str(g["metric"]), op, float(value))


def _parse_mix(path: str, mix: Any) -> tuple[tuple[str, float], ...]:
    if not isinstance(mix, dict) or not mix:
        raise SpecError(path, "mix", mix, "must be a table of test case = weight", '"read random 4k" = 0.7')
    for name, w in mix.items():
        if isinstance(w, bool) or not isinstance(w, int | float) or not math.isfinite(w) or w <= 0:
            raise SpecError(path, f"mix.{name}", w, "weight must be a positive number", "e.g. 0.3 or 30")
    return _normalise([(str(k), float(v)) for k, v in mix.items()])


def parse_settings(spec_text: str, path: str = "campaign") -> Settings:
    """Read [report], [mix], [[claim]] and [[goal]] from a campaign's TOML text; SpecError on bad values."""
    try:
        doc = tomllib.loads(spec_text or "")
    except tomllib.TOMLDecodeError as e:
        raise SpecError(path, "(file)", None, f"not valid TOML: {e}", "fix the campaign file") from e
    except RecursionError:  # tomllib recurses into nested arrays and tables
        raise SpecError(
            path, "(file)", None, "arrays or tables nested too deep to read", "fix the campaign file"
        ) from None
    return settings_from_doc(scaled(doc, spec_text or ""), path)


def scaled(doc: dict[str, Any], spec_text: str) -> dict[str, Any]:
    """The document with the [scale.NAME] the campaign was run at merged in, as parse_spec merged it: the text as run
    names it in its last lines ("# --scale ci"); the claims, goals and report settings are then the run's own."""
    marker = "# --scale "
    names = [ln[len(marker) :].strip() for ln in spec_text.splitlines() if ln.startswith(marker)]
    scales = doc.get("scale")
    table = scales.get(names[-1]) if names and isinstance(scales, dict) else None
    if not isinstance(table, dict):
        return doc
    out = {k: (dict(v) if isinstance(v, dict) else v) for k, v in doc.items()}
    for key, value in table.items():
        if isinstance(value, dict) and isinstance(out.get(key), dict):
            out[key].update(value)
        else:
            out[key] = value
    return out


def settings_from_doc(doc: Mapping[str, Any], path: str, strict: bool = False) -> Settings:
    """The report settings of a campaign's parsed TOML document (parse_spec passes its own, `strict`: unknown
    keys and a non-string baseline or goal case are refused there, while a journal's old copy is still read)."""
    rep = doc.get("report", {})
    if not isinstance(rep, dict):
        raise SpecError(path, "report", rep, "must be a table", "write [report]")
    if strict:
        _unknown(path, rep, REPORT_KEYS, "report.")
        if not isinstance(rep.get("baseline", ""), str):
            raise SpecError(path, "report.baseline", rep["baseline"], "must be a string", 'e.g. baseline = "raw"')
    keys = rep.get("test_case", ["rw", "bs"])
    if not isinstance(keys, list) or not keys or not all(isinstance(k, str) for k in keys):
        raise SpecError(path, "report.test_case", keys, "must be a list of parameter names", '["rw", "bs"]')
    frac, secs = parse_threshold(rep.get("timing_threshold", "10%"), path)
    explicit = "timing_threshold" in rep
    goals = doc.get("goal", [])
    if not isinstance(goals, list):
        raise SpecError(path, "goal", goals, "must be an array of tables", "write [[goal]]")
    parsed_goals = tuple(_parse_goal(path, i, g, strict) for i, g in enumerate(goals))
    as_claims = tuple(claim_of_goal(i, g.name, g.case, g.metric, g.op, g.value) for i, g in enumerate(parsed_goals))
    return Settings(
        baseline=str(rep.get("baseline", "raw")),
        case_keys=tuple(keys),
        timing_fraction=frac,
        timing_seconds=secs,
        timing_explicit=explicit,
        mix=_parse_mix(path, doc["mix"]) if "mix" in doc else (),
        goals=parsed_goals,
        claims=parse_claims(path, doc, strict) + as_claims,
    )


def check_names(path: str, settings: Settings, tests: Sequence[Any], targets: Sequence[Any], scaled: bool) -> None:
    """SpecError for a [[goal]] case, a [mix] name, a [report] test_case key or baseline that names nothing of the
    campaign's expanded tests (as check_claims refuses a claim no test covers): each would be silently empty.
    At a [scale.NAME] (`scaled`) goals and mix may name cases the scale leaves out (recordsize-mix's ci keeps two
    of its mix's three): they are checked on the campaign as written."""
    params = [t.params for t in tests]
    keys = sorted({k for p in params for k in p})
    for i, k in enumerate(settings.case_keys if settings.case_keys != Settings.case_keys else ()):
        if k not in keys:
            raise SpecError(path, f"report.test_case[{i}]", k, "is not a parameter of any test", _few("keys", keys))
    cases = list(dict.fromkeys(case_name(p, settings.case_keys) for p in params))
    for i, g in enumerate(() if scaled else settings.goals):
        if g.case not in cases:
            raise SpecError(
                path, f"goal[{i}].case", g.case, "is not a test case of this campaign", _few("cases", cases)
            )
    for name, _ in () if scaled else settings.mix:
        if name not in cases:
            raise SpecError(path, f'mix."{name}"', None, "is not a test case of this campaign", _few("cases", cases))
    names = list(dict.fromkeys([t.name for t in targets] + [t.kind for t in targets]))
    if settings.baseline != Settings.baseline and settings.baseline not in names:  # the default is not checked
        raise SpecError(
            path,
            "report.baseline",
            settings.baseline,
            "names no target or target kind of this campaign",
            _few("targets and kinds", names),
        )


def _few(what: str, names: Sequence[str]) -> str:
    shown = ", ".join(repr(n) for n in names[:6]) + (f" and {len(names) - 6} more" if len(names) > 6 else "")
    return f"its {what}: {shown} (`tankbench plan` lists the tests)"
