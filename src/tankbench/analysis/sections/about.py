"""What a reader needs to trust or repeat the report, on top of every output (issue 33): the tankbench that wrote
it, each host's system (kernel, OpenZFS, fio, the tankbench that ran it), the campaign as it ran (the file and
what --set, --disks, --host changed, as the journal recorded it), and the next steps as commands to copy."""

from __future__ import annotations

import shlex
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from tankbench import version_line
from tankbench.analysis.result import Analysis, Context, SectionSpec
from tankbench.analysis.section import EVERY, Block, Column, Items, Para, Part, Section, Span, Table
from tankbench.analysis.sections.fingerprint import show_key

#: the fingerprint facts that say which software measured (what a reader compares first), in this order
SYSTEM = (
    ("hostname", "host"),
    ("kernel", "kernel"),
    ("zfs_version", "OpenZFS"),
    ("fio_version", "fio"),
    ("guest_fio", "fio in the test guest"),
    ("os", "OS"),
    ("tankbench_version", "tankbench (ran it)"),
    ("tankbench_commit", "tankbench commit (ran it)"),
)


@dataclass(frozen=True)
class Campaign:
    """The campaign as the journal recorded it: where its file was, and its text as run (the overrides the command
    line applied are appended to it as comments); "" for runs imported from fio's output."""

    path: str
    text: str


@dataclass(frozen=True)
class About:
    written_by: str  # the tankbench that wrote the report: "tankbench 0.1.0 (commit 1a2b3c4d5e6f)"
    campaigns: tuple[Campaign, ...]


def compute(ctx: Context) -> About:
    campaigns: tuple[Campaign, ...] = ()
    if ctx.journal is not None:
        campaigns = tuple(
            Campaign(str(c.get("spec_path") or ""), str(c.get("spec_text") or "")) for c in ctx.journal.campaigns()
        )
    return About(version_line(), campaigns)


def system_table(a: Analysis) -> Table:
    """Per fingerprint (one per host and software state): the software that measured."""
    fps = sorted(a.dataset.fingerprints.items())
    keys = [(k, label) for k, label in SYSTEM if any(k in fp.data for _, fp in fps)]
    cols = (Column("fingerprint"), *(Column(k, label) for k, label in keys))
    rows = [(fid, *(show_key(k, fp.data.get(k)) or "—" for k, _ in keys)) for fid, fp in fps]
    return Table(cols, rows, wide=False)


def next_steps(a: Analysis, about: About) -> tuple[tuple[Span, ...], ...]:
    """Commands that take the reader further, each with why."""
    journal = shlex.quote(a.dataset.path)
    spec = next((c.path for c in reversed(about.campaigns) if c.path and c.text), "")
    out: list[tuple[Span, ...]] = []
    doubt = [lb.case for lb in a.leaderboards if len(lb.rows) > 1 and not _clear(lb.rows[1].vs_first)]
    if spec and doubt:
        repeats = max((len(t.measured) for t in a.dataset.tests), default=1) + 2
        cmd = f"tankbench run {shlex.quote(spec)} --journal {journal} --set campaign.repeats={repeats}"
        out.append((Span(f"No clear winner in {len(doubt)} test case(s) ({', '.join(doubt[:3])}): add repeats. "),
                    Span(cmd, "code")))  # fmt: skip
    if any(r.kind == "method" for r in a.recommendations) and a.rank_by != "durable_mibs":
        cmd = f"tankbench report --journal {journal} --rank-by durable_mibs"
        out.append((Span("Runs finished late: rank by what reached the disk. "), Span(cmd, "code")))
    if a.emulated and spec:
        cmd = f"tankbench run {shlex.quote(spec)} --host ssh://root@HOST --disks /dev/disk/by-id/DISK"
        out.append((Span("Emulated machine: measure your own disks (blank ones, named by id). "), Span(cmd, "code")))
    out.append(
        (Span("Every conclusion with the tests it rests on: "), Span(f"tankbench advise --journal {journal}", "code"))
    )
    out.append((Span("Against another run or machine: "), Span(f"tankbench compare {journal} OTHER.sqlite", "code")))
    return tuple(out)


def _clear(r: Any) -> bool:
    """Whether the runner-up is significantly behind first place."""
    return r is not None and r.test.possible and r.test.significant()


def render(a: Analysis, about: About) -> Section:
    blocks: list[Block] = [
        Para(
            (Span("Written by "), Span(about.written_by, "code"), Span(".")),
            only=EVERY,
        ),
        Part("System", (system_table(a),)),
    ]
    for c in about.campaigns:
        if c.text:
            intro = Para((Span("Campaign as run, from "), Span(c.path, "code"), Span(":")), only=EVERY)
            blocks.append(Part("Campaign", (intro, Para(c.text.rstrip("\n"), "pre", only=EVERY))))
        elif c.path:
            imported = Para((Span("Imported from fio's output: "), Span(c.path, "code")), only=EVERY)
            blocks.append(Part("Campaign", (imported,)))
    blocks.append(Part("Next steps", (Items(next_steps(a, about), only=EVERY),)))
    return Section("about", "About this report", tuple(blocks), sheet="about")


def to_json(a: Analysis, about: About) -> Mapping[str, Any]:
    return {
        "written_by": about.written_by,
        "campaigns_as_run": [{"path": c.path, "text": c.text} for c in about.campaigns],
        "next_steps": ["".join(s.text for s in step if s.style == "code") for step in next_steps(a, about)],
    }


SECTION = SectionSpec("about", 5, compute, render, to_json, journal=True, sheet_order=-1)
