"""The offline plan (tools/plan.py) as a user runs it: `python -m tools.plan ...`.

Called in-process through `main(argv)` for speed (tests/plan_support.py). Expected numbers come from
the config layer (load_stack, TenantPlan, the catalog), not from the plan's own code, so a plan that
prints the wrong thing fails here. Figures are checked on the stacks as shipped (tests/data/shipped/);
every stack of this checkout only has to plan. Here every committed stack, the dev plan's resource
tree, node types and tenants, `--out`, `--json`, tenant stacks, tenant isolation and `--compare-to`,
and what keeps work and data; GPU quota and costs are tests/test_plan_costs.py's, broken stack
files, secrets, the policy pack's verdict and the command-line entry point tests/test_plan_failures.py's.
"""

from __future__ import annotations

import copy
import json
import re
import subprocess

import pytest
import yaml

from components.node_provider import GcpNodeProviderArgs, node_provider_spec
from components.vcluster_values import VClusterValues
from config.catalog import load_catalog
from config.stack import TenantStack
from config.stack_files import PROJECT_DIR, list_stacks
from config.versions import (
    CCM_IMAGE,
    GPU_OPERATOR_VERSION,
    PD_CSI_DRIVER_IMAGE,
    PLATFORM_CHART_VERSION,
    VCLUSTER_CHART_VERSION,
)
from plan_support import dev_json, dev_plan, dev_stack, loaded, plan, section, vision  # noqa: F401 - module-scoped fixtures
from shipped_stacks import run_shipped

VCI = "kubernetes:management.loft.sh/v1:VirtualClusterInstance"


# --- every committed stack ---------------------------------------------------------------------------


def test_every_committed_stack_plans_environment_stacks_first():
    """Whatever stacks this checkout has (a user's added teams included), as `make test` runs it
    (`--all --quiet`, whose lines test_command_line_entry_point reads), here with --json."""
    code, out, err = plan("--all", "--json", project_dir=PROJECT_DIR)
    assert code == 0, err
    summaries = json.loads(out)["stacks"]
    assert all(s["ok"] for s in summaries), [s for s in summaries if not s["ok"]]
    planned = [s["stack"] for s in summaries]
    assert sorted(planned) == list_stacks(PROJECT_DIR)
    assert [s["kind"] for s in summaries] == ["tenant" if isinstance(loaded(s, PROJECT_DIR), TenantStack) else "environment" for s in planned]
    kinds = [s["kind"] for s in summaries]
    assert kinds == sorted(kinds), f"environment stacks must come first: {planned}"


def test_default_stack_is_dev(dev_stack):
    code, out, _ = plan("--quiet")
    assert code == 0
    assert out.startswith("ok    dev: environment stack")
    assert f"{len(dev_stack.tenants)} tenant(s)" in out


# --- the dev plan: tree, node types, tenants, labels ---------------------------------------------------


def test_dev_plan_shows_the_resource_tree_and_counts_per_type(dev_plan, dev_run):
    code, out, _, _ = dev_plan
    assert code == 0
    reference = dev_run
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


