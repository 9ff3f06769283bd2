"""How an emulated machine's runs are labelled: each layer's accelerator and the lab's disk models, for the
report's banner and the `emulated` warning."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from tankbench.units import fmt_size

_ACCEL = {"tcg": "qemu TCG (emulated)", "kvm": "KVM", "": "not virtualised"}


def emulation_layers(fingerprints: Iterable[Mapping[str, Any]]) -> tuple[str, ...]:
    """How the runs' machines were virtualised, one phrase per distinct fingerprint: the host (the lab VM or a
    real machine) and, where fio ran in a test guest, the guest, e.g. "host: qemu TCG (emulated); test guest:
    qemu TCG (emulated) inside it"."""
    out: dict[str, None] = {}
    for fp in fingerprints:
        host = str(fp.get("accelerator", ""))
        text = f"host: {_ACCEL.get(host, host)}"
        if fp.get("guest_accelerator"):
            guest = str(fp["guest_accelerator"])
            text += f"; test guest: {_ACCEL.get(guest, guest)}" + (" inside it" if fp.get("guest_nested") else "")
        out[text] = None
    return tuple(out)


def _emulated(fp: Mapping[str, Any]) -> bool:
    return fp.get("accelerator") == "tcg" or fp.get("guest_accelerator") == "tcg"


def lab_disk_note(fingerprints: Iterable[Mapping[str, Any]]) -> str:
    """The lab's disk models and ARC cap as the runs recorded them, one phrase ('' when no disk was modelled)."""
    out: dict[str, None] = {}
    for fp in fingerprints:
        models = fp.get("lab_disk_models") or {}
        named = {d: str(m).split(":", 1)[0] for d, m in models.items()}
        if not any(m != "none" for m in named.values()):
            continue
        groups: dict[str, list[str]] = {}
        for d, m in named.items():
            groups.setdefault(m, []).append(d)
        text = "; ".join(f"{', '.join(ds)}: {m}" for m, ds in groups.items())
        if fp.get("lab_arc_max"):
            text += f"; ARC max {fmt_size(int(fp['lab_arc_max']))}"
        out[text] = None
    return " | ".join(out)


def emulation_banner(fingerprints: Iterable[Mapping[str, Any]]) -> str:
    """What an emulated machine's numbers mean, for the report's banner and the `emulated` warning."""
    fps = list(fingerprints)
    text = (
        f"These runs ran in an emulated machine ({' / '.join(emulation_layers(fps))}): the numbers measure the "
        "emulator, not your disks. They are not for choosing hardware or a configuration."
    )
    disks = lab_disk_note(fps)
    if disks:
        text += (
            f" The lab's disks were modelled ({disks}; scaled-down models, see docs/lab.md): the direction of a "
            "disk-bound effect is meaningful, its size is not."
        )
    return text
