"""What the build backend generates from the parser (scripts/backend): the man page, the bash/zsh completions and
the campaign file's JSON Schema, as package data (`python -m tankbench.buildfiles SHARE_DIR`). A module of its own,
outside cli/ (which imports each of its modules), because it imports the whole parser."""

from __future__ import annotations

import importlib.abc
import importlib.machinery
import importlib.util
import re
import sys
import tomllib
import types
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

from tankbench.cli.completion import bash, man_page, zsh


class _AnyMeta(type):
    def __getattr__(cls, name: str) -> Any:
        return _Any


class _Any(metaclass=_AnyMeta):
    """Whatever a module does with a stood-in name at import time (call it, subclass it, read its attributes,
    combine flags with |) works and means nothing: only the parser's definitions are read afterwards."""

    def __init__(self, *args: object, **kwargs: object) -> None:
        pass

    def __call__(self, *args: object, **kwargs: object) -> _Any:
        return self

    def __getattr__(self, name: str) -> _Any:
        return self

    def __or__(self, other: object) -> _Any:
        return self

    __ror__ = __and__ = __rand__ = __add__ = __radd__ = __or__

    def __iter__(self) -> Iterator[Any]:
        return iter(())


class _Standin(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Stands in for the run-time dependencies that are absent (the build backend's isolated environment has only
    setuptools): the parser needs argparse alone, but its modules import orjson & co. at the top."""

    def __init__(self, names: set[str]) -> None:
        self.names = names

    def find_spec(self, name: str, path: Sequence[str] | None, target: types.ModuleType | None = None):  # type: ignore[no-untyped-def]
        if name.split(".")[0] in self.names:
            return importlib.machinery.ModuleSpec(name, self, is_package=True)
        return None

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> types.ModuleType:
        mod = types.ModuleType(spec.name)
        mod.__path__ = []
        mod.__getattr__ = lambda attr: type(attr, (_Any,), {})  # type: ignore[method-assign]
        return mod

    def exec_module(self, module: types.ModuleType) -> None:
        return None


def _absent_dependencies(pyproject: Path) -> set[str]:
    deps = tomllib.loads(pyproject.read_text())["project"]["dependencies"]
    names = {re.split(r"[<>=!~\[ ;]", d, maxsplit=1)[0].lower().replace("-", "_") for d in deps}
    return {n for n in names if importlib.util.find_spec(n) is None}


def write_share(out: Path, pyproject: Path) -> list[Path]:
    """Write share/man/man1/tankbench.1 and the completions under `out` (the package's share/), and the campaign
    schema beside it (schemas/campaign.schema.json); the paths written."""
    absent = _absent_dependencies(pyproject) if pyproject.exists() else set()
    if absent:
        sys.meta_path.append(_Standin(absent))
    from tankbench import __version__
    from tankbench.cli import build_parser

    parser = build_parser()
    files = {
        out / "man" / "man1" / "tankbench.1": man_page(parser, __version__),
        out / "bash-completion" / "completions" / "tankbench": bash(parser),
        out / "zsh" / "site-functions" / "_tankbench": zsh(parser),
    }
    from tankbench.cli.schema import text as schema_text

    files[out.parent / "schemas" / "campaign.schema.json"] = schema_text("campaign")
    for path, text in files.items():
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    return list(files)


if __name__ == "__main__":
    write_share(Path(sys.argv[1]), Path.cwd() / "pyproject.toml")
