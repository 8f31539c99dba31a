"""The allow-list of vcluster.yaml key paths (components/vcluster_value_paths.yaml) is what the
renderer writes, no more and no less (for the committed stacks, and for a pool with warm nodes,
which none of them has), each path is a key of the pinned chart's schema, and the pack carries
exactly this list."""

from __future__ import annotations

from pathlib import Path

import policies as P
import yaml
from guardrails import value_paths

from components.vcluster_values import VClusterValues, kubelet_config, render_values
from config.reliability import shutdown_grace
from config.stack import NS, load_stack
from config.stack_files import PROJECT_DIR
from shipped_stacks import SHIPPED_DIR, shipped_values

PATHS_FILE = PROJECT_DIR / "components" / "vcluster_value_paths.yaml"
ALLOWED = yaml.safe_load(PATHS_FILE.read_text())["paths"]
PATTERNS = [value_paths.parse(p) for p in ALLOWED]
SCHEMA = yaml.safe_load((Path(__file__).parent / "data" / "vcluster-0.36.1-values.schema.yaml").read_text())


def rendered(*runs) -> list[dict]:
    documents = [
        VClusterValues.parse(reg.plain_inputs["spec"]["template"]["helmRelease"]["values"]).document
        for run in runs
        for reg in run.of_type(P.VIRTUAL_CLUSTER_INSTANCE)
    ]
    assert documents, "no VirtualClusterInstance rendered: this test would pass vacuously"
    return documents


def test_the_renderer_writes_only_allowed_paths(runs, legacy_dev_run, warm_run):
    for document in rendered(*runs.values(), legacy_dev_run, warm_run):
        outside = [value_paths.show(path) for path, value in value_paths.leaves(document) if not value_paths.allowed(path, value, PATTERNS)]
        assert outside == [], f"the renderer writes paths {PATHS_FILE.name} lacks: {outside}"


def test_every_allowed_path_is_one_the_program_writes(runs, legacy_dev_run, warm_run):
    """An allow-list wider than the renderer would admit keys nobody reviewed for the host."""
    used = set()
    for document in rendered(*runs.values(), legacy_dev_run, warm_run):
        for path, _ in value_paths.leaves(document):
            used |= {pattern for pattern, tokens in zip(ALLOWED, PATTERNS) if value_paths.allowed(path, "x", [tokens])}
    assert [p for p in ALLOWED if p not in used] == []


# Every way a tenant's configuration shapes its pools, beside what the shipped stacks already show:
# each capacity option alone and in lists, Flex-start with and without Spot and limited zones, warm
# nodes (on-demand, and Spot kept warm), warm nodes taking all of a pool's GPUs (no dynamic pool), a
# reserved slice first, several GPUs per node, a control plane with its own resources and a node
# shutdown of its own. A key the program writes for one of them that the allow-list lacks would be
# refused by the pack's vcluster-values-by-design in every stack that uses it.
POOL_VARIANTS = [
    [{"gpu": "nvidia-l4", "maxGpus": 4}, {"gpu": "nvidia-tesla-t4", "maxGpus": 2, "capacity": ["spot"]}],
    [{"gpu": "nvidia-l4", "maxGpus": 4, "capacity": ["flex-start"]}, {"gpu": "nvidia-tesla-t4", "maxGpus": 4, "gpusPerNode": 2, "capacity": ["on-demand", "spot"]}],
    [{"gpu": "nvidia-l4", "maxGpus": 4, "capacity": ["flex-start", "spot", "on-demand"], "zones": ["us-central1-b"], "terminationGracePeriod": "1h"}],
    [{"gpu": "nvidia-l4", "maxGpus": 4, "warmNodes": 1}, {"gpu": "nvidia-tesla-t4", "maxGpus": 2, "capacity": ["spot", "on-demand"], "warmNodes": 1, "spotWarmNodes": True}],
    [{"gpu": "nvidia-tesla-t4", "maxGpus": 2, "warmNodes": 2}, {"gpu": "nvidia-tesla-a100", "maxGpus": 4, "capacity": ["flex-start", "on-demand"], "idleAfter": "30s"}],
    [{"gpu": "nvidia-h100-80gb", "maxGpus": 8, "gpusPerNode": 8, "capacity": [{"reservation": "research-h100"}, "flex-start", "on-demand"]}],
]


