"""The upgrade check (`make plan COMPARE=<ref>`, tools/plan_compare.py) and the destroy gate
(tools/destroy_gate.py): what a new version deletes or replaces in a deployed stack, judged as
Pulumi's engine would (URNs, aliases, replace-on-change inputs), and refused unless declared."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from config.stack_files import PROJECT_DIR
from shipped_stacks import SHIPPED_DIR
from tools import destroy_gate, plan_compare
from tools import plan as plan_tool
from tools.releases import latest_release

# The program's files; enough of the repository for the program to run at each commit (with the
# dev stack as shipped: this checkout's stack files are the user's, tests/checkout_reads.py).
PROGRAM = ("__main__.py", "Pulumi.yaml", "components", "config", "policy", "templates", "tools")
INSTANCE = "kubernetes:management.loft.sh/v1:VirtualClusterInstance"
# v0.1.0, the first release (CHANGELOG.md); tools/releases.py finds it from git's tag or CHANGELOG.md.
FIRST_RELEASE = "20a639d57e35401bb74ad0b429894d2f43780d84"


def git(repo: Path, *args: str) -> str:
    env = {**os.environ, "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@example.com", "GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@example.com"}
    return subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True, text=True, env=env).stdout.strip()


def commit_edit(repo: Path, old: str, new: str, message: str) -> str:
    path = repo / "components" / "tenant_vcluster.py"
    text = path.read_text()
    assert old in text
    path.write_text(text.replace(old, new))
    git(repo, "commit", "-qam", message)
    return git(repo, "rev-parse", "HEAD")


def release_commit() -> str | None:
    """The last release's commit, when this clone has it."""
    latest = latest_release(PROJECT_DIR)
    release = latest.commit if latest is not None and latest.commit else FIRST_RELEASE
    found = subprocess.run(["git", "-C", str(PROJECT_DIR), "cat-file", "-e", f"{release}^{{commit}}"], capture_output=True)
    return release if found.returncode == 0 else None


# The shipped environment stacks: every stateful resource type is in them (a team stack's tenant is
# the same component as dev's inline tenants), and a team stack would cost two more evaluations.
SHIPPED = ("dev", "prod")


@pytest.fixture(scope="module")
def evaluated(tmp_path_factory) -> dict:
    """In one interpreter (the SDKs load once): three commits of the program in a fresh repository
    (as it is, its tenant instances renamed, renamed with an alias), each commit's dev stack by its
    own code; and the last release's code on its own copies of the shipped stacks."""
    tmp = tmp_path_factory.mktemp("upgrade")
    repo = tmp / "repo" / "gpu-platform"
    repo.mkdir(parents=True)
    for name in PROGRAM:
        source = PROJECT_DIR / name
        if source.is_dir():
            shutil.copytree(source, repo / name, ignore=shutil.ignore_patterns("__pycache__", ".venv", "*.pyc"))
        else:
            shutil.copy(source, repo / name)
    shutil.copy(SHIPPED_DIR / "Pulumi.dev.yaml", repo / "Pulumi.dev.yaml")
    git(repo, "init", "-q")
    git(repo, "add", ".")
    git(repo, "commit", "-qm", "as released")
    commits = {"base": git(repo, "rev-parse", "HEAD")}
    commits["renamed"] = commit_edit(repo, 'f"{name}-instance",', 'f"{name}-vcluster",', "instances renamed")
    commits["aliased"] = commit_edit(
        repo, "            opts=pulumi.ResourceOptions(\n                parent=self,\n                # The caller's depends_on",
        "            opts=pulumi.ResourceOptions(\n                parent=self,\n                aliases=[pulumi.Alias(name=f\"{name}-instance\")],\n                # The caller's depends_on",
        "instances renamed with an alias",
    )
    jobs, keys = [], []
    for key, commit in commits.items():
        tree = tmp / key / "gpu-platform"
        plan_compare.extract(commit, repo, tree)
        jobs.append((str(tree), "dev", str(tmp / f"{key}.json"), str(tree)))
        keys.append(key)
    release = release_commit()
    if release is not None:
        tree = tmp / "release" / "gpu-platform"
        plan_compare.extract(release, PROJECT_DIR, tree)
        for stack in SHIPPED:
            jobs.append((str(tree), stack, str(tmp / f"release-{stack}.json"), str(tree / "tests" / "data" / "shipped")))
            keys.append(("release", stack))
    return {**plan_compare.evaluate_trees(jobs, keys), "release": release}


