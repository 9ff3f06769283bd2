"""Bundles end to end (issue 31): written by `tankbench bundle`, opened by `report`, `show` and `results` as a user
runs them, and by another user from another clone, with the same report."""

from __future__ import annotations

import io
import json
import os
import pwd
import re
import shutil
import subprocess
import sys
import zipfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from openpyxl import load_workbook

from tests.conftest import FIXTURES, ROOT, tankbench

JOURNAL = FIXTURES / "journal-lab-zfs.sqlite"
PYTHON = "/usr/bin/python3"  # Debian's (scripts/setup installs python3)
OUTPUTS = ("index.html", "summary.md", "results.csv", "results.json", "results.xlsx")


def _same_report(a: Path, b: Path, paths: tuple[str, ...]) -> None:
    """Two report directories hold the same report, apart from the journal's path and the time of writing."""

    def norm(text: str) -> str:
        for p in paths:
            text = text.replace(p, "<journal>")
        return text

    for name in OUTPUTS:
        x, y = (a / name).read_bytes(), (b / name).read_bytes()
        if name == "results.xlsx":  # a workbook records when it was written (docProps/core.xml): compare cells
            wx, wy = load_workbook(io.BytesIO(x)), load_workbook(io.BytesIO(y))
            assert wx.sheetnames == wy.sheetnames
            for sx, sy in zip(wx.worksheets, wy.worksheets):
                vx = [[norm(str(c)) if isinstance(c, str) else c for c in r] for r in sx.iter_rows(values_only=True)]
                vy = [[norm(str(c)) if isinstance(c, str) else c for c in r] for r in sy.iter_rows(values_only=True)]
                assert vx == vy, (name, sx.title)
            with zipfile.ZipFile(io.BytesIO(x)) as zx, zipfile.ZipFile(io.BytesIO(y)) as zy:
                assert sorted(zx.namelist()) == sorted(zy.namelist())
                for n in zx.namelist():
                    if n != "docProps/core.xml":
                        assert norm(zx.read(n).decode()) == norm(zy.read(n).decode()), (name, n)
        else:
            assert norm(x.decode()) == norm(y.decode()), name


def test_report_show_results_open_a_bundle_and_match_the_journals_report(tmp_path: Path) -> None:
    """The commands as a user runs them, on a bundle: the report is the journal's own, written beside the bundle."""
    out = tmp_path / "b.tankbench.zip"
    cp = tankbench("bundle", str(JOURNAL), "-o", str(out), cwd=tmp_path)
    assert cp.returncode == 0, cp.stderr
    assert re.match(r"wrote .*b\.tankbench\.zip \(0\.\d MB\): 18 tests, 36 runs, 1 fingerprint\(s\), report", cp.stdout)
    direct = tankbench("report", "--journal", str(JOURNAL), "--out", str(tmp_path / "direct"))
    assert direct.returncode == 0, direct.stderr
    via = tankbench("report", str(out))
    assert via.returncode == 0, via.stderr
    rdir = tmp_path / "b-report"  # NAME-report beside the bundle
    extracted = json.loads((rdir / "results.json").read_text())["journal"]
    _same_report(tmp_path / "direct", rdir, (str(JOURNAL), extracted))
    show = tankbench("show", str(out), "--json")
    assert show.returncode == 0 and len(json.loads(show.stdout)) == 18
    res = tankbench("results", "--journal", str(out), "--json")
    assert res.returncode == 0 and len(json.loads(res.stdout)) == 36
    assert sorted(p.name for p in tmp_path.iterdir()) == ["b-report", "b.tankbench.zip", "direct"]
    assert not os.path.exists(extracted)  # the bundle's journal copy went with the command


@pytest.fixture
def other_user() -> Iterator[pwd.struct_passwd]:
    """A throwaway local user with a home of its own (removed after)."""
    name = f"tbb{os.getpid() % 100000}"
    subprocess.run(["useradd", "-m", "-s", "/bin/sh", name], check=True, capture_output=True)
    try:
        yield pwd.getpwnam(name)
    finally:
        subprocess.run(["userdel", "-r", "-f", name], capture_output=True)


def test_a_bundle_opened_by_another_user_from_another_clone_gives_the_same_report(
    tmp_path: Path, other_user: pwd.struct_passwd
) -> None:
    """Issue 31: another machine is another user, another clone, another home; no access to the hosts."""
    mine = tmp_path / "mine"
    cp = tankbench("bundle", str(JOURNAL), "-o", str(tmp_path / "x.tankbench.zip"))
    assert cp.returncode == 0, cp.stderr
    assert tankbench("report", str(tmp_path / "x.tankbench.zip"), "--out", str(mine)).returncode == 0
    home = Path(other_user.pw_dir)
    clone = home / "tankbench"
    subprocess.run(["git", "clone", "-q", "--no-hardlinks", str(ROOT), str(clone)], check=True)
    subprocess.run(["git", "-C", str(clone), "checkout", "-q", _head()], check=True)
    shutil.copy(tmp_path / "x.tankbench.zip", home / "x.tankbench.zip")
    subprocess.run(["chown", "-R", f"{other_user.pw_uid}:{other_user.pw_gid}", str(home)], check=True)
    # their own clone's code, on Debian's python3 (ours lives under /root, which they cannot read), with the
    # third-party libraries of our virtualenv read-only (pure Python or built for the same CPython 3.11 ABI)
    libs = next(Path(sys.prefix, "lib").glob("python3*/site-packages"))
    env = {"HOME": str(home), "PATH": "/usr/bin:/bin", "PYTHONPATH": f"{clone / 'src'}:{libs}", "LANG": "C.UTF-8"}
    theirs = subprocess.run(
        ["runuser", "-u", other_user.pw_name, "--", "env", "-i", *[f"{k}={v}" for k, v in env.items()],
         PYTHON, "-m", "tankbench", "report", str(home / "x.tankbench.zip")],
        capture_output=True, text=True, timeout=300, cwd=home,
    )  # fmt: skip
    assert theirs.returncode == 0, theirs.stderr
    rdir = home / "x-report"
    assert rdir.stat().st_uid == other_user.pw_uid
    assert str(clone / "src") in _which_tankbench(env, other_user.pw_name)
    paths = tuple(json.loads((d / "results.json").read_text())["journal"] for d in (mine, rdir))
    _same_report(mine, rdir, paths)


def _head() -> str:
    return subprocess.run(["git", "-C", str(ROOT), "rev-parse", "HEAD"], capture_output=True, text=True).stdout.strip()


def _which_tankbench(env: dict[str, str], user: str) -> str:
    """Where the other user's python finds tankbench: its own clone, not ours."""
    return subprocess.run(
        ["runuser", "-u", user, "--", "env", "-i", *[f"{k}={v}" for k, v in env.items()],
         PYTHON, "-c", "import tankbench; print(tankbench.__file__)"],
        capture_output=True, text=True, timeout=60,
    ).stdout  # fmt: skip
