"""How a CSV cell is read as its schema type: what TFX's int() / float() read, plus whole numbers written as
floats for INT columns (pandas writes an integer column with gaps as 3.0), and nothing that is not a number."""

from __future__ import annotations

import pytest

from torchtfx.data.csv_reader.columns import parse_float, parse_int


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("3", 3),
        ("-3", -3),
        (" 4 ", 4),
        ("3.0", 3),
        ("3e0", 3),
        ("17031280100.0", 17031280100),
        ("9223372036854775807", 2**63 - 1),
        ("-9223372036854775808.0", -(2**63)),
        ("3.5", None),
        ("9223372036854775808", None),
        ("1e999999999", None),
        ("nan", None),
        ("inf", None),
        ("n/a", None),
        ("3 miles", None),
    ],
)
def test_int_cells(text, expected):
    assert parse_int(text) == expected


@pytest.mark.parametrize(("text", "expected"), [("0", 0.0), ("12", 12.0), ("1.5e3", 1500.0), ("n/a", None)])
def test_float_cells(text, expected):
    assert parse_float(text) == expected