@pytest.fixture
def renamed(evaluated) -> dict:
    return evaluated


def test_a_renamed_tenant_instance_is_deleted_and_the_gate_refuses_it(renamed):
    changes = plan_compare.compare(renamed["base"], renamed["renamed"], ref="v-old", stack="dev")
    deleted = {c.name for c in changes.changes if c.action == "delete" and c.type == INSTANCE}
    assert deleted == {"tenant-nlp-instance", "tenant-speech-instance"}
    assert {c.name for c in changes.changes if c.action == "create" and c.type == INSTANCE} == {"tenant-nlp-vcluster", "tenant-speech-vcluster"}
    banner, allowed = destroy_gate.verdict("dev", changes.destructions(), ())
    assert not allowed
    assert banner.startswith("DESTROYS: stack dev would delete or replace 2 resource(s) that hold state:")
    assert f"  DELETE  {INSTANCE}  tenant-nlp-instance  [NOT DECLARED]: loses a tenant's virtual cluster" in banner
    assert "its URN changed (tenant-nlp-vcluster of the same type is created) without an alias" in banner
    assert "ALLOW_DESTROY=tenant-nlp,tenant-speech" in banner
    # Declared, it may go; a declaration of one tenant covers that tenant only.
    assert destroy_gate.verdict("dev", changes.destructions(), ("tenant-nlp", "tenant-speech"))[1]
    assert not destroy_gate.verdict("dev", changes.destructions(), ("tenant-nlp",))[1]


def test_with_an_alias_the_renamed_instance_keeps_its_state(renamed):
    changes = plan_compare.compare(renamed["base"], renamed["aliased"], ref="v-old", stack="dev")
    assert [c for c in changes.changes if c.type == INSTANCE] == []
    assert changes.destructions() == []


def test_a_renamed_parent_carries_its_children_through_its_alias():
    """step_generator.go `inheritedChildAlias`: a component renamed with an alias keeps the children
    named after it, without aliases of their own."""
    def rows(component: str, alias: list) -> list[dict]:
        return [
            {"urn": f"urn:pulumi:dev::p::pulumi:pulumi:Stack$x:y:Z::{component}", "type": "x:y:Z", "name": component, "parent": "urn:pulumi:dev::p::pulumi:pulumi:Stack::p-dev", "custom": False, "inputs": {}, "aliases": alias},
            {"urn": f"urn:pulumi:dev::p::x:y:Z${INSTANCE}::{component}-instance", "type": INSTANCE, "name": f"{component}-instance", "parent": f"urn:pulumi:dev::p::pulumi:pulumi:Stack$x:y:Z::{component}", "custom": True, "inputs": {"metadata": {"name": "nlp"}}},
        ]
    before = plan_compare.engine_urns(rows("tenant-nlp", []))
    assert before[1].urn == f"urn:pulumi:dev::p::x:y:Z${INSTANCE}::tenant-nlp-instance"
    moved = plan_compare.engine_urns(rows("team-nlp", []))
    assert [c.action for c in plan_compare.compare(before, moved, ref="r", stack="dev").changes] == ["delete", "create"]
    aliased = plan_compare.engine_urns(rows("team-nlp", [{"name": "tenant-nlp"}]))
    assert plan_compare.compare(before, aliased, ref="r", stack="dev").changes == []


def test_a_replace_on_change_input_replaces_the_host_cluster(dev_run):
    before = plan_compare.resources_of(dev_run)
    after = plan_compare.resources_of(dev_run)
    cluster = next(r for r in after if r.type == "gcp:container/cluster:Cluster")
    cluster.inputs = {**cluster.inputs, "networkingMode": "ROUTES"}
    changes = plan_compare.compare(before, after, ref="r", stack="dev")
    [replaced] = [c for c in changes.changes if c.action == "replace"]
    assert (replaced.type, replaced.name) == ("gcp:container/cluster:Cluster", "gke-cluster")
    banner, allowed = destroy_gate.verdict("dev", changes.destructions(), ())
    assert not allowed and "REPLACE gcp:container/cluster:Cluster  gke-cluster  [NOT DECLARED]" in banner
    assert destroy_gate.verdict("dev", changes.destructions(), ("gke-cluster",))[1]
    banner, allowed = destroy_gate.verdict("dev", changes.destructions(), ("gke",))  # no prefix: the full name
    assert not allowed and "Declared but covering none of these: gke (a declaration is `tenant-<team>` or a stateful resource's full name" in banner


