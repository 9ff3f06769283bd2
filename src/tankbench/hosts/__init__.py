"""Where commands run: local, ssh, lab — one interface (see base.Host)."""
