"""Two acceptance runs side by side: `make acceptance … COMPARE=<earlier report.json>` prints the
new run's phases, spans and images next to the earlier run's, and so does

    python -m tests.acceptance.compare EARLIER/report.json LATER/report.json

Reports are checked against report.schema.json first (version 4, 3 without the stockout drill and the
assumptions' lines, or 2 without the monitoring checks and the drills, which are not compared); a version-1 report (before the GPU node's
phases were measured) has its timings only, and its phases read "not measured".
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import jsonschema

SCHEMA_PATH = Path(__file__).with_name("report.schema.json")
NOT_MEASURED = "not measured"


class ReportError(ValueError):
    """A file that is not an acceptance report, with what is wrong with it."""


def load_report(path: Path) -> dict[str, Any]:
    try:
        report = json.loads(path.read_text())
    except (OSError, ValueError) as e:
        raise ReportError(f"{path}: cannot be read as JSON ({e})") from None
    schema = json.loads(SCHEMA_PATH.read_text())
    try:
        if isinstance(report, dict) and "reportVersion" not in report:
            # Version 1: its timings are all it has.
            jsonschema.validate(report.get("timings"), {**schema["$defs"]["timings"], "$defs": schema["$defs"]})
        else:
            jsonschema.validate(report, schema)
    except jsonschema.ValidationError as e:
        where = "/".join(str(p) for p in e.absolute_path) or "(top)"
        raise ReportError(f"{path}: not an acceptance report: {where}: {e.message}") from None
    return report


def _seconds(value: float | None) -> str:
    return "not reached" if value is None else f"{value:.0f}"


def _change(before: float | None, after: float | None) -> str:
    if before is None or after is None:
        return ""
    return f"{after - before:+.0f}"


def _rows(earlier: list[dict[str, Any]] | None, later: list[dict[str, Any]], key: str) -> list[list[str]]:
    """One row per step of either run, in the later run's order, then the earlier's leftovers."""
    before = {step[key]: step["seconds"] for step in earlier or []}
    after = {step[key]: step["seconds"] for step in later}
    names = list(after) + [name for name in before if name not in after]
    rows = []
    for name in names:
        b = _seconds(before[name]) if name in before else (NOT_MEASURED if earlier is None else "—")
        a = _seconds(after[name]) if name in after else "—"
        rows.append([name, b, a, _change(before.get(name), after.get(name))])
    return rows


def _table(title: str, header: list[str], rows: list[list[str]]) -> list[str]:
    lines = ["", title, "", "| " + " | ".join(header) + " |", "|---|" + "---:|" * (len(header) - 1)]
    lines += ["| " + " | ".join(row) + " |" for row in rows]
    return lines


def _images(report: dict[str, Any]) -> dict[str, str]:
    found = {}
    for image in (report.get("gpuNode") or {}).get("images") or []:
        found[image["image"]] = "already present" if image["alreadyPresent"] else f"pulled in {_seconds(image['pullSeconds'])} s"
    return found


def side_by_side(earlier: dict[str, Any], later: dict[str, Any]) -> list[str]:
    """Markdown tables: the GPU node's phases, the Job's spans, and how each image got there."""
    a, b = earlier.get("runId", "earlier"), later.get("runId", "later")
    header = ["", f"earlier run {a} (s)", f"this run {b} (s)", "change (s)"]
    warm = {True: "warm node", False: "node created for it", None: "no GPU node"}
    lines = [
        f"## Run {b} next to run {a}",
        "",
        f"GPU node: {warm[(earlier.get('gpuNode') or {}).get('warm')] if 'gpuNode' in earlier else NOT_MEASURED} (earlier), "
        f"{warm[(later.get('gpuNode') or {}).get('warm')]} (this run)",
    ]
    earlier_phases = (earlier.get("gpuNode") or {}).get("phases") if "gpuNode" in earlier else None
    lines += _table("### Phases of the GPU node", ["phase", *header[1:]], _rows(earlier_phases, later["gpuNode"]["phases"], "phase"))
    lines += _table("### Spans of the Job", ["span", *header[1:]], _rows(earlier["timings"]["spans"], later["timings"]["spans"], "span"))
    before, after = _images(earlier), _images(later)
    image_rows = [[image, before.get(image, NOT_MEASURED if "gpuNode" not in earlier else "—"), after.get(image, "—")] for image in dict.fromkeys([*after, *before])]
    lines += _table("### Images on the GPU node", ["image", f"earlier run {a}", f"this run {b}"], image_rows)
    return lines


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 2:
        print("usage: python -m tests.acceptance.compare EARLIER/report.json LATER/report.json", file=sys.stderr)
        return 2
    try:
        earlier, later = (load_report(Path(p)) for p in args)
    except ReportError as e:
        print(e, file=sys.stderr)
        return 2
    if "gpuNode" not in later:
        print(f"{args[1]} is a version-1 report: compare it as EARLIER", file=sys.stderr)
        return 2
    print("\n".join(side_by_side(earlier, later)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
