"""A campaign over several hosts, as a layer above the single-host runner: the same session as a single host's
(runner/session.py: crashes found, module parameters, the `end` hook) per host, each in its own thread with its
own view of the one journal (HostJournal: it sees only its host's runs); the journal is readied once, as for a
single host (the report's index, stale runs closed, the plan recorded).

- `split`: the hosts must be alike (check_alike); whole test cases are handed out one at a time from a shared
  queue (CaseQueue), so every leaderboard ranks runs of one machine; a host that fails stops alone: test cases
  it had not started go to the other hosts, one it had started waits for it (resume finishes it there).
- `each`: every host runs the whole matrix; the report compares them (write_host_comparison).
"""

from __future__ import annotations

import os
import sys
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, TextIO

from tankbench.analysis.cases import case_name
from tankbench.analysis.settings import parse_settings
from tankbench.campaign import Spec, expand
from tankbench.campaign.hosts import FleetHost
from tankbench.errors import HostError, UserError
from tankbench.hosts.base import Host
from tankbench.journal import Journal
from tankbench.journal.hostview import HostJournal
from tankbench.journal.lock import JournalLock
from tankbench.model import Test
from tankbench.progress import Progress
from tankbench.runner import (
    Outcome,
    Preflight,
    Session,
    Stale,
    default_journal_path,
    end_stale,
    leave_host,
    preflight,
    ready_journal,
)

#: fingerprint keys that must agree for `split`, and why a difference is refused
ALIKE: dict[str, str] = {
    "kernel": "the kernel's I/O path and page cache decide buffered results",
    "zfs_version": "OpenZFS versions differ in ARC, ZIL and direct I/O behaviour",
    "zfs_tunables": "module parameters (ARC size, txg timeout, dirty data) change every ZFS figure",
    "cpu_model": "compression, checksums and small-block IOPS are CPU bound",
    "cpu_count": "parallel jobs and ZFS's taskqs scale with cores",
    "device_models": "the disks are what is measured",
    "fio_version": "fio's options and its JSON change between versions",
    "accelerator": "an emulated host (qemu TCG) is not comparable with a real one",
}
#: memory may differ this much (firmware and kernel reservations differ between identical machines)
MEM_TOLERANCE = 0.05


class _Prefixed:
    """A stream that puts `[host] ` before every line (progress of several hosts interleaves)."""

    def __init__(self, stream: TextIO, prefix: str, lock: threading.Lock) -> None:
        self.stream, self.prefix, self.lock = stream, prefix, lock
        self._buf = ""

    def isatty(self) -> bool:
        return False  # no rewriting line: several hosts write at once

    def write(self, text: str) -> int:
        with self.lock:
            self._buf += text
            *lines, self._buf = self._buf.split("\n")
            for line in lines:
                self.stream.write(f"{self.prefix}{line}\n")
        return len(text)

    def flush(self) -> None:
        self.stream.flush()

    def fileno(self) -> int:
        return self.stream.fileno()


class _HostProgress(Progress):
    """A host's progress: test numbers count against the whole campaign, not the test case it runs now."""

    def __init__(self, n_tests: int, **kw: Any) -> None:
        super().__init__(0, **kw)
        self.n_tests = n_tests

    def start(self, index: int, n_tests: int, number: int, name: str, label: str, expected: float) -> None:
        super().start(index, self.n_tests, number, name, label, expected)


def differences(a: dict[str, Any], b: dict[str, Any]) -> list[str]:
    """Why two hosts' fingerprints are not alike for `split` (empty: alike). Pure."""
    out = [f"{k}: {a.get(k)!r} vs {b.get(k)!r} ({why})" for k, why in ALIKE.items() if str(a.get(k)) != str(b.get(k))]
    ma, mb = float(a.get("mem_bytes") or 0), float(b.get("mem_bytes") or 0)
    if max(ma, mb) and abs(ma - mb) > MEM_TOLERANCE * max(ma, mb):
        out.append(
            f"mem_bytes: {ma / 2**30:.1f} GiB vs {mb / 2**30:.1f} GiB (more than {MEM_TOLERANCE:.0%} apart: "
            "the ARC and page cache scale with memory)"
        )
    return out


