"""The files a monitoring window reads: sampled requests as the serving sidecar writes them (TFRecord files of
serialized tf.Examples, the bytes TF Serving's ``serving_default`` receives; ``.gz`` gzipped) and CSV files as
``torchtfx predict`` scores them."""

from __future__ import annotations

import dataclasses
from pathlib import Path

from torchtfx.data.csv_reader.sources import DataSourceError

TFRECORD_SUFFIXES = (".tfrecord", ".tfrecord.gz")
CSV_SUFFIX = ".csv"


class MonitorInputError(DataSourceError):
    """The monitoring window holds nothing that can be read."""


@dataclasses.dataclass(frozen=True)
class RequestFiles:
    tfrecords: tuple[str, ...]  # serialized tf.Examples, one a record
    csvs: tuple[str, ...]  # rows as `torchtfx predict` reads them


def request_files(logs: Path) -> RequestFiles:
    """The request logs and CSV files directly in ``logs`` (not below it: only the folder the user named is
    read); a clear error when there are none, or when a file is of another kind."""
    if not logs.is_dir():
        raise MonitorInputError(f"--logs {logs} is not a folder; give the folder the serving sidecar writes into")
    files = sorted(p for p in logs.iterdir() if p.is_file() and not p.name.startswith("."))
    tfrecords = [p for p in files if p.name.endswith(TFRECORD_SUFFIXES)]
    csvs = [p for p in files if p.name.endswith(CSV_SUFFIX)]
    other = [p.name for p in files if p not in tfrecords and p not in csvs]
    if other:
        raise MonitorInputError(
            f"{logs} holds files monitor cannot read: {other[:5]}; it reads request logs "
            f"({', '.join('*' + s for s in TFRECORD_SUFFIXES)}: serialized tf.Examples) and CSV files (*.csv). "
            "Move the others out"
        )
    if not tfrecords and not csvs:
        raise MonitorInputError(
            f"{logs} holds no request log ({', '.join('*' + s for s in TFRECORD_SUFFIXES)}) and no *.csv file: "
            "nothing to compare. Point --logs at the sidecar's log folder"
        )
    return RequestFiles(tuple(map(str, tfrecords)), tuple(map(str, csvs)))
