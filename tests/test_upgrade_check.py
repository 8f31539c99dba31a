"""The upgrade check (`make plan COMPARE=<ref>`, tools/plan_compare.py) and the destroy gate
(tools/destroy_gate.py): what a new version deletes or replaces in a deployed stack, judged as
Pulumi's engine would (URNs, aliases, replace-on-change inputs), and refused unless declared."""

from __future__ import annotations

import json
import os
import re
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


# The environment stacks as the last release shipped them: a deployed stack of an adopter who kept
# the example (every stateful resource type is in them; a team stack's tenant is the same component
# as dev's inline tenants, and would cost two more evaluations), upgraded by the code alone.
SHIPPED = ("dev", "prod")
# The scratch repository's release (its instances renamed without an alias, `evaluated`).
SCRATCH_RELEASE = "v9.0.0"


@pytest.fixture(scope="module")
def evaluated(tmp_path_factory) -> dict:
    """In one interpreter (the SDKs load once): three commits of the program in a fresh repository
    (as it is, its tenant instances renamed, renamed with an alias; the renamed one tagged as a
    release), each commit's dev stack by its own code; and the upgrade check from the last release on
    the stacks it shipped: its code and this checkout's code, each on those stack files."""
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
    git(repo, "tag", SCRATCH_RELEASE, commits["renamed"])
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
        # As `make plan COMPARE=<release>` runs each side (tools/plan_compare.py code_snapshot):
        # each code with its own Pulumi.yaml, on the same stack files.
        released_stacks = tree / "tests" / "data" / "shipped"
        now = tmp / "release-stacks-now"
        now.mkdir()
        shutil.copy(PROJECT_DIR / "Pulumi.yaml", now / "Pulumi.yaml")
        # Every stack file the release shipped, its team stacks too: an environment makes things
        # for the team stacks beside it (a pool-at-limit alert per team).
        for path in released_stacks.glob("Pulumi.*.yaml"):
            shutil.copy(path, now / path.name)
        for stack in SHIPPED:
            jobs.append((str(tree), stack, str(tmp / f"release-{stack}.json"), str(released_stacks)))
            keys.append(("release", stack))
        for stack in SHIPPED:
            jobs.append((str(PROJECT_DIR), stack, str(tmp / f"now-{stack}.json"), str(now)))
            keys.append(("now", stack))
    return {**plan_compare.evaluate_trees(jobs, keys), "release": release, "repo": repo}


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


def command_rows(triggers: list | None, environment: dict) -> list[dict]:
    """A pulumi-command Command as the mock engine records it: its SDK registers every Command with
    replace_on_changes=["triggers[*]"] (pulumi_command/local/command.py)."""
    inputs = {"create": "kubectl wait", "environment": environment, **({"triggers": triggers} if triggers is not None else {})}
    return [
        {"urn": "urn:pulumi:dev::p::pulumi:pulumi:Stack::p-dev", "type": "pulumi:pulumi:Stack", "name": "p-dev", "parent": None, "custom": False, "inputs": {}},
        {"urn": "urn:pulumi:dev::p::command:local:Command::platform-api-ready", "type": "command:local:Command", "name": "platform-api-ready",
         "parent": "urn:pulumi:dev::p::pulumi:pulumi:Stack::p-dev", "custom": True, "inputs": inputs, "replaceOnChanges": ["triggers[*]"]},
    ]


def test_a_command_is_replaced_when_any_of_its_triggers_changes_and_updated_otherwise():
    """`triggers[*]` is Pulumi's property path for every element (sdk/go/common/resource/properties_path.go):
    any changed, added or removed trigger replaces the Command; another input's change updates it."""
    def compared(before: list | None, after: list | None, env_before=None, env_after=None):
        old = plan_compare.engine_urns(command_rows(before, env_before or {"A": "1"}))
        new = plan_compare.engine_urns(command_rows(after, env_after or {"A": "1"}))
        return [(c.action, c.because) for c in plan_compare.compare(old, new, ref="r", stack="dev").changes]

    assert compared(["acme-ml-dev", "3.1"], ["my-ml-dev", "3.1"]) == [("replace", ["triggers[0]: acme-ml-dev → my-ml-dev"])]
    assert compared(["a"], ["a", "b"]) == [("replace", ["triggers[1]: null → b"])]
    assert compared(["a"], None) == [("replace", ["triggers[0]: a → null"])]
    assert compared(["a"], ["a"], {"A": "1"}, {"A": "2"}) == [("update", ["environment"])]
    assert compared(["a"], ["a"]) == []


