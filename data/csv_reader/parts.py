"""A CSV file cut into parts of whole records, so that several Beam workers read one file at once.

ExampleGen used to read each input file in one piece, which put each split into one gzip TFRecord shard; a gzip
file cannot be split, so every later stage that reads the split (StatisticsGen, Transform and, above all, TFMA's
fused read-infer-slice-metrics stage) ran on one Beam worker. Measured on the 1M-row synthetic taxi eval split:
TFMA took 298-301 s from one shard, 141-147 s from two shards of the same records on two workers.

The cut points come from the checks' full pass over the file (data/csv_reader/check.py), which already
parses every record: the byte offset where a record starts is known exactly there, quoted values that span
lines included, which a cut at any newline would split. A part is then read by seeking to its first byte.
"""

from __future__ import annotations

import csv
from collections.abc import Iterator
from dataclasses import dataclass
from typing import IO

from torchtfx.data.config.dataset import MAX_CELL_CHARS
from torchtfx.data.csv_reader.sources import CutPoints, checked_records, set_cell_limit, text_stream

__all__ = ["CsvPart", "CutPoints", "cut", "part_count", "part_records"]


@dataclass(frozen=True)
class CsvPart:
    """Bytes ``[start, stop)`` of ``path`` (``stop`` None: to the end), whole records whose first starts on line
    ``first_line``; ``header``: the file's columns; ``max_cell_chars``: the cell limit the checks read it with."""

    path: str
    start: int
    stop: int | None
    first_line: int
    header: tuple[str, ...]
    max_cell_chars: int = MAX_CELL_CHARS


def cut(path: str, header: list[str], cuts: CutPoints, parts: int) -> list[CsvPart]:
    """``path`` in up to ``parts`` parts of about equal bytes, each starting where a record starts."""
    starts = [cuts.body]
    body_bytes = cuts.size - cuts.body[0]
    for i in range(1, parts):
        target = cuts.body[0] + body_bytes * i // parts
        nearest = min(cuts.points, key=lambda point: abs(point[0] - target), default=None)
        if nearest is not None and nearest[0] > starts[-1][0]:
            starts.append(nearest)
    stops = [start for start, _ in starts[1:]] + [None]
    return [
        CsvPart(path, start, stop, line, tuple(header), cuts.max_cell_chars)
        for (start, line), stop in zip(starts, stops, strict=True)
    ]


def part_count(sizes: list[int], workers: int, part_bytes: int) -> list[int]:
    """How many parts each file is cut into: at least one part per worker in all, and none over ``part_bytes``
    (remote runners scale with the data), in proportion to the files' sizes."""
    total = sum(sizes)
    wanted = max(workers, -(-total // part_bytes)) if total else 1
    return [max(1, round(wanted * size / total)) if total else 1 for size in sizes]


class _Limited:
    """``handle`` from its position, ending after ``length`` bytes (None: at the end of the file)."""

    def __init__(self, handle: IO[bytes], length: int | None):
        self._handle = handle
        self._left = length

    def read(self, size: int = -1) -> bytes:
        if self._left is None:
            return self._handle.read(size)
        size = self._left if size is None or size < 0 else min(size, self._left)
        data = self._handle.read(size)
        self._left -= len(data)
        return data

    def close(self) -> None:
        self._handle.close()


def part_records(part: CsvPart, handle: IO[bytes]) -> Iterator[tuple[int, list[str]]]:
    """The records of ``part`` with the line each starts on, read from ``handle`` (the file, opened binary)."""
    set_cell_limit(part.max_cell_chars)  # csv's limit is per process: a Beam worker's is not the checks'
    handle.seek(part.start)
    length = None if part.stop is None else part.stop - part.start
    with text_stream(_Limited(handle, length), "utf-8") as text:
        reader = csv.reader(text, strict=True)
        yield from checked_records(part.path, reader, len(part.header), part.first_line)
