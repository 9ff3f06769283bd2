"""The layer order of docs/architecture.md, enforced: a module imports only its own layer and the layers below.

Every import counts, function-level and TYPE_CHECKING ones included, and a package that loads its submodules at
call time (importlib / pkgutil, like the target registry) counts as importing each of them.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

import tankbench

PACKAGE = Path(tankbench.__file__).parent

#: top first; each entry a module or package (its submodules belong to it unless named themselves)
LAYERS: tuple[tuple[str, ...], ...] = (
    ("cli", "__main__", "buildfiles"),
    ("runner", "recovery", "resumeboot", "doctor", "fleet", "hooks"),
    ("reports",),
    ("analysis",),
    ("campaign", "schedule", "progress", "verdict", "fio.jobs"),
    ("targets",),
    ("guest", "lab", "preflight", "secrets", "tunables", "coldcache", "fio.clientserver"),
    ("hosts",),
    ("fio", "fio.parse", "fio.layout", "fio.importer", "zfs", "journal", "metrics", "copytest", "safety"),
    # "": the package itself (its version)
    ("model", "units", "errors", "keys", "agent", "analysis.stats", "bootlog", "bulk", "colour", "gitversion", ""),
)

#: exporters read the Analysis, never the journal or fio's output themselves
REPORTS_MUST_NOT_IMPORT = ("journal", "fio")


def module_files(root: Path = PACKAGE) -> dict[str, Path]:
    """Every module of the package by dotted name relative to it ("" for tankbench/__init__.py)."""
    out: dict[str, Path] = {}
    for path in sorted(root.rglob("*.py")):
        parts = list(path.relative_to(root).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        out[".".join(parts)] = path
    return out


def _resolve(name: str, mods: dict[str, Path]) -> str | None:
    while name not in mods:
        if "." not in name:
            return None
        name = name.rsplit(".", 1)[0]
    return name


def imports_of(name: str, path: Path, mods: dict[str, Path]) -> set[str]:
    """The package's modules `name` imports (relative names), anywhere in its source."""
    src = path.read_text(encoding="utf-8")
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found: set[str] = set()
    for node in ast.walk(ast.parse(src)):
        targets: list[str] = []
        if isinstance(node, ast.Import):
            targets = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = ["tankbench", *package.split(".")] if package else ["tankbench"]
                base = base[: len(base) - node.level + 1]
                module = ".".join(base + ([node.module] if node.module else []))
            else:
                module = node.module or ""
            targets = [f"{module}.{a.name}" for a in node.names] or [module]
        for t in targets:
            if t == "tankbench" or t.startswith("tankbench."):
                hit = _resolve(t.removeprefix("tankbench").removeprefix("."), mods)
                if hit is not None and hit != name:
                    found.add(hit)
    if path.name == "__init__.py" and ("import_module" in src or "pkgutil" in src):
        depth = name.count(".") + 1 if name else 0
        found |= {m for m in mods if m.startswith(f"{name}.") and m.count(".") == depth}
    return found


def layer_of(module: str) -> int:
    """The index of the module's layer (0 = top): its longest named prefix decides."""
    best, best_len = -1, -1
    for i, names in enumerate(LAYERS):
        for n in names:
            if module == n or (n and module.startswith(n + ".")):
                if len(n) > best_len:
                    best, best_len = i, len(n)
    return best


def import_graph() -> dict[str, set[str]]:
    mods = module_files()
    return {m: imports_of(m, p, mods) for m, p in mods.items()}


