"""The documentation (README.md and docs/) is the user's contract: every config key documented (there
and in Pulumi.yaml), the security table equal to the role the program creates, every YAML example
valid when pasted."""

from __future__ import annotations

import functools
import re
import textwrap
from pathlib import Path

import pytest
import yaml

from components.vcluster_values import GPU_TAINT
from config import yaml_io
from config.environment import ClusterConfig, PlatformConfig
from config.node_provider import NodeProviderConfig
from config.monitoring import Alerts, MonitoringConfig, NotificationChannel, Showback, TenantMonitoring
from config.node_types import GPU_RESOURCE
from config.permissions import AUTO_NODES, load_roles
from config.stack import CONFIG_MODELS, KNOWN_KEYS, NS, load_stack
from config.stack_files import PROJECT_DIR, list_stacks, read_stack_values, stack_file
from config.tenant import Tenant
from docs_support import all_text, commands, optional_arguments, page, section, yaml_blocks
from shipped_stacks import SHIPPED_DIR, shipped_project

PULUMI_YAML = yaml_io.load((PROJECT_DIR / "Pulumi.yaml").read_text())


@pytest.mark.parametrize("model", [ClusterConfig, PlatformConfig, NodeProviderConfig, Tenant, MonitoringConfig, Alerts, Showback, NotificationChannel, TenantMonitoring])
def test_every_config_key_is_documented(model):
    reference = section("Configuration reference")
    # A key of the generated tables, alone or at the end of its path (`monitoring.dashboard`).
    missing = [f.alias for f in model.model_fields.values() if not re.search(rf"`([^`\s]*[.\]])?{re.escape(f.alias)}`", reference)]
    assert missing == []


def test_security_table_lists_exactly_the_platform_role():
    rows = re.findall(r"^\| `([a-z]+\.[A-Za-z.]+)` \| (.+) \|$", section("Security"), flags=re.MULTILINE)
    role = load_roles().roles[AUTO_NODES]
    assert [p for p, _ in rows] == list(role.permissions)
    for permission, why in rows:
        assert why.split(" (")[0] in role.reasons[permission]


def test_every_policy_is_documented():
    from policies import POLICIES

    guardrails = section("Guardrails")
    assert [p.name for p in POLICIES if f"`{p.name}`" not in guardrails] == []


def test_every_command_works_when_pasted():
    """No command of README.md and docs/ (sh examples, inline commands) carries usage notation such as
    `[GPU=nvidia-l4]` for an optional argument: the shell would pass the brackets on. Optional
    arguments are shown as a second command instead."""
    assert [(name, command) for name, command in commands() if optional_arguments(command)] == []


def test_a_bracketed_optional_argument_is_found(monkeypatch):
    import docs_support

    written = {
        "README.md": "```sh\nmake plan\n```\n\n`make team NAME=robotics ENV=dev [GPU=nvidia-l4 MAX_GPUS=4]` writes the team's stack.\n",
        "docs/guardrails.md": "```sh\npulumi preview --policy-pack policy \\\n  [--policy-pack-config policy-config.json]\n```\n",
        "docs/deploy.md": "```sh\npython3 -c 'import sys; [print(a) for a in sys.argv]' x   # [a comment]\n```\n\n`make plan STACK=prod`, `pulumi:tags: [a]`\n",
    }
    monkeypatch.setattr(docs_support, "pages", lambda: written)
    assert [(name, optional_arguments(command)) for name, command in commands() if optional_arguments(command)] == [
        ("docs/guardrails.md", ["[--policy-pack-config policy-config.json]"]),
        ("README.md", ["[GPU=nvidia-l4 MAX_GPUS=4]"]),
    ]
    assert ("docs/deploy.md", "make plan STACK=prod") in commands()


def test_the_first_command_is_the_offline_plan():
    first = re.search(r"```sh\n(.+?)\n", page("README.md")).group(1)
    assert first.startswith("make plan")


