"""Shared test helpers: run the CLI as a subprocess, the way a user would."""

from __future__ import annotations

import json
import os
import shutil
import signal
import sqlite3
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any

import pytest

from tankbench import bootlog

ROOT = Path(__file__).resolve().parent.parent
FIXTURES = ROOT / "tests" / "fixtures"


#: every process a test starts inherits this mark through its environment, so each pytest process (the xdist
#: controller and every worker set their own) can find what its tests left running when it ends
SESSION_MARK = "TANKBENCH_TEST_SESSION"
#: how long processes may take to end by themselves after the last test (a lab powering off, a guest's qemu)
STRAY_GRACE_S = 60.0


#: the suite's budget per tier on a 2-core machine, in seconds of wall time (README, next to the test command);
#: the whole of scripts/test, the image build included, has 45 minutes
BUDGET_S = {"unit": 120.0, "integration": 300.0, "lab": 1800.0, "browser": 120.0}
#: where scripts/test wants this run's figures (tiers, slowest tests, boots, failures) as JSON for its run record
#: (.test-results/last-run.json); unset for a plain pytest
SUMMARY_ENV = "TANKBENCH_TEST_SUMMARY"
#: per test (node id): its tier, its seconds (setup + call + teardown) and its first start and last stop
_TIMES: dict[str, list[float]] = {}
#: {node id: the xdist worker that ran it ("gw0")}: with each file's start, a run's timeline (which worker waited)
_WORKER: dict[str, str] = {}
#: tests that failed (or errored in setup/teardown), in the order they did: (node id, phase, one line of why)
_FAILURES: list[tuple[str, str, str]] = []
#: tests started and not yet finished: {node id: wall-clock start} (what was in flight when a run was killed)
_RUNNING: dict[str, float] = {}
#: whether this process is the one that writes the summary (the xdist controller, or a run without xdist)
_WRITES_SUMMARY = [False]


def pytest_configure(config: pytest.Config) -> None:
    os.environ[SESSION_MARK] = f"{os.getpid()}-{uuid.uuid4().hex[:12]}"
    # A suite started in the background of a non-interactive shell (`scripts/test &`, a CI runner's job) inherits
    # SIGINT and SIGQUIT ignored, and so does every process its tests start: a tankbench that ignores Ctrl-C, a
    # bash whose INT trap never runs. The tests that press Ctrl-C stand for a terminal's user: default handling.
    if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
        signal.signal(signal.SIGINT, signal.default_int_handler)
    if signal.getsignal(signal.SIGQUIT) is signal.SIG_IGN:
        signal.signal(signal.SIGQUIT, signal.SIG_DFL)
    _WRITES_SUMMARY[0] = not hasattr(config, "workerinput")
    if not hasattr(config, "workerinput"):  # the controller (or a run without xdist): one boot log for all workers
        fd, path = tempfile.mkstemp(prefix="tankbench-boots-", suffix=".jsonl")
        os.close(fd)
        os.environ[bootlog.ENV] = path


def pytest_runtest_logstart(nodeid: str, location: tuple[str, int | None, str]) -> None:
    """The summary is rewritten as each test starts and ends (a millisecond each): a run killed by SIGTERM or
    SIGKILL never reaches pytest_sessionfinish, and its record then still says what ran, failed and was in flight."""
    _RUNNING.setdefault(nodeid, time.time())
    _write_summary(None)


def pytest_runtest_logfinish(nodeid: str, location: tuple[str, int | None, str]) -> None:
    _RUNNING.pop(nodeid, None)
    _write_summary(None)


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    """Each test's time, phase by phase, and its failure (xdist hands every worker's reports to the controller)."""
    t = _TIMES.setdefault(report.nodeid, [0.0, report.start, report.stop])
    t[0] += report.duration
    gateway = getattr(getattr(report, "node", None), "gateway", None)  # under xdist, the worker that ran it
    if gateway is not None:
        _WORKER[report.nodeid] = str(getattr(gateway, "id", ""))
    t[1], t[2] = min(t[1], report.start), max(t[2], report.stop)
    if report.failed:
        crash = getattr(report.longrepr, "reprcrash", None)
        why = crash.message if crash is not None else str(report.longrepr).strip().splitlines()[-1:]
        _FAILURES.append((report.nodeid, report.when, str(why).splitlines()[0][:300] if why else ""))


