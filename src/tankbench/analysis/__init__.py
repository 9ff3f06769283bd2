"""Pure functions from journal data to conclusions: cases, leaderboards, statistics, warnings, advice."""
