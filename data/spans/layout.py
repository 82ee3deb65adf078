"""The spans under a data root, read the way TFX's ExampleGen driver reads them.

A pattern is TFX's: the files of one span, relative to the root, with ``{SPAN}`` (or ``{SPAN:4}``, zero-padded)
or the date specs ``{YYYY}``, ``{MM}``, ``{DD}`` (span = days since 1970-01-01), and optionally ``{VERSION}``.
Each span is read at its newest version. The parsing, globbing and fingerprinting are TFX's own functions
(tfx/components/example_gen/utils.py), so a span here is the span TFX's driver resolves and the ``span`` and
``version`` our Examples artifacts carry; tests/unit/data/spans/test_layout.py pins them against the driver's.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

from tfx.components.example_gen import utils
from tfx.dsl.io import fileio
from tfx.proto import example_gen_pb2, range_config_pb2

from torchtfx.data.csv_reader.sources import DataSourceError
from torchtfx.data.spans.pattern import SpanPatternError, checked_pattern


class SpanError(DataSourceError):
    """A spans pattern that TFX cannot read, or a data root that holds no span matching it."""


@dataclass(frozen=True)
class SpanInput:
    """One span at its newest version: ``pattern`` names its files (relative to the root, specs filled in)."""

    number: int
    version: int | None
    pattern: str
    fingerprint: str
    is_date: bool

    @property
    def label(self) -> str:
        """How a person names the span: its date for a date pattern, else its number (and version)."""
        if self.is_date:
            name = "{:04d}-{:02d}-{:02d}".format(*utils.span_number_to_date(self.number))
        else:
            name = f"span {self.number}"
        return name if self.version is None else f"{name} version {self.version}"


def _split(pattern: str) -> example_gen_pb2.Input.Split:
    return example_gen_pb2.Input.Split(name="spans", pattern=pattern)


def _checked(pattern: str) -> tuple[bool, bool, bool]:
    try:
        checked_pattern(pattern)
    except SpanPatternError as err:
        raise SpanError(str(err)) from None
    return utils.verify_split_pattern_specs(_split(pattern))


def span_numbers(root: str, pattern: str) -> list[int]:
    """The span numbers of every file under ``root`` that ``pattern`` matches, ascending."""
    is_span, is_date, is_version = _checked(pattern)
    glob, regex = utils._create_matching_glob_and_regex(  # TFX driver's own matching, kept exact
        root, _split(pattern), is_span, is_date, is_version, None
    )
    numbers: set[int] = set()
    for found in fileio.glob(glob):
        path = os.fsdecode(found)
        try:
            _, number, _, _ = utils._find_matched_span_version_from_path(path, regex, is_span, is_date, is_version)
        except ValueError as err:
            raise SpanError(
                f"{path} matches the spans pattern {pattern!r} but names no span ({err}); move it out of {root} "
                "or rename it to the pattern"
            ) from None
        if number is not None:  # a span or date pattern (checked) always yields one
            numbers.add(number)
    return sorted(numbers)


def span_input(root: str, pattern: str, number: int) -> SpanInput:
    """Span ``number`` at its newest version, as TFX's driver resolves a static range of that one span."""
    is_date = _checked(pattern)[1]
    split = _split(pattern)
    one_span = range_config_pb2.RangeConfig(
        static_range=range_config_pb2.StaticRange(start_span_number=number, end_span_number=number)
    )
    try:
        fingerprint, span, version = utils.calculate_splits_fingerprint_span_and_version(root, [split], one_span)
    except ValueError as err:
        raise SpanError(f"span {number} under {root} ({pattern!r}): {err}") from None
    return SpanInput(span, version, split.pattern, fingerprint, is_date)


def window(root: str, pattern: str, size: int, newest: int | None = None) -> list[SpanInput]:
    """The newest ``size`` spans under ``root`` up to span ``newest`` (the newest there is when None), oldest
    first. Spans are counted where they exist, as TFX's ``rolling_range`` counts them: a day with no folder is
    not a span, and the window reaches back past it."""
    numbers = span_numbers(root, pattern)
    if newest is not None:
        numbers = [n for n in numbers if n <= newest]
    if not numbers:
        raise SpanError(
            f"no file under {root} matches the spans pattern {pattern!r}"
            + (f" up to span {newest}" if newest is not None else "")
            + "; put each span's CSV files in a folder the pattern names, or fix 'spans.pattern' in the dataset YAML"
        )
    return [span_input(root, pattern, n) for n in numbers[-size:]]