def test_dev_plan_groups_node_types_by_shape_with_zones_in_one_column(dev_plan, dev_stack):
    _, out, _, _ = dev_plan
    table = section(out, "NodeProvider ").splitlines()
    assert f"{len(dev_stack.offer.node_types)} node types in groups of the same shape" in table[0]
    # `cost` is the order the platform follows, never shown as a price (config/capacity.py).
    assert "order: the `cost` the platform compares, not a price (rank × 10,000,000,000 + thousandths of a USD per hour × 1,000 + a tie-break" in table[1]
    header, rows = table[2], [line for line in table[3:] if not line.startswith("  '")]
    assert header.split() == [
        "machine", "type", "GPU", "×", "count", "capacity", "rank", "vCPU", "memory", "GiB", "USD/h", "order", "(cost,", "less", "tie-break)", "max", "nodes", "zones",
    ]
    shapes = {(nt.machine_type, nt.gpu_count, nt.capacity, nt.rank) for nt in dev_stack.offer.node_types}
    assert len(rows) == len(shapes)  # one row per shape, not per zone
    for nt in dev_stack.offer.node_types:
        row = next(r for r in rows if r.split()[0] == nt.machine_type and nt.capacity in r.split())
        cells = row.split()
        assert nt.zone in row and ", ".join(dev_stack.facts.zones) in row
        assert f"{nt.cpu_millis / 1000:g}" in cells and f"{nt.memory_mi / 1024:.1f}" in cells
        price = "unknown" if nt.usd_per_hour is None else f"≈{nt.usd_per_hour:.4f}"
        order = "—" if nt.cost is None else str(nt.cost) if nt.gpu is None else f"{nt.cost - nt.cost % 1000}+"
        assert price in cells and order in cells


def test_node_types_option_lists_every_node_type_by_name(dev_stack):
    code, out, _ = plan("--stack", "dev", "--node-types")
    assert code == 0
    table = section(out, "NodeProvider ").splitlines()
    names = {line.split()[0] for line in table[3:] if not line.startswith("  '")}
    assert names == {nt.name for nt in dev_stack.offer.node_types}


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
                ", ".join(pool.option_values),
            ]


def test_dev_plan_labels_cloud_computed_values_and_hides_secrets(dev_plan):
    _, out, _, _ = dev_plan
    assert out.splitlines()[2].startswith("Legend: values containing 'placeholder' are computed by the cloud")
    outputs = section(out, "Stack outputs")
    assert "kubeconfig = [secret]  (computed by the cloud at deploy time)" in outputs
    # No admin password exists in Pulumi at all: only the key's declared default, which the program refuses when set.
    assert "RandomPassword" not in out and out.count("platformAdminPassword") == 1
    assert 'gpu-platform:platformAdminPassword = ""  (default)' in section(out, "Configuration")


def test_cloud_assigned_addresses_are_marked_like_placeholders(vision, dev_plan):
    """The mock's NAT addresses are plain addresses of a documentation-only range (they must read
    as addresses where the program uses them): the legend names the range, outputs holding one
    say they are computed by the cloud, and every document --out writes says so on its first line."""
    from tools.mock_engine import MOCK_ADDRESS_RANGE
    from tools.plan_text import DOCUMENT_HEADER

    out, summary, out_dir = vision
    legend = next(line for line in out.splitlines() if line.startswith("Legend: "))
    assert f"and so are addresses in {MOCK_ADDRESS_RANGE}" in legend and "documentation-only range, RFC 5737" in legend
    [nat] = [line for line in section(out, "Stack outputs").splitlines() if line.startswith("  natAddresses = ")]
    assert '["198.51.100.' in nat and nat.endswith("(computed by the cloud at deploy time)")
    assert "natAddresses" in summary["placeholderOutputs"]
    assert f"addresses in {MOCK_ADDRESS_RANGE}" in DOCUMENT_HEADER
    for directory in (out_dir, dev_plan[3]):
        documents = list(directory.rglob("*.yaml"))
        assert documents and all(p.read_text().startswith(DOCUMENT_HEADER) for p in documents)
    assert "- 198.51.100." in (out_dir / "team-vision-dev" / "tenants" / "vision" / "vcluster.yaml").read_text()


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
        region=dev_stack.region,
        node_types=dev_stack.offer.node_types,
        legacy_infrastructure=np.legacy_infrastructure,
    )
    assert document["spec"] == node_provider_spec(args).to_dict()


