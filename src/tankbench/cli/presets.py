"""`tankbench presets`: the campaigns that reproduce the seed experiments, by name."""

from __future__ import annotations

import argparse
import os
import sys
import tomllib
from pathlib import Path

from tankbench.cli._common import print_json


def presets_dir() -> Path:
    """presets/ of this checkout (the package is installed editable from it)."""
    return Path(__file__).resolve().parents[3] / "presets"


def resolve_campaign(name: str) -> str:
    """A path as given, or `NAME` / `NAME.toml` from presets/ when no such file exists here."""
    if os.path.exists(name) or "/" in name:
        return name
    for candidate in (presets_dir() / name, presets_dir() / f"{name}.toml"):
        if candidate.is_file():
            return str(candidate)
    return name


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("presets", help="list the preset campaigns (one per seed experiment)",
                       description="Preset campaigns reproduce the experiments of the seed write-ups. "
                                   "Run one by name: `tankbench run zvol-issues --scale quick`.")
    p.add_argument("--json", action="store_true", help="print JSON")
    p.set_defaults(func=cmd_presets)


def list_presets() -> list[dict[str, object]]:
    out = []
    for path in sorted(presets_dir().glob("*.toml")):
        doc = tomllib.loads(path.read_text())
        camp = doc.get("campaign", {})
        out.append({"name": path.stem, "path": str(path), "description": camp.get("description", ""),
                    "scales": sorted(doc.get("scale", {}))})
    return out


def cmd_presets(args: argparse.Namespace) -> int:
    rows = list_presets()
    if args.json:
        print_json(rows)
        return 0
    for r in rows:
        scales = f" [scales: {', '.join(r['scales'])}]" if r["scales"] else ""  # type: ignore[arg-type]
        sys.stdout.write(f"{r['name']:20} {r['description']}{scales}\n")
    return 0
