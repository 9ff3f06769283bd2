"""The version scheme (setuptools-scm's default), and a source archive made by git naming its commit and release."""

from __future__ import annotations

import io
import os
import subprocess
import tarfile
from pathlib import Path

import pytest

from tankbench import gitversion

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize(
    ("describe", "count", "dirty", "want"),
    [
        ("", 472, False, "0.1.dev472+g0123456789ab"),
        ("", 472, True, "0.1.dev472+g0123456789ab.dirty"),
        ("v0.2.0-0-g0123456", 9, False, "0.2.0"),
        ("v0.2.0-0-g0123456", 9, True, "0.2.0+dirty"),
        ("v0.2.0-5-g0123456", 9, False, "0.2.1.dev5+g0123456789ab"),
        ("v1.4-2-g0123456", 9, False, "1.4.1.dev2+g0123456789ab"),
        ("v0.2.0", None, False, "0.2.0"),  # an archive's %(describe) on the tag itself
        ("", None, False, "0.1.dev0+g0123456789ab"),
    ],
)
def test_versions_order_builds_by_commit(describe: str, count: int | None, dirty: bool, want: str) -> None:
    assert gitversion.from_describe(describe, "0123456789abcdef" * 2 + "01234567", count, dirty) == want


def test_a_later_commit_is_a_newer_version() -> None:
    from packaging.version import Version  # pip's vendored copy is not importable; packaging comes with pytest

    c = "ab" * 20
    assert Version(gitversion.from_describe("", c, 11, False)) > Version(gitversion.from_describe("", c, 10, False))
    assert Version(gitversion.from_describe("v0.2.0-1-gab", c, 0, False)) > Version("0.2.0")


def test_a_git_archive_names_its_commit() -> None:
    """`git archive` fills in .git_archival.txt (export-subst in .gitattributes): the backend reads it."""
    head = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "HEAD"], capture_output=True, text=True).stdout.strip()
    tar = subprocess.run(
        ["git", "-C", str(ROOT), "archive", "HEAD", ".git_archival.txt"], capture_output=True, check=True
    ).stdout
    member = tarfile.open(fileobj=io.BytesIO(tar)).extractfile(".git_archival.txt")
    assert member is not None
    stamp = gitversion.from_archival(member.read().decode())
    assert stamp is not None and stamp.commit == head
    assert stamp.version.endswith(f"+g{head[:12]}") or "+" not in stamp.version  # no release tag, or on one


def test_an_unfilled_archival_file_says_nothing() -> None:
    assert gitversion.from_archival("node: $Format:%H$\ndescribe-name: $Format:%(describe)$\n") is None


def test_another_users_checkout_still_names_its_commit(tmp_path: Path) -> None:
    """git refuses a repository another user owns ("dubious ownership"), so tankbench run by a user from a checkout it
    does not own said 0+unknown (commit unknown) in --version and in every report. HEAD is read from the files then,
    loose or packed, and the commit is marked unverified (git's --dirty check is what could not run)."""
    repo = tmp_path / "checkout"
    repo.mkdir()

    def git(*a: str) -> str:
        who = {
            "GIT_AUTHOR_NAME": "t",
            "GIT_AUTHOR_EMAIL": "t@t",
            "GIT_COMMITTER_NAME": "t",
            "GIT_COMMITTER_EMAIL": "t@t",
        }
        env = {**os.environ, **who}
        return subprocess.run(["git", "-C", str(repo), *a], capture_output=True, text=True, check=True, env=env).stdout

    git("init", "-q")
    git("commit", "-q", "--allow-empty", "-m", "x")
    commit = git("rev-parse", "HEAD").strip()
    assert gitversion.from_checkout(repo) is not None and gitversion.from_checkout(repo).commit == commit
    for packed in (False, True):
        if packed:
            git("pack-refs", "--all")
            assert not list((repo / ".git" / "refs" / "heads").iterdir())
        for p in (repo, *repo.rglob("*")):
            os.chown(p, 65534, 65534)  # another user's checkout: git now refuses it
        assert subprocess.run(["git", "-C", str(repo), "status"], capture_output=True).returncode != 0
        stamp = gitversion.from_checkout(repo)
        assert stamp == gitversion.Stamp(f"0.1.dev0+g{commit[:12]}", commit + "-unverified"), stamp
        for p in (repo, *repo.rglob("*")):
            os.chown(p, 0, 0)