@functools.cache
def dev_plan() -> str:
    """What `make plan` prints for dev as shipped (tests/data/shipped/), as on a fresh clone."""
    import contextlib
    import io

    from tools.plan import main

    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        assert main(["--stack", "dev", "--project-dir", str(SHIPPED_DIR)]) == 0
    return out.getvalue()


def test_the_costs_example_is_the_plan_of_the_dev_stack_as_shipped():
    """docs/costs.md "Costs" shows the cost table of dev as shipped (tests/data/shipped/, what `make plan`
    prints on a fresh clone), exactly, and says that is what it shows: a user's own dev differs."""
    costs = section("Costs")
    assert "the dev stack as shipped" in costs and "tests/data/shipped/Pulumi.dev.yaml" in costs
    example = re.search(r"```text\n(.+?)\n```", costs, flags=re.DOTALL).group(1)
    assert example in dev_plan()


@functools.cache
def dev_costs():
    """The cost model of dev as shipped, as the plan computes it."""
    from tools.plan import plan_stack

    return plan_stack("dev", SHIPPED_DIR).costs


def _number(pattern: str, text: str) -> tuple[float, ...]:
    found = re.search(pattern, " ".join(text.split()))
    assert found, f"docs/costs.md no longer says: {pattern}"
    return tuple(float(g) for g in found.groups())


def test_the_costs_worked_example_prose_is_the_catalog_and_the_plan():
    """Every number of the worked example's prose: the prices from config/catalog.yaml, the
    results from the plan's own pool and load-balancer figures."""
    from config.catalog import CATALOG_PATH

    prices = yaml.safe_load(CATALOG_PATH.read_text())["prices"]["europe-west4"]
    hosts, gpus, disk = prices["hosts"], prices["gpus"], prices["disks"]["pd-balanced"]["usdPerGbMonth"]
    costs = section("Costs")
    pools = {(p.tenant, p.pool): p for p in dev_costs().pools}
    nlp = next(p for (tenant, _), p in pools.items() if tenant == "nlp" and p.machine_types == ("g2-standard-4",))
    speech = next(p for (tenant, _), p in pools.items() if tenant == "speech" and "n1-standard-4" in p.machine_types)

    host, l4, per_gb, boot, total = _number(
        r"4 × \(the g2-standard-4 host at ([\d.]+) \+ one L4 at ([\d.]+) \+ (\d+) GB × ([\d.]+) / 730\) = ([\d.]+) USD/h", costs
    )
    assert (host, l4, per_gb, boot) == (hosts["g2-standard-4"]["onDemand"], gpus["nvidia-l4"]["onDemand"], 200, disk)
    assert total == round(nlp.busy, 2) == round(nlp.ceiling, 2) == round(4 * (host + l4 + 200 * disk / 730), 2)

    host, t4, total = _number(r"4 × \(the n1-standard-4 Spot host at ([\d.]+) \+ one Spot T4 at ([\d.]+) \+ the same boot disk\) = ([\d.]+) USD/h", costs)
    assert (host, t4) == (hosts["n1-standard-4"]["spot"], gpus["nvidia-tesla-t4"]["spot"])
    assert total == round(speech.busy, 2) == round(4 * (host + t4 + 200 * disk / 730), 2)

    planes, first5, rules, share = _number(
        r"The environment has (\d+) tenant control planes .*?: one charge of ([\d.]+) USD/h for the (\d+) forwarding rules, ([\d.]+) USD/h counted per tenant", costs
    )
    assert planes == rules == len(dev_costs().control_planes) and first5 == prices["forwardingRule"]["first5"]
    assert share == round(dev_costs().load_balancer_share, 4)
    share_again, volume_gi, per_gb_again, control_plane = _number(
        r"so a control plane is ([\d.]+) \+ (\d+) GiB × ([\d.]+) / 730 = ([\d.]+) USD/h", costs
    )
    assert (share_again, per_gb_again) == (share, disk)
    nlp_line = next(line for line in dev_costs().lines if line.part.startswith("tenant nlp: control plane"))
    assert control_plane == round(nlp_line.always_on, 2) == round(dev_costs().load_balancer_share + volume_gi * disk / 730, 2)


