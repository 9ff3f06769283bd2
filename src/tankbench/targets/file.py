"""`kind = "file"`: one laid-out test file in a directory the campaign names."""

from __future__ import annotations

import shlex
from collections.abc import Callable, Mapping
from dataclasses import replace
from typing import Any

from tankbench.fio.layout import KindFacts, layout_request
from tankbench.keys import Keys
from tankbench.model import Target, Test
from tankbench.targets.base import TargetKind, Workspace, check_directory, parse_path_table, rw_and_bs
from tankbench.targets.clients import ClientLoad, parse_clients


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


def lay_out_file(ws: Workspace, test: Test, kind: KindFacts, sync_cmd: list[str] | None = None) -> dict[str, Any]:
    """Have the agent lay out and verify the test file; a failed verification is said, and recorded."""
    t = test.target
    request: dict[str, Any] = layout_request(test, kind)  # every per-job file, in the test's layout
    if sync_cmd:
        request["sync_cmd"] = sync_cmd
    res = ws.host.call_agent(request, timeout=max(600.0, len(request["paths"]) * t.size / (5 << 20)))
    checks = dict(res["checks"])
    if not checks.get("layout.verified"):
        ws.note(f"warning: test file of target {t.name!r} failed verification: {checks}")
    return checks


class FileKind(TargetKind):
    """A file `tankbench-<target>.fiodata` of the target's size in the target's directory."""

    kind = "file"
    test_file = True
    table_keys = ("path", "size", "clients", "client_port")

    @classmethod
    def parse_table(cls, keys: Keys, table: Mapping[str, Any], prefix: str, name: str) -> Target:
        target = parse_path_table(keys, table, prefix, name, cls, size_required=True)
        clients, port = parse_clients(keys, table, prefix)
        return replace(target, clients=clients, client_port=port) if clients else target

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
        if test.target.clients:  # the job runs on the clients (fio/jobs.job_script asks clients.script_lines)
            return []
        if test.is_copy:
            return [f'mkdir -p "$(dirname {shlex.quote(path)})"']
        return layout_script_lines(path, test.target.size)

    def __init__(self, ws: Workspace) -> None:
        super().__init__(ws)
        #: targets with clients: checks, fio servers, layout and runs there (targets/clients.py)
        self.clients = ClientLoad(ws.host, ws.spec, ws.note)

    def probe_paths(self, target: Target) -> tuple[list[str], list[str]]:
        return ([], []) if target.clients else ([target.path], [])

    def check(self, target: Target, probe: Mapping[str, Any]) -> None:
        if target.clients:
            return self.clients.check(target)
        check_directory(
            f"{self.ws.spec.path}: target {target.name!r} path = {target.path!r}", probe, target.path, self.host.name
        )

    def provision(self, test: Test) -> None:
        if test.is_copy:  # the agent creates the directory when it lays out a file; a copy writes its own
            self.host.run(["mkdir", "-p", test.target.path], check=True, timeout=60)

    def lay_out(self, test: Test) -> dict[str, Any]:
        if test.target.clients:
            return self.clients.lay_out(test, lambda h: lay_out_file(replace(self.ws, host=h), test, self))
        return lay_out_file(self.ws, test, self)

    def device_paths(self, test: Test) -> list[str]:
        return [] if test.target.clients else [test.target.path]  # the clients' disks are not the host's

    def run_fio(
        self, test: Test, request: dict[str, Any], on_event: Callable[[dict[str, Any]], None], timeout: float
    ) -> dict[str, Any]:
        if test.target.clients:
            return self.clients.run(test, request)
        return super().run_fio(test, request, on_event, timeout)

    def finish(self) -> None:
        self.clients.stop()
