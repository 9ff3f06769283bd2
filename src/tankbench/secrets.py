"""ZFS encryption key files: 32 random bytes, mode 0600, in a 0700 directory of the host's user.

The key of a campaign's encrypted datasets must outlive one `tankbench run` (resume, reboot: the datasets'
keylocation points at it) and go away with `tankbench clean`. It used to live in the world-writable
/var/tmp/tankbench/, where another user could pre-create the directory or the file. The agent creates and
checks both on the host (hosts.base.Host.private_dir, agent op `key`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:  # the key names are pure: export scripts and the plan read them without loading hosts
    from tankbench.hosts.base import Host

#: the private directory (under ~/.cache/tankbench on the host) that holds key files
KEY_DIR = "keys"
#: the same place for shell scripts that run without tankbench (plan --export): the shell expands $HOME
SCRIPT_KEY_DIR = "$HOME/.cache/tankbench/" + KEY_DIR


def key_file_name(root: str) -> str:
    """The key file of a campaign's ZFS root dataset, e.g. "tank_bench.key" for tank/bench."""
    return root.replace("/", "_") + ".key"


def key_dir(host: Host) -> str:
    """The host's key directory (created 0700 and checked on first use)."""
    return host.private_dir(KEY_DIR)


def ensure_key(host: Host, root: str) -> str:
    """Create the key file of `root` on the host unless it exists (0600, 32 random bytes); return its path.

    An existing file that is not a 32-byte regular file owned by the host's user is refused (HostError)."""
    res = host.call_agent({"op": "key", "dir": key_dir(host), "name": key_file_name(root)}, timeout=60)
    return str(res["path"])


def remove_key(host: Host, root: str) -> bool:
    """Delete the key file of `root` on the host; whether there was one."""
    res = host.call_agent(
        {"op": "key", "action": "remove", "dir": key_dir(host), "name": key_file_name(root)}, timeout=60
    )
    return bool(res["removed"])