def test_property_paths_read_as_pulumi_reads_them():
    from tools.property_paths import PathError, at, differences, parse

    assert parse('metadata.annotations["gpu-platform/gcp-project"]') == ["metadata", "annotations", "gpu-platform/gcp-project"]
    assert parse("spec.pools[0].nodes[*].name") == ["spec", "pools", 0, "nodes", "*", "name"]
    assert parse('a.*["b.c"]') == ["a", "*", "b.c"]
    assert at({"a": [{"b": 1}]}, "a[0].b") == 1 and at({}, "a.b") is None
    assert differences({"m": {"x": 1, "y": 2}}, {"m": {"x": 1, "y": 3, "z": 4}}, "m.*") == [("m.y", 2, 3), ("m.z", None, 4)]
    for bad in ("a[", 'a["b', "a[x]"):
        with pytest.raises(PathError, match=re.escape(repr(bad))):
            parse(bad)


def stack_project(directory: Path, dev_text: str) -> Path:
    """A git work tree with this Pulumi.yaml and a dev stack file, committed."""
    project = directory / "gpu-platform"
    project.mkdir()
    shutil.copy(PROJECT_DIR / "Pulumi.yaml", project / "Pulumi.yaml")
    (project / "Pulumi.dev.yaml").write_text(dev_text)
    git(project, "init", "-q")
    git(project, "add", ".")
    git(project, "commit", "-qm", "stacks")
    return project


def test_the_examples_first_edit_is_shown_not_gated_and_then_every_edit_is_gated(tmp_path, monkeypatch, capsys):
    """The deploy guide's first step (`gcp:project` set to yours) on the example as shipped: the plan
    compares with the committed stack file and lists what it replaces (pulumi-command's `triggers[*]`
    read), but the example was never deployed: not gated, and it says why. Once the stack file is
    yours (committed), an edit that deletes a tenant fails until declared; the DESTROYS block comes
    once at the top and again at the end, where make's error follows."""
    example = (SHIPPED_DIR / "Pulumi.dev.yaml").read_text()
    project = stack_project(tmp_path, example)
    ours = example.replace("gcp:project: acme-ml-dev\n", "gcp:project: ours-ml-dev\n")
    assert ours != example
    (project / "Pulumi.dev.yaml").write_text(ours)
    monkeypatch.delenv("ALLOW_DESTROY", raising=False)
    args = ["--stack", "dev", "--quiet", "--project-dir", str(project)]
    assert plan_tool.main(args) == 0
    out, err = capsys.readouterr()
    assert out.startswith("DESTROYS (not gated): stack dev would delete or replace 5 resource(s) that hold state, against the committed stack files (HEAD):\n")
    assert "  REPLACE gcp:container/cluster:Cluster  gke-cluster  [not gated]: loses the host cluster" in out
    assert "Not gated: the committed Pulumi.dev.yaml is the example as shipped (the values of tests/data/shipped/Pulumi.dev.yaml), which no stack of yours runs" in out
    assert "~ update  command:local:Command  platform-api-ready  (changed: environment)" in out
    assert "TENANT nlp MOVES from GCP project acme-ml-dev (shared) to ours-ml-dev (shared)" in out and "SECURITY CHANGE" not in out
    assert "this gate sees uncommitted edits of the stack files only: once they are committed, `make plan COMPARE=origin/main`" in out
    assert "[NOT DECLARED]" not in out + err

    git(project, "commit", "-qam", "our project")
    start = ours.index("    - name: nlp\n")
    without_nlp = ours[:start] + ours[ours.index("    - name: speech\n") :]
    (project / "Pulumi.dev.yaml").write_text(without_nlp)
    assert plan_tool.main(args) == 1
    out, err = capsys.readouterr()
    banner = out[: out.index("\n\n") + 1]
    assert banner.startswith("DESTROYS: stack dev would delete or replace 3 resource(s) that hold state:\n")
    assert f"  DELETE  {INSTANCE}  tenant-nlp-instance  [NOT DECLARED]" in banner
    assert out.count("DESTROYS") == 1 and err.endswith("\n" + banner), "once at the top, again at the very end"
    monkeypatch.setenv("ALLOW_DESTROY", "tenant-nlp")
    assert plan_tool.main(args) == 0
    out, err = capsys.readouterr()
    assert "[declared]" in out and out.count("DESTROYS") == 2 and "DESTROYS" not in err

    # A committed stack file that does not plan: the comparison is skipped, saying so.
    (project / "Pulumi.dev.yaml").write_text(without_nlp.replace("    - name: speech\n", "    - name: speech\n      colour: blue\n"))
    git(project, "commit", "-qam", "a broken commit")
    (project / "Pulumi.dev.yaml").write_text(without_nlp)
    assert plan_tool.main(args) == 0
    out, err = capsys.readouterr()
    assert re.search(r"^the committed Pulumi\.dev\.yaml does not plan: 1 configuration problem in stack 'dev'; nothing was created; comparison skipped\n  .*tenants\[0\]\.colour: unknown key", out, re.M), out
    assert "Traceback" not in out + err and "DESTROYS" not in out + err

    # As committed: nothing to compare, and the plan says what judges a committed change.
    git(project, "commit", "-qam", "fixed")
    assert plan_tool.main(["--stack", "dev", "--project-dir", str(project)]) == 0
    assert "Deletions and replacements: no uncommitted edit of the stack files to compare with their commit; this gate sees uncommitted edits" in capsys.readouterr().out

    # A stack file not committed yet: nothing to compare with, said.
    git(project, "rm", "-q", "--cached", "Pulumi.dev.yaml")
    git(project, "commit", "-qm", "dev not committed")
    assert plan_tool.main(args) == 0
    assert "Pulumi.dev.yaml is not committed yet: nothing to compare with; the gate starts with its first commit" in capsys.readouterr().out


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


