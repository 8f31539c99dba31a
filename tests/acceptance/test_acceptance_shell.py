"""The run's command helpers: errors carry the command's stderr, kubeconfigs and the passphrase are
private files, and tenant kubectl survives a port-forward that hung up."""

from __future__ import annotations

import stat

import pytest

from tests.acceptance import shell


def test_a_failing_command_says_why():
    with pytest.raises(shell.CommandError, match=r"exit 3: no such cluster"):
        shell.run(["sh", "-c", "echo 'no such cluster' >&2; exit 3"])
    assert shell.run(["sh", "-c", "echo ok"]) == "ok\n"
    assert not shell.succeeds(["sh", "-c", "exit 1"]) and not shell.succeeds(["no-such-tool-anywhere"])


def test_secrets_are_written_for_this_user_only(tmp_path):
    path = shell.write_private(tmp_path / "sub" / "host.kubeconfig", "apiVersion: v1\n")
    assert stat.S_IMODE(path.stat().st_mode) == 0o600 and path.read_text() == "apiVersion: v1\n"


def test_tenant_kubectl_retries_once_through_a_fresh_port_forward(tmp_path):
    class Flaky:
        def __init__(self, failures):
            self.failures = failures

        def json(self, *args):
            if self.failures:
                self.failures -= 1
                raise shell.CommandError("kubectl get …: exit 1: connection reset by peer")
            return {"items": []}

    class Access(shell.TenantAccess):
        def __init__(self, failures):
            super().__init__(host=None, namespace="vcluster-acc-k3x9q2", release="acc-k3x9q2", workdir=tmp_path)
            self.kubectl_used = Flaky(failures)
            self.started = 0

        def ensure(self):
            self.started += 1
            return self.kubectl_used

    once = Access(failures=1)
    assert once.json("get", "nodes") == {"items": []} and once.started == 2
    with pytest.raises(shell.CommandError):
        Access(failures=2).json("get", "nodes")
