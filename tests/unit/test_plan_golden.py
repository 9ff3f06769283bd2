"""Golden plans: the tests every preset (also at --scale quick), every tests/fixtures/*.toml and examples/
campaign expands to, and the job files `plan --export` writes for them, against stored hashes.

A refactor of campaign/, targets/ or fio/jobs.py must leave them byte-identical. A change that means to alter a
plan (a new preset value, a new name part) regenerates the hashes with `python -m tests.unit.test_plan_golden`
and says so in its commit; bench/plan_snapshot.py writes the full outputs for a `diff -r` when one differs.
"""

from __future__ import annotations

import hashlib
import json
import sys
from pathlib import Path

import pytest

from tankbench.campaign import expand, parse_spec
from tankbench.fio.jobs import job_script, job_text

ROOT = Path(__file__).resolve().parents[2]
GOLDEN = ROOT / "tests" / "fixtures" / "plan-golden.json"


def campaigns() -> dict[str, tuple[Path, str]]:
    """label -> (campaign file, scale)."""
    out: dict[str, tuple[Path, str]] = {}
    for f in sorted((ROOT / "src" / "tankbench" / "presets").glob("*.toml")):
        out[f"presets/{f.name}"] = (f, "")
        if "[scale.quick]" in f.read_text():
            out[f"presets/{f.name}@quick"] = (f, "quick")
    for pattern in ("tests/fixtures/*.toml", "examples/*.toml"):
        for f in sorted(ROOT.glob(pattern)):
            out[f.relative_to(ROOT).as_posix()] = (f, "")
    return out


def plan_hash(label: str, path: Path, scale: str) -> str:
    """sha256 over each test's number, id, name, case, target and params (in order) and its exported files."""
    spec = parse_spec(path.read_text(), label, scale)  # the label, not the path: the same in every checkout
    h = hashlib.sha256()
    for t in expand(spec):
        row = [t.number, t.id, t.name, t.test_case, t.target.name, t.target.kind, dict(t.params)]
        h.update(json.dumps(row, default=str).encode())
        h.update(job_text(t).encode())
        h.update(job_script(t, f"{t.number:04d}-job.fio", spec.campaign_id).encode())
    return h.hexdigest()


def test_every_campaign_has_a_golden_plan() -> None:
    assert sorted(json.loads(GOLDEN.read_text())) == sorted(campaigns())


@pytest.mark.parametrize("label", sorted(campaigns()))
def test_plan_is_unchanged(label: str) -> None:
    golden = json.loads(GOLDEN.read_text())
    path, scale = campaigns()[label]
    assert plan_hash(label, path, scale) == golden.get(label), (
        f"the plan of {label} changed; if you meant it, run `python -m tests.unit.test_plan_golden`"
    )


if __name__ == "__main__":
    hashes = {label: plan_hash(label, path, scale) for label, (path, scale) in campaigns().items()}
    GOLDEN.write_text(json.dumps(hashes, indent=2, sort_keys=True) + "\n")
    sys.exit(0)
