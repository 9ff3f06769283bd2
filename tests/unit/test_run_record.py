"""scripts/test's run record (.test-results/last-run.json): written by its exit trap whatever ends the run — a
failed step, failed tests, SIGTERM, Ctrl-C — with the commit, the result and the tiers; a tier over its budget
is named in the run's last lines with its costliest tests.

The real scripts/test and scripts/run-record run in a throwaway git repository whose setup, ruff, mypy and pytest
are stand-ins (shell scripts named as fakes): what is under test is the script's bookkeeping, not the tools."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.conftest import ROOT, tier_figures, wait_until

FAKE_PYTEST = """#!/bin/bash
# a fake pytest: writes the summary tests/conftest.py would write, then does what $FAKE_PYTEST_DOES says
echo "$@" > "$FAKE_DIR/pytest-args"
cat > "$TANKBENCH_TEST_SUMMARY" <<JSON
{"exitstatus": ${FAKE_EXIT:-0}, "tests": 3, "failed": 0, "failures": [],
 "tiers": [{"tier": "lab", "tests": 2, "test_s": 2000.0, "span_s": 1900.0, "budget_s": 1800.0, "over_budget": true,
            "costliest": [{"test": "tests/lab/test_a.py::test_slow", "seconds": 1500.0},
                          {"test": "tests/lab/test_b.py::test_less", "seconds": 500.0}]},
           {"tier": "unit", "tests": 1, "test_s": 1.0, "span_s": 1.0, "budget_s": 120.0, "over_budget": false,
            "costliest": [{"test": "tests/unit/test_c.py::test_quick", "seconds": 1.0}]}],
 "slowest": [], "boots": {"count": 2, "seconds": 12.5, "each": []}}
JSON
case "${FAKE_PYTEST_DOES:-pass}" in
  pass) exit 0 ;;
  fail) exit 1 ;;
  hang) trap 'exit 2' INT TERM; touch "$FAKE_DIR/pytest-running"; while :; do sleep 0.05; done ;;