def test_the_plan_refuses_a_stack_file_edit_that_deletes_a_tenant_unless_declared(tmp_path, monkeypatch, capsys):
    project = tmp_path / "gpu-platform"
    project.mkdir()
    for name in ("Pulumi.yaml", "Pulumi.dev.yaml"):
        shutil.copy(PROJECT_DIR / name, project / name)
    git(project, "init", "-q")
    git(project, "add", ".")
    git(project, "commit", "-qm", "stacks")
    text = (project / "Pulumi.dev.yaml").read_text()
    start = text.index("    - name: nlp\n")
    (project / "Pulumi.dev.yaml").write_text(text[:start] + text[text.index("    - name: speech\n") :])
    monkeypatch.delenv("ALLOW_DESTROY", raising=False)
    assert plan_tool.main(["--stack", "dev", "--quiet", "--project-dir", str(project)]) == 1
    out, err = capsys.readouterr()
    assert out.startswith("DESTROYS: stack dev would delete or replace 3 resource(s) that hold state:\n")
    assert f"  DELETE  {INSTANCE}  tenant-nlp-instance  [NOT DECLARED]" in err
    monkeypatch.setenv("ALLOW_DESTROY", "tenant-nlp")
    assert plan_tool.main(["--stack", "dev", "--quiet", "--project-dir", str(project)]) == 0
    assert "[declared]" in capsys.readouterr().out


def test_ci_judges_the_real_preview_with_the_commits_declarations(tmp_path):
    preview = {
        "steps": [
            {"op": "same", "urn": "urn:pulumi:dev::gpu-platform::gpu-platform:gke:Cluster$gcp:container/cluster:Cluster::gke-cluster"},
            {"op": "delete", "urn": f"urn:pulumi:dev::gpu-platform::gpu-platform:tenants:VirtualCluster${INSTANCE}::tenant-nlp-instance"},
            {"op": "create-replacement", "urn": "urn:pulumi:dev::gpu-platform::gpu-platform:tenants:Project$gcp:organizations/project:Project::tenant-cv-project", "replaceReasons": ["projectId"]},
            {"op": "delete-replaced", "urn": "urn:pulumi:dev::gpu-platform::gpu-platform:tenants:Project$gcp:organizations/project:Project::tenant-cv-project"},
            {"op": "delete", "urn": "urn:pulumi:dev::gpu-platform::gpu-platform:tenants:Network$gcp:compute/firewall:Firewall::tenant-nlp-gcp-allow-internal"},
        ]
    }
    (tmp_path / "preview.json").write_text(json.dumps(preview))
    (tmp_path / "messages.txt").write_text("Remove team nlp\n\nAllow-Destroy: tenant-nlp\n\0Rename cv's project\n")
    found = destroy_gate.from_preview(preview)
    assert [(d.action, d.name) for d in found] == [("delete", "tenant-nlp-instance"), ("replace", "tenant-cv-project")]
    assert found[1].because == "replaced because of projectId"
    args = ["--preview-json", str(tmp_path / "preview.json"), "--stack", "dev", "--commit-messages", str(tmp_path / "messages.txt")]
    assert destroy_gate.main(args) == 1  # tenant-cv's project is not declared
    (tmp_path / "messages.txt").write_text("Remove team nlp\n\nAllow-Destroy: tenant-nlp\n\0Rename cv's project\n\nAllow-Destroy: tenant-cv-project\n")
    assert destroy_gate.main(args) == 0


def _d(type_: str, name: str) -> destroy_gate.Destruction:
    return destroy_gate.Destruction("delete", type_, name)


NLP = [
    _d(INSTANCE, "tenant-nlp-instance"),
    _d("kubernetes:management.loft.sh/v1:Project", "tenant-nlp-platform-project"),
    _d("gcp:organizations/project:Project", "tenant-nlp-project-project"),
    _d("gcp:gkebackup/backupPlan:BackupPlan", "tenant-nlp-backup-plan"),
]
OTHERS = [
    _d(INSTANCE, "tenant-nlp-x-instance"),
    _d("gcp:organizations/project:Project", "tenant-nlp-platform-project"),  # team nlp-platform's GCP project… is -project-project
    _d("gcp:container/cluster:Cluster", "gke-cluster"),
    _d("kubernetes:core/v1:Namespace", "platform-namespace"),
]


