"""Running the node template's image-prefetch boothook (templates/node/main.tf `prefetch_script`)
and the pull script it installs on this machine, without root, systemd or containerd: its unit and
library directories moved into a scratch directory, a fake `systemctl` that records its calls, and
a fake `crictl` (or `ctr`) that records when each pull starts and ends, taking `FAKE_PULL_SECONDS`
per image, failing images that contain `FAKE_PULL_FAIL`, hanging on those with `FAKE_PULL_HANG`.

test_node_template.py imports it as `prefetch_support` (pytest puts tests/ on sys.path).
"""

from __future__ import annotations

import shutil
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

UNIT_DIR_LINE = "unit_dir=/etc/systemd/system"
LIB_DIR_LINE = "lib_dir=/usr/local/lib/gpu-platform"
LIMIT_LINE = "limit=600"
PATH_UNIT = "gpu-platform-image-prefetch.path"
SERVICE_UNIT = "gpu-platform-image-prefetch.service"
PULL_SCRIPT = "prefetch-images"

RECORDER = """#!/bin/sh
echo "$(basename "$0") $*" >>"$FAKE_CALLS"
[ -z "$FAKE_SYSTEMCTL_FAIL" ]
"""
# The image is the last argument; start and end are written with the time in milliseconds.
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
esac
echo "end $image $(date +%s%N)" >>"$FAKE_PULLS"
"""
TOOLS = ("mkdir", "cat", "chmod", "basename", "date", "sleep", "timeout")


@dataclass
class Run:
    status: int
    stdout: str
    stderr: str
    seconds: float
    calls: list[str]


class PrefetchNode:
    """A scratch node: a bin directory with only the tools the scripts may call, its unit and
    library directories, and the logs of the fakes."""

    def __init__(self, root: Path, *, pull_tool: str | None = "crictl", systemctl: bool = True):
        self.root = root
        self.bin = root / "bin"
        self.bin.mkdir(parents=True)
        self.unit_dir = root / "systemd"
        self.lib_dir = root / "lib"
        self.calls = root / "calls.log"
        self.pulls = root / "pulls.log"
        fakes = ([("systemctl", RECORDER)] if systemctl else []) + ([(pull_tool, FAKE_PULL)] if pull_tool else [])
        for name, text in fakes:
            (self.bin / name).write_text(text)
            (self.bin / name).chmod(0o755)
        for tool in TOOLS:
            (self.bin / tool).symlink_to(shutil.which(tool))

    def _run(self, path: Path, env: dict[str, str]) -> Run:
        self.calls.write_text("")
        start = time.monotonic()
        result = subprocess.run([str(path)], env={"PATH": str(self.bin), "FAKE_CALLS": str(self.calls), "FAKE_PULLS": str(self.pulls), **env},
                                capture_output=True, text=True, timeout=120)
        return Run(result.returncode, result.stdout, result.stderr, time.monotonic() - start, self.calls.read_text().splitlines())

    def install(self, boothook: str, **env: str) -> Run:
        """Run the boothook as cloud-init does (an executable file), its directories moved here."""
        for line in (UNIT_DIR_LINE, LIB_DIR_LINE):
            assert boothook.count(line) == 1, f"the boothook names its directory once: {line}"
        path = self.root / "boothook"
        path.write_text(boothook.replace(UNIT_DIR_LINE, f"unit_dir={self.unit_dir}").replace(LIB_DIR_LINE, f"lib_dir={self.lib_dir}"))
        path.chmod(0o755)
        return self._run(path, env)

    def unit(self, name: str) -> list[str]:
        return (self.unit_dir / name).read_text().splitlines()

    def pull(self, *, limit: int | None = None, **env: str) -> Run:
        """Run the installed pull script as its service would, with the time limit changed."""
        script = self.lib_dir / PULL_SCRIPT
        if limit is not None:
            text = script.read_text()
            assert text.count(LIMIT_LINE) == 1
            script.write_text(text.replace(LIMIT_LINE, f"limit={limit}"))
        self.pulls.write_text("")
        return self._run(script, env)

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

