"""Sizes that keep the code readable (issue 30, TEAM.md): no module over 500 lines, no class over 300, no function
over 60, measured with ast over src/tankbench.

Exempt for good: agent.py's and metrics.py's module length (the agent ships to hosts as one source on stdin; the
metric registry is one table) and the declarative tables in TABLES (their length is data, not logic). Everything
else over a limit stands in OVER_LIMIT with its owner (TEAM.md) until it is split: the list only shrinks (a new
offender fails, and so does an entry that no longer is one, so that it is removed)."""

from __future__ import annotations

import ast
from functools import cache
from pathlib import Path

import tankbench

PACKAGE = Path(tankbench.__file__).parent
MAX_MODULE, MAX_CLASS, MAX_FUNCTION = 500, 300, 60

#: modules that may be longer than MAX_MODULE, and why
LONG_MODULES = {
    "agent.py": "ships to every host as one source on stdin and imports nothing of tankbench",
    "metrics.py": "the metric registry: every derived number's definition, one table",
}

#: functions and classes that are declarative tables (data, not logic), and what they declare
TABLES: dict[str, str] = {}

#: today's offenders, each with its owner (TEAM.md): split it, then remove its line (none left: issue 30's last
#: eight, the agent's fio run, probe and cooldown, the lab's image and tools steps, qemu's argv, the lab's boot and
#: the matrix heatmaps, were split on 2026-11-27)
OVER_LIMIT: dict[str, str] = {}


def _span(node: ast.AST) -> int:
    return int(getattr(node, "end_lineno", 0)) - int(getattr(node, "lineno", 0)) + 1


def _visit(node: ast.AST, rel: str, prefix: str, out: dict[str, str]) -> None:
    """Classes and functions under `node` (methods and nested functions by their qualified names)."""
    for child in ast.iter_child_nodes(node):
        if isinstance(child, (ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            name = f"{prefix}{child.name}"
            limit = MAX_CLASS if isinstance(child, ast.ClassDef) else MAX_FUNCTION
            if _span(child) > limit and f"{rel}:{name}" not in TABLES:
                out[f"{rel}:{name}"] = f"{_span(child)} lines (limit {limit})"
            _visit(child, rel, f"{name}.", out)
        else:
            _visit(child, rel, prefix, out)


@cache
def offenders(root: Path = PACKAGE) -> dict[str, str]:
    """Each module, class and function over its limit: "path[:qualified.name]" -> "N lines (limit M)"."""
    out: dict[str, str] = {}
    for path in sorted(root.rglob("*.py")):
        rel = path.relative_to(root).as_posix()
        src = path.read_text(encoding="utf-8")
        lines = len(src.splitlines())
        if lines > MAX_MODULE and rel not in LONG_MODULES:
            out[rel] = f"{lines} lines (limit {MAX_MODULE})"
        _visit(ast.parse(src), rel, "", out)
    return out


def test_nothing_new_is_over_its_size_limit() -> None:
    new = {k: v for k, v in offenders().items() if k not in OVER_LIMIT}
    assert not new, (
        "over the size limits of issue 30 (split it: one job per module, functions that fit on a screen; a "
        f"declarative table goes into TABLES with what it declares): {new}"
    )


def test_the_list_of_offenders_only_shrinks() -> None:
    found = offenders()
    gone = sorted(k for k in OVER_LIMIT if k not in found)
    assert not gone, f"no longer over the limit: remove them from OVER_LIMIT in {Path(__file__).name}: {gone}"


def test_the_measure_sees_modules_classes_methods_and_nested_functions(tmp_path: Path) -> None:
    body = "\n".join(f"    x{i} = {i}" for i in range(61))
    (tmp_path / "big.py").write_text("\n" * 501)
    (tmp_path / "code.py").write_text(
        f"def long():\n{body}\n\n"
        f"class C:\n    def m(self):\n        def inner():\n" + "\n".join("    " * 3 + f"y{i} = {i}" for i in range(61))
    )
    (tmp_path / "agent.py").write_text("\n" * 600)
    assert sorted(offenders(tmp_path)) == ["big.py", "code.py:C.m", "code.py:C.m.inner", "code.py:long"]
