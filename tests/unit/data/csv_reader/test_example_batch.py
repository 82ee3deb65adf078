"""The batch encoding (Arrow columns written in protobuf's wire format: example_wire.py) writes, for every record,
the bytes of ``ColumnPlan.to_example``'s tf.Example serialized deterministically (what TFX's hash split reads):
over every spelling a cell may have, names and cells long enough for multi-byte lengths, names that sort
differently as text and as bytes, and every row of the packaged taxi CSV (a public data set)."""

from __future__ import annotations

import csv

import pytest
from tensorflow_metadata.proto.v0 import schema_pb2

from torchtfx.data.csv_reader.columns import ColumnPlan, load_schema_types
from torchtfx.data.csv_reader.example_batch import ChangedInputError, serialized_examples

INT, FLOAT, BYTES = schema_pb2.INT, schema_pb2.FLOAT, schema_pb2.BYTES


def _same_as_one_by_one(plan: ColumnPlan, records: list[list[str]]) -> None:
    encoded = serialized_examples(plan, records)
    assert len(encoded) == len(records)
    for record, serialized in zip(records, encoded, strict=True):
        expected = plan.to_example(record).SerializeToString(deterministic=True)
        assert serialized == expected, record


def test_every_spelling_of_a_cell_is_encoded_as_to_example_encodes_it():
    # Columns: INT, FLOAT, BYTES, a FLOAT column without a value anywhere (untyped), one the schema lacks (text).
    plan = ColumnPlan(
        ["n", "x", "s", "blank", "extra"],
        {"n": INT, "x": FLOAT, "s": BYTES, "blank": FLOAT},
        empty=frozenset({"blank"}),
        missing_values=("NA", "NULL"),
    )
    ints = ["3", "-0", "007", "+5", " 4 ", "3.0", "3e0", "1_000", "-9223372036854775808", "17031280100.0", "", "NA"]
    floats = ["0", "1.5e3", ".5", "5.", "1e300", "-1e-50", "nan", "inf", "-Infinity", " 2.5", "1_0.5", "NULL", ""]
    texts = ["a", "", "NA", " ", "é", '"quoted", with comma', "two\nlines", "0"]
    width = max(len(ints), len(floats), len(texts))
    records = [
        [
            ints[i % len(ints)],
            floats[i % len(floats)],
            texts[i % len(texts)],
            "NA" if i % 2 else "",
            texts[(3 * i) % len(texts)],
        ]
        for i in range(width * 3)
    ]
    _same_as_one_by_one(plan, records)


def test_each_numeric_column_is_read_by_arrow_or_by_the_plan_and_both_give_the_same_numbers():
    plan = ColumnPlan(["n", "x"], {"n": INT, "x": FLOAT})
    _same_as_one_by_one(plan, [["1", "0.1"], ["2", "0.2"], ["", "1e-7"]])  # Arrow reads every cell
    _same_as_one_by_one(plan, [["1", "0.1"], ["2.0", "1_000.5"], ["", " 3 "]])  # only Python reads some


def test_lengths_of_several_bytes_and_names_sorted_as_protobuf_sorts_them():
    # Names: 200 bytes (a two-byte length), non-ASCII ("é" sorts after "z" as UTF-8 bytes), upper case before lower.
    long_name = "n" * 200
    plan = ColumnPlan([long_name, "z", "é", "Z", "a"], {long_name: INT, "z": FLOAT, "é": BYTES, "Z": INT})
    cells = ["x" * 127, "x" * 128, "y" * 20_000, "€" * 50]  # lengths of one, two and three varint bytes
    ints = ["0", "127", "128", "-1", "9223372036854775807", "-9223372036854775808", "16384", ""]
    records = [
        [ints[i % len(ints)], f"{i}.25", cells[i % len(cells)], str(-i), cells[(i + 1) % len(cells)]] for i in range(16)
    ]
    _same_as_one_by_one(plan, records)


def test_every_row_of_the_packaged_taxi_csv(taxi_csv, taxi_cfg):
    with taxi_csv.open(newline="") as handle:
        header, *records = list(csv.reader(handle))
    types = load_schema_types(str(taxi_cfg.schema_path))
    plan = ColumnPlan(header, types, missing_values=taxi_cfg.missing_values)
    assert any("" in record for record in records)  # it has missing cells
    _same_as_one_by_one(plan, records)


def test_no_records_and_no_typed_columns():
    assert serialized_examples(ColumnPlan(["n"], {"n": INT}), []) == []
    untyped_only = ColumnPlan(["blank"], {"blank": FLOAT}, empty=frozenset({"blank"}))
    _same_as_one_by_one(untyped_only, [[""], [""]])


@pytest.mark.parametrize(
    ("record", "message"),
    [
        (["n/a", ""], "column 'n' holds a value that is not a number now"),
        (["1", "2.5"], "column 'blank' had no value in any row when checked and has one now"),
    ],
)
def test_a_record_the_checks_did_not_see_is_refused_by_column(record, message):
    plan = ColumnPlan(["n", "blank"], {"n": INT, "blank": FLOAT}, empty=frozenset({"blank"}))
    with pytest.raises(ChangedInputError, match=message):
        serialized_examples(plan, [["1", ""], record])
