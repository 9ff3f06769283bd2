"""Before anything is written: the host's fio reads every job, each target kind checks its target, and the host
says what it is (fingerprint facts, load, boot id)."""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from tankbench.campaign import Spec
from tankbench.errors import UserError
from tankbench.fio.jobs import run_job_text
from tankbench.hosts.base import Host
from tankbench.model import Test
from tankbench.targets import TargetKind, Workspace, kind_of


@dataclass
class Preflight:
    """What the host told us before anything was written: fingerprint facts and per-target checks."""

    fingerprint: dict[str, Any]
    load1: float
    dirty_bytes: int
    zfs_params: dict[str, str] = field(default_factory=dict)
    #: the host's boot id: a run left `running` under another boot id died with its host
    boot_id: str = ""


def target_kinds(ws: Workspace) -> dict[str, TargetKind]:
    """One instance of each target kind the campaign uses, sharing the workspace."""
    return {t.kind: kind_of(t)(ws) for t in ws.spec.targets if t.kind}


#: job-file options that name files: left out of the parse check (fio never opens a file with --parse-only, and
#: without them the jobs of one configuration's tests are alike)
_FILE_OPTIONS = ("filename=", "directory=", "filename_format=")
_PARSE_CHUNK = 1000  # jobs per file: fio takes at most a few thousand jobs in one run


def parse_check_jobs(tests: Sequence[Test]) -> list[str]:
    """The campaign's distinct fio jobs (file options left out, every job named `job`), as job files of at most
    _PARSE_CHUNK jobs each, for `fio --parse-only` on the host (zvol-issues' 2,630 fio jobs parse in ~0.2 s)."""
    seen: dict[str, None] = {}
    for t in tests:
        if t.is_copy:
            continue
        lines = []
        for line in run_job_text(t).splitlines():
            if line.startswith(_FILE_OPTIONS) or line.startswith(";"):
                continue
            lines.append("[job]" if line.startswith("[") and line.strip() != "[global]" else line)
        seen.setdefault("\n".join(lines) + "\n", None)
    texts = list(seen)
    return ["\n".join(texts[i : i + _PARSE_CHUNK]) for i in range(0, len(texts), _PARSE_CHUNK)]


def fio_refusal(spec: Spec, host: Host, said: str) -> UserError:
    """fio's refusal of the campaign's jobs as an Error naming the campaign key that set the option."""
    m = re.search(r"(?:Bad option <|failed parsing )([A-Za-z0-9_]+)=?([^>;]*)", said)
    where = "[fio]"
    if m:
        name, value = m.group(1), m.group(2).strip()
        if name in spec.fio:
            where = f"[fio] {name} = {spec.fio[name]!r}"
        elif name in spec.matrix:
            where = f"matrix.{name} (fio got {name}={value})"
        else:
            where = f"fio option {name}={value}"
    return UserError(
        f"{spec.path}: {where}: fio on {host.name} refuses the campaign's jobs: {said}",
        "fix the option (`fio --cmdhelp=NAME` lists what this fio takes); nothing was written",
    )


def preflight(
    host: Host, spec: Spec, kinds: dict[str, TargetKind] | None = None, tests: Sequence[Test] | None = None
) -> Preflight:
    """Read-only checks of every target on the host, and of the campaign's fio jobs by the host's fio (`fio
    --parse-only`); raise UserError before anything is written."""
    kinds = kinds if kinds is not None else target_kinds(Workspace(host, spec))
    dirs: list[str] = []
    devices: list[str] = []
    for t in spec.targets:
        d, b = kinds[t.kind].probe_paths(t)
        dirs += d
        devices += b
    req: dict[str, Any] = {"op": "probe", "paths": dirs, "block_devices": devices}
    if tests is not None:
        req["fio_parse"] = parse_check_jobs(tests)
    probe = host.call_agent(req, timeout=300)
    if not probe["fingerprint"].get("fio_version"):
        raise UserError(f"{host.name}: fio is not installed on the host", "install it (Debian: apt-get install fio)")
    parsed = probe.get("fio_parse")
    if isinstance(parsed, dict) and not parsed.get("ok", True):
        raise fio_refusal(spec, host, str(parsed.get("error", "")))
    for t in spec.targets:
        kinds[t.kind].check(t, probe)
    return Preflight(
        fingerprint=probe["fingerprint"],
        load1=probe["load1"],
        dirty_bytes=probe["dirty_bytes"],
        zfs_params=probe.get("zfs_params", {}),
        boot_id=str(probe.get("boot_id", "")),
    )
