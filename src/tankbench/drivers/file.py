"""The file kind's driver: the directory checked, the test file laid out and verified by the agent (or on each
client, for a target with clients), the layout taken over from the previous run when it is still good."""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from tankbench.drivers.base import Capture, TargetDriver, Workspace, check_directory, check_room
from tankbench.drivers.clients import ClientLoad
from tankbench.fio.layout import KindFacts, file_layout_request, layout_request
from tankbench.model import Target, Test
from tankbench.targets.file import FileKind

if TYPE_CHECKING:
    from tankbench.agent import FioRunExtras, FioRunRequest


def lay_out_file(ws: Workspace, test: Test, kind: KindFacts, sync_cmd: list[str] | None = None) -> dict[str, Any]:
    """Have the agent lay out and verify the test file; a failed verification is said, and recorded."""
    t = test.target
    request = file_layout_request(test, kind)  # every per-job file, in the test's layout
    if sync_cmd:
        request["sync_cmd"] = sync_cmd
    res = ws.host.call_agent(request, timeout=max(600.0, len(request.get("paths", [])) * t.size / (5 << 20)))
    checks = dict(res["checks"])
    if not checks.get("layout.verified"):
        ws.note(f"warning: test file of target {t.name!r} failed verification: {checks}")
    return checks


class FileDriver(FileKind, TargetDriver):
    """A test file in a directory of the host (or of each client)."""

    def __init__(self, ws: Workspace) -> None:
        super().__init__(ws)
        #: targets with clients: checks, fio servers, layout and runs there (targets/clients.py)
        self.clients = ClientLoad(ws.host, ws.spec, ws.note)

    def probe_paths(self, target: Target) -> tuple[list[str], list[str]]:
        return ([], []) if self.load_from_clients(target) else ([target.path], [])

    def check(self, target: Target, probe: Mapping[str, Any]) -> None:
        if self.load_from_clients(target):
            return self.clients.check(target)
        where = f"{self.ws.spec.path}: target {target.name!r} path = {target.path!r}"
        check_directory(where, probe, target.path, self.host.name)
        check_room(where, probe["paths"][target.path], target.size, self.host.name)

    def provision(self, test: Test) -> None:
        if test.is_copy:  # the agent creates the directory when it lays out a file; a copy writes its own
            self.host.run(["mkdir", "-p", test.target.path], check=True, timeout=60)

    def lay_out(self, test: Test) -> dict[str, Any]:
        if self.load_from_clients(test.target):
            return self.clients.lay_out(test, lambda h: lay_out_file(replace(self.ws, host=h), test, self))
        return lay_out_file(self.ws, test, self)

    def device_paths(self, test: Test) -> list[str]:
        return (
            [] if self.load_from_clients(test.target) else [test.target.path]
        )  # the clients' disks are not the host's

    def run_fio(
        self, test: Test, request: FioRunRequest, on_event: Callable[[dict[str, Any]], None], timeout: float
    ) -> dict[str, Any]:
        if self.load_from_clients(test.target):
            return self.clients.run(test, request)
        return super().run_fio(test, request, on_event, timeout)

    def finish(self) -> None:
        self.clients.stop()

    # The layout is verified where the previous run left it: its fio_run request measures the test files after
    # its drain (`layout_after`, the same checks a prepare call makes), and when the next run is the very next
    # one on the same files and they were verified, that run needs no prepare round trip of its own.
    _after: tuple[int, str, dict[str, Any]] | None = None

    def capture(self, test: Test) -> FioRunExtras:
        # not with clients: their files are on the client hosts, the run's host agent only observes
        return (
            {}
            if test.is_copy or self.load_from_clients(test.target)
            else {"layout_after": file_layout_request(test, self)}
        )

    def after_run(self, test: Test, res: Mapping[str, Any], metrics: Mapping[str, float]) -> Capture:
        after = res.get("layout_after")
        if isinstance(after, dict) and not test.is_copy and not self.load_from_clients(test.target):
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
            and not self.load_from_clients(test.target)
            and after[0] == self.ws.run_seq
            and after[1] == _layout_key(test, self)
            and after[2].get("layout.verified") is True
        ):
            return dict(after[2], **{"layout.checked": "after the previous run"})
        return super().prepare(test)


def _layout_key(test: Test, kind: KindFacts) -> str:
    return json.dumps(layout_request(test, kind), sort_keys=True)