def check_alike(names: Sequence[str], fingerprints: Sequence[dict[str, Any]]) -> None:
    """UserError naming every difference between the first host and each other one (split needs alike hosts)."""
    problems = []
    for name, fp in zip(names[1:], fingerprints[1:]):
        problems += [f"{name} vs {names[0]}: {d}" for d in differences(fingerprints[0], fp)]
    if problems:
        raise UserError(
            "hosts_mode = split needs alike hosts, and these differ: " + "; ".join(problems),
            'use hosts_mode = "each" to compare unlike hosts side by side, or list only alike hosts',
        )


def case_groups(spec: Spec, tests: Sequence[Test]) -> list[list[Test]]:
    """Tests grouped by the test case their leaderboard ranks (the report's case keys), in plan order."""
    keys = parse_settings(spec.text, spec.path).case_keys
    groups: dict[str, list[Test]] = {}
    for t in tests:  # a leaderboard spans targets: the case alone decides
        groups.setdefault(case_name(t.params, keys), []).append(t)
    return list(groups.values())


class CaseQueue:
    """Test cases waiting for a host. A case with runs on a host stays with that host (one machine per
    leaderboard); the others go to whichever host asks first. A host that asks when nothing is left for it
    waits while other hosts still run cases (one of them may fail and give its case back)."""

    def __init__(self, groups: list[list[Test]], owner: dict[int, str]) -> None:
        self.groups = groups
        self.owner = dict(owner)  # group index -> host that has (or had) runs of it
        self.pending = list(range(len(groups)))
        self.in_flight: dict[int, str] = {}
        self.failed: set[str] = set()
        self.cond = threading.Condition()

    def _pick(self, host: str) -> int | None:
        mine = [i for i in self.pending if self.owner.get(i) == host]
        free = [i for i in self.pending if i not in self.owner]
        return (mine or free)[0] if mine or free else None

    def take(self, host: str) -> tuple[int, list[Test]] | None:
        """The next case for `host`, or None when no case will come its way any more."""
        with self.cond:
            while True:
                i = self._pick(host)
                if i is not None:
                    self.pending.remove(i)
                    self.owner[i] = host
                    self.in_flight[i] = host
                    return i, self.groups[i]
                if not self.in_flight:
                    return None
                self.cond.wait()

    def done(self, i: int) -> None:
        with self.cond:
            self.in_flight.pop(i, None)
            self.cond.notify_all()

    def give_back(self, i: int, host: str, started: bool) -> None:
        """A case its host could not finish: another host takes it unless it had measured runs there."""
        with self.cond:
            self.failed.add(host)
            self.in_flight.pop(i, None)
            if not started:
                del self.owner[i]
            self.pending.append(i)
            self.cond.notify_all()

    def waiting(self) -> list[tuple[str, list[Test]]]:
        """Cases left: (the host they wait for, their tests)."""
        return [(self.owner.get(i, ""), self.groups[i]) for i in self.pending]


@dataclass
class Member:
    """One host of the fleet while the campaign runs."""

    spec: FleetHost
    host: Host
    pre: Preflight | None = None
    extra: dict[str, Any] = field(default_factory=dict)
    outcome: Outcome = field(default_factory=Outcome)
    error: str = ""
    cases: int = 0


@dataclass
class FleetOutcome(Outcome):
    """The campaign's outcome over all hosts, with each host's own."""

    mode: str = ""
    hosts: dict[str, Outcome] = field(default_factory=dict)
    host_errors: dict[str, str] = field(default_factory=dict)
    waiting: list[str] = field(default_factory=list)  # "case (tests) waits for host"

    @property
    def exit_status(self) -> int:
        if self.host_errors:
            return 3
        return 1 if (self.runs_failed or self.runs_timeout or self.tests_skipped or self.waiting) else 0


