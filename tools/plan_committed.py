"""The offline plan's default comparison (tools/plan.py, without COMPARE): the stack as its stack files
are committed (HEAD), evaluated by this checkout's code, against the plan, so that an uncommitted
edit that deletes or replaces what holds state is gated before it is committed
(docs/operations.md "Deletions and replacements"). The comparison itself is tools/plan_compare.py's.
"""

from __future__ import annotations

import subprocess
import tempfile
from pathlib import Path
from typing import Any

from tools.plan_compare import Changes, compare, host_project_of, indented, resources_of

# Where the repository keeps its stack files as shipped, frozen (tests/shipped_stacks.py): a committed
# stack file with the same values is the example as shipped, which no stack of an adopter runs.
SHIPPED_DIR = Path(__file__).resolve().parent.parent / "tests" / "data" / "shipped"
COMMITTED = "the committed stack files (HEAD)"


def committed_stack_files(plan: Any) -> Changes | None:
    """The stack as its stack files are committed (HEAD), evaluated by this checkout's code, against
    the plan: what editing the stack files does. None when they are unchanged or the project is no
    git work tree. A stack file not committed yet, or committed but not planning, skips the
    comparison (`skipped` says why); one that is the example as shipped is compared but not gated."""
    import pulumi
    import yaml

    from config import yaml_io
    from config.errors import ConfigError
    from config.stack_files import StackFileError, read_stack_values
    from tools.mock_engine import run_program  # tools.mock_engine imports the program's modules

    project_dir = plan.stack_path.parent
    names = sorted({"Pulumi.yaml", *(p.name for p in project_dir.glob("Pulumi.*.yaml"))})
    changed = subprocess.run(["git", "-C", str(project_dir), "status", "--porcelain", "--", *names], capture_output=True, text=True)
    if changed.returncode != 0 or not changed.stdout.strip():
        return None  # no git work tree, or the stack files are as committed
    committed = {}
    for name in names:
        if (project_dir / name).is_symlink():  # a link's target is compared where it lives
            committed[name] = (project_dir / name).read_text()
            continue
        shown = subprocess.run(["git", "-C", str(project_dir), "show", f"HEAD:./{name}"], capture_output=True, text=True)
        if shown.returncode == 0:
            committed[name] = shown.stdout
    own = f"Pulumi.{plan.stack}.yaml"
    if own not in committed or "Pulumi.yaml" not in committed:
        missing = own if own not in committed else "Pulumi.yaml"
        return Changes(COMMITTED, plan.stack, [], [], skipped=f"{missing} is not committed yet: nothing to compare with; the gate starts with its first commit")
    with tempfile.TemporaryDirectory(prefix="gpu-platform-committed-") as tmp:
        root = Path(tmp)
        for name, text in committed.items():
            (root / name).write_text(text)
        evaluating = own
        try:
            values = read_stack_values(root, plan.stack)
            outputs = {}
            reference = values.get("gpu-platform:environmentStack")
            if reference:
                env = str(reference).split("/")[-1]
                evaluating = f"Pulumi.{env}.yaml"
                outputs[reference] = run_program(read_stack_values(root, env), stack=env, project_dir=root).outputs
                evaluating = own
            before = resources_of(run_program(values, stack=plan.stack, stack_outputs=outputs, project_dir=root))
            host_project_before = host_project_of(root, plan.stack)
        except (StackFileError, ConfigError, pulumi.RunError) as e:
            headline, _, details = (str(e).strip() or type(e).__name__).partition("\n")
            skipped = f"the committed {evaluating} does not plan: {headline.rstrip(':')}; comparison skipped" + (f"\n{indented(details)}" if details.strip() else "")
            return Changes(COMMITTED, plan.stack, [], [], skipped=skipped)
    changes = compare(
        before, resources_of(plan.run), ref=COMMITTED, stack=plan.stack, host_project=plan.loaded.facts.project, host_project_before=host_project_before
    )
    shipped = SHIPPED_DIR / own
    try:
        as_shipped = shipped.is_file() and yaml_io.load(committed[own], source=own) == yaml_io.load(shipped.read_text(), source=own)
    except yaml.YAMLError:
        as_shipped = False
    if as_shipped:
        changes.ungated = (
            f"the committed {own} is the example as shipped (the values of tests/data/shipped/{own}), which no stack of yours runs: "
            "its deletions and replacements are listed, not refused"
        )
    return changes
