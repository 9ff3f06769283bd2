"""The network of a network-share (NFS) run: the server's busiest interface moved >= 85 % of its link's speed
(targets/netcount.py judges it on the server's counters). A link of unknown speed (a virtual NIC) rules nothing
in or out: the other rules then name what the figures show, and the evidence says the link was not judged."""

from __future__ import annotations

from tankbench.analysis.limiters.base import Finding, Rule
from tankbench.analysis.limiters.facts import RunFacts


def find(f: RunFacts) -> Finding | None:
    if f.checks.get("net.limit") != "network":
        return None
    busy = f.m("net.link_busy_pct")
    return Finding(
        "network",
        (busy or 100.0) / 100.0,
        str(f.checks.get("net.why", "the network link was at its limit")),
        str(f.checks.get("net.server_interface", "")),
        {"link_busy_pct": busy or 0.0},
    )


def note(f: RunFacts) -> str:
    """What the network figures say when they did not name the network ("" for a run without them)."""
    limit = f.checks.get("net.limit")
    if not limit or limit == "network":
        return ""
    why = str(f.checks.get("net.why", ""))
    return f"network not the limit ({why})" if limit != "unknown" else f"network not judged ({why})"


RULE = Rule("network", 1, find, "the server's interface counters vs its link speed (net.*)")
