"""Formatting shared by the plan's text sections (tools/plan_text.py, tools/plan_capacity_text.py):
aligned tables and money. Moved from tools/plan_text.py."""

from __future__ import annotations

from typing import Iterable


def table(headers: list[str], rows: list[list[str]], indent: str = "  ", right: Iterable[int] = ()) -> list[str]:
    right = set(right)
    widths = [max(len(str(x)) for x in column) for column in zip(headers, *rows)] if rows else [len(h) for h in headers]

    def line(cells: list[str]) -> str:
        parts = [str(c).rjust(w) if i in right else str(c).ljust(w) for i, (c, w) in enumerate(zip(cells, widths))]
        return (indent + "  ".join(parts)).rstrip()

    return [line(headers), *(line(r) for r in rows)]


def money(value: float | None, digits: int = 2) -> str:
    return "unknown" if value is None else f"{value:,.{digits}f}"


def price(value: float | None, estimate: bool, digits: int = 2) -> str:
    if value is None:
        return "unknown"
    return ("≈" if estimate and value else "") + f"{value:,.{digits}f}"