@pytest.mark.parametrize(
    "declaration, covers",
    [
        ("tenant-nlp", [d.name for d in NLP]),
        ("tenant-nlp-x", ["tenant-nlp-x-instance"]),
        ("tenant", []),  # once every tenant, by prefix
        ("tenant-nl", []),
        ("platform", []),  # once the platform's namespace, by prefix
        ("gke", []),
        ("gke-cluster", ["gke-cluster"]),
        ("platform-namespace", ["platform-namespace"]),
        ("tenant-nlp-platform-project", ["tenant-nlp-platform-project", "tenant-nlp-platform-project"]),  # a full name: both of that name
    ],
)
def test_a_declaration_covers_exactly_its_team_or_the_resource_it_names(declaration, covers):
    assert [d.name for d in [*NLP, *OTHERS] if destroy_gate.covered(d, (declaration,))] == covers


def test_the_declaration_the_gate_prints_is_one_it_accepts():
    for d in [*NLP, *OTHERS]:
        assert destroy_gate.covered(d, (destroy_gate.declaration_for(d),)), d
    assert [destroy_gate.declaration_for(d) for d in NLP] == ["tenant-nlp"] * 4
    assert [destroy_gate.declaration_for(d) for d in OTHERS] == ["tenant-nlp-x", "tenant-nlp-platform-project", "gke-cluster", "platform-namespace"]
    banner, allowed = destroy_gate.verdict("dev", [*NLP, OTHERS[0]], ())
    assert not allowed and "ALLOW_DESTROY=tenant-nlp,tenant-nlp-x make plan" in banner and "`Allow-Destroy: tenant-nlp,tenant-nlp-x`" in banner


@pytest.mark.parametrize(
    "message, names, ignored",
    [
        ("Remove team nlp\n\nAllow-Destroy: tenant-nlp\n", ("tenant-nlp",), ()),
        ("Remove team nlp\n\nAllow-Destroy: tenant-nlp, gke-cluster\nSigned-off-by: A <a@example.com>\n", ("tenant-nlp", "gke-cluster"), ()),
        # A line of the body, not the closing block of trailers.
        ("Remove team nlp\n\nAllow-Destroy: tenant-nlp\nbecause it moved\n", (), ()),
        ("Remove team nlp\n\nWe had Allow-Destroy: tenant-nlp in mind.\n", (), ()),
        ("Allow-Destroy: tenant-nlp\n", (), ()),  # the subject line
        # The key spelled otherwise, a value that is no declaration.
        ("Remove team nlp\n\nallow-destroy: tenant-nlp\n", (), ("trailer 'allow-destroy': the key is spelled 'Allow-Destroy'",)),
        ("Remove teams\n\nAllow-Destroy: tenant-*\n", (), ("Allow-Destroy: 'tenant-*' is not `tenant-<team>` or a resource's full name",)),
    ],
)
def test_only_a_real_git_trailer_spelled_exactly_declares(message, names, ignored):
    assert destroy_gate.trailer_declarations([message]) == (names, ignored)


def test_the_trailers_are_read_without_the_machines_git_configuration(tmp_path, monkeypatch):
    """A `trailer.separators` of the user's or the machine's would make `Allow-Destroy= x` a trailer."""
    config = tmp_path / "gitconfig"
    config.write_text("[trailer]\n\tseparators = :=\n")
    monkeypatch.setenv("GIT_CONFIG_GLOBAL", str(config))
    assert destroy_gate.trailer_declarations(["Remove\n\nAllow-Destroy= tenant-nlp\n"]) == ((), ())


