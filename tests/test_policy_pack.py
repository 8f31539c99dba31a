"""The pack as a publishable unit: self-contained (a copy of policy/ alone imports and runs), its
data generated from the program's and the bootstrap's data and never stale, and its allow-list of
IAM grants exactly the grants the program makes."""

from __future__ import annotations

import copy
import json
import re
import shutil
import subprocess
import sys

import policies as P
import pytest
import yaml
from policy_support import analyze_remote, pack_copy_judging_the_shipped_stacks, served_pack
from pulumi_policy import StackValidationPolicy

from components.auto_nodes_identity import PLATFORM_KSA, PLATFORM_NAMESPACE
from config.iam_grants import load_grants
from config.stack_files import PROJECT_DIR, read_stack_values
from guardrails.common import grant_scope, is_iam_grant
from tools import policy_data
from docs_support import all_text, section
from shipped_stacks import SHIPPED_DIR, run_shipped

POLICY_DIR = PROJECT_DIR / "policy"


@pytest.fixture(scope="module")
def evaluated(committed_runs, committed_bootstrap_run, runs):
    """What `make policy-data` evaluates, from the session's runs of the committed stacks (and of the
    stacks as shipped, where this checkout's differ), and of this checkout's bootstrap."""
    return policy_data.evaluate(stacks=committed_runs, bootstrap=committed_bootstrap_run, reference=runs)


def test_program_data_is_fresh(evaluated):
    assert policy_data.stale_files(evaluated) == [], "run `make policy-data`"


def test_freshness_check_fails_on_a_stale_file_a_missing_record_and_a_record_of_no_stack(tmp_path, monkeypatch, evaluated):
    monkeypatch.setattr(policy_data, "evaluate", lambda: evaluated)
    stale, records = tmp_path / "program_data.json", tmp_path / "stacks"
    stale.write_text(policy_data.render(evaluated).replace('"autoNodes"', '"somethingElse"', 1))
    records.mkdir()
    [first, *others] = sorted(policy_data.render_records(evaluated).items())
    for name, text in others:
        (records / name).write_text(text)
    (records / "team-gone-dev.json").write_text("{}\n")  # its stack file deleted
    monkeypatch.setattr(policy_data, "OUTPUT", stale)
    monkeypatch.setattr(policy_data, "RECORDS_DIR", records)
    assert policy_data.main(["--check"]) == 1
    assert policy_data.stale_files(evaluated) == [str(stale), str(records / first[0]), str(records / "team-gone-dev.json")]
    assert policy_data.main([]) == 0 and policy_data.main(["--check"]) == 0
    assert sorted(p.name for p in records.iterdir()) == sorted(policy_data.render_records(evaluated))


def test_each_stack_has_a_record_of_its_own():
    """One file per committed stack under policy/stacks/ (two teams added at once add two files),
    none of them in program_data.json."""
    from config.stack_files import list_stacks

    assert sorted(p.stem for p in (POLICY_DIR / "stacks").glob("*.json")) == list_stacks(PROJECT_DIR)
    assert "stacks" not in json.loads((POLICY_DIR / "program_data.json").read_text())


def test_the_pack_edits_no_import_path():
    for path in POLICY_DIR.rglob("*.py"):
        text = path.read_text()
        assert not re.search(r"sys\.path\s*(\.(insert|append|extend)|=|\+=)|PYTHONPATH", text), path
        assert not re.search(r"^\s*(from|import)\s+(components|config|tools)\b", text, re.MULTILINE), f"{path} imports the program"


def _copy_of_the_pack(tmp_path):
    copied = tmp_path / "published" / "policy"
    shutil.copytree(POLICY_DIR, copied, ignore=shutil.ignore_patterns(".venv", "__pycache__"))
    return copied