def test_costs_define_busy_as_the_plan_does():
    from config.tenant_plan import BUSY

    assert " ".join(BUSY.split()) in " ".join(section("Costs").split())


# --- Pulumi.yaml describes the keys the program reads ------------------------------------------


def test_pulumi_yaml_declares_exactly_the_keys_the_program_reads():
    declared = {f"{NS}:{key}" for key in PULUMI_YAML["config"]}
    assert declared == KNOWN_KEYS


@pytest.mark.parametrize("key", [k for k in CONFIG_MODELS if k != "tenant"])
def test_pulumi_yaml_descriptions_list_exactly_the_model_keys(key):
    description = PULUMI_YAML["config"][key]["description"]
    listed = re.search(r"\(([A-Za-z, ]+)\)\.?$", description)
    assert listed, f"Pulumi.yaml: the description of {key} ends with its keys in parentheses"
    keys = {f.alias for f in CONFIG_MODELS[key].model_fields.values()}
    listed_keys = set(listed.group(1).split(", "))
    assert (sorted(keys - listed_keys), sorted(listed_keys - keys)) == ([], []), "(missing, unknown to the program)"


def test_no_secret_key_has_a_default():
    """The CLI applies a project default to a stack that lacks the key, then refuses a plaintext
    value of a `secret: true` key, that default included: such a key would fail every stack that
    keeps its default."""
    both = [k for k, spec in PULUMI_YAML["config"].items() if isinstance(spec, dict) and spec.get("secret") and "default" in spec]
    assert both == []


def test_the_admin_password_rules_are_documented_where_users_read_them():
    """platformAdminPassword is refused (config/platform_access.py); Pulumi.yaml, the reference and
    the deploy page say so, and no page tells anyone to set it."""
    from config.platform_access import ADMIN_PASSWORD_SECRET, KEY

    description = PULUMI_YAML["config"][KEY]["description"]
    assert description.startswith("No longer read, and refused when set (secret or not)") and ADMIN_PASSWORD_SECRET in description
    reference = " ".join(section("Configuration reference").split())
    assert f"`gpu-platform:{KEY}` is no longer read: a stack that sets it, secret or not, is refused" in reference
    assert f"pulumi config rm {KEY}" in reference.replace("`pulumi config rm ", "pulumi config rm ").replace("` removes", " removes")
    assert f"set --secret {KEY}" not in all_text() and f"config set {KEY}" not in all_text()


def test_tenant_stacks_take_the_same_fields_as_inline_tenants():
    assert CONFIG_MODELS["tenant"] is CONFIG_MODELS["tenants"]
    assert "same fields as an entry of `tenants`" in PULUMI_YAML["config"]["tenant"]["description"]


# --- the docs' YAML examples work when pasted --------------------------------------------------
# Into the stacks as shipped: a user's own stacks (the docs' examples among them, once pasted) never
# decide whether the docs are right, and an example may not reuse the name of a shipped stack.

YAML_BLOCKS = yaml_blocks()


def example_kind(document: dict) -> str:
    if "config" in document:
        return "stack file"
    if document and all(k.startswith(f"{NS}:") for k in document):
        return "stack values"
    if document.get("kind") == "PersistentVolumeClaim":  # a volume a workload example mounts
        return "volume"
    if "spec" in document:
        return "workload"
    return "unknown"


def load_every_stack(project_dir: Path) -> set[str]:
    """Every stack of the project loads; the warnings of all of them (e.g. GPU quota exceeded)."""
    return {w for stack in list_stacks(project_dir) for w in load_stack(read_stack_values(project_dir, stack), stack=stack, project_dir=project_dir).warnings}


SHIPPED_WARNINGS = load_every_stack(SHIPPED_DIR)


def test_every_yaml_example_is_one_the_tests_know():
    kinds = [example_kind(yaml.safe_load(textwrap.dedent(text))) for _, text in YAML_BLOCKS]
    assert "unknown" not in kinds
    assert {"stack file", "stack values", "workload"} <= set(kinds)


