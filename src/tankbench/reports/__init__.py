"""Exporters: each takes an Analysis and writes one format (HTML, XLSX, Markdown, CSV, JSON)."""
