"""The report settings the analysis reads: defined with the campaign's other tables in campaign/report.py (one parser
for plan time and report time); re-exported here for the analysis and the CLI."""

from tankbench.campaign.report import (
    GOAL_METRICS,
    GOAL_OPS,
    Goal,
    Settings,
    parse_mix_text,
    parse_settings,
    parse_threshold,
    settings_from_doc,
)

__all__ = [
    "GOAL_METRICS",
    "GOAL_OPS",
    "Goal",
    "Settings",
    "parse_mix_text",
    "parse_settings",
    "parse_threshold",
    "settings_from_doc",
]
