"""One evaluation in a fresh interpreter, for bench/run.py's start-up-inclusive comparison.

    python -m bench.evaluate program --project-dir DIR --stack STACK
    python -m bench.evaluate floor --types FILE --stack STACK

`program` runs __main__.py for the stack under the mock engine (config, catalog, components: the
program's whole cost, start-up included). `floor` registers as many resources of the same SDK
classes with the fewest inputs those classes accept, and nothing else: it imports the same provider
SDK modules (they load lazily, and loading them dominates start-up) but none of the program's code.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.evaluate")
    parser.add_argument("what", choices=["program", "floor"])
    parser.add_argument("--stack", required=True)
    parser.add_argument("--project-dir", type=Path)
    parser.add_argument("--types", type=Path, help="JSON list of the resource types to register (floor)")
    args = parser.parse_args()

    from tools.mock_engine import run_program

    if args.what == "program":
        from config.stack_files import read_stack_values

        run_program(read_stack_values(args.project_dir, args.stack), stack=args.stack, project_dir=args.project_dir)
    else:
        from bench.floor import floor_program

        run_program({}, stack=args.stack, program=floor_program(json.loads(args.types.read_text())))


if __name__ == "__main__":
    main()