def _tier(nodeid: str) -> str:
    parts = nodeid.split("/")
    return parts[1] if len(parts) > 2 and parts[0] == "tests" else "other"


def tier_figures(times: dict[str, list[float]]) -> list[dict[str, Any]]:
    """Per tier: tests, summed test time, wall span (first start to last end), budget, whether the span is over
    it, and the five tests that cost the tier most (pure)."""
    out = []
    for tier in sorted({_tier(n) for n in times}):
        mine = {n: t for n, t in times.items() if _tier(n) == tier}
        span = max(t[2] for t in mine.values()) - min(t[1] for t in mine.values())
        budget = BUDGET_S.get(tier)
        costliest = sorted(mine.items(), key=lambda kv: -kv[1][0])[:5]
        out.append(
            {
                "tier": tier,
                "tests": len(mine),
                "test_s": round(sum(t[0] for t in mine.values()), 1),
                "span_s": round(span, 1),
                "budget_s": budget,
                "over_budget": budget is not None and span > budget,
                "costliest": [{"test": n, "seconds": round(t[0], 1)} for n, t in costliest],
            }
        )
    return out


def pytest_terminal_summary(terminalreporter: Any, exitstatus: int, config: pytest.Config) -> None:
    """What the run cost: time per tier against its budget, the ten slowest tests, and every VM boot (printed by
    every run, so the next regression shows in CI's own output)."""
    if hasattr(config, "workerinput") or not _TIMES:
        return
    tr = terminalreporter
    tiers = tier_figures(_TIMES)
    tr.section("tankbench: time per tier (budget for a 2-core machine; README)")
    tr.write_line(f"{'tier':<12} {'tests':>5} {'test time':>10} {'wall span':>10} {'budget':>8}")
    for t in tiers:
        over = "  OVER BUDGET" if t["over_budget"] else ""
        shown = f"{t['budget_s']:.0f} s" if t["budget_s"] is not None else "-"
        tr.write_line(f"{t['tier']:<12} {t['tests']:>5} {t['test_s']:>8.0f} s {t['span_s']:>8.0f} s {shown:>8}{over}")
    tr.write_line("(test time: summed over tests and workers; wall span: first start to last end of the tier)")
    tr.section("tankbench: the ten slowest tests")
    for nodeid, t in sorted(_TIMES.items(), key=lambda kv: -kv[1][0])[:10]:
        tr.write_line(f"{t[0]:8.1f} s  {nodeid}")
    boots = _boots()
    tr.section(f"tankbench: VM boots ({len(boots)}, {sum(b['seconds'] for b in boots):.0f} s to ready in all)")
    for b in boots:
        extra = f", {b['panics']} panicked first" if b.get("panics") else ""
        how = f", {b['how']}" if b.get("how") else ""
        tr.write_line(f"{b['seconds']:8.1f} s  {b['what']} {b['name']} ({b.get('accelerator', '?')}{how}{extra})")


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    """For scripts/test's run record: this run's figures as JSON (written even when tests failed or the run was
    interrupted: pytest calls this after a KeyboardInterrupt too)."""
    _write_summary(int(exitstatus))  # the controller's alone (_WRITES_SUMMARY)
    if int(exitstatus) == 0 and _WRITES_SUMMARY[0]:
        _prune_test_labs([b["name"] for b in _boots() if b.get("what") == "lab"])


def _prune_test_labs(names: list[str]) -> list[str]:
    """The runtime directories of the labs this run booted and left down (their ssh keys and console logs: 16K
    each, 141 of them here after a few runs), removed after a run that passed (a failed run keeps its consoles for
    reading); never the user's `default` lab, never a lab still up. Returns the names removed."""
    from tankbench.lab.state import labs_dir

    removed = []
    for name in sorted(set(names) - {"default"}):
        d = labs_dir() / name
        if d.is_dir() and not (d / "state.json").exists():  # a lab that is up has its state.json
            shutil.rmtree(d, ignore_errors=True)
            removed.append(name)
    return removed