@pytest.mark.parametrize("index", [i for i, (_, text) in enumerate(YAML_BLOCKS) if example_kind(yaml_io.load(textwrap.dedent(text))) == "stack values"])
@pytest.mark.parametrize("environment", [s for s in list_stacks(SHIPPED_DIR) if not read_stack_values(SHIPPED_DIR, s)[f"{NS}:environmentStack"]])
def test_stack_value_examples_fit_every_environment_stack(tmp_path, index, environment):
    """An inline example added to a shipped environment stack: that stack, and every shipped team
    stack (which is checked against it), stay valid."""
    example = yaml.safe_load(textwrap.dedent(YAML_BLOCKS[index][1]))
    project = shipped_project(tmp_path)
    document = yaml_io.load(stack_file(project, environment).read_text())
    for key, value in example.items():
        current = document["config"].get(key)
        document["config"][key] = current + value if isinstance(current, list) else value
    stack_file(project, environment).write_text(yaml.safe_dump(document))
    assert load_every_stack(project) == SHIPPED_WARNINGS  # e.g. no GPU quota exceeded by the new team


@pytest.mark.parametrize("index", [i for i, (_, text) in enumerate(YAML_BLOCKS) if example_kind(yaml_io.load(textwrap.dedent(text))) == "stack file"])
def test_stack_file_examples_work_as_new_stacks(tmp_path, index):
    """A stack file example, saved under the name the docs give it next to the shipped stacks, is a
    valid new stack and leaves the shipped ones valid; the docs' commands create exactly it."""
    name, text = YAML_BLOCKS[index]
    stack = re.fullmatch(r"Pulumi\.([a-z0-9-]+)\.yaml", name or "")
    assert stack, "the docs name the file of each stack file example just before it: `Pulumi.<stack>.yaml`:"
    assert stack.group(1) not in list_stacks(SHIPPED_DIR), "the example must be a new stack, not a shipped one"
    assert f"pulumi stack init <your-org>/{stack.group(1)}\n" in all_text()
    project = shipped_project(tmp_path)
    stack_file(project, stack.group(1)).write_text(text)
    assert load_every_stack(project) == SHIPPED_WARNINGS  # e.g. no GPU quota exceeded by the new team


def test_workload_examples_tolerate_the_gpu_taint_and_ask_for_gpus():
    workloads = [yaml.safe_load(textwrap.dedent(text)) for _, text in YAML_BLOCKS if example_kind(yaml.safe_load(textwrap.dedent(text))) == "workload"]
    assert len(workloads) >= 2  # the team members' example and the checkpointing Job (docs/reliability.md)
    for document in workloads:
        spec = document["spec"]["template"]["spec"] if document.get("kind") == "Job" else document["spec"]  # a pod spec, or a Job
        [toleration] = spec["tolerations"]
        assert (toleration["key"], toleration["operator"], toleration["effect"]) == (GPU_TAINT["key"], "Exists", GPU_TAINT["effect"])
        assert all(GPU_RESOURCE in c["resources"]["limits"] for c in spec["containers"])


# --- what the docs say the program and the plan do ---------------------------------------------


def test_every_stack_init_names_the_organization():
    """One form everywhere, `pulumi stack init <your-org>/<stack>`, as team stacks' environmentStack
    (`<org>/gpu-platform/<env>`) expects."""
    inits = re.findall(r"pulumi stack init ([^\s`]+)", all_text())
    assert inits and [i for i in inits if not re.fullmatch(r'"?<your-org>/[a-z0-9$-]+"?', i)] == []


def test_the_exports_are_the_program_outputs(dev_run, tenant_run):
    text = re.search(r"^Exports: (.+?)(?:\n\n|\Z)", section("What a stack creates"), flags=re.S | re.M).group(1)
    environment, tenant = text.split("A tenant (")
    assert set(re.findall(r"`([A-Za-z]+)`", environment)) == set(dev_run.outputs)
    exported = tenant.split(") exports ", 1)[1]
    assert set(re.findall(r"`([A-Za-z]+)`", exported)) == set(tenant_run.outputs) == set(dev_run.outputs["tenants"]["nlp"])