def open_fleet_host(fh: FleetHost, note: Callable[[str], None]) -> Host:
    """The Host for one entry; an ssh host is logged into once here (first contact says which key to accept)."""
    if fh.kind == "local":
        from tankbench.hosts.local import LocalHost

        return LocalHost()
    if fh.kind == "lab":
        from tankbench.lab.vm import lab_host

        return lab_host(fh.lab_name, progress=note)
    from tankbench.hosts.ssh import SshHost

    host = SshHost(
        fh.address,
        user=fh.user,
        port=fh.port,
        identity=os.path.expanduser(fh.identity) if fh.identity else None,
        known_hosts=os.path.expanduser(fh.known_hosts) if fh.known_hosts else None,
    )
    host.check_connection()
    return host


def _open(spec: Spec, i: int, fh: FleetHost, note: Callable[[str], None]) -> Host:
    """open_fleet_host, its errors naming the campaign file and the entry."""
    try:
        return open_fleet_host(fh, note)
    except UserError as e:
        shown = fh.name.split(":", 1)[1] if fh.kind == "ssh" else fh.name
        raise UserError(f"{spec.path}: campaign.hosts[{i}] = {shown!r}: {e.message}", e.hint) from e


def _in_threads(members: Sequence[Member], fn: Callable[[Member], None]) -> None:
    """fn(member) for every member at once; the first UserError (bad input) is raised after all ended."""
    errors: list[BaseException] = []

    def call(m: Member) -> None:
        try:
            fn(m)
        except BaseException as e:  # re-raised below, in the caller's thread
            errors.append(e)

    # daemon: Ctrl-C ends the process (each agent ends its fio when its stdin closes)
    threads = [threading.Thread(target=call, args=(m,), name=m.host.name, daemon=True) for m in members]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    if errors:
        raise errors[0]


def run_fleet(
    spec: Spec, journal_path: str | None = None, *, quiet: bool = False, keep_lab: bool = False
) -> FleetOutcome:
    """`run` for a campaign with `hosts`: check every host before anything is written, then run in parallel."""
    assert spec.fleet is not None
    t0 = time.monotonic()
    tests = expand(spec)
    lock = threading.Lock()
    main = Progress(0, stream=_Prefixed(sys.stderr, "", lock), quiet=quiet)  # type: ignore[arg-type]
    journal_path = journal_path or default_journal_path(spec)
    members: list[Member] = []
    try:
        # ssh and local first: an unreachable host or an unknown key is reported before a lab boots
        for i, fh in sorted(enumerate(spec.fleet.hosts), key=lambda p: p[1].kind == "lab"):
            members.append(Member(fh, _open(spec, i, fh, main.note)))

        def probe(m: Member) -> None:
            m.pre = preflight(m.host, spec, tests=tests)
            m.extra = dict(m.host.fingerprint_extra())

        _in_threads(members, probe)
        if spec.fleet.mode == "split":
            fps = [dict(m.pre.fingerprint) if m.pre else {} for m in members]
            for m, fp in zip(members, fps):
                fp["accelerator"] = m.host.accelerator
            check_alike([m.host.name for m in members], fps)
        with JournalLock(journal_path):
            out = _run_members(spec, tests, members, journal_path, quiet, lock, main, t0)
    finally:
        for m in members:
            leave_host(m.host, keep_lab, main.note)
    out.journal = journal_path
    out.seconds = time.monotonic() - t0
    return out


def _prepare_journal(
    spec: Spec, tests: list[Test], members: list[Member], path: str, note: Callable[[str], None]
) -> list[Stale]:
    """The journal readied as for a single host (the report's index, runs a dead tankbench left `running` closed
    per host by boot id, the plan recorded), their fio ended, the fleet's hosts recorded."""
    assert spec.fleet is not None
    with Journal(path) as j:
        boot_ids = {m.host.name: m.pre.boot_id for m in members if m.pre and m.pre.boot_id}
        crashed = ready_journal(j, spec, tests, boot_ids)
        for m in members:
            end_stale(m.host, crashed, spec)
        j.set_hosts(spec.fleet.mode, [(m.host.name, m.spec.kind, m.spec.address) for m in members])
    if crashed:
        note(f"resuming: {len(crashed)} run(s) were in progress when the last run died; they are retried on their host")
    return crashed


