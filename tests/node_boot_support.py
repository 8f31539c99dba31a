"""Running the node template's boothooks (templates/node/main.tf `conceal_script`,
`fabric_manager_script`, `prefetch_script`) and what they install, on this machine, without root,
systemd, containerd or touching its firewall: a scratch node whose bin directory holds only the
tools the scripts may call and fakes of the rest, with every directory a boothook writes to moved
into a scratch directory.

The fakes:
- `iptables` keeps its tables in a JSON file and answers -N/-F/-A/-I/-C as iptables does, failing
  the calls that contain `fail`;
- `systemctl` and `poweroff` only record their calls, failing those that contain `command_fail`
  and hanging on those that contain `command_hang`;
- `crictl` (or `ctr`) records when each pull starts and ends, taking `pull_seconds` per image,
  failing images that contain `pull_fail`, hanging on those that contain `pull_hang`, and failing
  the first `flaky_failures` attempts of those that contain `pull_flaky` (as pulls in flight do
  when containerd restarts).

test_node_template_evaluated.py, test_node_template_kubelet_gates.py and test_node_template_prefetch.py
import it as `node_boot_support` (pytest puts tests/ on sys.path).
"""

from __future__ import annotations

import json
import os
import shlex
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

# The directories the boothooks write to, each named once on a line of its own (`dropin_dir=…`).
DIRECTORIES = {
    "dropin_dir": "/etc/systemd/system/kubelet.service.d",
    "installer_dir": "/etc/gpu-platform",
    "unit_dir": "/etc/systemd/system",
    "lib_dir": "/usr/local/lib/gpu-platform",
}
DROPIN_DIR_LINE = f"dropin_dir={DIRECTORIES['dropin_dir']}"
CONCEAL_DROPIN = "50-gpu-platform-metadata.conf"
FABRIC_MANAGER_DROPIN = "40-gpu-platform-fabric-manager.conf"
PATH_UNIT = "gpu-platform-image-prefetch.path"
SERVICE_UNIT = "gpu-platform-image-prefetch.service"
PULL_SCRIPT = "prefetch-images"

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
# `exec`: a `timeout` around the call stops the hanging command itself, not only its shell.
RECORDER = """#!/bin/sh
call="$(basename "$0") $*"
echo "$call" >>"$FAKE_CALLS"
case "$call" in *"${FAKE_COMMAND_HANG:-@none@}"*) exec sleep 30 ;; esac
case "$call" in *"${FAKE_COMMAND_FAIL:-@none@}"*) exit 1 ;; esac
exit 0
"""
# The image is the last argument; start and end are written with the time in nanoseconds. A
# flaky image's attempts are its start lines so far (this one's included).
FAKE_PULL = """#!/bin/sh
for image; do :; done
echo "start $image $(date +%s%N)" >>"$FAKE_PULLS"
echo "$(basename "$0") $*" >>"$FAKE_CALLS"
case "$image" in
  *"${FAKE_PULL_HANG:-@none@}"*) sleep 30 ;;
esac
sleep "${FAKE_PULL_SECONDS:-0}"
case "$image" in
  *"${FAKE_PULL_FAIL:-@none@}"*) exit 1 ;;
  *"${FAKE_PULL_FLAKY:-@none@}"*)
    tried=0
    while read -r what seen at; do
      if [ "$what $seen" = "start $image" ]; then tried=$((tried + 1)); fi
    done <"$FAKE_PULLS"
    [ "$tried" -gt "${FAKE_FLAKY_FAILURES:-0}" ] || exit 1 ;;
esac
echo "end $image $(date +%s%N)" >>"$FAKE_PULLS"
"""
TOOLS = ("mkdir", "cp", "cat", "chmod", "basename", "date", "sleep", "timeout", "ls", "wc", "grep")


@dataclass
class Run:
    """One run of a script: its exit status and output, how long it took, the commands it called
    and the iptables tables it left."""

    status: int
    stdout: str
    stderr: str
    seconds: float
    calls: list[str]
    tables: dict

    @property
    def powered_off(self) -> bool:
        return any(c.startswith(("systemctl", "poweroff")) and "poweroff" in c for c in self.calls)


def with_settings(script: str, settings: dict[str, str]) -> str:
    """The script with some of its `name=value` lines changed (each must be there once)."""
    for name, value in settings.items():
        [line] = [line for line in script.splitlines() if line.strip().startswith(f"{name}=")]
        script = script.replace(line, line.split("=", 1)[0] + f"={value}")
    return script


