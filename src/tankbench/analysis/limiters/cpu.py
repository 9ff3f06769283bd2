"""The CPU: fio's own threads, ZFS's threads (z_wr_iss, z_rd_int, txg_sync, …), every CPU of the host, or — in the
lab under TCG — the emulator (the qemu process on the machine that runs the lab: one thread emulates every
virtual CPU, so its one core is the limit; its CPU time plus its time waiting for a core counts as busy)."""

from __future__ import annotations

from tankbench.analysis.limiters.base import Finding, Rule
from tankbench.analysis.limiters.facts import BUSY, RunFacts
from tankbench.units import pct

#: thread groups that are not ZFS's own
NOT_ZFS = ("fio", "qemu", "other")


def candidates(f: RunFacts) -> list[tuple[float, str, str]]:
    """(share of its limit, part, sentence) for each CPU consumer the run measured."""
    out: list[tuple[float, str, str]] = []
    emu = f.m("cpu.emulator_busy_pct")
    if emu is None:
        emu = f.m("cpu.emulator_pct")
    if emu is not None:
        used = f.m("cpu.emulator_pct")
        wait = f" ({used:.0f} % running, the rest waiting for a core)" if used is not None and emu > used + 5 else ""
        out.append(
            (emu / 100.0, "emulator", f"the emulator (qemu, one TCG thread) was {pct(emu / 100.0, BUSY)} busy{wait}")
        )
    jobs = max(1.0, f.m0("fio.jobs") or float(f.params.get("numjobs", 1) or 1))
    if f.m("fio.usr_cpu_pct") is not None:
        share = (f.m0("fio.usr_cpu_pct") + f.m0("fio.sys_cpu_pct")) / jobs / 100.0
        out.append(
            (share, "fio", f"fio's own thread{'s' if jobs > 1 else ''} {pct(share, BUSY)} busy (fio's usr + sys CPU)")
        )
    groups, threads = f.cpu_groups, f.checks.get("cpu.group_threads") or {}
    for name, p in groups.items():
        if name in NOT_ZFS:
            continue
        n = threads.get(name, 1) if isinstance(threads, dict) else 1
        cap = min(max(1, int(n)), f.cpu_count)
        out.append((p / 100.0 / cap, name, f"ZFS's {name} thread{'s' if cap > 1 else ''} {p:.0f} % of a CPU"))
    if f.m("sys.cpu_user_pct") is not None:
        host = (f.m0("sys.cpu_user_pct") + f.m0("sys.cpu_sys_pct")) / 100.0
        load = f.m("sys.load1_max")
        also = f", load1 up to {load:.1f}" if load is not None else ""
        out.append((host, "all CPUs", f"the host's {f.cpu_count} CPU(s) {pct(host, BUSY)} busy (user + system{also})"))
    return out


def find(f: RunFacts) -> Finding | None:
    """Holds when a CPU consumer used >= 85 % of what it can (a thread: one CPU; the host: all of them)."""
    found = candidates(f)
    if not found:
        return None
    score, part, text = max(found, key=lambda c: c[0])
    if score < BUSY:
        return None
    if f.emulated and part != "emulator":
        emu = next((c for c in found if c[1] == "emulator"), None)
        text += " in an emulated machine (TCG): the emulator's speed, not a real CPU's"
        part = "emulator" if emu is None or emu[0] >= 0.5 else part
    figures = {c[1]: round(c[0], 3) for c in found}
    return Finding("cpu", score, text, part, figures)


def summary(f: RunFacts) -> str:
    """The CPU figures in one phrase, for a "not determined" verdict."""
    return ", ".join(f"{part} {pct(s, BUSY)}" for s, part, _ in candidates(f))


RULE = Rule("cpu", 3, find, "fio's usr/sys CPU, CPU per thread group, host CPU, the lab's qemu process")
