"""Who and where an ssh host entry logs in: the `user` and `address` of [host], of campaign.hosts entries and of a
target's clients. Each ends up as one word of ssh's argv (`user@address`), so a value that ssh could read as an
option (`-oProxyCommand=…`) or that carries spaces or newlines is refused here, when the campaign is read.

The sets are those `--host ssh://[user@]address[:port]` accepts (cli/_campaign.py SSH_RE, which keeps its own copy
of the pattern: the command line's grammar), minus a leading `-`.
"""

from __future__ import annotations

import re

#: a login name: letters, digits, '.', '_' and '-', not starting with '-'
SSH_USER_RE = re.compile(r"[A-Za-z0-9._][A-Za-z0-9._-]{0,63}")
#: a host name or IPv4 address (not starting with '-'), or an IPv6 literal (hex digits and colons, no brackets)
SSH_ADDRESS_RE = re.compile(r"[A-Za-z0-9_][A-Za-z0-9._-]{0,252}|[0-9A-Fa-f.]*:[0-9A-Fa-f:.]*")

USER_PROBLEM = "not a login name (letters, digits, '.', '_' or '-', not starting with '-')"
ADDRESS_PROBLEM = "not a host name or IP address (letters, digits, '.', '_', '-', ':', not starting with '-')"
USER_HINT = 'e.g. user = "root"'
ADDRESS_HINT = 'e.g. address = "bench.example.org", "10.0.0.2" or "fd00::2"'


def bad_login(user: str, address: str) -> str:
    """Which of the two is not acceptable ("user", "address"), or "" when both are."""
    if not SSH_USER_RE.fullmatch(user):
        return "user"
    if not SSH_ADDRESS_RE.fullmatch(address):
        return "address"
    return ""
