"""The offline plan (tools/plan.py) of a stack it refuses: broken and unusual stack files fail with
every problem and no traceback, a secret given in plain text never reaches what the plan prints,
the policy pack's verdict fails the plan (unless its configuration lowers it), and the command-line
entry point, once as a subprocess, exits non-zero on a failure. Called in-process through
`main(argv)` otherwise (tests/plan_support.py).
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import yaml

from config import yaml_io
from config.stack_files import PROJECT_DIR, read_stack_values
from tools.plan import main
from plan_support import plan, section
from shipped_stacks import shipped_project


# --- broken and unusual stack files --------------------------------------------------------------------


def test_broken_stack_file_fails_with_every_problem_and_no_traceback(tmp_path):
    project = shipped_project(tmp_path / "project", ["dev"])
    document = yaml_io.load((project / "Pulumi.dev.yaml").read_text())
    config = document["config"]
    config["gpu-platform:tenantz"] = []  # a typo of `tenants`
    config["gpu-platform:cluster"]["systemPool"]["minNodes"] = -1
    config["gpu-platform:tenants"][0]["gpuPools"][0]["maxGpus"] = 0
    (project / "Pulumi.dev.yaml").write_text(yaml.safe_dump(document, sort_keys=False))
    code, out, err = plan("--project-dir", str(project), "--stack", "dev")
    assert code == 1
    assert "Traceback" not in out + err
    assert "3 configuration problems in stack 'dev'" in err
    for path in ("tenantz: unknown key", "cluster.systemPool.minNodes:", "tenants[0].gpuPools[0].maxGpus:"):
        assert path in err


def test_stack_file_that_is_not_yaml(tmp_path):
    project = shipped_project(tmp_path / "project", ())
    (project / "Pulumi.dev.yaml").write_text("config:\n  gpu-platform:tenants: [\n")
    code, _, err = plan("--project-dir", str(project), "--stack", "dev")
    assert code == 1
    assert "Pulumi.dev.yaml: not valid YAML" in err and "Traceback" not in err


def test_unknown_stack_names_the_stacks_there_are():
    code, _, err = plan("--stack", "staging")
    assert code == 1
    assert "Pulumi.staging.yaml: no such stack file" in err and "dev, prod" in err


def test_a_secret_in_plain_text_never_reaches_what_the_plan_prints(tmp_path, capfd):
    """A plaintext `platformAdminPassword` beside other problems, the same in a line that is not
    YAML, and the license token given in plain text: the plan names each problem, and the value
    itself is on neither stdout nor stderr (file descriptors, as CI's log records them) in any mode."""
    project = shipped_project(tmp_path / "project", ["dev", "team-vision-dev"])  # --all: no stack to evaluate in full
    dev = project / "Pulumi.dev.yaml"
    shipped = dev.read_text()
    secret = "Hunter2-Plaintext-0b5e"

    def printed(*argv: str) -> tuple[int, str]:
        code = main(["--project-dir", str(project), *argv])
        out, err = capfd.readouterr()
        assert secret not in out + err, argv
        return code, out + err

    dev.write_text(shipped.replace("config:\n", f"config:\n  gpu-platform:platformAdminPassword: {secret}\n", 1).replace("environment: dev", "environment: qa", 1))
    code, text = printed("--stack", "dev")
    assert code == 1 and "platformAdminPassword: is no longer read" in text and "environment: 'qa' is not allowed" in text
    for argv in (["--all"], ["--all", "--quiet"], ["--stack", "dev", "--json"], ["--stack", "team-vision-dev"]):
        code, text = printed(*argv)
        assert code == 1 and "platformAdminPassword" in text, argv

    dev.write_text(shipped.replace("config:\n", f"config:\n  gpu-platform:platformAdminPassword: {secret}: x\n", 1))
    for argv in (["--stack", "dev"], ["--all", "--quiet"], ["--stack", "dev", "--json"]):
        code, text = printed(*argv)
        assert code == 1 and "Pulumi.dev.yaml: not valid YAML: mapping values are not allowed here (line 6, column" in text, argv

    platform = "  gpu-platform:platform:\n"
    dev.write_text(shipped.replace(platform, f"  gpu-platform:licenseToken: {secret}\n{platform}    licenseTokenKey: licenseToken\n", 1))
    code, text = printed("--stack", "dev")
    assert code == 0 and "  gpu-platform:licenseToken = [secret]\n" in text
    assert "WARNING (plan): gpu-platform:licenseToken is a secret given in plain text in Pulumi.dev.yaml: whoever reads the repository reads it" in text
    code, text = printed("--stack", "dev", "--json")
    assert code == 0 and json.loads(text)["config"]["gpu-platform:licenseToken"] == "[secret]"


SECURE = """
  gpu-platform:vclusterLicenseToken:
    secure: v1:AAAAbm90LWEtcmVhbC1jaXBoZXJ0ZXh0
"""


def legacy_mode_policy_config(tmp_path: Path) -> Path:
    """The pack configuration docs/guardrails.md gives for legacy mode, as a file."""
    from docs_support import section as docs_section

    text = " ".join(docs_section("What `make test` checks").split())
    config = tmp_path / "policy-config.json"
    config.write_text(re.search(r"lower them with `(\{.+?\}\})`", text).group(1))
    return config


def test_secure_values_are_shown_as_secret_and_legacy_mode_warns(tmp_path):
    project = shipped_project(tmp_path / "project", ["dev"])
    text = (project / "Pulumi.dev.yaml").read_text().replace("    spot: true\n", "    spot: true\n    legacyInfrastructure: true\n", 1)
    text = text.replace("    allowSharedWithProjectTenants: true\n", "    allowSharedWithProjectTenants: true\n    licenseTokenKey: vclusterLicenseToken\n", 1)
    (project / "Pulumi.dev.yaml").write_text(text + SECURE)
    # Legacy mode fails four policies on purpose; the plan, like `pulumi preview`, rejects it
    # unless the pack's configuration lowers them as docs/guardrails.md says.
    from policies import LEGACY_MODE_POLICIES

    code, out, err = plan("--project-dir", str(project), "--stack", "dev")
    failed = set(re.findall(r"^  MANDATORY (\S+) on ", section(out, "Policy pack"), flags=re.M))
    assert code == 1 and failed == {p.name for p in LEGACY_MODE_POLICIES}
    config = legacy_mode_policy_config(tmp_path)
    code, out, err = plan("--project-dir", str(project), "--stack", "dev", "--policy-pack-config", str(config))
    assert code == 0, err
    assert "no mandatory violation" in out and "(advisory): " in section(out, "Warnings")
    assert "gpu-platform:vclusterLicenseToken = [secret]" in out
    assert "AAAAbm90LWEtcmVhbC1jaXBoZXJ0ZXh0" not in out
    assert "vclusterLicenseToken" not in section(out, "Stack outputs")
    warnings = section(out, "Warnings")
    assert re.search(r"WARNING \((program|plan)\): nodeProvider\.legacyInfrastructure", warnings)
    # The quiet line counts it too.
    code, quiet, _ = plan("--project-dir", str(project), "--stack", "dev", "--quiet", "--policy-pack-config", str(config))
    assert code == 0 and re.search(r"[1-9]\d* warning\(s\)", quiet)


def test_a_policy_violation_fails_the_plan_with_the_packs_whole_message_before_the_costs(tmp_path):
    """prod with its control plane open to the internet: the configuration is valid, the pack
    rejects it. The plan prints the pack's own message whole, naming policy and resource, before
    the costs, and exits 1 (text, --quiet with the message on stderr, --json)."""
    from tools.mock_engine import run_program
    from tools.policy_check import check, judging_stacks
    from tools.policy_data import stack_entry

    project = shipped_project(tmp_path / "project", ["prod"])
    path = project / "Pulumi.prod.yaml"
    path.write_text(path.read_text().replace("{cidr: 203.0.113.0/24, name: office}", "{cidr: 0.0.0.0/0, name: anywhere}"))
    values = read_stack_values(project, "prod")
    run = run_program(values, stack="prod", project_dir=project)
    # Judged as the plan judges it: by the stack's record as `make policy-data` would write it now.
    with judging_stacks({"prod": stack_entry("prod", run, values, None)}):
        found = [v for v in check(run) if v.mandatory]
    # The open endpoint, and the public address space it admits (public-ranges-prod, any split).
    assert sorted(v.policy for v in found) == ["gke-private-nodes-and-endpoint", "public-ranges-prod"]
    assert {v.resource for v in found} == {"gke-cluster"}
    [violation, ranges] = sorted(found, key=lambda v: v.policy)
    assert "'0.0.0.0/0'" in violation.message and len(violation.message) > 200

    code, out, err = plan("--project-dir", str(project), "--stack", "prod")
    assert code == 1
    verdict = section(out, "Policy pack")
    assert f"MANDATORY {violation.policy} on gke-cluster:\n    {violation.message}" in verdict
    assert out.index("Policy pack") < out.index("Costs in USD")
    assert "the policy pack rejects it" in err

    code, quiet, err = plan("--project-dir", str(project), "--stack", "prod", "--quiet")
    assert code == 1 and quiet.startswith("FAIL  prod: 2 mandatory policy violation(s)") and violation.message in err
    code, out, _ = plan("--project-dir", str(project), "--stack", "prod", "--json")
    document = json.loads(out)
    assert code == 1 and document["ok"] is False
    assert sorted((p for p in document["policy"] if p["level"] == "mandatory"), key=lambda p: p["policy"]) == [
        {"policy": v.policy, "level": "mandatory", "resource": "gke-cluster", "message": v.message} for v in (violation, ranges)
    ]


def test_a_policy_pack_config_names_policies_and_levels_of_the_pack(tmp_path):
    config = tmp_path / "policy-config.json"
    config.write_text('{"no-such-policy": "advisory"}')
    code, _, err = plan("--stack", "dev", "--policy-pack-config", str(config))
    assert code == 2 and "'no-such-policy' is not a policy of the pack; allowed: " in err
    config.write_text('{"gke-private-nodes-and-endpoint": {"enforcementLevel": "lenient"}}')
    code, _, err = plan("--stack", "dev", "--policy-pack-config", str(config))
    assert code == 2 and "'lenient' is not allowed; allowed: advisory, mandatory, remediate, disabled" in err


def test_command_line_entry_point(tmp_path):
    """`python -m tools.plan --all --quiet` as CI runs it: one line per stack, non-zero on a failure
    (in-process, as `main`), and the module's entry point in a process of its own (on a stack that
    fails before any evaluation: `make test` runs the entry point on every committed stack anyway),
    whose output holds no plaintext admin password the stack file sets, beside its other problems."""
    project = shipped_project(tmp_path / "project", ["dev"])
    secret = "Hunter2-Plaintext-77c1"
    (project / "Pulumi.broken.yaml").write_text(f"config:\n  gpu-platform:environment: qa\n  gpu-platform:platformAdminPassword: {secret}\n")
    code, out, err = plan("--project-dir", str(project), "--all", "--quiet")
    assert code == 1
    assert re.search(r"^ok +dev: environment stack", out, re.M)
    headline = "6 configuration problems in stack 'broken'; nothing was created:"
    assert re.search(rf"^FAIL +broken: {re.escape(headline)}$", out, re.M)
    # The headline once (the stack's line), the problems below it on stderr.
    assert (out + err).count(headline) == 1 and "plan of stack broken failed" not in err
    assert "environment: 'qa' is not allowed" in err
    assert "Traceback" not in out + err

    (project / "Pulumi.dev.yaml").unlink()
    result = subprocess.run(
        [sys.executable, "-m", "tools.plan", "--project-dir", str(project), "--all", "--quiet"],
        cwd=PROJECT_DIR,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == 1 and re.search(rf"^FAIL +broken: {re.escape(headline)}$", result.stdout, re.M)
    assert "environment: 'qa' is not allowed" in result.stderr and "Traceback" not in result.stdout + result.stderr
    assert "  - platformAdminPassword: is no longer read" in result.stderr and secret not in out + err + result.stdout + result.stderr
