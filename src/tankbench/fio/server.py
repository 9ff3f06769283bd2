"""fio's server mode as tankbench starts it on a client host, pure: its port and script (fio/clientserver.py
runs it over ssh; exported scripts name it)."""

from __future__ import annotations

#: fio's own default server port (the campaign key `client_port` is read and kept in test ids; no port opens)
DEFAULT_PORT = 8765

#: runs on the client as `sh -c SERVER_SCRIPT sh DIR`: fio serves on DIR/fio.sock until our stdin closes, then it
#: and everything under it end and DIR goes
SERVER_SCRIPT = (
    'd=$1; mkdir -m 700 "$d" || exit 3; '
    'fio --server=sock:"$d/fio.sock" </dev/null >/dev/null 2>&1 & pid=$!; echo "tankbench-fio-server $pid"; '
    "cat >/dev/null; "
    'tree() { echo "$1"; for c in $(ps -o pid= --ppid "$1" 2>/dev/null); do tree "$c"; done; }; '
    'alive() { for p; do case $(ps -o stat= -p "$p" 2>/dev/null) in ""|Z*) ;; *) return 0;; esac; done; return 1; }; '
    'all=$(tree "$pid"); kill -TERM $all 2>/dev/null; '
    "n=0; while [ $n -lt 20 ] && alive $all; do sleep 0.1; n=$((n+1)); done; "
    'kill -KILL $all 2>/dev/null; wait "$pid" 2>/dev/null; rm -rf "$d"'
)
