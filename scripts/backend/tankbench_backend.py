"""Build backend: setuptools, plus what a build must record before setuptools packs it (all of it package data):

- VERSION and BUILD_COMMIT: the version from git (src/tankbench/gitversion.py: pip and pipx upgrade from one
  commit's wheel to the next) and the commit, so `tankbench --version` names it without a checkout around;
  from .git_archival.txt in a source archive; kept as they are in an sdist, which has neither;
- share/: the man page and the bash/zsh completions, generated from the argparse parser (tankbench.buildfiles),
  installed into the environment's share/ by the wheel's data files (pipx links the man page).
"""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
from pathlib import Path

from setuptools import build_meta as _setuptools
from setuptools.build_meta import *  # noqa: F403 - the PEP 517 hooks this module does not change

ROOT = Path(__file__).resolve().parents[2]
PKG = ROOT / "src" / "tankbench"


def _gitversion():  # type: ignore[no-untyped-def]
    spec = importlib.util.spec_from_file_location("_tankbench_gitversion", PKG / "gitversion.py")
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod  # dataclasses look the module up by name
    spec.loader.exec_module(mod)
    return mod


def _stamp() -> None:
    """Write VERSION and BUILD_COMMIT from the checkout or the archive; an sdist's (no .git) are kept."""
    gv = _gitversion()
    stamp = gv.from_checkout(ROOT)
    archival = ROOT / ".git_archival.txt"
    if stamp is None and archival.exists():
        stamp = gv.from_archival(archival.read_text(encoding="utf-8"))
    if stamp is not None:
        (PKG / "VERSION").write_text(stamp.version + "\n", encoding="ascii")
        (PKG / "BUILD_COMMIT").write_text(stamp.commit + "\n", encoding="ascii")
    elif not (PKG / "VERSION").exists():
        (PKG / "VERSION").write_text(gv.UNKNOWN + "\n", encoding="ascii")
    _share()


def _share() -> None:
    """The man page and completions from the parser (a subprocess: tankbench's own imports stay out of this one)."""
    env = dict(os.environ, PYTHONPATH=str(ROOT / "src"))
    subprocess.run(
        [sys.executable, "-m", "tankbench.buildfiles", str(PKG / "share")], env=env, check=True, cwd=str(ROOT)
    )


def get_requires_for_build_wheel(config_settings=None):  # type: ignore[no-untyped-def]
    _stamp()
    return _setuptools.get_requires_for_build_wheel(config_settings)


def get_requires_for_build_sdist(config_settings=None):  # type: ignore[no-untyped-def]
    _stamp()
    return _setuptools.get_requires_for_build_sdist(config_settings)


def get_requires_for_build_editable(config_settings=None):  # type: ignore[no-untyped-def]
    _stamp()
    return _setuptools.get_requires_for_build_editable(config_settings)


def prepare_metadata_for_build_wheel(metadata_directory, config_settings=None):  # type: ignore[no-untyped-def]
    _stamp()
    return _setuptools.prepare_metadata_for_build_wheel(metadata_directory, config_settings)


def prepare_metadata_for_build_editable(metadata_directory, config_settings=None):  # type: ignore[no-untyped-def]
    _stamp()
    return _setuptools.prepare_metadata_for_build_editable(metadata_directory, config_settings)


def build_wheel(wheel_directory, config_settings=None, metadata_directory=None):  # type: ignore[no-untyped-def]
    _stamp()
    # setuptools copies the package into build/lib and never removes what is gone from src/: a module moved or
    # deleted since an earlier build of this checkout would ship in the wheel (and break its imports)
    import shutil

    shutil.rmtree(ROOT / "build" / "lib", ignore_errors=True)
    return _setuptools.build_wheel(wheel_directory, config_settings, metadata_directory)


def build_editable(wheel_directory, config_settings=None, metadata_directory=None):  # type: ignore[no-untyped-def]
    _stamp()
    return _setuptools.build_editable(wheel_directory, config_settings, metadata_directory)


def build_sdist(sdist_directory, config_settings=None):  # type: ignore[no-untyped-def]
    _stamp()
    return _setuptools.build_sdist(sdist_directory, config_settings)
