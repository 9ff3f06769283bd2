"""Every fingerprint in the journal (kernel, OpenZFS, tunables, pool layout, disks, fio, CPU, RAM), key by key."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from tankbench.analysis.result import Analysis, Context, SectionSpec
from tankbench.analysis.section import Cell, Column, Section, Span, Table

#: fingerprint keys whose mapping's values are device models: an empty one is a device that reported none
MODEL_KEYS = ("device_models",)


def show(v: Any, empty: str = "—") -> str:
    """A fingerprint value as people read it: a mapping as "key: value, …" (an empty value as `empty`: "(no model)"
    in device_models, "—" elsewhere, e.g. a pool layout's parent), a list joined."""
    if isinstance(v, Mapping):
        return ", ".join(f"{k}: {show(x) if x not in ('', None) else empty}" for k, x in v.items()) or "—"
    if isinstance(v, list | tuple):
        return ", ".join(show(x) for x in v) or "—"
    return "" if v is None else str(v)


def show_key(key: str, v: Any) -> str:
    """show() of the fingerprint's `key`: its empty device models as "(no model)", any other empty value as "—"."""
    return show(v, "(no model)" if key in MODEL_KEYS else "—")


def render(a: Analysis, _: None) -> Section:
    rows = [
        (Cell(fid, (Span(fid, "code"),)), k, Cell(v, show_key(k, v)))
        for fid, fp in sorted(a.dataset.fingerprints.items())
        for k, v in sorted(fp.data.items())
    ]
    cols = (Column("id"), Column("key"), Column("value"))
    return Section("fingerprint", "Fingerprint", (Table(cols, rows, wide=False),))


def to_json(a: Analysis, _: None) -> Mapping[str, Any]:
    return {"fingerprints": {k: dict(v.data) for k, v in a.dataset.fingerprints.items()}}


def nothing(_: Context) -> None:
    return None


SECTION = SectionSpec("fingerprint", 160, nothing, render, to_json, outputs=frozenset({"html"}))
