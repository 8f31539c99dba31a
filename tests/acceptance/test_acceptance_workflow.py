"""How users and CI start the acceptance test: the Makefile targets, docs/acceptance.md (every
command in it runs as written, every figure is what the code computes) and the manually triggered
workflow (.github/workflows/acceptance.yml)."""

from __future__ import annotations

import re
import subprocess

import pytest
import yaml

from config.stack_files import PROJECT_DIR
from docs_support import section, sh_lines
from tests.acceptance.leftovers import find_by_hand
from tests.acceptance.run import parse_args, settings_from
from tests.acceptance.settings import Settings, cost_estimate, cost_total, load_run_stack, run_names

MAKEFILE = (PROJECT_DIR / "Makefile").read_text()
WORKFLOW_PATH = PROJECT_DIR / ".github" / "workflows" / "acceptance.yml"
WORKFLOW_TEXT = WORKFLOW_PATH.read_text()
WORKFLOW = yaml.safe_load(WORKFLOW_TEXT)
JOB = WORKFLOW["jobs"]["acceptance"]


ACCEPTANCE = section("Acceptance test")  # the whole page


def make_variables() -> dict[str, str]:
    """The acceptance target's variables and their defaults, as the Makefile declares them."""
    block = MAKEFILE[MAKEFILE.index('docs/acceptance.md "Acceptance test"') : MAKEFILE.index("acceptance: $(STAMP)")]
    return dict(re.findall(r"^([A-Z_]+)\s*\?=[ \t]*(.*)$", block, flags=re.MULTILINE))


def make_dry_run(*args: str) -> str:
    return subprocess.run(["make", "-n", "--no-print-directory", *args], cwd=PROJECT_DIR, capture_output=True, text=True, check=True).stdout


# --- Makefile and docs --------------------------------------------------------------------------


def test_every_make_command_in_the_readme_names_a_target_and_variables_that_exist():
    commands = re.findall(r"^make (acceptance[a-z-]*)(.*?)(?:\s+#.*)?$", "\n".join(sh_lines()), flags=re.MULTILINE)
    assert {target for target, _ in commands} == {"acceptance", "acceptance-cleanup"}
    variables = make_variables()
    for target, arguments in commands:
        assert re.search(rf"^{target}: ", MAKEFILE, flags=re.MULTILINE), target
        for name in re.findall(r"([A-Z_]+)=", arguments):
            assert name in variables, f"the docs pass {name}, which the Makefile does not read"


def test_the_variable_table_is_the_makefiles():
    rows = dict(re.findall(r"^\| `([A-Z_]+)` \| (.+?) \|", ACCEPTANCE, flags=re.MULTILINE))
    variables = make_variables()
    assert set(rows) == set(variables) - {"ACCEPTANCE_FLAGS"}
    for name, default in rows.items():
        if default.startswith("`"):
            assert default.strip("`").replace("<REGION>", "$(value REGION)") == variables[name], name


def test_make_passes_every_variable_to_the_runner_and_the_runner_defaults_agree():
    dry = make_dry_run("acceptance", "PROJECT=acme-acceptance")
    for flag in ("--project", "--team-project", "--isolation", "--region", "--zones", "--gpu", "--gpu-quota", "--gpus-per-node", "--backend", "--idle-margin", "--node-timeout", "--out"):
        assert f"{flag} " in dry
    passed = re.search(r"^ACCEPTANCE_VARIABLES := ((?:.*\\\n)*.*)$", MAKEFILE, flags=re.MULTILINE).group(1).replace("\\\n", " ").split()
    assert set(passed) == set(make_variables())  # each through the environment, as data (tests/test_makefile.py)
    variables = make_variables()
    settings = settings_from(parse_args(["--project", "acme-acceptance"]))
    assert settings == Settings(project="acme-acceptance")
    assert (settings.team_project, settings.isolation) == (variables["TEAM_PROJECT"], variables["ISOLATION"]) == ("", "")
    assert settings_from(parse_args(["--project", "p-host1", "--team-project", "p-team1"])).mode == "project"
    assert (settings.region, settings.gpu, str(settings.gpu_quota), str(settings.gpus_per_node)) == (
        variables["REGION"],
        variables["GPU"],
        variables["GPU_QUOTA"],
        variables["GPUS_PER_NODE"],
    )
    assert (str(settings.idle_margin_seconds), str(settings.node_timeout_seconds)) == (variables["IDLE_MARGIN"], variables["NODE_TIMEOUT"])
    assert settings.zones == tuple(variables["ZONES"].replace("$(value REGION)", settings.region).split(","))


