"""An install that behaves like a Python tool: the version comes from git, so `pipx install` of a wheel built from
commit N and then of one from commit N+1 upgrades, and `--version` names N+1; the wheel carries the LICENSE, the man
page and the shell completions generated from the parser. (A source archive's version: tests/unit/test_version.py.)"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def sh(*cmd: str, cwd: Path | None = None, env: dict[str, str] | None = None) -> str:
    res = subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True, timeout=600)
    assert res.returncode == 0, f"{cmd}\n{res.stdout[-2000:]}\n{res.stderr[-2000:]}"
    return res.stdout


def wheel_of(src: Path, out: Path) -> Path:
    sh(sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "-w", str(out), str(src))
    (wheel,) = out.glob("tankbench-*.whl")
    return wheel


def test_pipx_upgrades_from_one_commits_wheel_to_the_next(tmp_path: Path) -> None:
    src = tmp_path / "src"
    sh("git", "clone", "-q", str(ROOT), str(src))
    head_n = sh("git", "-C", str(src), "rev-parse", "HEAD").strip()
    wheel_n = wheel_of(src, tmp_path / "n")
    git = ["git", "-C", str(src), "-c", "user.name=t", "-c", "user.email=t@example.org"]
    sh(*git, "commit", "-q", "--allow-empty", "-m", "commit N+1")
    head_n1 = sh("git", "-C", str(src), "rev-parse", "HEAD").strip()
    wheel_n1 = wheel_of(src, tmp_path / "n1")
    version = re.compile(r"tankbench-([^-]+)-py3")
    v_n, v_n1 = (version.search(w.name).group(1) for w in (wheel_n, wheel_n1))  # type: ignore[union-attr]
    assert v_n != v_n1 and v_n1.endswith(f"+g{head_n1[:12]}"), (v_n, v_n1)

    names = zipfile.ZipFile(wheel_n1).namelist()
    data = f"tankbench-{v_n1}.data/data/share"
    for f in ("man/man1/tankbench.1", "bash-completion/completions/tankbench", "zsh/site-functions/_tankbench"):
        assert f"{data}/{f}" in names, names
    assert any(n.endswith(".dist-info/licenses/LICENSE") for n in names)
    meta = zipfile.ZipFile(wheel_n1).read(f"tankbench-{v_n1}.dist-info/METADATA").decode()
    assert "License-Expression: MIT" in meta and "Classifier: Topic :: System :: Benchmark" in meta
    assert "lxml" not in meta

    env = dict(os.environ, PIPX_HOME=str(tmp_path / "pipx"), PIPX_BIN_DIR=str(tmp_path / "bin"))
    sh("pipx", "install", str(wheel_n), env=env)
    tb = str(tmp_path / "bin" / "tankbench")
    assert sh(tb, "--version", cwd=tmp_path, env=env).strip() == f"tankbench {v_n} (commit {head_n[:12]})"
    # what the issue saw refused ("already installed with the same version"): pip inside pipx's venv upgrades
    out = sh("pipx", "runpip", "tankbench", "install", str(wheel_n1), env=env)
    assert f"Successfully installed tankbench-{v_n1}" in out, out
    assert sh(tb, "--version", cwd=tmp_path, env=env).strip() == f"tankbench {v_n1} (commit {head_n1[:12]})"