def test_the_admin_password_is_read_from_the_secret_the_program_creates(dev_run):
    """The deploy page reads the Secret the program's command creates, in the namespace it creates
    it in, with the key the chart reads."""
    from components.vcluster_platform import ENSURE_ADMIN_PASSWORD
    from config.facts import PLATFORM_NAMESPACE
    from config.platform_access import ADMIN_PASSWORD_KEY, ADMIN_PASSWORD_SECRET

    assert dev_run.one("command:local:Command", "admin-password").input("create") == ENSURE_ADMIN_PASSWORD
    assert f"-n {PLATFORM_NAMESPACE} create secret generic {ADMIN_PASSWORD_SECRET} --from-file={ADMIN_PASSWORD_KEY}=" in ENSURE_ADMIN_PASSWORD
    values = dev_run.one("kubernetes:helm.sh/v3:Release").input("values")
    assert values["admin"]["passwordSecretRef"] == {"name": ADMIN_PASSWORD_SECRET, "key": ADMIN_PASSWORD_KEY}
    command = f"kubectl -n {PLATFORM_NAMESPACE} get secret {ADMIN_PASSWORD_SECRET} -o jsonpath='{{.data.{ADMIN_PASSWORD_KEY}}}' | base64 -d"
    assert command in section("The platform's admin login")
    assert "stack output platformAdminPassword" not in all_text().replace("`pulumi stack output platformAdminPassword`", "")


def test_the_first_plan_ends_with_the_warnings_try_it_announces():
    """Try it offline: "It ends with 2 warnings": one per shared tenant of dev, nothing else; then
    the line that the stack files are as committed (tools/plan_compare_text.py)."""
    from tools.plan_compare_text import no_comparison

    count = int(re.search(r"It ends with (\d+) warnings", section("Try it offline")).group(1))
    warnings, last = dev_plan().split(f"\nWarnings ({count})\n", 1)[1].split("\n\n")
    warnings = warnings.splitlines()
    assert len(warnings) == count and last == no_comparison()
    assert "Its last line says that there is no uncommitted edit of the stack files" in " ".join(section("Try it offline").split())
    shared = re.findall(r"^  WARNING \(program\): tenants\[\d\] \(([a-z-]+)\) uses isolation: shared: ", "\n".join(warnings), flags=re.M)
    assert len(shared) == count and all(name in section("Try it offline") for name in shared)


def test_availability_names_the_regions_with_zones_and_with_prices():
    from config.catalog import CATALOG_PATH

    catalog = yaml.safe_load(CATALOG_PATH.read_text())
    text = section("Availability")
    with_zones = re.search(r"\(zones per region: (.+?)\) and how", text, flags=re.S).group(1)
    named = set(re.findall(r"\b[a-z]+-[a-z]+\d\b", with_zones))
    assert named == {r for family in catalog["availability"]["families"].values() for r in family["zones"]}
    priced = re.search(r"\*\*Prices are recorded for every one of these regions\*\* \((.+?)\)", text, flags=re.S).group(1)
    assert set(re.findall(r"\b[a-z]+-[a-z]+\d\b", priced)) == set(catalog["prices"])


def test_team_stacks_are_not_described_as_a_privilege_boundary():
    """The review's findings stay fixed: whoever deploys a team stack is trusted like a platform
    admin, and the docs never say otherwise."""
    assert "What it is not: a privilege boundary." in section("Add a team")
    for claim in ("needs rights on its own project only", "deployed by their teams\n", "deployed by their teams.", "and deployed by their teams"):
        assert claim not in all_text()
    rows = re.findall(r"^\| a (?:team stack's|shared team's stack) deployer[^|]*\|", section("Security"), flags=re.M)
    assert len(rows) == 2 and all("the environment's deployer" in row for row in rows)


