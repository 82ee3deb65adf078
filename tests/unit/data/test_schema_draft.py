"""``torchtfx draft-schema`` on real exports: missing-value markers (R's NA) in numeric columns are read as missing,
so those columns are drafted as numbers, and every column where a marker decided the type is named."""

from __future__ import annotations

import logging
import shutil
from pathlib import Path

from tensorflow_metadata.proto.v0 import schema_pb2

from torchtfx.data.schema_draft import draft_schema

# The Palmer penguins as R writes them: NA in four numeric columns (2 rows) and in the text column sex (11 rows).
PENGUINS = Path(__file__).parent / "samples" / "penguins.csv"
NUMERIC_WITH_NA = ("bill_length_mm", "bill_depth_mm", "flipper_length_mm", "body_mass_g")


def _penguins(tmp_path) -> Path:
    data = tmp_path / "penguins"
    data.mkdir()
    shutil.copy(PENGUINS, data)
    return data


def _types(schema: schema_pb2.Schema) -> dict[str, str]:
    return {f.name: schema_pb2.FeatureType.Name(f.type) for f in schema.feature}


def test_an_r_export_s_na_cells_are_missing_numbers_and_each_such_column_is_named(tmp_path, caplog):
    with caplog.at_level(logging.WARNING):
        schema = draft_schema(_penguins(tmp_path))

    assert _types(schema) == {
        "species": "BYTES",
        "island": "BYTES",
        "bill_length_mm": "FLOAT",
        "bill_depth_mm": "FLOAT",
        "flipper_length_mm": "INT",
        "body_mass_g": "INT",
        "sex": "BYTES",
        "year": "INT",
    }
    features = {f.name: f for f in schema.feature}
    assert not features["body_mass_g"].HasField("shape")  # a missing value is possible: optional
    assert (features["body_mass_g"].int_domain.min, features["body_mass_g"].int_domain.max) == (2700, 6300)
    assert features["year"].shape.dim[0].size == 1
    domains = {d.name: set(d.value) for d in schema.string_domain}
    assert "NA" in domains[features["sex"].domain]  # a text column keeps NA as a value (it could be North America)
    for column in NUMERIC_WITH_NA:
        assert (
            f"Column '{column}' holds numbers and 'NA' (2 cells): read as missing, so the column is drafted as a "
            "number. ExampleGen reads them so only while the dataset config's missing_values lists them"
        ) in caplog.text
    assert "'sex'" not in caplog.text and "'year'" not in caplog.text


def test_a_marker_left_out_of_the_list_drafts_text_and_says_how_to_read_it_as_missing(tmp_path, caplog):
    with caplog.at_level(logging.WARNING):
        schema = draft_schema(_penguins(tmp_path), missing_values=("",))

    assert {_types(schema)[c] for c in NUMERIC_WITH_NA} == {"BYTES"}
    assert (
        "Column 'body_mass_g' holds numbers and 'NA' (2 cells), which is not among the missing-value markers given: "
        "drafted as text (BYTES). If it means 'no value', pass it with --missing-value and list it under "
        "missing_values in the dataset config"
    ) in caplog.text


def test_nan_in_a_float_column_is_missing_not_a_value_in_the_drafted_range(tmp_path):
    data = tmp_path / "csv"
    data.mkdir()
    (data / "d.csv").write_text("x,y\n" + "".join(f"{i}.5,{'NaN' if i % 5 == 0 else i}\n" for i in range(1, 30)))
    schema = draft_schema(data)
    features = {f.name: f for f in schema.feature}
    assert features["y"].type == schema_pb2.INT and not features["y"].HasField("shape")
    assert (features["y"].int_domain.min, features["y"].int_domain.max) == (1, 29)


def test_a_quoted_value_holding_a_line_break_drafts_a_schema(tmp_path):
    """ExampleGen reads such a file; draft-schema wrote the value back out unquoted, and TFDV's reader refused it."""
    rows = "".join(f'{i}.5,"Flash\nCab {i % 2}"\n' if i % 3 == 0 else f"{i}.5,Blue\r\n" for i in range(30))
    (tmp_path / "data.csv").write_text("fare,company\n" + rows)
    schema = draft_schema(tmp_path)
    assert _types(schema) == {"fare": "FLOAT", "company": "BYTES"}
    domains = {d.name: set(d.value) for d in schema.string_domain}
    assert domains[next(f for f in schema.feature if f.name == "company").domain] == {
        "Flash\nCab 0",
        "Flash\nCab 1",
        "Blue",
    }
