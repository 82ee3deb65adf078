"""The files of one input: those ExampleGen reads and ``torchtfx predict`` scores, listed the same way."""

from __future__ import annotations

import os
import posixpath
from pathlib import Path

import tensorflow as tf

from torchtfx.data.csv_reader.sources import DataSourceError, csv_files

# The files of an input directory that ExampleGen reads: the same ones sources.py:csv_files checks.
INPUT_PATTERN = "*.csv"


def _glob(pattern: str) -> list[str]:
    """tf.io.gfile's glob (local, gs://, s3://, hdfs://), a folder that does not exist matching nothing: what TFX's
    fileio.glob does with its default filesystems."""
    try:
        return [os.fsdecode(p) for p in tf.io.gfile.glob(pattern)]
    except tf.errors.NotFoundError:
        return []


def split_files(input_base: str, pattern: str) -> list[str]:
    """The files of one input split, as both the checks and the Beam step read them."""
    folder = posixpath.dirname(pattern)  # a span's folder ('2026-12-01/*.csv'), or '' for the input folder
    if "://" not in input_base and not any(c in folder for c in "*?["):
        csv_files(Path(input_base) / folder)  # the usual mistakes (no such folder, no CSV), by name
    paths = sorted(_glob(os.path.join(input_base, pattern)))
    if not paths:
        raise DataSourceError(f"no input file under {input_base} matches {pattern}")
    return paths