def variant_documents() -> list[dict]:
    """vcluster.yaml of research in prod as shipped, its pools replaced by each variant, rendered by
    the program's own renderer from the program's own plan (the properties are the program's fixed
    keys, which the shipped runs render in both modes)."""
    documents = []
    for pools in POOL_VARIANTS:
        values = shipped_values("prod")
        tenant = values[f"{NS}:tenants"][0]
        tenant.update(gpuPools=pools, controlPlane={"requests": {"cpu": "500m"}, "limits": {"memory": "8Gi"}}, nodeShutdown={"gracePeriod": "20s"})
        env = load_stack(values, stack="prod", project_dir=SHIPPED_DIR)
        [plan] = env.tenants
        text = render_values(
            [*plan.gpu_pools, plan.cpu_pool], "gcp-gpu", {}, source_ranges=["192.0.2.1/32"],
            resources=plan.tenant.control_plane.model_dump(), kubelet=kubelet_config(*shutdown_grace(plan.tenant)),
        )
        documents.append(VClusterValues.parse(text).document)
    return documents


def test_every_path_rendered_for_any_pool_configuration_is_allowed():
    documents = variant_documents()
    written = {value_paths.show(path) for document in documents for path, _ in value_paths.leaves(document)}
    # The variants reach what they are for: Flex-start expiry, warm (static) pools, a pool without a dynamic part.
    assert any(".expireAfter" in p for p in written) and any(".static[" in p for p in written)
    entry = documents[4]["privateNodes"]["autoNodes"][0]
    assert [p["name"] for p in entry["static"]] == ["t4-1x-warm"] and "t4-1x" not in [p["name"] for p in entry["dynamic"]]
    for document in documents:
        outside = [value_paths.show(path) for path, value in value_paths.leaves(document) if not value_paths.allowed(path, value, PATTERNS)]
        assert outside == [], f"the renderer writes paths {PATHS_FILE.name} lacks: {outside}"


def _resolve(schema: dict, tokens: tuple) -> bool:
    """Whether a path pattern names keys our record of the chart's schema defines (a free object
    of the record, like a Service spec, admits any key below it)."""
    node = schema
    for kind, name in tokens:
        while "$ref" in node:
            node = SCHEMA["$defs"][node["$ref"].rsplit("/", 1)[-1]]
        if kind == value_paths.ITEM:
            if node.get("type") != "array":
                return False
            node = node.get("items", {})
        elif "properties" in node:
            if kind == value_paths.ANY or name not in node["properties"]:
                return isinstance(node.get("additionalProperties"), dict)
            node = node["properties"][name]
        elif isinstance(node.get("additionalProperties"), dict):
            node = node["additionalProperties"]
        else:
            return node.get("type") == "object"  # free upstream: any key below it
    return True


def test_every_allowed_path_is_in_the_pinned_chart_schema():
    assert [p for p, tokens in zip(ALLOWED, PATTERNS) if not _resolve(SCHEMA, tokens)] == []
    assert not _resolve(SCHEMA, value_paths.parse("controlPlane.statefulSet.securityContext"))  # the check can fail


def test_the_pack_carries_exactly_this_list():
    assert P.DATA["vclusterValues"]["allowedPaths"] == ALLOWED


def test_paths_parse_and_print_as_written():
    tokens = value_paths.parse('privateNodes.autoNodes[].properties["vcluster.com/ccm-enabled"]')
    assert tokens == (("key", "privateNodes"), ("key", "autoNodes"), ("item", None), ("key", "properties"), ("key", "vcluster.com/ccm-enabled"))
    document = {"privateNodes": {"autoNodes": [{"properties": {"vcluster.com/ccm-enabled": "true"}}]}}
    [(path, value)] = list(value_paths.leaves(document))
    assert value_paths.show(path) == 'privateNodes.autoNodes[0].properties["vcluster.com/ccm-enabled"]' and value == "true"
    assert value_paths.allowed(path, value, [tokens])
    # Empty or null values on the way to an allowed key are harmless; anything under a key that
    # is not on the way is not.
    assert value_paths.allowed((("key", "privateNodes"),), {}, [tokens])
    assert not value_paths.allowed((("key", "sync"),), {}, [tokens])
