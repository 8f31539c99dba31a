"""Configuration that used to pass silently and could destroy or narrow what a stack deploys: each
case a clear error naming its key, all at once, nothing registered (issue 26, "Nothing destroys by
accident")."""

from __future__ import annotations

from config import versions, zones
from config.availability import load_availability
from config.catalog import CATALOG_PATH
from config.stack import load_stack
from shipped_stacks import SHIPPED_DIR, problems, refused

NS = "gpu-platform"


def test_every_silent_case_is_an_error_naming_its_key_all_at_once(stack_values):
    values = stack_values("dev")
    values["gpu_platform:tenants"] = values[f"{NS}:tenants"]  # a namespace typo beside the real key
    values["gpu-platfrom:monitoring"] = {"enabled": True}
    values["gpc:zone"] = "europe-west4-a"
    values["gcp:project"] = "ACME_ML_dev"
    values[f"{NS}:nodeProvider"]["zones"] = ["europe-west4-a", "europe-west4-d"]
    values[f"{NS}:nodeProvider"]["gpuDisk"] = {"sizeGb": 1_000_000}
    values[f"{NS}:platform"] = {"chartVersion": "99.0.0"}
    pool = values[f"{NS}:tenants"][0]["gpuPools"][0]
    pool.update(maxGpus=True, idleAfter="8760h", spot="yes")
    message = refused(values)
    for expected in (
        "gpu_platform:tenants: namespace 'gpu_platform' is read by nothing; did you mean `gpu-platform:tenants`?",
        "gpu-platfrom:monitoring: namespace 'gpu-platfrom' is read by nothing; did you mean `gpu-platform:monitoring`?",
        "gpc:zone: namespace 'gpc' is read by nothing; did you mean `gcp:zone`?",
        "gcp:project: 'ACME_ML_dev' is not a GCP project id: 6–30 characters of lowercase letters, digits and hyphens",
        "nodeProvider.zones[1]: 'europe-west4-d' is not a zone of europe-west4; its zones: europe-west4-a, europe-west4-b, europe-west4-c",
        "nodeProvider.gpuDisk.sizeGb: 1000000 is out of range; must be at most 65536",
        "platform.chartVersion: '99.0.0' is not a version this release supports; supported: 4.11.2",
        "tenants[0].gpuPools[0].maxGpus: true is a boolean, not a whole number",
        "tenants[0].gpuPools[0].idleAfter: 8760h is longer than a day; at most 24h",
        "tenants[0].gpuPools[0].spot: 'yes' is not true or false (write true or false, unquoted)",
    ):
        assert f"  - {expected}" in message, expected


def test_a_namespace_nobody_reads_is_named_in_a_warning(stack_values):
    values = stack_values("dev")
    values["acme:costCentre"] = "ml-42"
    loaded = load_stack(values, stack="dev", project_dir=SHIPPED_DIR)
    assert loaded.warnings[0].startswith("configuration key(s) acme:costCentre belong to no namespace this program or its providers read")
    # The CLI's and the providers' own namespaces are known.
    values = stack_values("dev")
    values.update({"pulumi:tags": {"team": "ml"}, "kubernetes:enableServerSideApply": "true", "gcp:zone": "europe-west4-a"})
    assert not any("namespace" in w for w in load_stack(values, stack="dev", project_dir=SHIPPED_DIR).warnings)


def test_quoted_numbers_and_numbers_for_booleans_are_refused(stack_values):
    values = stack_values("dev")
    values[f"{NS}:tenants"][0]["network"]["natAddresses"] = "2"
    values[f"{NS}:nodeProvider"]["spot"] = 1
    values[f"{NS}:nodeProvider"]["gpuQuota"]["nvidia-l4"] = True
    found = problems(values)
    assert "tenants[0].network.natAddresses: '2' is a string, not a whole number (write it without quotes)" in found
    assert "nodeProvider.spot: 1 is not true or false (write true or false, unquoted)" in found
    assert "nodeProvider.gpuQuota: nvidia-l4: true is a boolean, not a whole number" in found


def test_cluster_location_and_region_are_real(stack_values):
    values = stack_values("dev")
    values[f"{NS}:cluster"]["location"] = "europe-west4-f"
    assert any(p.startswith("cluster.location: 'europe-west4-f' is not a zone of europe-west4") for p in problems(values))
    values = stack_values("dev")
    values["gcp:region"] = "europe-west5"
    assert any(p.startswith("gcp:region: 'europe-west5' is not a Compute Engine region config/zones.yaml records") for p in problems(values))


def test_vcluster_version_from_the_supported_set(stack_values):
    values = stack_values("dev")
    values[f"{NS}:platform"] = {"vclusterVersion": "0.36.2"}
    assert "platform.vclusterVersion: '0.36.2' is not a version this release supports; supported: 0.36.1 (config/versions.py)" in problems(values)
    assert versions.PLATFORM_CHART_VERSION in versions.SUPPORTED_PLATFORM_CHART_VERSIONS


def test_the_zone_record_holds_every_zone_the_catalog_offers_gpus_in():
    availability = load_availability(CATALOG_PATH)
    for family in availability.families.values():
        for region, family_zones in family.zones.items():
            assert set(family_zones) <= set(zones.region_zones(region) or ()), (family.name, region)
