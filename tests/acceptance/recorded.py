"""The recorded (hand-written) command outputs under data/ (see data/README.md)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

DATA = Path(__file__).parent / "data"


def load(name: str) -> Any:
    """kubectl/<file> or gcloud/<file>: parsed JSON, or the text of a .log."""
    path = DATA / name
    return path.read_text() if path.suffix == ".log" else json.loads(path.read_text())