def test_out_vcluster_yaml_matches_the_registered_virtual_cluster_instance(dev_plan, dev_stack, dev_run):
    _, _, _, out_dir = dev_plan
    reference = dev_run
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
    for summary_type, nt in zip(dev_json["nodeTypes"], dev_stack.offer.node_types):
        assert summary_type["resources"] == nt.resources and summary_type["kubeReserved"] == nt.kube_reserved
        # `cost` is the order the platform compares, not a price: the price is usdPerHour.
        assert summary_type["cost"] == nt.cost and summary_type["usdPerHour"] == nt.usd_per_hour
        assert (summary_type["capacity"], summary_type["rank"]) == (nt.capacity, nt.rank)
    assert [(q["gpu"], q["asked"], q["quota"]) for q in dev_json["quota"]] == [(q.gpu, q.asked, q.quota) for q in dev_stack.quota]
    by_name = {t["name"]: t for t in dev_json["tenants"]}
    assert set(by_name) == {t.tenant.name for t in dev_stack.tenants}
    for tenant in dev_stack.tenants:
        summary = by_name[tenant.tenant.name]
        parts = [p for p in dev_json["costs"]["parts"] if p["tenant"] == tenant.tenant.name]
        assert len(parts) == 4
        assert summary["alwaysOnUsdPerMonth"] == pytest.approx(sum(p["alwaysOnUsdPerMonth"] for p in parts), abs=1e-3)
        assert summary["gpuOperatorVersion"] == GPU_OPERATOR_VERSION
        gpu_pools = [p for p in summary["pools"] if p["gpu"]]
        assert [(p["gpu"], p["gpusPerNode"], p["maxGpus"], p["idleAfter"], p["capacityOptions"], p["machineTypes"]) for p in gpu_pools] == [
            (p.gpu, p.gpus_per_node, p.max_gpus, p.idle_after, list(p.option_values), list(p.machine_types)) for p in tenant.gpu_pools
        ]
    assert dev_json["costs"]["pricesRead"] == load_catalog().prices["europe-west4"].read
    assert {v["what"] for v in dev_json["versions"]} >= {"platform chart", "vCluster chart", "GPU Operator chart", "kubernetes template"}
    assert dev_json["outputs"]["kubeconfig"] == "[secret]"
    assert all(set(w) == {"source", "message"} for w in dev_json["warnings"])


def test_dev_plan_prints_the_pinned_versions_and_summarizes_structured_outputs(dev_plan, dev_stack):
    _, out, _, _ = dev_plan
    pinned = section(out, "Pinned versions")
    assert f"platform chart: vcluster-platform {PLATFORM_CHART_VERSION} (https://charts.loft.sh)" in pinned
    assert f"vCluster chart: vcluster {VCLUSTER_CHART_VERSION}" in pinned
    assert f"GPU Operator chart: gpu-operator {GPU_OPERATOR_VERSION}" in pinned
    assert re.search(r"node template: inline, sha256 [0-9a-f]{12}", pinned)
    assert re.search(r"kubernetes template: inline, sha256 [0-9a-f]{12}", pinned)
    assert f"cloud controller manager: {CCM_IMAGE}" in pinned and f"PD CSI driver: {PD_CSI_DRIVER_IMAGE}" in pinned
    outputs = section(out, "Stack outputs")
    facts = next(line for line in outputs.splitlines() if line.startswith("  environmentFacts = "))
    assert f"{len(dev_stack.offer.node_types)} node types" in facts and "inline tenants: nlp, speech" in facts
    assert len(facts) < 400  # a summary, not the whole document
    assert "tenants = 2 tenant(s): nlp (namespace vcluster-nlp" in outputs


# --- tenant stacks -------------------------------------------------------------------------------------


def test_tenant_stack_says_its_environment_outputs_are_offline_placeholders(vision):
    out = vision[0]
    assert "environment outputs: placeholders from an offline evaluation of Pulumi.dev.yaml" in out
    tenant = loaded("team-vision-dev")
    assert isinstance(tenant, TenantStack)
    costs = section(out, "Costs in USD")
    assert [line.split(":")[0].strip() for line in costs.splitlines() if line.startswith("  tenant vision")] == ["tenant vision"] * 4
    assert "the environment's own parts (GKE fee, system pool, host NAT) are in its plan" in out
    # Its l4-2x pool may get only the smallest 2 × L4 shape.
    l4 = next(line for line in section(out, "Tenants (").splitlines() if line.strip().startswith("l4-2x "))
    assert "g2-standard-24" in l4 and "(2 × g2-standard-24)" in l4
