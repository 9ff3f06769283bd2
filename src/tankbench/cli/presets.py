"""`tankbench presets`: the campaigns that reproduce the seed experiments, by name."""

from __future__ import annotations

import argparse
import difflib
import os
import sys
import tomllib
from importlib import resources
from importlib.resources.abc import Traversable

from tankbench.cli._common import print_json
from tankbench.errors import UserError


def preset_files() -> list[Traversable]:
    """The preset campaigns shipped inside the package (tankbench/presets/*.toml), by name."""
    folder = resources.files("tankbench").joinpath("presets")
    return sorted((f for f in folder.iterdir() if f.name.endswith(".toml") and f.is_file()), key=lambda f: f.name)


def example_files() -> list[Traversable]:
    """The example campaigns shipped inside the package (tankbench/examples/*.toml: the quick start)."""
    folder = resources.files("tankbench").joinpath("examples")
    return sorted((f for f in folder.iterdir() if f.name.endswith(".toml") and f.is_file()), key=lambda f: f.name)


def preset_path(name: str) -> str | None:
    """The file of preset (or example) `name` (or `name.toml`), or None when there is no such campaign."""
    for f in preset_files() + example_files():
        if f.name in (name, f"{name}.toml"):
            return str(f)  # an installed package (wheel or editable) is a directory on disk
    return None


def resolve_campaign(name: str) -> str:
    """A path as given, or a preset's file when no such file exists here and the name has no `/`."""
    if os.path.exists(name) or "/" in name:
        return name
    return preset_path(name) or name


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser(
        "presets",
        help="list the preset campaigns (one per seed experiment)",
        description="Preset campaigns reproduce the experiments of the seed write-ups. "
        "Run one by name: `tankbench run zvol-issues --scale quick`.",
    )
    p.add_argument(
        "action", nargs="?", choices=["list", "show"], default="list", help="list (default) or show one preset's file"
    )
    p.add_argument("name", nargs="?", metavar="NAME", help="the preset to show (`presets show NAME > my.toml`)")
    p.add_argument("--json", action="store_true", help="print JSON")
    p.set_defaults(func=cmd_presets)


def list_presets() -> list[dict[str, object]]:
    """Name, file, description and scales of every preset."""
    out = []
    for f in preset_files():
        with f.open("rb") as fh:  # TOML is UTF-8 whatever the locale says
            doc = tomllib.load(fh)
        camp = doc.get("campaign", {})
        out.append(
            {
                "name": f.name[: -len(".toml")],
                "path": str(f),
                "description": camp.get("description", ""),
                "scales": sorted(doc.get("scale", {})),
            }
        )
    return out


def show_preset(name: str | None) -> str:
    """The text of preset `name`, to copy into a campaign file of one's own."""
    names = [f.name[: -len(".toml")] for f in preset_files() + example_files()]
    if not name:
        raise UserError("presets show: which preset?", f"name one: {', '.join(names)}")
    path = preset_path(name)
    if path is None:
        close = difflib.get_close_matches(name, names, n=1)
        raise UserError(
            f"no preset named {name!r}",
            f"did you mean {close[0]!r}?" if close else f"presets: {', '.join(names)}",
        )
    with open(path, encoding="utf-8") as f:
        return f.read()


def cmd_presets(args: argparse.Namespace) -> int:
    if args.action == "show":
        sys.stdout.write(show_preset(args.name))
        return 0
    if args.name:
        raise UserError(
            f"presets: unexpected {args.name!r}", "`tankbench presets` lists; `presets show NAME` prints one"
        )
    rows = list_presets()
    if args.json:
        print_json(rows)
        return 0
    for r in rows:
        scales = f" [scales: {', '.join(r['scales'])}]" if r["scales"] else ""  # type: ignore[arg-type]
        sys.stdout.write(f"{r['name']:20} {r['description']}{scales}\n")
    return 0
