"""The Host interface: run a command, start the agent, read and write files — the same for every host."""

from __future__ import annotations

import contextlib
import functools
import hashlib
import json
import shlex
import subprocess
import threading
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from importlib import resources
from typing import TYPE_CHECKING, Any, overload

from tankbench.errors import HostError

if TYPE_CHECKING:  # the agent's protocol (agent.py ships as one source: its types are for checking only)
    from tankbench.agent import (
        AgentRequest,
        CooldownRequest,
        DirsRequest,
        DirsResult,
        EndPidsRequest,
        EndPidsResult,
        FioRunRequest,
        HoldersRequest,
        HoldersResult,
        KeyRequest,
        KeyResult,
        LayoutResult,
        NoiseRequest,
        PrepareFileRequest,
        PrepareRawRequest,
        ProbeRequest,
        ProbeResult,
    )

#: what an agent call hands each event before the result (e.g. fio's pid as it starts)
OnEvent = Callable[[dict[str, Any]], None]


@dataclass(frozen=True)
class Result:
    """A finished command: argv, exit status and its decoded output."""

    argv: tuple[str, ...]
    returncode: int
    stdout: str
    stderr: str

    def check(self) -> Result:
        """Raise HostError unless the command exited 0."""
        if self.returncode != 0:
            cmd = " ".join(shlex.quote(a) for a in self.argv)
            raise HostError(f"`{cmd}` exited {self.returncode}: {self.stderr.strip()[-500:]}")
        return self


@functools.cache
def agent_source() -> bytes:
    """The agent program (stdlib only) that each host runs next to fio."""
    return resources.files("tankbench").joinpath("agent.py").read_bytes()


def agent_sha256() -> str:
    """The full sha256 of the agent source: the bootstrap runs the source only if it matches."""
    return hashlib.sha256(agent_source()).hexdigest()


def agent_digest() -> str:
    """A short form of agent_sha256(), for labels."""
    return agent_sha256()[:16]


#: Runs on the host as `python3 -I -c BOOTSTRAP <length> <sha256>`. The agent is never a file on the host (a
#: file in a shared directory is a file another user can plant or swap before root runs it): its source
#: comes first on stdin, read from the raw fd so that the request line and the EOF the agent watches for
#: (tankbench went away: end fio) stay unread for it. -I keeps the current directory and PYTHON* variables
#: out of the import path, so no planted json.py is imported either.
AGENT_BOOTSTRAP = """import hashlib,os,sys
n=int(sys.argv[1]);b=b''
while len(b)<n:
 c=os.read(0,n-len(b))
 if not c:break
 b+=c
if hashlib.sha256(b).hexdigest()!=sys.argv[2]:
 sys.stderr.write('tankbench: the agent source on stdin does not match its sha256; not run\\n');sys.exit(3)
sys.argv=['tankbench-agent'];exec(compile(b,'tankbench-agent','exec'),{'__name__':'__main__'})
"""


def bootstrap_argv(python: str, source: bytes) -> list[str]:
    """The host-side argv that runs a stdlib program fed on stdin, only if it matches its sha256 (see
    AGENT_BOOTSTRAP): nothing tankbench runs on a host is read from a file someone could have planted."""
    return [python, "-I", "-c", AGENT_BOOTSTRAP, str(len(source)), hashlib.sha256(source).hexdigest()]


def agent_argv(python: str) -> list[str]:
    """The host-side argv that starts the agent from stdin (see AGENT_BOOTSTRAP)."""
    return bootstrap_argv(python, agent_source())


