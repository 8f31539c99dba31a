"""docs/reliability.md's checkpointing Job works when pasted: Kubernetes accepts it, it fits the
grace period a Spot node gives (config/reliability.py), and its script, run here as its container
would run it, saves a checkpoint on SIGTERM within that time and resumes from it."""

from __future__ import annotations

import os
import signal
import subprocess
import time

import kubernetes_validate
import yaml

from config.base import duration_seconds
from config.reliability import CRITICAL_PODS_GRACE_PERIOD, SPOT_GRACE_PERIOD
from docs_support import yaml_blocks

K8S_VERSION = "1.33.0"
[JOB] = [yaml.safe_load(text) for name, text in yaml_blocks() if name == "checkpoint-job.yaml"]
POD = JOB["spec"]["template"]["spec"]
[CONTAINER] = POD["containers"]
SCRIPT = CONTAINER["args"][0]
SPOT_SHARE = duration_seconds(SPOT_GRACE_PERIOD) - duration_seconds(CRITICAL_PODS_GRACE_PERIOD)


def test_kubernetes_accepts_it():
    kubernetes_validate.validate(JOB, K8S_VERSION, strict=True)


def test_it_fits_what_a_spot_node_gives_and_is_never_disrupted_on_purpose():
    assert POD["terminationGracePeriodSeconds"] <= SPOT_SHARE == 20
    assert JOB["spec"]["template"]["metadata"]["annotations"]["karpenter.sh/do-not-disrupt"] == "true"
    # A node shutdown does not count against backoffLimit (podFailurePolicy needs restartPolicy Never).
    assert POD["restartPolicy"] == "Never"
    assert JOB["spec"]["podFailurePolicy"]["rules"] == [{"action": "Ignore", "onPodConditions": [{"type": "DisruptionTarget", "status": "True"}]}]
    assert CONTAINER["command"] == ["/bin/sh", "-c"]


def _start(checkpoints) -> subprocess.Popen:
    env = {"PATH": os.environ["PATH"], "CHECKPOINT_DIR": str(checkpoints)}
    return subprocess.Popen(["/bin/sh", "-c", SCRIPT], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def test_sigterm_saves_a_checkpoint_at_once_and_the_next_run_resumes_from_it(tmp_path):
    job = _start(tmp_path)
    time.sleep(1.3)  # one step
    signal_sent = time.monotonic()
    job.send_signal(signal.SIGTERM)
    out, _ = job.communicate(timeout=SPOT_SHARE)
    assert time.monotonic() - signal_sent < 2  # well within the 20 s
    assert job.returncode == 143
    saved = int((tmp_path / "step").read_text())
    assert saved >= 1 and f"checkpointed at step {saved}" in out
    assert not (tmp_path / "step.tmp").exists()
    # The retry resumes there; near the end it finishes and saves the last step.
    (tmp_path / "step").write_text("999\n")
    job = _start(tmp_path)
    out, _ = job.communicate(timeout=30)
    assert job.returncode == 0 and out.startswith("resuming at step 999")
    assert (tmp_path / "step").read_text().strip() == "1000"


def test_it_also_checkpoints_periodically(tmp_path):
    """Every 60 steps: shown here from step 59, the step before a periodic checkpoint."""
    steps = 60
    (tmp_path / "step").write_text(f"{steps - 1}\n")
    job = _start(tmp_path)
    deadline = time.monotonic() + 10
    while (tmp_path / "step").read_text().strip() != str(steps) and time.monotonic() < deadline:
        time.sleep(0.2)
    job.kill()
    job.communicate()
    assert (tmp_path / "step").read_text().strip() == str(steps)
