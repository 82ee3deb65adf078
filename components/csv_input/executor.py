"""CsvExampleGen's executor, with every input CSV checked first (field counts, quoting, encoding, rows), so a
malformed file stops the run with its name and line instead of a Beam stack trace."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

from tfx import types
from tfx.components.example_gen.csv_example_gen import executor as csv_executor
from tfx.dsl.io import fileio
from tfx.types import standard_component_specs

from data.sources import DataSourceError, check_csv_structure, csv_files

logger = logging.getLogger(__name__)


def _csv_paths(input_base: str) -> list[str]:
    if "://" not in input_base:
        return [str(p) for p in csv_files(Path(input_base))]
    paths = sorted(fileio.glob(f"{input_base.rstrip('/')}/*.csv"))
    if not paths:
        raise DataSourceError(f"input directory {input_base} holds no *.csv files")
    return paths


def _opener(input_base: str):
    return None if "://" not in input_base else (lambda path: fileio.open(path, "r"))


class Executor(csv_executor.Executor):
    def Do(
        self,
        input_dict: dict[str, list[types.Artifact]],
        output_dict: dict[str, list[types.Artifact]],
        exec_properties: dict[str, Any],
    ) -> None:
        input_base = exec_properties[standard_component_specs.INPUT_BASE_KEY]
        rows = sum(check_csv_structure(path, _opener(input_base)) for path in _csv_paths(input_base))
        logger.info("Checked the CSV files under %s: %s rows, every line well-formed", input_base, rows)
        super().Do(input_dict, output_dict, exec_properties)