def _owners(path: str, groups: list[list[Test]]) -> dict[int, str]:
    """Which host already has runs of each test case (resume keeps a case on its host)."""
    with Journal.open_readonly(path) as j:
        by_test: dict[str, str] = {}
        for r in j.iter_runs():
            by_test.setdefault(r.test_id, r.host)
    return {i: h for i, g in enumerate(groups) for t in g if (h := by_test.get(t.id, ""))}


def _run_members(
    spec: Spec,
    tests: list[Test],
    members: list[Member],
    path: str,
    quiet: bool,
    lock: threading.Lock,
    main: Progress,
    t0: float,
) -> FleetOutcome:
    assert spec.fleet is not None
    crashed = _prepare_journal(spec, tests, members, path, main.note)
    groups = case_groups(spec, tests) if spec.fleet.mode == "split" else [tests]
    queue = CaseQueue(groups, _owners(path, groups)) if spec.fleet.mode == "split" else None
    if queue is not None:
        main.note(f"split: {len(groups)} test case(s) over {len(members)} host(s)")

    def work(m: Member) -> None:
        assert m.pre is not None
        stream = _Prefixed(sys.stderr, f"[{m.host.name}] ", lock)
        progress = _HostProgress(len(tests), stream=stream, quiet=quiet)
        journal = HostJournal.for_host(path, m.host.name)
        session = Session(spec, m.host, journal, progress, m.pre, m.extra, wait_for_host=False, started=t0)
        m.outcome = session.outcome
        try:
            try:
                session.begin(crashed, tests)
                _run_cases(session, m, journal, queue, tests)
            except BaseException as e:
                session.end(e)  # the `end` hook says what stopped this host
                raise
            session.end(None)
        except (HostError, UserError) as e:
            m.error = str(e)
            progress.note(f"host failed, it takes no more test cases: {e}")
        finally:
            journal.close()

    _in_threads(members, work)
    return _combine(spec, tests, members, queue, crashed)


def _run_cases(session: Session, m: Member, journal: Journal, queue: CaseQueue | None, tests: list[Test]) -> None:
    """The host's session runs the whole matrix (`each`), or the test cases it takes from the queue one by one
    (`split`), each by a runner of its own."""
    if queue is None:
        session.run(tests)
        return
    while (item := queue.take(m.host.name)) is not None:
        i, group = item
        try:
            session.run(group)
            m.cases += 1
            queue.done(i)
        except BaseException:  # whatever stopped this host, the case goes back (others may wait on it)
            started = any(r.status == "done" for t in group for r in journal.runs(t.id, with_samples=False))
            queue.give_back(i, m.host.name, started)
            raise


def _combine(
    spec: Spec, tests: list[Test], members: list[Member], queue: CaseQueue | None, crashed: list[Stale]
) -> FleetOutcome:
    assert spec.fleet is not None
    out = FleetOutcome(mode=spec.fleet.mode)
    out.tests = len(tests)
    out.runs_crashed_found = len(crashed)
    for m in members:
        o = m.outcome
        out.hosts[m.host.name] = o
        out.runs_done += o.runs_done
        out.runs_failed += o.runs_failed
        out.runs_timeout += o.runs_timeout
        out.runs_skipped_existing += o.runs_skipped_existing
        out.tests_skipped += o.tests_skipped
        if m.error:
            out.host_errors[m.host.name] = m.error
    if queue is not None:
        for host, group in queue.waiting():
            who = f"host {host} (it failed; resume runs it there)" if host else "a host (all failed)"
            out.waiting.append(f"{len(group)} test(s) of case {group[0].test_case} wait for {who}")
    return out


def fleet_summary(o: FleetOutcome) -> list[str]:
    """One line per host, then the cases still waiting."""
    lines = []
    for name, h in o.hosts.items():
        err = o.host_errors.get(name)
        state = f"FAILED: {err}" if err else "ok"
        lines.append(
            f"  {name}: {h.runs_done} run(s) done, {h.runs_failed} failed, {h.runs_timeout} timed out; {state}"
        )
    lines += [f"  waiting: {w}" for w in o.waiting]
    return lines
