"""Every input CSV checked against the curated schema before any Beam work, so that bad input stops the run
with a message naming the file, the line, the column and the fix instead of a Beam stack trace or a type
anomaly that does not say where: structure (sources.py:csv_rows), header names, the same columns in every
file, and every value readable as its column's schema type.

A value that cannot be read as the schema's type is an error here, not a DataGate anomaly: like a database
load job, ExampleGen refuses it with where it is, and the run could not use it anyway (Transform parses every
column with the schema's type). All such values of all files are collected first, so one run names them all.
A numeric column's missing-value marker (the dataset config's ``missing_values``: ``NA``, ``NULL``...) is a
missing value, not a bad one.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field

from torchtfx.data.config.dataset import MAX_CELL_CHARS
from torchtfx.data.csv_reader.columns import TYPE_NAMES, ColumnPlan
from torchtfx.data.csv_reader.parts import CutPoints
from torchtfx.data.csv_reader.sources import DataSourceError, OpenBinary, csv_rows

logger = logging.getLogger(__name__)

MAX_LISTED_PROBLEMS = 10  # bad values listed in one error message; the rest are counted


@dataclass
class _BadValues:
    """The unreadable values of one column of one file: the first one, and how many."""

    line: int
    value: str
    count: int = 1


@dataclass
class CheckedInput:
    """What the checks learnt about one input split's files."""

    rows: int
    first: str  # the first file, whose columns every other file must have
    plan: ColumnPlan  # the first file's
    empty: set[str]  # columns with no value in any row so far
    bad: dict[tuple[str, str, int], _BadValues] = field(default_factory=dict)  # (file, column, type)
    # Each file's header and where its records start (data/csv_reader/parts.py), to read it in parts.
    cut_points: dict[str, tuple[list[str], CutPoints]] = field(default_factory=dict)


def _check_file(
    path: str,
    schema_types: dict[str, int],
    schema_file: str,
    open_binary: OpenBinary | None,
    found: CheckedInput | None,
    missing_values: tuple[str, ...],
    max_cell_chars: int,
) -> CheckedInput:
    cuts = CutPoints()
    rows = csv_rows(path, open_binary, cuts, max_cell_chars)
    _, header = next(rows)
    plan = ColumnPlan.for_file(path, header, schema_types, schema_file, missing_values)
    if found is not None and set(plan.header) != set(found.plan.header):
        extra = [name for name in plan.header if name not in found.plan.header]
        lacks = [name for name in found.plan.header if name not in plan.header]
        raise DataSourceError(
            f"{path} and {found.first} have different columns ({path} has {extra} too and lacks {lacks}); every CSV "
            "file of one input needs the same columns, in any order: fix the header, or move the file elsewhere"
        )
    checked = found or CheckedInput(rows=0, first=path, plan=plan, empty=set(plan.header))
    empty = [i for i, name in enumerate(plan.header) if name in checked.empty]
    count = 0
    for line, record in rows:
        count += 1
        if empty:
            empty = [i for i in empty if record[i] in plan.missing_cells[i]]
        for position in plan.bad_cells(record):
            key = (path, plan.header[position], plan.kinds[position])
            if key in checked.bad:
                checked.bad[key].count += 1
            else:
                checked.bad[key] = _BadValues(line, record[position])
    if count == 0:
        raise DataSourceError(f"{path} has a header but no rows")
    checked.rows += count
    checked.cut_points[path] = (header, cuts)
    checked.empty = {plan.header[i] for i in empty}
    return checked


def _bad_values_error(bad: dict[tuple[str, str, int], _BadValues], schema_file: str) -> DataSourceError:
    lines = []
    for (path, column, kind), found in list(bad.items())[:MAX_LISTED_PROBLEMS]:
        more = f", and {found.count - 1} more in this column" if found.count > 1 else ""
        what = "a whole number" if TYPE_NAMES[kind] == "INT" else "a number"
        lines.append(
            f"{path}, line {found.line}, column {column!r}: {found.value!r} is not {what} "
            f"({TYPE_NAMES[kind]} in the schema){more}"
        )
    if len(bad) > MAX_LISTED_PROBLEMS:
        lines.append(f"... and {len(bad) - MAX_LISTED_PROBLEMS} more columns")
    return DataSourceError(
        "values that cannot be read as their column's type in the curated schema:\n  - "
        + "\n  - ".join(lines)
        + f"\nFix the values (leave a cell empty for a missing value, or list the text that marks one under "
        f"missing_values in the dataset config), or, if a column's type really changed, update the curated schema "
        f"({schema_file})."
    )


def check_inputs(
    paths: list[str],
    schema_types: dict[str, int],
    schema_file: str,
    open_binary: OpenBinary | None = None,
    missing_values: tuple[str, ...] = (),
    max_cell_chars: int = MAX_CELL_CHARS,
) -> CheckedInput:
    """Check every file (see the module's docstring); returns the row count and the column plan. A cell may hold
    up to ``max_cell_chars`` characters; the parts of the files are read with the same limit."""
    checked = None
    for path in paths:
        checked = _check_file(path, schema_types, schema_file, open_binary, checked, missing_values, max_cell_chars)
    if checked is None:
        raise DataSourceError("no input files to check")
    if checked.bad:
        raise _bad_values_error(checked.bad, schema_file)
    plan = checked.plan
    if plan.unknown:
        logger.warning(
            "Columns %s of the input are not in the schema %s: kept as text; the DataGate reports them",
            list(plan.unknown),
            schema_file,
        )
    if checked.empty:
        logger.warning(
            "Columns %s have no value in any row: written without a type, as TFX does; the DataGate reports them",
            sorted(checked.empty),
        )
    if plan.missing:
        logger.warning("Schema columns %s are not in the input: the DataGate reports them dropped", list(plan.missing))
    return checked