def test_the_gate_runs_on_the_standard_library_alone():
    """CI runs the base commit's tools/destroy_gate.py as a plain script, before any install."""
    result = subprocess.run(["python3", "-I", "-S", str(PROJECT_DIR / "tools" / "destroy_gate.py"), "--help"], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr


def test_the_shipped_stacks_since_the_last_release_lose_nothing_undeclared(evaluated, dev_run, prod_run):
    """The upgrade check from the last release to this checkout, on the shipped stacks: the release's
    code on its copies of them, this code on today's (tests/data/shipped); a deletion or replacement
    of a stateful resource needs an `Allow-Destroy:` trailer in a commit since the release."""
    release = evaluated["release"]
    if release is None:
        pytest.skip(f"the release commit is not in this clone (a shallow clone: git fetch --depth=1 origin {FIRST_RELEASE})")
    declared, _ = destroy_gate.trailer_declarations(destroy_gate.commit_messages(str(PROJECT_DIR), release))
    for stack, run in zip(SHIPPED, (dev_run, prod_run)):
        before = evaluated["release", stack]
        assert before, stack
        changes = plan_compare.compare(before, plan_compare.resources_of(run), ref=release, stack=stack)
        banner, allowed = destroy_gate.verdict(stack, changes.destructions(), declared)
        assert allowed, banner


# --- CI: the preview jobs' gate ---------------------------------------------------------------------


def gate_steps() -> dict[str, dict]:
    from config import yaml_io

    workflow = yaml_io.load((PROJECT_DIR / ".github" / "workflows" / "pulumi.yml").read_text(), source="pulumi.yml")
    return {name: next(s for s in workflow["jobs"][name]["steps"] if s.get("name") == "Destroy gate") for name in ("preview", "preview-prod")}


def run_gate_step(tmp_path: Path, *, trailer: str, weakened: bool) -> subprocess.CompletedProcess:
    """The preview job's gate step as GitHub runs it: in a checkout of the pull request, with the
    `pulumi` of the preview step (here one that prints a preview deleting tenant nlp's instance)."""
    repo = tmp_path / "repo"
    (repo / "tools").mkdir(parents=True)
    shutil.copy(PROJECT_DIR / "tools" / "destroy_gate.py", repo / "tools" / "destroy_gate.py")
    git(repo, "init", "-q")
    git(repo, "add", ".")
    git(repo, "commit", "-qm", "base")
    base = git(repo, "rev-parse", "HEAD")
    gate = repo / "tools" / "destroy_gate.py"
    if weakened:  # the branch tries to switch its own gate off
        gate.write_text(gate.read_text().replace("return 0 if allowed else 1", "return 0"))
    (repo / "Pulumi.dev.yaml").write_text("config: {}\n")
    git(repo, "add", ".")
    git(repo, "commit", "-qm", f"Remove team nlp\n\n{trailer}")
    head = git(repo, "rev-parse", "HEAD")
    preview = {"steps": [{"op": "delete", "urn": f"urn:pulumi:dev::gpu-platform::gpu-platform:tenants:VirtualCluster${INSTANCE}::tenant-nlp-instance"}]}
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "pulumi").write_text(f"#!/bin/sh\ncat <<'JSON'\n{json.dumps(preview)}\nJSON\n")
    (bin_dir / "pulumi").chmod(0o755)
    env = {
        "PATH": f"{bin_dir}:{os.environ['PATH']}", "RUNNER_TEMP": str(tmp_path), "HOME": str(tmp_path),
        "BASE_SHA": base, "HEAD_SHA": head, "PULUMI_ORG": "acme", "STACK": "dev",
    }
    script = gate_steps()["preview"]["run"]
    return subprocess.run(["bash", "-c", script], cwd=repo, env=env, capture_output=True, text=True)


def test_each_preview_job_gates_its_stack_after_the_preview():
    for name, step in gate_steps().items():
        assert set(step["env"]) == {"BASE_SHA", "HEAD_SHA", "PULUMI_ORG", "STACK"}, name
        assert 'git show "$BASE_SHA:tools/destroy_gate.py"' in step["run"] and "python3 -I" in step["run"], name
    assert gate_steps()["preview"]["run"] == gate_steps()["preview-prod"]["run"]


def test_the_ci_gate_refuses_an_undeclared_deletion_even_from_a_branch_that_weakens_it(tmp_path):
    result = run_gate_step(tmp_path, trailer="", weakened=True)
    assert result.returncode == 1, result.stdout + result.stderr
    assert f"DELETE  {INSTANCE}  tenant-nlp-instance  [NOT DECLARED]" in result.stdout


def test_the_ci_gate_passes_a_deletion_the_pull_request_declares(tmp_path):
    result = run_gate_step(tmp_path, trailer="Allow-Destroy: tenant-nlp", weakened=False)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "[declared]" in result.stdout
