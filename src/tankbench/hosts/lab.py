"""The lab VM as a Host: an ssh host that owns its lab name, fingerprints how it emulates hardware, and offers
what only a machine tankbench runs can do (Host.revive, after_reboot, forward_port, leave).

What the lab is (its state, where it lives, how it emulates hardware) and how it is driven (qemu, QMP) are the
lab package's: lab/vm.py hands the facts in and lab/control.py the controls (`LabControl`), so this module stays
below `lab` in the layer order.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Protocol

from tankbench.hosts.ssh import SshHost, control_path

#: slirp's gateway: where a lab sees every connection from this machine come from, and where a guest behind slirp
#: reaches this machine (and so another lab's forwarded port)
SLIRP_HOST = "10.0.2.2"


class LabControl(Protocol):
    """What lab/control.py does to a running lab on its LabHost's behalf."""

    def revive(self, host: LabHost, note: Callable[[str], None]) -> str | None: ...
    def apply_machine(self, host: LabHost, note: Callable[[str], None]) -> None: ...
    def forward(self, host: LabHost, port: int) -> tuple[int, str]: ...
    def unforward(self, host: LabHost, rule: str) -> None: ...
    def down(self, host: LabHost, note: Callable[[str], None]) -> None: ...
    def unmodel(self, host: LabHost, note: Callable[[str], None]) -> None: ...


class LabHost(SshHost):
    """root@127.0.0.1:<forwarded port> with the lab's own key and known_hosts.

    `started_here` says whether this process booted the lab (then `run` stops it when it ends, unless
    asked to keep it); a lab that was already up is left as it was. `lab_control` (lab/control.py) drives it: without
    one (a lab host for reading only) it is not booted again, forwarded to, or shut down.
    """

    managed = True
    nat_address = SLIRP_HOST

    def __init__(
        self,
        lab_name: str,
        *,
        ssh_port: int,
        lab_dir: Path,
        accelerator: str,
        facts: Mapping[str, object],
        started_here: bool = False,
        lab_control: LabControl | None = None,
    ) -> None:
        super().__init__(
            "127.0.0.1",
            user="root",
            port=ssh_port,
            identity=str(lab_dir / "id_ed25519"),
            known_hosts=str(lab_dir / "known_hosts"),
            strict_host_keys=True,
            connect_timeout=10,
            control_dir=lab_dir,
            name=lab_host_name(lab_name),
            accelerator=accelerator,
            extra_options=["-o", "HostKeyAlias=tankbench-lab"],
        )
        self.lab_name = lab_name
        self.lab_dir = lab_dir
        self.facts = dict(facts)
        self.started_here = started_here
        self.lab_control = lab_control

    def rebind(self, ssh_port: int, facts: Mapping[str, object]) -> None:
        """The lab was booted again (after a crash): its new ssh port; nothing cached from the old boot stays."""
        self.close()
        self.port = ssh_port
        self.control = control_path(self.target, ssh_port, self.lab_dir)
        self.facts = dict(facts)
        self.__dict__.pop("_private_dirs", None)

    def fingerprint_extra(self) -> dict[str, object]:
        """How the lab emulates hardware, for honest labelling of every run measured in it."""
        return dict(self.facts)

    def revive(self, note: Callable[[str], None]) -> str | None:
        return self.lab_control.revive(self, note) if self.lab_control is not None else None

    def after_reboot(self, note: Callable[[str], None]) -> None:
        if self.lab_control is not None:
            self.lab_control.apply_machine(self, note)

    def forward_port(self, port: int) -> tuple[int, str]:
        if self.lab_control is None:
            return super().forward_port(port)
        return self.lab_control.forward(self, port)

    def unforward(self, rule: str) -> None:
        if self.lab_control is not None:
            self.lab_control.unforward(self, rule)

    def leave(self, keep: bool, note: Callable[[str], None]) -> None:
        """Shut down a lab this run booted (unless asked to keep it); say so when a lab stays up (~3 GB resident)."""
        name = self.lab_name
        how = "tankbench lab down" + ("" if name == "default" else f" --name {name}")
        if self.started_here and not keep:
            if self.lab_control is not None:
                self.lab_control.down(self, note)
            return
        if self.lab_control is not None:
            self.lab_control.unmodel(self, note)
        if self.started_here:
            note(f"lab {name} is still up (--keep-lab): stop it with `{how}`")
        else:
            note(f"lab {name} was up before this run and is still up: stop it with `{how}`")


def lab_host_name(lab: str) -> str:
    """How runs on a lab name their host: `lab` for the default lab, `lab:<name>` for others."""
    return "lab" if lab == "default" else f"lab:{lab}"