esac
"""


def fake_checkout(tmp: Path) -> Path:
    """A git repository with the real scripts/test and scripts/run-record and stand-ins for everything they call."""
    repo = tmp / "repo"
    (repo / "scripts").mkdir(parents=True)
    for name in ("test", "run-record"):
        (repo / "scripts" / name).write_text((ROOT / "scripts" / name).read_text())
        (repo / "scripts" / name).chmod(0o755)
    (repo / "scripts" / "setup").write_text('#!/bin/bash\n[ -z "$FAKE_SETUP_FAILS" ]\n')
    bin_ = repo / ".venv" / "bin"
    bin_.mkdir(parents=True)
    for tool in ("ruff", "mypy"):
        (bin_ / tool).write_text("#!/bin/bash\nexit 0\n")
    (bin_ / "pytest").write_text(FAKE_PYTEST)
    (bin_ / "python").symlink_to(sys.executable)  # what writes the record, as in a real checkout's .venv
    for f in [*bin_.iterdir(), repo / "scripts" / "setup"]:
        f.chmod(0o755)
    (repo / ".gitignore").write_text(".venv/\n.test-results/\n")
    git = ["git", "-C", str(repo), "-c", "user.name=t", "-c", "user.email=t@t"]
    subprocess.run([*git, "init", "-q"], check=True)
    subprocess.run([*git, "add", "-A"], check=True)
    subprocess.run([*git, "commit", "-q", "-m", "c"], check=True)
    return repo


def fake_dir(repo: Path) -> Path:
    """Where the fake pytest leaves its traces (outside the repository, which must stay clean)."""
    d = repo.parent / "fake"
    d.mkdir(exist_ok=True)
    return d


def run_test(repo: Path, **env: str) -> subprocess.CompletedProcess[str]:
    full = {k: v for k, v in os.environ.items() if k not in ("TANKBENCH_TEST_SUMMARY", "CI")}
    full.update(FAKE_DIR=str(fake_dir(repo)), **env)
    return subprocess.run(["bash", "scripts/test"], cwd=repo, env=full, capture_output=True, text=True, timeout=120)


def record(repo: Path) -> dict[str, object]:
    doc = json.loads((repo / ".test-results" / "last-run.json").read_text())
    assert isinstance(doc, dict)
    return doc


def head(repo: Path) -> str:
    return subprocess.run(["git", "-C", str(repo), "rev-parse", "HEAD"], capture_output=True, text=True).stdout.strip()


def test_a_green_run_records_its_commit_tiers_and_says_which_tier_is_over_budget(tmp_path: Path) -> None:
    repo = fake_checkout(tmp_path)
    cp = run_test(repo)
    assert cp.returncode == 0, cp.stderr
    doc = record(repo)
    assert doc["commit"] == head(repo) and doc["result"] == "passed" and doc["exit"] == 0
    assert [s["step"] for s in doc["steps"]] == ["setup", "ruff", "mypy", "pytest"]  # type: ignore[union-attr,index]
    assert doc["start"] <= doc["end"] and doc["failures"] == []  # type: ignore[operator]
    assert [t["tier"] for t in doc["tiers"]] == ["lab", "unit"]  # type: ignore[union-attr,index]
    lines = cp.stderr.strip().splitlines()
    last = lines[next(i for i, line in enumerate(lines) if line.startswith("== scripts/test:")) :]
    assert last[0].startswith("== scripts/test: PASSED in 0m0") and head(repo)[:12] in last[0], last
    assert "   tier lab: 1900 s wall of 1800 s, OVER its budget by 100 s (2 tests)" in last
    assert "     costliest: tests/lab/test_a.py::test_slow 1500 s, tests/lab/test_b.py::test_less 500 s" in last
    assert "   tier unit: 1 s wall of 120 s, within budget (1 tests)" in last


def test_failed_tests_are_a_failed_run(tmp_path: Path) -> None:
    repo = fake_checkout(tmp_path)
    cp = run_test(repo, FAKE_PYTEST_DOES="fail", FAKE_EXIT="1")
    doc = record(repo)
    assert cp.returncode == 1 and doc["result"] == "failed" and doc["commit"] == head(repo)


def test_a_failed_step_and_a_dirty_tree_are_recorded_as_such(tmp_path: Path) -> None:
    repo = fake_checkout(tmp_path)
    (repo / "new_test.py").write_text("")  # what runs is not the commit
    cp = run_test(repo, FAKE_SETUP_FAILS="1")
    doc = record(repo)
    assert cp.returncode == 1 and doc["result"] == "failed" and doc["failed_step"] == "setup"
    assert doc["commit"] == head(repo) + "+dirty" and doc["tiers"] == []
    assert "FAILED in" in cp.stderr and "step setup failed" in cp.stderr


def test_a_partial_run_writes_no_record(tmp_path: Path) -> None:
    repo = fake_checkout(tmp_path)
    cp = subprocess.run(
        ["bash", "scripts/test", "tests/unit", "-x"],
        cwd=repo,
        env={**os.environ, "FAKE_DIR": str(fake_dir(repo))},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert cp.returncode == 0, cp.stderr
    assert (fake_dir(repo) / "pytest-args").read_text().split()[-2:] == ["tests/unit", "-x"]
    assert not (repo / ".test-results" / "last-run.json").exists()


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
def test_an_interrupted_run_still_writes_its_record(tmp_path: Path, sig: signal.Signals) -> None:
    repo = fake_checkout(tmp_path)
    env = {k: v for k, v in os.environ.items() if k != "TANKBENCH_TEST_SUMMARY"}
    proc = subprocess.Popen(
        ["bash", "scripts/test"],
        cwd=repo,
        env={**env, "FAKE_DIR": str(fake_dir(repo)), "FAKE_PYTEST_DOES": "hang"},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    try:
        wait_until(lambda: (fake_dir(repo) / "pytest-running").exists(), 120, "the fake pytest never started")
        time.sleep(0.1)
        os.killpg(proc.pid, sig)  # the whole group, as a terminal's Ctrl-C or a CI runner's stop does
        _, err = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    doc = record(repo)
    assert proc.returncode != 0 and doc["result"] == "failed", err
    assert doc["interrupted"] in (f"SIG{sig.name[3:]}", "pytest interrupted"), doc
    assert "FAILED in" in err


def test_tier_figures_name_the_costliest_tests_of_a_tier_over_its_budget() -> None:
    times = {
        "tests/unit/test_a.py::t1": [100.0, 0.0, 100.0],
        "tests/unit/test_a.py::t2": [30.0, 90.0, 130.0],
        "tests/lab/test_b.py::t3": [10.0, 0.0, 10.0],
    }
    unit = next(t for t in tier_figures(times) if t["tier"] == "unit")
    assert unit["span_s"] == 130.0 and unit["budget_s"] == 120.0 and unit["over_budget"] is True
    assert [c["test"] for c in unit["costliest"]] == ["tests/unit/test_a.py::t1", "tests/unit/test_a.py::t2"]
    lab = next(t for t in tier_figures(times) if t["tier"] == "lab")
    assert lab["over_budget"] is False and lab["tests"] == 1


def test_a_real_pytest_killed_mid_test_leaves_a_summary_of_what_ran_and_what_was_in_flight(tmp_path: Path) -> None:
    """The real hooks of tests/conftest.py in a real pytest, killed with SIGKILL (no hook runs after that) while
    its second test hangs: the summary already names the first test's time and the second as in flight, and
    run-record turns it into a record whose last lines say so."""
    suite = tmp_path / "suite"
    suite.mkdir()
    started = tmp_path / "started"
    (suite / "test_two.py").write_text(
        "import pathlib, time\n"
        "def test_quick():\n    assert 1 + 1 == 2\n"
        f"def test_hangs():\n    pathlib.Path({str(started)!r}).touch()\n    time.sleep(600)\n"
    )
    summary = tmp_path / "pytest.json"
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTEST_", "TANKBENCH_TEST"))}
    env.update(TANKBENCH_TEST_SUMMARY=str(summary), PYTHONPATH=str(ROOT))
    proc = subprocess.Popen(
        [sys.executable, "-m", "pytest", "-p", "tests.conftest", "-p", "no:cacheprovider", "-q", str(suite)],
        cwd=tmp_path,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:
        wait_until(lambda: started.exists(), 120, lambda: "test_hangs never started")
        proc.kill()
    finally:
        out, _ = proc.communicate(timeout=60)
    doc = json.loads(summary.read_text())
    assert doc["exitstatus"] is None, out
    assert doc["tests"] == 1 and doc["failed"] == 0
    assert [t["test"].rsplit("/", 1)[-1] for t in doc["in_flight"]] == ["test_two.py::test_hangs"]
    assert doc["files"][0]["file"].endswith("test_two.py") and doc["files"][0]["tests"] == 1
    # start is rounded to 0.1 s: it may be up to 0.05 s after now
    assert -0.1 < time.time() - doc["files"][0]["start"] < 600 and doc["files"][0]["workers"] == [], doc["files"]
    steps = tmp_path / "steps"
    steps.write_text("pytest\t1.0\t2.0\t137\n")
    cp = subprocess.run(
        [sys.executable, str(ROOT / "scripts" / "run-record"), "--out", str(tmp_path / "last-run.json"),
         "--root", str(tmp_path), "--started", str(time.time() - 5), "--rc", "137", "--steps", str(steps),
         "--pytest", str(summary)],
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert cp.returncode == 0, cp.stderr
    rec = json.loads((tmp_path / "last-run.json").read_text())
    assert rec["result"] == "failed" and rec["in_flight"][0]["test"].endswith("test_hangs")
    assert "IN FLIGHT when the run ended: " in cp.stderr and "test_hangs" in cp.stderr


def test_under_xdist_each_file_names_the_worker_that_ran_it(tmp_path: Path) -> None:
    """The timeline a CI record needs (which worker ran which file, from when): each file's start and workers."""
    suite = tmp_path / "suite"
    suite.mkdir()
    (suite / "test_a.py").write_text("def test_a():\n    assert True\n")
    (suite / "test_b.py").write_text("def test_b():\n    assert True\n")
    summary = tmp_path / "pytest.json"
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTEST_", "TANKBENCH_TEST"))}
    env.update(TANKBENCH_TEST_SUMMARY=str(summary), PYTHONPATH=str(ROOT))
    t0 = time.time()
    cp = subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "tests.conftest", "-p", "no:cacheprovider", "-q", "-n", "1", str(suite)],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert cp.returncode == 0, cp.stdout + cp.stderr
    files = {f["file"].rsplit("/", 1)[-1]: f for f in json.loads(summary.read_text())["files"]}
    assert set(files) == {"test_a.py", "test_b.py"}, files
    assert all(f["workers"] == ["gw0"] and t0 - 0.1 <= f["start"] <= time.time() + 0.1 for f in files.values()), files


def test_a_passing_run_prunes_only_the_down_labs_it_booted(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """After a run that passed, the labs it booted and left down lose their runtime directories (keys, consoles);
    a lab still up, the user's `default` and labs this run did not boot keep theirs."""
    from tests.conftest import _prune_test_labs

    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    from tankbench.lab.state import labs_dir

    for name in ("pytest-1", "pytest-2", "default", "other"):
        (labs_dir() / name).mkdir(parents=True)
        (labs_dir() / name / "console.log").write_text("boot\n")
    (labs_dir() / "pytest-2" / "state.json").write_text("{}")  # up (even if its state cannot be read)
    assert _prune_test_labs(["pytest-1", "pytest-2", "default", "pytest-1", "gone"]) == ["pytest-1"]
    assert sorted(p.name for p in labs_dir().iterdir()) == ["default", "other", "pytest-2"]
