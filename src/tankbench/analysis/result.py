"""The Analysis (what every exporter reads) and the declaration of a report section (`SectionSpec`): a section
module declares its data once, and the analysis computes it into the Analysis under the section's name."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Generic, TypeVar

from tankbench.analysis.cases import Dataset
from tankbench.analysis.checks import Warning, emulation_layers
from tankbench.analysis.leaderboard import AxisComparison, Leaderboard
from tankbench.analysis.section import EVERY, Section

if TYPE_CHECKING:
    from tankbench.analysis.advice import GoalResult, MixAdvice, Recommendation
    from tankbench.analysis.clients import ClientRow
    from tankbench.analysis.crashes import CrashRow
    from tankbench.analysis.figures import Figure
    from tankbench.analysis.fill import FillRow
    from tankbench.analysis.guest import GuestTable
    from tankbench.journal.db import Journal

T = TypeVar("T")


@dataclass(frozen=True)
class SectionSpec(Generic[T]):
    """A report section's declaration (one module of analysis/sections/ each):

    - `name`: the key of its data in the Analysis (`a.part(SPEC)`); `order`: its place in every output;
    - `compute(ctx)`: its data, computed once by the analysis (`ctx.part(OTHER)` reads another section's data,
      `ctx.journal` is None when the analysis has no journal: sections that read single runs then have none);
    - `render(a, data)`: what it shows as blocks (analysis/section.py), or None to show nothing;
    - `json(a, data)`: the keys it adds to results.json (None: none);
    - `outputs`: where its blocks appear (html, md, xlsx, csv), `file`: also written alone as this Markdown file
      beside summary.md, `sheet_order`: where its XLSX sheets go when not at `order`;
    - `subreports(a, data)`: whole reports written in directories beside this one (a fleet's hosts)."""

    name: str
    order: int
    compute: Callable[[Context], T]
    render: Callable[[Analysis, T], Section | None]
    json: Callable[[Analysis, T], Mapping[str, Any]] | None = None
    outputs: frozenset[str] = EVERY
    file: str = ""
    sheet_order: int | None = None
    journal: bool = False  # computed from single runs in the journal (again by analysis.detail.with_run_detail)
    subreports: Callable[[Analysis, T], Sequence[tuple[str, Analysis]]] | None = None  # (directory, analysis)


@dataclass(frozen=True, kw_only=True)
class Analysis:
    """The whole result, from named parts: the dataset, the leaderboards and what they rest on, and each report
    section's data (`parts`, by section name). Exporters only read this."""

    dataset: Dataset
    rank_by: str
    leaderboards: tuple[Leaderboard, ...]
    comparisons: tuple[AxisComparison, ...]
    warnings: tuple[Warning, ...]
    selection: tuple[str, ...] = ()  # --group-by / --where as given, shown on every output
    parts: Mapping[str, Any] = field(default_factory=dict)
    options: Mapping[str, Any] = field(default_factory=dict)  # what the analysis was asked (mix, per_case)
    sections: tuple[SectionSpec[Any], ...] = ()  # the registry the parts were computed by, in report order

    def part(self, spec: SectionSpec[T]) -> T:
        """A section's data."""
        return self.parts[spec.name]  # type: ignore[no-any-return]

    def get(self, name: str, default: Any = None) -> Any:
        return self.parts.get(name, default)

    @property
    def emulated(self) -> bool:
        return any(w.code == "emulated" for w in self.warnings)

    @property
    def virtualisation(self) -> tuple[str, ...]:
        """Each layer's accelerator, per fingerprint (host, and the test guest where fio ran in one)."""
        return emulation_layers(fp.data for fp in self.dataset.fingerprints.values())

    # the parts other modules read by name (advise, the scheduler, tests)
    @property
    def recommendations(self) -> tuple[Recommendation, ...]:
        return self.get("recommendations", ())  # type: ignore[no-any-return]

    @property
    def mix(self) -> MixAdvice | None:
        return self.get("mix")  # type: ignore[no-any-return]

    @property
    def goals(self) -> tuple[GoalResult, ...]:
        return self.get("goals", ())  # type: ignore[no-any-return]

    @property
    def figures(self) -> tuple[Figure, ...]:
        return self.get("figures", ())  # type: ignore[no-any-return]

    @property
    def guests(self) -> tuple[GuestTable, ...]:
        return self.get("guests", ())  # type: ignore[no-any-return]

    @property
    def fill(self) -> tuple[FillRow, ...]:
        return self.get("fill", ())  # type: ignore[no-any-return]

    @property
    def crashes(self) -> tuple[CrashRow, ...]:
        return self.get("crashes", ())  # type: ignore[no-any-return]

    @property
    def series(self) -> Mapping[str, tuple[int, Mapping[str, Any]]]:
        """{test id: (runs.id, 1 Hz samples)} of the chosen tests' last measured runs (with a journal)."""
        detail = self.get("series")
        return detail.series if detail is not None else {}

    @property
    def percentiles(self) -> Mapping[str, Mapping[str, list[float]]]:
        """{test id: {direction: fio's latency percentiles in ms}} of the same runs."""
        detail = self.get("series")
        return detail.percentiles if detail is not None else {}

    @property
    def clients(self) -> tuple[ClientRow, ...]:
        return self.get("clients", ())  # type: ignore[no-any-return]


@dataclass
class Context:
    """What a section computes its data from: the Analysis so far (leaderboards, comparisons, warnings), the
    journal when there is one, the options of this analysis (`mix`: a [mix] that overrides the campaign's), and
    the other sections' data, each computed once on first use."""

    a: Analysis
    journal: Journal | None = None
    options: Mapping[str, Any] = field(default_factory=dict)
    specs: Mapping[str, SectionSpec[Any]] = field(default_factory=dict)
    done: dict[str, Any] = field(default_factory=dict)
    busy: set[str] = field(default_factory=set)

    @property
    def ds(self) -> Dataset:
        return self.a.dataset

    def part(self, spec: SectionSpec[T]) -> T:
        """Another section's data (computed now if it was not yet)."""
        if spec.name not in self.done:
            if spec.name in self.busy:
                raise RuntimeError(f"report sections depend on each other in a cycle: {sorted(self.busy)}")
            self.busy.add(spec.name)
            self.done[spec.name] = spec.compute(self)
            self.busy.discard(spec.name)
        return self.done[spec.name]  # type: ignore[no-any-return]
