"""`tankbench completion bash|zsh`, and the man page: both generated from the argparse parser, so they name every
subcommand and option the code has. The build backend (scripts/backend) writes them into the wheel's share/
(`python -m tankbench.cli.completion DIR`); a checkout prints them with this command."""

from __future__ import annotations

import argparse
import importlib.abc
import importlib.machinery
import os
import re
import sys
import time
import tomllib
import types
from collections.abc import Sequence
from pathlib import Path

SHELLS = ("bash", "zsh")


def register(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    p = sub.add_parser(
        "completion",
        help="print a shell completion script (bash or zsh)",
        description="Print the completion script for a shell, generated from tankbench's own parser. "
        "bash: `source <(tankbench completion bash)`, or save it as "
        "~/.local/share/bash-completion/completions/tankbench. zsh: save it as _tankbench in a directory on $fpath.",
    )
    p.add_argument("shell", choices=SHELLS, help="the shell")
    p.set_defaults(func=_run)


def _run(args: argparse.Namespace) -> int:
    from tankbench.cli import build_parser

    parser = build_parser()
    sys.stdout.write(bash(parser) if args.shell == "bash" else zsh(parser))
    return 0


def _subparsers(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    for a in parser._actions:
        if isinstance(a, argparse._SubParsersAction):
            return dict(a.choices)
    return {}


def _help_of(parser: argparse.ArgumentParser, name: str) -> str:
    for a in parser._actions:
        if isinstance(a, argparse._SubParsersAction):
            for c in a._choices_actions:
                if c.dest == name:
                    return c.help or ""
    return ""


def _options(parser: argparse.ArgumentParser) -> list[str]:
    return sorted(o for a in parser._actions for o in a.option_strings)


def _tree(parser: argparse.ArgumentParser, path: tuple[str, ...] = ()) -> dict[tuple[str, ...], tuple[str, str]]:
    """Each command path -> (the words that may follow it: subcommands and choices; its options)."""
    subs = _subparsers(parser)
    choices = [str(c) for a in parser._actions if not a.option_strings and a.choices and not subs for c in a.choices]
    out = {path: (" ".join(sorted(subs) + choices), " ".join(_options(parser)))}
    for name, p in subs.items():
        out.update(_tree(p, (*path, name)))
    return out


def bash(parser: argparse.ArgumentParser) -> str:
    """A bash completion function: subcommands, then each one's options and choices; file names elsewhere."""
    tree = _tree(parser)
    known = "|".join(f'"{" ".join(p)}"' for p in sorted(tree) if p)
    cases = "\n".join(f'    "{" ".join(p)}") subs="{w}" opts="{o}" ;;' for p, (w, o) in sorted(tree.items()))
    return f"""# bash completion for tankbench (generated from its argparse parser)
_tankbench() {{
  local cur=${{COMP_WORDS[COMP_CWORD]}} path="" w i subs="" opts=""
  for ((i = 1; i < COMP_CWORD; i++)); do
    w=${{COMP_WORDS[i]}}
    case "${{path:+$path }}$w" in
      {known}) path="${{path:+$path }}$w" ;;
    esac
  done
  case "$path" in
{cases}
  esac
  if [[ $cur == -* ]]; then
    COMPREPLY=($(compgen -W "$opts" -- "$cur"))
  elif [[ -n $subs ]]; then
    COMPREPLY=($(compgen -W "$subs" -- "$cur"))
  else
    COMPREPLY=($(compgen -f -- "$cur"))
  fi
  return 0
}}
complete -o filenames -F _tankbench tankbench
"""


def zsh(parser: argparse.ArgumentParser) -> str:
    """A zsh completion (bash's, through bashcompinit: one generated logic for both shells)."""
    return "#compdef tankbench\nautoload -U +X bashcompinit && bashcompinit\n" + bash(parser)


def _roff(text: str) -> str:
    text = text.replace("\\", "\\e").replace("-", "\\-")
    return "\n".join(("\\&" + line) if line.startswith((".", "'")) else line for line in text.splitlines())


def _usage(p: argparse.ArgumentParser) -> str:
    return re.sub(r"\s+", " ", p.format_usage().removeprefix("usage: ")).strip()


def man_page(parser: argparse.ArgumentParser, version: str) -> str:
    """tankbench(1) in roff: the synopsis, then every subcommand with its options and their help."""
    date = time.strftime("%Y-%m-%d", time.gmtime(int(os.environ.get("SOURCE_DATE_EPOCH") or time.time())))
    out = [
        f'.TH TANKBENCH 1 "{date}" "tankbench {version}" "User Commands"',
        ".SH NAME",
        "tankbench \\- " + _roff(parser.description or ""),
        ".SH SYNOPSIS",
        _roff(_usage(parser)),
        ".SH COMMANDS",
    ]
    for name, p in _subparsers(parser).items():
        out += _command(parser, name, p, name)
    out += [
        ".SH EXIT STATUS",
        "0 success; 1 some runs failed (or doctor found something); 2 bad input; 3 the host failed; 130 interrupted.",
        ".SH ENVIRONMENT",
        "NO_COLOR turns colour off; FORCE_COLOR turns it on off a terminal; TERM=dumb turns it off.",
        ".SH SEE ALSO",
        "fio(1), zfs(8), zpool(8); the README and docs/ of tankbench's source.",
    ]
    return "\n".join(out) + "\n"


def _command(parent: argparse.ArgumentParser, name: str, p: argparse.ArgumentParser, path: str) -> list[str]:
    out = [".SS " + _roff(path), _roff(_usage(p)), ".PP", _roff(p.description or _help_of(parent, name))]
    for a in p._actions:
        if isinstance(a, argparse._SubParsersAction | argparse._HelpAction):
            continue
        label = ", ".join(a.option_strings) or (a.metavar if isinstance(a.metavar, str) else a.dest)
        if a.option_strings and a.nargs != 0:
            label += " " + (a.metavar if isinstance(a.metavar, str) else a.dest.upper())
        out += [
            ".TP",
            "\\fB" + _roff(str(label)) + "\\fR",
            _roff((a.help or "").replace("%(default)s", str(a.default))),
        ]
    for sub_name, sub in _subparsers(p).items():
        out += _command(p, sub_name, sub, f"{path} {sub_name}")
    return out


class _Standin(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Stands in for the run-time dependencies that are absent (the build backend's isolated environment has only
    setuptools): the parser needs argparse alone, but its modules import orjson & co. at the top."""

    def __init__(self, names: set[str]) -> None:
        self.names = names

    def find_spec(self, name: str, path: Sequence[str] | None, target: types.ModuleType | None = None):  # type: ignore[no-untyped-def]
        if name.split(".")[0] in self.names:
            return importlib.machinery.ModuleSpec(name, self, is_package=True)
        return None

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> types.ModuleType:
        mod = types.ModuleType(spec.name)
        mod.__path__ = []
        mod.__getattr__ = lambda attr: type(attr, (), {})  # type: ignore[method-assign]
        return mod

    def exec_module(self, module: types.ModuleType) -> None:
        return None


def _absent_dependencies(pyproject: Path) -> set[str]:
    import importlib.util

    deps = tomllib.loads(pyproject.read_text())["project"]["dependencies"]
    names = {re.split(r"[<>=!~\[ ;]", d, maxsplit=1)[0].lower().replace("-", "_") for d in deps}
    return {n for n in names if importlib.util.find_spec(n) is None}


def write_share(out: Path, pyproject: Path) -> list[Path]:
    """Write share/man/man1/tankbench.1 and the completions under `out`; the paths written."""
    absent = _absent_dependencies(pyproject) if pyproject.exists() else set()
    if absent:
        sys.meta_path.append(_Standin(absent))
    from tankbench import __version__
    from tankbench.cli import build_parser

    parser = build_parser()
    files = {
        out / "man" / "man1" / "tankbench.1": man_page(parser, __version__),
        out / "bash-completion" / "completions" / "tankbench": bash(parser),
        out / "zsh" / "site-functions" / "_tankbench": zsh(parser),
    }
    for path, text in files.items():
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    return list(files)


if __name__ == "__main__":
    write_share(Path(sys.argv[1]), Path.cwd() / "pyproject.toml")
