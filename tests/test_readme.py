"""The README is the user's contract: every config key documented, the security table equal to
the role the program creates."""

from __future__ import annotations

import re

import pytest

from config.environment import ClusterConfig, NodeProviderConfig, PlatformConfig
from config.permissions import AUTO_NODES, load_roles
from config.stack_files import PROJECT_DIR
from config.tenant import Tenant

README = (PROJECT_DIR / "README.md").read_text()


def section(title: str) -> str:
    start = README.index(f"## {title}")
    end = README.find("\n## ", start + 1)
    return README[start : end if end != -1 else None]


@pytest.mark.parametrize("model", [ClusterConfig, PlatformConfig, NodeProviderConfig, Tenant])
def test_every_config_key_is_documented(model):
    reference = section("Configuration reference")
    missing = [f.alias for f in model.model_fields.values() if f"`{f.alias}`" not in reference]
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


def test_the_first_command_is_the_offline_plan():
    first = re.search(r"```sh\n(.+?)\n", README).group(1)
    assert first.startswith("make plan")


def test_the_costs_example_is_the_dev_plan():
    """README "Costs" shows dev's cost table exactly as `make plan` prints it."""
    import contextlib
    import io

    from tools.plan import main

    example = re.search(r"```text\n(.+?)\n```", section("Costs"), flags=re.DOTALL).group(1)
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        assert main(["--stack", "dev"]) == 0
    assert example in out.getvalue()