@pytest.mark.parametrize("suffix", [".json", ".yaml"])
def test_tenant_stack_with_an_environment_outputs_file(tmp_path, suffix, dev_run):
    outputs = copy.deepcopy(dev_run.outputs)
    # As deployed, the environment offers one zone less than its stack file says.
    outputs["environmentFacts"]["zones"] = outputs["environmentFacts"]["zones"][:1]
    # `pulumi stack output --json` without --show-secrets, as docs/operations.md "Offline plan" says: secret
    # outputs come as the string "[secret]".
    outputs["kubeconfig"] = "[secret]"
    path = tmp_path / f"dev-outputs{suffix}"
    path.write_text(json.dumps(outputs) if suffix == ".json" else yaml.safe_dump(outputs))
    code, out, err = plan("--stack", "team-vision-dev", "--environment-outputs", str(path))
    assert code == 0, err
    assert f"environment outputs: from {path}" in out
    # The pack cannot see the kubeconfig the file hides, so the policy that reads it says so.
    assert (
        "kubernetes-providers-by-design (advisory): host: can't run here: string value at .kubeconfig can't be known during preview; "
        "the pack runs it when Pulumi has the value (`pulumi up`)"
    ) in out
    assert "placeholders from an offline evaluation" not in out
    # The program compared the file's outputs with the stack file and said so.
    assert re.search(r"WARNING \(program\): environment acme/gpu-platform/dev is deployed with a different configuration.*zones", out)


def test_environment_outputs_file_without_the_needed_outputs(tmp_path):
    path = tmp_path / "outputs.json"
    path.write_text(json.dumps({"clusterName": "gpu-dev"}))
    code, out, err = plan("--stack", "team-vision-dev", "--environment-outputs", str(path))
    assert code == 1 and out == ""
    assert "missing output(s) environmentFacts, kubeconfig" in err


# --- tenant isolation in the plan (tools/isolation_plan.py) -----------------------------------------


def test_plan_shows_each_tenants_project_and_isolation(dev_plan, dev_json):
    _, out, _, _ = dev_plan
    tenants = section(out, "Tenants")
    for name in ("nlp", "speech"):
        assert re.search(rf"^  {name}: .*\n    isolation shared: GCP project acme-ml-dev \(shared with the environment", tenants, flags=re.M)
    [nlp] = [t for t in dev_json["tenants"] if t["name"] == "nlp"]
    assert (nlp["gcpProject"], nlp["isolation"], nlp["natAddresses"], nlp["nodeMetadata"]) == ("acme-ml-dev", "shared", 1, "concealed")


def test_plan_of_a_team_stack_shows_its_own_project(vision):
    out = vision[0]
    assert "    isolation project: GCP project acme-ml-dev-vision (existing, the team's own)" in section(out, "Tenants")


