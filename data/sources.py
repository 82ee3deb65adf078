"""Where a dataset's CSV files come from: a user's directory, or a file shipped inside a package."""

from __future__ import annotations

import csv
import importlib.util
from collections.abc import Callable
from pathlib import Path
from typing import IO

from torchtfx.data.config.dataset import DatasetConfig


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
    # Links too: a dangling one must fail by name, not be skipped (ExampleGen would try to read it).
    files = sorted(p for p in data_dir.glob("*.csv") if p.is_file() or p.is_symlink())
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


def check_csv_structure(path: Path | str, open_text: Callable[[str], IO[str]] | None = None) -> int:
    """Every record of ``path`` parses and has as many fields as the header; returns the number of rows.

    Beam's CSV decoder would fail on these deep inside ExampleGen with a stack trace; here the message names
    the file, the line and what is wrong. ``open_text`` opens remote files (e.g. ``tf.io.gfile.GFile``).
    """
    opener = open_text or (lambda p: open(p, newline=""))
    reader, done = None, 0  # done: the last line of the last complete record; the next record starts after it
    try:
        with opener(str(path)) as handle:
            reader = csv.reader(handle, strict=True)
            header = next(reader, None)
            done = reader.line_num
            if not header:
                raise DataSourceError(f"{path} is empty; each CSV needs a header line and rows")
            rows = 0
            for record in reader:
                if record and len(record) != len(header):
                    raise DataSourceError(
                        f"{path}, line {done + 1}: {len(record)} fields where the header has {len(header)}; "
                        "fix the line (a stray delimiter, or an unquoted comma inside a value?)"
                    )
                rows += bool(record)
                done = reader.line_num
    except csv.Error as err:
        raise DataSourceError(
            f"{path}, line {done + 1}: malformed CSV ({err}); does a quote opened on this line never close?"
        ) from None
    except UnicodeDecodeError as err:
        raise DataSourceError(f"{path} is not UTF-8 text ({err.reason} at byte {err.start})") from None
    except OSError as err:
        raise DataSourceError(f"cannot read {path}: {err.strerror}") from None
    if rows == 0:
        raise DataSourceError(f"{path} has a header but no rows")
    return rows


def default_data_dir(cfg: DatasetConfig) -> Path:
    """The folder holding the dataset's packaged CSV (ExampleGen reads every CSV in a folder)."""
    if not (cfg.source_package and cfg.source_path):
        raise DataSourceError(f"dataset {cfg.name!r} has no packaged source; pass --data-dir")
    return packaged_csv(cfg.source_package, cfg.source_path).parent
