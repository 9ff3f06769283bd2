"""tankbench: a reproducible storage-benchmark lab for ZFS."""

__version__ = "0.1.0"