def _write_summary(exitstatus: int | None) -> None:
    """The summary scripts/test's record reads: written as tests finish (exitstatus None: the run was still going,
    with the tests then in flight) and once more at the end, so a run killed on its way still says what it did."""
    path = os.environ.get(SUMMARY_ENV)
    if not path or not _WRITES_SUMMARY[0]:
        return
    boots = _boots()
    now = time.time()
    doc = {
        "exitstatus": exitstatus,
        "tests": len(_TIMES),
        "failed": len({n for n, _, _ in _FAILURES}),
        "failures": [{"test": n, "phase": w, "why": why} for n, w, why in _FAILURES],
        "in_flight": [{"test": n, "seconds": round(now - t0, 1)} for n, t0 in sorted(_RUNNING.items())],
        "tiers": tier_figures(_TIMES),
        "slowest": [
            {"test": n, "seconds": round(t[0], 1)} for n, t in sorted(_TIMES.items(), key=lambda kv: -kv[1][0])[:10]
        ],
        "files": _file_times(_TIMES, _WORKER),
        "boots": {"count": len(boots), "seconds": round(sum(b["seconds"] for b in boots), 1), "each": boots},
    }
    tmp = Path(path + ".tmp")
    tmp.write_text(json.dumps(doc, indent=1) + "\n")
    os.replace(tmp, path)


def _file_times(times: dict[str, list[float]], worker: Mapping[str, str]) -> list[dict[str, Any]]:
    """Per test file: its tests, summed seconds and wall span, its start and the workers that ran it (`worker`:
    node id -> xdist worker), the costliest first (pure)."""
    by: dict[str, list[list[float]]] = {}
    workers: dict[str, set[str]] = {}
    for nodeid, t in times.items():
        file = nodeid.split("::", 1)[0]
        by.setdefault(file, []).append(t)
        if nodeid in worker:
            workers.setdefault(file, set()).add(worker[nodeid])
    rows = [
        {
            "file": f,
            "tests": len(ts),
            "test_s": round(sum(t[0] for t in ts), 1),
            "span_s": round(max(t[2] for t in ts) - min(t[1] for t in ts), 1),
            "start": round(min(t[1] for t in ts), 1),  # epoch seconds: the files in start order are the timeline
            "workers": sorted(workers.get(f, ())),
        }
        for f, ts in by.items()
    ]
    return sorted(rows, key=lambda r: -float(r["test_s"]))


def pytest_unconfigure(config: pytest.Config) -> None:
    if not hasattr(config, "workerinput"):
        Path(os.environ.get(bootlog.ENV, "/nonexistent")).unlink(missing_ok=True)


def _boots() -> list[dict[str, Any]]:
    path = os.environ.get(bootlog.ENV, "")
    try:
        with open(path, encoding="utf-8") as f:
            return [json.loads(line) for line in f if line.strip()]
    except OSError:
        return []


def marked_processes(mark: str) -> dict[int, str]:
    """Live processes (not this one) whose environment carries `mark`: {pid: command line}."""
    found: dict[int, str] = {}
    needle = f"{SESSION_MARK}={mark}".encode()
    for entry in os.listdir("/proc"):
        if not entry.isdigit() or int(entry) == os.getpid():
            continue
        try:
            with open(f"/proc/{entry}/environ", "rb") as f:
                if needle not in f.read().split(b"\0"):
                    continue
        except OSError:
            continue
        cmd = proc_cmdline(int(entry))
        if cmd is not None:
            found[int(entry)] = cmd
    return found


def zombie_children() -> dict[int, str]:
    """Children of this process that ended and were never waited for: {pid: name}."""
    found: dict[int, str] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat", encoding="utf-8", errors="replace") as f:
                head, tail = f.read().rsplit(")", 1)
        except (OSError, ValueError):
            continue
        fields = tail.split()
        if fields[0] == "Z" and int(fields[1]) == os.getpid():
            found[int(entry)] = head.split("(", 1)[1]
    return found


