"""Where a dataset's CSV files come from: a user's directory, or a file shipped inside a package."""

from __future__ import annotations

import csv
import importlib.util
from pathlib import Path

from data.config import DatasetConfig


class DataSourceError(ValueError):
    """The input data cannot be found or read."""


def packaged_csv(package: str, relative_path: str) -> Path:
    """A CSV file inside an installed package, e.g. tfx's Chicago taxi sample."""
    spec = importlib.util.find_spec(package)
    if spec is None or not spec.submodule_search_locations:
        raise DataSourceError(f"package {package!r} is not installed; cannot resolve {relative_path}")
    path = Path(next(iter(spec.submodule_search_locations))) / relative_path
    if not path.is_file():
        raise DataSourceError(f"{path} is missing from the installed {package!r} package")
    return path


def csv_files(data_dir: Path) -> list[Path]:
    """The CSV files of an input directory, with clear errors for the usual mistakes."""
    data_dir = Path(data_dir)
    if not data_dir.exists():
        raise DataSourceError(f"input directory {data_dir} does not exist")
    if not data_dir.is_dir():
        raise DataSourceError(f"input path {data_dir} is not a directory; point --data-dir at a folder of CSV files")
    files = sorted(p for p in data_dir.glob("*.csv") if p.is_file())
    if not files:
        raise DataSourceError(f"input directory {data_dir} holds no *.csv files")
    for path in files:
        try:
            with path.open(newline="") as handle:
                header = next(csv.reader(handle), None)
        except OSError as err:
            raise DataSourceError(f"cannot read {path}: {err.strerror}") from err
        if not header:
            raise DataSourceError(f"{path} is empty; each CSV needs a header line and rows")
    return files


def default_data_dir(cfg: DatasetConfig) -> Path:
    """The folder holding the dataset's packaged CSV (ExampleGen reads every CSV in a folder)."""
    if not (cfg.source_package and cfg.source_path):
        raise DataSourceError(f"dataset {cfg.name!r} has no packaged source; pass --data-dir")
    return packaged_csv(cfg.source_package, cfg.source_path).parent