class Node:
    """A scratch node: a bin directory holding only the tools the scripts may call (the fakes
    among them), the boothooks' directories and the fakes' logs and state."""

    def __init__(self, root: Path, *, iptables: bool = True, pull_tool: str | None = "crictl"):
        self.root = root
        self.bin = root / "bin"
        self.bin.mkdir(parents=True)
        self.state = root / "iptables.json"
        self.calls = root / "calls.log"
        self.pulls = root / "pulls.log"
        self.dirs = {name: root / name.removesuffix("_dir") for name in DIRECTORIES}
        fakes = [("systemctl", RECORDER), ("poweroff", RECORDER)]
        fakes += [("iptables", FAKE_IPTABLES)] if iptables else []
        fakes += [(pull_tool, FAKE_PULL)] if pull_tool else []
        for name, text in fakes:
            (self.bin / name).write_text(text)
            (self.bin / name).chmod(0o755)
        for tool in TOOLS:
            (self.bin / tool).symlink_to(shutil.which(tool))

    @property
    def installer_dir(self) -> Path:
        return self.dirs["installer_dir"]

    @property
    def lib_dir(self) -> Path:
        return self.dirs["lib_dir"]

    def env(self, *, fail: str = "", command_fail: str = "", command_hang: str = "", pull_seconds: str = "", pull_fail: str = "",
            pull_hang: str = "", pull_flaky: str = "", flaky_failures: str = "") -> dict[str, str]:
        fakes = {
            "FAKE_IPTABLES_FAIL": fail,
            "FAKE_COMMAND_FAIL": command_fail,
            "FAKE_COMMAND_HANG": command_hang,
            "FAKE_PULL_SECONDS": pull_seconds,
            "FAKE_PULL_FAIL": pull_fail,
            "FAKE_PULL_HANG": pull_hang,
            "FAKE_PULL_FLAKY": pull_flaky,
            "FAKE_FLAKY_FAILURES": flaky_failures,
        }
        return {
            "PATH": str(self.bin),
            "FAKE_CALLS": str(self.calls),
            "FAKE_PULLS": str(self.pulls),
            "FAKE_IPTABLES_STATE": str(self.state),
            **{k: v for k, v in fakes.items() if v},
        }

    def _run(self, path: Path, **fakes: str) -> Run:
        self.calls.write_text("")
        start = time.monotonic()
        result = subprocess.run([str(path)], env=self.env(**fakes), capture_output=True, text=True, timeout=120)
        return Run(
            status=result.returncode,
            stdout=result.stdout,
            stderr=result.stderr,
            seconds=time.monotonic() - start,
            calls=self.calls.read_text().splitlines(),
            tables=json.loads(self.state.read_text()) if self.state.exists() else {},
        )

    def boot(self, script: str, *, name: str = "boothook", settings: dict[str, str] | None = None, **fakes: str) -> Run:
        """Run a boothook as cloud-init does (an executable file), every directory it writes to
        moved here and its `settings` lines changed."""
        for var, real in DIRECTORIES.items():
            line = f"{var}={real}"
            assert script.count(line) <= 1, f"the boothook names {var} once"
            script = script.replace(line, f"{var}={self.dirs[var]}")
        for real in DIRECTORIES.values():
            assert real not in script, f"the boothook writes to {real} other than through its variable"
        path = self.root / name
        path.write_text(with_settings(script, settings or {}))
        path.chmod(0o755)
        return self._run(path, **fakes)

    def file(self, var: str, name: str) -> str | None:
        path = self.dirs[var] / name
        return path.read_text() if path.exists() else None

    def dropin(self, name: str = CONCEAL_DROPIN) -> str | None:
        """A kubelet drop-in the boothook wrote, None if it wrote none of that name."""
        return self.file("dropin_dir", name)

    def unit(self, name: str) -> list[str]:
        return (self.file("unit_dir", name) or "").splitlines()

    def reboot(self) -> None:
        """iptables rules live in the kernel: a reboot starts with empty tables."""
        if self.state.exists():
            self.state.unlink()

    def kubelet_may_start(self, dropin: str, **fakes: str) -> bool:
        """Run the drop-in's ExecStartPre= commands as systemd would before starting the kubelet
        (a command given by absolute path runs from the fake bin directory, as on the node)."""
        commands = [line.split("=", 1)[1] for line in dropin.splitlines() if line.startswith("ExecStartPre=")]
        assert commands, dropin
        env = {**os.environ, **self.env(**fakes)}
        self.calls.write_text("")

        def run(command: str) -> int:
            argv = shlex.split(command)
            if argv[0] in ("/bin/systemctl",):
                argv[0] = str(self.bin / Path(argv[0]).name)
            return subprocess.run(argv, env=env, capture_output=True, timeout=60).returncode

        return all(run(c) == 0 for c in commands)

    def pull(self, *, settings: dict[str, str] | None = None, **fakes: str) -> Run:
        """Run the pull script the prefetch boothook installed, as its service would, with its
        `settings` lines (`limit`, `attempts`, `retry_seconds`) changed."""
        script = self.lib_dir / PULL_SCRIPT
        script.write_text(with_settings(script.read_text(), settings or {}))
        self.pulls.write_text("")
        return self._run(script, **fakes)

    def pull_attempts(self) -> dict[str, int]:
        """image → how many times the pull script started pulling it."""
        attempts: dict[str, int] = {}
        for line in self.pulls.read_text().splitlines():
            what, image, _ = line.split()
            attempts[image] = attempts.get(image, 0) + (what == "start")
        return attempts

    def pull_times(self) -> dict[str, dict[str, int]]:
        """image → {"start": ns, "end": ns} (no "end" for a pull that failed or was stopped)."""
        times: dict[str, dict[str, int]] = {}
        for line in self.pulls.read_text().splitlines():
            what, image, at = line.split()
            times.setdefault(image, {})[what] = int(at)
        return times


def images_of(script: str) -> list[str]:
    """The images a pull script (or the boothook holding it) pulls: its `images='…'` line."""
    [line] = [line for line in script.splitlines() if line.startswith("images='")]
    return line.removeprefix("images='").removesuffix("'").split()
