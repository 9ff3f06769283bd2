"""`run`: provision, precondition, run fio under a watchdog with samplers, journal each run, resume after crashes.

One job per module (docs/architecture.md): `session` (one host's part of a campaign around its runs: the journal
readied, crashes found, module parameters, hooks, leaving the lab; `run_campaign`), `loop` (the schedule loop of
one host: `CampaignRunner`), `run` (one run of a test), `failure` (host and guest failures as a state machine
with typed states), `probe` (the checks before anything is written), `context` (what those parts share),
`outcome` (the counts and the lines that say them)."""

from tankbench.runner.loop import CampaignRunner
from tankbench.runner.outcome import Outcome, describe, stop_status, summary_line
from tankbench.runner.probe import Preflight, fio_refusal, parse_check_jobs, preflight, target_kinds
from tankbench.runner.session import (
    Session,
    Stale,
    default_journal_path,
    end_stale,
    leave_host,
    leave_lab,
    local_has_zfs,
    open_host,
    ready_journal,
    run_campaign,
)

__all__ = [
    "CampaignRunner",
    "Outcome",
    "Preflight",
    "Session",
    "Stale",
    "default_journal_path",
    "describe",
    "end_stale",
    "fio_refusal",
    "leave_host",
    "leave_lab",
    "local_has_zfs",
    "open_host",
    "parse_check_jobs",
    "preflight",
    "ready_journal",
    "run_campaign",
    "stop_status",
    "summary_line",
    "target_kinds",
]