def test_compare_names_what_moving_a_tenant_to_its_own_project_replaces(dev_run, stack_values):
    from tools import plan_compare
    from tools.plan_compare_text import render_changes

    values = stack_values("dev")
    values["gpu-platform:tenants"][0].update(isolation="project", gcpProject="acme-ml-dev-nlp")
    moved = run_shipped(values, stack="dev")
    changes = plan_compare.compare(plan_compare.resources_of(dev_run), plan_compare.resources_of(moved), ref="main", stack="dev")
    assert [(m.tenant, m.before, m.after) for m in changes.moves] == [("nlp", "acme-ml-dev", "acme-ml-dev-nlp")]
    replaced = {(c.type.split(":")[1], c.name) for c in changes.changes if c.action == "replace"}
    for kind in ("compute/network", "compute/subnetwork", "compute/router", "compute/routerNat", "compute/address", "serviceaccount/account"):
        assert any(k == kind and n.startswith("tenant-nlp-") for k, n in replaced), kind
    assert ("management.loft.sh/v1", "tenant-nlp-instance") in replaced  # the VirtualClusterInstance
    assert not any(n.startswith("tenant-speech-") for _, n in replaced)
    created = {c.name for c in changes.changes if c.action == "create"}
    assert {"tenant-nlp-project-compute", "tenant-nlp-project-role-vm"} <= created
    text = render_changes(changes, "acme-ml-dev")
    assert "TENANT nlp MOVES from GCP project acme-ml-dev (shared) to acme-ml-dev-nlp (its own)" in text
    assert "± replace gcp:compute/network:Network  tenant-nlp-gcp-vpc  (project: acme-ml-dev → acme-ml-dev-nlp)" in text
    assert "VIRTUAL CLUSTER RE-CREATED: tenant-nlp-instance" in text
    assert plan_compare.compare(plan_compare.resources_of(dev_run), plan_compare.resources_of(dev_run), ref="HEAD", stack="dev").changes == []


def test_compare_to_a_git_ref_from_the_command_line():
    from tools import plan_compare

    if subprocess.run(["git", "-C", str(PROJECT_DIR), "rev-parse", "HEAD"], capture_output=True).returncode != 0:
        pytest.skip("not a git checkout")
    code, out, err = plan("--stack", "dev", "--compare-to", "HEAD", "--quiet", project_dir=PROJECT_DIR)
    assert code == 0, err
    assert re.search(r"^Changes against HEAD \(stack dev\): \d+ to create, \d+ to delete, \d+ to replace, \d+ to update$", out, flags=re.M)
    with pytest.raises(plan_compare.CompareError, match="git cannot read 'no-such-ref-xyz'"):
        plan_compare.snapshot_at("no-such-ref-xyz", "dev", PROJECT_DIR)


@pytest.mark.parametrize("option", ["--output={target}", "--remote={target}", "-o{target}", "--exec=touch {target}"])
def test_a_compare_ref_that_is_an_option_to_git_is_refused_and_does_nothing(tmp_path, option):
    """`make plan COMPARE=--output=/tmp/x` once had `git archive` truncate /tmp/x: a ref is resolved
    to its commit with `git rev-parse --verify --end-of-options` first, and only the SHA reaches git."""
    from tools import plan_compare

    if subprocess.run(["git", "-C", str(PROJECT_DIR), "rev-parse", "HEAD"], capture_output=True).returncode != 0:
        pytest.skip("not a git checkout")
    target = tmp_path / "victim"
    target.write_text("kept")
    ref = option.format(target=target)
    with pytest.raises(plan_compare.CompareError) as refused:
        plan_compare.snapshot_at(ref, "dev", PROJECT_DIR)
    assert str(refused.value) == (
        f"git cannot read {ref!r} in {PROJECT_DIR}: not a commit; allowed: a branch, tag, release (vX.Y.Z) or commit of this clone"
    )
    assert target.read_text() == "kept" and sorted(p.name for p in tmp_path.iterdir()) == ["victim"]
    assert plan_compare.resolve_ref("HEAD", PROJECT_DIR) == subprocess.run(
        ["git", "-C", str(PROJECT_DIR), "rev-parse", "HEAD"], capture_output=True, text=True
    ).stdout.strip()


# --- what keeps work and data, in the plan (tools/reliability_plan.py) --------------------------------


