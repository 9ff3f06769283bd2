"""fio: job files for tests, and parsing of fio's JSON output."""
