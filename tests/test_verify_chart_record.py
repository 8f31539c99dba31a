"""`make verify-records` (tools/verify_chart_record.py), offline: the upstream files are documents
built here from the record itself, as upstream lays them out (the NFD dependency an entry of a
list, the published Chart.yaml inside the release archive, unset values left out), handed to the
tool by the fetch function it takes instead of the network."""

from __future__ import annotations

import copy
import hashlib
import io
import tarfile
import urllib.error
from typing import Any

import pytest
import yaml

from config.gpu_operator import CHART_NAME, CHARTS_DIR, record_path
from config.stack_files import PROJECT_DIR
from config.versions import GPU_OPERATOR_VERSION
from docs_support import section
from tools.verify_chart_record import main, raw_url

RECORD = yaml.safe_load(record_path(GPU_OPERATOR_VERSION).read_text())


def _without_nulls(facts: dict[str, Any]) -> dict[str, Any]:
    return {k: _without_nulls(v) if isinstance(v, dict) else v for k, v in facts.items() if v is not None}


def upstream_file(group: dict[str, Any]) -> bytes:
    """The file a group was read from, as upstream would have it: its facts where the record says."""
    document = _without_nulls(copy.deepcopy(group["facts"]))
    if "dependencies" in document:
        document["dependencies"] = [{"name": name, **fields} for name, fields in document["dependencies"].items()]
    data = yaml.safe_dump(document).encode()
    if "member" not in group["source"]:
        return data
    archive = io.BytesIO()
    with tarfile.open(fileobj=archive, mode="w:gz") as tar:
        info = tarfile.TarInfo(group["source"]["member"])
        info.size = len(data)
        tar.addfile(info, io.BytesIO(data))
    return archive.getvalue()


def member_bytes(group: dict[str, Any], data: bytes) -> bytes:
    if "member" not in group["source"]:
        return data
    with tarfile.open(fileobj=io.BytesIO(data)) as tar:
        return tar.extractfile(group["source"]["member"]).read()


class Upstream:
    """raw.githubusercontent.com for the record's files: URL → bytes, and the URLs asked for."""

    def __init__(self, record: dict[str, Any]):
        self.files = {raw_url(g["source"]): upstream_file(g) for g in record["groups"].values()}
        self.asked: list[str] = []

    def __call__(self, url: str) -> bytes:
        self.asked.append(url)
        if url not in self.files:
            raise urllib.error.HTTPError(url, 404, "Not Found", {}, None)
        return self.files[url]


def written(tmp_path, record: dict[str, Any], upstream: Upstream) -> str:
    """The record, with each group's sha256 that of the upstream file built for it, as a file."""
    record = copy.deepcopy(record)
    for group in record["groups"].values():
        group["source"]["sha256"] = hashlib.sha256(member_bytes(group, upstream.files[raw_url(group["source"])])).hexdigest()
    path = tmp_path / record_path(GPU_OPERATOR_VERSION).name
    path.write_text(yaml.safe_dump(record))
    return str(path)


def run(capsys, path: str, upstream: Upstream) -> tuple[int, list[str]]:
    code = main([path], fetch=upstream)
    return code, capsys.readouterr().out.splitlines()


def test_a_record_that_agrees_with_upstream_passes(tmp_path, capsys):
    upstream = Upstream(RECORD)
    path = written(tmp_path, RECORD, upstream)
    assert run(capsys, path, upstream) == (0, [f"{path}: agrees with upstream"])
    # Each file at its pinned commit.
    assert sorted(upstream.asked) == sorted(
        f"https://raw.githubusercontent.com/NVIDIA/gpu-operator/{g['source']['commit']}/{g['source']['path']}" for g in RECORD["groups"].values()
    )


