"""Write all five outputs of `tankbench report` into one directory."""

from __future__ import annotations

import os

from tankbench.analysis.analyse import Analysis
from tankbench.errors import UserError
from tankbench.journal.db import Journal
from tankbench.reports.csv import write_csv
from tankbench.reports.html import load_percentiles, load_series, select_series_tests, write_html
from tankbench.reports.json import write_json
from tankbench.reports.markdown import write_markdown
from tankbench.reports.xlsx import write_xlsx

OUTPUTS = ("index.html", "results.xlsx", "summary.md", "results.csv", "results.json")


def write_all(a: Analysis, out_dir: str, journal: Journal) -> list[str]:
    """Write index.html, results.xlsx, summary.md, results.csv and results.json; return their paths."""
    try:
        os.makedirs(out_dir, exist_ok=True)
    except OSError as e:
        raise UserError(f"cannot create output directory {out_dir}: {e.strerror}", "pass a writable --out DIR") from e
    paths = [os.path.join(out_dir, name) for name in OUTPUTS]
    picked = select_series_tests(a)
    write_html(a, paths[0], load_series(journal, picked), load_percentiles(journal, picked))
    write_xlsx(a, paths[1])
    write_markdown(a, paths[2])
    write_csv(a, paths[3])
    write_json(a, paths[4])
    return paths
