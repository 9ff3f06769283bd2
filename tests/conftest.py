"""Shared test helpers: run the CLI as a subprocess, the way a user would."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
FIXTURES = ROOT / "tests" / "fixtures"


def tankbench(*args: str, cwd: str | os.PathLike[str] | None = None, timeout: float = 600,
              env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """Run `python -m tankbench ARGS` and capture its output."""
    full_env = dict(os.environ)
    full_env.update(env or {})
    return subprocess.run([sys.executable, "-m", "tankbench", *args], cwd=cwd, capture_output=True, text=True,
                          timeout=timeout, env=full_env)


@pytest.fixture
def cli():
    return tankbench