@pytest.mark.parametrize(
    "group, key, upstream_value",
    [
        ("values", "toolkit.version", "v1.18.2"),
        ("values", "dcgmExporter.enabled", False),
        ("chart", "dependencies.node-feature-discovery.version", "v0.18.3"),  # an entry of a list, in the archive
        ("nfd-values", "image.tag", "v0.18.3"),  # recorded null: upstream sets none
    ],
)
def test_an_upstream_value_that_differs_is_reported_with_its_key(tmp_path, capsys, group, key, upstream_value):
    upstream = Upstream(RECORD)
    path = written(tmp_path, RECORD, upstream)
    changed = copy.deepcopy(RECORD)
    *parents, leaf = key.split(".")
    facts = changed["groups"][group]["facts"]
    for part in parents:
        facts = facts[part]
    recorded, facts[leaf] = facts[leaf], upstream_value
    source = RECORD["groups"][group]["source"]
    upstream.files[raw_url(source)] = upstream_file(changed["groups"][group])
    new_sha256 = hashlib.sha256(member_bytes(changed["groups"][group], upstream.files[raw_url(source)])).hexdigest()
    where = f"{group} ({source['path']}{'#' + source['member'] if 'member' in source else ''} at {source['commit'][:12]})"
    code, out = run(capsys, path, upstream)
    assert (code, out[0]) == (1, f"{path}: 2 problem(s)")
    recorded_sha256 = yaml.safe_load(open(path))["groups"][group]["source"]["sha256"]
    assert out[1:] == [
        f"  {where}: sha256 is {new_sha256}, the record says {recorded_sha256}",
        f"  {where}: {key}: upstream has {upstream_value!r}, the record {recorded!r}",
    ]


def test_a_wrong_sha256_is_reported(tmp_path, capsys):
    upstream = Upstream(RECORD)
    path = written(tmp_path, RECORD, upstream)
    # The shipped record's sha256 are those of the real upstream files, not of the ones built here.
    code, out = run(capsys, str(record_path(GPU_OPERATOR_VERSION)), upstream)
    assert (code, out[0]) == (1, f"config/charts/gpu-operator-{GPU_OPERATOR_VERSION}.yaml: 4 problem(s)")
    values = RECORD["groups"]["values"]["source"]
    built = hashlib.sha256(upstream.files[raw_url(values)]).hexdigest()
    assert f"  values ({values['path']} at {values['commit'][:12]}): sha256 is {built}, the record says {values['sha256']}" in out
    assert all(": sha256 is " in line for line in out[1:])
    assert run(capsys, path, upstream)[0] == 0


def test_a_failed_download_is_reported(tmp_path, capsys):
    upstream = Upstream(RECORD)
    path = written(tmp_path, RECORD, upstream)
    nfd = RECORD["groups"]["nfd-chart"]["source"]
    del upstream.files[raw_url(nfd)]
    code, out = run(capsys, path, upstream)
    assert (code, out[1:]) == (1, [f"  nfd-chart ({nfd['path']} at {nfd['commit'][:12]}): not downloaded from {raw_url(nfd)}: HTTP Error 404: Not Found"])


def test_a_record_of_the_wrong_shape_is_reported_not_checked(tmp_path, capsys):
    broken = copy.deepcopy(RECORD)
    del broken["groups"]["values"]["facts"]["toolkit"]["version"]
    upstream = Upstream(RECORD)
    path = written(tmp_path, broken, upstream)
    code, out = run(capsys, path, upstream)
    assert (code, upstream.asked) == (1, [])
    assert out == [f"{path} is not a GPU Operator chart record:", "  groups.values.facts.toolkit.version: missing (a string or null)"]


def test_make_verify_records_runs_the_tool_and_the_docs_say_when():
    makefile = (PROJECT_DIR / "Makefile").read_text()
    assert "verify-records: $(STAMP)\n\t$(BIN)/python -m tools.verify_chart_record\n" in makefile
    bump = " ".join(section("Bumping the GPU Operator", "docs/development.md").split())
    assert "`make verify-records`" in bump and f"`{CHARTS_DIR.relative_to(PROJECT_DIR).as_posix()}/{CHART_NAME}-<version>.yaml`" in bump
