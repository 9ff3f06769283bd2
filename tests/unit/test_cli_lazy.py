"""A command imports only its own module (tankbench.cli.main builds the parser of the one command it is given): the
CLI's startup was every subcommand's imports, reports and spreadsheets included, for every call."""

from __future__ import annotations

import subprocess
import sys

PROBE = """
import sys
from tankbench.cli import main
rc = main(sys.argv[1:])
print(sorted(m for m in sys.modules if m.startswith("tankbench.cli.") and m != "tankbench.cli._common"))
print("openpyxl" in sys.modules, "tankbench.runner" in sys.modules)
"""


def probe(*argv: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-c", PROBE, *argv], capture_output=True, text=True, timeout=120)


def test_a_command_imports_its_own_module_only() -> None:
    cp = probe("presets", "--json")
    assert cp.returncode == 0, cp.stderr
    *_, modules, heavy = cp.stdout.strip().splitlines()
    assert modules == "['tankbench.cli.presets']" and heavy == "False False", cp.stdout[-300:]


def test_no_command_or_an_unknown_one_still_gets_the_full_parser() -> None:
    cp = subprocess.run([sys.executable, "-m", "tankbench", "nosuch"], capture_output=True, text=True, timeout=120)
    assert cp.returncode == 2 and "invalid choice: 'nosuch'" in cp.stderr
    assert all(c in cp.stderr for c in ("'plan'", "'run'", "'report'", "'lab'")), cp.stderr


def test_completion_still_sees_every_command() -> None:
    cp = subprocess.run(
        [sys.executable, "-m", "tankbench", "completion", "bash"], capture_output=True, text=True, timeout=120
    )
    assert cp.returncode == 0, cp.stderr
    assert all(c in cp.stdout for c in ("plan", "run", "report", "lab", "doctor")), cp.stdout[:500]
