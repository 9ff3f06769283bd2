"""`kind = "file"`: one laid-out test file in a directory the campaign names."""

from __future__ import annotations

import shlex
from collections.abc import Mapping
from typing import Any

from tankbench.keys import Keys
from tankbench.model import Target, Test
from tankbench.targets.base import KindTraits, TargetKind, parse_path_table, rw_and_bs
from tankbench.targets.clients import ClientOptions, client_options, parse_clients


def layout_script_lines(path: str, size: int) -> list[str]:
    """Shell lines that lay out a test file with incompressible data unless it already is (exported scripts)."""
    return [
        "# Lay out the test file with incompressible data first, so reads hit real blocks (not a sparse file).",
        f"f={shlex.quote(path)}",
        'mkdir -p "$(dirname "$f")"',
        f'if [ ! -f "$f" ] || [ "$(stat -c %s "$f")" -ne {size} ] || [ $(( $(stat -c %b "$f") * 512 )) -lt {size * 98 // 100} ]; then',
        f'  head -c {size} /dev/urandom > "$f" && sync "$f"',
        "fi",
    ]


class FileKind(TargetKind):
    """A file `tankbench-<target>.fiodata` of the target's size in the target's directory."""

    kind = "file"
    traits = KindTraits(test_file=True)
    options = ClientOptions
    table_keys = ("path", "size", "clients", "client_port")

    @classmethod
    def parse_table(cls, keys: Keys, table: Mapping[str, Any], prefix: str, name: str) -> Target:
        path, size, _ = parse_path_table(keys, table, prefix, name, cls, size_required=True)
        clients, port = parse_clients(keys, table, prefix)
        return Target(name=name, kind=cls.kind, path=path, size=size, options=ClientOptions(clients, port))

    @classmethod
    def load_from_clients(cls, target: Target) -> bool:
        return bool(client_options(target).clients)

    @classmethod
    def fio_filename(cls, test: Test) -> str:
        return f"{test.target.path}/tankbench-{test.target.name}.fiodata"

    @classmethod
    def name_stem(cls, target: Target, params: Mapping[str, Any], varying: set[str], several: bool) -> list[str]:
        rw, bs = rw_and_bs(params)
        return [f"file-{target.name}-{rw}-{bs}"]

    @classmethod
    def script_lines(cls, test: Test, campaign_id: str) -> list[str]:
        path = cls.fio_filename(test)
        if cls.load_from_clients(
            test.target
        ):  # the job runs on the clients (fio/jobs.job_script asks clients.script_lines)
            return []
        if test.is_copy:
            return [f'mkdir -p "$(dirname {shlex.quote(path)})"']
        return layout_script_lines(path, test.target.size)
