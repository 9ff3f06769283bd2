"""Write every output of `tankbench report` into one directory: index.html, results.xlsx, summary.md,
results.csv, results.json, the sections written alone as their own Markdown file (clients.md, hosts.md), and
the reports a section holds (a fleet's hosts, each in its directory)."""

from __future__ import annotations

import os

from tankbench.analysis.result import Analysis
from tankbench.errors import LocalError, UserError, is_os_fault
from tankbench.reports.csv import write_csv
from tankbench.reports.html import write_html
from tankbench.reports.json import write_json
from tankbench.reports.markdown import section_file, write_markdown
from tankbench.reports.render import rendered
from tankbench.reports.xlsx import write_xlsx

OUTPUTS = ("index.html", "results.xlsx", "summary.md", "results.csv", "results.json")


def make_out_dir(out_dir: str) -> None:
    """Create the output directory (and its parents); `Error:` when it cannot be: a file there, no permission (exit
    2), a full or read-only filesystem (exit 3, README)."""
    try:
        os.makedirs(out_dir, exist_ok=True)
    except OSError as e:
        error = LocalError if is_os_fault(e) else UserError
        raise error(f"cannot create output directory {out_dir}: {e.strerror}", "pass a writable --out DIR") from e


def write_all(a: Analysis, out_dir: str) -> list[str]:
    """Write the five outputs, each section's own file and each report a section holds; return their paths (the
    five first)."""
    make_out_dir(out_dir)
    sections = rendered(a)  # each section rendered once for every output
    paths = [os.path.join(out_dir, name) for name in OUTPUTS]
    write_html(a, paths[0], sections)
    write_xlsx(a, paths[1], sections)
    write_markdown(a, paths[2], sections)
    write_csv(a, paths[3], sections)
    write_json(a, paths[4])
    for r in sections:
        if r.spec.file:
            paths.append(os.path.join(out_dir, r.spec.file))
            with open(paths[-1], "w", encoding="utf-8") as f:
                f.write(section_file(r))
    for spec in a.sections:
        if spec.subreports is not None:
            for sub, report in spec.subreports(a, a.parts.get(spec.name)):
                paths += write_all(report, os.path.join(out_dir, sub))
    return paths