def test_the_upgrade_check_runs_the_releases_code_on_the_forks_own_stack_files(evaluated, tmp_path, monkeypatch, capsys):
    """`make plan COMPARE=<release>` on a fork: the release's code and this code, both on the fork's
    own stack file (its project, its tenants), never the release's example: the changes are exactly
    what the code change does (here the release named instances `-vcluster`, this code `-instance`,
    without an alias), to the fork's tenants."""
    fork = tmp_path / "fork"
    fork.mkdir()
    shutil.copy(PROJECT_DIR / "Pulumi.yaml", fork / "Pulumi.yaml")
    own = (SHIPPED_DIR / "Pulumi.dev.yaml").read_text().replace("gcp:project: acme-ml-dev\n", "gcp:project: fork-ml-dev\n").replace("- name: nlp\n", "- name: cv\n")
    assert "fork-ml-dev" in own and "- name: cv\n" in own
    (fork / "Pulumi.dev.yaml").write_text(own)
    monkeypatch.setattr(plan_compare, "CODE_DIR", evaluated["repo"])  # the scratch repository's releases
    monkeypatch.delenv("ALLOW_DESTROY", raising=False)
    assert plan_tool.main(["--stack", "dev", "--quiet", "--project-dir", str(fork), "--compare-to", SCRATCH_RELEASE]) == 1
    out, err = capsys.readouterr()
    assert f"Changes against {SCRATCH_RELEASE}'s code on your stack files (stack dev): 2 to create, 2 to delete, 0 to replace, 0 to update\n" in out
    changes = re.findall(r"^  [-+±~] (\w+) +(\S+)  (\S+)", out, re.M)
    assert sorted(changes) == sorted(
        [("delete", INSTANCE, "tenant-cv-vcluster"), ("delete", INSTANCE, "tenant-speech-vcluster"),
         ("create", INSTANCE, "tenant-cv-instance"), ("create", INSTANCE, "tenant-speech-instance")]
    ), out
    assert f"  DELETE  {INSTANCE}  tenant-cv-vcluster  [NOT DECLARED]" in err and "nlp" not in out + err


def test_a_stack_file_the_releases_code_refuses_is_named_with_what_to_do(evaluated, tmp_path, monkeypatch):
    fork = tmp_path / "fork"
    fork.mkdir()
    shutil.copy(PROJECT_DIR / "Pulumi.yaml", fork / "Pulumi.yaml")
    (fork / "Pulumi.dev.yaml").write_text((SHIPPED_DIR / "Pulumi.dev.yaml").read_text().replace("    - name: speech\n", "    - name: speech\n      colour: blue\n"))
    monkeypatch.setattr(plan_compare, "CODE_DIR", evaluated["repo"])
    with pytest.raises(plan_compare.CompareError) as refused:
        plan_compare.code_snapshot(SCRATCH_RELEASE, "dev", fork)
    message = str(refused.value)
    assert message.startswith(f"your Pulumi.dev.yaml does not plan with the code of {SCRATCH_RELEASE}:\n  1 configuration problem in stack 'dev'")
    assert "tenants[1].colour: unknown key" in message and "make plan COMPARE=<that commit>" in message


