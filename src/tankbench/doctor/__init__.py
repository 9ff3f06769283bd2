"""Read-only inspection of a live host: what `tankbench doctor` reports, and the host facts that relative
sizes (`"2x arc"`, `"50% free"`) are resolved against."""
