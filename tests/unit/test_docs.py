"""The docs' code stays true: every Python block in docs/*.md and README.md parses and everything it imports
exists (the examples need a lab or a test guest to run; their imports are what goes stale first), and every
TOML block parses."""

from __future__ import annotations

import ast
import importlib
import re
import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
DOCS = sorted((ROOT / "docs").glob("*.md")) + [ROOT / "README.md"]
FENCE = re.compile(r"^```(\w*)\n(.*?)^```", re.M | re.S)


def blocks(lang: str) -> list[tuple[str, str]]:
    """(file:line, code) of every fenced block in the given language."""
    out = []
    for path in DOCS:
        text = path.read_text(encoding="utf-8")
        for m in FENCE.finditer(text):
            if m.group(1) == lang:
                out.append((f"{path.relative_to(ROOT)}:{text.count(chr(10), 0, m.start()) + 1}", m.group(2)))
    return out


PYTHON = blocks("python")
TOML = blocks("toml")


def missing_imports(code: str) -> list[str]:
    """What the block imports that does not exist: modules, and names in `from M import …`."""
    missing = []
    for node in ast.walk(ast.parse(code)):
        if isinstance(node, ast.Import):
            for alias in node.names:
                try:
                    importlib.import_module(alias.name)
                except ImportError:
                    missing.append(alias.name)
        elif isinstance(node, ast.ImportFrom) and node.module:
            try:
                module = importlib.import_module(node.module)
            except ImportError:
                missing.append(node.module)
                continue
            missing += [f"{node.module}.{a.name}" for a in node.names if not hasattr(module, a.name)]
    return missing


def test_the_docs_have_python_and_toml_examples() -> None:
    assert len(PYTHON) >= 2 and len(TOML) >= 10


@pytest.mark.parametrize("where,code", PYTHON, ids=[w for w, _ in PYTHON])
def test_python_example_parses_and_its_imports_exist(where: str, code: str) -> None:
    assert not missing_imports(code), f"{where}: the example imports what no longer exists"


@pytest.mark.parametrize("where,code", TOML, ids=[w for w, _ in TOML])
def test_toml_example_parses(where: str, code: str) -> None:
    tomllib.loads(code)


def test_the_checker_catches_a_stale_import() -> None:
    assert missing_imports(
        "from tankbench.lab.vm import lab_data_disks, no_such_function\nimport tankbench.nope\n"
    ) == [
        "tankbench.lab.vm.no_such_function",
        "tankbench.nope",
    ]