def upgrades(evaluated) -> dict:
    """Per stack as the last release shipped it, what upgrading the code alone does: the release's
    code and this checkout's on the same stack files (`make plan COMPARE=<release>`)."""
    if evaluated["release"] is None:
        pytest.skip(f"the release commit is not in this clone (a shallow clone: git fetch --depth=1 origin {FIRST_RELEASE})")
    found = {}
    for stack in SHIPPED:
        before, after = evaluated["release", stack], evaluated["now", stack]
        assert before and after, stack
        found[stack] = plan_compare.compare(before, after, ref=evaluated["release"], stack=stack)
    return found


def test_the_shipped_stacks_lose_nothing_undeclared_when_upgraded_from_the_last_release(evaluated):
    """A deletion or replacement of a stateful resource since the release needs an `Allow-Destroy:`
    trailer in a commit since it."""
    declared = destroy_gate.trailer_declarations(destroy_gate.commit_messages(str(PROJECT_DIR), evaluated["release"]))[0] if evaluated["release"] else ()
    for stack, changes in upgrades(evaluated).items():
        banner, allowed = destroy_gate.verdict(stack, changes.destructions(), declared)
        assert allowed, banner


def test_the_changelog_names_what_the_upgrade_from_the_last_release_changes(evaluated):
    """CHANGELOG.md's `Unreleased` names (by the type's last part, e.g. `AlertPolicy`) every type of
    resource the upgrade check from the last release creates, replaces or deletes in the stacks it
    shipped, and every stateful type it changes in place (tools/destroy_gate.py STATEFUL): what a
    deployed stack sees on its first `pulumi up` with this code."""
    text = (PROJECT_DIR / "CHANGELOG.md").read_text()
    unreleased = text[text.index("## Unreleased") : text.index("\n## v")]
    missing = {}
    for stack, changes in upgrades(evaluated).items():
        for c in changes.changes:
            if c.action != "update" or c.type in destroy_gate.STATEFUL:
                kind = c.type.split(":")[-1]
                if not re.search(rf"`{re.escape(kind)}`", unreleased):
                    missing.setdefault(f"{c.action} {kind}", []).append(f"{stack}: {c.name}")
    assert missing == {}, "CHANGELOG.md Unreleased does not name these (as `Kind`)"


# --- CI: the preview jobs' gate ---------------------------------------------------------------------


def workflow() -> dict:
    from config import yaml_io

    return yaml_io.load((PROJECT_DIR / ".github" / "workflows" / "pulumi.yml").read_text(), source="pulumi.yml")


def preview_jobs() -> list[str]:
    """Every job of pulumi.yml that runs `pulumi preview` (one per environment: the adopter's)."""
    return [name for name, job in workflow()["jobs"].items() if any((s.get("with") or {}).get("command") == "preview" for s in job.get("steps") or [])]


def gate_steps() -> dict[str, dict]:
    jobs = workflow()["jobs"]
    return {name: next((s for s in jobs[name]["steps"] if s.get("name") == "Destroy gate"), None) for name in preview_jobs()}


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
    script = next(iter(gate_steps().values()))["run"]
    return subprocess.run(["bash", "-c", script], cwd=repo, env=env, capture_output=True, text=True)


def test_each_preview_job_gates_its_stack_after_the_preview():
    steps = gate_steps()
    assert steps, "no preview job"
    for name, step in steps.items():
        assert step is not None, f"{name}: no Destroy gate step"
        assert set(step["env"]) == {"BASE_SHA", "HEAD_SHA", "PULUMI_ORG", "STACK"}, name
        assert 'git show "$BASE_SHA:tools/destroy_gate.py"' in step["run"] and "python3 -I" in step["run"], name
    assert len({step["run"] for step in steps.values()}) == 1, "every environment's preview gates alike"


def test_the_ci_gate_refuses_an_undeclared_deletion_even_from_a_branch_that_weakens_it(tmp_path):
    result = run_gate_step(tmp_path, trailer="", weakened=True)
    assert result.returncode == 1, result.stdout + result.stderr
    assert f"DELETE  {INSTANCE}  tenant-nlp-instance  [NOT DECLARED]" in result.stdout


def test_the_ci_gate_passes_a_deletion_the_pull_request_declares(tmp_path):
    result = run_gate_step(tmp_path, trailer="Allow-Destroy: tenant-nlp", weakened=False)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "[declared]" in result.stdout
