"""Command line: one module per subcommand, each with `register(subparsers)`; main() catches UserError once."""

from __future__ import annotations

import argparse
import importlib
import pkgutil
import sys
from collections.abc import Sequence

from tankbench import version_line
from tankbench.errors import HostError, UserError

# The order subcommands are listed in --help; modules not named here are appended alphabetically.
ORDER = [
    "plan",
    "run",
    "check",
    "refine",
    "show",
    "results",
    "report",
    "compare",
    "bundle",
    "advise",
    "importfio",
    "presets",
    "doctor",
    "clean",
    "lab",
]


class _Version(argparse.Action):
    """--version, computed only when asked (it may ask git)."""

    def __call__(self, parser: argparse.ArgumentParser, *args: object, **kwargs: object) -> None:
        print(version_line())
        parser.exit()


def build_parser() -> argparse.ArgumentParser:
    """The full parser: every module in tankbench.cli that defines register() adds its subcommand."""
    parser = argparse.ArgumentParser(
        prog="tankbench",
        description="Reproducible ZFS storage benchmarks: plan a campaign, run it unattended, report honestly.",
    )
    parser.add_argument(
        "--version", action=_Version, nargs=0, help="print the version and the commit it was built from"
    )
    parser.set_defaults(root_parser=parser)  # `tankbench completion` walks the whole parser
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    names = [m.name for m in pkgutil.iter_modules(__path__) if not m.name.startswith("_")]
    names.sort(key=lambda n: (ORDER.index(n) if n in ORDER else len(ORDER), n))
    for name in names:
        module = importlib.import_module(f"{__name__}.{name}")
        register = getattr(module, "register", None)
        if register is not None:
            register(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point: parse, call, and turn UserError into `Error: …` + hint with exit status 2."""
    parser = build_parser()
    args = parser.parse_args(argv)
    if not getattr(args, "func", None):
        parser.print_help()
        return 2
    try:
        return int(args.func(args) or 0)
    except UserError as e:
        print(f"Error: {e.message}", file=sys.stderr)
        if e.hint:
            print(f"Hint: {e.hint}", file=sys.stderr)
        return e.exit_status
    except HostError as e:
        print(f"Error: {e}", file=sys.stderr)
        print(
            "Hint: the host could not run a command; check that it is reachable and has fio and python3.",
            file=sys.stderr,
        )
        return 3
    except KeyboardInterrupt:
        print("Interrupted.", file=sys.stderr)
        return 130
    except BrokenPipeError:
        return 0
