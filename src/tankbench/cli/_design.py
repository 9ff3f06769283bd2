"""What plan and run say and keep about a designed campaign (issue 29): each step's tests and estimate, and the
screening's record in the journal (which tests it chose per workload, from which campaign and options)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from tankbench.campaign import Spec
from tankbench.campaign.expand import expand_matrix, include_ids
from tankbench.journal import Journal
from tankbench.journal.lock import JournalLock
from tankbench.model import Test
from tankbench.progress import fmt_estimate
from tankbench.schedule.design import WorkloadDesign, refine_projection, refine_spec, screening
from tankbench.schedule.estimate import Estimate


def screening_record(spec: Spec, designs: list[WorkloadDesign], ref: dict[str, Any]) -> dict[str, Any]:
    """The screening step as the journal keeps it."""
    d = spec.design
    return {
        "design": {"top": d.top, "runs": d.runs, "workload": list(d.workload)},
        "campaign": ref,
        "workloads": [w.as_dict() for w in designs],
    }


def record_screening(spec: Spec, journal_path: str, ref: dict[str, Any]) -> None:
    """Journal the screening's choice before its runs (once: a resumed run finds it); `ref`: how `refine` finds
    the campaign again (the file, absolutely, or the preset, and the options it ran with)."""
    designs = screening(spec, expand_matrix(spec), include_ids(spec))
    data = screening_record(spec, designs, ref)
    with JournalLock(journal_path), Journal(journal_path) as j:
        same = [
            s
            for s in j.design_steps()
            if s["step"] == "screening"
            and s["campaign_id"] == spec.campaign_id
            and s["data"]["workloads"] == data["workloads"]
        ]
        if not same:
            j.add_design_step(spec.campaign_id, "screening", data)


#: plan's estimate: (spec, tests, journal, real_host=…) -> (estimate, scheduler, learned)
EstimateFn = Callable[..., tuple[Estimate, Any, bool]]


def design_lines(
    spec: Spec,
    full: list[Test],
    tests: list[Test],
    est: Estimate,
    real: Estimate | None,
    journal: str,
    estimate: EstimateFn,
) -> tuple[list[str], dict[str, Any]]:
    """plan's lines about a screening: per workload what it runs, then the refine step's projected size and
    estimate, and both steps together (the JSON carries the same)."""
    designs = screening(spec, full, include_ids(spec))
    lines = [f"Design: screening, {len(tests)} of the matrix's {len(full)} tests ({len(designs)} workloads):"]
    for w in designs:
        names = ", ".join(f.name for f in w.factors)
        if w.note:
            lines.append(f"  {w.name}: {len(w.chosen)} of {len(w.candidates)} tests — {w.note}")
        else:
            lines.append(
                f"  {w.name}: {len(w.chosen)} of {len(w.candidates)} tests, {w.parameters} parameters over {names}, "
                f"D-efficiency {w.d_efficiency:.2f} of the full matrix's"
            )
    proj = refine_projection(designs, full, spec.design.top)
    rspec = refine_spec(spec, [t.id for t in proj.tests])
    r_est = estimate(rspec, list(proj.tests), journal)[0]
    r_real = estimate(rspec, list(proj.tests), journal, real_host=True)[0] if real is not None else None
    lines += [
        f"Step 1, screening: {fmt_estimate(est)}"
        + (f"; on a real ZFS host {fmt_estimate(real)}" if real else "")
        + ".",
        f"Step 2, refine (`tankbench refine JOURNAL` after the screening; its tests depend on what the screening finds): "
        f"the top {spec.design.top} factors of each workload in full, the rest at their best level: likely "
        f"{proj.likely} tests ({proj.low}–{proj.high} over every choice of top factors), {len(proj.tests)} of them "
        f"not in the screening, {fmt_estimate(r_est)}"
        + (f"; on a real ZFS host {fmt_estimate(r_real)}" if r_real else "")
        + ".",
        f"Both steps, likely: {_dur(est.likely + r_est.likely)}"
        + (f"; on a real ZFS host {_dur(real.likely + r_real.likely)}" if real and r_real else "")
        + ".",
    ]
    data = {
        "step": "screening",
        "matrix_tests": len(full),
        "workloads": [
            {"name": w.name, "candidates": len(w.candidates), "chosen": len(w.chosen), "parameters": w.parameters}
            for w in designs
        ],
        "refine": {
            "tests_low": proj.low,
            "tests_likely": proj.likely,
            "tests_high": proj.high,
            "tests_new": len(proj.tests),
            "estimate": _est_json(r_est),
            "estimate_real_host": _est_json(r_real) if r_real else None,
        },
    }
    return lines, data


def _est_json(e: Estimate) -> dict[str, float]:
    return {"low_s": round(e.low, 1), "likely_s": round(e.likely, 1), "high_s": round(e.high, 1)}


def _dur(seconds: float) -> str:
    from tankbench.units import fmt_duration

    return fmt_duration(seconds)
