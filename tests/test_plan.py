"""The offline plan (tools/plan.py) as a user runs it: `python -m tools.plan ...`.

Called in-process through `main(argv)` for speed, and once as a subprocess to prove the command-line
entry point. Expected numbers come from the config layer (load_stack, TenantPlan, the catalog), not
from the plan's own code, so a plan that prints the wrong thing fails here.
"""

from __future__ import annotations

import contextlib
import io
import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from components.node_provider import GcpNodeProviderArgs, node_provider_spec
from components.vcluster_values import VClusterValues
from config.catalog import load_catalog
from config.stack import EnvironmentStack, TenantStack, load_stack
from config.stack_files import PROJECT_DIR, list_stacks, read_stack_values
from config.versions import GPU_OPERATOR_VERSION
from tools.mock_engine import config_strings, run_program
from tools.plan import main

VCI = "kubernetes:management.loft.sh/v1:VirtualClusterInstance"


def plan(*argv: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(list(argv))
    return code, out.getvalue(), err.getvalue()


def loaded(stack: str, project_dir: Path = PROJECT_DIR):
    values = read_stack_values(project_dir, stack)
    return load_stack(config_strings(values)[0], stack=stack, project_dir=project_dir)


def section(text: str, title: str) -> str:
    """The lines of one section of the text plan: from its title to the next blank line."""
    start = next(i for i, line in enumerate(text.splitlines()) if line.startswith(title))
    lines = []
    for line in text.splitlines()[start:]:
        if not line.strip():
            break
        lines.append(line)
    return "\n".join(lines)


def money(value: float) -> str:
    return f"{value:,.2f}"


def project_copy(tmp_path: Path, *stacks: str) -> Path:
    project = tmp_path / "project"
    project.mkdir()
    shutil.copy(PROJECT_DIR / "Pulumi.yaml", project)
    for stack in stacks:
        shutil.copy(PROJECT_DIR / f"Pulumi.{stack}.yaml", project)
    return project


@pytest.fixture(scope="module")
def dev_plan(tmp_path_factory) -> tuple[int, str, str, Path]:
    out_dir = tmp_path_factory.mktemp("plan-out")
    return (*plan("--stack", "dev", "--out", str(out_dir)), out_dir)


@pytest.fixture(scope="module")
def dev_json() -> dict:
    code, out, _ = plan("--stack", "dev", "--json")
    assert code == 0
    return json.loads(out)


@pytest.fixture(scope="module")
def dev_stack() -> EnvironmentStack:
    env = loaded("dev")
    assert isinstance(env, EnvironmentStack)
    return env


# --- every committed stack ---------------------------------------------------------------------------


def test_every_committed_stack_plans_environment_stacks_first():
    code, out, err = plan("--all", "--quiet")
    assert code == 0, err
    lines = out.splitlines()
    stacks = list_stacks(PROJECT_DIR)
    assert len(lines) == len(stacks), out
    planned = [re.match(r"ok +(\S+):", line).group(1) for line in lines]  # type: ignore[union-attr]
    assert sorted(planned) == stacks
    kinds = ["tenant" if isinstance(loaded(s), TenantStack) else "environment" for s in planned]
    assert kinds == sorted(kinds), f"environment stacks must come first: {planned}"


def test_default_stack_is_dev(dev_stack):
    code, out, _ = plan("--quiet")
    assert code == 0
    assert out.startswith("ok    dev: environment stack")
    assert f"{len(dev_stack.tenants)} tenant(s)" in out


# --- the dev plan: tree, documents, costs --------------------------------------------------------------


def test_dev_plan_shows_the_resource_tree_and_counts_per_type(dev_plan):
    code, out, _, _ = dev_plan
    assert code == 0
    reference = run_program(read_stack_values(PROJECT_DIR, "dev"), stack="dev")
    tree = section(out, "Resources (")
    assert tree.startswith(f"Resources ({len(reference.registrations)} registered")
    # Components with their children indented below them.
    lines = tree.splitlines()
    tenant = next(i for i, line in enumerate(lines) if "gpu-platform:tenants:VirtualCluster  tenant-nlp" in line)
    child = next(line for line in lines[tenant + 1 :] if "VirtualClusterInstance  tenant-nlp-instance" in line)
    indent = lambda line: len(line) - len(line.lstrip(" │├└─"))  # noqa: E731
    assert indent(child) > indent(lines[tenant])
    # The count per type equals what the program registered.
    counts = {}
    for line in section(out, "Resources by type").splitlines()[2:]:
        count, typ = line.split()[:2]
        counts[typ] = int(count)
    expected = {}
    for r in reference.registrations:
        expected[r.type] = expected.get(r.type, 0) + 1
    assert counts == expected


def test_dev_plan_lists_every_node_type_with_machine_gpu_and_cost(dev_plan, dev_stack):
    _, out, _, _ = dev_plan
    table = section(out, "NodeProvider ").splitlines()
    assert f"{len(dev_stack.offer.node_types)} node types" in table[0]
    rows = {line.split()[0]: line for line in table[2:]}
    assert set(rows) == {nt.name for nt in dev_stack.offer.node_types}
    for nt in dev_stack.offer.node_types:
        cells = rows[nt.name].split()
        assert cells[1] == nt.machine_type
        if nt.gpu:
            assert f"{nt.gpu} × {nt.gpu_count}" in rows[nt.name]
        assert ("spot" if nt.spot else "on-demand") in cells
        assert cells[-3:] == [f"{nt.usd_per_hour:.4f}", str(nt.cost), "—" if nt.max_capacity is None else str(nt.max_capacity)]
        assert f"{nt.cpu_millis / 1000:g}" in cells


def test_dev_plan_reports_quota_use(dev_plan, dev_stack):
    _, out, _, _ = dev_plan
    quota = section(out, "GPU quota in")
    for use in dev_stack.offer.quota:
        assert re.search(rf"{use.gpu} +{use.quota} +{use.claimable} ", quota)
    # Node types together always could claim more than the quota; that is reported, not warned.
    assert section(out, "Warnings") == "Warnings: none"


def test_tenants_asking_for_more_than_the_quota_are_warned_about(tmp_path):
    project = project_copy(tmp_path, "dev")
    text = (project / "Pulumi.dev.yaml").read_text()
    text = text.replace("{gpu: nvidia-l4, maxGpus: 4, idleAfter: 60s}", "{gpu: nvidia-l4, maxGpus: 8, idleAfter: 60s}")
    text = text.replace("{gpu: nvidia-tesla-t4, maxGpus: 4, spot: true, idleAfter: 120s}", "{gpu: nvidia-l4, maxGpus: 4}")
    (project / "Pulumi.dev.yaml").write_text(text)
    code, out, err = plan("--project-dir", str(project), "--stack", "dev")
    assert code == 0, err
    assert "GPU quota: the tenants' pools may ask for 12 nvidia-l4 GPUs together; the quota in europe-west4 is 8" in section(out, "Warnings")


def test_dev_plan_shows_each_tenants_gpu_pools_and_operator_version(dev_plan, dev_stack):
    _, out, _, _ = dev_plan
    tenants = section(out, "Tenants (")
    assert tenants.startswith(f"Tenants ({len(dev_stack.tenants)})")
    for tenant in dev_stack.tenants:
        header = next(line for line in tenants.splitlines() if line.startswith(f"  {tenant.tenant.name}: "))
        assert f"GPU Operator {tenant.tenant.gpu_operator.version}" in header
        assert tenant.tenant.network.cidr in header
        for pool in tenant.gpu_pools:
            row = next(line for line in tenants.splitlines() if line.strip().startswith(pool.name + " "))
            assert row.split()[1:6] == [
                pool.gpu,
                str(pool.gpus_per_node),
                str(pool.max_gpus),
                pool.idle_after,
                "spot" if pool.spot else "on-demand",
            ]


def test_dev_plan_cost_ceilings_equal_the_tenant_plans(dev_plan, dev_stack):
    _, out, _, _ = dev_plan
    costs = section(out, "Cost ceiling")
    catalog = load_catalog()
    assert "list-price estimates" in costs
    assert catalog.price_date in costs and catalog.price_region in costs
    rows = {line.split("  ")[1].strip(): line for line in costs.splitlines() if line.startswith("  tenant ") or "total" in line}
    for tenant in dev_stack.tenants:
        cells = rows[f"tenant {tenant.tenant.name}"].split()[2:]
        assert cells == [
            money(tenant.gpu_usd_per_hour_ceiling),
            money(tenant.cpu_pool.usd_per_hour_ceiling),
            money(tenant.usd_per_hour_ceiling),
            money(tenant.always_on_usd_per_hour),
            money(tenant.always_on_usd_per_hour * 730),
        ]
    # Always on: the system pool at its minimum (dev is zonal: one zone) and each tenant's cheapest CPU node.
    pool = dev_stack.cluster.system_pool
    system = pool.min_nodes * catalog.machines[pool.machine_type].usd_per_hour
    system_max = pool.max_nodes * catalog.machines[pool.machine_type].usd_per_hour
    always_on = (system + sum(t.always_on_usd_per_hour for t in dev_stack.tenants)) * 730
    ceiling = system_max + sum(t.usd_per_hour_ceiling for t in dev_stack.tenants)
    total = rows["environment total"].split()
    assert total[-1] == money(always_on)
    assert total[-3] == money(ceiling)


def test_dev_plan_labels_cloud_computed_values_and_hides_secrets(dev_plan):
    _, out, _, _ = dev_plan
    assert out.splitlines()[2].startswith("Legend: values containing 'placeholder' are computed by the cloud")
    outputs = section(out, "Stack outputs")
    assert "kubeconfig = [secret]  (computed by the cloud at deploy time)" in outputs
    assert "placeholder-generated-password" not in out  # the generated admin password is secret


# --- --out ---------------------------------------------------------------------------------------------


def test_out_writes_one_yaml_file_per_document(dev_plan, dev_stack):
    code, _, _, out_dir = dev_plan
    assert code == 0
    written = sorted(p.relative_to(out_dir).as_posix() for p in out_dir.rglob("*") if p.is_file())
    expected = ["dev/nodeprovider.yaml"] + [
        f"dev/tenants/{t.tenant.name}/{name}"
        for t in dev_stack.tenants
        for name in ("gpu-operator-values.yaml", "objects.yaml", "vcluster.yaml")
    ]
    assert written == sorted(expected)
    for path in out_dir.rglob("*.yaml"):
        assert all(doc is not None for doc in yaml.safe_load_all(path.read_text())), path


def test_out_nodeprovider_is_the_rendered_node_provider(dev_plan, dev_stack):
    _, _, _, out_dir = dev_plan
    document = yaml.safe_load((out_dir / "dev" / "nodeprovider.yaml").read_text())
    assert (document["apiVersion"], document["kind"], document["metadata"]["name"]) == (
        "management.loft.sh/v1",
        "NodeProvider",
        dev_stack.node_provider.name,
    )
    np = dev_stack.node_provider
    args = GcpNodeProviderArgs(
        name=np.name,
        environment=dev_stack.environment,
        project=dev_stack.project,
        region=dev_stack.region,
        node_types=dev_stack.offer.node_types,
        legacy_infrastructure=np.legacy_infrastructure,
    )
    assert document["spec"] == node_provider_spec(args).to_dict()


def test_out_vcluster_yaml_matches_the_registered_virtual_cluster_instance(dev_plan, dev_stack):
    _, _, _, out_dir = dev_plan
    reference = run_program(read_stack_values(PROJECT_DIR, "dev"), stack="dev")
    for tenant in dev_stack.tenants:
        name = tenant.tenant.name
        instance = next(r for r in reference.of_type(VCI) if r.input("metadata", "name") == name)
        directory = out_dir / "dev" / "tenants" / name
        text = (directory / "vcluster.yaml").read_text()
        assert VClusterValues.parse(text).document == VClusterValues.parse(instance.input("spec", "template", "helmRelease", "values")).document
        pools = {p.name: p for p in VClusterValues.parse(text).gpu_pools()}
        assert {p.name for p in tenant.gpu_pools} == set(pools)
        for pool in tenant.gpu_pools:
            assert pools[pool.name].gpu_limit == pool.max_gpus and pools[pool.name].has_gpu_taint
        values = yaml.safe_load((directory / "gpu-operator-values.yaml").read_text())
        assert values["driver"]["enabled"] is False
        objects = list(yaml.safe_load_all((directory / "objects.yaml").read_text()))
        assert any(o["kind"] == "Job" for o in objects) == tenant.tenant.smoke_test


def test_out_removes_documents_of_a_tenant_that_is_gone(tmp_path):
    stale = tmp_path / "dev" / "tenants" / "retired"
    stale.mkdir(parents=True)
    (stale / "vcluster.yaml").write_text("privateNodes: {enabled: true}\n")
    code, _, _ = plan("--stack", "dev", "--quiet", "--out", str(tmp_path))
    assert code == 0
    assert not stale.exists()
    assert (tmp_path / "dev" / "nodeprovider.yaml").is_file()


# --- --json --------------------------------------------------------------------------------------------


def test_json_summary(dev_json, dev_stack):
    assert dev_json["stack"] == "dev" and dev_json["kind"] == "environment" and dev_json["ok"] is True
    assert sum(dev_json["resources"]["byType"].values()) == dev_json["resources"]["total"]
    assert dev_json["resources"]["byType"][VCI] == len(dev_stack.tenants)
    assert [nt["name"] for nt in dev_json["nodeTypes"]] == [nt.name for nt in dev_stack.offer.node_types]
    assert {q["gpu"]: q["claimable"] for q in dev_json["quota"]} == {q.gpu: q.claimable for q in dev_stack.offer.quota}
    by_name = {t["name"]: t for t in dev_json["tenants"]}
    assert set(by_name) == {t.tenant.name for t in dev_stack.tenants}
    for tenant in dev_stack.tenants:
        summary = by_name[tenant.tenant.name]
        assert summary["usdPerHourCeiling"] == pytest.approx(tenant.usd_per_hour_ceiling, abs=1e-4)
        assert summary["gpuUsdPerHourCeiling"] == pytest.approx(tenant.gpu_usd_per_hour_ceiling, abs=1e-4)
        assert summary["gpuOperatorVersion"] == GPU_OPERATOR_VERSION
        gpu_pools = [p for p in summary["pools"] if p["gpu"]]
        assert [(p["gpu"], p["gpusPerNode"], p["maxGpus"], p["idleAfter"], p["spot"]) for p in gpu_pools] == [
            (p.gpu, p.gpus_per_node, p.max_gpus, p.idle_after, p.spot) for p in tenant.gpu_pools
        ]
    assert dev_json["costs"]["basis"] == "list-price estimates"
    assert dev_json["costs"]["priceDate"] == load_catalog().price_date
    assert dev_json["outputs"]["kubeconfig"] == "[secret]"
    assert all(set(w) == {"source", "message"} for w in dev_json["warnings"])


def test_json_with_all_lists_every_stack():
    code, out, _ = plan("--all", "--json")
    assert code == 0
    stacks = json.loads(out)["stacks"]
    assert sorted(s["stack"] for s in stacks) == list_stacks(PROJECT_DIR)
    assert all(s["ok"] for s in stacks)


# --- tenant stacks -------------------------------------------------------------------------------------


def test_tenant_stack_says_its_environment_outputs_are_offline_placeholders():
    code, out, err = plan("--stack", "team-vision-dev")
    assert code == 0, err
    assert "environment outputs: placeholders from an offline evaluation of Pulumi.dev.yaml" in out
    tenant = loaded("team-vision-dev")
    assert isinstance(tenant, TenantStack)
    row = next(line for line in section(out, "Cost ceiling").splitlines() if line.startswith("  tenant vision"))
    assert row.split()[2:5] == [money(tenant.tenant.gpu_usd_per_hour_ceiling), money(tenant.tenant.cpu_pool.usd_per_hour_ceiling), money(tenant.tenant.usd_per_hour_ceiling)]


@pytest.mark.parametrize("suffix", [".json", ".yaml"])
def test_tenant_stack_with_an_environment_outputs_file(tmp_path, suffix):
    outputs = run_program(read_stack_values(PROJECT_DIR, "dev"), stack="dev").outputs
    # As deployed, the environment offers one zone less than its stack file says.
    outputs["environmentFacts"]["zones"] = outputs["environmentFacts"]["zones"][:1]
    path = tmp_path / f"dev-outputs{suffix}"
    path.write_text(json.dumps(outputs) if suffix == ".json" else yaml.safe_dump(outputs))
    code, out, err = plan("--stack", "team-vision-dev", "--environment-outputs", str(path))
    assert code == 0, err
    assert f"environment outputs: from {path}" in out
    assert "placeholders from an offline evaluation" not in out
    # The program compared the file's outputs with the stack file and said so.
    assert re.search(r"WARNING \(program\): environment acme/gpu-platform/dev is deployed with a different configuration.*zones", out)


def test_environment_outputs_file_without_the_needed_outputs(tmp_path):
    path = tmp_path / "outputs.json"
    path.write_text(json.dumps({"clusterName": "gpu-dev"}))
    code, out, err = plan("--stack", "team-vision-dev", "--environment-outputs", str(path))
    assert code == 1 and out == ""
    assert "missing output(s) environmentFacts, kubeconfig" in err


# --- broken and unusual stack files --------------------------------------------------------------------


def test_broken_stack_file_fails_with_every_problem_and_no_traceback(tmp_path):
    project = project_copy(tmp_path, "dev")
    document = yaml.safe_load((project / "Pulumi.dev.yaml").read_text())
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
    project = project_copy(tmp_path)
    (project / "Pulumi.dev.yaml").write_text("config:\n  gpu-platform:tenants: [\n")
    code, _, err = plan("--project-dir", str(project), "--stack", "dev")
    assert code == 1
    assert "Pulumi.dev.yaml: not valid YAML" in err and "Traceback" not in err


def test_unknown_stack_names_the_stacks_there_are():
    code, _, err = plan("--stack", "staging")
    assert code == 1
    assert "Pulumi.staging.yaml: no such stack file" in err and "dev, prod" in err


SECURE = """
  gpu-platform:platformAdminPassword:
    secure: v1:AAAAbm90LWEtcmVhbC1jaXBoZXJ0ZXh0
"""


def test_secure_values_are_shown_as_secret_and_legacy_mode_warns(tmp_path):
    project = project_copy(tmp_path, "dev")
    text = (project / "Pulumi.dev.yaml").read_text().replace("    spot: true\n", "    spot: true\n    legacyInfrastructure: true\n", 1)
    (project / "Pulumi.dev.yaml").write_text(text + SECURE)
    code, out, err = plan("--project-dir", str(project), "--stack", "dev")
    assert code == 0, err
    assert "gpu-platform:platformAdminPassword = [secret]" in out
    assert "AAAAbm90LWEtcmVhbC1jaXBoZXJ0ZXh0" not in out
    assert "platformAdminPassword =" not in section(out, "Stack outputs")  # set, so nothing generated
    warnings = section(out, "Warnings")
    assert re.search(r"WARNING \((program|plan)\): nodeProvider\.legacyInfrastructure", warnings)
    # The quiet line counts it too.
    code, quiet, _ = plan("--project-dir", str(project), "--stack", "dev", "--quiet")
    assert code == 0 and re.search(r"[1-9]\d* warning\(s\)", quiet)


def test_command_line_entry_point(tmp_path):
    """`python -m tools.plan --all --quiet` as CI runs it: one line per stack, non-zero on a failure."""
    project = project_copy(tmp_path, "dev")
    (project / "Pulumi.broken.yaml").write_text("config:\n  gpu-platform:environment: qa\n")
    result = subprocess.run(
        [sys.executable, "-m", "tools.plan", "--project-dir", str(project), "--all", "--quiet"],
        cwd=PROJECT_DIR,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == 1
    assert re.search(r"^ok +dev: environment stack", result.stdout, re.M)
    assert re.search(r"^FAIL +broken: ", result.stdout, re.M)
    assert "environment: 'qa' is not allowed" in result.stderr
    assert "Traceback" not in result.stdout + result.stderr
