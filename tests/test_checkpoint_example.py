"""docs/reliability.md's checkpointing Job works when pasted: Kubernetes accepts it and its volume
claim, it fits the grace period a Spot node gives (config/reliability.py), it keeps its checkpoints
on a persistent volume of the tenant's PD class, and its script, run here as its container would
run it, saves a checkpoint on SIGTERM within that time and resumes from it."""

from __future__ import annotations

import os
import signal
import subprocess
import time

import kubernetes_validate

from config.base import duration_seconds
from config.node_provider import NodeProviderConfig
from config.reliability import CRITICAL_PODS_GRACE_PERIOD, SPOT_GRACE_PERIOD
from docs_support import yaml_example

K8S_VERSION = "1.33.0"
JOB, CLAIM = yaml_example("checkpoint-job.yaml"), yaml_example("checkpoint-volume.yaml")
POD = JOB["spec"]["template"]["spec"]
[CONTAINER] = POD["containers"]
SCRIPT = CONTAINER["args"][0]
SPOT_SHARE = duration_seconds(SPOT_GRACE_PERIOD) - duration_seconds(CRITICAL_PODS_GRACE_PERIOD)
# The tenant's PD class: templates/kubernetes/main.tf names it <NodeProvider>-disk-default
# (tests/test_kubernetes_template.py holds the template to it), with the default NodeProvider name.
PD_CLASS = f"{NodeProviderConfig.model_fields['name'].default}-disk-default"


def test_kubernetes_accepts_it():
    kubernetes_validate.validate(JOB, K8S_VERSION, strict=True)
    kubernetes_validate.validate(CLAIM, K8S_VERSION, strict=True)


def test_its_checkpoints_are_on_a_persistent_volume_it_resumes_from():
    """Not the container's own disk, an emptyDir or a node-local class: those go with the pod or
    its node, and the retry would start from step 0."""
    assert (CLAIM["kind"], CLAIM["metadata"]["name"]) == ("PersistentVolumeClaim", "train-checkpoints")
    assert CLAIM["spec"]["accessModes"] == ["ReadWriteOnce"]  # one pod at a time, as a PD attaches to one VM
    assert CLAIM["spec"]["storageClassName"] == PD_CLASS == "gcp-gpu-disk-default"
    [volume] = POD["volumes"]
    assert volume == {"name": volume["name"], "persistentVolumeClaim": {"claimName": CLAIM["metadata"]["name"]}}
    [mount] = CONTAINER["volumeMounts"]
    assert mount["name"] == volume["name"] and not mount.get("readOnly")
    [checkpoint_dir] = [e["value"] for e in CONTAINER["env"] if e["name"] == "CHECKPOINT_DIR"]
    assert mount["mountPath"] == checkpoint_dir
    # The script reads its step from there at start and writes it there: the resume below runs on it.
    assert 'step=$(cat "$CHECKPOINT_DIR/step"' in SCRIPT and 'mv "$CHECKPOINT_DIR/step.tmp" "$CHECKPOINT_DIR/step"' in SCRIPT


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
