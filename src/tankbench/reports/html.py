"""index.html: one self-contained file (inline CSS and SVG, no script, no CDN) that works offline. It renders
the report's sections (analysis/sections/) block by block, none of them by name."""

from __future__ import annotations

import html
from collections.abc import Sequence
from typing import Any

from tankbench.analysis.result import Analysis
from tankbench.analysis.section import (
    HTML,
    Bars,
    Block,
    Cell,
    Figures,
    Items,
    Lines,
    Para,
    Part,
    Section,
    Span,
    Table,
    Text,
    plain,
)
from tankbench.reports.charts import figure_html, hbars_svg, series_svg
from tankbench.reports.render import (
    Rendered,
    blocks_for,
    cell_text,
    columns_for,
    in_output,
    more_text,
    rendered,
    shown_rows,
    shows,
)

CSS = """
body{font:14px/1.45 system-ui,sans-serif;margin:0 auto;max-width:1280px;padding:0 16px 40px;color:#1b1f24}
h1{font-size:24px;margin:18px 0 4px}h2{border-bottom:2px solid #d0d7de;padding-bottom:3px;margin-top:30px}
h3{margin:18px 0 6px}table{border-collapse:collapse;margin:6px 0 10px;font-size:13px}
th,td{border:1px solid #d0d7de;padding:3px 6px;vertical-align:top;text-align:left}th{background:#f3f5f7}
td.num{text-align:right;white-space:nowrap}.ex{text-decoration:underline dotted #888;cursor:help}
.banner{background:#ffe3b3;border:2px solid #d98b00;padding:10px 14px;font-weight:600;margin:12px 0}
tr.zvol td:first-child,tr.zvol td:nth-child(2){background:#fff1c9}tr.baseline td:nth-child(2){font-style:italic}
.badge{font-size:11px;padding:0 4px;border-radius:3px;background:#ddf4ff;color:#0550ae;margin-left:4px}
.win{background:#fff8c5;color:#7d4e00}.badge.zvol{background:#ffe7a3;color:#9a6700}
.sev-error{color:#b3261e;font-weight:700}.sev-warning{color:#9a6700;font-weight:700}.sev-info{color:#57606a}
.chip{display:inline-block;font-size:11px;border:1px solid #d0d7de;border-radius:3px;padding:0 3px;margin:1px}
.chip.w{color:#888;border-style:dashed}.small{font-size:12px;color:#57606a}.charts{display:flex;flex-wrap:wrap;gap:8px}
.wide{overflow-x:auto;max-width:100%}.figs{display:flex;flex-wrap:wrap;gap:14px}.fig{max-width:600px}.fig h4{margin:8px 0 2px;font-size:13px}
.note{background:#fff8c5;border-left:4px solid #d4a72c;padding:4px 8px;font-size:12px}
.quote{border-left:4px solid #d0d7de;padding:2px 8px;color:#57606a}
.legend span{display:inline-block;margin-right:12px}.legend i{display:inline-block;width:12px;height:10px;margin-right:4px}
pre{background:#f6f8fa;padding:6px 10px;overflow-x:auto}
svg text{font:11px system-ui,sans-serif}
"""


def e(x: Any) -> str:
    return html.escape(str(x), quote=True)


def ex(text: str, why: str) -> str:
    """Text with a tooltip saying how it was obtained."""
    return f'<span class="ex" title="{e(why)}">{e(text)}</span>'


def span_html(s: Span) -> str:
    inner = ex(s.text, s.tip) if s.tip and s.style in ("", "b", "i", "code") else e(s.text)
    if not s.style:
        return inner
    if s.style in ("b", "i", "code"):
        return f"<{s.style}>{inner}</{s.style}>"
    if s.style.startswith("swatch "):
        return f'<span><i style="background:{e(s.style[7:])}"></i>{inner}</span>'
    if s.style == "key":
        return f"<span>{inner}</span>"
    if s.style == "command":
        return f"<pre><code>{inner}</code></pre>"
    title = f' title="{e(s.tip)}"' if s.tip else ""
    return f'<span class="{e(s.style)}"{title}>{inner}</span>'


def text_html(t: Text) -> str:
    return e(t) if isinstance(t, str) else "".join(span_html(s) for s in t)


