"""The lab VM as a Host: an ssh host that owns its lab name and fingerprints how it emulates hardware."""

from __future__ import annotations

from tankbench.hosts.ssh import SshHost
from tankbench.lab.state import LabState, fs_type, labs_dir


class LabHost(SshHost):
    """root@127.0.0.1:<forwarded port> with the lab's own key and known_hosts.

    `started_here` says whether this process booted the lab (then `run` stops it when it ends, unless
    asked to keep it); a lab that was already up is left as it was.
    """

    def __init__(self, state: LabState, *, started_here: bool = False) -> None:
        d = labs_dir() / state.name
        super().__init__(
            "127.0.0.1",
            user="root",
            port=state.ssh_port,
            identity=str(d / "id_ed25519"),
            known_hosts=str(d / "known_hosts"),
            strict_host_keys=True,
            connect_timeout=10,
            control_dir=d,
            name=lab_host_name(state.name),
            accelerator=state.accelerator,
            extra_options=["-o", "HostKeyAlias=tankbench-lab"],
        )
        self.lab_name = state.name
        self.state = state
        self.started_here = started_here

    def fingerprint_extra(self) -> dict[str, object]:
        """How the lab emulates hardware, for honest labelling of every run measured in it."""
        state = self.state
        return {
            "accelerator": state.accelerator,
            "lab_disk_backing": f"sparse file on {fs_type(labs_dir() / state.name)}",
            "lab_memory_mb": state.config.memory_mb,
            "lab_cpus": state.config.cpus,
            "lab_disk_size": state.config.disk_size,
            "lab_image": state.image_key,
            "lab_kernel": state.kernel_abi,
            "lab_zfs": state.zfs_version,
            "lab_emulated": state.accelerator != "kvm",
            "lab_l2arc": state.config.l2arc,
            # the disk models and the ARC size applied at campaign start (lab/diskmodels.py)
            **dict(state.extra.get("machine") or {}),  # type: ignore[call-overload]
        }


def lab_host_name(lab: str) -> str:
    """How runs on a lab name their host: `lab` for the default lab, `lab:<name>` for others."""
    return "lab" if lab == "default" else f"lab:{lab}"