class AgentSession:
    """A running agent: its source and one JSON request in, JSON event lines out; closing stdin tells it to
    stop."""

    def __init__(self, proc: subprocess.Popen[bytes], request: AgentRequest) -> None:
        self.proc = proc
        self._stderr: list[bytes] = []
        assert proc.stdin is not None and proc.stdout is not None and proc.stderr is not None
        self._t = threading.Thread(target=self._drain_stderr, daemon=True)
        self._t.start()
        try:
            proc.stdin.write(agent_source() + json.dumps(request).encode() + b"\n")
            proc.stdin.flush()
        except BrokenPipeError:  # it exited at once (no python3 on the host?): events() ends, stderr says why
            pass

    def _drain_stderr(self) -> None:
        assert self.proc.stderr is not None
        for line in self.proc.stderr:
            self._stderr.append(line)
            del self._stderr[:-200]

    def events(self) -> Iterator[dict[str, Any]]:
        """Yield each event the agent prints, until it exits."""
        assert self.proc.stdout is not None
        for raw in self.proc.stdout:
            line = raw.decode(errors="replace").strip()
            if not line.startswith("{"):
                continue
            try:
                yield json.loads(line)
            except json.JSONDecodeError:
                continue

    def send(self, message: Mapping[str, object]) -> None:
        """One more JSON line to the running agent (e.g. {"stop": true} to end an observing fio_run)."""
        assert self.proc.stdin is not None
        self.proc.stdin.write(json.dumps(message).encode() + b"\n")
        self.proc.stdin.flush()

    def stderr_text(self) -> str:
        return b"".join(self._stderr).decode(errors="replace")

    def close(self, timeout: float = 10.0) -> int:
        """Close stdin (the agent stops its children on EOF) and wait for it."""
        try:
            if self.proc.stdin:
                self.proc.stdin.close()
        except OSError:
            pass
        try:
            return self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            return self.proc.wait()


class SessionSlot:
    """A host's agent session (`{"op": "session"}`, agent.serve()) while Host.agent_session() is entered (the
    runner: a campaign's runs): started on the first call, reused by each
    later call that finds it free, so a campaign pays one Python start and one source check on the host, not
    one per call. A call that finds it busy (another thread) gets an agent of its own, as before. Anything
    that leaves the session in doubt (the host failed, a timeout, an exception while reading events) ends it:
    the next call starts a new one, so a host that came back after a reboot never gets a stale process."""

    def __init__(self, host: Host) -> None:
        self.host = host
        self.session: AgentSession | None = None
        self.lock = threading.Lock()

    def drop(self, wait_s: float = 5.0) -> None:
        session, self.session = self.session, None
        if session is not None:
            session.close(timeout=wait_s)

    def _live(self) -> AgentSession | None:
        """The session, started if there is none (None if it could not start: the caller goes one-shot)."""
        if self.session is not None and self.session.proc.poll() is None:
            return self.session
        if self.session is not None:
            self.session.close(timeout=5)
            self.session = None
        session = self.host.start_agent({"op": "session"})
        for ev in session.events():
            if ev.get("event") == "ready":
                self.session = session
                return session
            break
        session.close(timeout=5)
        return None

    def call(
        self,
        request: AgentRequest,
        on_event: Callable[[dict[str, Any]], None] | None,
        timeout: float | None,
    ) -> dict[str, Any] | None:
        """The request's result, run in the session; None when the session is busy or cannot take it (the
        caller runs it in an agent of its own); HostError as call_agent."""
        if not self.lock.acquire(blocking=False):
            return None
        try:
            session = self._live()
            if session is None:
                return None
            try:
                session.send(request)
            except OSError:  # it died since the last call (the host rebooted?): a fresh agent says how things are
                self.session = None
                session.close(timeout=5)
                return None
            return self._events(session, request, on_event, timeout)
        finally:
            self.lock.release()

    def _events(
        self,
        session: AgentSession,
        request: AgentRequest,
        on_event: Callable[[dict[str, Any]], None] | None,
        timeout: float | None,
    ) -> dict[str, Any]:
        name, op = self.host.name, request.get("op")
        result: dict[str, Any] | None = None
        error: str | None = None
        timer = threading.Timer(timeout, session.proc.kill) if timeout else None
        ended, rc = False, 0
        try:
            if timer:
                timer.start()
            for ev in session.events():
                kind = ev.get("event")
                if kind == "end":
                    ended = True
                    break
                if kind == "result":
                    result = ev
                elif kind == "error":
                    error = str(ev.get("message"))
                elif on_event:
                    on_event(ev)
        finally:
            if timer:
                timer.cancel()
            if not ended:  # killed, died, or the caller's on_event raised: the session's state is unknown
                self.session = None
                rc = session.close(timeout=5)
        if not ended:
            raise HostError(f"{name}: agent {op} ended without a result (exit {rc}): {session.stderr_text()[-800:]}")
        if error is not None:
            raise HostError(f"{name}: agent {op}: {error}")
        if result is None:
            raise HostError(f"{name}: agent {op} ended without a result")
        return result


