"""ZFS module tunables: one canonical string in a test's params (pure; the campaign parser's), and setting them on
a host for a test and restoring them (host-wide, whatever the target: the runner's)."""

from __future__ import annotations

import json
import shlex
import time
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from tankbench.errors import UserError
from tankbench.model import Test

if TYPE_CHECKING:  # the campaign parser reads the canonical form here without loading hosts
    from tankbench.hosts.base import Host


def canonical_tunables(values: Mapping[str, str]) -> str:
    """`zfs_arc_max=1073741824,zfs_txg_timeout=10` (sorted); `default` for the host's own values."""
    return ",".join(f"{k}={values[k]}" for k in sorted(values)) or "default"


def parse_tunables(text: str) -> dict[str, str]:
    """The inverse of canonical_tunables."""
    if not text or text == "default":
        return {}
    return dict(item.split("=", 1) for item in text.split(","))


PARAMS_DIR = "/sys/module/zfs/parameters"
#: where a campaign's original tunables wait until they are restored (root-only: 0700 dir, 0600 file)
STATE_DIR = "/var/lib/tankbench"


def _same_value(a: str, b: str) -> bool:
    """Module parameters read back as the kernel prints them: compare numbers as numbers."""
    a, b = a.strip(), b.strip()
    try:
        return int(a) == int(b)
    except ValueError:
        return a == b


class Tunables:
    """ZFS module parameters a campaign sets ([tunables] and matrix.tunables), verified by reading them back,
    and restored to the host's own values when the campaign ends, fails, or is resumed after a crash.

    Before the first write, the host's values are saved on the host in a tankbench-owned 0600 file
    (/var/lib/tankbench/tunables-<campaign id>.json), so a resume after kill -9 (or a reboot-less crash of
    tankbench) puts them back: call restore_stale() before anything else when a campaign starts."""

    def __init__(self, host: Host, campaign_id: str, spec_path: str = "") -> None:
        self.host = host
        self.cid = campaign_id
        self.spec_path = spec_path
        self.originals: dict[str, str] = {}  # the host's own values of every parameter this campaign changed
        self._loaded = False

    @property
    def state_path(self) -> str:
        return f"{STATE_DIR}/tunables-{self.cid}.json"

    # -- host I/O ----------------------------------------------------------------------------------------
    def read(self, names: list[str] | tuple[str, ...]) -> dict[str, str]:
        """Current values of the named module parameters; UserError naming a parameter the module lacks."""
        if not names:
            return {}
        res = self.host.run(["grep", "-H", "", *(f"{PARAMS_DIR}/{n}" for n in names)], timeout=60)
        out: dict[str, str] = {}
        for line in res.stdout.splitlines():
            path, _, value = line.partition(":")
            out[path.rsplit("/", 1)[-1]] = value.strip()
        missing = [n for n in names if n not in out]
        if missing:
            where = f"{self.spec_path}: " if self.spec_path else ""
            raise UserError(
                f"{where}tunables.{missing[0]}: no such ZFS module parameter on {self.host.name} "
                f"({PARAMS_DIR}/{missing[0]})",
                "names are the files in /sys/module/zfs/parameters (they differ between OpenZFS "
                "versions), e.g. zfs_txg_timeout",
            )
        return out

    def _write(self, values: dict[str, str]) -> None:
        script = "; ".join(f"printf '%s\\n' {shlex.quote(v)} > {PARAMS_DIR}/{n}" for n, v in values.items())
        res = self.host.run(["sh", "-c", script], timeout=60)
        if res.returncode != 0:
            raise UserError(
                f"{self.spec_path}: tunables: writing {', '.join(values)} on {self.host.name} failed: "
                f"{res.stderr.strip()}",
                "module parameters need root; the value may be out of range",
            )

    def _save_state(self) -> None:
        """Persist the originals before any write (so kill -9 at any later point can be undone)."""
        doc = json.dumps({"campaign": self.cid, "originals": self.originals, "saved": time.time()}, sort_keys=True)
        path = shlex.quote(self.state_path)
        script = (
            f"umask 077; mkdir -p {STATE_DIR} && chmod 700 {STATE_DIR} && cat > {path}.tmp && mv -f {path}.tmp {path}"
        )
        self.host.run(["sh", "-c", script], input=doc.encode(), check=True, timeout=60)

    def _load_state(self) -> dict[str, str]:
        res = self.host.run(["cat", self.state_path], timeout=60)
        if res.returncode != 0 or not res.stdout.strip():
            return {}
        try:
            doc = json.loads(res.stdout)
        except json.JSONDecodeError:
            return {}
        return {str(k): str(v) for k, v in dict(doc.get("originals", {})).items()}

    # -- the API the runner calls --------------------------------------------------------------------
    def apply(self, test: Test) -> dict[str, Any]:
        """Set the test's tunables (restoring any this campaign changed that the test does not name), read them
        back and return the run's checks: `tunables.set`, `tunables.readback`, `tunables.verified`."""
        wanted = parse_tunables(str(test.params.get("tunables", "default")))
        if not self._loaded:  # a crashed run's originals win over what the host shows now
            self.originals = {**self._load_state(), **self.originals}
            self._loaded = True
        if not wanted and not self.originals:
            return {"tunables.set": "default", "tunables.verified": True} if "tunables" in test.params else {}
        names = sorted(set(wanted) | set(self.originals))
        current = self.read(names)
        new = [n for n in wanted if n not in self.originals]
        if new:
            self.originals.update({n: current[n] for n in new})
            self._save_state()
        target = {n: wanted.get(n, self.originals[n]) for n in names}
        changes = {n: v for n, v in target.items() if not _same_value(current[n], v)}
        if changes:
            self._write(changes)
        back = self.read(names)
        kept = [n for n in names if not _same_value(back[n], target[n])]
        if kept:
            raise UserError(
                f"{self.spec_path}: tunables.{kept[0]} = {target[kept[0]]!r}: the module kept "
                f"{back[kept[0]]!r} on {self.host.name}",
                "the value may be out of range or the parameter read-only at run time (`modinfo zfs`)",
            )
        return {
            "tunables.set": canonical_tunables(wanted),
            "tunables.readback": back,
            "tunables.verified": True,
            "tunables.host_values": dict(self.originals),
        }

    def restore(self) -> dict[str, Any]:
        """Put the host's own values back, verify them, and delete the saved state (campaign end or failure)."""
        if not self._loaded:
            self.originals = {**self._load_state(), **self.originals}
            self._loaded = True
        if not self.originals:
            return {}
        self._write(self.originals)
        back = self.read(sorted(self.originals))
        ok = all(_same_value(back[n], v) for n, v in self.originals.items())
        if ok:
            self.host.run(["rm", "-f", self.state_path], check=True, timeout=60)
        restored = dict(self.originals)
        self.originals = {}
        return {"tunables.restored": restored, "tunables.restore_verified": ok}

    def restore_stale(self) -> dict[str, Any]:
        """On resume: restore what a crashed run of this campaign left set (no-op without saved state)."""
        self.originals = self._load_state()
        self._loaded = True
        return self.restore()
