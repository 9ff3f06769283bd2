"""Copy tests (seed 000's non-synthetic ones): cp, rsync or dd of a random-filled source onto the target."""

from __future__ import annotations

import shlex

from tankbench.model import Test
from tankbench.units import parse_size

#: where an exported script keeps its random-filled source: a directory only its user can write (a shared
#: /var/tmp path could be a planted symlink that root's `>` writes through)
SCRIPT_SOURCE_DIR = '"$HOME/.cache/tankbench/work"'
SCRIPT_SOURCE = '"$HOME/.cache/tankbench/work/copy-source.bin"'


def copy_argv(workload: str, source: str, dest: str) -> list[str]:
    """The copy command of a copy test: seed 000 compared fio with what cp, rsync and dd really do."""
    if workload == "cp":
        return ["cp", "--", source, dest]
    if workload == "rsync":
        return ["rsync", "--whole-file", source, dest]
    return ["dd", f"if={source}", f"of={dest}", "bs=1M", "status=none"]


def copy_script_lines(test: Test, dest: str) -> list[str]:
    """Shell lines of an exported copy test: make the source once, time the command and the data's durability."""
    size = parse_size(str(test.params["copy_size"]))
    src = SCRIPT_SOURCE
    return [
        f"umask 077; mkdir -p {SCRIPT_SOURCE_DIR}",
        f"[ -s {src} ] || head -c {size} /dev/urandom > {src}",
        "t0=$(date +%s.%N)",
        shlex.join(copy_argv(str(test.params["workload"]), src, dest)),
        "t1=$(date +%s.%N)",
        "sync",
        "t2=$(date +%s.%N)",
        'awk -v a="$t0" -v b="$t1" -v c="$t2" \'BEGIN { printf "command %.2f s, durable after %.2f s\\n", b - a, c - a }\'',
    ]
