"""compare.html and compare.md: machines side by side, drawn from generic sections (analysis/machine_sections.py)
by the same block renderers as every report section."""

from __future__ import annotations

import os
from collections.abc import Sequence

from tankbench.analysis.machine_sections import comparison_sections
from tankbench.analysis.machines import MachineComparison
from tankbench.analysis.section import Section
from tankbench.reports.html import CSS, section_html
from tankbench.reports.markdown import section_md
from tankbench.reports.write import make_out_dir

#: what a comparison adds to the report's style: differing fingerprint rows, and verdict colours
EXTRA_CSS = (
    "tr.diff td{background:#fff1c9}td.holds{color:#1a7f37;font-weight:700}td.fails{color:#b3261e;font-weight:700}"
    "td.undecided{color:#57606a;font-weight:700}"
)


def render_html(sections: Sequence[Section]) -> str:
    body = "".join(section_html(s) for s in sections)
    return (
        '<!DOCTYPE html><html lang="en"><head><meta charset="utf-8"><title>tankbench compare</title>'
        f'<meta name="viewport" content="width=device-width"><style>{CSS}{EXTRA_CSS}</style></head><body>{body}'
        "</body></html>"
    )


def render_markdown(sections: Sequence[Section]) -> str:
    out: list[str] = []
    for s in sections:
        out += section_md(s)
    return "\n".join(out)


def write_comparison(mc: MachineComparison, out_dir: str) -> list[str]:
    """compare.html and compare.md into `out_dir` (created); their paths. Each file appears whole or not at all."""
    sections = comparison_sections(mc)
    make_out_dir(out_dir)  # a file of that name: `Error:`, not FileExistsError
    paths = [os.path.join(out_dir, "compare.html"), os.path.join(out_dir, "compare.md")]
    for path, text in zip(paths, (render_html(sections), render_markdown(sections))):
        tmp = f"{path}.tmp-{os.getpid()}"
        with open(tmp, "w", encoding="utf-8") as f:
            f.write(text)
        os.replace(tmp, path)
    return paths
