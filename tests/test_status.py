"""README's "Status" and "What it needs and what it costs": what is verified offline and against
which upstream artefacts (the versions this checkout pins), what only a live run shows (the
acceptance list), and what is paid for, each claim with its source."""

from __future__ import annotations

import re

from docs_support import section

from config import versions
from config.stack_files import PROJECT_DIR
from tests.acceptance.assumptions import ASSUMPTIONS


def pins(path: str) -> dict[str, str]:
    return dict(re.findall(r"^([A-Za-z0-9_.-]+)==([^\s#]+)", (PROJECT_DIR / path).read_text(), flags=re.MULTILINE))


def test_the_status_names_the_artefacts_this_checkout_is_verified_against():
    text = " ".join(section("Status").split())
    assert "**Verified offline only: it has not yet run against a real project.**" in text
    requirements = pins("requirements.txt")
    for package in ("pulumi", "pulumi-gcp", "pulumi-kubernetes"):
        assert f"`{package}` {requirements[package]}" in text, package
    assert f"loft-sh/vcluster tag `v{versions.VCLUSTER_CHART_VERSION}`" in text
    assert f"loft-sh/loft tag `v{versions.PLATFORM_CHART_VERSION}`" in text
    tofu = re.search(r"^OPENTOFU_VERSION=(\S+)$", (PROJECT_DIR / ".ci" / "run").read_text(), flags=re.MULTILINE).group(1)
    assert f"OpenTofu {tofu}" in text


def test_the_status_sends_to_the_acceptance_list_and_names_what_is_on_it():
    text = " ".join(section("Status").split())
    assert "[What only a real project can settle](docs/acceptance.md#what-only-a-real-project-can-settle)" in text
    assert "make acceptance PROJECT=<id>" in text and "No run is recorded yet" in text
    # What the README names as live-only is on the acceptance list.
    named = {
        "provider ID": "provider-id",
        "images pulled before the join": "images-before-join",
        "idle deletion": "idle-deletion",
        "metadata concealment": "metadata-concealment",
        "metrics in Cloud Monitoring": "metrics-in-monitoring",
        "Fabric Manager on NVSwitch machines": "fabric-manager",
        "labels reaching billing export": "labels-in-billing-export",
    }
    keys = {a.key for a in ASSUMPTIONS}
    for words, key in named.items():
        assert words in text and key in keys, words
    # The acceptance run's cost the README quotes is the one docs/acceptance.md gives.
    quoted = re.search(r"≈ (\d+\.\d\d) USD", text).group(1)
    assert f"**≈ {quoted}**" in section("What it costs")


def test_every_paid_need_names_its_source():
    items = re.split(r"^- ", section("What it needs and what it costs"), flags=re.MULTILINE)[1:]
    assert [re.match(r"\*\*([^*]+)\*\*", item).group(1) for item in items] == ["GCP", "vCluster Platform licence", "Pulumi Cloud"]
    for item in items:
        assert re.search(r"<https://[^>]+>", item), item.split(":", 1)[0]
    licence, cloud = " ".join(items[1].split()), " ".join(items[2].split())
    assert "loft-sh/vcluster-docs `src/data/products.yaml`" in licence and re.search(r"commit `[0-9a-f]{40}`", licence)
    assert "**Free** tier" in licence and "**single sign-on** (`platform.sso`) needs an Enterprise tier" in licence
    assert "**preventative policy groups**" in cloud and "**team tokens**" in cloud and "<https://www.pulumi.com/pricing/>" in cloud
    assert "`pulumiCloud.manage: false`" in cloud  # the way without team tokens, as docs/ci.md says
    assert "`pulumiCloud.manage: false`" in section("Decisions behind it")
