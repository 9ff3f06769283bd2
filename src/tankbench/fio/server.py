"""fio's server mode as tankbench starts it on a client host, pure: the port and the script (fio/clientserver.py
runs it over ssh; exported scripts name it)."""

from __future__ import annotations

#: fio's own default server port
DEFAULT_PORT = 8765

#: runs on the client as `sh -c SERVER_SCRIPT sh PORT`: fio serves on loopback until our stdin closes
SERVER_SCRIPT = (
    'fio --server=127.0.0.1,"$1" </dev/null & pid=$!; echo "tankbench-fio-server $pid"; '
    'cat >/dev/null; kill "$pid" 2>/dev/null; wait "$pid"'
)
