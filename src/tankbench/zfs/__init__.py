"""ZFS text parsers and honesty checks: pure functions over outputs the agent ships back.

Nothing here runs a command: the agent captures `zpool iostat`, `zfs get`, `zpool status`, kstats and
module parameters as text on the benchmarked host; these functions turn that text into journal fields.
Metric keys are documented in docs/zfs-metrics.md.
"""
