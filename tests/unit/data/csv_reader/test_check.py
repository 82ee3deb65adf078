"""ExampleGen's checks before any Beam work (data/csv_reader/check.py) read each cell up to the dataset's
``max_cell_chars``, and the parts the Beam workers read carry the same limit."""

from __future__ import annotations

import pytest

from torchtfx.data.csv_reader.beam_parts import input_parts
from torchtfx.data.csv_reader.check import check_inputs
from torchtfx.data.csv_reader.sources import DataSourceError

SCHEMA_TYPES = {"fare": 3, "company": 1}  # schema_pb2.FLOAT, schema_pb2.BYTES
LONG = "word " * 40_000  # 200,000 characters, past Python's own csv limit of 131,072


def test_a_cell_over_131072_characters_is_read_when_max_cell_chars_allows_it_and_refused_by_name_when_not(tmp_path):
    path = tmp_path / "data.csv"
    path.write_text(f'fare,company\n1.5,"{LONG}"\n2.5,Blue\n')
    checked = check_inputs([str(path)], SCHEMA_TYPES, "schema.pbtxt", max_cell_chars=300_000)
    assert checked.rows == 2
    (part,) = input_parts(checked.cut_points, ["--direct_running_mode=in_memory"])
    assert part.max_cell_chars == 300_000  # what a Beam worker reads the part with
    with pytest.raises(DataSourceError) as err:
        check_inputs([str(path)], SCHEMA_TYPES, "schema.pbtxt", max_cell_chars=131_072)
    assert str(err.value) == (
        f"{path}, line 2: a value longer than 131,072 characters, the most one cell may hold; if it is meant to be "
        "this long, raise max_cell_chars in the dataset config (draft-schema: --max-cell-chars)"
    )
