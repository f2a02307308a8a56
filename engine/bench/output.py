"""What every bench subcommand ends with: its table on stdout, then its results file when asked
(``--json``), said on stderr."""

from __future__ import annotations

from collections.abc import Collection, Iterable, Sequence
from pathlib import Path
from typing import Any

from engine.bench.harness import write_json


def table_of(title: str, columns: Sequence[str], rows: Iterable[Sequence[str]], left: Collection[str] = ()) -> Any:
    """A rich table: ``columns`` (right-justified, but those in ``left``) and ``rows`` of text."""
    from rich.table import Table

    table = Table(title=title, title_justify="left")
    for column in columns:
        table.add_column(column, justify="left" if column in left else "right")
    for row in rows:
        table.add_row(*row)
    return table


def report(console: Any, table: Any, data: dict[str, Any], json_path: Path | None,
           notes: Sequence[str] = (), written: str = "") -> None:
    """Print ``table``, then ``notes`` and, with ``json_path``, write ``data`` there (``written``:
    what the "wrote" line adds) on ``console`` (stderr)."""
    from rich.console import Console

    Console().print(table)
    for note in notes:
        console.print(note)
    if json_path:
        console.print(f"wrote {write_json(json_path, data)}{written}")
