"""`tankbench completion bash|zsh`, and the man page: both generated from the argparse parser, so they name every
subcommand and option the code has. The build backend (scripts/backend) writes them into the wheel's share/
(`python -m tankbench.buildfiles DIR`); a checkout prints them with this command."""

from __future__ import annotations

import argparse
import os
import re
import sys
import time

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
    parser = args.root_parser  # set by tankbench.cli.build_parser (importing it here would be a cycle)
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