def test_plan_shows_each_tenants_shutdown_upgrade_policy_watchdog_and_backup(dev_plan, dev_json, vision):
    _, out, _, _ = dev_plan
    tenants = section(out, "Tenants")
    assert (
        "    shutdown: pods get SIGTERM and 30s (10s of it for critical pods) before a VM powers off; upgrades: "
        "t4-1x-spot: replaced, never upgraded in place, removed after 600 s without its GPUs; "
        "system: upgraded in place by vCluster, 1 node at a time\n"
        '    backup: vcluster-speech at "0 3 * * *" UTC, kept 14 days, undeletable for 0 days (plan dev-speech)'
    ) in tenants
    [nlp] = [t for t in dev_json["tenants"] if t["name"] == "nlp"]
    assert nlp["reliability"] == {
        "shutdownGracePeriod": "110s",
        "shutdownGracePeriodCriticalPods": "10s",
        "pools": [
            {"pool": "l4-1x", "upgrade": "replaced, never upgraded in place", "gpuTimeoutSeconds": 600},
            {"pool": "system", "upgrade": "upgraded in place by vCluster, 1 node at a time", "gpuTimeoutSeconds": None},
        ],
        "backup": {"plan": "dev-nlp", "namespaces": ["vcluster-nlp"], "schedule": "0 3 * * *", "retainDays": 14, "deleteLockDays": 0, "protected": False},
    }
    text, summary, _ = vision
    assert '    backup: vcluster-vision at "0 3 * * *" UTC, kept 14 days, undeletable for 0 days (plan dev-vision)' in section(text, "Tenants")
    [team] = summary["tenants"]
    assert [p["upgrade"] for p in team["reliability"]["pools"]] == ["replaced, never upgraded in place"] * 2 + ["upgraded in place by vCluster, 1 node at a time"]


def test_the_plan_says_per_team_where_its_dashboard_metrics_and_cost_view_are(vision, dev_plan, dev_json):
    text, summary, _ = vision
    [line] = [line.strip() for line in section(text, "Tenants (").splitlines() if line.strip().startswith("monitoring:")]
    assert line.startswith('monitoring: dashboard "GPUs of team vision (dev)" in project acme-ml-dev-vision')
    assert 'metrics in project acme-ml-dev-vision, PromQL {tenant="vision"}' in line and line.endswith("cost view: billing export is not set up yet")
    [tenant] = summary["tenants"]
    assert tenant["monitoring"]["metricsProject"] == "acme-ml-dev-vision" and tenant["monitoring"]["costView"] is None
    assert summary["monitoring"] is None  # a team stack: the environment's own plan says the rest
    _, out, _, _ = dev_plan
    monitoring = section(out, "Monitoring (gpu-platform:monitoring)")
    assert "showback: billing export is not set up yet. Dataset acme-ml-dev.gpu_platform_dev_billing will exist" in monitoring
    assert "monitoring team projects: acme-ml-dev-vision" in monitoring and dev_json["monitoring"]["costView"] is None


def test_the_plan_counts_and_names_every_alert_policy_the_program_registers(dev_plan, dev_json, dev_run):
    """Four of the environment (the capacity shortage among them) and one per team with GPU pools
    (nlp, speech inline; vision's team stack), each by its title, as registered."""
    titles = [r.input("displayName").removeprefix("GPU platform dev: ") for r in dev_run.of_type("gcp:monitoring/alertPolicy:AlertPolicy")]
    assert len(titles) == 7 and "Every GPU option of a team's pool out of capacity while its pods wait" in titles
    assert {t for t in titles if t.startswith("GPU pool of ")} == {f"GPU pool of {team} at its limit while pods wait" for team in ("nlp", "speech", "vision")}
    _, out, _, _ = dev_plan
    monitoring = section(out, "Monitoring (gpu-platform:monitoring)")
    listed = monitoring.split("7 alert policies in acme-ml-dev, notifying no channel yet (monitoring.notificationChannels):\n", 1)[1]
    assert listed.splitlines()[: len(titles)] == [f"    {title}" for title in titles]
    assert dev_json["monitoring"]["alertPolicies"] == 7 and dev_json["monitoring"]["alertPolicyTitles"] == titles