def test_make_test_does_not_run_the_live_test():
    assert "tests.acceptance.run" not in make_dry_run("test")


def test_the_readme_cost_table_is_the_estimate_the_run_prints():
    items = cost_estimate(load_run_stack(Settings(project="acme-acceptance"), "k3x9q2"))
    rows = re.findall(r"^\| (.+?) \| (\d+\.\d\d) \|$", ACCEPTANCE, flags=re.MULTILINE)
    assert rows == [(item.what.replace("k3x9q2", "<id>"), f"{item.usd:.2f}") for item in items]
    assert f"| **total** | **≈ {cost_total(items):.2f}** |" in ACCEPTANCE
    assert f"about ${cost_total(items):.2f} a run" in WORKFLOW_TEXT


def test_the_readme_clean_up_commands_are_the_runs():
    names = run_names(load_run_stack(Settings(project="acme-acceptance"), "k3x9q2"), "k3x9q2")
    expected = [c.replace("acme-acceptance", "<project>").replace("k3x9q2", "<id>").replace("--location us-central1", "--location <region>") for c in find_by_hand(names)]
    block = section("Clean up by hand")
    listed = re.search(r"```sh\n(.*?)```", block, flags=re.DOTALL).group(1).strip().splitlines()
    assert listed == expected


# --- The workflow --------------------------------------------------------------------------------


def triggers() -> dict:
    return WORKFLOW.get("on", WORKFLOW.get(True))  # YAML 1.1 reads a bare `on` as True


def test_started_by_hand_only_with_the_runs_inputs():
    assert set(triggers()) == {"workflow_dispatch"}
    inputs = triggers()["workflow_dispatch"]["inputs"]
    assert set(inputs) == {"project", "team_project", "region", "zones", "gpu", "gpu_quota"}
    assert not inputs["team_project"]["required"] and inputs["team_project"]["default"] == ""
    assert inputs["project"]["required"] and "default" not in inputs["project"]
    variables = make_variables()
    assert inputs["region"]["default"] == variables["REGION"] and inputs["gpu"]["default"] == variables["GPU"]
    assert inputs["gpu_quota"]["default"] == variables["GPU_QUOTA"]
    assert inputs["zones"]["default"] == variables["ZONES"].replace("$(value REGION)", variables["REGION"])


def test_the_deploy_identity_comes_from_a_protected_environment_with_least_permissions():
    assert WORKFLOW["permissions"] == {}
    assert JOB["environment"] == "acceptance"
    assert JOB["permissions"] == {"contents": "read", "id-token": "write"}
    assert WORKFLOW["concurrency"]["cancel-in-progress"] is False


def steps() -> list[dict]:
    return JOB["steps"]


def uses(name: str) -> dict:
    return next(s for s in steps() if str(s.get("uses", "")).startswith(f"{name}@"))


def test_every_action_is_pinned_to_a_commit_with_its_release_in_a_comment():
    lines = [line.strip() for line in WORKFLOW_TEXT.splitlines() if line.strip().startswith(("- uses:", "uses:"))]
    assert len(lines) == len([s for s in steps() if "uses" in s]) >= 5
    for line in lines:
        assert re.fullmatch(r"(- )?uses: [\w.-]+/[\w.-]+@[0-9a-f]{40} # v\d+\.\d+\.\d+", line), line


def test_keyless_google_authentication_before_anything_runs():
    auth = uses("google-github-actions/auth")
    assert auth["with"] == {
        "workload_identity_provider": "${{ vars.GCP_WORKLOAD_IDENTITY_PROVIDER }}",
        "service_account": "${{ vars.GCP_SERVICE_ACCOUNT }}",
    }
    assert "credentials_json" not in WORKFLOW_TEXT
    components = uses("google-github-actions/setup-gcloud")["with"]["install_components"].split(",")
    assert {"gke-gcloud-auth-plugin", "kubectl"} <= set(components)
    position = {s.get("uses", s.get("run", "")).split("@")[0]: i for i, s in enumerate(steps())}
    assert position["google-github-actions/auth"] < position["make acceptance ACCEPTANCE_FLAGS=--require"]


