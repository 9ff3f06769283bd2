"""summary.md: the conclusions in a form that pastes into a forum post or an OpenZFS issue, and the sections that
are also written alone as their own Markdown file (clients.md, hosts.md). Sections are rendered block by block."""

from __future__ import annotations

from collections.abc import Sequence

from tankbench.analysis.figures import Figure
from tankbench.analysis.present import fmt, metric_label
from tankbench.analysis.result import Analysis
from tankbench.analysis.section import MD, Block, Figures, Items, Para, Part, Section, Span, Table, Text, plain
from tankbench.reports.render import Rendered, blocks_for, cell_text, columns_for, in_output, more_text, rendered, shows
from tankbench.reports.render import shown_rows as shown


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def span_md(s: Span) -> str:
    if s.style == "b":
        return f"**{s.text}**"
    if s.style == "i":
        return f"*{s.text}*"
    if s.style == "code":
        return f"`{s.text}`"
    if s.style.startswith("badge"):
        return f" ({s.text})"
    if s.style == "command":
        return f"\n\n    {s.text}\n\n"
    return s.text


def text_md(t: Text) -> str:
    return t if isinstance(t, str) else "".join(span_md(s) for s in t)


def table_md(t: Table) -> list[str]:
    cols = columns_for(t, MD)
    rows, total = shown(t, MD)
    lines = ["| " + " | ".join(_cell(t.columns[i].heading) for i in cols) + " |", "|---" * len(cols) + "|"]
    lines += ["| " + " | ".join(_cell(text_md(cell_text(r[i]))) for i in cols) + " |" for r in rows]
    more = more_text(t, len(rows), total)
    return lines + ([""] + [more] if more else [])


def figure_md(f: Figure, level: int) -> list[str]:
    """A figure as a table: one row per series, one column per x value (the HTML draws it)."""
    unit = f.y_label or ("" if f.metric == "auto" else metric_label(f.metric))
    lines = [f"{'#' * level} Figure: {f.title}{f' ({unit})' if unit else ''}", ""]
    if f.common:
        lines += [f"All rows: {f.common}.", ""]
    if f.note:
        lines += [f"> {f.note}", ""]
    lines += [f"| {f.x} → | " + " | ".join(_cell(x) for x in f.x_values) + " |", "|---" * (1 + len(f.x_values)) + "|"]
    lines += [
        f"| {_cell(s.label)} | " + " | ".join(fmt(v) if v is not None else "—" for _, v in s.points) + " |"
        for s in f.series
    ]
    return lines


def block_md(b: Block, level: int) -> list[str]:
    if isinstance(b, Para) and b.style == "pre":
        return ["```", plain(b.text), "```"]
    if isinstance(b, Para):
        text = text_md(b.text)
        return [f"> {text}"] if b.style in ("banner", "note", "quote") else [text]
    if isinstance(b, Items):
        return [f"- {text_md(i)}" for i in b.items] or [b.empty]
    if isinstance(b, Table):
        return ([f"{'#' * level} {b.title}", ""] if b.title else []) + table_md(b)
    if isinstance(b, Part):
        return [f"{'#' * level} {text_md(b.title)}", ""] + blocks_md(b.blocks, level + 1)[:-1]
    if isinstance(b, Figures):
        return [line for f in b.figures for line in (*figure_md(f, level), "")][:-1]
    return []


def blocks_md(blocks: Sequence[Block], level: int) -> list[str]:
    out: list[str] = []
    for b in blocks_for(blocks, MD):
        out += block_md(b, level) + [""]
    return out


def section_md(s: Section, level: int | None = None) -> list[str]:
    lv = level or s.level
    return [f"{'#' * lv} {s.title}", ""] + blocks_md(s.blocks, lv + 1)


def summary_markdown(a: Analysis, sections: Sequence[Rendered] | None = None) -> str:
    """The whole summary.md text."""
    out: list[str] = []
    for r in sections if sections is not None else rendered(a):
        if in_output(r, MD) and shows(r.section, MD):
            out += section_md(r.section)
    return "\n".join(out)


def section_file(r: Rendered) -> str:
    """A section written alone (clients.md, hosts.md): its title as the page's."""
    return "\n".join(section_md(r.section, 1))


def write_markdown(a: Analysis, path: str, sections: Sequence[Rendered] | None = None) -> None:
    with open(path, "w", encoding="utf-8") as f:
        f.write(summary_markdown(a, sections))