def test_a_copy_of_policy_alone_imports(tmp_path):
    """What `pulumi policy publish` uploads: policy/ without the repository around it. Python is
    started in the copy, isolated from the environment's paths (-I), as the published pack is."""
    copied = _copy_of_the_pack(tmp_path)
    script = (
        "import sys; sys.path.insert(0, '.');"  # what `python -m pulumi.policy <engine> .` does with the pack dir
        "import policies, json;"
        "loaded = sorted(m for m in sys.modules if m.split('.')[0] in ('components', 'config', 'tools'));"
        "print(json.dumps({'policies': len(policies.POLICIES), 'program_modules': loaded}))"
    )
    result = subprocess.run([sys.executable, "-I", "-c", script], cwd=copied, capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == f'{{"policies": {len(P.POLICIES)}, "program_modules": []}}'


def test_a_copy_of_policy_alone_serves_and_rejects(tmp_path, runs, shipped_records_dir):
    """The copied pack, started as the CLI starts it, rejects a grant the program does not make."""
    copied = pack_copy_judging_the_shipped_stacks(tmp_path, shipped_records_dir)
    with served_pack(copied, cwd=tmp_path) as analyzer:
        run = runs["dev"]
        binding = run.one("gcp:projects/iAMMember:IAMMember", "tenant-nlp-project-platform-vm-role")
        assert analyze_remote(analyzer, binding.type, binding.plain_inputs, binding.urn, binding.name) == []
        widened = {**binding.plain_inputs, "role": "roles/iam.serviceAccountTokenCreator"}
        found = analyze_remote(analyzer, binding.type, widened, binding.urn, binding.name)
        # The grant's allow-list, and the stack's record of the binding (its role).
        assert sorted(d.policyName for d in found) == sorted([P.grant_allow_list.name, P.stack_resources_by_record.name])
        [diagnostic] = [d for d in found if d.policyName == P.grant_allow_list.name]
        assert diagnostic.policyName == P.grant_allow_list.name
        # What the CLI prints: the policy's description, then the message, which names the resource.
        description, message = diagnostic.message.split("\n", 1)
        assert description == P.grant_allow_list.description
        assert message.startswith("tenant-nlp-project-platform-vm-role (on project 'acme-ml-dev'): member: ")
        assert "'roles/iam.serviceAccountTokenCreator' on a project is not a grant gpu-platform makes by design" in diagnostic.message


# --- The allow-list is the program's grants, no more, no less ---------------------------------------


@pytest.fixture(scope="module")
def every_grant_kind(dev_run, prod_run, tenant_run) -> list:
    """The committed stacks, plus a tenant with every option that adds grants flipped."""
    values = copy.deepcopy(read_stack_values(SHIPPED_DIR, "prod"))
    values["gpu-platform:tenants"][0].update(loadBalancerServices=True, persistentDisks=False)
    values["gpu-platform:platform"]["approvedTenantSecurity"] = {"research": {"loadBalancerServices": True}}
    options_run = run_shipped(values, stack="prod")
    return [dev_run, prod_run, tenant_run, options_run]


def _grants(run) -> set[tuple[str, str, str]]:
    found = set()
    for reg in run.registrations:
        if reg.custom and is_iam_grant(reg.type):
            inputs = reg.plain_inputs
            found.add((P.member_kind(inputs["member"]), P.role_key(inputs["role"]), grant_scope(reg.type)))
    return found


def test_the_allow_list_is_exactly_what_the_program_grants(every_grant_kind):
    made = set().union(*(_grants(run) for run in every_grant_kind))
    allowed = {(g["member"], g["role"], g["scope"]) for g in P.DATA["grants"][P.PROGRAM_PROJECT]}
    assert made == allowed


def test_the_allow_list_is_generated_from_the_grants_the_components_read():
    assert P.DATA["grants"][P.PROGRAM_PROJECT] == policy_data._program_grants()
    [workload_identity] = [g for g in load_grants() if g.role == P.WORKLOAD_IDENTITY_USER]
    assert workload_identity.member == f"workloadIdentity:{PLATFORM_NAMESPACE}/{PLATFORM_KSA}"


def test_every_policy_the_readme_table_needs_is_a_resource_or_stack_policy():
    """Resource policies are all ResourcePolicy, whose messages start with the resource's name."""
    kinds = {type(p).__name__ for p in P.POLICIES}
    assert kinds == {"ResourcePolicy", "StackValidationPolicy"}
    assert [p.name for p in P.POLICIES if isinstance(p, StackValidationPolicy)] == [
        P.kubernetes_providers_own_cluster.name,
        P.no_grants_on_host_network.name,
        P.one_tenant_per_project.name,
        P.nat_addresses.name,
        P.one_node_provider.name,
    ]


def test_the_docs_publish_the_pack_under_the_version_its_files_give_it():
    """No version is written by hand anywhere: the docs publish with `make policy-publish` and print
    the version with `python policy/pack_version.py`, which says what the bootstrap enables."""
    from pack_version import pack_version

    version = yaml.safe_load((POLICY_DIR / "PulumiPolicy.yaml").read_text())["version"]
    docs = all_text()
    # The version as a version, not inside an address (`10.4.0.0/14` holds `0.4.0`).
    assert not re.search(rf"(?<![0-9])(?<![0-9]\.){re.escape(str(version))}(?!\.?[0-9])", docs)
    assert "pulumi policy enable" not in docs and "pulumi policy publish policy" not in docs
    assert "make policy-publish" in section("Guardrails") and "make policy-publish" in section("Add a team")
    printed = subprocess.run([sys.executable, "policy/pack_version.py"], cwd=PROJECT_DIR, capture_output=True, text=True, check=True).stdout
    assert "`python policy/pack_version.py` prints it" in " ".join(section("Publishing the pack").split())
    assert printed == f"{pack_version()}\n" and re.fullmatch(rf"{re.escape(str(version))}-[0-9a-f]{{12}}\n", printed)
