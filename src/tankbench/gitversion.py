"""tankbench's version, from git: what the build backend (scripts/backend) writes into every wheel and sdist, and
what a checkout reports live. Standard library only: the backend loads this file before tankbench is installed.

The scheme is setuptools-scm's default ("guess-next-dev"), so pip and pipx order any two builds by their commits:
- on a release tag vX.Y.Z:                      X.Y.Z
- N commits after vX.Y.Z:                       X.Y.(Z+1).devN+gHASH
- no release tag yet (N commits in history):    0.1.devN+gHASH
- uncommitted changes add ".dirty" to the local part (+gHASH.dirty).
A source archive (`git archive`, a forge's "download ZIP") has no .git: .git_archival.txt, filled in by git's
export-subst, still names its commit and, when a release tag is among its ancestors, the release."""

from __future__ import annotations

import re
import subprocess
from dataclasses import dataclass
from pathlib import Path

#: the version of a build whose history is unknown (neither git, an archive's stamp nor a built file says)
UNKNOWN = "0+unknown"
_DESCRIBE = re.compile(r"^v?(\d+(?:\.\d+)*)(?:-(\d+)-g([0-9a-f]+))?$")


@dataclass(frozen=True)
class Stamp:
    """What a build records: the PEP 440 version and the full commit (with -dirty), or "unknown"."""

    version: str
    commit: str


def _git(root: Path, *args: str) -> str:
    try:
        res = subprocess.run(["git", "-C", str(root), *args], capture_output=True, text=True, timeout=20)
    except (OSError, subprocess.SubprocessError):
        return ""
    return res.stdout.strip() if res.returncode == 0 else ""


def _next(release: str) -> str:
    parts = release.split(".")
    while len(parts) < 3:
        parts.append("0")
    parts[-1] = str(int(parts[-1]) + 1)
    return ".".join(parts)


def from_describe(describe: str, commit: str, count: int | None, dirty: bool) -> str:
    """The version for `git describe --tags --long` output (empty: no release tag) and the commit count."""
    local = f"g{commit[:12]}" + (".dirty" if dirty else "") if commit else ""
    m = _DESCRIBE.match(describe.strip())
    if m:
        release, distance = m.group(1), int(m.group(2) or 0)
        if distance == 0:
            return release + ("+dirty" if dirty else "")
        return f"{_next(release)}.dev{distance}+{local}"
    if count is None:
        return f"0.1.dev0+{local}" if local else UNKNOWN
    return f"0.1.dev{count}+{local}" if local else f"0.1.dev{count}"


def from_checkout(root: Path) -> Stamp | None:
    """The stamp of a git checkout at `root`, or None when it is not one (or git is missing). Two git calls (this
    runs on the first use of tankbench.__version__ in a checkout)."""
    if not (root / ".git").exists():
        return None
    out = _git(root, "describe", "--tags", "--long", "--dirty", "--always", "--abbrev=40", "--match", "v[0-9]*")
    if not out:  # git refused (another user's checkout: "dubious ownership") or is missing: read HEAD ourselves
        commit = head_commit(root / ".git")
        return Stamp(from_describe("", commit, None, False), commit + "-unverified") if commit else None
    dirty = out.endswith("-dirty")
    out = out.removesuffix("-dirty")
    m = re.match(r"^(.*)-g([0-9a-f]{40})$", out)
    describe, commit = (out, m.group(2)) if m else ("", out)
    if not re.fullmatch(r"[0-9a-f]{40}", commit):
        return None
    count = None
    if not m:  # no release tag: the commit count orders the builds
        n = _git(root, "rev-list", "--count", "HEAD")
        count = int(n) if n.isdigit() else None
    return Stamp(from_describe(describe, commit, count, dirty), commit + ("-dirty" if dirty else ""))


def head_commit(git: Path) -> str:
    """The commit HEAD names, read from the files of a `.git` directory without running git (which refuses a
    repository another user owns, and whose `--dirty` check could run that user's hooks); "" when unknown. No
    claim about uncommitted changes can be made this way: callers mark the commit unverified."""
    try:
        if git.is_file():  # a worktree or submodule: "gitdir: PATH"
            git = (git.parent / git.read_text().split("gitdir:", 1)[1].strip()).resolve()
        head = (git / "HEAD").read_text().strip()
        if head.startswith("ref: "):
            ref = head[5:].strip()
            loose = git / ref
            if loose.is_file():
                head = loose.read_text().strip()
            else:  # packed: "<sha> <ref>" lines
                packed = (git / "packed-refs").read_text() if (git / "packed-refs").is_file() else ""
                head = next((ln.split()[0] for ln in packed.splitlines() if ln.endswith(" " + ref)), "")
    except (OSError, IndexError, ValueError):
        return ""
    return head if re.fullmatch(r"[0-9a-f]{40}", head) else ""


def from_archival(text: str) -> Stamp | None:
    """The stamp of a source archive from its .git_archival.txt (None while its fields are not filled in)."""
    fields = dict(line.split(": ", 1) for line in text.splitlines() if ": " in line)
    commit = fields.get("node", "").strip()
    if not re.fullmatch(r"[0-9a-f]{40}", commit):
        return None  # "$Format:%H$": not an archive made by git, or export-subst was off
    describe = fields.get("describe-name", "").strip()
    if describe.startswith("$Format"):
        describe = ""
    return Stamp(from_describe(describe, commit, None, False), commit)
