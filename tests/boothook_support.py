"""Running the node template's boothooks (templates/node/main.tf `conceal_script`,
`fabric_manager_script`) on this machine, without root and without touching its firewall: a fake
`iptables` that keeps its tables in a JSON file and answers -N/-F/-A/-I/-C as iptables does, fake
`systemctl`/`poweroff` that only record being called (and fail where a test says so), and the
kubelet drop-in directory and the installer's directory moved into a scratch directory.

test_node_template.py imports it as `boothook_support` (pytest puts tests/ on sys.path).
"""

from __future__ import annotations

import json
import os
import shlex
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

DROPIN_DIR_LINE = "dropin_dir=/etc/systemd/system/kubelet.service.d"
INSTALLER_DIR_LINE = "installer_dir=/etc/gpu-platform"
DROPIN_NAME = "50-gpu-platform-metadata.conf"

# Built-in chains per table (iptables-extensions(8), "TABLES"); targets that are not chains.
BUILTIN_CHAINS = {"raw": ["PREROUTING", "OUTPUT"], "mangle": ["PREROUTING", "INPUT", "FORWARD", "OUTPUT", "POSTROUTING"]}
# -IS: isolated, no site packages: a fast start for a command the boothook calls often (one
# shebang argument: Linux passes everything after the interpreter as one).
FAKE_IPTABLES = f"""#!{sys.executable} -IS
import json, os, sys
args = sys.argv[1:]
with open(os.environ["FAKE_CALLS"], "a") as log:
    log.write("iptables " + " ".join(args) + "\\n")
if os.environ.get("FAKE_IPTABLES_FAIL") and os.environ["FAKE_IPTABLES_FAIL"] in " ".join(args):
    sys.exit(4)
path = os.environ["FAKE_IPTABLES_STATE"]
builtin = {json.dumps(BUILTIN_CHAINS)}
state = json.load(open(path)) if os.path.exists(path) else {{}}
args = [a for a in args if a != "-w"]
table = "filter"
if args[:1] == ["-t"]:
    table, args = args[1], args[2:]
chains = state.setdefault(table, {{c: [] for c in builtin.get(table, [])}})
op, chain, rule = args[0], args[1], args[2:]
if op == "-N":
    if chain in chains:
        sys.exit(1)
    chains[chain] = []
elif chain not in chains:
    sys.exit(1)
elif op == "-F":
    chains[chain] = []
elif op == "-C":
    sys.exit(0 if " ".join(rule) in chains[chain] else 1)
elif op in ("-A", "-I"):
    position = len(chains[chain]) + 1 if op == "-A" else 1
    if op == "-I" and rule and rule[0].isdigit():
        position, rule = int(rule[0]), rule[1:]
    target = rule[rule.index("-j") + 1]
    if target not in ("DROP", "RETURN", "ACCEPT") and target not in chains:
        sys.exit(2)
    chains[chain].insert(position - 1, " ".join(rule))
else:
    sys.exit(2)
json.dump(state, open(path, "w"))
"""
RECORDER = """#!/bin/sh
echo "$(basename "$0") $*" >>"$FAKE_CALLS"
case "$(basename "$0") $*" in *"$FAKE_COMMAND_FAIL"*) [ -n "$FAKE_COMMAND_FAIL" ] && exit 1 ;; esac
exit 0
"""


@dataclass
class Boot:
    """One run of the boothook: its exit status, stderr, the commands it called and what it left."""

    status: int
    stderr: str
    calls: list[str]
    tables: dict
    dropin: str | None

    @property
    def powered_off(self) -> bool:
        return any(c.startswith(("systemctl", "poweroff")) and "poweroff" in c for c in self.calls)


class Node:
    """A scratch node: a bin directory holding only the tools the boothook may call, its
    iptables state and its /etc/systemd/system/kubelet.service.d."""

    def __init__(self, root: Path, *, iptables: bool = True):
        self.root = root
        self.bin = root / "bin"
        self.bin.mkdir(parents=True)
        self.state = root / "iptables.json"
        self.calls = root / "calls.log"
        self.dropin_dir = root / "kubelet.service.d"
        self.installer_dir = root / "gpu-platform"
        for name, text in [("systemctl", RECORDER), ("poweroff", RECORDER)] + ([("iptables", FAKE_IPTABLES)] if iptables else []):
            (self.bin / name).write_text(text)
            (self.bin / name).chmod(0o755)
        for tool in ("mkdir", "basename", "cp"):
            (self.bin / tool).symlink_to(shutil.which(tool))

    def env(self, fail: str = "", command_fail: str = "") -> dict[str, str]:
        return {
            "PATH": str(self.bin),
            "FAKE_IPTABLES_STATE": str(self.state),
            "FAKE_CALLS": str(self.calls),
            "FAKE_IPTABLES_FAIL": fail,
            "FAKE_COMMAND_FAIL": command_fail,
        }

    def boot(self, script: str, *, fail: str = "", command_fail: str = "", name: str = "boothook", dropin_name: str = DROPIN_NAME) -> Boot:
        """Run the boothook as cloud-init does (an executable file), with the drop-in and
        installer directories moved here."""
        assert script.count(DROPIN_DIR_LINE) == 1, "the boothook names the kubelet drop-in directory once"
        assert script.count(INSTALLER_DIR_LINE) <= 1, "the boothook names the installer directory once"
        path = self.root / name
        path.write_text(
            script.replace(DROPIN_DIR_LINE, f"dropin_dir={self.dropin_dir}").replace(INSTALLER_DIR_LINE, f"installer_dir={self.installer_dir}")
        )
        path.chmod(0o755)
        self.calls.write_text("")
        result = subprocess.run([str(path)], env=self.env(fail, command_fail), capture_output=True, text=True, timeout=60)
        dropin = self.dropin_dir / dropin_name
        return Boot(
            status=result.returncode,
            stderr=result.stderr,
            calls=self.calls.read_text().splitlines(),
            tables=json.loads(self.state.read_text()) if self.state.exists() else {},
            dropin=dropin.read_text() if dropin.exists() else None,
        )

    def reboot(self) -> None:
        """iptables rules live in the kernel: a reboot starts with empty tables."""
        if self.state.exists():
            self.state.unlink()

    def kubelet_may_start(self, dropin: str, *, fail: str = "", command_fail: str = "") -> bool:
        """Run the drop-in's ExecStartPre= commands as systemd would before starting the kubelet
        (a command given by absolute path runs from the fake bin directory, as on the node)."""
        commands = [line.split("=", 1)[1] for line in dropin.splitlines() if line.startswith("ExecStartPre=")]
        assert commands, dropin
        env = {**os.environ, **self.env(fail, command_fail)}
        self.calls.write_text("")

        def run(command: str) -> int:
            argv = shlex.split(command)
            if argv[0] in ("/bin/systemctl",):
                argv[0] = str(self.bin / Path(argv[0]).name)
            return subprocess.run(argv, env=env, capture_output=True, timeout=60).returncode

        return all(run(c) == 0 for c in commands)
