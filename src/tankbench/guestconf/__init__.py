"""A test guest's configuration and records, pure: its processor axes (machine), its disk's layers and their
sizes (layers), the copy commands it runs (copy), qemu's pauses on I/O errors (pauses), the pool-full experiment's
jobs and results (fill). The campaign parser, the plan, the kinds' declarations and the analysis import these;
running a guest is guest/'s (the runner's drivers)."""
