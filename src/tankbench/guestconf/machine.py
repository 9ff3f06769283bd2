"""The test guest's processor as vm-disk axes (seed 001's VM half, seed 003's two threads): `guest_cpu`, qemu's
CPU model (`-cpu`, with optional feature flags: `"kvm64"`, `"max"`, `"max,aes=off"`, `"qemu64,+aes"`), and
`guest_cpus`, its vCPU count (`-smp`).

Both are fixed when qemu starts, so a change between tests boots a new guest (the kind does it in `provision`);
the axes are the outermost of the guest's, so a campaign boots once per processor setting. What the guest got
is read back in it each boot (`/proc/cpuinfo`'s flags and model name, `nproc`) and recorded per run
(`guest.cpu_aes`, `guest.cpu_model`, `guest.nproc`; `guest.cpu_mismatch` names what differs from the request).
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from tankbench.keys import Keys

AXES: tuple[str, ...] = ("guest_cpu", "guest_cpus")

#: qemu's -cpu argument: a model name, then comma-separated features (+aes, -aes, aes=off, level=13)
#: \Z, not $: `$` also matches before a last "\n"
CPU_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}(,[+-]?[A-Za-z0-9_.-]{1,32}(=[A-Za-z0-9_.-]{1,32})?){0,16}\Z")
MAX_CPUS = 16


@dataclass(frozen=True)
class Processor:
    """What the guest boots with: `cpu` None = tankbench's default (`max` under TCG, `host` under KVM)."""

    cpu: str | None = None
    cpus: int = 1

    @classmethod
    def of(cls, params: Mapping[str, Any]) -> Processor:
        cpu = params.get("guest_cpu")
        return cls(cpu=str(cpu) if cpu else None, cpus=int(params.get("guest_cpus", 1)))

    def describe(self) -> str:
        return f"{self.cpus} vCPU{'s' if self.cpus > 1 else ''}, -cpu {self.cpu or 'default'}"


def first_processor(matrix: Mapping[str, tuple[Any, ...]], includes: Sequence[Mapping[str, Any]] = ()) -> Processor:
    """The processor a campaign's guest boots with first: the matrix's first values (its tests come first), else
    the first [[include]] that names one (a campaign whose guest tests are all includes boots once per step)."""
    if any(a in matrix for a in AXES):
        return Processor.of({a: matrix[a][0] for a in AXES if a in matrix})
    return next((Processor.of(inc) for inc in includes if any(a in inc for a in AXES)), Processor())


def axis_value(keys: Keys, key: str, axis: str, value: object) -> Any:
    """guest_cpus: 1 to 16; guest_cpu: a qemu CPU model with optional features (not checked against the
    host's qemu here: a model it lacks fails the guest's boot, with qemu's message)."""
    if axis == "guest_cpus":
        return keys.integer(key, value, 1, MAX_CPUS)
    s = keys.string(key, value)
    if not CPU_RE.match(s):
        raise keys.err(
            key,
            value,
            "not a qemu CPU model (a name, then optional ,feature flags)",
            'e.g. guest_cpu = ["max,aes=off", "max"] (seed 001: without and with AES-NI), or "kvm64"',
        )
    return s


def expects_aes(cpu: str | None) -> bool | None:
    """Whether the model as written asks for AES-NI (None when only qemu knows: a plain model name)."""
    if cpu is None:
        return None
    feats = cpu.split(",")[1:]
    for f in reversed(feats):
        if f in ("+aes", "aes=on", "aes=true"):
            return True
        if f in ("-aes", "aes=off", "aes=false"):
            return False
    return None


def name_parts(params: Mapping[str, Any], varying: set[str]) -> list[str]:
    """`-cpu-kvm64`, `-2cpus` when the axis varies (commas and = read badly in a name)."""
    out = []
    if "guest_cpu" in varying and params.get("guest_cpu"):
        out.append("cpu-" + re.sub(r"[^A-Za-z0-9_.+-]", "-", str(params["guest_cpu"])))
    if "guest_cpus" in varying and "guest_cpus" in params:
        out.append(f"{params['guest_cpus']}cpus")
    return out


def cpu_has_aes(cpuinfo_flags: str) -> bool:
    """Whether a /proc/cpuinfo `flags` line lists `aes` (AES-NI) (pure)."""
    return "aes" in cpuinfo_flags.split(":", 1)[-1].split()


def readback_script() -> str:
    """Shell run in the guest: the flags and model name of the first processor, then the online count."""
    return "grep -m1 '^flags' /proc/cpuinfo; grep -m1 '^model name' /proc/cpuinfo; nproc"


def parse_readback(stdout: str) -> dict[str, Any]:
    """guest.cpu_aes, guest.cpu_model, guest.nproc from `readback_script`'s output."""
    lines = stdout.splitlines()
    flags = next((ln for ln in lines if ln.startswith("flags")), None)
    model = next((ln for ln in lines if ln.startswith("model name")), None)
    nproc = next((ln.strip() for ln in lines if ln.strip().isdigit()), None)
    return {
        "guest.cpu_aes": cpu_has_aes(flags) if flags else None,
        "guest.cpu_model": model.split(":", 1)[-1].strip() if model else None,
        "guest.nproc": int(nproc) if nproc else None,
    }


def mismatches(want: Processor, got: Mapping[str, Any]) -> list[str]:
    """What the guest reports that differs from the test's processor (empty: all took effect). Pure."""
    out = []
    if got.get("guest.nproc") is not None and got["guest.nproc"] != want.cpus:
        out.append(f"guest_cpus {want.cpus}: the guest has {got['guest.nproc']} online")
    aes = expects_aes(want.cpu)
    if aes is not None and got.get("guest.cpu_aes") is not None and got["guest.cpu_aes"] != aes:
        out.append(f"guest_cpu {want.cpu}: AES-NI is {'present' if got['guest.cpu_aes'] else 'absent'} in the guest")
    return out
