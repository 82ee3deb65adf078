"""The CSV files to score, checked before any Beam work with ExampleGen's own checks (data/csv_reader/check.py:
structure, header, the same columns in every file, every value readable as its schema type), so a malformed line
stops the command with its file and line before anything is written; then cut into parts for the Beam workers
(data/csv_reader/beam_parts.py), as ExampleGen cuts them."""

from __future__ import annotations

import contextlib
import dataclasses
import logging
from collections.abc import Iterator

from tfx.dsl.io import fileio

from torchtfx.data.config.dataset import DatasetConfig
from torchtfx.data.csv_reader import check
from torchtfx.data.csv_reader.beam_parts import input_parts
from torchtfx.data.csv_reader.columns import load_schema_types
from torchtfx.data.csv_reader.decode import open_input
from torchtfx.data.csv_reader.files import INPUT_PATTERN, split_files
from torchtfx.data.csv_reader.parts import CsvPart
from torchtfx.data.csv_reader.sources import DataSourceError

logger = logging.getLogger(__name__)
_GLOB_CHARACTERS = "*?["


def input_files(data: str) -> list[str]:
    """``--data``: a folder (its ``*.csv``, as ExampleGen reads a folder), one file, or a glob pattern; local or
    a Beam filesystem URI (gs://, s3://)."""
    if any(c in data for c in _GLOB_CHARACTERS):
        paths = sorted(p for p in fileio.glob(data) if not fileio.isdir(p))
        if not paths:
            raise DataSourceError(f"no file matches {data}; check the pattern (quote it, or the shell expands it)")
        return paths
    if fileio.isdir(data):
        return split_files(data, INPUT_PATTERN)
    if fileio.exists(data):
        return [data]
    raise DataSourceError(
        f"--data {data} does not exist; give a folder of CSV files, one CSV file, or a quoted glob ('day=*/*.csv')"
    )


@dataclasses.dataclass(frozen=True)
class CheckedSource:
    """The checked input: every file's records, what ExampleGen's encoding needs, and the parts to read."""

    paths: tuple[str, ...]
    rows: int
    size: int  # bytes, all files
    schema_types: dict[str, int]
    empty: frozenset[str]  # columns with no value in any row: written without a type, as ExampleGen writes them
    missing_values: tuple[str, ...]
    cut_points: dict  # path -> (header, CutPoints): where the Beam workers' parts start

    def parts(self, beam_args: list[str]) -> list[CsvPart]:
        return input_parts(self.cut_points, beam_args)


@contextlib.contextmanager
def _quiet(module_logger: logging.Logger) -> Iterator[None]:
    """Without the checks' warnings: they speak of the DataGate, which batch scoring does not run (a scoring CSV
    without the label column is the rule, not an anomaly)."""
    level = module_logger.level
    module_logger.setLevel(logging.ERROR)
    try:
        yield
    finally:
        module_logger.setLevel(level)


def check_source(paths: list[str], dataset: DatasetConfig, keys: tuple[str, ...]) -> CheckedSource:
    """ExampleGen's checks over every file (a :class:`DataSourceError` names file, line and fix), then what scoring
    needs: the model's input columns, and the key columns asked for."""
    schema_file = str(dataset.schema_path)
    schema_types = load_schema_types(schema_file)
    with _quiet(check.logger):
        checked = check.check_inputs(
            paths, schema_types, schema_file, open_input, dataset.missing_values, dataset.max_cell_chars
        )
    header = checked.plan.header
    absent = [name for name in dataset.raw_feature_columns if name not in header]
    if absent:
        raise DataSourceError(
            f"{checked.first} lacks the model's input columns {absent} (dataset {dataset.name!r} reads "
            f"{list(dataset.raw_feature_columns)}); nothing was scored. Add the columns, or give the --dataset whose "
            "model reads these files"
        )
    unknown = [name for name in keys if name not in header]
    if unknown:
        raise DataSourceError(
            f"--key-column {unknown[0]!r} is not a column of {checked.first} (its columns: {list(header)}); "
            "nothing was scored. Name a column of the input"
        )
    unused = [name for name in header if name not in dataset.raw_feature_columns and name not in keys]
    if unused:
        logger.info("Columns %s are not model inputs: encoded as ExampleGen does, unread by the model", unused)
    size = sum(cuts.size for _header, cuts in checked.cut_points.values())
    return CheckedSource(
        tuple(paths),
        checked.rows,
        size,
        schema_types,
        frozenset(checked.empty),
        dataset.missing_values,
        checked.cut_points,
    )