def para_html(p: Para) -> str:
    ident = f' id="{e(p.id)}"' if p.id else ""
    if p.style == "pre":
        text = plain(p.text)
        pre = f"<pre{ident}>{e(text)}</pre>"
        lines = text.count("\n") + 1
        return pre if lines <= 12 else f"<details><summary>{lines} lines</summary>{pre}</details>"
    if p.style == "banner":
        return f'<div class="banner"{ident}>{text_html(p.text)}</div>'
    cls = f' class="{e(p.style)}"' if p.style else ""
    return f"<p{cls}{ident}>{text_html(p.text)}</p>"


def items_html(i: Items) -> str:
    if not i.items:
        return f"<p>{e(i.empty)}</p>"
    return "<ul>" + "".join(f"<li>{text_html(t)}</li>" for t in i.items) + "</ul>"


def _td(v: Any, num: bool) -> str:
    classes = ["num"] if num else []
    style = ""
    if isinstance(v, Cell):
        classes += [v.style] if v.style else []
        style = f' style="background:{e(v.colour)}"' if v.colour else ""
    text = cell_text(v)
    tip = v.tip if isinstance(v, Cell) else ""
    body = ex(text, tip) if tip and isinstance(text, str) else text_html(text)
    cls = f' class="{" ".join(classes)}"' if classes else ""
    return f"<td{cls}{style}>{body}</td>"


def table_html(t: Table) -> str:
    cols = columns_for(t, HTML)
    head = "".join(
        f"<th>{ex(t.columns[i].heading, t.columns[i].tip) if t.columns[i].tip else e(t.columns[i].heading)}</th>"
        for i in cols
    )
    rows, total = shown_rows(t, HTML)
    nums = [t.columns[i].num for i in cols]
    body = []
    for n, row in enumerate(rows):
        style = t.row_styles[n] if n < len(t.row_styles) and t.row_styles[n] else ""
        cells = "".join(_td(row[i], num) for i, num in zip(cols, nums))
        body.append(f'<tr class="{e(style)}">{cells}</tr>' if style else f"<tr>{cells}</tr>")
    out = f"<table><tr>{head}</tr>{''.join(body)}</table>"
    out = f'<div class="wide">{out}</div>' if t.wide else out
    more = more_text(t, len(rows), total)
    return out + (f'<p class="small">{e(more)}</p>' if more else "")


def part_html(p: Part) -> str:
    inner = f"<h3>{text_html(p.title)}</h3>{blocks_html(p.blocks)}"
    if not p.kind:
        return inner
    attrs = "".join(f' {e(k)}="{e(v)}"' for k, v in p.attrs.items())
    return f'<section class="{e(p.kind)}"{attrs}>{inner}</section>'


def block_html(b: Block) -> str:
    if isinstance(b, Para):
        return para_html(b)
    if isinstance(b, Items):
        return items_html(b)
    if isinstance(b, Table):
        return table_html(b)
    if isinstance(b, Part):
        return part_html(b)
    if isinstance(b, Bars):
        return hbars_svg(b)
    if isinstance(b, Lines):
        charts = "".join(series_svg(*c) for c in b.charts)
        return f'<div class="charts">{charts or "<p>no samples</p>"}</div>'
    assert isinstance(b, Figures)
    return f'<div class="figs">{"".join(figure_html(f, b.higher) for f in b.figures)}</div>'


def blocks_html(blocks: Sequence[Block]) -> str:
    return "".join(block_html(b) for b in blocks_for(blocks, HTML))


def section_html(s: Section) -> str:
    head = f"<h1>{e(s.title)}</h1>" if s.level == 1 else f'<h{s.level} id="{e(s.id)}">{e(s.title)}</h{s.level}>'
    return head + blocks_html(s.blocks)


def render_html(a: Analysis, sections: Sequence[Rendered] | None = None) -> str:
    """The whole page as one string."""
    shown = sections if sections is not None else rendered(a)
    body = "".join(section_html(r.section) for r in shown if in_output(r, HTML) and shows(r.section, HTML))
    return (
        f'<!DOCTYPE html><html lang="en"><head><meta charset="utf-8"><title>tankbench report</title>'
        f'<meta name="viewport" content="width=device-width"><style>{CSS}</style></head><body>{body}</body></html>'
    )


def write_html(a: Analysis, path: str, sections: Sequence[Rendered] | None = None) -> None:
    with open(path, "w", encoding="utf-8") as f:
        f.write(render_html(a, sections))