class Host(ABC):
    """Where commands run. Subclasses: LocalHost, SshHost (and the lab, an SshHost to its VM)."""

    name: str = "host"
    #: how runs on this host should be labelled (e.g. "tcg" for an emulated lab VM)
    accelerator: str = ""
    #: the Python that runs the agent on this host
    python: str = "python3"

    @abstractmethod
    def command(self, argv: Sequence[str]) -> list[str]:
        """The local argv that runs `argv` on this host (identity for local, ssh … for remote)."""

    def run(
        self, argv: Sequence[str], *, input: bytes | None = None, timeout: float | None = None, check: bool = False
    ) -> Result:
        """Run a command to completion and return its Result (raise HostError on timeout)."""
        try:
            cp = subprocess.run(self.command(argv), input=input, capture_output=True, timeout=timeout)
        except subprocess.TimeoutExpired as e:
            raise HostError(f"{self.name}: `{' '.join(argv)}` did not finish in {timeout} s") from e
        except FileNotFoundError as e:
            raise HostError(f"{self.name}: cannot run {argv[0]!r}: {e}") from e
        res = Result(tuple(argv), cp.returncode, cp.stdout.decode(errors="replace"), cp.stderr.decode(errors="replace"))
        return res.check() if check else res

    def read_file(self, path: str) -> str:
        """Contents of a text file on the host."""
        return self.run(["cat", "--", path], check=True, timeout=60).stdout

    def write_file(self, path: str, data: bytes, mode: int = 0o644) -> None:
        """Write a file on the host (atomically: temp file + rename)."""
        tmp = f"{path}.tmp-tankbench"
        script = f"umask 022; cat > {shlex.quote(tmp)} && chmod {mode:o} {shlex.quote(tmp)} && mv -f {shlex.quote(tmp)} {shlex.quote(path)}"
        self.run(["sh", "-c", script], input=data, check=True, timeout=120)

    def start_agent(self, request: AgentRequest) -> AgentSession:
        """Start the agent with one request; read its events from the returned session."""
        argv = self.command(agent_argv(self.python))
        proc = subprocess.Popen(
            argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True
        )
        return AgentSession(proc, request)

    @overload
    def call_agent(
        self, request: ProbeRequest, on_event: OnEvent | None = None, timeout: float | None = None
    ) -> ProbeResult: ...
    @overload
    def call_agent(
        self,
        request: PrepareFileRequest | PrepareRawRequest,
        on_event: OnEvent | None = None,
        timeout: float | None = None,
    ) -> LayoutResult: ...
    @overload  # its fields are FioRunResult's; the kinds add theirs to it (drivers/: run_fio)
    def call_agent(
        self, request: FioRunRequest, on_event: OnEvent | None = None, timeout: float | None = None
    ) -> dict[str, Any]: ...
    @overload
    def call_agent(
        self, request: EndPidsRequest, on_event: OnEvent | None = None, timeout: float | None = None
    ) -> EndPidsResult: ...
    @overload
    def call_agent(
        self, request: DirsRequest, on_event: OnEvent | None = None, timeout: float | None = None
    ) -> DirsResult: ...
    @overload
    def call_agent(
        self, request: HoldersRequest, on_event: OnEvent | None = None, timeout: float | None = None
    ) -> HoldersResult: ...
    @overload
    def call_agent(
        self, request: KeyRequest, on_event: OnEvent | None = None, timeout: float | None = None
    ) -> KeyResult: ...
    @overload
    def call_agent(
        self, request: CooldownRequest | NoiseRequest, on_event: OnEvent | None = None, timeout: float | None = None
    ) -> dict[str, Any]: ...
    def call_agent(
        self,
        request: AgentRequest,
        on_event: OnEvent | None = None,
        timeout: float | None = None,
    ) -> Any:
        """Run one agent request to its final `result` event and return that event's payload (typed per op:
        agent.py's protocol TypedDicts): in the host's agent session (SessionSlot: one agent process for many
        calls) when it is free, else in an agent of its own."""
        slot: SessionSlot | None = self.__dict__.get("_agent_slot")
        served = slot.call(request, on_event, timeout) if slot is not None else None
        if served is not None:
            return served
        return self.call_agent_once(request, on_event, timeout)

    @contextlib.contextmanager
    def agent_session(self) -> Iterator[None]:
        """Agent calls inside share one agent process (SessionSlot), ended on leaving (a campaign's runs)."""
        if "_agent_slot" in self.__dict__:  # nested: the outer one ends it
            yield
            return
        slot = self.__dict__["_agent_slot"] = SessionSlot(self)
        try:
            yield
        finally:
            del self.__dict__["_agent_slot"]
            slot.drop()

    def drop_agent_session(self, wait_s: float = 5.0) -> None:
        """End the agent session, if there is one (the host went away; killed after `wait_s`): the next
        call starts a new one."""
        slot: SessionSlot | None = self.__dict__.get("_agent_slot")
        if slot is not None:
            slot.drop(wait_s)

    def call_agent_once(
        self,
        request: AgentRequest,
        on_event: Callable[[dict[str, Any]], None] | None = None,
        timeout: float | None = None,
    ) -> dict[str, Any]:
        """Run one agent request in an agent process of its own, to its final `result` event."""
        session = self.start_agent(request)
        result: dict[str, Any] | None = None
        timer = None
        if timeout:
            timer = threading.Timer(timeout, session.proc.kill)
            timer.start()
        try:
            for ev in session.events():
                if ev.get("event") == "result":
                    result = ev
                elif ev.get("event") == "error":
                    raise HostError(f"{self.name}: agent {request.get('op')}: {ev.get('message')}")
                elif on_event:
                    on_event(ev)
        finally:
            if timer:
                timer.cancel()
            rc = session.close()
        if result is None:
            raise HostError(
                f"{self.name}: agent {request.get('op')} ended without a result (exit {rc}): "
                f"{session.stderr_text()[-800:]}"
            )
        return result

    def fingerprint_extra(self) -> dict[str, object]:
        """Facts about this host that belong in every run's fingerprint beyond what the agent probes."""
        return {}

    # -- what a machine tankbench runs itself can do (the lab VM: hosts/lab.py); a host of the user's cannot ------
    #: tankbench runs this machine (the lab VM): it boots without services and tankbench may start them; its
    #: crashed kernel's log is its console, not a journal on its disk
    managed: bool = False
    #: the address this host sees other machines' connections come from, which is also where other guests behind
    #: the same NAT reach this machine (a lab: slirp's gateway); "" when connections come straight
    nat_address: str = ""

    def revive(self, note: Callable[[str], None]) -> str | None:
        """Boot the host again if tankbench runs it and it is dead (its qemu exited, its kernel panicked): the
        crashed kernel's console; None when it is alive, or not tankbench's to boot (then it is waited for)."""
        return None

    def after_reboot(self, note: Callable[[str], None]) -> None:
        """Set again what tankbench had set on the machine and a reboot took (a lab's disk models and ARC size)."""

    def forward_port(self, port: int) -> tuple[int, str]:
        """A port of this machine's loopback forwarded to the host's `port`: (the local port, the rule to give
        `unforward`). Only a machine tankbench runs has one; another host is reached at its own address."""
        raise HostError(f"{self.name}: no port of this machine can be forwarded to it (reach it at its address)")

    def unforward(self, rule: str) -> None:
        """Remove a forward that `forward_port` (of this or an earlier run) made."""

    def leave(self, keep: bool, note: Callable[[str], None]) -> None:
        """The campaign is over on this host (after close): a lab this process booted is shut down unless
        `keep`, and one that stays up is said; nothing for another host."""

    def private_dir(self, name: str) -> str:
        """A directory only this host's user can change (~/.cache/tankbench/NAME there, mode 0700, its owner
        and every directory above it checked by the agent); created on first use, cached per Host."""
        cache: dict[str, str] = self.__dict__.setdefault("_private_dirs", {})
        if name not in cache:
            cache[name] = str(self.call_agent({"op": "dirs", "names": [name]}, timeout=120)["dirs"][name])
        return cache[name]

    def close(self) -> None:
        """Release connections (the agent session, ssh control masters, …)."""
        self.drop_agent_session()


def work_root(host: Host) -> str:
    """Where job files of runs live on `host`: a 0700 directory of the host's user (never a shared /var/tmp
    path another user could plant a job file or a symlink in). Campaigns use `<work_root>/<campaign id>/…`."""
    return host.private_dir("work")
