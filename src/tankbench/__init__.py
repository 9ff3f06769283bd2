"""tankbench: a reproducible storage-benchmark lab for ZFS."""

__version__ = "0.1.0"
#: the layout of tankbench's JSON exports (results.json, compare --json, advise --json): bump it when a key
#: changes meaning or goes away, so a reader can tell which layout it holds
EXPORT_FORMAT = 1