@pytest.fixture(scope="session", autouse=True)
def no_stray_processes() -> Iterator[None]:
    """Torn down last: the session fails if a process its tests started (qemu, a guest controller, fio, ssh,
    tankbench) still runs, or one of its children is an unreaped zombie. Strays are then ended, by pid."""
    yield
    mark = os.environ[SESSION_MARK]
    deadline = time.monotonic() + STRAY_GRACE_S
    while (left := marked_processes(mark)) and time.monotonic() < deadline:
        time.sleep(0.5)
    zombies = zombie_children()
    for pid in left:
        try:
            os.kill(pid, signal.SIGKILL)  # ours: it carries this session's mark
        except ProcessLookupError:
            pass
    problems = [
        f"pid {pid} still running {STRAY_GRACE_S:.0f} s after the last test: {cmd[:300]}" for pid, cmd in left.items()
    ]
    problems += [f"pid {pid} ({name}) is a zombie nobody reaped" for pid, name in zombies.items()]
    assert not problems, "the tests left processes behind:\n" + "\n".join(problems)


#: the test files that boot nested test guests (a guest inside a lab: minutes each under TCG): one xdist group,
#: so one worker runs them one after another while the other worker runs everything else; two nested guests at
#: once on 2 cores starved each other (a 54-minute CI run, and the emulator oops a starved boot met)
NESTED_GUESTS = (
    "tests/lab/test_vmdisk.py",
    "tests/lab/test_guest_layers.py",
    "tests/lab/test_guest.py",
)
#: lab files whose assertions are measurements of the lab's modelled disks and its emulated CPU (the claims'
#: verdicts and the limiters of the seeds' campaigns): no other lab or nested guest runs while they do (the
#: machine lock below). Beside another lab or a nested guest under TCG on 2 cores the emulator waited for a core for
#: a fifth of each run, its runs' limiter was "not determined" and the claims' intervals too wide to decide
QUIET = ("tests/lab/test_seeds.py",)
#: the order xdist hands files to its workers: the quiet files first (one worker runs them, ~25 minutes), then every
#: file that boots no lab — unit, integration, browser: the other worker's work meanwhile, at the lowest CPU and I/O
#: priority (nice 19), so the quiet file's emulator keeps its core (a worker waiting for the machine idled there before: CI
#: ran out of its 90 minutes) — then the lab files, the longest first
LONG_FIRST = (
    *QUIET,
    *NESTED_GUESTS,
    "tests/lab/test_presets.py",
    "tests/lab/test_nfs.py",  # three labs (a server and two NFS clients), two campaigns: ~6-8 minutes
    "tests/lab/test_resume_boot.py",  # a lab booted three times (lab-init, systemd, systemd after a crash): ~5 minutes
    "tests/lab/test_real_host.py",
    "tests/lab/test_crash_recovery.py",  # three real kernel crashes, four lab boots: ~4 minutes
    "tests/lab/test_zfs_campaign.py",
)
#: the tiers in the order they are handed out after the quiet files (each tier's files in collection order, the
#: lab's listed ones first)
TIER_ORDER = ("integration", "browser", "unit", "lab")


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """The quiet files first, then the files that boot no lab, then the lab files, the longest first (stable)."""
    rank = {name: i for i, name in enumerate(LONG_FIRST)}

    def order(item: pytest.Item) -> tuple[int, int, int]:
        path = _relative(Path(str(item.fspath)))
        tier = _tier(path + "::")
        return (
            0 if path in QUIET else 1,
            TIER_ORDER.index(tier) if tier in TIER_ORDER else len(TIER_ORDER),
            rank.get(path, len(rank)),
        )

    items.sort(key=order)


def _relative(path: Path) -> str:
    """A test file's path from the checkout (as is when it lies elsewhere: a suite a test generated)."""
    try:
        return path.relative_to(ROOT).as_posix()
    except ValueError:
        return path.as_posix()


