"""The input of batch scoring: found as a folder, a file or a glob, and checked with ExampleGen's own checks."""

from __future__ import annotations

import pytest

from torchtfx.data.csv_reader.sources import DataSourceError
from torchtfx.pipeline.predict.source import check_source, input_files


@pytest.fixture()
def sample(tmp_path, taxi_csv):
    """Three taxi files: the header and 20 records each."""
    lines = taxi_csv.read_text().splitlines()
    folder = tmp_path / "in"
    folder.mkdir()
    for day in (1, 2, 3):
        (folder / f"day{day}.csv").write_text("\n".join([lines[0], *lines[day * 20 : day * 20 + 20]]) + "\n")
    (folder / "notes.txt").write_text("not data")
    return folder


def test_a_folder_a_file_and_a_glob_name_their_files(sample):
    assert input_files(str(sample)) == [str(sample / f"day{d}.csv") for d in (1, 2, 3)]
    assert input_files(str(sample / "day2.csv")) == [str(sample / "day2.csv")]
    assert input_files(str(sample / "day[13].csv")) == [str(sample / "day1.csv"), str(sample / "day3.csv")]
    with pytest.raises(DataSourceError, match="no file matches"):
        input_files(str(sample / "*.tsv"))
    with pytest.raises(DataSourceError, match="does not exist"):
        input_files(str(sample / "nope"))


def test_the_checks_count_every_row_and_the_label_column_is_not_needed(sample, taxi_cfg, tmp_path):
    source = check_source(input_files(str(sample)), taxi_cfg, ("company",))
    assert source.rows == 60 and len(source.cut_points) == 3
    no_label = tmp_path / "no_label.csv"
    rows = (sample / "day1.csv").read_text().splitlines()
    no_label.write_text("\n".join(line.rsplit(",", 1)[0] for line in rows) + "\n")  # tips is the last column
    assert check_source([str(no_label)], taxi_cfg, ()).rows == 20


def test_a_malformed_line_is_named_by_file_and_line(sample, taxi_cfg):
    with (sample / "day2.csv").open("a") as handle:
        handle.write(",12.45,5,19,6,1400269500,extra\n")
    with pytest.raises(DataSourceError, match=r"day2\.csv, line 22: 7 fields where the header has 18"):
        check_source(input_files(str(sample)), taxi_cfg, ())


def test_a_value_of_the_wrong_type_is_named_by_file_line_and_column(sample, taxi_cfg):
    text = (sample / "day3.csv").read_text().splitlines()
    cells = text[5].split(",")
    cells[1] = "twelve"  # fare: FLOAT in the schema
    text[5] = ",".join(cells)
    (sample / "day3.csv").write_text("\n".join(text) + "\n")
    with pytest.raises(DataSourceError, match=r"day3\.csv, line 6, column 'fare': 'twelve' is not a number"):
        check_source(input_files(str(sample)), taxi_cfg, ())


def test_missing_model_columns_and_unknown_key_columns_are_named(sample, taxi_cfg, tmp_path):
    with pytest.raises(DataSourceError, match="--key-column 'trip_id' is not a column"):
        check_source([str(sample / "day1.csv")], taxi_cfg, ("trip_id",))
    lines = (sample / "day1.csv").read_text().splitlines()
    narrow = tmp_path / "narrow.csv"
    narrow.write_text("\n".join(line.split(",", 1)[1] for line in lines) + "\n")  # pickup_community_area dropped
    with pytest.raises(DataSourceError, match=r"lacks the model's input columns \['pickup_community_area'\]"):
        check_source([str(narrow)], taxi_cfg, ())


def test_a_long_cell_is_read_up_to_the_dataset_s_max_cell_chars_as_example_gen_reads_it(sample, taxi_cfg):
    text = (sample / "day1.csv").read_text().splitlines()
    header = text[0].split(",")
    cells = text[3].split(",")
    cells[header.index("company")] = "x" * 200_000  # past Python's own csv limit of 131,072
    text[3] = ",".join(cells)
    (sample / "day1.csv").write_text("\n".join(text) + "\n")
    assert check_source(input_files(str(sample)), taxi_cfg, ()).rows == 60  # the default: 1,048,576
    with pytest.raises(DataSourceError, match=r"day1\.csv, line 4: a value longer than 131,072 .* max_cell_chars"):
        check_source(input_files(str(sample)), taxi_cfg.replace(max_cell_chars=131_072), ())