def test_the_pulumi_cli_is_installed_at_the_sdks_version_without_pulumi_cloud():
    pulumi = uses("pulumi/actions")
    assert "command" not in pulumi["with"]  # installs the CLI only
    sdk = re.search(r"^pulumi==(\S+)$", (PROJECT_DIR / "requirements.txt").read_text(), flags=re.MULTILINE).group(1)
    assert pulumi["with"]["pulumi-version"] == sdk
    assert "PULUMI_ACCESS_TOKEN" not in WORKFLOW_TEXT


def test_the_test_requires_its_prerequisites_and_the_cleanup_always_runs():
    runs = [(s.get("run", ""), s.get("if")) for s in steps() if "run" in s]
    assert runs[0] == ("make acceptance ACCEPTANCE_FLAGS=--require", None)
    assert runs[1] == ("make acceptance-cleanup", "always()")
    upload = uses("actions/upload-artifact")
    assert upload["if"] == "always()" and upload["with"]["path"] == "acceptance-out/"


def test_inputs_reach_make_through_the_environment_never_a_script():
    assert JOB["env"] == {
        "PROJECT": "${{ inputs.project }}",
        "TEAM_PROJECT": "${{ inputs.team_project }}",
        "REGION": "${{ inputs.region }}",
        "ZONES": "${{ inputs.zones }}",
        "GPU": "${{ inputs.gpu }}",
        "GPU_QUOTA": "${{ inputs.gpu_quota }}",
    }
    for step in steps():
        assert "${{" not in step.get("run", ""), step


def test_make_never_pastes_a_value_into_the_shell(tmp_path):
    """Each of the workflow's inputs, and the others, reaches the runner as the value given, run for
    real with shell code in every one (tests/test_makefile.py does the same for the other targets)."""
    from tests.make_support import run_make

    flags = {"PROJECT": "--project", "TEAM_PROJECT": "--team-project", "ISOLATION": "--isolation", "REGION": "--region", "ZONES": "--zones", "GPU": "--gpu", "GPU_QUOTA": "--gpu-quota", "BACKEND": "--backend", "WARM_NODES": "--warm-nodes", "COMPARE": "--compare"}
    run = run_make(tmp_path, "acceptance", *(f'{name}=x"; touch {name.lower()}; echo "' for name in flags))
    assert run.returncode == 0 and run.created == set(), run.output
    for name, flag in flags.items():
        assert run.arguments[run.arguments.index(flag) + 1] == f'x"; touch {name.lower()}; echo "', name


def test_every_readme_example_is_a_valid_run_configuration():
    flags = {"PROJECT": "--project", "TEAM_PROJECT": "--team-project", "ISOLATION": "--isolation", "REGION": "--region", "ZONES": "--zones", "GPU": "--gpu", "GPU_QUOTA": "--gpu-quota", "GPUS_PER_NODE": "--gpus-per-node", "WARM_NODES": "--warm-nodes", "COMPARE": "--compare"}
    switches = {"RESTORE_DRILL": "--restore-drill", "WATCHDOG_DRILL": "--watchdog-drill"}  # make passes the flag when set
    placeholders = {"PROJECT": "acme-acceptance", "TEAM_PROJECT": "acme-acceptance-team"}
    examples = re.findall(r"^make acceptance (PROJECT=.*?)(?:\s+#.*)?$", "\n".join(sh_lines()), flags=re.MULTILINE)
    assert len(examples) >= 3 and any("TEAM_PROJECT=" in e for e in examples)
    for example in examples:
        argv = []
        for name, value in re.findall(r"([A-Z_]+)=(\S+)", example):
            argv += [switches[name]] if name in switches else [flags[name], placeholders.get(name, value)]
        settings = settings_from(parse_args(argv))
        assert settings.problems() == [], example
        load_run_stack(settings, "k3x9q2")  # raises ConfigError naming the key if the example is wrong
