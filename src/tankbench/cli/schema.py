"""`tankbench schema campaign|results`: the JSON Schemas of campaign files (for editors: Taplo / Even Better TOML)
and of results.json, generated from the code that parses and writes them."""

from __future__ import annotations

import argparse
import json
import sys
from importlib import resources

from tankbench.errors import UserError

KINDS = ("campaign", "results")


def register(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    p = sub.add_parser(
        "schema",
        help="print the JSON Schema of campaign files or of results.json",
        description="Print a JSON Schema. campaign: generated from the campaign parser's own key tables, for "
        "editors (Taplo / Even Better TOML: put `#:schema ./campaign.schema.json` at the top of a campaign file, "
        "or name it in .taplo.toml). results: the layout of `tankbench report`'s results.json.",
    )
    p.add_argument("which", choices=KINDS, help="which schema")
    p.add_argument("-o", "--output", metavar="PATH", help="write it to PATH instead of standard output")
    p.set_defaults(func=_run)


def text(which: str) -> str:
    """The schema as JSON text."""
    if which == "campaign":
        from tankbench.campaign.jsonschema import campaign_schema

        return json.dumps(campaign_schema(), indent=1) + "\n"
    return resources.files("tankbench").joinpath("schemas", "results.schema.json").read_text(encoding="utf-8")


def _run(args: argparse.Namespace) -> int:
    out = text(args.which)
    if not args.output:
        sys.stdout.write(out)
        return 0
    try:
        with open(args.output, "w", encoding="utf-8") as f:
            f.write(out)
    except OSError as e:
        raise UserError(f"cannot write {args.output}: {e.strerror}", "name a file in a writable directory") from None
    print(f"wrote {args.output}", file=sys.stderr)
    return 0