def test_team_stacks_are_deployed_by_ci_after_their_environment_and_listed_first():
    """The docs say one thing about who deploys a team stack, as .github/workflows/pulumi.yml does it
    (tests/test_workflow_deploy.py): CI's deploy job of its environment, after the bootstrap lists it."""
    text = " ".join(section("Add a team").split())
    assert "CI deploys it, never the team" in text and "`.venv/bin/python -m tools.team_stacks <env>`" in text
    # Listed by nobody: the bootstrap derives each environment's stacks and existing team projects
    # from the stack records make policy-data writes (tests/test_bootstrap.py).
    assert "then `make policy-data` (it writes the stack's record, `policy/stacks/team-robotics-dev.json`). Nothing else" in text
    assert "every existing project (`gcpProject: <id>`) of its tenants the environment's team-project roles" in text
    assert "teamProjects" not in all_text() and "`stacks` in `bootstrap/Pulumi.ci.yaml`" not in all_text()
    delivery = " ".join(section("Continuous delivery").split())
    assert "every committed team stack of its environment" in delivery and "(Stack Write on the same stacks" in delivery
    words = " ".join(all_text().split())
    for claim in ("deploys the environment stack only", "deploys a merged team stack", "is deployed by its team", "deployed by their teams."):
        assert claim not in words


def test_the_quota_rules_are_the_plans():
    """docs/costs.md says exactly when quota warns and when it fails, and what a new project's
    lines say: in the plan's words (config/quota.py), each rule held by the tests of
    test_pool_shapes_and_quota.py, test_config_validation.py and test_config_validation_tenants.py."""
    from config.quota import NEW_PROJECT, QUOTA_PAGE

    text = " ".join(section("GPU quota across the environment").split())
    assert "**One pool** whose `maxGpus` is above `gpuQuota` of its GPU type is an **error**, whatever `quotaPolicy` says" in text
    assert "`warn` prints a warning and deploys (the default in dev and staging), `fail` is an error and registers nothing (the default in prod)" in text
    assert f"state `{NEW_PROJECT}`, never `ok`" in text and f"(`{QUOTA_PAGE.format(project='<id>')}`)" in text



def test_make_bench_says_how_long_it_takes_and_the_quick_run_comes_first():
    """docs/development.md "Performance" names the quick run first and both durations as bench/run.py
    prints them, and the Makefile passes QUICK=1 on as --quick."""
    from bench.run import DURATION, QUICK_SIZES

    text = " ".join(section("Performance").split())
    quick, full = text.index("`make bench QUICK=1`"), text.index("`make bench` (`.venv/bin/python -m bench.run`)")
    assert quick < full
    assert f"`make bench QUICK=1` first: {DURATION['quick']} (best of 1, dev and {QUICK_SIZES[-1]} tenants)" in text
    assert f"takes {DURATION['full']}" in text
    makefile = (PROJECT_DIR / "Makefile").read_text()
    assert "$(BIN)/python -m bench.run $(if $(call data,QUICK),--quick)" in makefile  # run for real: tests/test_makefile.py


def test_the_test_time_is_a_measurement_within_its_budget():
    """docs/development.md "Test time" gives a measured run (a date, seconds for pytest and for the
    plans, their sum), not a template, and the figure is within the 2½-minute budget it states."""
    text = " ".join(section("Test time").split())
    measured = re.search(
        r"`make test` runs about (\d+) s .* \(measured on (\d{4}-\d{2}-\d{2}): `rm -rf \.venv \.pytest_cache && make test`, (\d+) s of pytest and (\d+) s for",
        text,
    )
    assert measured, text[:400]
    total, _, pytest_seconds, plan_seconds = measured.groups()
    assert abs(int(total) - int(pytest_seconds) - int(plan_seconds)) <= 2
    assert int(total) < 150 and "Keep it under 2½ minutes" in text


def test_the_field_docstring_example_is_the_models_own():
    """docs/development.md shows the docstring convention on a real model, as it is."""
    from config.tenant import CpuPool

    example = re.search(r"```python\n(class CpuPool.*?)```", section("Configuration models and their reference"), flags=re.S).group(1)
    assert f'    """{CpuPool.__doc__}"""' in example
    assert f'    max_cpus: int = Field(8, ge=1)\n    """{CpuPool.model_fields["max_cpus"].description}"""' in example
