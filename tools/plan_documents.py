"""The offline plan's rendered documents as files (`--out DIR`): one YAML file per document under
<out>/<stack>/, for diffs in review. Split from tools/plan.py, which re-exports `write_documents`."""

from __future__ import annotations

from pathlib import Path

import yaml

from tools.plan_model import StackPlan
from tools.plan_text import DOCUMENT_HEADER


class _Dumper(yaml.SafeDumper):
    """Multi-line strings (inline templates, embedded YAML) as literal blocks, readable in a diff."""


def _represent_str(dumper: yaml.SafeDumper, data: str) -> yaml.Node:
    return dumper.represent_scalar("tag:yaml.org,2002:str", data, style="|" if "\n" in data else None)


_Dumper.add_representer(str, _represent_str)

TENANT_FILES = ("vcluster.yaml", "gpu-operator-values.yaml", "objects.yaml")


def write_documents(plan: StackPlan, out_dir: Path) -> list[Path]:
    """One YAML file per rendered document under <out>/<stack>/; files of an earlier plan of the
    same stack that no longer exist (a removed tenant) are deleted."""
    base = out_dir / plan.stack
    _remove_previous(base)
    written = []

    def write(path: Path, text: str) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(DOCUMENT_HEADER + (text if text.endswith("\n") else text + "\n"))
        written.append(path)

    if plan.node_provider is not None:
        write(base / "nodeprovider.yaml", yaml.dump(plan.node_provider, Dumper=_Dumper, sort_keys=False, allow_unicode=True, width=120))
    for tenant in plan.tenants:
        directory = base / "tenants" / tenant.name
        for filename, text in zip(TENANT_FILES, (tenant.vcluster_yaml, tenant.gpu_operator_values, tenant.objects)):
            if text is not None:
                write(directory / filename, text)
    plan.written = written
    return written


def _remove_previous(base: Path) -> None:
    (base / "nodeprovider.yaml").unlink(missing_ok=True)
    tenants = base / "tenants"
    if not tenants.is_dir():
        return
    for directory in tenants.iterdir():
        if directory.is_dir():
            for filename in TENANT_FILES:
                (directory / filename).unlink(missing_ok=True)
            if not any(directory.iterdir()):
                directory.rmdir()
