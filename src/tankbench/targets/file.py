"""`kind = "file"`: one laid-out test file in a directory the campaign names."""

from __future__ import annotations

import json
import shlex
from collections.abc import Callable, Mapping
from dataclasses import replace
from typing import Any

from tankbench.fio.layout import KindFacts, layout_request
from tankbench.keys import Keys
from tankbench.model import Target, Test
from tankbench.targets.base import (
    Capture,
    TargetKind,
    Workspace,
    check_directory,
    check_room,
    parse_path_table,
    rw_and_bs,
)
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
        where = f"{self.ws.spec.path}: target {target.name!r} path = {target.path!r}"
        check_directory(where, probe, target.path, self.host.name)
        check_room(where, probe["paths"][target.path], target.size, self.host.name)

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

    # The layout is verified where the previous run left it: its fio_run request measures the test files after
    # its drain (`layout_after`, the same checks a prepare call makes), and when the next run is the very next
    # one on the same files and they were verified, that run needs no prepare round trip of its own.
    _after: tuple[int, str, dict[str, Any]] | None = None

    def capture(self, test: Test) -> dict[str, Any]:
        # not with clients: their files are on the client hosts, the run's host agent only observes
        return {} if test.is_copy or test.target.clients else {"layout_after": layout_request(test, self)}

    def after_run(self, test: Test, res: Mapping[str, Any], metrics: Mapping[str, float]) -> Capture:
        after = res.get("layout_after")
        if isinstance(after, dict) and not test.is_copy and not test.target.clients:
            self._after = (self.ws.run_seq, _layout_key(test, self), after)
        return {}, {}, {}

    def recover(self, rebooted: bool) -> dict[str, Any]:
        self._after = None  # the host came back: what its files were before says nothing now
        return super().recover(rebooted)

    def prepare(self, test: Test) -> dict[str, Any]:
        after, self._after = self._after, None  # good for one prepare at most
        if (
            after is not None
            and not test.is_copy
            and not test.target.clients
            and after[0] == self.ws.run_seq
            and after[1] == _layout_key(test, self)
            and after[2].get("layout.verified") is True
        ):
            return dict(after[2], **{"layout.checked": "after the previous run"})
        return super().prepare(test)


def _layout_key(test: Test, kind: KindFacts) -> str:
    return json.dumps(layout_request(test, kind), sort_keys=True)
