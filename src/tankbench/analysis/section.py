"""What a report section shows, as generic blocks (paragraphs, lists, tables, charts): every exporter renders
blocks, never a section it knows by name. A section's declaration (its data, its place) is
analysis/result.py's `SectionSpec`; docs/report.md says how to add one."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, overload

from tankbench.analysis.figures import Figure

#: the outputs a block or a column can be limited to (results.json gets a section's data, not its blocks)
HTML, MD, XLSX, CSV = "html", "md", "xlsx", "csv"
EVERY = frozenset({HTML, MD, XLSX, CSV})
READ = frozenset({HTML, MD})  # what people read; XLSX and CSV are for computing


@dataclass(frozen=True)
class Span:
    """Inline text: `style` is "" (plain), "b", "i", "code", "small", "badge" (a marker: HTML badge, Markdown
    "(text)"), or a CSS class (HTML only); `tip` says how a figure was obtained (HTML tooltip)."""

    text: str
    style: str = ""
    tip: str = ""


#: text of a paragraph, list item or cell: plain, or spans (never markup: names from data stay text)
Text = str | tuple[Span, ...]


def plain(text: Text) -> str:
    """The text without its styles."""
    return text if isinstance(text, str) else "".join(s.text for s in text)


@dataclass(frozen=True)
class Para:
    """A paragraph; style "small" (a caption), "note" (why this matters), "banner" (a warning the reader must
    not miss), "quote" (a remark)."""

    text: Text
    style: str = ""
    id: str = ""
    only: frozenset[str] = READ


@dataclass(frozen=True)
class Items:
    """A bulleted list; `empty` is shown when there are no items."""

    items: tuple[Text, ...]
    empty: str = "None."
    only: frozenset[str] = READ


@dataclass(frozen=True)
class Column:
    """A table column: `key` heads it in XLSX and CSV, `title` in HTML and Markdown; `tip` says how its values are
    obtained (HTML tooltip, XLSX comment); `num` aligns right; `scale` colours it red (worst) to green (best):
    True when higher is better, False when lower is; `width` and `number_format` for XLSX."""

    key: str
    title: str = ""
    tip: str = ""
    num: bool = False
    only: frozenset[str] = EVERY
    scale: bool | None = None
    width: float | None = None
    number_format: str = ""

    @property
    def heading(self) -> str:
        return self.title or self.key


@dataclass(frozen=True)
class Cell:
    """A value with what people read: `value` goes to XLSX and CSV as it is (numbers stay numbers), `text` to HTML
    and Markdown; `tip` (HTML tooltip), `colour` (HTML background), `style` (HTML class of the cell)."""

    value: Any
    text: Text | None = None
    tip: str = ""
    colour: str = ""
    style: str = ""


class Lazy(Sequence[Sequence[Any]]):
    """Rows built when an exporter first reads them, once (every run of a journal: the CSV and the XLSX)."""

    def __init__(self, make: Callable[[], Sequence[Sequence[Any]]]) -> None:
        self._make = make
        self._rows: Sequence[Sequence[Any]] | None = None

    @property
    def rows(self) -> Sequence[Sequence[Any]]:
        if self._rows is None:
            self._rows = self._make()
        return self._rows

    @overload
    def __getitem__(self, i: int) -> Sequence[Any]: ...
    @overload
    def __getitem__(self, i: slice) -> Sequence[Sequence[Any]]: ...
    def __getitem__(self, i: int | slice) -> Sequence[Any] | Sequence[Sequence[Any]]:
        return self.rows[i]

    def __len__(self) -> int:
        return len(self.rows)

    def __iter__(self) -> Iterator[Sequence[Any]]:
        return iter(self.rows)


@dataclass(frozen=True)
class Table:
    """Rows of values or Cells under columns. `limit` caps the rows shown per output (the rest counted in
    `more`), `row_styles` gives each row a class (HTML), `sheet` its own XLSX sheet, `fill_style` the row
    styles whose first `fill_columns` cells XLSX fills."""

    columns: tuple[Column, ...]
    rows: Sequence[Sequence[Any]]
    title: str = ""
    limit: Mapping[str, int] = field(default_factory=dict)
    more: str = ""  # "{shown}", "{total}" and "{rest}" are filled in
    row_styles: Sequence[str] = ()
    only: frozenset[str] = EVERY
    sheet: str = ""
    freeze: bool = False  # XLSX: header row frozen
    fill_style: str = ""
    fill_columns: int = 0
    wide: bool = True  # HTML: scrolls sideways inside its own box
    total: int | None = None  # the rows there are when `rows` holds only those people read


@dataclass(frozen=True)
class Bars:
    """Horizontal bars with 95 % CI whiskers (HTML): each bar (label, value, CI low or None, CI high or None,
    colour class, tooltip)."""

    label: str
    bars: tuple[tuple[str, float, float | None, float | None, str, str], ...]
    caption: str
    only: frozenset[str] = frozenset({HTML})


@dataclass(frozen=True)
class Lines:
    """Small time-series charts of one run (HTML): (name, title, seconds, values) each."""

    charts: tuple[tuple[str, str, tuple[float, ...], tuple[float | None, ...]], ...]
    only: frozenset[str] = frozenset({HTML})


@dataclass(frozen=True)
class Figures:
    """Charts as data (analysis/figures.py): HTML draws them, Markdown and XLSX tabulate them; `higher` says per
    test case whether higher is better (heatmap colours)."""

    figures: tuple[Figure, ...]
    higher: Mapping[str, bool] = field(default_factory=dict)
    only: frozenset[str] = frozenset({HTML, MD, XLSX})


@dataclass(frozen=True)
class Part:
    """A titled group of blocks inside a section (HTML <section class=kind data-*=attrs>, Markdown ###); `sheet`
    puts its XLSX blocks on a sheet of their own."""

    title: Text
    blocks: tuple[Block, ...]
    kind: str = ""
    attrs: Mapping[str, str] = field(default_factory=dict)
    sheet: str = ""
    only: frozenset[str] = EVERY


Block = Para | Items | Table | Bars | Lines | Figures | Part


@dataclass(frozen=True)
class Section:
    """What a section shows: its heading (level 1 is the report's title), an anchor, and its blocks."""

    id: str
    title: str
    blocks: tuple[Block, ...]
    level: int = 2
    sheet: str = ""  # XLSX: the sheet of its blocks that name none of their own ("": not in the workbook)
