"""Aligned text tables for the commands' output (``simulate``'s table, ``inspect``)."""

from __future__ import annotations

import unicodedata

__all__ = ["display_width", "table_lines"]


def display_width(text: str) -> int:
    """Columns ``text`` takes on a terminal: wide (East Asian) characters take two, combining
    marks none."""
    if text.isascii():
        return len(text)
    return sum(
        0 if unicodedata.combining(ch) else 2 if unicodedata.east_asian_width(ch) in "WF" else 1
        for ch in text
    )


def table_lines(rows: list[list[str]], *, gap: str = "   ") -> list[str]:
    """``rows`` as aligned columns (by :func:`display_width`), trailing blanks cut."""
    cells = [[(cell, display_width(cell)) for cell in row] for row in rows]
    widths = [max(row[i][1] for row in cells) for i in range(len(rows[0]))]
    return [
        gap.join(cell + " " * (width - used)
                 for (cell, used), width in zip(row, widths, strict=True)).rstrip()
        for row in cells
    ]
