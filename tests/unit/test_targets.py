"""Target kinds as objects: the registry, and each kind's plan-time answers (file fio opens, names, scripts)."""

from __future__ import annotations

import ast
from pathlib import Path
from typing import Any

import pytest

from tankbench import model, targets
from tankbench.campaign import expand, load_spec
from tankbench.targets.base import TargetKind
from tankbench.zfs.props import ZfsOptions
from tests.conftest import FIXTURES, ROOT


def _t(kind: str, pool: str = "", **kw: Any) -> model.Target:
    options = ZfsOptions(pool=pool) if pool else targets.kinds()[kind].options()
    return model.Target(name=kw.pop("name", "x"), kind=kind, options=options, **kw)


def _test(target: model.Target, **params: Any) -> model.Test:
    p = {"rw": "write", "bs": "4k", **params}
    return model.Test(number=1, name="t", target=target, params=p, fio_options={}, runtime=1, ramp=0)


def test_registry_finds_one_class_per_module() -> None:
    kinds = targets.kinds()
    assert set(kinds) >= {"raw", "file", "dataset", "zvol"}
    assert targets.kind_names()[:4] == ("raw", "file", "dataset", "zvol")
    for name, cls in kinds.items():
        assert issubclass(cls, TargetKind) and cls.kind == name


def _kind_literal_offences(rel: str, src: str, names: set[str]) -> list[str]:
    """Comparisons with a kind name (`kind == "zvol"`, `kind in ("dataset", "zvol")`) and constants that list
    only kind names (`ZFS_KINDS = ("dataset", "zvol")`); qemu's backings (zvol, raw) are not kinds."""

    def literals(node: ast.AST) -> bool:
        return any(isinstance(c, ast.Constant) and c.value in names for c in ast.walk(node))

    out = []
    for node in ast.walk(ast.parse(src)):
        if isinstance(node, ast.Compare) and literals(node):
            if "backing" not in (ast.get_source_segment(src, node) or ""):
                out.append(f"{rel}:{node.lineno}")
        elif isinstance(node, ast.Assign) and isinstance(node.value, (ast.Tuple, ast.List, ast.Set)):
            elts = node.value.elts
            if elts and all(isinstance(e, ast.Constant) and e.value in names for e in elts):
                out.append(f"{rel}:{node.lineno}")
    return sorted(out, key=lambda place: int(place.rsplit(":", 1)[1]))


def test_no_module_outside_targets_compares_target_kind_strings() -> None:
    """A new kind is a new module: every module outside targets/ asks the kind object or its traits
    (`targets.traits_of`) instead of comparing its name."""
    pkg = ROOT / "src" / "tankbench"
    names = set(targets.kinds())
    offenders = []
    checked = 0
    for path in sorted(pkg.rglob("*.py")):
        rel = path.relative_to(pkg).as_posix()
        if rel.startswith("targets/"):
            continue
        checked += 1
        offenders += _kind_literal_offences(rel, path.read_text(), names)
    assert checked > 50, "the guard walked too few modules"
    assert not offenders, offenders


def test_the_guard_finds_kind_comparisons() -> None:
    names = {"zvol", "dataset"}
    src = 'a = t.kind == "zvol"\nZFS = ("dataset", "zvol")\nb = x.backing == "zvol"\nc = k in ("zvol", "qcow2")\n'
    assert _kind_literal_offences("m.py", src, names) == ["m.py:1", "m.py:2", "m.py:4"]


@pytest.mark.parametrize(
    "kind,expected",
    [
        ("raw", "/dev/loop9"),
        ("file", "/srv/b/tankbench-x.fiodata"),
    ],
)
def test_fio_filename(kind: str, expected: str) -> None:
    path = "/dev/loop9" if kind == "raw" else "/srv/b"
    t = _test(_t(kind, path=path, size=1 << 20))
    assert targets.kind_of(t.target).fio_filename(t) == expected


def test_zfs_kinds_open_the_dataset_file_or_the_zvol_device() -> None:
    ds = _test(_t("dataset", size=1 << 20, pool="tank/tb-1"), recordsize="4k")
    vol = _test(_t("zvol", size=1 << 20, pool="tank/tb-1"))
    assert targets.kind_of(ds.target).fio_filename(ds).startswith("/tankbench/tb-1/x-")
    assert targets.kind_of(vol.target).fio_filename(vol).startswith("/dev/zvol/tank/tb-1/x-")


def test_block_device_kinds_refuse_rsync_copies() -> None:
    assert not targets.kinds()["raw"].accepts({"workload": "rsync"})
    assert not targets.kinds()["zvol"].accepts({"workload": "rsync"})
    assert targets.kinds()["file"].accepts({"workload": "rsync"})
    assert targets.kinds()["raw"].accepts({"workload": "dd"})


def test_script_lines_lay_out_files_fill_zvols_and_warn_about_devices() -> None:
    raw = _test(_t("raw", path="/dev/loop9", size=1 << 20))
    f = _test(_t("file", path="/srv/b", size=1 << 20))
    vol = _test(_t("zvol", size=1 << 20, pool="tank/tb-1"))
    assert targets.kind_of(raw.target).script_lines(raw, "c") == [
        "# WARNING: writes to the block device /dev/loop9 if the job writes."
    ]
    assert any("head -c 1048576 /dev/urandom" in line for line in targets.kind_of(f.target).script_lines(f, "c"))
    lines = targets.kind_of(vol.target).script_lines(vol, "c")
    assert any(line.startswith("zfs list") and "zfs create" in line for line in lines)
    assert any("dd of=/dev/zvol/tank/tb-1/" in line for line in lines) and "WARNING" in lines[-1]
    copy = _test(_t("file", path="/srv/b", size=1 << 20), workload="cp", copy_size="64M")
    assert targets.kind_of(copy.target).script_lines(copy, "c") == ['mkdir -p "$(dirname /srv/b/tankbench-x.fiodata)"']


def test_names_follow_seed_000_for_every_kind() -> None:
    spec = load_spec(str(FIXTURES / "journal-lab-zfs.toml"))
    names = {t.name for t in expand(spec)}
    assert any(n.startswith("baseline-") and n.endswith("-raw-disk") or "-raw-disk-" in n for n in names)
    assert any(n.startswith("zfs-fs-") for n in names) and any(n.startswith("zfs-slog-zvol-") for n in names)


def test_unknown_kind_lists_the_registered_ones(tmp_path: Path) -> None:
    from tests.conftest import tankbench

    c = tmp_path / "c.toml"
    c.write_text(
        '[campaign]\nname = "k"\n[[target]]\nname = "a"\nkind = "smb"\npath = "/x"\n[matrix]\nrw = ["read"]\n'
        'bs = ["4k"]\n'
    )
    res = tankbench("plan", str(c))
    assert res.returncode == 2 and "target[0].kind" in res.stderr and "raw, file, dataset, zvol" in res.stderr
