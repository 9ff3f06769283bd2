"""Command line: one module per subcommand, each with `register(subparsers)`; main() catches UserError once."""

from __future__ import annotations

import argparse
import importlib
import pkgutil
import re
import signal
import sqlite3
import sys
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import NoReturn

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


#: commands that read the whole parser (the shell completion lists every command and option)
WHOLE_PARSER = ("completion",)


class _Version(argparse.Action):
    """--version, computed only when asked (it may ask git)."""

    def __call__(self, parser: argparse.ArgumentParser, *args: object, **kwargs: object) -> None:
        print(version_line())
        parser.exit()


class _Parser(argparse.ArgumentParser):
    """argparse, with its usage errors in the form of every other refusal: the usage line, `Error: …`, a `Hint:`
    naming the command's --help, exit 2 (subcommands' parsers are of the same class)."""

    def error(self, message: str) -> NoReturn:
        self.print_usage(sys.stderr)
        hint = f"`{self.prog} --help` says what it takes"
        if "required" in message or "unrecognized" in message:  # e.g. `plan -dash.toml`: a file name, read as -d
            hint += f"; a file name beginning with - goes after --: {self.prog} -- -FILE"
        self.exit(2, f"Error: {message}\nHint: {hint}\n")


def command_names() -> list[str]:
    """The subcommands' module names, in --help's order."""
    names = [m.name for m in pkgutil.iter_modules(__path__) if not m.name.startswith("_")]
    return sorted(names, key=lambda n: (ORDER.index(n) if n in ORDER else len(ORDER), n))


def build_parser(only: str | None = None) -> argparse.ArgumentParser:
    """The full parser: every module in tankbench.cli that defines register() adds its subcommand. `only`: just that
    subcommand, when it is one (a command imports only its own module: about half a second of CPU less per call,
    which scripts calling tankbench many times, and the test suite's CLI tests, feel)."""
    parser = _Parser(
        prog="tankbench",
        description="Reproducible ZFS storage benchmarks: plan a campaign, run it unattended, report honestly.",
    )
    parser.add_argument(
        "--version", action=_Version, nargs=0, help="print the version and the commit it was built from"
    )
    parser.set_defaults(root_parser=parser)  # `tankbench completion` walks the whole parser
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    names = command_names()
    for name in [only] if only in names else names:
        module = importlib.import_module(f"{__name__}.{name}")
        register = getattr(module, "register", None)
        if register is not None:
            register(sub)
    return parser


def _on_sigterm(signum: int, frame: object) -> None:
    raise KeyboardInterrupt


@contextmanager
def _sigterm_as_interrupt() -> Iterator[None]:
    """SIGTERM (`kill PID`, `systemctl stop`, a CI's timeout) stops a command as Ctrl-C does: the run in flight is
    marked interrupted and its fio ended, a lab the command booted is shut down, exit 130. Python's default ended
    the process at once: a lab it had booted stayed up (3 GB resident) with nobody to stop it. Only in the main
    thread (where signal handlers live); the previous handler comes back after."""
    try:
        old = signal.signal(signal.SIGTERM, _on_sigterm)
    except ValueError:  # not the main thread (a test calling main() from one): leave SIGTERM as it is
        yield
        return
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, old)


def _tolerant_output() -> None:
    """Print what the terminal's encoding cannot show (…, —, ×) as backslash escapes, not a traceback: under
    LC_ALL=C or a Latin-1 locale, help texts and summaries crashed with UnicodeEncodeError. stdout or stderr may
    be None (closed) or a stream without reconfigure (a test's StringIO)."""
    for stream in (sys.stdout, sys.stderr):
        reconfigure = getattr(stream, "reconfigure", None)
        if reconfigure is not None:
            try:
                reconfigure(errors="backslashreplace")
            except (ValueError, OSError):  # a closed or detached stream: leave it as it is
                pass


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point: parse, call, and turn UserError into `Error: …` + hint with exit status 2."""
    argv = list(sys.argv[1:] if argv is None else argv)
    _tolerant_output()
    # the command is the first word (the top-level parser has no option that takes a value); none or an unknown
    # one: the full parser, for its help and its error naming every command
    first = next((a for a in argv if not a.startswith("-")), None)
    parser = build_parser(only=None if first in WHOLE_PARSER else first)
    args = parser.parse_args(argv)
    if not getattr(args, "func", None):
        parser.print_help()
        return 2
    try:
        with _sigterm_as_interrupt():
            return int(args.func(args) or 0)
    except UserError as e:
        print(f"Error: {e.message}", file=sys.stderr)
        if e.hint:
            print(f"Hint: {e.hint}", file=sys.stderr)
        return e.exit_status
    except HostError as e:
        print(f"Error: {e}", file=sys.stderr)
        print(
            "Hint: a command on the host failed (its own words are above); if the host does not answer, check that "
            "it is reachable and has fio and python3.",
            file=sys.stderr,
        )
        return 3
    except KeyboardInterrupt:
        print("Interrupted.", file=sys.stderr)
        return 130
    except BrokenPipeError:
        return 0
    except sqlite3.DatabaseError as e:  # a journal's pages damaged (a bad copy, a failing disk): not a bug of ours
        return _damaged_journal(args, e)
    except OSError as e:  # a full or read-only filesystem under an output: the cause, not a traceback
        # imported here: the build backend imports tankbench.cli (completion, man page) before any dependency is
        # installed, and the journal package needs orjson
        from tankbench.journal.faults import is_fault

        if not is_fault(e):
            raise
        # the file as the user named it, not the temporary one it is written through (compare.html.tmp-31023)
        where = f" {re.sub(r'[.]tmp-[0-9]+$', '', str(e.filename))}" if e.filename else ""
        print(f"Error: cannot write{where}: {e.strerror or e}", file=sys.stderr)
        kept = "; a journal keeps every run that finished" if args.func.__name__ == "cmd_run" else ""
        print(
            "Hint: free space on that filesystem or make it writable (or write elsewhere: --out, --journal, -o), "
            f"then run the same command again{kept}",
            file=sys.stderr,
        )
        return 3


def _damaged_journal(args: argparse.Namespace, e: sqlite3.DatabaseError) -> int:
    """`Error:` for SQLite's refusal to read a journal it opened (its header was fine; a page is not), naming the
    journals the command was given; a fault of the machine (full, read-only, locked) stays a traceback's cause."""
    from tankbench.journal.faults import is_fault

    if is_fault(e):
        raise e
    given = [getattr(args, k, None) for k in ("journal", "a", "b", "source")] + list(getattr(args, "more", None) or [])
    paths = [p for p in given if isinstance(p, str) and p.endswith((".sqlite", ".db", ".zip"))]
    which = paths[0] if len(paths) == 1 else f"one of {', '.join(paths)}" if paths else "the journal"
    print(f"Error: {which}: damaged, SQLite cannot read it ({e})", file=sys.stderr)
    print(
        "Hint: `sqlite3 FILE 'PRAGMA integrity_check'` says where; `sqlite3 FILE .recover | sqlite3 NEW.sqlite` saves "
        "what can be read (then point tankbench at NEW.sqlite); none of its runs was changed",
        file=sys.stderr,
    )
    return 2
