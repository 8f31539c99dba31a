"""Check our GPU Operator chart records (config/charts/gpu-operator-<version>.yaml) against upstream.

    make verify-records
    python -m tools.verify_chart_record [RECORD ...]

For each group of a record it downloads the upstream file the group names, at its pinned commit
(https://raw.githubusercontent.com/<repo>/<commit>/<path>; for a file inside an archive, the
archive, then that member), checks that the file's sha256 is the one recorded, parses it with
PyYAML and compares every recorded fact with the value at the same path there (a list entry named
by its `name`; a fact recorded null is one the file does not set). It prints each mismatch with
its key and exits 1 on any mismatch or failed download, 0 when everything agrees. It needs network
access and writes nothing: what it downloads stays in memory. docs/development.md "Bumping the GPU
Operator" says when to run it.
"""

from __future__ import annotations

import argparse
import hashlib
import io
import sys
import tarfile
import urllib.request
from pathlib import Path
from typing import Any, Callable, Mapping, Sequence

import yaml

from config.gpu_operator import CHART_NAME, CHARTS_DIR, RecordError, dotted, fact_paths, load_record, shown_path

RAW_URL = "https://raw.githubusercontent.com/{repo}/{commit}/{path}"
DOWNLOAD_SECONDS = 60

Fetch = Callable[[str], bytes]


class Absent:
    """The value at a path the upstream file does not have."""

    def __repr__(self) -> str:
        return "nothing"


ABSENT = Absent()


def download(url: str) -> bytes:
    with urllib.request.urlopen(url, timeout=DOWNLOAD_SECONDS) as response:
        return response.read()


def raw_url(source: Mapping[str, str]) -> str:
    return RAW_URL.format(repo=source["repo"], commit=source["commit"], path=source["path"])


def upstream_file(source: Mapping[str, str], fetch: Fetch) -> bytes:
    """The bytes of the file a group was read from (a member of the downloaded archive if it names one)."""
    data = fetch(raw_url(source))
    if "member" not in source:
        return data
    with tarfile.open(fileobj=io.BytesIO(data), mode="r:*") as archive:
        member = archive.extractfile(source["member"])
        if member is None:
            raise KeyError(f"{source['member']} is not a file in the archive")
        return member.read()


def upstream_value(document: Any, path: tuple[str, ...]) -> Any:
    """The value at `path` in a parsed upstream file; in a list, the entry whose `name` is the part."""
    for part in path:
        if isinstance(document, Mapping) and part in document:
            document = document[part]
        elif isinstance(document, list) and (named := [e for e in document if isinstance(e, Mapping) and e.get("name") == part]):
            [document] = named
        else:
            return ABSENT
    return document


def _same(recorded: Any, found: Any) -> bool:
    # null is recorded for what the file does not set; YAML's true is not 1.
    if recorded is None:
        return found is None or found is ABSENT
    return type(recorded) is type(found) and recorded == found


def group_problems(name: str, group: Mapping[str, Any], fetch: Fetch) -> list[str]:
    source = group["source"]
    where = f"{name} ({source['path']}{'#' + source['member'] if 'member' in source else ''} at {source['commit'][:12]})"
    try:
        data = upstream_file(source, fetch)
    except (OSError, tarfile.TarError, KeyError, ValueError) as error:  # urllib's errors are OSErrors
        return [f"{where}: not downloaded from {raw_url(source)}: {error}"]
    problems = []
    digest = hashlib.sha256(data).hexdigest()
    if digest != source["sha256"]:
        problems.append(f"{where}: sha256 is {digest}, the record says {source['sha256']}")
    try:
        document = yaml.safe_load(data)
    except yaml.YAMLError as error:
        return [*problems, f"{where}: not YAML: {error}"]
    for path, recorded in fact_paths(group["facts"]).items():
        found = upstream_value(document, path)
        if not _same(recorded, found):
            problems.append(f"{where}: {dotted(path)}: upstream has {found!r}, the record {recorded!r}")
    return problems


def upstream_problems(path: Path, fetch: Fetch = download) -> list[str]:
    """Every way the record at `path` differs from the upstream files it names."""
    record = load_record(path)
    return [problem for name, group in record["groups"].items() for problem in group_problems(name, group, fetch)]


def main(argv: Sequence[str] | None = None, fetch: Fetch = download) -> int:
    parser = argparse.ArgumentParser(prog="python -m tools.verify_chart_record", description=__doc__.split("\n\n")[0])
    parser.add_argument("records", nargs="*", type=Path, help=f"record files (default: every {CHARTS_DIR.name}/{CHART_NAME}-*.yaml)")
    args = parser.parse_args(argv)
    records = args.records or sorted(CHARTS_DIR.glob(f"{CHART_NAME}-*.yaml"))
    if not records:
        print(f"no records under {shown_path(CHARTS_DIR)}")
        return 1
    failed = False
    for path in records:
        try:
            problems = upstream_problems(path, fetch)
        except RecordError as error:  # its message names the file and each problem
            print(error)
            failed = True
            continue
        failed |= bool(problems)
        print(f"{shown_path(path)}: {'agrees with upstream' if not problems else f'{len(problems)} problem(s)'}")
        for problem in problems:
            print(f"  {problem}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