#: the machine lock this worker holds, for which file: {"file": path, "lock": open file} (empty: none)
_MACHINE: dict[str, Any] = {}


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item: pytest.Item) -> None:
    """Under xdist, before any fixture of a test file is set up (a session lab's boot included), the worker takes
    the machine for it: a lab file shares it, a quiet file has it alone (the other worker's lab files wait), a file
    that boots no lab needs no lock and runs at the lowest CPU priority (nice 19) and the lowest best-effort I/O priority."""
    if not os.environ.get("PYTEST_XDIST_WORKER"):
        return
    path = _relative(Path(str(item.fspath)))
    if _MACHINE.get("file") == path:
        return
    _release_machine()
    lab_file = _tier(path + "::") == "lab"
    _set_priority(low=not lab_file)
    if not lab_file:
        _MACHINE["file"] = path
        return
    import fcntl

    quiet = path in QUIET
    lock = item.config._tmp_path_factory.getbasetemp().parent / "machine.lock"  # type: ignore[attr-defined]
    f = open(lock, "a")  # noqa: SIM115 (held until the worker leaves the file)
    t0 = time.monotonic()
    fcntl.flock(f, fcntl.LOCK_EX if quiet else fcntl.LOCK_SH)
    waited = time.monotonic() - t0
    if waited > 1:
        print(f"{path}: waited {waited:.0f} s for the machine ({'alone' if quiet else 'beside another file'})")
    _MACHINE.update(file=path, lock=f)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_teardown(item: pytest.Item, nextitem: pytest.Item | None) -> Iterator[None]:
    """The machine is let go once the file's last test and its module fixtures are torn down."""
    yield
    if nextitem is None or Path(str(nextitem.fspath)) != Path(str(item.fspath)):
        _release_machine()


def _release_machine() -> None:
    f = _MACHINE.pop("lock", None)
    _MACHINE.pop("file", None)
    if f is not None:
        f.close()  # closing the descriptor releases its flock


def _set_priority(low: bool) -> None:
    """This worker's CPU and I/O priority (its children inherit it from the moment they start)."""
    # nice 19: 1/70 of a nice-0 process's CPU share when both want a core. At nice 10 the seeds' emulator-bound runs
    # still drifted with the other worker's load (seed 001's 4k sync writes with a log: 70-201 IOPS)
    os.setpriority(os.PRIO_PROCESS, 0, 19 if low else 0)  # root may lower its niceness again
    subprocess.run(
        ["ionice", "-c", "2", "-n", "7" if low else "4", "-p", str(os.getpid())], capture_output=True, check=False
    )


def pytest_xdist_make_scheduler(config: pytest.Config, log: Any) -> Any:
    """xdist's file-by-file scheduling (a file's lab fixtures stay in one process), except that the nested-guest
    files are one unit of work, run on one worker one after another. (A scheduler of our own: xdist_group marks
    no longer reach the scheduler under pytest 9, whose node ids xdist 3.8 cannot suffix.)"""
    from xdist.scheduler import LoadScopeScheduling

    class FilesNestedGuestsTogether(LoadScopeScheduling):  # type: ignore[misc]
        def _split_scope(self, nodeid: str) -> str:
            path = nodeid.split("::", 1)[0]
            return "nested-guests" if path in NESTED_GUESTS else path

    return FilesNestedGuestsTogether(config, log)


def proc_cmdline(pid: int) -> str | None:
    """A process's command line (NULs as spaces), or None once it has ended or is a zombie.

    One read, no check first: a process can end between an exists() test and the read (that race made the
    kill -9 test fail under load)."""
    try:
        with open(f"/proc/{pid}/stat", encoding="utf-8", errors="replace") as f:
            if f.read().rsplit(")", 1)[1].split()[0] == "Z":
                return None
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            return f.read().replace(b"\0", b" ").decode(errors="replace")
    except (OSError, IndexError):
        return None


def wait_until(predicate: Callable[[], object], timeout: float, what: Callable[[], str] | str) -> None:
    """Poll `predicate` until it is true; AssertionError naming `what` after `timeout` seconds (a deadline, never
    a fixed sleep: the loop ends as soon as the condition holds, however loaded the machine)."""
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(what() if callable(what) else what)
        time.sleep(0.1)


def journal_rows(journal: Path, sql: str, *args: object) -> list[tuple[Any, ...]]:
    """A query's rows on the journal of a tankbench that may still be writing it, opened read-only (never a
    checkpoint of ours); [] while the file or its tables do not exist yet."""
    if not journal.exists():
        return []
    conn = sqlite3.connect(f"file:{journal}?mode=ro", uri=True, timeout=30)
    try:
        return conn.execute(sql, args).fetchall()
    except sqlite3.OperationalError:  # not created yet
        return []
    finally:
        conn.close()