def upward_imports(graph: dict[str, set[str]]) -> list[str]:
    """`a -> b` for each import of a higher layer, with the two layers named."""
    out = []
    for m, deps in sorted(graph.items()):
        for d in sorted(deps):
            if layer_of(d) < layer_of(m):
                out.append(f"{m or 'tankbench'} (layer {layer_of(m)}) imports {d} (layer {layer_of(d)})")
    return out


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (iterative Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    out: list[list[str]] = []
    for root in sorted(graph):
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on.add(root)
        while work:
            v, it = work[-1]
            w = next(it, None)
            if w is not None:
                if w not in index:
                    index[w] = low[w] = len(index)
                    stack.append(w)
                    on.add(w)
                    work.append((w, iter(sorted(graph[w]))))
                elif w in on:
                    low[v] = min(low[v], index[w])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[v])
            if low[v] == index[v]:
                comp = []
                while True:
                    w = stack.pop()
                    on.discard(w)
                    comp.append(w)
                    if w == v:
                        break
                if len(comp) > 1:
                    out.append(sorted(comp))
    return out


def test_every_module_has_a_layer() -> None:
    unplaced = [m for m in module_files() if layer_of(m) < 0]
    assert not unplaced, f"place these modules in LAYERS and docs/architecture.md: {unplaced}"


def test_docs_name_every_layer_entry() -> None:
    """docs/architecture.md is the written form of LAYERS: each entry stands in its table."""
    doc = (PACKAGE.parents[1] / "docs" / "architecture.md").read_text(encoding="utf-8")
    table = [line for line in doc.splitlines() if line.startswith("| ")]
    for i, names in enumerate(LAYERS):
        row = next((line for line in table if line.startswith(f"| {i} |")), "")
        missing = [n for n in names if n and f"`{n.replace('.', '/')}" not in row]
        assert not missing, f"layer {i} of docs/architecture.md lacks {missing}"


def test_no_module_imports_a_higher_layer() -> None:
    upward = upward_imports(import_graph())
    assert not upward, "imports against the layer order (docs/architecture.md):\n" + "\n".join(upward)


def test_no_import_cycles() -> None:
    found = cycles(import_graph())
    assert not found, f"import cycles: {found}"


def test_exporters_read_only_the_analysis() -> None:
    bad = [
        f"{m} imports {d}"
        for m, deps in sorted(import_graph().items())
        if m.startswith("reports.")
        for d in sorted(deps)
        if any(d == x or d.startswith(x + ".") for x in REPORTS_MUST_NOT_IMPORT)
    ]
    assert not bad, "exporters get what they show through the Analysis:\n" + "\n".join(bad)


def test_the_checker_sees_function_level_typing_and_dynamic_imports(tmp_path: Path) -> None:
    """The checker itself: an upward import inside a function, under TYPE_CHECKING and through a registry that
    loads its submodules are all edges."""
    pkg = tmp_path / "tankbench"
    (pkg / "targets").mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "units.py").write_text("def f() -> None:\n    from tankbench.runner import x\n")
    (pkg / "runner.py").write_text("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from .cli import y\n")
    (pkg / "cli.py").write_text("")
    (pkg / "targets" / "__init__.py").write_text("import importlib\nload = importlib.import_module\n")
    (pkg / "targets" / "file.py").write_text("")
    mods = module_files(pkg)
    assert imports_of("units", mods["units"], mods) == {"runner"}
    assert imports_of("runner", mods["runner"], mods) == {"cli"}
    assert imports_of("targets", mods["targets"], mods) == {"targets.file"}
    graph = {m: imports_of(m, p, mods) for m, p in mods.items()}
    assert upward_imports(graph) == [
        "runner (layer 1) imports cli (layer 0)",
        "units (layer 9) imports runner (layer 1)",
    ]
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]


@pytest.mark.parametrize("module", ["hosts.lab", "reports.html", "runner"])
def test_the_edges_issue_16_named_stay_fixed(module: str) -> None:
    """hosts <-> lab, runner -> targets.zfs (host-wide features in a target module), reports.html -> journal
    (fio.jobs <-> targets is test_no_import_cycles')."""
    graph = import_graph()
    forbidden = {
        "hosts.lab": ("lab",),
        "reports.html": ("journal", "fio"),
        "runner": ("targets.zfs",),
    }[module]
    assert not [d for d in graph[module] if any(d == f or d.startswith(f + ".") for f in forbidden)]
