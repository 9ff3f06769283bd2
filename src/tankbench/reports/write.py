"""Write all five outputs of `tankbench report` into one directory."""

from __future__ import annotations

import os

from tankbench.analysis.analyse import Analysis
from tankbench.errors import LocalError, UserError, is_os_fault
from tankbench.reports.csv import write_csv
from tankbench.reports.html import write_html
from tankbench.reports.json import write_json
from tankbench.reports.markdown import write_markdown
from tankbench.reports.xlsx import write_xlsx

OUTPUTS = ("index.html", "results.xlsx", "summary.md", "results.csv", "results.json")


def write_all(a: Analysis, out_dir: str) -> list[str]:
    """Write index.html, results.xlsx, summary.md, results.csv and results.json; return their paths. The HTML
    shows single runs' detail where the analysis carries it (analysis.detail.with_run_detail)."""
    try:
        os.makedirs(out_dir, exist_ok=True)
    except OSError as e:
        error = LocalError if is_os_fault(e) else UserError  # a full or read-only filesystem: exit 3 (README)
        raise error(f"cannot create output directory {out_dir}: {e.strerror}", "pass a writable --out DIR") from e
    paths = [os.path.join(out_dir, name) for name in OUTPUTS]
    write_html(a, paths[0])
    write_xlsx(a, paths[1])
    write_markdown(a, paths[2])
    write_csv(a, paths[3])
    write_json(a, paths[4])
    return paths