def run_until(
    campaign: Path, journal: Path, cwd: Path, ready: Callable[[], object], timeout: float = 240
) -> subprocess.Popen[str]:
    """`tankbench run CAMPAIGN --journal JOURNAL` in the background (stdout and stderr piped), returned once
    `ready()` holds; fails with its output if the campaign ends first (polling with a deadline, no fixed wait)."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "tankbench", "run", str(campaign), "--journal", str(journal)],
        cwd=cwd,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    deadline = time.monotonic() + timeout
    while not ready() and proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.05)
    assert proc.poll() is None, "the campaign ended before it was ready: " + "".join(proc.communicate())
    return proc


def run_until_fio_servers(
    campaign: Path, journal: Path, cwd: Path, *args: str, timeout: float = 120, new_session: bool = False
) -> tuple[subprocess.Popen[str], list[str]]:
    """`tankbench run CAMPAIGN --journal JOURNAL ARGS…` of a campaign with client hosts, in the background (stdout
    and stderr merged), returned with the lines it printed once its fio servers have started and a run is in
    flight (fio runs on the clients): the moment the client tests stop it (polling with a deadline)."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "tankbench", "run", str(campaign), "--journal", str(journal), *args],
        cwd=cwd,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=new_session,
    )
    assert proc.stdout is not None
    seen = []
    for line in proc.stdout:  # the servers start before the first run's layout
        seen.append(line)
        if "fio servers on" in line:
            break
    in_flight = "SELECT 1 FROM runs WHERE status = 'running'"
    deadline = time.monotonic() + timeout
    while not journal_rows(journal, in_flight) and time.monotonic() < deadline:
        time.sleep(0.1)  # polling until the first run is in flight
    assert journal_rows(journal, in_flight), "".join(seen)
    return proc, seen


def zfs_fixture(name: str) -> str:
    """Text of a real OpenZFS output captured in the lab (tests/fixtures/zfs/)."""
    return (FIXTURES / "zfs" / name).read_text()


def tankbench(
    *args: str, cwd: str | os.PathLike[str] | None = None, timeout: float = 600, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    """Run `python -m tankbench ARGS` and capture its output."""
    full_env = dict(os.environ)
    full_env.update(env or {})
    return subprocess.run(
        [sys.executable, "-m", "tankbench", *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=timeout,
        env=full_env,
    )


@pytest.fixture
def cli():
    return tankbench


def sh(*argv: str) -> str:
    return subprocess.run(argv, check=True, capture_output=True, text=True).stdout.strip()


@pytest.fixture
def loopdev(tmp_path: Path) -> Iterator[str]:
    """A real loop device over a 64 MiB file, detached afterwards (only the one we attached)."""
    img = tmp_path / "disk.img"
    with open(img, "wb") as f:
        f.truncate(64 << 20)
    dev = sh("losetup", "--find", "--show", str(img))
    try:
        yield dev
    finally:
        subprocess.run(["umount", str(tmp_path / "mnt")], capture_output=True)
        subprocess.run(["losetup", "-d", dev], check=True)


@pytest.fixture
def short_tmp() -> Iterator[Path]:
    """A private directory with a short path (ssh control sockets must fit in ~100 bytes; pytest-xdist's tmp_path
    is long enough that code under test would fall back to its own short directory instead)."""
    d = Path(tempfile.mkdtemp(prefix="tb", dir="/tmp"))
    try:
        yield d
    finally:
        shutil.rmtree(d, ignore_errors=True)


def tiny_initramfs(tmp: Path, userland: Path | None = None) -> Path:
    """A test guest initramfs built from stand-ins (a 2-byte "busybox" and "fio", no modules), optionally with a
    userland tree; its path."""
    from tankbench.guest import initramfs

    (tmp / "m").mkdir()
    (tmp / "m" / "modules.dep").write_text("")
    (tmp / "b").write_bytes(b"bb")
    out = tmp / "i.img"
    initramfs.build_initramfs(
        out,
        busybox=tmp / "b",
        fio=tmp / "b",
        init=b"x",
        modules_dir=tmp / "m",
        kernel_abi="k",
        modules=[],
        userland=userland,
    )
    return out
