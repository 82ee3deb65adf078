"""A spans pattern checked when the dataset YAML is read, without importing TFX (5 s, and TensorFlow with it).

The rules are TFX's ``verify_split_pattern_specs`` and ``_get_spec_width`` (tfx/components/example_gen/utils.py,
TFX 1.16), with the same spec syntax; tests/unit/data/spans/test_pattern.py runs both on the same patterns.
"""

from __future__ import annotations

import posixpath
import re

SPAN_FULL_REGEX = r"{SPAN}|{SPAN:(?P<width>.*?)}"
VERSION_FULL_REGEX = r"{VERSION}|{VERSION:(?P<width>.*?)}"
DATE_SPECS = ("{YYYY}", "{MM}", "{DD}")
EXAMPLES = "'{SPAN}/*.csv', 'span-{SPAN:3}/*.csv' or '{YYYY}-{MM}-{DD}/*.csv'"


class SpanPatternError(ValueError):
    """A spans pattern TFX cannot read, or one that reaches outside the data root."""


def _specs(pattern: str) -> tuple[bool, bool, bool]:
    """Whether ``pattern`` holds a span spec, the date specs, a version spec (TFX's verify_split_pattern_specs)."""
    span_matches = re.findall(SPAN_FULL_REGEX, pattern)
    version_matches = re.findall(VERSION_FULL_REGEX, pattern)
    is_span, is_version = bool(span_matches), bool(version_matches)
    is_date = any(spec in pattern for spec in DATE_SPECS)
    if is_span and is_date:
        raise SpanPatternError(f"{pattern!r} has both {{SPAN}} and date specs; a pattern takes one or the other")
    if is_span and len(span_matches) != 1:
        raise SpanPatternError(f"{pattern!r} has more than one {{SPAN}}")
    if is_date and not all(pattern.count(spec) == 1 for spec in DATE_SPECS):
        raise SpanPatternError(f"{pattern!r} needs exactly one each of {{YYYY}}, {{MM}} and {{DD}}")
    if is_version and not (is_span or is_date):
        raise SpanPatternError(f"{pattern!r} has {{VERSION}} but no {{SPAN}} or date specs")
    if is_version and len(version_matches) != 1:
        raise SpanPatternError(f"{pattern!r} has more than one {{VERSION}}")
    for spec_regex, name in ((SPAN_FULL_REGEX, "SPAN"), (VERSION_FULL_REGEX, "VERSION")):
        match = re.search(spec_regex, pattern)
        width = match.group("width") if match else None
        if width and not (width.isdigit() and int(width) > 0):
            raise SpanPatternError(f"{pattern!r}: the width in {{{name}:{width}}} is not a positive integer")
    return is_span, is_date, is_version


def checked_pattern(pattern: str) -> str:
    """``pattern`` if TFX reads it as spans of files inside the data root, else a SpanPatternError naming the fix."""
    if posixpath.isabs(pattern) or "\\" in pattern or ".." in pattern.split("/"):
        raise SpanPatternError(
            f"spans pattern {pattern!r} must be relative to the data root and stay inside it (no leading '/', "
            f"no '..'): write it as {EXAMPLES}"
        )
    try:
        is_span, is_date, _ = _specs(pattern)
    except SpanPatternError as err:
        raise SpanPatternError(f"spans pattern {err}; write it as {EXAMPLES}") from None
    if not (is_span or is_date):
        raise SpanPatternError(
            f"spans pattern {pattern!r} has no {{SPAN}} and no {{YYYY}}-{{MM}}-{{DD}}, so every file would be one "
            f"span: write it as {EXAMPLES}, or drop 'spans:' to read the data root's *.csv files as one input"
        )
    return pattern


def is_date_pattern(pattern: str) -> bool:
    return _specs(pattern)[1]
